//! A release `bootstrap` run as Lambda runs it: its own process, the environment the template
//! gives it, and a [`RuntimeApi`] to poll, timed from queueing an event to its answer and
//! optionally under a Lambda-sized CPU quota from its first poll on (Lambda's Init phase is
//! unthrottled). What the benchmark and the cold-start measurement run functions under;
//! `aws-lambda-rie` cannot mark the end of Init or time the queue.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fleet_testkit::outcome::Outcome;
use tokio::process::{Child, Command};

use super::cpu_quota::{CgroupError, Controller, CpuShare, QuotaGroup};
use super::runtime_api::{RuntimeApi, RuntimeApiError};

/// The template parameters of the per-device and per-user request limits (0 switches them off).
pub const REQUEST_LIMITS: [&str; 2] = ["IngestDeviceRatePerSecond", "RegistrationsPerUserPerHour"];

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

#[cfg(test)]
mod tests {
    use super::*;

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
