//! Latency of every access pattern through its function's release bootstrap: a few hundred
//! warm invocations of each pattern's route on the reference dataset, in the order a table can
//! take them (reads first, then writes that can repeat: a profile rename, status and tag
//! changes with the right `If-Match`, registrations then deletions of fresh devices, ingest
//! batches of new events).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use shared::timestamp::Timestamp;

use super::{request_latencies, BenchError, Latency};
use fleet_testkit::api_event::ApiEvent;
use fleet_testkit::bootstrap::{host_bootstrap, RunningBootstrap};
use fleet_testkit::reference::{Tokens, ALICE};

/// The operator who reads the `/admin` routes.
const OPERATOR: &str = "ref-operator";

/// One benchmarked request kind: an access pattern through its function's route.
pub struct Case {
    /// Pattern id (`AP-01`).
    pub id: &'static str,
    /// The request sent.
    pub request: &'static str,
    /// Template logical id of the function that serves it.
    pub function: &'static str,
    /// The status every call must answer.
    pub expected: u16,
    /// The `i`-th event of this case (warm-up calls included).
    pub event: Box<dyn FnMut(usize) -> Vec<u8> + Send>,
}

/// What one case measured.
#[derive(Clone, Debug, Serialize)]
pub struct PatternLatency {
    /// Pattern id.
    pub id: &'static str,
    /// The request sent.
    pub request: &'static str,
    /// Template logical id.
    pub function: &'static str,
    /// Measured calls (after the warm-up).
    pub calls: usize,
    /// Event queued at the Runtime API to the answer posted back.
    pub invocation_ms: Latency,
    /// The handler's own `latency_ms`, from its request log line.
    pub handler_ms: Latency,
}

