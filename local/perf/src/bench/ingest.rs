//! Ingest throughput: the same batches of 100 events sent by `devices` devices at once (each
//! one batch at a time, as a device does), through the ingest release bootstraps (one warm
//! process per device, as concurrent Lambdas), through the Python peer the same way, and the
//! raw BatchWriteItem ceiling of the same DynamoDB Local: exactly the items the Rust handler
//! stored, written by a bare SDK client (no handler, no metering) with the same concurrency:
//! per device one batch at a time, its 4 chunks of 25 at once, asking for the consumed
//! capacity as every handler request does (DynamoDB Local spends real CPU on it: the same
//! items without it went 3,883 events/s against 3,128 with it, `fleet-perf bench-ingest`).

use shared::model::entities::EntityType;
use shared::model::expression::{Condition, Expressions};
use shared::model::schema::Item;
use shared::store::with_expressions::WithExpressions;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, ReturnConsumedCapacity, WriteRequest};
use serde::Serialize;
use shared::model::ids::{DeviceId, DeviceType, UserId};
use shared::model::timestamp::Timestamp;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::FleetTable;

use super::bootstrap::{CpuLimit, Launch, RunningBootstrap};
use super::common::{process_cpu_seconds, BenchError, Latency};
use fleet_testkit::reference::cases::events::ingest_event;

/// Owner of the throughput devices.
const OWNER: &str = "tp-owner";

/// One contender's run.
#[derive(Clone, Debug, Serialize)]
pub struct Throughput {
    /// Events stored (acknowledged with 200 for the handlers).
    pub events: usize,
    /// Wall time of the timed batches.
    pub seconds: f64,
    /// `events / seconds`.
    pub events_per_second: f64,
    /// Latency of one 100-event batch.
    pub batch_ms: Latency,
    /// CPU seconds the function processes used (user + system), when they are processes.
    pub function_cpu_seconds: Option<f64>,
    /// CPU seconds of this benchmark process during the timed batches (it runs the Runtime
    /// APIs, or is the bare client).
    pub driver_cpu_seconds: f64,
}

/// One round of the three contenders.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Round {
    /// The Rust ingest bootstraps.
    pub rust: Option<Throughput>,
    /// The bare client.
    pub raw: Option<Throughput>,
    /// The Python peer.
    pub python: Option<Throughput>,
}

/// Registered devices and their tokens.
pub type Devices = Vec<(String, String)>;

/// Registers `devices` devices (`tp-0`, `tp-1`...) on the empty `table`.
pub async fn register(table: &FleetTable, devices: usize) -> Result<Devices, BenchError> {
    let ids: Vec<String> = (0..devices).map(|d| format!("tp-{d}")).collect();
    register_named(table, &ids).await
}

/// Registers the devices `ids`, of one owner, on `table`.
pub async fn register_named<S: AsRef<str>>(
    table: &FleetTable,
    ids: &[S],
) -> Result<Devices, BenchError> {
    let owner = UserId::parse(OWNER).map_err(BenchError::setup)?;
    let mut out = Vec::new();
    for id in ids {
        let id = id.as_ref();
        let registered = register_device(
            table,
            &owner,
            DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
                device_id: DeviceId::parse(id).map_err(BenchError::setup)?,
                name: format!("Bench {id}"),
                device_type: DeviceType::parse("thermostat").map_err(BenchError::setup)?,
                tags: Vec::new(),
            },
        )
        .await
        .map_err(BenchError::setup)?;
        out.push((id.to_string(), registered.token.reveal().to_string()));
    }
    Ok(out)
}

/// Starts one `launch` process per device (its environment `env`), warms each with one
/// untimed batch, then sends `batches` batches from every device at once.
pub async fn through_processes(
    launch: &Launch,
    function: &str,
    env: &BTreeMap<String, String>,
    devices: &Devices,
    batches: usize,
    from: Timestamp,
    logs: &Path,
) -> Result<Throughput, BenchError> {
    let warm = |device: &str, token: &str| vec![ingest_event(device, token, "w", from, 0)];
    let request = |device: &str, token: &str, b: usize| {
        ingest_event(device, token, &format!("b{b}"), from, b + 1)
    };
    send_from_processes(
        launch, function, env, devices, logs, None, &warm, &request, batches, 100,
    )
    .await
}

/// Builds the untimed requests a device sends before the timed ones (its warm-up).
pub type WarmUp<'a> = dyn Fn(&str, &str) -> Vec<Vec<u8>> + Sync + 'a;
/// Builds a device's `n`-th timed request from its id and token.
pub type Request<'a> = dyn Fn(&str, &str, usize) -> Vec<u8> + Sync + 'a;

