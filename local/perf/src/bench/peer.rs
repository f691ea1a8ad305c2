//! The Rust release bootstraps against the Python + boto3 peer (`bench/python-peer/`) on the
//! dashboard and ingest paths: the same Runtime API, table, data, events and environment; `runs`
//! cold starts each, every one followed by the warm invocations of
//! [`crate::bench::cold_start::WARM_INVOCATIONS`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use shared::model::timestamp::Timestamp;

use super::bootstrap::{CpuLimit, Launch};
use super::common::{BenchError, Latency};
use crate::bench::cold_start::{measure_runs, RunFigures};
use crate::stats::quantile;
use fleet_testkit::api_event::ApiEvent;
use fleet_testkit::bootstrap::host_bootstrap;
use fleet_testkit::reference::cases::events::ingest_event;

/// The Python peer's interpreter (`make python-peer` builds the virtualenv).
pub fn peer_python() -> PathBuf {
    fleet_testkit::repo_root().join(".venv-peer/bin/python")
}

/// `python -m awslambdaric handler.<handler>` in `bench/python-peer/`: the peer as the Python
/// Lambda runtime runs it.
pub fn peer_launch(handler: &str) -> Launch {
    Launch {
        program: peer_python(),
        args: vec![
            "-m".into(),
            "awslambdaric".into(),
            format!("handler.{handler}"),
        ],
        cwd: Some(fleet_testkit::repo_root().join("bench/python-peer")),
    }
}

/// One implementation's figures on one path.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    /// Process start to first response, ms.
    pub cold_ms: Latency,
    /// Warm invocations, ms.
    pub warm_ms: Latency,
    /// Peak resident memory after the warm invocations (median of the runs), MiB.
    pub peak_rss_mib: f64,
    /// Every figure.
    pub raw: RunFigures,
}

impl Side {
    fn of(raw: RunFigures) -> Self {
        let rss: Vec<f64> = raw
            .peak_rss_kib
            .iter()
            .map(|k| *k as f64 / 1024.0)
            .collect();
        Self {
            cold_ms: Latency::of(&raw.cold_ms),
            warm_ms: Latency::of(&raw.warm_ms),
            peak_rss_mib: quantile(&rss, 0.5),
            raw,
        }
    }
}

/// Rust and Python on one path.
#[derive(Clone, Debug, Serialize)]
pub struct PeerComparison {
    /// `dashboard` or `ingest`.
    pub path: &'static str,
    /// The request every invocation sends.
    pub request: &'static str,
    /// Template logical id of the Rust function.
    pub function: &'static str,
    /// The Rust release bootstrap.
    pub rust: Side,
    /// The Python + boto3 peer.
    pub python: Side,
}

/// Both paths, Rust then Python for each. `environments` are the template's environments by
/// function for the table both read and write; `ingest_devices` are two registered devices
/// with ids of equal length (Rust's, Python's) and their tokens.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    environments: &BTreeMap<String, BTreeMap<String, String>>,
    binaries: &BTreeMap<String, String>,
    dashboard_user: &str,
    ingest_devices: [(&str, &str); 2],
    ingest_from: Timestamp,
    runs: usize,
    logs: &Path,
) -> Result<Vec<PeerComparison>, BenchError> {
    measure_limited(
        environments,
        binaries,
        dashboard_user,
        ingest_devices,
        ingest_from,
        runs,
        logs,
        None,
        "c",
    )
    .await
}

/// [`measure`] with every process under `cpu` after its Init phase; ingest event ids start
/// with `id_prefix` (each measurement must store new events).
#[allow(clippy::too_many_arguments)]
pub async fn measure_limited(
    environments: &BTreeMap<String, BTreeMap<String, String>>,
    binaries: &BTreeMap<String, String>,
    dashboard_user: &str,
    ingest_devices: [(&str, &str); 2],
    ingest_from: Timestamp,
    runs: usize,
    logs: &Path,
    cpu: Option<&CpuLimit>,
    id_prefix: &str,
) -> Result<Vec<PeerComparison>, BenchError> {
    let timeout = Duration::from_secs(30);
    let dashboard = ApiEvent::new("GET /me/dashboard", "/me/dashboard").caller(dashboard_user);
    let mut out = Vec::new();
    for (path, request, function, handler) in [
        (
            "dashboard",
            "GET /me/dashboard (10 devices x 10 events)",
            "DashboardFunction",
            "dashboard_handler",
        ),
        (
            "ingest",
            "POST /devices/{deviceId}/events (100 new events per invocation)",
            "IngestFunction",
            "ingest_handler",
        ),
    ] {
        let env = &environments[function];
        let rust_launch = Launch::bootstrap(&host_bootstrap(&binaries[function]));
        let python_launch = peer_launch(handler);
        let mut sides = Vec::new();
        for (side, launch, (device, token)) in [
            ("rust", &rust_launch, ingest_devices[0]),
            ("python", &python_launch, ingest_devices[1]),
        ] {
            let mut event = |i: usize| match path {
                "dashboard" => dashboard.to_bytes(),
                _ => ingest_event(device, token, &format!("{id_prefix}{i}"), ingest_from, i),
            };
            let figures = measure_runs(
                launch,
                &format!("{function}-{side}"),
                env,
                &mut event,
                200,
                runs,
                timeout,
                &logs.join("peer"),
                cpu,
            )
            .await?;
            sides.push(Side::of(figures));
        }
        let python = sides.pop().expect("two sides");
        let rust = sides.pop().expect("two sides");
        out.push(PeerComparison {
            path,
            request,
            function,
            rust,
            python,
        });
    }
    Ok(out)
}
