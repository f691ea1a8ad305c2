//! TLS on the first call: DynamoDB Local is plain HTTP, but on AWS a function's first
//! DynamoDB request pays a TLS handshake, most of a Rust cold start's DynamoDB cost. Here the
//! same cold starts run twice, back to back: against DynamoDB Local directly, and through
//! [`TlsEndpoint`] (a throwaway CA the processes trust through `SSL_CERT_FILE` and
//! `AWS_CA_BUNDLE` only, nothing compiled into them).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use serde::Serialize;
use shared::model::timestamp::Timestamp;
use shared::FleetTable;

use super::common::BenchError;
use super::peer::{self, PeerComparison};
use crate::bench::cold_start::{self, ColdStart};
use crate::bench::tls_endpoint::TlsEndpoint;
use fleet_testkit::template::Template;

/// Cold starts without and with TLS.
#[derive(Clone, Debug, Serialize)]
pub struct TlsFigures {
    /// Every release bootstrap against DynamoDB Local's plain endpoint.
    pub plain: Vec<ColdStart>,
    /// The same through the TLS endpoint.
    pub tls: Vec<ColdStart>,
    /// Rust and Python on the dashboard and ingest paths, plain.
    pub peer_plain: Vec<PeerComparison>,
    /// The same through the TLS endpoint.
    pub peer_tls: Vec<PeerComparison>,
}

/// Measures both ways. `endpoint` is DynamoDB Local's (`http://127.0.0.1:PORT`), `demo` a
/// table with the demo data (for each function's sample event), `environments` the functions'
/// environments for the reference table the peer paths use.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    template: &Template,
    endpoint: &str,
    demo: &FleetTable,
    environments: &BTreeMap<String, BTreeMap<String, String>>,
    binaries: &BTreeMap<String, String>,
    dashboard_user: &str,
    ingest_devices: [(&str, &str); 2],
    ingest_from: Timestamp,
    runs: usize,
    logs: &Path,
) -> Result<TlsFigures, BenchError> {
    let upstream: SocketAddr = endpoint
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| BenchError::Setup(format!("DynamoDB Local endpoint {endpoint}: {e}")))?;
    let tls = TlsEndpoint::start(upstream, &logs.join("tls/ca.pem"))
        .await
        .map_err(BenchError::setup)?;
    let through_tls = tls.client_environment();
    let none = BTreeMap::new();
    let plain = cold_start::measure_with(
        template,
        endpoint,
        demo,
        runs,
        &none,
        "target/bench/cold-plain",
    )
    .await?;
    let tls_starts = cold_start::measure_with(
        template,
        endpoint,
        demo,
        runs,
        &through_tls,
        "target/bench/cold-tls",
    )
    .await?;
    let with_tls: BTreeMap<String, BTreeMap<String, String>> = environments
        .iter()
        .map(|(function, env)| {
            let mut env = env.clone();
            env.extend(through_tls.clone());
            (function.clone(), env)
        })
        .collect();
    let peer_plain = peer::measure_limited(
        environments,
        binaries,
        dashboard_user,
        ingest_devices,
        ingest_from,
        runs,
        &logs.join("tls-plain"),
        None,
        "p",
    )
    .await?;
    let peer_tls = peer::measure_limited(
        &with_tls,
        binaries,
        dashboard_user,
        ingest_devices,
        ingest_from,
        runs,
        &logs.join("tls"),
        None,
        "t",
    )
    .await?;
    Ok(TlsFigures {
        plain,
        tls: tls_starts,
        peer_plain,
        peer_tls,
    })
}

/// The figures as Markdown: cold start p50 per bootstrap, then per path and side.
pub fn markdown(figures: &TlsFigures) -> String {
    let median = |v: &[f64]| crate::stats::quantile(v, 0.5);
    let mut out = String::from(
        "| release bootstrap | cold start p50, plain | cold start p50, TLS | TLS adds |\n|---|---:|---:|---:|\n",
    );
    for plain in &figures.plain {
        if let Some(tls) = figures.tls.iter().find(|t| t.function == plain.function) {
            let (p, t) = (median(&plain.cold_ms), median(&tls.cold_ms));
            out.push_str(&format!(
                "| {} | {:.1} ms | {:.1} ms | {:+.1} ms |\n",
                plain.function,
                p,
                t,
                t - p
            ));
        }
    }
    out.push_str("\n| path | cold start p50 Rust, plain / TLS | cold start p50 Python, plain / TLS | Python / Rust with TLS |\n|---|---:|---:|---:|\n");
    for plain in &figures.peer_plain {
        if let Some(tls) = figures.peer_tls.iter().find(|t| t.path == plain.path) {
            out.push_str(&format!(
                "| {} | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {:.1}x |\n",
                plain.path,
                plain.rust.cold_ms.p50,
                tls.rust.cold_ms.p50,
                plain.python.cold_ms.p50,
                tls.python.cold_ms.p50,
                if tls.rust.cold_ms.p50 > 0.0 {
                    tls.python.cold_ms.p50 / tls.rust.cold_ms.p50
                } else {
                    0.0
                },
            ));
        }
    }
    out
}
