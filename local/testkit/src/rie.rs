//! AWS's Lambda Runtime Interface Emulator (`aws-lambda-rie`), the emulator `sam local invoke`
//! runs inside its container in front of the function's bootstrap. The pinned SAM CLI in
//! `.venv/` ships it (`samcli/local/rapid/aws-lambda-rie-<arch>`), and it runs on a host without
//! Docker: here it is started as SAM starts it, one cold emulator per invocation, with the
//! environment SAM gives a function ([`sam_environment`]), and the event is posted to its
//! invoke endpoint as `sam local invoke -e` does. Only the container is missing.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::outcome::Outcome;

/// Why an invocation under the emulator got no outcome.
#[derive(Debug, thiserror::Error)]
pub enum RieError {
    /// The emulator is not installed.
    #[error("aws-lambda-rie not found under .venv/lib/python*/site-packages/samcli/local/rapid/: install the SAM CLI with `make python-tools`")]
    Missing,
    /// The bootstrap is not built.
    #[error("{0} not found: build the bootstraps with `make smoke-build`")]
    MissingBootstrap(PathBuf),
    /// The emulator could not start, or its log could not be written.
    #[error("cannot start aws-lambda-rie: {0}")]
    Spawn(#[from] std::io::Error),
    /// The emulator did not listen in time.
    #[error("aws-lambda-rie did not listen on {0} within 10 s; its output is in {1}")]
    NotListening(String, PathBuf),
    /// The invocation request failed (no answer, or not in time).
    #[error("invoking through aws-lambda-rie failed: {0}; its output is in {1}")]
    Invoke(String, PathBuf),
}

/// The emulator binary of the pinned SAM CLI for this machine's architecture (SAM ships an
/// x86_64 and an arm64 build and mounts the one matching the function's `Architectures`; a
/// local run can only execute the host's).
pub fn rie_binary() -> Result<PathBuf, RieError> {
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "x86_64",
    };
    let lib = crate::repo_root().join(".venv/lib");
    let entries = std::fs::read_dir(&lib).map_err(|_| RieError::Missing)?;
    entries
        .filter_map(Result::ok)
        .map(|python| {
            python
                .path()
                .join("site-packages/samcli/local/rapid")
                .join(format!("aws-lambda-rie-{arch}"))
        })
        .find(|path| path.is_file())
        .ok_or(RieError::Missing)
}

/// What SAM adds to a function's environment in its container (samcli's
/// `local/lambdafn/env_vars.py`) beyond what Lambda itself sets: the function's timeout, which
/// the emulator turns into each invocation's deadline, and `AWS_SAM_LOCAL`. On top of
/// `function_env` (e.g. [`crate::bootstrap::function_environment`]: the template's variables
/// and Lambda's own). `AWS_LAMBDA_RUNTIME_API` is the emulator's to set.
pub fn sam_environment(
    function_env: &BTreeMap<String, String>,
    timeout_seconds: u32,
) -> BTreeMap<String, String> {
    let mut env = function_env.clone();
    env.remove("AWS_LAMBDA_RUNTIME_API");
    env.insert(
        "AWS_LAMBDA_FUNCTION_TIMEOUT".into(),
        timeout_seconds.to_string(),
    );
    env.insert("AWS_SAM_LOCAL".into(), "true".into());
    env.insert("AWS_LAMBDA_INITIALIZATION_TYPE".into(), "on-demand".into());
    env
}

/// The `--env-vars` file of `sam local invoke` / `sam local start-api` (with Docker) for the
/// table `table_name` at `endpoint` (e.g. `make dev`'s DynamoDB Local): per function, every
/// variable the template declares for it, resolved as the local stack resolves them (the
/// samples' `RetentionDays`, the table's name), and `AWS_ENDPOINT_URL_DYNAMODB` pointing at
/// `endpoint`. Only declared variables: SAM ignores any other name in this file.
pub fn sam_env_vars(
    template: &crate::template::Template,
    endpoint: &str,
    table_name: &str,
) -> Result<Value, crate::template::TemplateError> {
    let overrides = crate::bootstrap::retention_override(crate::samples::SAMPLE_RETENTION_DAYS);
    let mut file = serde_json::Map::new();
    for function in template.function_definitions.keys() {
        let mut env = template.function_environment(function, table_name, &overrides)?;
        if let Some(url) = env.get_mut("AWS_ENDPOINT_URL_DYNAMODB") {
            *url = endpoint.to_string();
        }
        file.insert(
            function.clone(),
            serde_json::to_value(env).unwrap_or_default(),
        );
    }
    Ok(Value::Object(file))
}

