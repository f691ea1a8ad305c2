//! Lambda-sized CPU for local processes, with the Linux cgroup CPU controller.
//!
//! Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB, so a
//! 128 MB function gets about 7% of one. Its Init phase (up to the first `/next` poll) runs
//! with more than that. [`CpuShare`] is such a share; [`QuotaGroup`] is a cgroup holding
//! exactly the processes a benchmark started, throttled to it by CFS bandwidth control
//! (`cpu.cfs_quota_us` per `cpu.cfs_period_us` on cgroup v1, `cpu.max` on v2). The period
//! decides how long a burst runs unthrottled before the process waits for the next period,
//! so it is part of every figure measured this way.
//!
//! Only processes the caller hands to [`QuotaGroup::add`] are moved, and the group is removed
//! when the [`QuotaGroup`] is dropped (panics included): its processes go back to the root
//! group, and the directory is deleted. Groups left behind by a killed run are removed by the
//! next [`Controller::detect`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Lambda's memory per vCPU: a function with this much memory gets one full vCPU.
pub const LAMBDA_MB_PER_VCPU: u32 = 1769;

/// Name prefix of the groups this module creates (`fleet-bench-{pid}-{n}`).
const GROUP_PREFIX: &str = "fleet-bench-";

/// The smallest quota CFS accepts, microseconds.
const MIN_QUOTA_US: u64 = 1000;

/// The CPU a Lambda function of `memory_mb` gets, as a quota per `period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuShare {
    /// The function's memory size, MB.
    pub memory_mb: u32,
    /// The CFS period: how often the quota is refilled.
    pub period: Duration,
}

impl CpuShare {
    /// The share of one vCPU (1.0 at 1,769 MB; more than 1.0 above it).
    pub fn vcpus(&self) -> f64 {
        f64::from(self.memory_mb) / f64::from(LAMBDA_MB_PER_VCPU)
    }

    /// CPU time allowed per period, microseconds (at least CFS's minimum of 1 ms).
    pub fn quota_us(&self) -> u64 {
        let period = self.period.as_micros() as f64;
        ((period * self.vcpus()).round() as u64).max(MIN_QUOTA_US)
    }

    /// Whether the share is below CFS's 1 ms minimum quota for this period (the group then
    /// gets 1 ms, a larger share than the memory size's).
    pub fn is_clamped(&self) -> bool {
        (self.period.as_micros() as f64 * self.vcpus()).round() < MIN_QUOTA_US as f64
    }

    /// The period, microseconds.
    pub fn period_us(&self) -> u64 {
        self.period.as_micros() as u64
    }
}

/// Why CPU shares cannot be applied on this machine.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No writable cgroup CPU controller.
    #[error("no writable cgroup CPU controller ({0}): Lambda-sized CPU is skipped")]
    Unavailable(String),
    /// Creating, configuring or filling a group failed.
    #[error("cgroup {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The cgroup CPU controller of this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Controller {
    /// cgroup v1: the `cpu` hierarchy (e.g. `/sys/fs/cgroup/cpu`).
    V1(PathBuf),
    /// cgroup v2: the unified hierarchy (e.g. `/sys/fs/cgroup`) with `cpu` enabled.
    V2(PathBuf),
}

impl Controller {
    /// Finds a writable CPU controller (v1 at `/sys/fs/cgroup/cpu`, else v2 at
    /// `/sys/fs/cgroup`), and removes groups an earlier, killed run left behind.
    pub fn detect() -> Result<Self, CgroupError> {
        Self::detect_at(Path::new("/sys/fs/cgroup"))
    }

    /// [`detect`](Self::detect) under `root` instead of `/sys/fs/cgroup`.
    pub fn detect_at(root: &Path) -> Result<Self, CgroupError> {
        let v1 = root.join("cpu");
        let controller = if v1.join("cpu.cfs_quota_us").is_file() {
            Controller::V1(v1)
        } else if std::fs::read_to_string(root.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|name| name == "cpu"))
        {
            Controller::V2(root.to_path_buf())
        } else {
            return Err(CgroupError::Unavailable(format!(
                "neither {}/cpu.cfs_quota_us nor cpu in {}/cgroup.controllers",
                v1.display(),
                root.display()
            )));
        };
        // A probe group shows whether we may create groups at all (root, or a delegated tree).
        let probe = controller
            .root()
            .join(format!("{GROUP_PREFIX}probe-{}", std::process::id()));
        std::fs::create_dir(&probe)
            .and_then(|()| std::fs::remove_dir(&probe))
            .map_err(|e| CgroupError::Unavailable(format!("{}: {e}", probe.display())))?;
        controller.remove_stale_groups();
        Ok(controller)
    }

    fn root(&self) -> &Path {
        match self {
            Controller::V1(root) | Controller::V2(root) => root,
        }
    }

    /// Groups of runs whose process is gone (killed before their guards ran).
    fn remove_stale_groups(&self) {
        let Ok(entries) = std::fs::read_dir(self.root()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(owner) = name
                .strip_prefix(GROUP_PREFIX)
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{owner}")).exists() {
                empty_and_remove(self.root(), &entry.path());
            }
        }
    }
}

