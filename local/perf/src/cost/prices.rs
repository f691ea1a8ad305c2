//! What the workload costs: the unit prices (`PRICES_AS_OF`), the Lambda billing of a request
//! and one month's bill. A leaf of [`crate::cost`]: the report and its sections
//! ([`super::console`], [`super::stack`]) price their lines from here.

use serde_json::Value;

use crate::simulate::Simulation;

/// Where and when the prices below were taken.
pub const PRICES_AS_OF: &str = "us-east-1, on-demand prices in force since 1 November 2024 \
    (DynamoDB on-demand throughput was halved then), Lambda arm64 first pricing tier; read 2026";
/// DynamoDB on-demand, per write request unit (us-east-1, since November 2024).
pub const WRU_USD: f64 = 0.625 / 1e6;
/// DynamoDB on-demand, per read request unit (us-east-1, since November 2024).
pub const RRU_USD: f64 = 0.125 / 1e6;
/// DynamoDB Standard table class storage, per GB-month (us-east-1).
pub const STORAGE_GB_MONTH_USD: f64 = 0.25;
/// Lambda arm64 duration, per GB-second (us-east-1, first 7.5 billion GB-s a month).
pub const LAMBDA_ARM_GB_SECOND_USD: f64 = 0.000_013_333_4;
/// Lambda, per request.
pub const LAMBDA_REQUEST_USD: f64 = 0.20 / 1e6;
/// Seed 000's own prices (its "$1.25 per million" writes and "$3.75 per million" 15-RCU
/// dashboards): the on-demand prices before November 2024.
pub const SEED_WRU_USD: f64 = 1.25 / 1e6;
/// Seed 000's read price: $3.75 per million dashboards of 15 RCU = $0.25 per million RRU.
pub const SEED_RRU_USD: f64 = 0.25 / 1e6;
/// A month as AWS bills it: 730 hours.
pub const SECONDS_PER_MONTH: f64 = 730.0 * 3600.0;
/// Days in that month.
pub const DAYS_PER_MONTH: f64 = 730.0 / 24.0;
/// Bytes in a billed GB.
pub const GB: f64 = 1024.0 * 1024.0 * 1024.0;
/// The daily analytics function's memory (`template.yaml`: 512 MB).
pub const ANALYTICS_MEMORY_GB: f64 = 512.0 / 1024.0;
/// Billed duration of a read request when nothing was measured: an assumption, see
/// [`DURATION_SOURCE`].
pub const READ_BILLED_MS: f64 = 10.0;
/// Billed duration of an ingest request when nothing was measured: an assumption.
pub const INGEST_BILLED_MS: f64 = 30.0;
/// The measured figures the Lambda line uses.
pub const BENCHMARKS_PATH: &str = "docs/benchmarks.json";
/// Items per second the daily analytics scan covers (measured with `make scan-throughput`,
/// debug build on DynamoDB Local, docs/design.md §5); it sets the analytics Lambda's duration.
pub const ANALYTICS_ITEMS_PER_SECOND: f64 = 17_600.0;
/// Where the durations come from when `make bench` has not measured them.
pub const DURATION_SOURCE: &str = "Assumed, not measured: a read is one Query, which DynamoDB \
    serves in single-digit milliseconds, plus well under 1 ms of Rust handler work, billed as 10 \
    ms; an ingest request is a registration GetItem (when the cache is cold), up to 4 concurrent \
    BatchWriteItems and one UpdateItem, billed as 30 ms.";

/// What the API functions' Lambda time costs per request: billed duration and memory size of
/// reads (the dashboard function) and of ingest requests.
#[derive(Clone, Debug, PartialEq)]
pub struct LambdaBilling {
    /// Billed milliseconds of a read request.
    pub read_ms: f64,
    /// The dashboard function's memory, MB.
    pub read_memory_mb: u32,
    /// Billed milliseconds of an ingest request.
    pub ingest_ms: f64,
    /// The ingest function's memory, MB.
    pub ingest_memory_mb: u32,
    /// Whether the durations were measured (else assumed).
    pub measured: bool,
    /// Where the figures come from, for the report.
    pub source: String,
}

