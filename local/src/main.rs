//! `fleet-local`: the local stack's command line.
//!
//! - `fleet-local dev`: DynamoDB Local + table from template.yaml + demo data + the HTTP API on
//!   127.0.0.1 (`PORT`, default 3000). Ctrl-C stops everything.
//! - `fleet-local invoke <FunctionLogicalId> <event.json> [--endpoint URL --table NAME]`: one
//!   sample event through one function, like `sam local invoke -e`. Without `--endpoint` it
//!   runs on a fresh DynamoDB Local with the demo data. With `--bootstrap` the event goes
//!   through the function's release bootstrap under a local Lambda Runtime API.
//! - `fleet-local cold-start [RUNS]`: cold start, warm latency and memory of each release
//!   bootstrap.
//! - `fleet-local bench [CALLS]`: the benchmark; writes docs/benchmarks.md and .json.
//! - `fleet-local bench-compare BEFORE_DIR [AFTER_DIR] [RUNS]`: two builds of the bootstraps,
//!   run by run in turns.

use std::sync::Arc;

use fleet_local::demo;
use fleet_local::dev_server::{self, DevServer};
use fleet_local::dynamodb_local::{default_install_dir, DynamoDbLocal};
use fleet_local::functions::invoke;
use fleet_local::stack::{create_table, local_table};
use fleet_local::template::{default_template_path, Template};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("dev") => dev().await,
        Some("invoke") => invoke_command(&args[1..]).await,
        Some("ingest-throughput") => ingest_throughput(&args[1..]).await,
        Some("docs") => docs(args.get(1).map(String::as_str) == Some("--check")).await,
        Some("scan-throughput") => scan_throughput(&args[1..]).await,
        Some("load") => load(&args[1..]).await,
        Some("cold-start") => cold_start(&args[1..]).await,
        Some("simulate") => fleet_local::simulate::command(&args[1..]),
        Some("cost") => fleet_local::cost::command(&args[1..]),
        Some("bench") => fleet_local::bench::command(&args[1..]).await,
        Some("bench-compare") => fleet_local::bench::compare::command(&args[1..]).await,
        Some("fault-run") => fault_run(&args[1..]).await,
        _ => Err(USAGE.into()),
    };
    if let Err(err) = result {
        eprintln!("fleet-local: {err}");
        std::process::exit(1);
    }
}

const USAGE: &str = "usage: fleet-local dev | fleet-local invoke <FunctionLogicalId> <event.json> [--endpoint URL --table NAME] [--bootstrap] | fleet-local ingest-throughput [DEVICES] [BATCHES] | fleet-local scan-throughput [DEVICES] [BATCHES] | fleet-local cold-start [RUNS] | fleet-local docs [--check] | fleet-local simulate [--check] [PROFILE...] | fleet-local cost [--check] [PROFILE...] | fleet-local bench [CALLS] | fleet-local bench-compare BEFORE_DIR [AFTER_DIR] [RUNS] | fleet-local fault-run [SEED:RATE...] | fleet-local load [SECONDS] [CONCURRENCY]";

