//! A release `bootstrap` run as Lambda runs it: its own process, the environment the template
//! gives it, and a [`RuntimeApi`] to poll. What `sam local invoke` does in a container, done
//! here without Docker; the smoke replay, `invoke --bootstrap` and the benchmarks use it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::cpu_quota::{CgroupError, Controller, CpuShare, QuotaGroup};
use crate::runtime_api::{Outcome, RuntimeApi, RuntimeApiError};

/// Where `make smoke-build` puts the host-architecture release bootstraps
/// (`target/lambda-host/<binary>/bootstrap`). The arm64 bootstraps of `make build` live in
/// `target/lambda/`; this machine cannot execute those.
pub fn host_bootstrap(binary: &str) -> PathBuf {
    crate::repo_root()
        .join("target/lambda-host")
        .join(binary)
        .join("bootstrap")
}

/// Why a bootstrap could not be run.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The binary is not there.
    #[error("{0} not found: build the bootstraps with `make smoke-build` (the Python peer: `make python-peer`)")]
    Missing(PathBuf),
    /// The process could not start.
    #[error("cannot start {path}: {source}")]
    Spawn {
        /// The bootstrap.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime API failed.
    #[error(transparent)]
    RuntimeApi(#[from] RuntimeApiError),
    /// The process exited while an invocation was pending.
    #[error("the bootstrap exited ({0}); its output is in {1}")]
    Exited(String, PathBuf),
    /// The CPU limit could not be applied (the figures would be unthrottled ones).
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
}

/// The CPU a function of some memory size gets on Lambda, for a local process: unthrottled
/// until its first `/next` poll (Lambda's Init phase), then limited to `share`.
#[derive(Clone, Debug)]
pub struct CpuLimit {
    /// The cgroup CPU controller to use.
    pub controller: Controller,
    /// The share after Init.
    pub share: CpuShare,
}

/// A running bootstrap and its runtime API.
pub struct RunningBootstrap {
    api: RuntimeApi,
    child: Child,
    started: Instant,
    log: PathBuf,
    /// Declared after `child`: on drop the process is killed first, then the group emptied
    /// and removed.
    cpu_group: Option<Arc<QuotaGroup>>,
    /// Why moving the process into its group failed, if it did.
    cpu_error: Arc<Mutex<Option<CgroupError>>>,
}

/// One invocation's answer and how long it took, as the runtime API saw it.
#[derive(Debug)]
pub struct Invocation {
    /// What the bootstrap answered.
    pub outcome: Outcome,
    /// From queueing the event to the answer.
    pub latency: Duration,
}

/// What to run as a function's process: a program with its arguments and working directory.
/// A release bootstrap is just its path; another runtime is e.g.
/// `python -m awslambdaric handler.fn` in the handler's folder.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory (the caller's when `None`).
    pub cwd: Option<PathBuf>,
}

impl Launch {
    /// A bootstrap binary, run without arguments.
    pub fn bootstrap(path: &Path) -> Self {
        Self {
            program: path.to_path_buf(),
            args: Vec::new(),
            cwd: None,
        }
    }
}

impl RunningBootstrap {
    /// Starts `path` with exactly `env` (plus `AWS_LAMBDA_RUNTIME_API`), its stdout and stderr
    /// going to `log`. Returns at once: the first [`invoke`](Self::invoke) includes the
    /// process's start-up, which is what a cold start is.
    pub async fn start(
        path: &Path,
        function_name: &str,
        env: &BTreeMap<String, String>,
        log: &Path,
    ) -> Result<Self, BootstrapError> {
        Self::launch(&Launch::bootstrap(path), function_name, env, log).await
    }

    /// Like [`start`](Self::start), for any program that speaks the Runtime API.
    pub async fn launch(
        launch: &Launch,
        function_name: &str,
        env: &BTreeMap<String, String>,
        log: &Path,
    ) -> Result<Self, BootstrapError> {
        Self::launch_limited(launch, function_name, env, log, None).await
    }

