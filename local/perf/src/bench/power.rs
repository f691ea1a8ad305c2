//! The power-tuning table (what AWS Lambda Power Tuning gives its users): for each memory size,
//! the dashboard and ingest paths of the Rust bootstraps and the Python peer under the CPU a
//! Lambda function of that size gets ([`crate::bench::cpu_quota`]), cold start, warm p50/p99
//! and billed cost per million requests.
//!
//! Each process starts unthrottled (Lambda runs the Init phase with more CPU) and is moved into
//! its memory size's group on its first `/next` poll. The CFS period is [`PERIOD`]; a second,
//! smaller run at [`SHORT_PERIOD`] shows how much the figures depend on it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use shared::model::timestamp::Timestamp;

use super::bootstrap::CpuLimit;
use super::common::BenchError;
use super::peer::{self, PeerComparison};
use crate::bench::cpu_quota::{Controller, CpuShare};

/// The memory sizes of the table, MB (1,769 MB is one full vCPU).
pub const MEMORY_SIZES: [u32; 5] = [128, 256, 512, 1024, 1769];
/// The CFS period of the table: CPU time is handed out per 100 ms, so a 128 MB function may
/// burst for 7.2 ms and then waits for the rest of the period.
pub const PERIOD: Duration = Duration::from_millis(100);
/// The period of the sensitivity run.
pub const SHORT_PERIOD: Duration = Duration::from_millis(10);
/// The sizes of the sensitivity run.
pub const SENSITIVITY_SIZES: [u32; 2] = [128, 512];

/// Lambda's arm64 price per GB-second (us-east-1, first tier) and per request.
pub const ARM64_PRICE_PER_GB_SECOND: f64 = 0.000_013_333_4;
/// Price per request.
pub const PRICE_PER_REQUEST: f64 = 0.000_000_2;

/// One memory size's measurement of both paths.
#[derive(Clone, Debug, Serialize)]
pub struct PowerPoint {
    /// Memory size, MB.
    pub memory_mb: u32,
    /// CFS period, ms.
    pub period_ms: u64,
    /// CPU quota per period, ms.
    pub quota_ms: f64,
    /// The share was below CFS's 1 ms minimum quota for this period and got that minimum.
    pub clamped: bool,
    /// Rust and Python on the dashboard and ingest paths.
    pub paths: Vec<PeerComparison>,
}

/// The table, or why it was skipped.
#[derive(Clone, Debug, Serialize)]
pub struct PowerTuning {
    /// One point per memory size at [`PERIOD`].
    pub points: Vec<PowerPoint>,
    /// The sensitivity run at [`SHORT_PERIOD`].
    pub short_period: Vec<PowerPoint>,
    /// Set when no cgroup CPU controller could be used: nothing was measured.
    pub skipped: Option<String>,
}

/// Billed cost of a million invocations of `warm_ms` each at `memory_mb` (Lambda bills
/// whole milliseconds).
pub fn cost_per_million(memory_mb: u32, warm_ms: f64) -> f64 {
    let billed_seconds = warm_ms.ceil().max(1.0) / 1000.0;
    let gb = f64::from(memory_mb) / 1024.0;
    1e6 * (PRICE_PER_REQUEST + billed_seconds * gb * ARM64_PRICE_PER_GB_SECOND)
}

/// Measures every size (and the sensitivity run) with `runs` cold starts per path and side.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    environments: &BTreeMap<String, BTreeMap<String, String>>,
    binaries: &BTreeMap<String, String>,
    dashboard_user: &str,
    ingest_devices: [(&str, &str); 2],
    ingest_from: Timestamp,
    runs: usize,
    logs: &Path,
) -> Result<PowerTuning, BenchError> {
    let controller = match Controller::detect() {
        Ok(controller) => controller,
        Err(err) => {
            eprintln!("bench: {err}");
            return Ok(PowerTuning {
                points: Vec::new(),
                short_period: Vec::new(),
                skipped: Some(err.to_string()),
            });
        }
    };
    let mut batch = 0;
    let mut point = |memory_mb: u32, period: Duration| {
        batch += 1;
        let share = CpuShare { memory_mb, period };
        let limit = CpuLimit {
            controller: controller.clone(),
            share,
        };
        // Fresh event ids for every point: each ingest invocation stores new events.
        let prefix = format!("w{batch}-");
        async move {
            eprintln!(
                "bench:   {memory_mb} MB ({:.1} ms of CPU per {} ms)",
                share.quota_us() as f64 / 1000.0,
                period.as_millis()
            );
            let paths = peer::measure_limited(
                environments,
                binaries,
                dashboard_user,
                ingest_devices,
                ingest_from,
                runs,
                logs,
                Some(&limit),
                &prefix,
            )
            .await?;
            Ok::<_, BenchError>(PowerPoint {
                memory_mb,
                period_ms: period.as_millis() as u64,
                quota_ms: share.quota_us() as f64 / 1000.0,
                clamped: share.is_clamped(),
                paths,
            })
        }
    };
    let mut points = Vec::new();
    for memory_mb in MEMORY_SIZES {
        points.push(point(memory_mb, PERIOD).await?);
    }
    let mut short_period = Vec::new();
    for memory_mb in SENSITIVITY_SIZES {
        short_period.push(point(memory_mb, SHORT_PERIOD).await?);
    }
    Ok(PowerTuning {
        points,
        short_period,
        skipped: None,
    })
}

