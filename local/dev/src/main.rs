//! `fleet-dev`: the developer tool's command line (`fleet-dev --help`).
//!
//! - `fleet-dev serve`: DynamoDB Local + table from template.yaml + demo data + the HTTP API on
//!   127.0.0.1 (`PORT`, default 3000). Ctrl-C stops everything.
//! - `fleet-dev invoke <FunctionLogicalId> <event.json> [--endpoint URL --table NAME]
//!   [--bootstrap]`: one sample event through one function, like `sam local invoke -e`.
//!   Without `--endpoint` it runs on a fresh DynamoDB Local with the demo data. With
//!   `--bootstrap` the event goes through the function's release bootstrap under aws-lambda-rie
//!   (the emulator of `sam local invoke`, from the SAM CLI in `.venv/`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use fleet_dev::console::{self, Console, StandInUser};
use fleet_dev::dev_server::{self, DevServer};
use fleet_testkit::demo;
use fleet_testkit::functions::invoke;
use fleet_testkit::stack::{local_table, LocalStack};
use fleet_testkit::template::{default_template_path, Template};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Device Fleet on this machine: the whole system, or one event through one function.
#[derive(Parser)]
#[command(name = "fleet-dev")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// DynamoDB Local, demo data and the HTTP API on 127.0.0.1:$PORT (default 3000).
    Serve,
    /// One event through one function, like `sam local invoke -e`.
    Invoke(InvokeArgs),
    /// The `--env-vars` file for `sam local invoke` / `start-api` (Docker) on a running
    /// DynamoDB Local (the endpoint and table `make dev` prints), on stdout.
    SamEnv(SamEnvArgs),
}

#[derive(Args)]
struct SamEnvArgs {
    /// The DynamoDB endpoint the functions' containers reach (with `--docker-network host`,
    /// make dev's `http://127.0.0.1:<port>`).
    #[arg(long)]
    endpoint: String,
    /// The table at `--endpoint`.
    #[arg(long)]
    table: String,
}

#[derive(Args)]
struct InvokeArgs {
    /// The function's logical id in template.yaml, e.g. DeviceUpdatesFunction.
    function: String,
    /// The event file, e.g. events/put-me.json.
    event: PathBuf,
    /// A running DynamoDB endpoint to use instead of a fresh DynamoDB Local with demo data.
    #[arg(long, requires = "table")]
    endpoint: Option<String>,
    /// The table at `--endpoint`.
    #[arg(long, requires = "endpoint")]
    table: Option<String>,
    /// Through the function's release bootstrap under aws-lambda-rie.
    #[arg(long)]
    bootstrap: bool,
}

/// Prints the `--env-vars` file for `sam local` on `args`' endpoint and table.
fn sam_env(args: SamEnvArgs) -> Result<(), Error> {
    let template =
        fleet_testkit::template::Template::load(&fleet_testkit::template::default_template_path())?;
    let file = fleet_testkit::rie::sam_env_vars(&template, &args.endpoint, &args.table)?;
    println!("{}", serde_json::to_string_pretty(&file)?);
    Ok(())
}

#[tokio::main]
async fn main() {
    let result = match Cli::parse().command {
        Command::Serve => serve().await,
        Command::Invoke(args) => invoke_command(args).await,
        Command::SamEnv(args) => sam_env(args),
    };
    if let Err(err) = result {
        eprintln!("fleet-dev: {err}");
        std::process::exit(1);
    }
}

/// DynamoDB Local, the table, demo data and today's daily report, then the HTTP API until
/// Ctrl-C or SIGTERM.
async fn serve() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
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
    let stack = LocalStack::start()?;
    let table_name = "device-fleet-dev";
    let table = stack.table(table_name).await?;
    let devices = demo::seed(&table).await?;
    // The daily report for today's demo data, through the daily-analytics handler.
    let today = shared::model::timestamp::Timestamp::now().day();
    daily_analytics::handle(
        &table,
        &daily_analytics::AnalyticsConfig::default(),
        serde_json::json!({ "date": today }),
        std::time::Instant::now() + std::time::Duration::from_secs(60),
    )
    .await?;
    // The device with a month of minute readings is written while the API already serves (it
    // takes about a minute): `make dev` is usable at once, and this line says when it is done.
    let history_table = table.clone();
    tokio::spawn(async move {
        let seeding = std::time::Instant::now();
        match demo::seed_history(&history_table).await {
            Ok(device) => println!(
                "Demo history ready: {} days of minute readings for {} (token {}) in {:.1} s.",
                demo::HISTORY_DAYS,
                device.device_id,
                device.token,
                seeding.elapsed().as_secs_f64()
            ),
            Err(e) => eprintln!("The demo history could not be written: {e}"),
        }
    });
    // moto's server as SQS and S3 (webhook deliveries, firmware images), then the delivery
    // worker on its queue; without it (not installed) the rest still runs.
    let local_aws = match fleet_dev::local_aws::start_local_aws().await {
        Ok(local_aws) => Some(local_aws),
        Err(err) => {
            eprintln!("webhooks and firmware images off ({err}); run `make moto-server`");
            None
        }
    };
    let webhooks = match &local_aws {
        Some(aws) => Some(fleet_dev::local_aws::start_deliveries(&table, aws)?),
        None => None,
    };
    // alarm-watch as on AWS: the schedule every minute, the stream's transitions logged (and
    // delivered to the fleets' webhooks).
    tokio::spawn(fleet_dev::alarms::watch_alarms(
        table.clone(),
        stack.endpoint().to_string(),
        webhooks,
    ));
    let server = Arc::new(DevServer::new(&stack.template, &table));
    let console = Console {
        dir: console_dir(),
        security_headers: with_image_uploads(
            stack
                .template
                .console_headers
                .as_ref()
                .map(|h| h.local_headers())
                .unwrap_or_default(),
            local_aws.as_ref().map(|aws| aws.moto.endpoint()),
        ),
        users: demo::USERS
            .iter()
            .map(|u| StandInUser {
                sub: u.sub.into(),
                email: u.email.into(),
                name: u.name.into(),
                admin: u.admin,
            })
            .collect(),
    };
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
        stack.endpoint(),
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
    let app = console::with_console(server.clone().app(), server, Arc::new(console));
    dev_server::serve_app(listener, app, shutdown).await?;
    eprintln!("\nStopping DynamoDB Local.");
    drop(stack);
    Ok(())
}