/// Starts one `launch` process per device (its environment `env`; under `cpu` when given,
/// from its first poll on), sends each device's `warm` requests untimed, then `requests`
/// timed requests of `events_per_request` events from every device at once, each device one
/// at a time.
#[allow(clippy::too_many_arguments)]
pub async fn send_from_processes(
    launch: &Launch,
    function: &str,
    env: &BTreeMap<String, String>,
    devices: &Devices,
    logs: &Path,
    cpu: Option<&CpuLimit>,
    warm: &WarmUp<'_>,
    request: &Request<'_>,
    requests: usize,
    events_per_request: usize,
) -> Result<Throughput, BenchError> {
    let timeout = Duration::from_secs(30);
    let mut processes = Vec::new();
    for (d, (device, token)) in devices.iter().enumerate() {
        let log = logs.join(format!("throughput-{function}-{d}.log"));
        let mut process = RunningBootstrap::launch_limited(launch, function, env, &log, cpu)
            .await
            .map_err(|e| BenchError::process(function, e))?;
        for event in warm(device, token) {
            let warm = process
                .invoke(&event, timeout)
                .await
                .map_err(|e| BenchError::process(function, e))?;
            expect_200(function, "warm-up request", &warm.outcome)?;
        }
        processes.push((device.clone(), token.clone(), process));
    }
    let cpu_before: f64 = processes
        .iter()
        .filter_map(|(_, _, p)| p.cpu_seconds())
        .sum();
    let driver_before = process_cpu_seconds();
    let started = Instant::now();
    let runs = futures::future::join_all(processes.iter_mut().map(
        |(device, token, process)| async move {
            let mut latencies = Vec::with_capacity(requests);
            for n in 0..requests {
                let event = request(device, token, n);
                let invocation = process
                    .invoke(&event, timeout)
                    .await
                    .map_err(|e| BenchError::process(function, e))?;
                expect_200(
                    function,
                    &format!("{device} request {n}"),
                    &invocation.outcome,
                )?;
                latencies.push(invocation.latency.as_secs_f64() * 1000.0);
            }
            Ok::<_, BenchError>(latencies)
        },
    ))
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let driver_cpu_seconds = process_cpu_seconds() - driver_before;
    let cpu_after: f64 = processes
        .iter()
        .filter_map(|(_, _, p)| p.cpu_seconds())
        .sum();
    for (_, _, process) in processes {
        process.stop().await;
    }
    let mut latencies = Vec::new();
    for run in runs {
        latencies.extend(run?);
    }
    let events = latencies.len() * events_per_request;
    Ok(Throughput {
        events,
        seconds,
        events_per_second: events as f64 / seconds,
        batch_ms: Latency::of(&latencies),
        function_cpu_seconds: Some(cpu_after - cpu_before),
        driver_cpu_seconds,
    })
}

/// The run with the median events/s (the lower middle of an even count).
pub fn median_run<'a>(
    runs: impl Iterator<Item = &'a Throughput>,
) -> Result<Throughput, BenchError> {
    let mut runs: Vec<&Throughput> = runs.collect();
    runs.sort_by(|a, b| a.events_per_second.total_cmp(&b.events_per_second));
    runs.get(runs.len().saturating_sub(1) / 2)
        .map(|t| (*t).clone())
        .ok_or_else(|| BenchError::Setup("no ingest round ran".into()))
}

fn expect_200(
    function: &str,
    what: &str,
    outcome: &fleet_testkit::outcome::Outcome,
) -> Result<(), BenchError> {
    if outcome.status() == 200 {
        return Ok(());
    }
    Err(BenchError::Status {
        what: format!("{function}: {what}"),
        expected: 200,
        got: outcome.status(),
        outcome: format!("{outcome:?}"),
    })
}

