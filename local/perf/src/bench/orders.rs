//! Ingest by arrival order (issue 38 item 12): the same readings, one a minute, reaching the
//! ingest bootstraps oldest first (a live device), newest first (a backfill after an outage),
//! shuffled (a gateway's buffer) and again (a replay of stored batches), 100 events a request
//! and one, each against the raw BatchWriteItem ceiling of the same items on the same
//! DynamoDB Local, without a CPU limit and under the CPU the ingest function's memory size
//! gets on Lambda. Late data is normal in IoT: its cost per event is put beside a live
//! device's.

use std::collections::BTreeMap;
use std::path::Path;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;
use serde_json::json;
use shared::model::timestamp::Timestamp;
use shared::FleetTable;

use super::bootstrap::{CpuLimit, Launch};
use super::common::BenchError;
use super::cpu_quota::{Controller, CpuShare};
use super::ingest::{self, RawShape, Throughput};
use fleet_testkit::reference::cases::events::ingest_request;
use fleet_testkit::template::Template;

/// The function measured.
const FUNCTION: &str = "IngestFunction";

/// The types the readings cycle through.
const TYPES: [&str; 3] = ["temperature", "humidity", "door"];

/// The order a device's readings reach ingest in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// A live device: one reading a minute, oldest first.
    OldestFirst,
    /// A backfill after an outage: the same readings, newest first.
    NewestFirst,
    /// A gateway's buffer: the same readings in a random order.
    Shuffled,
    /// The oldest-first requests sent again after they were stored: every reading a replay.
    Replay,
}

impl Order {
    /// Every order, live first.
    pub const ALL: [Order; 4] = [
        Order::OldestFirst,
        Order::NewestFirst,
        Order::Shuffled,
        Order::Replay,
    ];

    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            Order::OldestFirst => "oldest first (live)",
            Order::NewestFirst => "newest first (backfill)",
            Order::Shuffled => "shuffled",
            Order::Replay => "replay of stored requests",
        }
    }
}

/// What every device sends in one measurement.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Workload {
    /// The arrival order.
    pub order: Order,
    /// Events per request.
    pub events_per_request: usize,
    /// Timed requests per device.
    pub requests: usize,
}

impl Workload {
    /// Readings per device.
    fn readings(&self) -> usize {
        self.events_per_request * self.requests
    }

    /// The position (minutes from the start) of each reading, in arrival order.
    fn arrival(&self) -> Vec<usize> {
        let mut minutes: Vec<usize> = (0..self.readings()).collect();
        match self.order {
            Order::OldestFirst | Order::Replay => {}
            Order::NewestFirst => minutes.reverse(),
            Order::Shuffled => minutes.shuffle(&mut StdRng::seed_from_u64(38)),
        }
        minutes
    }

    /// The `n`-th request of `device` from the `arrival` order.
    fn request(
        &self,
        arrival: &[usize],
        from: Timestamp,
        device: &str,
        token: &str,
        n: usize,
    ) -> Vec<u8> {
        let per = self.events_per_request;
        let events = arrival[n * per..(n + 1) * per]
            .iter()
            .map(|&minute| reading(from, minute))
            .collect();
        ingest_request(device, token, events)
    }
}

/// The reading of minute `minute` from `from`: its id, type and value follow from the minute,
/// so a replay resends exactly what was stored.
fn reading(from: Timestamp, minute: usize) -> serde_json::Value {
    let offset = (minute as i64) * 60;
    json!({
        "id": format!("r{minute}"),
        "type": TYPES[minute % TYPES.len()],
        "value": 200.0 + (minute % 97) as f64 * 0.37,
        "at": from.plus_seconds(offset).to_string(),
    })
}

/// How much every workload sends (the bench's settings).
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Devices sending at once.
    pub devices: usize,
    /// Timed requests of 100 events per device (four times as many of one event).
    pub batches: usize,
    /// Rounds, Rust and the raw ceiling in turns.
    pub rounds: usize,
}

/// One workload under one CPU: the median rounds and every round.
#[derive(Clone, Debug, Serialize)]
pub struct OrderFigures {
    /// What was sent.
    pub workload: Workload,
    /// The memory size whose CPU share the bootstraps ran under; none: unlimited.
    pub memory_mb: Option<u32>,
    /// The Rust ingest bootstraps: the median round.
    pub rust: Throughput,
    /// The bare client writing the same event items: the median round.
    pub raw: Throughput,
    /// Every round, Rust then raw.
    pub rounds: Vec<(Throughput, Throughput)>,
}

impl OrderFigures {
    /// Rust's events/s over the raw ceiling's.
    pub fn of_ceiling(&self) -> f64 {
        self.rust.events_per_second / self.raw.events_per_second
    }

    /// The bootstraps' CPU milliseconds per event.
    pub fn cpu_ms_per_event(&self) -> f64 {
        self.rust.function_cpu_seconds.unwrap_or(0.0) * 1000.0 / self.rust.events.max(1) as f64
    }
}

