//! Where a release `bootstrap` is and what it finds in its environment on Lambda: the
//! template's variables and Lambda's own, for a local run against DynamoDB Local. The
//! `aws-lambda-rie` replay, `fleet-dev invoke --bootstrap` and the benchmark use them.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where `make smoke-build` puts the host-architecture release bootstraps
/// (`target/lambda-host/<binary>/bootstrap`). The arm64 bootstraps of `make build` live in
/// `target/lambda/`; this machine cannot execute those.
pub fn host_bootstrap(binary: &str) -> PathBuf {
    crate::repo_root()
        .join("target/lambda-host")
        .join(binary)
        .join("bootstrap")
}

/// Parameter overrides that keep `RetentionDays` at `days` (like `sam local invoke
/// --parameter-overrides`), for data with fixed timestamps.
///
/// The summaries' retentions are raised with it where their defaults would be shorter
/// (functions refuse to start with hourly shorter than raw, or daily shorter than hourly).
pub fn retention_override(days: u32) -> BTreeMap<String, String> {
    use shared::model::settings::{DEFAULT_DAILY_RETENTION_DAYS, DEFAULT_HOURLY_RETENTION_DAYS};
    let hourly = DEFAULT_HOURLY_RETENTION_DAYS.max(days);
    BTreeMap::from([
        ("RetentionDays".to_string(), days.to_string()),
        ("HourlyRetentionDays".to_string(), hourly.to_string()),
        (
            "DailyRetentionDays".to_string(),
            DEFAULT_DAILY_RETENTION_DAYS.max(hourly).to_string(),
        ),
    ])
}

/// Everything `function`'s bootstrap finds in its environment on Lambda, for a local run on
/// table `table_name` at `endpoint`: the template's variables (parameters at their defaults
/// unless `overrides` names them) and Lambda's own ([`lambda_environment`]).
pub fn function_environment(
    template: &crate::template::Template,
    function: &str,
    endpoint: &str,
    table_name: &str,
    overrides: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, crate::template::TemplateError> {
    let env = template.function_environment(function, table_name, overrides)?;
    let memory_mb = template
        .function_definitions
        .get(function)
        .map_or(128, |d| d.memory_mb);
    Ok(lambda_environment(function, memory_mb, endpoint, &env))
}

/// The environment Lambda gives every function, for a local run against `endpoint`: the
/// reserved `AWS_LAMBDA_*` variables, a region, placeholder credentials (DynamoDB Local
/// accepts any) and the DynamoDB endpoint override, on top of `function_env` (the
/// template's variables for the function).
pub fn lambda_environment(
    function_name: &str,
    memory_mb: u32,
    endpoint: &str,
    function_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env = function_env.clone();
    let fixed = [
        ("AWS_LAMBDA_FUNCTION_NAME", function_name.to_string()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory_mb.to_string()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_string()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{function_name}"),
        ),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "local/[$LATEST]0".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
        ("AWS_ACCESS_KEY_ID", "local".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "local".to_string()),
        ("AWS_SESSION_TOKEN", "local".to_string()),
        ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.to_string()),
        ("LAMBDA_TASK_ROOT", "/var/task".to_string()),
        ("TZ", ":UTC".to_string()),
    ];
    for (name, value) in fixed {
        env.insert(name.to_string(), value);
    }
    if let Ok(path) = std::env::var("PATH") {
        env.insert("PATH".to_string(), path);
    }
    env
}
