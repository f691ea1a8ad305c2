//! Cold start and memory of the release bootstraps, measured under the local Lambda Runtime
//! API: from spawning the process to its first response (what a user waits for on a cold
//! invocation, minus Lambda's own sandbox start-up), then warm latency and peak resident
//! memory. Each function gets its first 2xx sample event from `events/`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use shared::FleetTable;

use fleet_testkit::bootstrap::{function_environment, host_bootstrap, retention_override};
use fleet_testkit::samples::{first_success, sample_events, SAMPLE_RETENTION_DAYS};
use fleet_testkit::template::Template;

use super::bootstrap::{BootstrapError, CpuLimit, Launch, RunningBootstrap, REQUEST_LIMITS};
use crate::stats::quantile;

/// Warm invocations after each cold one.
pub const WARM_INVOCATIONS: usize = 20;

/// One function's figures over all runs.
#[derive(Clone, Debug, Serialize)]
pub struct ColdStart {
    /// Template logical id.
    pub function: String,
    /// The binary.
    pub binary: String,
    /// The sample event used.
    pub event: String,
    /// Size of the bootstrap file, bytes.
    pub bootstrap_bytes: u64,
    /// Process start to first response, ms, one per run.
    pub cold_ms: Vec<f64>,
    /// Warm invocation latencies, ms, all runs.
    pub warm_ms: Vec<f64>,
    /// Peak resident memory after the warm invocations, KiB, one per run.
    pub peak_rss_kib: Vec<u64>,
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum ColdStartError {
    /// A bootstrap failed.
    #[error("{0}: {1}")]
    Bootstrap(String, BootstrapError),
    /// A bootstrap answered with the wrong status.
    #[error("{function}: {event} answered {got}, expected {expected}")]
    Status {
        /// Function.
        function: String,
        /// Event file.
        event: String,
        /// Status got.
        got: u16,
        /// Status expected.
        expected: u16,
    },
    /// The template is unusable.
    #[error(transparent)]
    Template(#[from] fleet_testkit::template::TemplateError),
}

/// Runs every function's bootstrap `runs` times against `table` (seeded with the demo data)
/// at `endpoint`.
pub async fn measure(
    template: &Template,
    endpoint: &str,
    table: &FleetTable,
    runs: usize,
) -> Result<Vec<ColdStart>, ColdStartError> {
    measure_with(
        template,
        endpoint,
        table,
        runs,
        &BTreeMap::new(),
        "target/cold-start",
    )
    .await
}

/// [`measure`] with `extra_env` on top of each function's environment (e.g. a TLS endpoint
/// and the CA to trust, [`crate::bench::tls_endpoint::TlsEndpoint::client_environment`]),
/// logging under `logs` (relative to the repository root).
pub async fn measure_with(
    template: &Template,
    endpoint: &str,
    table: &FleetTable,
    runs: usize,
    extra_env: &BTreeMap<String, String>,
    logs: &str,
) -> Result<Vec<ColdStart>, ColdStartError> {
    let samples = sample_events();
    let mut overrides = retention_override(SAMPLE_RETENTION_DAYS);
    // Each run sends its sample 21 times back to back: the per-device and per-user limits
    // would answer 429 and the figures would be of the limits, not the code.
    for limit in REQUEST_LIMITS {
        overrides.insert(limit.to_string(), "0".to_string());
    }
    let logs = fleet_testkit::repo_root().join(logs);
    let mut results = Vec::new();
    for (function, definition) in &template.function_definitions {
        let Some(sample) = first_success(&samples, function) else {
            continue;
        };
        let path = host_bootstrap(&definition.binary);
        let mut env = function_environment(template, function, endpoint, table.name(), &overrides)?;
        env.extend(extra_env.clone());
        let timeout = Duration::from_secs(u64::from(definition.timeout_seconds).max(30));
        let measured = measure_runs(
            &Launch::bootstrap(&path),
            function,
            &env,
            &mut |_| sample.text.clone().into_bytes(),
            sample.status,
            runs,
            timeout,
            &logs,
            None,
        )
        .await
        .map_err(|e| match e {
            ColdStartError::Status { got, expected, .. } => ColdStartError::Status {
                function: function.clone(),
                event: sample.file.clone(),
                got,
                expected,
            },
            other => other,
        })?;
        results.push(ColdStart {
            function: function.clone(),
            binary: definition.binary.clone(),
            event: sample.file.clone(),
            bootstrap_bytes: std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
            cold_ms: measured.cold_ms,
            warm_ms: measured.warm_ms,
            peak_rss_kib: measured.peak_rss_kib,
        });
    }
    Ok(results)
}

/// What [`measure_runs`] measured of one program.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunFigures {
    /// Process start to first response, ms, one per run.
    pub cold_ms: Vec<f64>,
    /// Warm invocation latencies (event queued to answer), ms, all runs.
    pub warm_ms: Vec<f64>,
    /// Peak resident memory after the warm invocations, KiB, one per run.
    pub peak_rss_kib: Vec<u64>,
}

/// Starts `launch` under a fresh runtime API `runs` times; each time sends it one event, then
/// [`WARM_INVOCATIONS`] more. `event(i)` gives the `i`-th event of the whole measurement (so
/// a caller can send fresh data each time) and every answer must have status `expected`.
/// Logs go to `logs/{function}-{run}.log`. With `cpu`, each process runs under that limit
/// after its Init phase.
#[allow(clippy::too_many_arguments)]
pub async fn measure_runs(
    launch: &Launch,
    function: &str,
    env: &BTreeMap<String, String>,
    event: &mut (dyn FnMut(usize) -> Vec<u8> + Send),
    expected: u16,
    runs: usize,
    timeout: Duration,
    logs: &Path,
    cpu: Option<&CpuLimit>,
) -> Result<RunFigures, ColdStartError> {
    let fail = |e| ColdStartError::Bootstrap(function.to_string(), e);
    let mut figures = RunFigures::default();
    let mut sent = 0;
    for run in 0..runs {
        let log = logs.join(format!("{function}-{run}.log"));
        let mut process = RunningBootstrap::launch_limited(launch, function, env, &log, cpu)
            .await
            .map_err(fail)?;
        for i in 0..=WARM_INVOCATIONS {
            let payload = event(sent);
            sent += 1;
            let invocation = process.invoke(&payload, timeout).await.map_err(fail)?;
            let status = invocation.outcome.status();
            if status != expected {
                return Err(ColdStartError::Status {
                    function: function.to_string(),
                    event: format!("event {}: {:?}", sent - 1, invocation.outcome),
                    got: status,
                    expected,
                });
            }
            if i == 0 {
                figures
                    .cold_ms
                    .push(process.since_spawn().as_secs_f64() * 1000.0);
            } else {
                figures
                    .warm_ms
                    .push(invocation.latency.as_secs_f64() * 1000.0);
            }
        }
        figures
            .peak_rss_kib
            .push(process.peak_rss_kib().unwrap_or(0));
        process.stop().await;
    }
    Ok(figures)
}

/// A Markdown table of the figures: medians, with the cold-start range.
pub fn markdown(results: &[ColdStart]) -> String {
    let mut out = String::from(
        "| function | bootstrap | cold start p50 (min-max) | warm p50 / p99 | peak RSS |\n|---|---:|---:|---:|---:|\n",
    );
    for r in results {
        let rss: Vec<f64> = r.peak_rss_kib.iter().map(|k| *k as f64).collect();
        out.push_str(&format!(
            "| {} | {:.1} MiB | {:.1} ms ({:.1}-{:.1}) | {:.2} / {:.2} ms | {:.1} MiB |\n",
            r.function,
            r.bootstrap_bytes as f64 / 1_048_576.0,
            quantile(&r.cold_ms, 0.5),
            quantile(&r.cold_ms, 0.0),
            quantile(&r.cold_ms, 1.0),
            quantile(&r.warm_ms, 0.5),
            quantile(&r.warm_ms, 0.99),
            quantile(&rss, 0.5) / 1024.0,
        ));
    }
    out
}
