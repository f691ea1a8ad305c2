//! `fleet-perf ingest-throughput`: events per second through the ingest handler on DynamoDB
//! Local. Devices send concurrently, each one batch of 100 at a time (as a device would).

use fleet_testkit::api_event::ApiEvent;
use std::time::{Duration, Instant};

use serde_json::json;
use shared::model::ids::{DeviceId, DeviceType, UserId};
use shared::model::timestamp::Timestamp;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

const EVENT_TYPES: [&str; 3] = ["temperature", "humidity", "door"];

/// What one run measured.
#[derive(Debug)]
pub struct Throughput {
    /// Events acknowledged.
    pub events: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Handler latency per batch, sorted.
    pub batch_latencies: Vec<Duration>,
}

impl Throughput {
    /// Acknowledged events per second.
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile (0..=1) of batch latency ([`crate::stats`]: nearest rank).
    pub fn latency(&self, q: f64) -> Duration {
        crate::stats::quantile_duration(&self.batch_latencies, q)
    }
}

/// Registers `devices` devices and sends `batches` batches of 100 events from each.
pub async fn measure(
    table: &FleetTable,
    devices: usize,
    batches: usize,
) -> Result<Throughput, Box<dyn std::error::Error + Send + Sync>> {
    let owner = UserId::parse("bench-owner")?;
    let mut tokens = Vec::new();
    for d in 0..devices {
        let registered = register_device(
            table,
            &owner,
            DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
                device_id: DeviceId::parse(format!("bench-{d}"))?,
                name: format!("Bench {d}"),
                device_type: DeviceType::parse("thermostat")?,
                tags: Vec::new(),
            },
        )
        .await?;
        tokens.push(registered.token.reveal().to_string());
    }
    let ingestor = std::sync::Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    // One execution environment: the Router is built once, as the Lambda builds it.
    let gateway = shared::http::gateway::app(ingest::router(ingestor));
    let start = Instant::now();
    let now = Timestamp::now();
    let per_device = tokens.iter().enumerate().map(|(d, token)| {
        let gateway = &gateway;
        async move {
            let mut latencies = Vec::new();
            let mut accepted = 0;
            for b in 0..batches {
                let events: Vec<_> = (0..100)
                    .map(|i| {
                        let n = (b * 100 + i) as i64;
                        let kind = EVENT_TYPES[i % EVENT_TYPES.len()];
                        json!({"id": format!("b{b}-{i}"), "type": kind,
                               "value": n, "at": now.plus_seconds(-100_000 + n).to_string()})
                    })
                    .collect();
                let request = ApiEvent::new(
                    "POST /devices/{deviceId}/events",
                    format!("/devices/bench-{d}/events"),
                )
                .param("deviceId", &format!("bench-{d}"))
                .device_token(token)
                .json(&json!({ "events": events }))
                .to_request();
                let started = Instant::now();
                let response = gateway.handle(request).await;
                latencies.push(started.elapsed());
                if response.status() == 200 {
                    accepted += 100;
                }
            }
            (accepted, latencies)
        }
    });
    let results = futures_join(per_device).await;
    let elapsed = start.elapsed();
    let mut batch_latencies: Vec<Duration> = results.iter().flat_map(|(_, l)| l.clone()).collect();
    batch_latencies.sort();
    Ok(Throughput {
        events: results.iter().map(|(a, _)| a).sum(),
        elapsed,
        batch_latencies,
    })
}

/// Polls the devices' futures together on one task, as concurrent Lambdas would run.
async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    futures::future::join_all(futures).await
}
