//! `fleet-perf bench` (`make bench`): one run on DynamoDB Local that measures what the code
//! costs and how fast it is, and writes `docs/benchmarks.md` and its JSON twin
//! `docs/benchmarks.json`:
//!
//! 1. every access pattern's requests and consumed capacity (the reference measurement that
//!    `make docs` uses) and its latency over a few hundred warm calls of its route;
//! 2. ingest throughput of the handler against the raw BatchWriteItem ceiling of the same
//!    DynamoDB Local, and by arrival order (oldest first, newest first, shuffled, replay);
//! 3. cold start and memory of each release bootstrap;
//! 4. the Python + boto3 peer on the dashboard and ingest paths, cold and warm, as ratios;
//! 5. the power-tuning table: both paths of both implementations under the CPU each Lambda
//!    memory size gets (a cgroup CPU quota from the first `/next` poll on);
//! 6. cold starts with DynamoDB Local behind TLS, as on AWS, beside the plain ones.
//!
//! Every function runs as its release bootstrap (`make smoke-build`) under the local Lambda
//! Runtime API, never in this process: the figures are the shipped binary's, and the Python
//! peer runs under exactly the same harness. Nothing here asserts a speed.

pub mod bootstrap;
pub mod cold_start;
pub mod common;
pub mod compare;
pub mod cpu_quota;
pub mod figures;
pub mod ingest;
pub mod orders;
pub mod orgs;
pub mod patterns;
pub mod peer;
pub mod power;
pub mod report;
pub mod runtime_api;
pub mod tls;
pub mod tls_endpoint;
pub mod webhooks;

use std::collections::BTreeMap;
use std::path::Path;

use shared::model::timestamp::Timestamp;

use bootstrap::{BootstrapError, Launch};
use common::{function_binaries, function_environments, BenchError, INGEST_FROM};
use figures::{join_patterns, load_average, BenchReport, IngestFigures, Machine, Settings};
use fleet_testkit::dynamodb_local::{default_install_dir, DynamoDbLocal};
use fleet_testkit::pricing::measure_priced;
use fleet_testkit::reference::{seed, REFERENCE_RETENTION_DAYS};
use fleet_testkit::stack::{create_table, local_sdk_config, local_table};
use fleet_testkit::template::{default_template_path, Template};

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
    let mut measured = measure_priced(&reference, &tokens)
        .await
        .map_err(BenchError::setup)?;
    // An organization's dashboard beside the owner's (issue 33), seeded after the reference
    // measurement so its figures are unchanged.
    let org = orgs::seed(&reference).await.map_err(BenchError::setup)?;
    // The rollouts the firmware calls pause, resume and cancel, after the runs (the rollout
    // worker's would walk them).
    fleet_testkit::reference::seed_rollout_fixtures(&reference)
        .await
        .map_err(BenchError::setup)?;
    measured.push(
        orgs::measure(&reference, &org)
            .await
            .map_err(BenchError::setup)?,
    );
    let reference_env = environments(reference.name())?;

    eprintln!(
        "bench: latency of each pattern ({} calls each)",
        settings.calls
    );
    let latencies = patterns::measure(
        patterns::cases(&tokens, ingest_from)
            .into_iter()
            .chain(orgs::cases(&org))
            .collect(),
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
        "bench: ingest by arrival order ({} devices, {} rounds)",
        settings.devices, settings.rounds
    );
    let orders = orders::measure(
        &template,
        &binaries,
        &endpoint,
        &new_table,
        (&settings).into(),
        ingest_from,
        &logs.join("orders"),
    )
    .await?;

    eprintln!(
        "bench: cold start and memory of each release bootstrap ({} runs)",
        settings.cold_runs
    );
    let demo = new_table("bench-demo".to_string()).await?;
    fleet_testkit::demo::seed(&demo)
        .await
        .map_err(BenchError::setup)?;
    let bootstraps =
        crate::bench::cold_start::measure(&template, &endpoint, &demo, settings.cold_runs).await?;

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
        orders,
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

/// `fleet-perf bench-orders`: only the ingest by arrival order, printed (nothing written).
pub async fn orders_command(
    settings: Settings,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let logs = fleet_testkit::repo_root().join("target/bench/orders");
    std::fs::create_dir_all(&logs)?;
    let template = Template::load(&default_template_path())?;
    let binaries = function_binaries(&template);
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let endpoint = dynamodb.endpoint().to_string();
    let new_table = |name: String| bench_table(&template, &endpoint, name);
    let from = Timestamp::parse_field("ingest_from", INGEST_FROM)?;
    let figures = orders::measure(
        &template,
        &binaries,
        &endpoint,
        &new_table,
        (&settings).into(),
        from,
        &logs,
    )
    .await?;
    print!("{}", orders::markdown(&figures));
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