/// The console's headers with moto's server (`images`) added to the policy's `connect-src`:
/// locally it stands in for the template's `https://*.s3.${AWS::Region}...` (dropped with the
/// other AWS origins), where the console PUTs firmware images with presigned URLs.
fn with_image_uploads(
    headers: Vec<(&'static str, String)>,
    images: Option<&str>,
) -> Vec<(&'static str, String)> {
    let Some(images) = images else {
        return headers;
    };
    let origin = images.trim_end_matches('/');
    headers
        .into_iter()
        .map(|(name, value)| {
            if name != "content-security-policy" {
                return (name, value);
            }
            let value = value
                .split("; ")
                .map(|directive| match directive.strip_prefix("connect-src ") {
                    Some(sources) => format!("connect-src {sources} {origin}"),
                    None => directive.to_string(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            (name, value)
        })
        .collect()
}

/// The built console: `FLEET_CONSOLE_DIR`, else `web/dist` of this repository (`make dev`
/// builds it first); `None` when it has no `index.html`.
fn console_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("FLEET_CONSOLE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => default_template_path().parent()?.join("web/dist"),
    };
    if dir.join("index.html").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "The web console is not built ({} has no index.html): `make dev` builds it.",
            dir.display()
        );
        None
    }
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
    println!("  Console         {url}/   (sign in as a demo user)");
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
    println!("  curl -s '{url}/me/devices/weather-roof/series?type=temperature&resolution=1h' -H 'Authorization: Bearer {alice}'   # summaries of its 30 days");
    println!("  curl -s '{url}/admin/devices?status=active' -H 'Authorization: Bearer {operator}'");
    let today = shared::model::timestamp::Timestamp::now().day();
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

/// One sample event through one function, in-process or through its release bootstrap.
async fn invoke_command(args: InvokeArgs) -> Result<(), Error> {
    let InvokeArgs {
        function,
        event: event_path,
        endpoint,
        table,
        bootstrap,
    } = args;
    let event = std::fs::read_to_string(&event_path)
        .map_err(|e| format!("cannot read {}: {e}", event_path.display()))?;
    let template = Template::load(&default_template_path())?;
    // Keep DynamoDB Local alive until the invocation is done.
    let mut _dynamodb = None;
    let table = match (&endpoint, &table) {
        (Some(endpoint), Some(name)) => local_table(endpoint, name).await,
        (None, None) => {
            let local = LocalStack::start()?;
            let mut table = local.table("device-fleet-invoke").await?;
            // The samples in events/ carry fixed timestamps; keep them inside retention.
            table.config.retention_days = 3650;
            demo::seed(&table).await?;
            _dynamodb = Some(local);
            table
        }
        _ => unreachable!("clap requires --endpoint and --table together"),
    };
    if bootstrap {
        let endpoint = match (&_dynamodb, endpoint) {
            (Some(local), _) => local.endpoint().to_string(),
            (None, Some(endpoint)) => endpoint,
            (None, None) => unreachable!("an endpoint was chosen above"),
        };
        // Through the release bootstrap under aws-lambda-rie, the emulator `sam local invoke`
        // runs, one cold emulator as SAM starts one container per invocation.
        let overrides = fleet_testkit::bootstrap::retention_override(table.config.retention_days);
        let definition = template
            .function_definitions
            .get(&function)
            .ok_or_else(|| format!("template.yaml has no function {function}"))?;
        let env = fleet_testkit::bootstrap::function_environment(
            &template,
            &function,
            &endpoint,
            table.name(),
            &overrides,
        )?;
        let env = fleet_testkit::rie::sam_environment(&env, definition.timeout_seconds);
        let log = fleet_testkit::repo_root()
            .join("target/invoke")
            .join(format!("{function}.log"));
        let outcome = fleet_testkit::rie::invoke_cold(
            &fleet_testkit::bootstrap::host_bootstrap(&definition.binary),
            &env,
            event.as_bytes(),
            std::time::Duration::from_secs(u64::from(definition.timeout_seconds) + 30),
            &log,
        )
        .await;
        // Echo the function's own log lines, as sam local invoke does, up to the emulator's
        // REPORT line (after it, the bootstrap only notices that the emulator has stopped).
        if let Ok(text) = std::fs::read_to_string(&log) {
            for line in text.lines() {
                eprintln!("{line}");
                if line.starts_with("REPORT RequestId") {
                    break;
                }
            }
        }
        let outcome = outcome?;
        println!("{}", serde_json::to_string_pretty(&outcome_json(&outcome))?);
        return Ok(());
    }
    let response = invoke(&template, &table, &function, &event).await?;
    println!("{}", serde_json::to_string_pretty(&response)?);
    Ok(())
}

/// A bootstrap's answer as `sam local invoke` prints it: the response payload, or Lambda's
/// error object.
fn outcome_json(outcome: &fleet_testkit::outcome::Outcome) -> serde_json::Value {
    use fleet_testkit::outcome::Outcome;
    match outcome {
        Outcome::Response(value) => value.clone(),
        Outcome::Error {
            error_type,
            message,
        } => serde_json::json!({"errorType": error_type, "errorMessage": message}),
    }
}