    /// Like [`launch`](Self::launch); with `cpu`, the process runs under that CPU limit from
    /// its first `/next` poll on (its group is removed when it stops).
    pub async fn launch_limited(
        launch: &Launch,
        function_name: &str,
        env: &BTreeMap<String, String>,
        log: &Path,
        cpu: Option<&CpuLimit>,
    ) -> Result<Self, BootstrapError> {
        let path = launch.program.as_path();
        if !path.is_file() {
            return Err(BootstrapError::Missing(path.to_path_buf()));
        }
        let api = RuntimeApi::start(function_name).await?;
        let cpu_group = cpu
            .map(|limit| QuotaGroup::create(&limit.controller, limit.share))
            .transpose()?
            .map(Arc::new);
        let cpu_error = Arc::new(Mutex::new(None));
        // The hook is in place before the process exists, so its first poll cannot be missed;
        // it learns the pid as soon as the spawn returns.
        let pid = Arc::new(OnceLock::new());
        if let Some(group) = &cpu_group {
            let (group, pid, error) = (group.clone(), pid.clone(), cpu_error.clone());
            api.before_first_event(move || {
                let pid = *pid.wait();
                if let Err(err) = group.add(pid) {
                    *error.lock().expect("cpu error lock") = Some(err);
                }
            });
        }
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(|source| spawn_error(path, source))?;
        }
        let out = std::fs::File::create(log).map_err(|source| spawn_error(path, source))?;
        let err = out
            .try_clone()
            .map_err(|source| spawn_error(path, source))?;
        let mut command = Command::new(path);
        command
            .args(&launch.args)
            .env_clear()
            .envs(env)
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        if let Some(cwd) = &launch.cwd {
            command.current_dir(cwd);
        }
        let started = Instant::now();
        let child = command
            .spawn()
            .map_err(|source| spawn_error(path, source))?;
        let _ = pid.set(child.id().unwrap_or_default());
        Ok(Self {
            api,
            child,
            started,
            log: log.to_path_buf(),
            cpu_group,
            cpu_error,
        })
    }

    /// Sends one event and waits for the answer (or the process's exit).
    pub async fn invoke(
        &mut self,
        event: &[u8],
        timeout: Duration,
    ) -> Result<Invocation, BootstrapError> {
        let queued = Instant::now();
        let answer = tokio::select! {
            answer = self.api.invoke(event, timeout) => answer?,
            status = self.child.wait() => {
                let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                return Err(BootstrapError::Exited(status, self.log.clone()));
            }
        };
        if let Some(err) = self.cpu_error.lock().expect("cpu error lock").take() {
            return Err(err.into());
        }
        Ok(Invocation {
            outcome: answer,
            latency: queued.elapsed(),
        })
    }

    /// The process id (until it has been waited for).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Time since the process was spawned.
    pub fn since_spawn(&self) -> Duration {
        self.started.elapsed()
    }

    /// Peak resident memory of the process so far (`VmHWM`), in KiB (Linux only).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let pid = self.child.id()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// CPU time the process has used so far (user + system), in seconds (Linux only).
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds_of(self.child.id()?)
    }

    /// The file holding the process's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The CPU group the process runs in, if it has a limit.
    pub fn cpu_group(&self) -> Option<&QuotaGroup> {
        self.cpu_group.as_deref()
    }

    /// Stops the process (and removes its CPU group).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// CPU time (user + system) process `pid` has used, in seconds, from `/proc/{pid}/stat`
/// (Linux; its clock ticks are `USER_HZ` = 100 per second on every Linux architecture).
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3, `state`;
    // `utime` and `stime` are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some((ticks(14)? + ticks(15)?) as f64 / 100.0)
}

fn spawn_error(path: &Path, source: std::io::Error) -> BootstrapError {
    BootstrapError::Spawn {
        path: path.to_path_buf(),
        source,
    }
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

/// Runs `event` once through the release bootstrap of `function` (a template logical id), on
/// the table `table_name` at `endpoint`, with the template's environment and `overrides` of
/// its parameters: `sam local invoke FunctionName -e event.json`, without Docker.
pub async fn invoke_once(
    template: &crate::template::Template,
    function: &str,
    event: &[u8],
    endpoint: &str,
    table_name: &str,
    overrides: &BTreeMap<String, String>,
) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
    let definition = template
        .function_definitions
        .get(function)
        .ok_or_else(|| format!("template.yaml has no function {function}"))?;
    let env = function_environment(template, function, endpoint, table_name, overrides)?;
    let log = crate::repo_root()
        .join("target/invoke")
        .join(format!("{function}.log"));
    let mut bootstrap =
        RunningBootstrap::start(&host_bootstrap(&definition.binary), function, &env, &log).await?;
    let timeout = Duration::from_secs(u64::from(definition.timeout_seconds));
    let invocation = bootstrap.invoke(event, timeout).await;
    bootstrap.stop().await;
    // Echo the function's own log lines, as sam local invoke does.
    if let Ok(text) = std::fs::read_to_string(&log) {
        eprint!("{text}");
    }
    Ok(invocation?.outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_quota::Controller;

    /// A runtime that polls `/next` once, answers with the cgroup it finds itself in, and exits.
    fn one_shot_runtime() -> Launch {
        let script = r#"
api="http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime/invocation"
id=$(curl -s -D - -o /dev/null "$api/next" | tr -d '\r' | awk -F': ' 'tolower($1)=="lambda-runtime-aws-request-id" {print $2}')
group=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/self/cgroup | head -n 1)
curl -s -X POST -d "{\"group\":\"$group\"}" "$api/$id/response" >/dev/null
sleep 5
"#;
        Launch {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".to_string(), script.to_string()],
            cwd: None,
        }
    }

    #[tokio::test]
    async fn a_cpu_limit_applies_from_the_first_poll_and_its_group_is_gone_after_stop() {
        let Ok(controller) = Controller::detect() else {
            eprintln!("skipped: no writable cgroup CPU controller here");
            return;
        };
        let limit = CpuLimit {
            controller,
            share: CpuShare {
                memory_mb: 256,
                period: Duration::from_millis(100),
            },
        };
        let env = BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap())]);
        let log = std::env::temp_dir().join(format!("cpu-limit-{}.log", std::process::id()));
        let mut process = RunningBootstrap::launch_limited(
            &one_shot_runtime(),
            "CpuLimitTest",
            &env,
            &log,
            Some(&limit),
        )
        .await
        .unwrap();
        let group = process.cpu_group().unwrap().path().to_path_buf();
        let answer = process
            .invoke(b"{}", Duration::from_secs(10))
            .await
            .unwrap();
        // The process answered from inside its group: it was moved before the event reached it.
        let Outcome::Response(body) = answer.outcome else {
            panic!("{:?}", answer.outcome)
        };
        let name = group.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            body["group"].as_str().unwrap().ends_with(&name),
            "{body} in {name}"
        );
        // The process, and what it started since (they inherit its group): nothing else.
        let members = process.cpu_group().unwrap().processes();
        assert!(members.contains(&process.pid().unwrap()), "{members:?}");
        process.stop().await;
        assert!(!group.exists(), "the group is removed with the process");
        let _ = std::fs::remove_file(&log);
    }
}
