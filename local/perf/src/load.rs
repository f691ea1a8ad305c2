//! A bounded load test of the local stack: DynamoDB Local, the demo data plus load devices,
//! and the dev server on a loopback port, driven by a fixed number of concurrent HTTP clients
//! for a fixed duration. The traffic mixes device ingestion (batches with device tokens) and
//! dashboard reads (with tokens of the dev server's stand-in JWT authorizer). Reports the
//! sustained request rate, latency percentiles per kind and errors by status.
//!
//! Only 127.0.0.1 is ever addressed, and every loop stops at the deadline.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use shared::model::ids::{DeviceId, DeviceType, Tag, UserId};
use shared::model::timestamp::Timestamp;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::FleetTable;

use fleet_dev::dev_server::{serve, DevServer};
use fleet_testkit::template::Template;

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// How long to send requests.
    pub duration: Duration,
    /// Concurrent clients, each sending one request at a time.
    pub concurrency: usize,
    /// Devices sending events (each with its own token, owned by one load user).
    pub devices: usize,
    /// Events per ingest batch.
    pub batch: usize,
    /// Of every 10 requests, how many are ingest batches (the rest are dashboard reads).
    pub ingest_per_10: usize,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(30),
            concurrency: 16,
            devices: 16,
            batch: 10,
            ingest_per_10: 5,
        }
    }
}

/// The kinds of request sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `POST /devices/{id}/events`, a batch with the device's token.
    Ingest,
    /// `GET /me/dashboard`.
    Dashboard,
    /// `GET /me/devices`.
    Devices,
    /// `GET /me/devices/{id}/events?limit=20`.
    DeviceEvents,
    /// `GET /me/events?limit=20`.
    MyEvents,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ingest => "POST /devices/{deviceId}/events",
            Kind::Dashboard => "GET /me/dashboard",
            Kind::Devices => "GET /me/devices",
            Kind::DeviceEvents => "GET /me/devices/{deviceId}/events",
            Kind::MyEvents => "GET /me/events",
        }
    }
}

/// Latencies and statuses of one kind of request.
#[derive(Clone, Debug, Default)]
pub struct KindStats {
    /// Latency of every completed request.
    pub latencies: Vec<Duration>,
    /// Answers by HTTP status; 0 counts transport failures.
    pub statuses: BTreeMap<u16, usize>,
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct LoadReport {
    /// The configuration run.
    pub config: LoadConfig,
    /// Wall time from the first request to the last answer.
    pub elapsed: Duration,
    /// Per kind.
    pub kinds: BTreeMap<Kind, KindStats>,
    /// Events acknowledged by ingest answers (200s).
    pub events_acknowledged: usize,
}

impl LoadReport {
    /// Requests answered (any status).
    pub fn requests(&self) -> usize {
        self.kinds.values().map(|k| k.latencies.len()).sum()
    }

    /// Answers that were not 2xx, plus transport failures (status 0), by status.
    pub fn errors(&self) -> BTreeMap<u16, usize> {
        let mut errors = BTreeMap::new();
        for stats in self.kinds.values() {
            for (status, n) in &stats.statuses {
                if !(200..300).contains(status) {
                    *errors.entry(*status).or_default() += n;
                }
            }
        }
        errors
    }

    /// Sustained requests per second over the run.
    pub fn requests_per_second(&self) -> f64 {
        self.requests() as f64 / self.elapsed.as_secs_f64()
    }

    /// Latency percentile `q` over all requests, or one kind.
    pub fn latency(&self, kind: Option<Kind>, q: f64) -> Duration {
        let all: Vec<Duration> = self
            .kinds
            .iter()
            .filter(|(k, _)| kind.is_none_or(|want| **k == want))
            .flat_map(|(_, s)| s.latencies.iter().copied())
            .collect();
        crate::stats::quantile_duration(&all, q)
    }

    /// The report as text.
    pub fn render(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut out = format!(
            "load on 127.0.0.1 ({} build): {} clients for {:.1} s, {} devices x {}-event batches, {}/10 ingest\n\
             {} requests, {:.0} requests/s sustained, {} events acknowledged ({:.0} events/s)\n\
             latency p50 {:.1} ms, p99 {:.1} ms; errors by status: {:?}\n",
            if cfg!(debug_assertions) { "debug" } else { "release" },
            self.config.concurrency,
            self.elapsed.as_secs_f64(),
            self.config.devices,
            self.config.batch,
            self.config.ingest_per_10,
            self.requests(),
            self.requests_per_second(),
            self.events_acknowledged,
            self.events_acknowledged as f64 / self.elapsed.as_secs_f64(),
            ms(self.latency(None, 0.5)),
            ms(self.latency(None, 0.99)),
            self.errors(),
        );
        for (kind, stats) in &self.kinds {
            out.push_str(&format!(
                "  {:<34} {:>7} requests  p50 {:>7.1} ms  p99 {:>7.1} ms  statuses {:?}\n",
                kind.name(),
                stats.latencies.len(),
                ms(self.latency(Some(*kind), 0.5)),
                ms(self.latency(Some(*kind), 0.99)),
                stats.statuses,
            ));
        }
        out
    }
}

/// The user who owns the load devices.
const LOAD_USER: &str = "load-user";

/// Registers the load devices on `table` (through the same operation as the API) and returns
/// `(deviceId, token)` pairs.
async fn load_devices(
    table: &FleetTable,
    count: usize,
) -> Result<Vec<(String, String)>, shared::FleetError> {
    let user = UserId::parse(LOAD_USER)?;
    let mut devices = Vec::with_capacity(count);
    for i in 0..count {
        let id = format!("load-{i:03}");
        let registered = register_device(
            table,
            &user,
            DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
                device_id: DeviceId::parse(&id)?,
                name: format!("Load device {i}"),
                device_type: DeviceType::parse("thermostat")?,
                tags: vec![Tag::parse(if i % 2 == 0 { "even" } else { "odd" })?],
            },
        )
        .await?;
        devices.push((id, registered.token.reveal().to_string()));
    }
    Ok(devices)
}