fn free_address() -> Result<String, RieError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.to_string())
}

/// Runs `event` once through `bootstrap` under a fresh emulator (a cold start, as `sam local
/// invoke` starts a container per invocation), with exactly `env`, the emulator's and the
/// function's output going to `log`; the emulator is stopped afterwards. The emulator starts
/// the bootstrap on the first invocation, as Lambda does.
pub async fn invoke_cold(
    bootstrap: &Path,
    env: &BTreeMap<String, String>,
    event: &[u8],
    timeout: Duration,
    log: &Path,
) -> Result<Outcome, RieError> {
    if !bootstrap.is_file() {
        return Err(RieError::MissingBootstrap(bootstrap.to_path_buf()));
    }
    let rie = rie_binary()?;
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let out = std::fs::File::create(log)?;
    // Two free loopback ports: in a container the emulator owns 8080 and 9001; here several
    // emulators (and other test binaries) run side by side.
    let (invoke_address, runtime_address) = (free_address()?, free_address()?);
    let mut emulator = Command::new(rie)
        .args(["--log-level", "error"])
        .args(["--runtime-interface-emulator-address", &invoke_address])
        .args(["--runtime-api-address", &runtime_address])
        .arg(bootstrap)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()?;
    let result = async {
        let mut listening = false;
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(&invoke_address)
                .await
                .is_ok()
            {
                listening = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !listening {
            return Err(RieError::NotListening(invoke_address.clone(), log.into()));
        }
        let url = format!("http://{invoke_address}/2015-03-31/functions/function/invocations");
        let failed = |e: reqwest::Error| RieError::Invoke(e.to_string(), log.into());
        let body = reqwest::Client::new()
            .post(url)
            .body(event.to_vec())
            .timeout(timeout)
            .send()
            .await
            .map_err(failed)?
            .bytes()
            .await
            .map_err(failed)?;
        Ok(outcome(&body))
    }
    .await;
    let _ = emulator.kill().await;
    result
}

/// The function's answer as the emulator returns it: the result payload, or Lambda's error
/// document (`errorType`, `errorMessage`) when the function failed.
fn outcome(body: &[u8]) -> Outcome {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.get("errorType").is_some() && v.get("statusCode").is_none() => Outcome::Error {
            error_type: v["errorType"].as_str().unwrap_or_default().to_string(),
            message: v["errorMessage"].as_str().unwrap_or_default().to_string(),
        },
        Ok(v) => Outcome::Response(v),
        Err(_) => Outcome::Response(Value::String(String::from_utf8_lossy(body).into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_document_is_a_failed_invocation_and_a_response_is_not() {
        let failed = outcome(br#"{"errorType":"Runtime.ExitError","errorMessage":"exit 1"}"#);
        assert_eq!(failed.status(), 502);
        let answered = outcome(br#"{"statusCode":404,"body":"{}"}"#);
        assert_eq!(answered.status(), 404);
    }

    #[test]
    fn sam_adds_the_timeout_and_leaves_the_runtime_api_to_the_emulator() {
        let env = BTreeMap::from([
            ("TABLE_NAME".to_string(), "t".to_string()),
            ("AWS_LAMBDA_RUNTIME_API".to_string(), "x".to_string()),
        ]);
        let env = sam_environment(&env, 10);
        assert_eq!(env["AWS_LAMBDA_FUNCTION_TIMEOUT"], "10");
        assert_eq!(env["TABLE_NAME"], "t");
        assert!(!env.contains_key("AWS_LAMBDA_RUNTIME_API"));
    }
}
