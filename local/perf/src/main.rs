//! `fleet-perf`: the performance tools' command line (`fleet-perf --help` lists them). Each
//! command starts its own DynamoDB Local with the table from template.yaml.
//!
//! - `cold-start [RUNS]`: cold start, warm latency and memory of each release bootstrap.
//! - `bench [CALLS]`: the benchmark; writes docs/benchmarks.md and .json.
//! - `bench-compare BEFORE_DIR [AFTER_DIR] [RUNS]`: two builds of the bootstraps, in turns.
//! - `docs [--check]`: docs/access-patterns.md and docs/model.json, measured.
//! - `simulate|cost [--check] [PROFILE...]`: the key-distribution simulator and cost model.
//! - `ingest-throughput|scan-throughput [DEVICES] [BATCHES]`, `load [SECONDS] [CONCURRENCY]`,
//!   `fault-run [SEED:RATE...]`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use fleet_testkit::demo;
use fleet_testkit::stack::LocalStack;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Device Fleet's performance tools, on DynamoDB Local.
#[derive(Parser)]
#[command(name = "fleet-perf")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Cold start, warm latency and memory of each release bootstrap (target/lambda-host).
    ColdStart {
        /// Cold starts per function.
        #[arg(default_value_t = 5)]
        runs: usize,
    },
    /// The benchmark: patterns, ingest vs raw BatchWriteItem, cold starts, the Python peer;
    /// writes docs/benchmarks.md and docs/benchmarks.json.
    Bench {
        /// Calls per pattern.
        #[arg(default_value_t = 300)]
        calls: usize,
    },
    /// Only the bench's ingest comparison (Rust, raw BatchWriteItem ceiling, Python peer),
    /// printed: for working on ingest without the whole bench.
    BenchIngest(IngestRun),
    /// Only the bench's ingest by arrival order (oldest first, newest first, shuffled, replay;
    /// 100 events a request and one; unlimited and under the function's Lambda CPU), against
    /// the raw ceiling, printed.
    BenchOrders(IngestRun),
    /// Webhook deliveries a second through the local queue (moto's SQS) to a local receiver,
    /// by concurrent pollers, printed.
    BenchWebhooks {
        /// Deliveries a round.
        #[arg(long, default_value_t = 500)]
        deliveries: usize,
        /// Concurrent pollers, each count measured in turn.
        #[arg(long, value_delimiter = ',', default_value = "1,5")]
        pollers: Vec<usize>,
        /// Rounds per poller count (the median is given).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// Two builds of the release bootstraps, run by run in turns.
    BenchCompare {
        /// The "before" bootstraps (a directory like target/lambda-host).
        before: PathBuf,
        /// The "after" bootstraps (default target/lambda-host).
        after: Option<PathBuf>,
        /// Runs per build.
        #[arg(default_value_t = 20)]
        runs: usize,
    },
    /// Writes docs/access-patterns.md and docs/model.json, measured on the reference dataset.
    Docs {
        /// Verify the files are current instead of writing them.
        #[arg(long)]
        check: bool,
    },
    /// Load per partition key; without profiles, all documented ones into docs/key-distribution.md.
    Simulate {
        /// Verify docs/key-distribution.md is current instead of writing it.
        #[arg(long)]
        check: bool,
        /// Workload profiles (bench/profiles/*.yaml) to print instead.
        profiles: Vec<PathBuf>,
    },
    /// Monthly DynamoDB + Lambda cost; without profiles, all documented ones into docs/cost-model.md.
    Cost {
        /// Verify docs/cost-model.md is current instead of writing it.
        #[arg(long)]
        check: bool,
        /// Workload profiles (bench/profiles/*.yaml) to print instead.
        profiles: Vec<PathBuf>,
    },
    /// Events/s through the ingest handler.
    IngestThroughput {
        /// Devices sending.
        #[arg(default_value_t = 8)]
        devices: usize,
        /// Batches of 100 events per device.
        #[arg(default_value_t = 25)]
        batches: usize,
    },
    /// Items/s of the daily analytics scan over a table filled through the ingest handler.
    ScanThroughput {
        /// Devices sending.
        #[arg(default_value_t = 20)]
        devices: usize,
        /// Batches of 100 events per device.
        #[arg(default_value_t = 10)]
        batches: usize,
    },
    /// A bounded load test of the dev server on loopback.
    Load {
        /// Duration of the run.
        #[arg(default_value_t = 30)]
        seconds: u64,
        /// Concurrent clients.
        #[arg(default_value_t = 16)]
        concurrency: usize,
    },
    /// Ingest through the fault proxy, one run per SEED:RATE (default 5:0.05 15:0.15 30:0.30 60:0.60).
    FaultRun {
        /// Runs as SEED:RATE, e.g. 30:0.30.
        runs: Vec<FaultRun>,
    },
}