/// Runs the load on `table` (which should hold the demo data): starts the dev server on a free
/// loopback port, sends traffic for `config.duration`, stops the server.
pub async fn run(
    template: &Template,
    table: &FleetTable,
    config: LoadConfig,
) -> Result<LoadReport, Box<dyn std::error::Error + Send + Sync>> {
    let devices = Arc::new(load_devices(table, config.devices).await?);
    let server = Arc::new(DevServer::new(template, table));
    let readers: Arc<Vec<String>> = Arc::new(
        [LOAD_USER, "demo-alice", "demo-bob"]
            .iter()
            .map(|sub| {
                server
                    .authorizer
                    .issue(sub, &format!("{sub}@example.com"), false)
            })
            .collect(),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_task = tokio::spawn(serve(listener, server, async {
        let _ = stopped.await;
    }));

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(config.concurrency)
        .build()?;
    let started = Instant::now();
    let deadline = started + config.duration;
    let workers = (0..config.concurrency).map(|worker| {
        let http = http.clone();
        let url = url.clone();
        let devices = devices.clone();
        let readers = readers.clone();
        let config = config.clone();
        tokio::spawn(async move {
            let mut kinds: BTreeMap<Kind, KindStats> = BTreeMap::new();
            let mut acknowledged = 0usize;
            let mut n = 0usize;
            while Instant::now() < deadline {
                // A fixed, interleaved mix: the first `ingest_per_10` of every 10 are batches.
                let slot = (n + worker) % 10;
                let kind = if slot < config.ingest_per_10 {
                    Kind::Ingest
                } else {
                    [
                        Kind::Dashboard,
                        Kind::Devices,
                        Kind::DeviceEvents,
                        Kind::MyEvents,
                    ][slot % 4]
                };
                let reader = &readers[(n + worker) % readers.len()];
                let device = &devices[(n * config.concurrency + worker) % devices.len()];
                let request = match kind {
                    Kind::Ingest => {
                        let now = Timestamp::now();
                        let events: Vec<_> = (0..config.batch)
                            .map(|i| {
                                let kind = ["temperature", "humidity"][i % 2];
                                json!({"id": format!("w{worker}-{n}-{i}"), "type": kind,
                                       "value": (n + i) as f64 / 10.0,
                                       "at": now.plus_seconds(-(i as i64)).to_string()})
                            })
                            .collect();
                        http.post(format!("{url}/devices/{}/events", device.0))
                            .bearer_auth(&device.1)
                            .json(&json!({ "events": events }))
                    }
                    Kind::Dashboard => http.get(format!("{url}/me/dashboard")).bearer_auth(reader),
                    Kind::Devices => http.get(format!("{url}/me/devices")).bearer_auth(reader),
                    Kind::DeviceEvents => http
                        .get(format!("{url}/me/devices/{}/events?limit=20", device.0))
                        .bearer_auth(&readers[0]),
                    Kind::MyEvents => http
                        .get(format!("{url}/me/events?limit=20"))
                        .bearer_auth(reader),
                };
                let sent = Instant::now();
                let status = match request.send().await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let _ = response.bytes().await;
                        status
                    }
                    Err(_) => 0,
                };
                let stats = kinds.entry(kind).or_default();
                stats.latencies.push(sent.elapsed());
                *stats.statuses.entry(status).or_default() += 1;
                if kind == Kind::Ingest && status == 200 {
                    acknowledged += config.batch;
                }
                n += 1;
            }
            (kinds, acknowledged)
        })
    });
    let results = futures::future::join_all(workers).await;
    let elapsed = started.elapsed();
    let _ = stop.send(());
    let _ = server_task.await;

    let mut kinds: BTreeMap<Kind, KindStats> = BTreeMap::new();
    let mut events_acknowledged = 0;
    for result in results {
        let (worker_kinds, acknowledged) = result?;
        events_acknowledged += acknowledged;
        for (kind, stats) in worker_kinds {
            let total = kinds.entry(kind).or_default();
            total.latencies.extend(stats.latencies);
            for (status, n) in stats.statuses {
                *total.statuses.entry(status).or_default() += n;
            }
        }
    }
    Ok(LoadReport {
        config,
        elapsed,
        kinds,
        events_acknowledged,
    })
}
