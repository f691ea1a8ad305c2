//! `fleet-perf bench-compare BEFORE [AFTER] [RUNS]`: two builds of the release bootstraps
//! (directories laid out like `target/lambda-host/<binary>/bootstrap`) side by side: size,
//! cold start, warm latency and peak memory of each function, the two builds taking turns run
//! by run (which goes first alternates), so that other load on the machine falls on both alike.
//! For recording the before/after figures of a change to the build or the start-up path.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::bootstrap::Launch;
use super::common::{function_environments, BenchError, Latency};
use crate::bench::cold_start::{measure_runs, RunFigures};
use crate::stats::quantile;
use fleet_testkit::samples::{first_success, sample_events};
use fleet_testkit::stack::LocalStack;

/// One function in one build.
struct Build {
    dir: PathBuf,
    figures: RunFigures,
}

fn row(function: &str, build: &str, path: &Path, f: &RunFigures) -> String {
    let rss: Vec<f64> = f.peak_rss_kib.iter().map(|k| *k as f64 / 1024.0).collect();
    let cold = Latency::of(&f.cold_ms);
    let warm = Latency::of(&f.warm_ms);
    format!(
        "| {function} | {build} | {} | {:.1} ms ({:.1}-{:.1}) | {:.2} / {:.2} ms | {:.2} MiB |\n",
        std::fs::metadata(path).map_or(0, |m| m.len()),
        cold.p50,
        cold.min,
        cold.max,
        warm.p50,
        warm.p99,
        quantile(&rss, 0.5),
    )
}

/// Measures both builds on the demo data and returns a Markdown table.
pub async fn compare(before: &Path, after: &Path, runs: usize) -> Result<String, BenchError> {
    let stack = LocalStack::start().map_err(BenchError::setup)?;
    let table = stack
        .table("bench-compare")
        .await
        .map_err(BenchError::setup)?;
    fleet_testkit::demo::seed(&table)
        .await
        .map_err(BenchError::setup)?;
    let environments = function_environments(&stack.template, stack.endpoint(), "bench-compare")?;
    let samples = sample_events();
    let logs = fleet_testkit::repo_root().join("target/bench/compare");
    let mut out = String::from(
        "| function | build | bootstrap bytes | cold start p50 (min-max) | warm p50 / p99 | peak RSS p50 |\n|---|---|---:|---:|---:|---:|\n",
    );
    for (function, definition) in &stack.template.function_definitions {
        let Some(sample) = first_success(&samples, function) else {
            continue;
        };
        let mut builds = [before, after].map(|dir| Build {
            dir: dir.join(&definition.binary).join("bootstrap"),
            figures: RunFigures::default(),
        });
        for run in 0..runs {
            for turn in 0..2 {
                let build = &mut builds[(run + turn) % 2];
                let measured = measure_runs(
                    &Launch::bootstrap(&build.dir),
                    function,
                    &environments[function],
                    &mut |_| sample.text.clone().into_bytes(),
                    sample.status,
                    1,
                    Duration::from_secs(30),
                    &logs,
                    None,
                )
                .await?;
                build.figures.cold_ms.extend(measured.cold_ms);
                build.figures.warm_ms.extend(measured.warm_ms);
                build.figures.peak_rss_kib.extend(measured.peak_rss_kib);
            }
        }
        for (label, build) in ["before", "after"].iter().zip(&builds) {
            out.push_str(&row(function, label, &build.dir, &build.figures));
        }
    }
    drop(stack);
    Ok(out)
}

/// The command line: `BEFORE [AFTER] [RUNS]` (AFTER defaults to `target/lambda-host`, RUNS
/// to 20).
pub async fn command(
    before: PathBuf,
    after: Option<PathBuf>,
    runs: usize,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let after = after.unwrap_or_else(|| fleet_testkit::repo_root().join("target/lambda-host"));
    let table = compare(&before, &after, runs).await?;
    println!(
        "{} (before) against {} (after), {runs} runs each taking turns, {} warm invocations per run, on the demo data:\n",
        before.display(),
        after.display(),
        crate::bench::cold_start::WARM_INVOCATIONS
    );
    print!("{table}");
    Ok(())
}