/// One fault run: the proxy's seed and fault rate.
#[derive(Clone, Copy)]
struct FaultRun {
    seed: u64,
    rate: f64,
}

impl std::str::FromStr for FaultRun {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.split_once(':')
            .and_then(|(s, r)| Some((s.parse().ok()?, r.parse().ok()?)))
            .map(|(seed, rate)| FaultRun { seed, rate })
            .ok_or_else(|| format!("give runs as SEED:RATE, e.g. 30:0.30 (not {text:?})"))
    }
}

const DEFAULT_FAULT_RUNS: [FaultRun; 4] = [
    FaultRun {
        seed: 5,
        rate: 0.05,
    },
    FaultRun {
        seed: 15,
        rate: 0.15,
    },
    FaultRun {
        seed: 30,
        rate: 0.30,
    },
    FaultRun {
        seed: 60,
        rate: 0.60,
    },
];

/// How much an ingest comparison sends.
#[derive(Args)]
struct IngestRun {
    /// Devices sending at once.
    #[arg(long, default_value_t = 8)]
    devices: usize,
    /// Timed batches of 100 events per device (for the orders, four times as many requests of
    /// one event too).
    #[arg(long, default_value_t = 25)]
    batches: usize,
    /// Rounds (each contender once per round; the median round is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

impl IngestRun {
    fn settings(&self) -> fleet_perf::bench::figures::Settings {
        fleet_perf::bench::figures::Settings {
            devices: self.devices,
            batches: self.batches,
            rounds: self.rounds,
            ..Default::default()
        }
    }
}

#[tokio::main]
async fn main() {
    let result = match Cli::parse().command {
        Command::ColdStart { runs } => cold_start(runs).await,
        Command::Bench { calls } => fleet_perf::bench::command(calls).await,
        Command::BenchIngest(run) => fleet_perf::bench::ingest_command(run.settings()).await,
        Command::BenchOrders(run) => fleet_perf::bench::orders_command(run.settings()).await,
        Command::BenchWebhooks {
            deliveries,
            pollers,
            rounds,
        } => fleet_perf::bench::webhooks::command(deliveries, &pollers, rounds).await,
        Command::BenchCompare {
            before,
            after,
            runs,
        } => fleet_perf::bench::compare::command(before, after, runs).await,
        Command::Docs { check } => docs(check).await,
        Command::Simulate { check, profiles } => {
            fleet_perf::key_distribution::command(&profiles, check)
        }
        Command::Cost { check, profiles } => fleet_perf::cost::command(&profiles, check),
        Command::IngestThroughput { devices, batches } => ingest_throughput(devices, batches).await,
        Command::ScanThroughput { devices, batches } => scan_throughput(devices, batches).await,
        Command::Load {
            seconds,
            concurrency,
        } => load(seconds, concurrency).await,
        Command::FaultRun { runs } => fault_run(runs).await,
    };
    if let Err(err) = result {
        eprintln!("fleet-perf: {err}");
        std::process::exit(1);
    }
}

/// Cold start, warm latency and memory of every release bootstrap, on the demo data.
async fn cold_start(runs: usize) -> Result<(), Error> {
    let stack = LocalStack::start()?;
    let table = stack.table("device-fleet-cold-start").await?;
    demo::seed(&table).await?;
    let results =
        fleet_perf::bench::cold_start::measure(&stack.template, stack.endpoint(), &table, runs)
            .await?;
    println!(
        "Release bootstraps (target/lambda-host), {runs} cold starts each + {} warm invocations per run, on {}:\n",
        fleet_perf::bench::cold_start::WARM_INVOCATIONS,
        machine_summary()
    );
    print!("{}", fleet_perf::bench::cold_start::markdown(&results));
    let json = fleet_testkit::repo_root().join("target/cold-start.json");
    std::fs::write(&json, serde_json::to_string_pretty(&results)?)?;
    println!("\nRaw figures: {}", json.display());
    Ok(())
}

/// CPU model and core count, for figures that depend on the machine.
fn machine_summary() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores")
}