/// Cold start, warm latency and memory of every release bootstrap, on the demo data.
async fn cold_start(args: &[String]) -> Result<(), Error> {
    let runs: usize = args.first().map(|r| r.parse()).transpose()?.unwrap_or(5);
    let template = Template::load(&default_template_path())?;
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let table = local_table(dynamodb.endpoint(), "device-fleet-cold-start").await;
    create_table(&table.client, &template.table, "device-fleet-cold-start").await?;
    demo::seed(&table).await?;
    let results =
        fleet_local::cold_start::measure(&template, dynamodb.endpoint(), &table, runs).await?;
    println!(
        "Release bootstraps (target/lambda-host), {runs} cold starts each + {} warm invocations per run, on {}:\n",
        fleet_local::cold_start::WARM_INVOCATIONS,
        machine_summary()
    );
    print!("{}", fleet_local::cold_start::markdown(&results));
    let json = fleet_local::repo_root().join("target/cold-start.json");
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
    use fleet_local::model_docs::{render, MARKDOWN_PATH, MODEL_PATH};
    use fleet_local::reference::{measure_patterns, seed, REFERENCE_RETENTION_DAYS};
    let template = Template::load(&default_template_path())?;
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let mut table = local_table(dynamodb.endpoint(), "device-fleet-docs").await;
    table.config.retention_days = REFERENCE_RETENTION_DAYS;
    create_table(&table.client, &template.table, "device-fleet-docs").await?;
    let tokens = seed(&table).await?;
    let measurements = measure_patterns(&table, &tokens).await?;
    let (markdown, model) = render(&measurements);
    let root = fleet_local::repo_root();
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
async fn fault_run(args: &[String]) -> Result<(), Error> {
    use fleet_local::fault_run::{ingest_fault_run, IngestLoad, FAULT_RUN_HEADER};
    let defaults = ["5:0.05", "15:0.15", "30:0.30", "60:0.60"].map(String::from);
    let runs = if args.is_empty() { &defaults[..] } else { args };
    let template = Template::load(&default_template_path())?;
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
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
    for run in runs {
        let (seed, rate) = run
            .split_once(':')
            .and_then(|(s, r)| Some((s.parse().ok()?, r.parse().ok()?)))
            .ok_or("give runs as SEED:RATE, e.g. 30:0.30")?;
        println!(
            "{}",
            ingest_fault_run(dynamodb.endpoint(), &template.table, seed, rate, load).await?
        );
    }
    Ok(())
}

/// Items/s of the daily analytics scan over a table filled through the ingest handler.
async fn scan_throughput(args: &[String]) -> Result<(), Error> {
    let devices: usize = args.first().map(|a| a.parse()).transpose()?.unwrap_or(20);
    let batches: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(10);
    let template = Template::load(&default_template_path())?;
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let table = local_table(dynamodb.endpoint(), "device-fleet-scan").await;
    create_table(&table.client, &template.table, "device-fleet-scan").await?;
    fleet_local::throughput::measure(&table, devices, batches).await?;
    let day = shared::timestamp::Timestamp::now()
        .plus_seconds(-86_400)
        .day();
    let plan = shared::ops::analytics::RunPlan::new(
        &day,
        4,
        std::time::Instant::now() + std::time::Duration::from_secs(900),
    )?;
    let started = std::time::Instant::now();
    let outcome = shared::ops::analytics::run_daily_report(&table, &plan).await?;
    let elapsed = started.elapsed();
    let report = outcome.report.ok_or("the run did not complete")?;
    let items = report["run"]["itemsScanned"].as_f64().unwrap_or(0.0);
    println!(
        "daily analytics on DynamoDB Local ({} build, 4 segments): {} items scanned in {:.2} s: {:.0} items/s; {} RCU, {} WCU, {} requests",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        items,
        elapsed.as_secs_f64(),
        items / elapsed.as_secs_f64(),
        report["run"]["rcu"],
        report["run"]["wcu"],
        report["run"]["requests"],
    );
    Ok(())
}

/// A bounded load test of the dev server on loopback (see `fleet_local::load`).
async fn load(args: &[String]) -> Result<(), Error> {
    let seconds: u64 = args.first().map(|a| a.parse()).transpose()?.unwrap_or(30);
    let concurrency: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(16);
    let config = fleet_local::load::LoadConfig {
        duration: std::time::Duration::from_secs(seconds),
        concurrency,
        ..Default::default()
    };
    let template = Template::load(&default_template_path())?;
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let table = local_table(dynamodb.endpoint(), "device-fleet-load").await;
    create_table(&table.client, &template.table, "device-fleet-load").await?;
    demo::seed(&table).await?;
    let report = fleet_local::load::run(&template, &table, config).await?;
    print!("{}", report.render());
    Ok(())
}

async fn ingest_throughput(args: &[String]) -> Result<(), Error> {
    let devices: usize = args.first().map(|a| a.parse()).transpose()?.unwrap_or(8);
    let batches: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(25);
    let template = Template::load(&default_template_path())?;
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let table = local_table(dynamodb.endpoint(), "device-fleet-throughput").await;
    create_table(&table.client, &template.table, "device-fleet-throughput").await?;
    let run = fleet_local::throughput::measure(&table, devices, batches).await?;
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

async fn dev() -> Result<(), Error> {
    shared::telemetry::init_json_logs();
    let template = Template::load(&default_template_path())?;
    let port: u16 = std::env::var("PORT")
        .ok()
        .map(|p| p.parse())
        .transpose()
        .map_err(|_| "PORT must be a port number")?
        .unwrap_or(3000);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port} ({e}); set PORT to a free port"))?;
    eprintln!("Starting DynamoDB Local...");
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let table_name = "device-fleet-dev";
    let table = local_table(dynamodb.endpoint(), table_name).await;
    create_table(&table.client, &template.table, table_name).await?;
    let devices = demo::seed(&table).await?;
    // The daily report for today's demo data, through the daily-analytics handler.
    let today = shared::timestamp::Timestamp::now().day();
    daily_analytics::handle(
        &table,
        &daily_analytics::AnalyticsConfig::default(),
        serde_json::json!({ "date": today }),
        std::time::Instant::now() + std::time::Duration::from_secs(60),
    )
    .await?;
    let server = Arc::new(DevServer::new(&template, &table));
    let tokens: Vec<(String, String)> = demo::USERS
        .iter()
        .map(|u| {
            (
                u.sub.to_string(),
                server.authorizer.issue(u.sub, u.email, u.admin),
            )
        })
        .collect();
    print_banner(
        port,
        dynamodb.endpoint(),
        table_name,
        &server,
        &tokens,
        &devices,
    );
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
    };
    dev_server::serve(listener, server, shutdown).await?;
    eprintln!("\nStopping DynamoDB Local.");
    drop(dynamodb);
    Ok(())
}