impl LambdaBilling {
    /// The assumed durations at 128 MB.
    pub fn assumed() -> Self {
        Self {
            read_ms: READ_BILLED_MS,
            read_memory_mb: 128,
            ingest_ms: INGEST_BILLED_MS,
            ingest_memory_mb: 128,
            measured: false,
            source: DURATION_SOURCE.to_string(),
        }
    }

    /// The template's memory sizes of the dashboard and ingest functions, and the warm p50 of
    /// the Rust dashboard and ingest paths at those sizes in the power-tuning table of
    /// `benchmarks` (docs/benchmarks.json, `make bench`), billed in whole milliseconds. The
    /// assumed durations where the table has no such size.
    pub fn measured(read_memory_mb: u32, ingest_memory_mb: u32, benchmarks: &Value) -> Self {
        let warm_p50 = |memory_mb: u32, path: &str| {
            benchmarks["power"]["points"]
                .as_array()?
                .iter()
                .find(|p| p["memory_mb"].as_u64() == Some(u64::from(memory_mb)))?["paths"]
                .as_array()?
                .iter()
                .find(|c| c["path"] == path)?["rust"]["warm_ms"]["p50"]
                .as_f64()
        };
        match (
            warm_p50(read_memory_mb, "dashboard"),
            warm_p50(ingest_memory_mb, "ingest"),
        ) {
            (Some(read), Some(ingest)) => Self {
                read_ms: read.ceil(),
                read_memory_mb,
                ingest_ms: ingest.ceil(),
                ingest_memory_mb,
                measured: true,
                source: format!(
                    "Measured by `make bench` ({BENCHMARKS_PATH}, section 5): the warm p50 of the \
                     Rust dashboard path ({read:.2} ms) and of the ingest path with 100-event \
                     batches ({ingest:.2} ms) at the template's memory sizes, each release \
                     bootstrap under the CPU Lambda gives that size, against DynamoDB Local on \
                     this machine, billed in whole milliseconds. DynamoDB Local is slower than \
                     DynamoDB, so these durations are on the high side; smaller batches take less."
                ),
            },
            _ => Self {
                read_memory_mb,
                ingest_memory_mb,
                ..Self::assumed()
            },
        }
    }

    /// These durations times `factor` (the sensitivity line).
    pub fn scaled(&self, factor: f64) -> Self {
        Self {
            read_ms: self.read_ms * factor,
            ingest_ms: self.ingest_ms * factor,
            ..self.clone()
        }
    }
}

/// Seed 000's monthly figures for 100K users x 10 devices.
pub mod seed {
    /// Dashboard reads a month.
    pub const READS: f64 = 100e6;
    /// Writes a month (one 1-WCU PutItem each).
    pub const WRITES: f64 = 10e6;
    /// RCU of one dashboard, entity-first (11 Scans).
    pub const ENTITY_FIRST_RCU: f64 = 500.0;
    /// RCU of one dashboard, access-pattern-first (1 Query).
    pub const PATTERN_FIRST_RCU: f64 = 15.0;
    /// Base table storage, GB (both designs).
    pub const BASE_GB: f64 = 50.0;
    /// GSI storage, GB, entity-first (6 GSIs).
    pub const ENTITY_FIRST_GSI_GB: f64 = 300.0;
    /// GSI storage, GB, access-pattern-first (1 GSI).
    pub const PATTERN_FIRST_GSI_GB: f64 = 5.0;
}

/// The daily run's checkpoint writes (under 1 KB each: a position, not a work list) for
/// `units` of work taking `seconds`: one per `UNITS_PER_CHECKPOINT` units or
/// `CHECKPOINT_INTERVAL`, whichever comes first (at most both), and each segment's last.
pub fn checkpoint_writes_per_day(units: f64, seconds: f64) -> f64 {
    use shared::ops::analytics::{CHECKPOINT_INTERVAL, UNITS_PER_CHECKPOINT};
    (units / f64::from(UNITS_PER_CHECKPOINT)).ceil()
        + (seconds / CHECKPOINT_INTERVAL.as_secs_f64()).ceil()
        + f64::from(ANALYTICS_SEGMENTS)
}

