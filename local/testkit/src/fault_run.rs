//! Driving the functions through the fault proxy ([`crate::fault_proxy`]) and checking what
//! they acknowledged against what DynamoDB Local holds. Used by `tests/it/faults.rs` and by
//! `fleet-perf fault-run` (`make fault-run`), which records the figures in
//! `docs/reliability.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use lambda_http::Request;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use shared::model::entities::EntityType;
use shared::model::ids::{DeviceId, DeviceType, UserId};
use shared::model::timestamp::Timestamp;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

use crate::api_event::ApiEvent;
use crate::fault_proxy::{through_proxy, ClientTimeouts};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The API Gateway event of `POST /devices/{device}/events`.
pub fn ingest_request(device: &str, token: &str, events: &[Value]) -> Request {
    ApiEvent::new(
        "POST /devices/{deviceId}/events",
        format!("/devices/{device}/events"),
    )
    .param("deviceId", device)
    .device_token(token)
    .json(&json!({ "events": events }))
    .to_request()
}

/// The shape of an ingest run.
#[derive(Clone, Copy, Debug)]
pub struct IngestLoad {
    /// Devices sending concurrently.
    pub devices: usize,
    /// Senders per device (separate warm Lambdas, each with its own caches), concurrently.
    pub senders: usize,
    /// Batches each sender sends, one after the other.
    pub batches: usize,
    /// Events per batch (1..=100).
    pub events: usize,
    /// Resends of one batch before the device gives up on it.
    pub max_rounds: usize,
}

/// What an ingest run saw from the API.
#[derive(Clone, Debug, Default)]
pub struct IngestRun {
    /// Event ids sent, by device.
    pub sent: BTreeMap<String, BTreeSet<String>>,
    /// Event ids the API acknowledged (200 `eventIds`, or 503 `accepted`), by device.
    pub acked: BTreeMap<String, BTreeSet<String>>,
    /// Answers by status.
    pub answers: BTreeMap<u16, u64>,
    /// Answers that broke the contract, with what was wrong.
    pub violations: Vec<String>,
    /// Partial answers (503 naming accepted and failed ids).
    pub partial_answers: u64,
    /// Ids named as failed in a partial answer.
    pub named_failed: u64,
    /// Requests sent, resends included.
    pub requests: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// What the proxy injected (filled in by the caller that owns the proxy).
    pub stats: crate::fault_proxy::ProxyStats,
}

impl IngestRun {
    /// Events sent in all.
    pub fn sent_count(&self) -> usize {
        self.sent.values().map(BTreeSet::len).sum()
    }

    /// Events acknowledged in all.
    pub fn acked_count(&self) -> usize {
        self.acked.values().map(BTreeSet::len).sum()
    }
}

fn ids_of(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Registers `load.devices` devices (through `clean`, without faults) owned by `owner`, then
/// sends every batch through the ingest handler on `faulty`, resending as a device would: the
/// ids a partial answer names as failed, or the whole batch after a 503/429. Every answer is
/// checked against the contract as it arrives; violations are collected, not panicked on.
pub async fn drive_ingest(
    clean: &FleetTable,
    faulty: &FleetTable,
    config: IngestConfig,
    owner: &str,
    load: IngestLoad,
) -> Result<IngestRun, Error> {
    let owner = UserId::parse(owner)?;
    let mut tokens = Vec::new();
    for d in 0..load.devices {
        let device = format!("fault-{d}");
        let registered = register_device(
            clean,
            &owner,
            DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
                device_id: DeviceId::parse(&device)?,
                name: format!("Faulty {d}"),
                device_type: DeviceType::parse("thermostat")?,
                tags: Vec::new(),
            },
        )
        .await?;
        tokens.push((device, registered.token.reveal().to_string()));
    }
    let started = Instant::now();
    let now = Timestamp::now();
    let config = &config;
    let senders = tokens.iter().flat_map(|(device, token)| {
        (0..load.senders).map(move |sender| {
            let ingestor = Ingestor::new(faulty.clone(), config.clone());
            send_batches(ingestor, device.clone(), token.clone(), sender, load, now)
        })
    });
    let mut run = IngestRun::default();
    for part in futures::future::join_all(senders).await {
        let (device, sent, acked, answers, violations, partial, named, requests) = part;
        run.sent.entry(device.clone()).or_default().extend(sent);
        run.acked.entry(device).or_default().extend(acked);
        for (status, n) in answers {
            *run.answers.entry(status).or_default() += n;
        }
        run.violations.extend(violations);
        run.partial_answers += partial;
        run.named_failed += named;
        run.requests += requests;
    }
    run.elapsed = started.elapsed();
    Ok(run)
}