fn print_banner(
    port: u16,
    endpoint: &str,
    table: &str,
    server: &DevServer,
    tokens: &[(String, String)],
    devices: &[demo::DemoDevice],
) {
    let url = format!("http://127.0.0.1:{port}");
    let token_of = |sub: &str| {
        tokens
            .iter()
            .find(|(s, _)| s == sub)
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    };
    let alice = token_of("demo-alice");
    let operator = token_of("demo-operator");
    println!("\nDevice Fleet is running locally.\n");
    println!("  API             {url}");
    println!("  DynamoDB Local  {endpoint}  (table {table}, region us-east-1, any credentials)");
    println!("\nRoutes (from template.yaml):");
    for route in server.routes() {
        let auth = if route.authorized {
            "JWT"
        } else {
            "device token"
        };
        println!("  {:<40} {:<28} {auth}", route.route_key(), route.function);
    }
    println!("\nUsers (tokens from the local stand-in for the JWT authorizer):");
    for user in &demo::USERS {
        let role = if user.admin { " (admin)" } else { "" };
        println!("  {:<14} {}{role}", user.sub, token_of(user.sub));
    }
    println!("\nDevice tokens (shown once at registration):");
    for d in devices {
        println!("  {:<14} {:<16} {}", d.owner, d.device_id, d.token);
    }
    println!("\nTry:");
    println!("  curl -s {url}/me/dashboard -H 'Authorization: Bearer {alice}'");
    println!("  curl -s '{url}/me/devices?tag=home' -H 'Authorization: Bearer {alice}'");
    println!("  curl -s '{url}/me/devices/thermo-kitchen/events?limit=5' -H 'Authorization: Bearer {alice}'");
    println!("  curl -s '{url}/admin/devices?status=active' -H 'Authorization: Bearer {operator}'");
    let today = shared::timestamp::Timestamp::now().day();
    println!("  curl -s {url}/admin/reports/{today} -H 'Authorization: Bearer {operator}'   # the daily report, run at start-up");
    println!("  curl -i -X PUT {url}/me -H 'Authorization: Bearer {alice}' -H 'Content-Type: application/json' -d '{{\"name\":\"Alice Liddell\"}}'");
    println!("  curl -i -X POST {url}/me/devices -H 'Authorization: Bearer {alice}' -H 'Content-Type: application/json' -d '{{\"deviceId\":\"thermo-attic\",\"name\":\"Attic\",\"type\":\"thermostat\",\"tags\":[\"home\"]}}'");
    println!("  curl -i -X PATCH {url}/me/devices/thermo-kitchen -H 'Authorization: Bearer {alice}' -H 'If-Match: 1' -H 'Content-Type: application/json' -d '{{\"status\":\"maintenance\"}}'");
    println!("  curl -i -X DELETE {url}/me/devices/door-front -H 'Authorization: Bearer {alice}'");
    println!("  curl -i -X PUT {url}/me -H 'Content-Type: application/json' -d '{{\"name\":\"nobody\"}}'   # 401: no token");
    let kitchen = devices
        .iter()
        .find(|d| d.device_id == "thermo-kitchen")
        .map(|d| d.token.clone())
        .unwrap_or_default();
    println!("  curl -i -X POST {url}/devices/thermo-kitchen/events -H 'Authorization: Bearer {kitchen}' -H 'Content-Type: application/json' -d \"{{\\\"events\\\":[{{\\\"type\\\":\\\"temperature\\\",\\\"value\\\":21.5,\\\"at\\\":\\\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\\\"}}]}}\"");
    println!("\nEach request logs one JSON line below. Ctrl-C stops the API and DynamoDB Local.\n");
}