/// A cgroup throttled to one [`CpuShare`], removed on drop.
#[derive(Debug)]
pub struct QuotaGroup {
    root: PathBuf,
    dir: PathBuf,
    share: CpuShare,
}

impl QuotaGroup {
    /// Creates a new, empty group limited to `share`.
    pub fn create(controller: &Controller, share: CpuShare) -> Result<Self, CgroupError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = controller.root().to_path_buf();
        let dir = root.join(format!(
            "{GROUP_PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|source| io(&dir, source))?;
        // From here on the guard removes the directory, whatever fails next.
        let group = Self { root, dir, share };
        match controller {
            Controller::V1(_) => {
                group.write("cpu.cfs_period_us", &share.period_us().to_string())?;
                group.write("cpu.cfs_quota_us", &share.quota_us().to_string())?;
            }
            Controller::V2(_) => {
                group.write(
                    "cpu.max",
                    &format!("{} {}", share.quota_us(), share.period_us()),
                )?;
            }
        }
        Ok(group)
    }

    /// Moves process `pid` (all its threads) into the group.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        self.write("cgroup.procs", &pid.to_string())
    }

    /// The processes in the group now.
    pub fn processes(&self) -> Vec<u32> {
        read_pids(&self.dir.join("cgroup.procs"))
    }

    /// The share the group enforces.
    pub fn share(&self) -> CpuShare {
        self.share
    }

    /// The group's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn write(&self, file: &str, value: &str) -> Result<(), CgroupError> {
        let path = self.dir.join(file);
        std::fs::write(&path, value).map_err(|source| io(&path, source))
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        empty_and_remove(&self.root, &self.dir);
    }
}

/// Moves every process of group `dir` back to the root group, then removes `dir` (a group
/// can only be removed once empty; an exiting process may take a moment to leave it).
fn empty_and_remove(root: &Path, dir: &Path) {
    for _ in 0..50 {
        for pid in read_pids(&dir.join("cgroup.procs")) {
            let _ = std::fs::write(root.join("cgroup.procs"), pid.to_string());
        }
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("warning: could not remove cgroup {}", dir.display());
}

fn read_pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn io(path: &Path, source: std::io::Error) -> CgroupError {
    CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(memory_mb: u32, period_ms: u64) -> CpuShare {
        CpuShare {
            memory_mb,
            period: Duration::from_millis(period_ms),
        }
    }

    #[test]
    fn the_quota_is_memory_over_1769_mb_of_one_vcpu_per_period() {
        assert_eq!(share(1769, 100).quota_us(), 100_000);
        assert_eq!(share(128, 100).quota_us(), 7_236);
        assert_eq!(share(512, 10).quota_us(), 2_894);
        assert_eq!(
            share(3538, 100).quota_us(),
            200_000,
            "two vCPUs above 3,538 MB"
        );
        // CFS refuses quotas under 1 ms: a tiny share over a short period is clamped.
        assert_eq!(share(128, 10).quota_us(), 1_000);
        assert!(share(128, 10).is_clamped() && !share(128, 100).is_clamped());
        assert_eq!(share(128, 100).period_us(), 100_000);
    }

    #[test]
    fn a_machine_without_a_cpu_controller_is_reported_not_guessed() {
        let empty = std::env::temp_dir().join(format!("no-cgroup-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let err = Controller::detect_at(&empty).unwrap_err();
        assert!(matches!(err, CgroupError::Unavailable(_)), "{err}");
        std::fs::remove_dir_all(&empty).unwrap();
    }

    #[test]
    fn a_group_limits_only_what_it_is_given_and_is_gone_after_drop() {
        let Ok(controller) = Controller::detect() else {
            eprintln!("skipped: no writable cgroup CPU controller here");
            return;
        };
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let dir;
        {
            let group = QuotaGroup::create(&controller, share(128, 100)).unwrap();
            dir = group.path().to_path_buf();
            assert!(group.processes().is_empty());
            group.add(child.id()).unwrap();
            assert_eq!(group.processes(), [child.id()]);
            if let Controller::V1(_) = controller {
                let quota = std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap();
                assert_eq!(quota.trim(), "7236");
            }
        }
        assert!(!dir.exists(), "the group is removed on drop");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