/// An alarm-watch invocation's duration, seconds: an assumption (a minute's run of empty
/// Queries, or one small stream batch), not a measurement on AWS.
pub const WATCH_SECONDS: f64 = 0.1;
/// alarm-watch's memory (the template's default 128 MB), GB.
pub const WATCH_MEMORY_GB: f64 = 0.125;

/// The daily run's scan segments (`SCAN_SEGMENTS`, the template's default).
pub const ANALYTICS_SEGMENTS: u32 = 4;

/// One month's bill, itemized.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MonthlyCost {
    /// Write request units (base table and both GSIs, plus analytics checkpoints).
    pub write_units: f64,
    /// Read request units of the API (reads and ingest auth).
    pub read_units: f64,
    /// Read request units of the daily analytics scans.
    pub scan_read_units: f64,
    /// Stored GB: base table, GSIs.
    pub storage_gb: [f64; 2],
    /// Lambda invocations.
    pub lambda_requests: f64,
    /// Lambda GB-seconds.
    pub lambda_gb_seconds: f64,
}

impl MonthlyCost {
    /// The month of `sim`'s workload, with the Lambda billing given.
    pub fn of(sim: &Simulation, billing: &LambdaBilling) -> Self {
        let w = &sim.workload;
        let [base, gsi1, gsi2, gsi3] = &sim.tables;
        // alarm-watch: a scheduled run a minute (about 100 ms) and, at worst, one stream
        // invocation per alarm transition (a raise and a clear per offline episode).
        let watch_invocations = w.detector_runs_per_day + 2.0 * w.offline_alarms_per_day;
        let api_reads = w.dashboard_per_second + w.other_reads_per_second;
        let scan_seconds = w.analytics_items_per_day / ANALYTICS_ITEMS_PER_SECOND;
        Self {
            write_units: (base.wcu + gsi1.wcu + gsi2.wcu + gsi3.wcu) * SECONDS_PER_MONTH
                + checkpoint_writes_per_day(w.analytics_units_per_day, scan_seconds)
                    * DAYS_PER_MONTH,
            read_units: (base.rcu + gsi1.rcu + gsi2.rcu + gsi3.rcu) * SECONDS_PER_MONTH,
            // The daily run reads the directory, the owners' partitions and the day's events
            // (docs/design.md section 5), not the whole table.
            scan_read_units: w.analytics_read_units_per_day * DAYS_PER_MONTH,
            storage_gb: [
                w.storage_bytes[0] / GB,
                (w.storage_bytes[1] + w.storage_bytes[2]) / GB,
            ],
            lambda_requests: (api_reads + w.ingest_requests_per_second) * SECONDS_PER_MONTH
                + DAYS_PER_MONTH
                + watch_invocations * DAYS_PER_MONTH,
            lambda_gb_seconds: (api_reads * billing.read_ms / 1000.0
                * f64::from(billing.read_memory_mb)
                / 1024.0
                + w.ingest_requests_per_second * billing.ingest_ms / 1000.0
                    * f64::from(billing.ingest_memory_mb)
                    / 1024.0)
                * SECONDS_PER_MONTH
                + scan_seconds * ANALYTICS_MEMORY_GB * DAYS_PER_MONTH
                + watch_invocations * WATCH_SECONDS * WATCH_MEMORY_GB * DAYS_PER_MONTH,
        }
    }

    /// Writes, USD.
    pub fn writes_usd(&self, wru: f64) -> f64 {
        self.write_units * wru
    }
    /// Reads (API and scans), USD.
    pub fn reads_usd(&self, rru: f64) -> f64 {
        (self.read_units + self.scan_read_units) * rru
    }
    /// Storage, USD.
    pub fn storage_usd(&self) -> f64 {
        (self.storage_gb[0] + self.storage_gb[1]) * STORAGE_GB_MONTH_USD
    }
    /// Lambda, USD.
    pub fn lambda_usd(&self) -> f64 {
        self.lambda_requests * LAMBDA_REQUEST_USD
            + self.lambda_gb_seconds * LAMBDA_ARM_GB_SECOND_USD
    }
    /// DynamoDB and Lambda at today's prices, USD.
    pub fn total_usd(&self) -> f64 {
        self.writes_usd(WRU_USD) + self.reads_usd(RRU_USD) + self.storage_usd() + self.lambda_usd()
    }
}
