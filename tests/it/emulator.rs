//! The ecosystem's own emulator works, tried as a new user would: one `cargo lambda watch`
//! (cargo-lambda from `.venv/`, pinned in tools/requirements.txt) serves the four functions,
//! and every sample event in `events/` goes through `cargo lambda invoke <binary>
//! --data-file events/<sample>.json`, against DynamoDB Local with the demo data, answering the
//! status `events/manifest.json` gives. Next to `rie.rs` (AWS's emulator and the release
//! bootstraps): cargo-lambda's emulator sends what a real Lambda would not (a fixed
//! `Lambda-Runtime-Deadline-Ms` in 1970), so this is where `shared::store::deadline` is proven.
//! `make emulator-replay` runs this module alone.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fleet_testkit::bootstrap::{function_environment, retention_override};
use fleet_tests::*;
use serde_json::Value;
use tokio::process::{Child, Command};

/// The `cargo` of `.venv/bin` first on `PATH`, so `cargo lambda` is the pinned cargo-lambda.
fn venv_path() -> String {
    let venv = fleet_testkit::repo_root().join(".venv/bin");
    match std::env::var("PATH") {
        Ok(path) => format!("{}:{path}", venv.display()),
        Err(_) => venv.display().to_string(),
    }
}

/// One `cargo lambda watch`, stopped (with the functions it started) when dropped.
struct Watch {
    child: Child,
    port: u16,
}

impl Watch {
    async fn start(env_file: &std::path::Path, log: &std::path::Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = std::fs::File::create(log).expect("watch log");
        let child = Command::new("cargo")
            .args(["lambda", "watch", "--ignore-changes", "--quiet"])
            .args(["--invoke-address", "127.0.0.1", "--invoke-port"])
            .arg(port.to_string())
            .arg("--env-file")
            .arg(env_file)
            .current_dir(fleet_testkit::repo_root())
            .env("PATH", venv_path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("watch log"))
            .stderr(log)
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .expect("cargo lambda watch (make python-tools installs cargo-lambda into .venv/)");
        let watch = Self { child, port };
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return watch;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("cargo lambda watch did not listen on {port} within a minute");
    }

    /// `cargo lambda invoke <binary> --data-file <sample>`: the status the function answered
    /// (an API Gateway response's `statusCode`; for an invocation that is not behind API
    /// Gateway, 200 when it succeeded) and what cargo-lambda printed.
    async fn invoke(&self, binary: &str, sample: &std::path::Path) -> (u16, String) {
        let out = Command::new("cargo")
            .args(["lambda", "invoke", binary, "--output-format", "json"])
            .args(["--invoke-address", "127.0.0.1", "--invoke-port"])
            .arg(self.port.to_string())
            .arg("--data-file")
            .arg(sample)
            .env("PATH", venv_path())
            .stdin(Stdio::null())
            .output()
            .await
            .expect("cargo lambda invoke");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return (500, printed);
        }
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let status = match answer.get("statusCode") {
            Some(code) => code.as_u64().map_or(0, |c| c as u16),
            None => 200,
        };
        (status, printed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // The whole process group: cargo-lambda and the function processes it started.
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", "--", &format!("-{pid}")])
                .status();
        }
    }
}

#[tokio::test]
async fn every_sample_event_gets_its_expected_status_through_cargo_lambda_watch() {
    let (table, _) = demo_table().await;
    // The samples carry fixed timestamps: keep them inside retention, as rie.rs does.
    let overrides = retention_override(SAMPLE_RETENTION_DAYS);
    // One watch process serves every function, so its environment is the union of theirs
    // (the template's Globals plus each function's own settings, which do not collide);
    // cargo-lambda sets the AWS_LAMBDA_* variables itself.
    let mut env = BTreeMap::new();
    let mut binaries = BTreeMap::new();
    for (function, definition) in &template().function_definitions {
        let vars = function_environment(template(), function, endpoint(), table.name(), &overrides)
            .expect("function environment");
        for (name, value) in vars {
            if name.starts_with("AWS_LAMBDA_") {
                continue;
            }
            if let Some(other) = env.insert(name.clone(), value.clone()) {
                assert_eq!(other, value, "{name} differs between functions");
            }
        }
        binaries.insert(function.clone(), definition.binary.clone());
    }
    let dir = fleet_testkit::repo_root().join("target/emulator");
    std::fs::create_dir_all(&dir).unwrap();
    let env_file = dir.join("env");
    let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&env_file, text).unwrap();

    let watch = Watch::start(&env_file, &dir.join("watch.log")).await;
    let mut failures = Vec::new();
    for sample in sample_events() {
        let path: PathBuf = fleet_testkit::samples::events_dir().join(&sample.file);
        let (status, printed) = watch.invoke(&binaries[&sample.function], &path).await;
        if status != sample.status {
            failures.push(format!(
                "{}: expected {}, got {status}: {printed}",
                sample.file, sample.status
            ));
        }
    }
    drop(watch);
    assert!(
        failures.is_empty(),
        "{failures:#?}\n(the emulator's output: target/emulator/watch.log)"
    );
}

/// The fallback of `shared::store::deadline` is each function's configured timeout: the constants
/// are the template's `Timeout`s.
#[test]
fn the_deadline_fallbacks_are_the_template_timeouts() {
    let timeout = |function: &str| {
        Duration::from_secs(
            template().function_definitions[function]
                .timeout_seconds
                .into(),
        )
    };
    assert_eq!(ingest::TIMEOUT, timeout("IngestFunction"));
    assert_eq!(daily_analytics::TIMEOUT, timeout("DailyAnalyticsFunction"));
    assert_eq!(alarm_watch::TIMEOUT, timeout("AlarmWatchFunction"));
    assert_eq!(rollout_worker::TIMEOUT, timeout("RolloutWorkerFunction"));
}
