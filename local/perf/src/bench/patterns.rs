//! Latency of every access pattern through its function's release bootstrap: a few hundred
//! warm invocations of each pattern's route on the reference dataset, in the order a table can
//! take them (reads first, then writes that can repeat: a profile rename, status and tag
//! changes with the right `If-Match`, registrations then deletions of fresh devices, ingest
//! batches of new events).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;

use super::bootstrap::RunningBootstrap;
use super::common::{request_latencies, BenchError, Latency};
use fleet_testkit::bootstrap::host_bootstrap;
use fleet_testkit::reference::cases::CASES;
use fleet_testkit::reference::Tokens;

/// One benchmarked request kind: an access pattern through its function's route.
pub struct Case {
    /// Pattern id.
    pub id: PatternId,
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
    pub id: PatternId,
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

/// The route call of every pattern case that has one (`reference::cases::CASES`, in order),
/// on the reference dataset (`tokens` from its seed); ingest events are stamped from
/// `ingest_from` on, one second apart.
pub fn cases(tokens: &Tokens, ingest_from: Timestamp) -> Vec<Case> {
    CASES
        .iter()
        .filter_map(|case| {
            let call = case.call.as_ref()?;
            Some(Case {
                id: case.id,
                request: call.request,
                function: call.function,
                expected: call.expected,
                event: (call.events)(tokens, ingest_from),
            })
        })
        .collect()
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