/// Every order from `scale.devices` devices at once at 100 events a request
/// (`scale.batches` requests a device) and at one (4 x as many), `scale.rounds` rounds,
/// without a CPU limit and under the ingest function's memory size.
pub async fn measure<F, Fut>(
    template: &Template,
    binaries: &BTreeMap<String, String>,
    endpoint: &str,
    new_table: &F,
    scale: Scale,
    from: Timestamp,
    logs: &Path,
) -> Result<Vec<OrderFigures>, BenchError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<FleetTable, BenchError>>,
{
    let launch = Launch::bootstrap(&fleet_testkit::bootstrap::host_bootstrap(
        &binaries[FUNCTION],
    ));
    let memory_mb = template
        .function_definitions
        .get(FUNCTION)
        .map(|f| f.memory_mb)
        .ok_or_else(|| BenchError::Setup(format!("{FUNCTION} is not in the template")))?;
    let limits: Vec<Option<CpuLimit>> = match Controller::detect() {
        Ok(controller) => vec![
            None,
            Some(CpuLimit {
                controller,
                share: CpuShare {
                    memory_mb,
                    period: super::power::PERIOD,
                },
            }),
        ],
        Err(err) => {
            eprintln!("bench: orders without the CPU model: {err}");
            vec![None]
        }
    };
    let bare =
        aws_sdk_dynamodb::Client::new(&fleet_testkit::stack::local_sdk_config(endpoint).await);
    let env = |table: &str| {
        super::common::function_environments(template, endpoint, table)
            .map(|mut all| all.remove(FUNCTION).unwrap_or_default())
    };
    let Scale {
        devices,
        batches,
        rounds,
    } = scale;
    let mut figures = Vec::new();
    for limit in &limits {
        for (events_per_request, requests) in [(100, batches), (1, 4 * batches)] {
            for order in Order::ALL {
                let workload = Workload {
                    order,
                    events_per_request,
                    requests,
                };
                let arrival = workload.arrival();
                let tag = format!(
                    "{}-{}-{}",
                    limit.as_ref().map_or(0, |l| l.share.memory_mb),
                    events_per_request,
                    serde_json::to_value(order)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                );
                let warm = |device: &str, token: &str| match order {
                    // The replay's warm-up stores what it then sends again.
                    Order::Replay => (0..requests)
                        .map(|n| workload.request(&arrival, from, device, token, n))
                        .collect(),
                    _ => vec![ingest_request(
                        device,
                        token,
                        vec![json!({"id": "warm", "type": TYPES[0], "value": 1,
                                     "at": from.plus_seconds(-86_400).to_string()})],
                    )],
                };
                let request = |device: &str, token: &str, n: usize| {
                    workload.request(&arrival, from, device, token, n)
                };
                let rust = |name: String| {
                    let (warm, request) = (&warm, &request);
                    let launch = &launch;
                    async move {
                        let table = new_table(name.clone()).await?;
                        let registered = ingest::register(&table, devices).await?;
                        let measured = ingest::send_from_processes(
                            launch,
                            FUNCTION,
                            &env(table.name())?,
                            &registered,
                            &logs.join(&name),
                            limit.as_ref(),
                            warm,
                            request,
                            requests,
                            events_per_request,
                        )
                        .await?;
                        Ok::<_, BenchError>((table, measured))
                    }
                };
                // An untimed run first: the raw client writes the items it stored.
                let (source, _) = rust(format!("orders-{tag}-source")).await?;
                let shape = RawShape {
                    per_request: events_per_request,
                    warm: if order == Order::Replay { 0 } else { 1 },
                    replay: order == Order::Replay,
                };
                let mut measured = Vec::new();
                for round in 0..rounds {
                    let raw_first = round % 2 == 1;
                    let raw = |round| {
                        let bare = &bare;
                        let source = source.name().to_string();
                        let target = format!("orders-{tag}-{round}-raw");
                        async move {
                            new_table(target.clone()).await?;
                            ingest::raw_ceiling_of(bare, &source, &target, shape).await
                        }
                    };
                    let (rust, raw) = if raw_first {
                        let raw = raw(round).await?;
                        (rust(format!("orders-{tag}-{round}-rust")).await?.1, raw)
                    } else {
                        let (_, rust) = rust(format!("orders-{tag}-{round}-rust")).await?;
                        (rust, raw(round).await?)
                    };
                    eprintln!(
                        "bench:   {tag} round {round}: rust {:.0}, raw {:.0} events/s ({:.2})",
                        rust.events_per_second,
                        raw.events_per_second,
                        rust.events_per_second / raw.events_per_second
                    );
                    measured.push((rust, raw));
                }
                figures.push(OrderFigures {
                    workload,
                    memory_mb: limit.as_ref().map(|l| l.share.memory_mb),
                    rust: ingest::median_run(measured.iter().map(|(r, _)| r))?,
                    raw: ingest::median_run(measured.iter().map(|(_, r)| r))?,
                    rounds: measured,
                });
            }
        }
    }
    Ok(figures)
}

/// The table of [`measure`]'s figures (Markdown), with each order's CPU per event beside the
/// live order's of the same request size and CPU.
pub fn markdown(figures: &[OrderFigures]) -> String {
    let mut out = String::from(
        "| order | events a request | CPU | Rust events/s | raw events/s | Rust / raw | Rust CPU ms per event | CPU per event / live's |\n|---|---|---|---|---|---|---|---|\n",
    );
    for f in figures {
        let live = figures.iter().find(|l| {
            l.workload.order == Order::OldestFirst
                && l.workload.events_per_request == f.workload.events_per_request
                && l.memory_mb == f.memory_mb
        });
        let vs_live = live.map_or("-".to_string(), |l| {
            format!("{:.2}", f.cpu_ms_per_event() / l.cpu_ms_per_event())
        });
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.0} | **{:.2}** | {:.3} | {} |\n",
            f.workload.order.label(),
            f.workload.events_per_request,
            f.memory_mb
                .map_or("unlimited".to_string(), |m| format!("{m} MB's share")),
            f.rust.events_per_second,
            f.raw.events_per_second,
            f.of_ceiling(),
            f.cpu_ms_per_event(),
            vs_live
        ));
    }
    out
}