/// The memory size a path should run at: the cheapest size per million requests whose warm
/// p99 is within 1.5x of the best size's and whose cold start is within 2x of the best
/// size's (so latency never pays for a saving); the smallest size on a tie.
pub fn recommended_memory(table: &PowerTuning, path: &str) -> Option<u32> {
    let rows: Vec<(u32, f64, f64, f64)> = table
        .points
        .iter()
        .filter_map(|p| {
            let c = p.paths.iter().find(|c| c.path == path)?;
            Some((
                p.memory_mb,
                c.rust.warm_ms.p99,
                c.rust.cold_ms.p50,
                cost_per_million(p.memory_mb, c.rust.warm_ms.p50),
            ))
        })
        .collect();
    let best_p99 = rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let best_cold = rows.iter().map(|r| r.2).fold(f64::INFINITY, f64::min);
    rows.iter()
        .filter(|r| r.1 <= 1.5 * best_p99 && r.2 <= 2.0 * best_cold)
        .min_by(|a, b| a.3.total_cmp(&b.3).then(a.0.cmp(&b.0)))
        .map(|r| r.0)
}

/// The table as Markdown: one row per size and path, Rust beside Python.
pub fn markdown(table: &PowerTuning) -> String {
    if let Some(why) = &table.skipped {
        return format!("Not measured on this machine: {why}.\n");
    }
    let mut out = String::from(
        "| memory | CPU per 100 ms | path | cold start p50 Rust / Python | warm p50 Rust / Python | warm p99 Rust / Python | $ per 1M requests Rust / Python |\n|---:|---:|---|---:|---:|---:|---:|\n",
    );
    for p in &table.points {
        for c in &p.paths {
            out.push_str(&format!(
                "| {} MB | {:.1} ms | {} | {:.1} / {:.1} ms | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.2} / {:.2} |\n",
                p.memory_mb,
                p.quota_ms,
                c.path,
                c.rust.cold_ms.p50,
                c.python.cold_ms.p50,
                c.rust.warm_ms.p50,
                c.python.warm_ms.p50,
                c.rust.warm_ms.p99,
                c.python.warm_ms.p99,
                cost_per_million(p.memory_mb, c.rust.warm_ms.p50),
                cost_per_million(p.memory_mb, c.python.warm_ms.p50),
            ));
        }
    }
    out.push_str(&format!(
        "\nPeriod sensitivity: the same sizes with a {} ms CFS period instead of {} ms (a shorter period spreads the same share thinner, so bursts are cut sooner).\n\n",
        SHORT_PERIOD.as_millis(),
        PERIOD.as_millis()
    ));
    out.push_str("| memory | path | period | cold start p50 Rust / Python | warm p50 Rust / Python | warm p99 Rust / Python |\n|---:|---|---:|---:|---:|---:|\n");
    for short in &table.short_period {
        let long = table.points.iter().find(|p| p.memory_mb == short.memory_mb);
        for p in long.into_iter().chain([short]) {
            for c in &p.paths {
                out.push_str(&format!(
                    "| {} MB | {} | {} ms{} | {:.1} / {:.1} ms | {:.2} / {:.2} ms | {:.2} / {:.2} ms |\n",
                    p.memory_mb,
                    c.path,
                    p.period_ms,
                    if p.clamped {
                        " (quota clamped to CFS's 1 ms minimum)"
                    } else {
                        ""
                    },
                    c.rust.cold_ms.p50,
                    c.python.cold_ms.p50,
                    c.rust.warm_ms.p50,
                    c.python.warm_ms.p50,
                    c.rust.warm_ms.p99,
                    c.python.warm_ms.p99,
                ));
            }
        }
    }
    for path in ["dashboard", "ingest"] {
        if let Some(mb) = recommended_memory(table, path) {
            out.push_str(&format!(
                "\nRecommended for the {path} path (cheapest per million requests with warm p99 within 1.5x and cold start within 2x of the best size): **{mb} MB**.\n"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_bills_whole_milliseconds_of_gb_seconds_plus_requests() {
        // 1 ms at 1,024 MB: $0.20 of requests + 1e6 x 0.001 s x 1 GB x price.
        let one_ms = cost_per_million(1024, 0.3);
        assert!((one_ms - (0.2 + 1000.0 * ARM64_PRICE_PER_GB_SECOND)).abs() < 1e-9);
        assert_eq!(cost_per_million(1024, 1.0), one_ms, "rounded up to 1 ms");
        assert!(cost_per_million(1024, 1.01) > one_ms);
        let eight_ms_at_128 = 0.2 + 1e6 * 0.008 * 0.125 * ARM64_PRICE_PER_GB_SECOND;
        assert!((cost_per_million(128, 8.0) - eight_ms_at_128).abs() < 1e-9);
    }
}