type SenderResult = (
    String,
    BTreeSet<String>,
    BTreeSet<String>,
    BTreeMap<u16, u64>,
    Vec<String>,
    u64,
    u64,
    u64,
);

async fn send_batches(
    ingestor: Ingestor,
    device: String,
    token: String,
    sender: usize,
    load: IngestLoad,
    now: Timestamp,
) -> SenderResult {
    // One sender, one execution environment: the Router (holding its ingestor by `Arc`) is
    // built once, as the Lambda builds it.
    let gateway = shared::http::gateway::app(ingest::router(std::sync::Arc::new(ingestor)));
    let mut sent = BTreeSet::new();
    let mut acked = BTreeSet::new();
    let mut answers = BTreeMap::new();
    let mut violations = Vec::new();
    let (mut partial, mut named, mut requests) = (0, 0, 0);
    // Seeded per sender: a run's resend pauses are the same every time.
    let mut pauses = StdRng::seed_from_u64(sender as u64);
    for b in 0..load.batches {
        let mut pending: BTreeMap<String, Value> = (0..load.events)
            .map(|i| {
                let id = format!("s{sender}-b{b}-e{i}");
                // Distinct times across senders and batches, all in the last few hours.
                let n = ((sender * load.batches + b) * load.events + i) as i64;
                let kind = ["temperature", "humidity"][i % 2];
                let event = json!({"id": id, "type": kind,
                    "value": n, "at": now.plus_seconds(-20_000 + n).to_string()});
                (id, event)
            })
            .collect();
        sent.extend(pending.keys().cloned());
        for round in 0..load.max_rounds {
            if pending.is_empty() {
                break;
            }
            if round > 0 {
                // Not the full Retry-After: a test has no second to spare per resend.
                tokio::time::sleep(Duration::from_millis(pauses.random_range(0..50))).await;
            }
            let events: Vec<Value> = pending.values().cloned().collect();
            requests += 1;
            let response = gateway
                .handle(ingest_request(&device, &token, &events))
                .await;
            let status = response.status().as_u16();
            *answers.entry(status).or_default() += 1;
            let retry_after = response.headers().contains_key("retry-after");
            let body: Value =
                serde_json::from_slice(response.body().as_ref()).unwrap_or(Value::Null);
            let wanted: BTreeSet<String> = pending.keys().cloned().collect();
            let mut violation = |what: &str| {
                violations.push(format!(
                    "{device} batch {b} round {round}: {status} {what}: {body}"
                ))
            };
            match status {
                200 => match ids_of(&body["eventIds"]) {
                    Some(ids) if ids.iter().cloned().collect::<BTreeSet<_>>() == wanted => {
                        acked.extend(ids);
                        pending.clear();
                    }
                    _ => violation("200 whose eventIds are not the batch"),
                },
                503 if body.get("failed").is_some() => {
                    partial += 1;
                    let (Some(ok), Some(failed)) =
                        (ids_of(&body["accepted"]), ids_of(&body["failed"]))
                    else {
                        violation("partial answer without id lists");
                        continue;
                    };
                    let ok_set: BTreeSet<String> = ok.iter().cloned().collect();
                    let failed_set: BTreeSet<String> = failed.iter().cloned().collect();
                    let union: BTreeSet<String> = ok_set.union(&failed_set).cloned().collect();
                    if !retry_after {
                        violation("partial answer without Retry-After");
                    } else if !ok_set.is_disjoint(&failed_set) || union != wanted {
                        violation("accepted and failed are not a split of the batch");
                    } else {
                        named += failed_set.len() as u64;
                        acked.extend(ok_set);
                        pending.retain(|id, _| failed_set.contains(id));
                    }
                }
                429 | 503 if retry_after && body["error"]["code"].is_string() => {}
                _ => violation("is not 200, a partial 503, or 429/503 with Retry-After"),
            }
        }
    }
    (
        device, sent, acked, answers, violations, partial, named, requests,
    )
}

/// Every event item in the table (read directly, not through the proxy): for each device,
/// how many items carry each event id, and the item's `at`.
pub async fn stored_events(
    table: &FleetTable,
) -> Result<BTreeMap<String, BTreeMap<String, Vec<String>>>, Error> {
    let mut stored: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let items = crate::pricing::snapshot(table).await?;
    for item in items
        .values()
        .filter(|i| EntityType::of(i) == Some(EntityType::Event))
    {
        let text = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        stored
            .entry(text("deviceId"))
            .or_default()
            .entry(text("id"))
            .or_default()
            .push(text("at"));
    }
    Ok(stored)
}