/// The cases, on the reference dataset (`tokens` from its seed); ingest events are stamped
/// from `ingest_from` on, one second apart.
pub fn cases(tokens: &Tokens, ingest_from: Timestamp) -> Vec<Case> {
    let device = format!("{ALICE}-dev-0");
    let day = ("2026-11-20T00:00:00.000Z", "2026-11-20T23:59:59.999Z");
    let read = |id, request, event: ApiEvent| Case {
        id,
        request,
        function: "DashboardFunction",
        expected: 200,
        event: Box::new(move |_| event.to_bytes()),
    };
    let mut cases = vec![
        read(
            "AP-01",
            "GET /me",
            ApiEvent::new("GET /me", "/me").caller(ALICE),
        ),
        read(
            "AP-02",
            "GET /me/devices (10 devices)",
            ApiEvent::new("GET /me/devices", "/me/devices").caller(ALICE),
        ),
        read(
            "AP-03",
            "GET /me/devices/{deviceId}",
            ApiEvent::new(
                "GET /me/devices/{deviceId}",
                format!("/me/devices/{device}"),
            )
            .caller(ALICE)
            .param("deviceId", &device),
        ),
        read(
            "AP-04",
            "GET /me/devices/{deviceId}/events (a day: 10 events)",
            ApiEvent::new(
                "GET /me/devices/{deviceId}/events",
                format!("/me/devices/{device}/events"),
            )
            .caller(ALICE)
            .param("deviceId", &device)
            .query("from", day.0)
            .query("to", day.1),
        ),
        read(
            "AP-05",
            "GET /me/events?limit=50 (a day: 100 events)",
            ApiEvent::new("GET /me/events", "/me/events")
                .caller(ALICE)
                .query("from", day.0)
                .query("to", day.1)
                .query("limit", "50"),
        ),
        read(
            "AP-DASH",
            "GET /me/dashboard (10 devices x 10 events)",
            ApiEvent::new("GET /me/dashboard", "/me/dashboard").caller(ALICE),
        ),
        read(
            "AP-09",
            "GET /admin/events?type=temperature&limit=50 (a day)",
            ApiEvent::new("GET /admin/events", "/admin/events")
                .operator(OPERATOR)
                .query("type", "temperature")
                .query("from", day.0)
                .query("to", day.1)
                .query("limit", "50"),
        ),
        read(
            "AP-12",
            "GET /me/devices?tag=kitchen",
            ApiEvent::new("GET /me/devices", "/me/devices")
                .caller(ALICE)
                .query("tag", "kitchen"),
        ),
        read(
            "AP-13",
            "GET /admin/devices?status=active&seenSince=(the day)",
            ApiEvent::new("GET /admin/devices", "/admin/devices")
                .operator(OPERATOR)
                .query("status", "active")
                .query("seenSince", day.0),
        ),
        read(
            "AP-15",
            "GET /admin/reports/{date}",
            ApiEvent::new("GET /admin/reports/{date}", "/admin/reports/2026-11-20")
                .operator(OPERATOR)
                .param("date", "2026-11-20"),
        ),
    ];
    let write = |id, request, expected, event: Box<dyn FnMut(usize) -> Vec<u8> + Send>| Case {
        id,
        request,
        function: "DeviceUpdatesFunction",
        expected,
        event,
    };
    cases.push(write(
        "AP-16",
        "PUT /me (rename)",
        200,
        Box::new(|i| {
            ApiEvent::new("PUT /me", "/me")
                .caller(ALICE)
                .json(&json!({ "name": format!("Alice {i}") }))
                .to_bytes()
        }),
    ));
    // Devices 9 and 7 are at version 1 after the seed; every update bumps it by one. Device 9
    // leaves `active` for good on the first call (AP-13 then always finds 11); device 7 has
    // only the tag `home` and never gets `kitchen` (AP-12 always finds 5).
    let patch = |device: String, body: Box<dyn Fn(usize) -> serde_json::Value + Send>| {
        Box::new(move |i: usize| {
            ApiEvent::new(
                "PATCH /me/devices/{deviceId}",
                format!("/me/devices/{device}"),
            )
            .caller(ALICE)
            .param("deviceId", &device)
            .header("If-Match", &(i + 1).to_string())
            .json(&body(i))
            .to_bytes()
        }) as Box<dyn FnMut(usize) -> Vec<u8> + Send>
    };
    cases.push(write(
        "AP-06",
        "PATCH /me/devices/{deviceId} (status)",
        200,
        patch(
            format!("{ALICE}-dev-9"),
            Box::new(|i| {
                let status = ["maintenance", "inactive"][i % 2];
                json!({ "status": status })
            }),
        ),
    ));
    cases.push(write(
        "AP-06",
        "PATCH /me/devices/{deviceId} (tags)",
        200,
        patch(
            format!("{ALICE}-dev-7"),
            Box::new(|i| {
                let tag = ["garage", "home"][i % 2];
                json!({ "tags": [tag] })
            }),
        ),
    ));
    cases.push(write(
        "AP-07",
        "POST /me/devices (2 tags)",
        201,
        Box::new(|i| {
            ApiEvent::new("POST /me/devices", "/me/devices")
                .caller(ALICE)
                .json(
                    &json!({"deviceId": format!("bench-{i}"), "name": format!("Bench {i}"),
                              "type": "thermostat", "tags": ["home", "new"]}),
                )
                .to_bytes()
        }),
    ));
    cases.push(write(
        "AP-08",
        "DELETE /me/devices/{deviceId} (2 tags)",
        204,
        Box::new(|i| {
            let device = format!("bench-{i}");
            ApiEvent::new(
                "DELETE /me/devices/{deviceId}",
                format!("/me/devices/{device}"),
            )
            .caller(ALICE)
            .param("deviceId", &device)
            .to_bytes()
        }),
    ));
    let ingest_device = format!("{ALICE}-dev-1");
    let token = tokens.get(&ingest_device).cloned().unwrap_or_default();
    cases.push(Case {
        id: "AP-14",
        request: "POST /devices/{deviceId}/events (100 new events, warm caches)",
        function: "IngestFunction",
        expected: 200,
        event: Box::new(move |i| {
            ingest_event(&ingest_device, &token, &format!("p{i}"), ingest_from, i)
        }),
    });
    cases
}