/// Writes (or with `--check`, verifies) docs/access-patterns.md and docs/model.json.
async fn docs(check: bool) -> Result<(), Error> {
    use fleet_perf::model_docs::{render, MARKDOWN_PATH, MODEL_PATH};
    use fleet_testkit::pricing::measure_priced;
    use fleet_testkit::reference::{seed, REFERENCE_RETENTION_DAYS};
    let stack = LocalStack::start()?;
    let mut table = stack.table("device-fleet-docs").await?;
    table.config.retention_days = REFERENCE_RETENTION_DAYS;
    let tokens = seed(&table).await?;
    let measurements = measure_priced(&table, &tokens).await?;
    let (markdown, model) = render(&measurements);
    let root = fleet_testkit::repo_root();
    for (path, text) in [(MARKDOWN_PATH, markdown), (MODEL_PATH, model)] {
        let full = root.join(path);
        if check {
            let current = std::fs::read_to_string(&full).unwrap_or_default();
            if current != text {
                return Err(format!("{path} is stale: run `make docs`").into());
            }
        } else {
            std::fs::write(&full, text)?;
            println!("wrote {path}");
        }
    }
    Ok(())
}

/// Ingest runs through the fault proxy, one per `SEED:RATE` argument: a markdown table of
/// events acknowledged vs stored, answers by status and faults injected by kind.
async fn fault_run(runs: Vec<FaultRun>) -> Result<(), Error> {
    use fleet_testkit::fault_run::{ingest_fault_run, IngestLoad, FAULT_RUN_HEADER};
    let runs = if runs.is_empty() {
        DEFAULT_FAULT_RUNS.to_vec()
    } else {
        runs
    };
    let stack = LocalStack::start()?;
    let load = IngestLoad {
        devices: 4,
        senders: 2,
        batches: 5,
        events: 100,
        max_rounds: 50,
    };
    println!(
        "ingest through the fault proxy ({} build; {} devices x {} senders x {} batches x {} events; client attempt timeout 1 s, delays 1.5 s, Lambda retry window 2 s)\n",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        load.devices, load.senders, load.batches, load.events
    );
    println!("{FAULT_RUN_HEADER}");
    for FaultRun { seed, rate } in runs {
        println!(
            "{}",
            ingest_fault_run(stack.endpoint(), &stack.template.table, seed, rate, load).await?
        );
    }
    Ok(())
}

/// Items/s of the daily analytics scan over a table filled through the ingest handler.
async fn scan_throughput(devices: usize, batches: usize) -> Result<(), Error> {
    let stack = LocalStack::start()?;
    let table = stack.table("device-fleet-scan").await?;
    fleet_perf::throughput::measure(&table, devices, batches).await?;
    let day = shared::model::timestamp::Timestamp::now()
        .plus_seconds(-86_400)
        .day();
    let plan = shared::ops::analytics::RunPlan::new(
        day,
        4,
        std::time::Instant::now() + std::time::Duration::from_secs(900),
    )?;
    let started = std::time::Instant::now();
    let outcome = shared::ops::analytics::run_daily_report(&table, &plan).await?;
    let elapsed = started.elapsed();
    let report = outcome.report.ok_or("the run did not complete")?;
    let run = &report.run;
    let items = run.items_scanned as f64;
    println!(
        "daily analytics on DynamoDB Local ({} build, 4 segments): {} items scanned in {:.2} s: {:.0} items/s; {} RCU, {} WCU, {} requests",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        items,
        elapsed.as_secs_f64(),
        items / elapsed.as_secs_f64(),
        run.rcu,
        run.wcu,
        run.requests,
    );
    Ok(())
}

/// A bounded load test of the dev server on loopback (see `fleet_perf::load`).
async fn load(seconds: u64, concurrency: usize) -> Result<(), Error> {
    let config = fleet_perf::load::LoadConfig {
        duration: std::time::Duration::from_secs(seconds),
        concurrency,
        ..Default::default()
    };
    let stack = LocalStack::start()?;
    let table = stack.table("device-fleet-load").await?;
    demo::seed(&table).await?;
    let report = fleet_perf::load::run(&stack.template, &table, config).await?;
    print!("{}", report.render());
    Ok(())
}

/// Events/s through the ingest handler on DynamoDB Local.
async fn ingest_throughput(devices: usize, batches: usize) -> Result<(), Error> {
    let stack = LocalStack::start()?;
    let table = stack.table("device-fleet-throughput").await?;
    let run = fleet_perf::throughput::measure(&table, devices, batches).await?;
    println!(
        "ingest handler on DynamoDB Local ({} build): {} devices x {} batches x 100 events = {} events acknowledged in {:.2} s: {:.0} events/s; batch latency p50 {:.1} ms, p99 {:.1} ms",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        devices,
        batches,
        run.events,
        run.elapsed.as_secs_f64(),
        run.events_per_second(),
        run.latency(0.5).as_secs_f64() * 1000.0,
        run.latency(0.99).as_secs_f64() * 1000.0,
    );
    Ok(())
}