async fn invoke_command(args: &[String]) -> Result<(), Error> {
    let (function, event_path) = match args {
        [f, e, ..] => (f.as_str(), e.as_str()),
        _ => return Err(USAGE.into()),
    };
    let option = |name: &str| args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone());
    let event = std::fs::read_to_string(event_path)
        .map_err(|e| format!("cannot read {event_path}: {e}"))?;
    let template = Template::load(&default_template_path())?;
    // Keep DynamoDB Local alive until the invocation is done.
    let mut _dynamodb = None;
    let table = match (option("--endpoint"), option("--table")) {
        (Some(endpoint), Some(name)) => local_table(&endpoint, &name).await,
        (None, None) => {
            let local = DynamoDbLocal::start(&default_install_dir())?;
            let mut table = local_table(local.endpoint(), "device-fleet-invoke").await;
            // The samples in events/ carry fixed timestamps; keep them inside retention.
            table.config.retention_days = 3650;
            create_table(&table.client, &template.table, "device-fleet-invoke").await?;
            demo::seed(&table).await?;
            _dynamodb = Some(local);
            table
        }
        _ => return Err("give both --endpoint and --table, or neither".into()),
    };
    if args.iter().any(|a| a == "--bootstrap") {
        let endpoint = match (&_dynamodb, option("--endpoint")) {
            (Some(local), _) => local.endpoint().to_string(),
            (None, Some(endpoint)) => endpoint,
            (None, None) => unreachable!("an endpoint was chosen above"),
        };
        let overrides = fleet_local::bootstrap::retention_override(table.config.retention_days);
        let outcome = fleet_local::bootstrap::invoke_once(
            &template,
            function,
            event.as_bytes(),
            &endpoint,
            table.name(),
            &overrides,
        )
        .await?;
        println!("{}", serde_json::to_string_pretty(&outcome_json(&outcome))?);
        return Ok(());
    }
    let response = invoke(&template, &table, function, &event).await?;
    println!("{}", serde_json::to_string_pretty(&response)?);
    Ok(())
}

/// A bootstrap's answer as `sam local invoke` prints it: the response payload, or Lambda's
/// error object.
fn outcome_json(outcome: &fleet_local::runtime_api::Outcome) -> serde_json::Value {
    use fleet_local::runtime_api::Outcome;
    match outcome {
        Outcome::Response(value) => value.clone(),
        Outcome::Error {
            error_type,
            message,
        } => serde_json::json!({"errorType": error_type, "errorMessage": message}),
    }
}