/// A batch of 100 new events (ids `{prefix}-{n}`, types cycling through three) for `device`,
/// the `batch`-th from `from`: event `n` of batch `b` is at `from + (b * 100 + n)` seconds.
pub fn ingest_event(
    device: &str,
    token: &str,
    prefix: &str,
    from: Timestamp,
    batch: usize,
) -> Vec<u8> {
    const TYPES: [&str; 3] = ["temperature", "humidity", "door"];
    let events: Vec<_> = (0..100)
        .map(|n| {
            let offset = (batch * 100 + n) as i64;
            json!({"id": format!("{prefix}-{n}"), "type": TYPES[n % TYPES.len()],
                   "value": offset, "at": from.plus_seconds(offset).to_string()})
        })
        .collect();
    ApiEvent::new(
        "POST /devices/{deviceId}/events",
        format!("/devices/{device}/events"),
    )
    .param("deviceId", device)
    .header("Authorization", &format!("Bearer {token}"))
    .json(&json!({ "events": events }))
    .to_bytes()
}

/// Runs `warmup` unmeasured rounds (which also warm DynamoDB Local's JVM), then `calls`
/// measured ones, each round one call of every case in order, through one warm release
/// bootstrap per function. Taking the cases in turn spreads the machine's other load and
/// DynamoDB Local's drift over all of them alike.
pub async fn measure(
    mut cases: Vec<Case>,
    environments: &BTreeMap<String, BTreeMap<String, String>>,
    binaries: &BTreeMap<String, String>,
    warmup: usize,
    calls: usize,
    logs: &Path,
) -> Result<Vec<PatternLatency>, BenchError> {
    let timeout = Duration::from_secs(30);
    let mut processes: BTreeMap<&'static str, RunningBootstrap> = BTreeMap::new();
    // Which case each invocation of a process served (None: warm-up), to read its log.
    let mut served: BTreeMap<&'static str, Vec<Option<usize>>> = BTreeMap::new();
    for case in &cases {
        if processes.contains_key(case.function) {
            continue;
        }
        let process = RunningBootstrap::start(
            &host_bootstrap(&binaries[case.function]),
            case.function,
            &environments[case.function],
            &logs.join(format!("patterns-{}.log", case.function)),
        )
        .await
        .map_err(|e| BenchError::process(case.function, e))?;
        processes.insert(case.function, process);
    }
    let mut invocation_ms = vec![Vec::with_capacity(calls); cases.len()];
    let n = cases.len();
    // Warm-up calls and measured calls alike go round the cases, one call each.
    let schedule = (0..warmup + calls).flat_map(|i| (0..n).map(move |c| (c, i)));
    for (c, i) in schedule {
        let case = &mut cases[c];
        let process = processes.get_mut(case.function).expect("started above");
        let event = (case.event)(i);
        let invocation = process
            .invoke(&event, timeout)
            .await
            .map_err(|e| BenchError::process(case.function, e))?;
        let status = invocation.outcome.status();
        if status != case.expected {
            return Err(BenchError::Status {
                what: format!("{} {} (call {i})", case.id, case.request),
                expected: case.expected,
                got: status,
                outcome: format!("{:?}", invocation.outcome),
            });
        }
        let measured = i >= warmup;
        if measured {
            invocation_ms[c].push(invocation.latency.as_secs_f64() * 1000.0);
        }
        served
            .entry(case.function)
            .or_default()
            .push(measured.then_some(c));
    }
    let mut handler_ms = vec![Vec::with_capacity(calls); cases.len()];
    for (function, process) in processes {
        let logged = request_latencies(process.log_path())?;
        process.stop().await;
        let order = &served[function];
        if logged.len() != order.len() {
            return Err(BenchError::Setup(format!(
                "{function}: {} request log lines for {} invocations",
                logged.len(),
                order.len()
            )));
        }
        for (case, latency) in order.iter().zip(logged) {
            if let Some(c) = case {
                handler_ms[*c].push(latency);
            }
        }
    }
    Ok(cases
        .iter()
        .enumerate()
        .map(|(c, case)| PatternLatency {
            id: case.id,
            request: case.request,
            function: case.function,
            calls,
            invocation_ms: Latency::of(&invocation_ms[c]),
            handler_ms: Latency::of(&handler_ms[c]),
        })
        .collect())
}
