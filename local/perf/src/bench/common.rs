//! What the benchmark's parts share: its error, latency quantiles, the request log and CPU
//! readings, and the functions' environments with the request limits off.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::bootstrap::{BootstrapError, REQUEST_LIMITS};
use super::cold_start::ColdStartError;
use crate::stats::quantile;
use fleet_testkit::bootstrap::{function_environment, retention_override};
use fleet_testkit::reference::REFERENCE_RETENTION_DAYS;
use fleet_testkit::template::Template;

/// The first timestamp of the events the benchmark ingests: the day after the reference
/// dataset's day (`fleet_testkit::reference::REFERENCE_NOW`).
pub const INGEST_FROM: &str = "2026-11-21T00:00:00.000Z";

/// Why the benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A function process failed.
    #[error("{0}: {1}")]
    Process(String, BootstrapError),
    /// A call answered an unexpected status: the run measured something else than it claims.
    #[error("{what}: expected status {expected}, got {got}: {outcome}")]
    Status {
        /// The call.
        what: String,
        /// Expected status.
        expected: u16,
        /// Status got.
        got: u16,
        /// The answer.
        outcome: String,
    },
    /// The cold-start measurement failed.
    #[error(transparent)]
    ColdStart(#[from] ColdStartError),
    /// Setting up the table, the data or the output failed.
    #[error("{0}")]
    Setup(String),
}

impl BenchError {
    pub(crate) fn process(function: &str, err: BootstrapError) -> Self {
        Self::Process(function.to_string(), err)
    }

    pub(crate) fn setup(err: impl std::fmt::Display) -> Self {
        Self::Setup(err.to_string())
    }
}

/// Quantiles of a set of durations, ms (nearest rank).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// How many.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// The quantiles of `values`.
    pub fn of(values: &[f64]) -> Self {
        Self {
            n: values.len(),
            p50: quantile(values, 0.5),
            p99: quantile(values, 0.99),
            min: quantile(values, 0.0),
            max: quantile(values, 1.0),
        }
    }
}

/// The `latency_ms` of every request log line in `log`, in order (both the Rust functions
/// and the Python peer log one JSON line per request with that field).
pub fn request_latencies(log: &Path) -> Result<Vec<f64>, BenchError> {
    let text = std::fs::read_to_string(log).map_err(BenchError::setup)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"] == "request")
        .filter_map(|v| v["latency_ms"].as_f64())
        .collect())
}

/// CPU seconds this process has used (user + system).
pub fn process_cpu_seconds() -> f64 {
    super::bootstrap::cpu_seconds_of(std::process::id()).unwrap_or(0.0)
}

/// The environment of every function of `template` (by logical id) as Lambda would set it,
/// for the table `table` at `endpoint`, with the retention the reference data needs (its
/// timestamps are fixed) and the per-device and per-user request limits off: a benchmark
/// sends one device's batches back to back to measure the code, not the limits. A table with a
/// delivery queue of its own (the reference dataset's) gives it to the functions that send to
/// one (`AWS_ENDPOINT_URL_SQS`, `WEBHOOK_QUEUE_URL`).
pub fn function_environments(
    template: &Template,
    endpoint: &str,
    table: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, BenchError> {
    let mut overrides = retention_override(REFERENCE_RETENTION_DAYS);
    for limit in REQUEST_LIMITS {
        overrides.insert(limit.to_string(), "0".to_string());
    }
    // The table's own delivery queue (the reference dataset's, on moto's SQS), for the
    // functions that send to one.
    let queue = fleet_testkit::webhook_queue::registered_queue(table);
    // And its firmware image bucket (on moto's S3), for the functions that read or presign
    // images.
    let bucket = fleet_testkit::moto_server::registered_bucket(table);
    template
        .function_definitions
        .keys()
        .map(|function| {
            let mut env = function_environment(template, function, endpoint, table, &overrides)
                .map_err(BenchError::setup)?;
            if let Some((sqs, url)) = &queue {
                if env.contains_key(shared::ops::webhooks::QUEUE_URL_ENV) {
                    env.insert("AWS_ENDPOINT_URL_SQS".into(), sqs.clone());
                    env.insert(shared::ops::webhooks::QUEUE_URL_ENV.into(), url.clone());
                }
            }
            let bucket_env = shared::store::firmware_images::FIRMWARE_BUCKET_ENV;
            if let Some((s3, name)) = &bucket {
                if env.contains_key(bucket_env) {
                    env.insert("AWS_ENDPOINT_URL_S3".into(), s3.clone());
                    env.insert(bucket_env.into(), name.clone());
                }
            }
            Ok((function.clone(), env))
        })
        .collect()
}

/// The bootstrap binary of every function of `template`, by logical id.
pub fn function_binaries(template: &Template) -> BTreeMap<String, String> {
    template
        .function_definitions
        .iter()
        .map(|(f, d)| (f.clone(), d.binary.clone()))
        .collect()
}