/// Every event item of `table`, grouped by partition (device) in sort-key order.
async fn stored_events(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<BTreeMap<String, Vec<Item>>, BenchError> {
    let mut by_device: BTreeMap<String, Vec<Item>> = BTreeMap::new();
    let mut pages = client
        .scan()
        .table_name(table)
        .expressions({
            let (entity_type, event) = EntityType::Event.assignment();
            Expressions::builder()
                .condition(Condition::equals(entity_type, event))
                .build()
        })
        .into_paginator()
        .items()
        .send();
    while let Some(item) = pages.next().await {
        let item = item.map_err(BenchError::setup)?;
        let pk = match item.get("PK") {
            Some(AttributeValue::S(pk)) => pk.clone(),
            _ => return Err(BenchError::setup("an event item without PK")),
        };
        by_device.entry(pk).or_default().push(item);
    }
    let sort_key = |item: &Item| match item.get("SK") {
        Some(AttributeValue::S(sk)) => sk.clone(),
        _ => String::new(),
    };
    for items in by_device.values_mut() {
        items.sort_by_key(sort_key);
    }
    Ok(by_device)
}

/// Writes `items` (one device's batch) as concurrent BatchWriteItem calls of 25, resending
/// unprocessed items. Returns how many were written.
async fn write_batch(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: &[Item],
) -> Result<usize, BenchError> {
    let chunks = items.chunks(25).map(|chunk| async move {
        let mut pending: Vec<WriteRequest> = chunk
            .iter()
            .map(|item| {
                PutRequest::builder()
                    .set_item(Some(item.clone()))
                    .build()
                    .map(|put| WriteRequest::builder().put_request(put).build())
            })
            .collect::<Result<_, _>>()
            .map_err(BenchError::setup)?;
        while !pending.is_empty() {
            let out = client
                .batch_write_item()
                .request_items(table, pending)
                // What every request of the handler asks for (its log line reports the
                // capacity consumed): the ceiling is the same DynamoDB work, without a handler.
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
                .map_err(BenchError::setup)?;
            pending = out
                .unprocessed_items
                .unwrap_or_default()
                .into_values()
                .flatten()
                .collect();
        }
        Ok::<_, BenchError>(chunk.len())
    });
    let mut written = 0;
    for result in futures::future::join_all(chunks).await {
        written += result?;
    }
    Ok(written)
}

/// The raw ceiling: the event items of `source` (what the Rust handler stored: one untimed
/// warm-up batch per device, then the timed ones), written again into the empty `target` by
/// the bare `client`, every device at once, each one batch of 100 at a time.
pub async fn raw_ceiling(
    client: &aws_sdk_dynamodb::Client,
    source: &str,
    target: &str,
) -> Result<Throughput, BenchError> {
    raw_ceiling_of(
        client,
        source,
        target,
        RawShape {
            per_request: 100,
            warm: 100,
            replay: false,
        },
    )
    .await
}

/// How the bare client writes a device's items: `per_request` items a request (in chunks of
/// 25 at once), the first `warm` untimed; with `replay`, every item is written once untimed
/// first, so the timed writes overwrite items that exist (as a replayed batch does).
#[derive(Clone, Copy, Debug)]
pub struct RawShape {
    /// Items per request.
    pub per_request: usize,
    /// Items written untimed first (the contender's warm-up).
    pub warm: usize,
    /// Whether the timed writes replace items already stored.
    pub replay: bool,
}

/// The raw ceiling of any request shape: the event items of `source`, written again into
/// the empty `target` by the bare `client` as `shape` says, every device at once, each one
/// request at a time.
pub async fn raw_ceiling_of(
    client: &aws_sdk_dynamodb::Client,
    source: &str,
    target: &str,
    shape: RawShape,
) -> Result<Throughput, BenchError> {
    let by_device = stored_events(client, source).await?;
    let batches: Vec<(&[Item], Vec<&[Item]>)> = by_device
        .values()
        .map(|items| {
            let (warm, timed) = items.split_at(shape.warm.min(items.len()));
            (warm, timed.chunks(shape.per_request.max(1)).collect())
        })
        .collect();
    // The warm-up items of each device first (and every item, for a replay), untimed, as for
    // the handlers.
    for (warm, timed) in &batches {
        write_batch(client, target, warm).await?;
        if shape.replay {
            for batch in timed {
                write_batch(client, target, batch).await?;
            }
        }
    }
    let batches: Vec<Vec<&[Item]>> = batches
        .into_iter()
        .map(|(warm, timed)| std::iter::once(warm).chain(timed).collect())
        .collect();
    let driver_before = process_cpu_seconds();
    let started = Instant::now();
    let runs = futures::future::join_all(batches.iter().map(|device| async move {
        let mut latencies = Vec::new();
        let mut written = 0;
        for batch in device.iter().skip(1) {
            let sent = Instant::now();
            written += write_batch(client, target, batch).await?;
            latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
        }
        Ok::<_, BenchError>((written, latencies))
    }))
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let driver_cpu_seconds = process_cpu_seconds() - driver_before;
    let mut events = 0;
    let mut latencies = Vec::new();
    for run in runs {
        let (written, l) = run?;
        events += written;
        latencies.extend(l);
    }
    Ok(Throughput {
        events,
        seconds,
        events_per_second: events as f64 / seconds,
        batch_ms: Latency::of(&latencies),
        function_cpu_seconds: None,
        driver_cpu_seconds,
    })
}