/// The comparison of an ingest run with the table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestAudit {
    /// Acknowledged events stored exactly once.
    pub acked_stored_once: usize,
    /// Acknowledged events not stored.
    pub lost: Vec<String>,
    /// Events stored more than once.
    pub duplicated: Vec<String>,
    /// Stored events that were never sent.
    pub unexpected: Vec<String>,
    /// Stored but never acknowledged (the device gave up resending them).
    pub stored_unacked: usize,
    /// Distinct events stored.
    pub stored: usize,
}

/// Compares what `run` acknowledged with what `table` holds.
pub async fn audit_ingest(table: &FleetTable, run: &IngestRun) -> Result<IngestAudit, Error> {
    let stored = stored_events(table).await?;
    let mut audit = IngestAudit::default();
    for (device, ids) in &stored {
        for (id, copies) in ids {
            audit.stored += 1;
            if copies.len() != 1 {
                audit
                    .duplicated
                    .push(format!("{device}/{id} x{}", copies.len()));
            }
            if !run.sent.get(device).is_some_and(|s| s.contains(id)) {
                audit.unexpected.push(format!("{device}/{id}"));
            } else if !run.acked.get(device).is_some_and(|a| a.contains(id)) {
                audit.stored_unacked += 1;
            }
        }
    }
    for (device, ids) in &run.acked {
        for id in ids {
            match stored.get(device).and_then(|s| s.get(id)) {
                Some(copies) if copies.len() == 1 => audit.acked_stored_once += 1,
                Some(_) => {}
                None => audit.lost.push(format!("{device}/{id}")),
            }
        }
    }
    Ok(audit)
}

/// One `fleet-perf fault-run` line: an ingest run at `rate` (spread over every fault kind)
/// with `seed`, on a fresh table, checked against the table.
pub async fn ingest_fault_run(
    dynamodb_endpoint: &str,
    definition: &crate::template::TableDefinition,
    seed: u64,
    rate: f64,
    load: IngestLoad,
) -> Result<String, Error> {
    use crate::fault_proxy::{FaultProxy, FaultRates, ProxyConfig};
    let name = format!("fault-run-{seed}");
    let table = crate::stack::local_table(dynamodb_endpoint, &name).await;
    // Nothing reads the stream in a fault run (see `TableDefinition::without_stream`).
    crate::stack::create_table(&table.client, &definition.without_stream(), &name).await?;
    let config = ProxyConfig::new(seed, FaultRates::uniform(rate));
    let proxy = FaultProxy::start(dynamodb_endpoint, config.clone()).await?;
    let faulty = through_proxy(&table, proxy.endpoint(), ClientTimeouts::default()).await;
    let ingest = IngestConfig {
        retry_window: Duration::from_secs(2),
        ..IngestConfig::default()
    };
    let run = drive_ingest(&table, &faulty, ingest, "fault-run-owner", load).await?;
    proxy.set_enabled(false);
    // Requests the proxy delayed land before the table is read.
    tokio::time::sleep(config.delay + Duration::from_millis(500)).await;
    let stats = proxy.stats();
    let audit = audit_ingest(&table, &run).await?;
    let list = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let faults: BTreeMap<String, u64> = stats
        .faults
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    let answers: BTreeMap<String, u64> = run
        .answers
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    Ok(format!(
        "| {seed} | {:.0}% | {} | {} | {} | {} | {} | {} | {} ({} partial, {} ids named failed) | {} of {} | {} | {:.1} s |",
        rate * 100.0,
        run.sent_count(),
        run.acked_count(),
        audit.stored,
        audit.lost.len(),
        audit.duplicated.len(),
        run.violations.len(),
        list(&answers),
        run.partial_answers,
        run.named_failed,
        stats.total_faults(),
        stats.total_requests(),
        list(&faults),
        run.elapsed.as_secs_f64(),
    ))
}

/// The header of [`ingest_fault_run`]'s lines.
pub const FAULT_RUN_HEADER: &str = "| seed | fault rate | events sent | acked | stored | lost | duplicated | contract violations | API answers by status | DynamoDB requests faulted | faults by kind | time |\n|---|---|---|---|---|---|---|---|---|---|---|---|";
