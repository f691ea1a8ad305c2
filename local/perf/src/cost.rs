//! The monthly cost model: DynamoDB on-demand (request units and storage) and Lambda (arm64)
//! for a simulated workload profile, set beside seed 000's figures.
//!
//! Request units come from the key-distribution simulation (`crate::simulate`), which prices
//! the real items with DynamoDB's size rules; the same rules reproduce the consumed capacity
//! DynamoDB Local reports for the reference dataset (`local/perf/tests/it/simulator.rs`), and
//! `docs/cost-model.md` prints the measured per-pattern figures of `docs/model.json` beside
//! the model's.

use std::fmt::Write as _;

use serde_json::Value;
use shared::model::pattern_id::PatternId;

use crate::simulate::{group, Simulation};
use fleet_testkit::capacity::query_read_units;

pub mod console;
pub mod stack;

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

/// A seed design's month at the given prices: (reads, writes, storage, total) in USD.
pub fn seed_month(dashboard_rcu: f64, gsi_gb: f64, rru: f64, wru: f64) -> [f64; 4] {
    let reads = seed::READS * dashboard_rcu * rru;
    let writes = seed::WRITES * wru;
    let storage = (seed::BASE_GB + gsi_gb) * STORAGE_GB_MONTH_USD;
    [reads, writes, storage, reads + writes + storage]
}

fn usd(v: f64) -> String {
    if v >= 100.0 {
        format!("${}", group(v.round() as u64))
    } else {
        format!("${v:.2}")
    }
}

fn gigabytes(v: f64) -> String {
    if v >= 1000.0 {
        group(v.round() as u64)
    } else {
        format!("{v:.1}")
    }
}

fn millions(v: f64) -> String {
    if v >= 1e8 {
        format!("{} M", group((v / 1e6).round() as u64))
    } else if v >= 1e6 {
        format!("{:.1} M", v / 1e6)
    } else {
        group(v.round() as u64)
    }
}

/// The measured figures of `docs/model.json` this model is set beside: (pattern, workload,
/// requests, RCU, WCU).
pub fn measured_patterns(model: &Value) -> Vec<(String, String, u64, f64, f64)> {
    let mut out = Vec::new();
    for p in model["patterns"].as_array().into_iter().flatten() {
        let id = p["id"].as_str().unwrap_or_default();
        let Ok(pattern) = id.parse::<PatternId>() else {
            continue;
        };
        if !matches!(
            pattern,
            PatternId::Dashboard
                | PatternId::DeviceEvents
                | PatternId::UserEvents
                | PatternId::EventsByType
                | PatternId::DevicesByStatus
                | PatternId::IngestEvents
        ) {
            continue;
        }
        for m in p["measured"].as_array().into_iter().flatten() {
            out.push((
                id.to_string(),
                m["workload"].as_str().unwrap_or_default().to_string(),
                m["requests"].as_u64().unwrap_or(0),
                m["rcu"].as_f64().unwrap_or(0.0),
                m["wcu"].as_f64().unwrap_or(0.0),
            ));
        }
    }
    out
}

/// The whole `docs/cost-model.md`: every profile's month, the seed comparison (from the
/// profile named `seed_profile`), and the measured figures of `model` (docs/model.json).
pub fn render_report(
    sims: &[Simulation],
    seed_profile: &str,
    model: &Value,
    billing: &LambdaBilling,
) -> String {
    let mut out = String::from(
        "# Cost model: a month of DynamoDB on-demand and Lambda\n\n\
         Generated by `make cost` (`cargo run -p fleet-perf -- cost`) from the profiles in \
         `bench/profiles/` and `docs/model.json`; do not edit by hand. Request units per second come \
         from the key-distribution simulation (docs/key-distribution.md), which prices the real items \
         with DynamoDB's size rules; `tests/it/simulator.rs` checks those rules against the consumed \
         capacity DynamoDB Local reports for the same items.\n\n",
    );
    let _ = writeln!(
        out,
        "## Prices and assumptions\n\n\
         Prices ({PRICES_AS_OF}; `local/perf/src/cost.rs`): ${:.3} per million write request units, \
         ${:.3} per million read request units, ${:.2} per GB-month of storage (Standard table \
         class), Lambda arm64 ${:.10} per GB-second and ${:.2} per million requests. Free tiers are \
         left out. Sources: AWS's DynamoDB and Lambda pricing pages, and AWS's November 2024 \
         announcement of the on-demand price cut (as summarized at \
         airbyte.com/data-engineering-resources/dynamodb-pricing and \
         cloudchipr.com/blog/aws-lambda-pricing).\n",
        WRU_USD * 1e6,
        RRU_USD * 1e6,
        STORAGE_GB_MONTH_USD,
        LAMBDA_ARM_GB_SECOND_USD,
        LAMBDA_REQUEST_USD * 1e6,
    );
    let _ = writeln!(
        out,
        "- A month is 730 hours. Storage is the steady state: events kept for the retention \
         (`RETENTION_DAYS`, 90) and then deleted by TTL, which costs no write units; every item and \
         index entry counts 100 bytes of overhead; a GB is 2^30 bytes.\n\
         - Writes count the base table and the index entries the real items have (an index \
         write is billed like a table write; telemetry events are on no index, searchable types on \
         GSI1), the live state's update of every ingest request, the state's GSI1 entry moving with \
         its 15-minute `SEEN#` bucket, and the daily run's checkpoints (one per 100 units of work \
         (an owner's partition, a purge) or 10 seconds, and each segment's last).\n\
         - Reads count the API's reads, ingestion's registration and live-state reads (one \
         read of each per request, eventually consistent for the registration, consistent for the \
         live state: API Gateway spreads a device's requests over \
         containers, so the per-container caches are assumed to miss), and the daily run: a Scan \
         of the directory (one ~100-byte entry per profile and fleet), one Query per owner \
         partition (device items and live states) and one per device that sent events that day \
         (that day's events only); eventually consistent, 0.5 units per 4 KB, at least 0.5 per \
         Query.\n\
         - Lambda ({}): reads billed {} ms at {} MB (the dashboard function), ingest requests \
         {} ms at {} MB. {} The daily analytics function (512 MB) runs for the items it reads / \
         {} items/s (`make scan-throughput`, docs/design.md).\n",
        if billing.measured { "measured" } else { "assumed" },
        billing.read_ms,
        billing.read_memory_mb,
        billing.ingest_ms,
        billing.ingest_memory_mb,
        billing.source,
        group(ANALYTICS_ITEMS_PER_SECOND as u64),
    );

    out.push_str("## Per profile\n\n| profile | write units | read units (API + scan) | storage (table + GSIs) | DynamoDB writes | DynamoDB reads | storage | Lambda requests | Lambda GB-s | Lambda | **total / month** | Lambda at 10x durations |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for sim in sims {
        let m = MonthlyCost::of(sim, billing);
        let slow = MonthlyCost::of(sim, &billing.scaled(10.0));
        let _ = writeln!(
            out,
            "| {} | {} | {} + {} | {} + {} GB | {} | {} | {} | {} | {} | {} | **{}** | {} |",
            sim.profile.name,
            millions(m.write_units),
            millions(m.read_units),
            millions(m.scan_read_units),
            gigabytes(m.storage_gb[0]),
            gigabytes(m.storage_gb[1]),
            usd(m.writes_usd(WRU_USD)),
            usd(m.reads_usd(RRU_USD)),
            usd(m.storage_usd()),
            millions(m.lambda_requests),
            millions(m.lambda_gb_seconds),
            usd(m.lambda_usd()),
            usd(m.total_usd()),
            usd(slow.lambda_usd()),
        );
    }
    out.push_str(
        "\n### Summaries (issue 32)\n\nPart of the figures above: per device and event type, a \
         flush transaction when the live state's open 5-minute buckets would take it past one \
         write unit (the state and the closed hours' 2-hour blocks, 2 units per KB per item), a \
         daily roll (the day item of hourly buckets and the month item's day, read and written \
         the same way), and the stored blocks (kept as long as the raw readings), day items (400 \
         days) and month items (5 years), all in the device's event partition \
         (`local/perf/src/simulate/traffic.rs`, `device_series`).\n\n\
         | profile | flushes / day | write units / day | per event | read units / day | items | storage | writes + reads + storage / month |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for sim in sims {
        let w = &sim.workload;
        let events_per_day = w.events_per_second * 86_400.0;
        let gb = w.series_storage_bytes / GB;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.3} | {} | {} | {} GB | {} |",
            sim.profile.name,
            millions(w.series_flushes_per_day),
            millions(w.series_write_units_per_day),
            if events_per_day > 0.0 {
                w.series_write_units_per_day / events_per_day
            } else {
                0.0
            },
            millions(w.series_read_units_per_day),
            millions(w.series_items),
            gigabytes(gb),
            usd(w.series_write_units_per_day * DAYS_PER_MONTH * WRU_USD
                + w.series_read_units_per_day * DAYS_PER_MONTH * RRU_USD
                + gb * STORAGE_GB_MONTH_USD),
        );
    }
    out.push_str(
        "\nWhat drives these: writes are about 1 unit per telemetry event (one item under 1 KB, \
         on no index; a searchable type adds its GSI1 entry) plus a 1-unit live-state update per \
         ingest request, so larger batches cost less. Storage grows with events/s x 90 days. The \
         daily run reads the day, not the history (table below). \
         `seed-003-10k-devices` takes seed 003's words literally (1,000,000 events/s): the \
         seed's own figure of 2,800 WCU/s consumed points to a rate hundreds of times lower.\n\n",
    );

    out.push_str(
        "### The daily run: what it reads against a full Scan\n\n\
         Before issue 14 the daily run was a parallel Scan of the whole table, 90 days of events \
         included; it now reads the directory, the owners' partitions and the day's events \
         (`daily_analytics::the_runs_reads_follow_the_day_not_the_history` measures it on \
         DynamoDB Local: flat with 1 or 30 days of history).\n\n\
         | profile | the run's read units a month | a full Scan's a month (the run before) | share |\n|---|---|---|---|\n",
    );
    for sim in sims {
        let m = MonthlyCost::of(sim, billing);
        let full = query_read_units(sim.workload.scanned_bytes as u64) * DAYS_PER_MONTH;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2}% |",
            sim.profile.name,
            millions(m.scan_read_units),
            millions(full),
            100.0 * m.scan_read_units / full.max(f64::MIN_POSITIVE)
        );
    }
    out.push('\n');

    render_whole_stack(&mut out, sims, model, billing);

    if let Some(sim) = sims.iter().find(|s| s.profile.name == seed_profile) {
        render_seed_comparison(&mut out, sim, billing);
    }

    out.push_str("## Measured per-pattern capacity (docs/model.json)\n\n\
        What `make docs` measured on DynamoDB Local for the reference dataset (a user with 10 devices \
        of 2 event types and short ids), beside which the model stands. The model prices the \
        profile's own items, so its figures differ where the items do (UUID user ids, 3 or more \
        event types in the summary); on the reference items themselves the size rules give exactly \
        the measured units (`tests/it/simulator.rs`).\n\n\
        | pattern | workload | requests | RCU | WCU |\n|---|---|---|---|---|\n");
    for (id, workload, requests, rcu, wcu) in measured_patterns(model) {
        let _ = writeln!(out, "| {id} | {workload} | {requests} | {rcu} | {wcu} |");
    }
    out.push_str(
        "\nAP-14's WCU for 100 events are the model's 1 per telemetry event plus the live state's \
         one update (a cold Lambda reads the state first instead of failing a conditional write).",
    );
    let measured_dashboard = measured_patterns(model)
        .into_iter()
        .find(|m| m.0 == PatternId::Dashboard.to_string())
        .map(|m| m.3);
    let seed_dashboard = sims
        .iter()
        .find(|s| s.profile.name == seed_profile)
        .map(dashboard_read_units);
    if let (Some(measured), Some(modelled)) = (measured_dashboard, seed_dashboard) {
        let _ = write!(
            out,
            " AP-DASH reads {measured} RCU for the reference user's 10 devices (2 event types, \
             short ids); the model's {modelled:.1} for seed 000's profile comes from that \
             profile's own items (UUID user ids, 3 event types) by the same size rules."
        );
    }
    out.push('\n');
    out.push_str(&console::section(model, billing));
    out
}

/// RCU of one dashboard of a median user of `sim`'s profile: one Query over the profile, and
/// each device's item and live state.
fn dashboard_read_units(sim: &Simulation) -> f64 {
    query_read_units(
        sim.sizes.profile
            + u64::from(sim.workload.fleet_median) * (sim.sizes.state + sim.sizes.device_item),
    )
}

/// Monthly figures of this model on main before issues 13 and 14 (commit `b14f490`, `make cost`;
/// issue 14's brief quotes the first two): (profile, DynamoDB in USD, DynamoDB and Lambda).
pub const BEFORE: [(&str, f64, &str); 3] = [
    ("seed-000-100k-users", 91.15, "$118"),
    ("large-fleets", 160_312.0, "$163,173"),
    ("seed-003-10k-devices", 10_138_879.0, "$10,237,851"),
];

/// One profile's whole-stack month: DynamoDB (API, ingest, analytics scan, storage), Lambda,
/// then every line of [`stack::lines`].
pub fn whole_stack(
    sim: &Simulation,
    model: &Value,
    billing: &LambdaBilling,
) -> (MonthlyCost, Vec<stack::Line>) {
    let m = MonthlyCost::of(sim, billing);
    let mut lines = vec![
        stack::Line {
            item: "DynamoDB: ingest, reads, analytics scan, storage",
            quantity: format!(
                "{} WRU, {} RRU, {} GB",
                millions(m.write_units),
                millions(m.read_units + m.scan_read_units),
                gigabytes(m.storage_gb[0] + m.storage_gb[1])
            ),
            usd: m.writes_usd(WRU_USD) + m.reads_usd(RRU_USD) + m.storage_usd(),
            basis:
                "simulated from the profile with the real items' sizes (docs/key-distribution.md)"
                    .into(),
        },
        stack::Line {
            item: "Lambda",
            quantity: format!(
                "{} requests, {} GB-s",
                millions(m.lambda_requests),
                millions(m.lambda_gb_seconds)
            ),
            usd: m.lambda_usd(),
            basis: if billing.measured {
                format!("durations measured ({BENCHMARKS_PATH}, `make bench`)")
            } else {
                "durations assumed (no docs/benchmarks.json power table)".into()
            },
        },
    ];
    lines.extend(stack::lines(sim, &m, model));
    (m, lines)
}

fn render_whole_stack(
    out: &mut String,
    sims: &[Simulation],
    model: &Value,
    billing: &LambdaBilling,
) {
    out.push_str(
        "## The whole stack

",
    );
    out.push_str(&stack::prices_paragraph());
    out.push('\n');
    let mut totals = Vec::new();
    for sim in sims {
        let (_, lines) = whole_stack(sim, model, billing);
        let _ = writeln!(
            out,
            "### {}\n\n| line | quantity a month | USD a month | measured or assumed |\n|---|---|---|---|",
            sim.profile.name
        );
        for line in &lines {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                line.item,
                line.quantity,
                usd(line.usd),
                line.basis
            );
        }
        let total: f64 = lines.iter().map(|l| l.usd).sum();
        let dynamo: f64 = lines
            .iter()
            .filter(|l| l.item.starts_with("DynamoDB"))
            .map(|l| l.usd)
            .sum();
        let _ = writeln!(out, "| **total** | | **{}** | |\n", usd(total));
        // The lines the model had before (DynamoDB for the API, ingest, the daily run and
        // storage): the same basis as the "before" figures.
        let same_lines = lines.first().map_or(0.0, |l| l.usd);
        totals.push((sim.profile.name.clone(), same_lines, dynamo, total));
    }
    out.push_str(
        "### Before and after\n\nBefore: this model on main before issues 13 and 14 (commit \
         `b14f490`, `make cost`): its DynamoDB figure (API, ingest, the daily full Scan, storage; \
         for seed-000 and large-fleets also the figures issue 14's brief quotes) and its total \
         (DynamoDB and Lambda). After: the same DynamoDB lines at the same prices, the share of \
         before, then DynamoDB with the lines this model did not have (device changes, PITR) \
         and the whole stack. `utility-10m-devices` is new.\n\n\
         | profile | DynamoDB before | DynamoDB + Lambda before | DynamoDB after, same lines | after / before | DynamoDB after, all lines | whole stack after |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (name, same_lines, dynamo, total) in totals {
        let before = BEFORE.iter().find(|b| b.0 == name);
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            before.map_or("new profile".to_string(), |b| usd(b.1)),
            before.map_or("new profile", |b| b.2),
            usd(same_lines),
            before.map_or("-".to_string(), |b| format!(
                "{:.1}%",
                100.0 * same_lines / b.1
            )),
            usd(dynamo),
            usd(total)
        );
    }
    out.push('\n');
}

fn render_seed_comparison(out: &mut String, sim: &Simulation, billing: &LambdaBilling) {
    let m = MonthlyCost::of(sim, billing);
    let ef_then = seed_month(
        seed::ENTITY_FIRST_RCU,
        seed::ENTITY_FIRST_GSI_GB,
        SEED_RRU_USD,
        SEED_WRU_USD,
    );
    let apf_then = seed_month(
        seed::PATTERN_FIRST_RCU,
        seed::PATTERN_FIRST_GSI_GB,
        SEED_RRU_USD,
        SEED_WRU_USD,
    );
    let ef_now = seed_month(
        seed::ENTITY_FIRST_RCU,
        seed::ENTITY_FIRST_GSI_GB,
        RRU_USD,
        WRU_USD,
    );
    let apf_now = seed_month(
        seed::PATTERN_FIRST_RCU,
        seed::PATTERN_FIRST_GSI_GB,
        RRU_USD,
        WRU_USD,
    );
    let ours = |wru: f64, rru: f64| {
        [
            m.reads_usd(rru),
            m.writes_usd(wru),
            m.storage_usd(),
            m.reads_usd(rru) + m.writes_usd(wru) + m.storage_usd(),
        ]
    };
    let then = ours(SEED_WRU_USD, SEED_RRU_USD);
    let now = ours(WRU_USD, RRU_USD);
    let dashboard_rcu = dashboard_read_units(sim);
    let writes_per_event =
        m.write_units / (sim.workload.events_per_second * SECONDS_PER_MONTH).max(1.0);
    let _ = writeln!(
        out,
        "## Beside seed 000 (100K users x 10 devices)\n\n\
         Seed 000 prices 100 million dashboard reads and 10 million writes a month, 50 GB of base \
         table and 5 GB (access-pattern-first) or 300 GB (entity-first, 6 GSIs) of indexes, at the \
         on-demand prices of its time ($0.25 per million RRU, $1.25 per million WRU). Profile \
         `{}` mirrors those counts; Device Fleet's column prices them with this design's items. \
         DynamoDB only, as in the seed (Device Fleet's Lambda adds {} a month).\n",
        sim.profile.name,
        usd(m.lambda_usd()),
    );
    let _ = writeln!(
        out,
        "| per month | seed entity-first | seed access-pattern-first | Device Fleet | seed entity-first | seed access-pattern-first | Device Fleet |\n\
         |---|---|---|---|---|---|---|\n\
         | prices | seed's | seed's | seed's | today's | today's | today's |"
    );
    for (i, label) in ["reads", "writes", "storage", "**total**"]
        .iter()
        .enumerate()
    {
        let cells = [
            ef_then[i],
            apf_then[i],
            then[i],
            ef_now[i],
            apf_now[i],
            now[i],
        ];
        let cells: Vec<String> = cells
            .iter()
            .map(|v| {
                if i == 3 {
                    format!("**{}**", usd(*v))
                } else {
                    usd(*v)
                }
            })
            .collect();
        let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
    }
    let _ = writeln!(
        out,
        "\nWhy the figures differ:\n\n\
         - **Reads**: a dashboard here costs {dashboard_rcu:.1} RCU (one Query over the profile, the 10 \
         device items and their live states with the latest readings and last 10 events), against \
         the seed's 15 (its Query also returns every stored event of the user, so it grows with \
         history) and 500 entity-first. Ingestion adds {} registration reads a month (and as many \
         live-state reads: the per-container caches are assumed to miss), and the daily analytics \
         scan {} read units.\n\
         - **Writes**: the seed counts one 1-WCU PutItem per write. Here an event costs \
         {writes_per_event:.1} write units: the event item (telemetry is on no index), the live \
         state's update (under 1 KB), and the state's GSI1 entry moving to a new `SEEN#` bucket \
         (delete + put), because each device sends an event only every few days.\n\
         - **Storage**: the seed assumes 50 GB + 5 GB; this design's steady state, with 90 days of \
         events, is {:.1} GB + {:.1} GB: 10 million events a month is little data.\n",
        millions(sim.workload.registration_reads_per_second * SECONDS_PER_MONTH),
        millions(m.scan_read_units),
        m.storage_gb[0],
        m.storage_gb[1],
    );
}

/// `fleet-perf cost [--check] [PROFILE...]`: with no profile, every documented profile into
/// `docs/cost-model.md` (or, with `--check`, fail when it is stale); with profiles, the report
/// on stdout.
pub fn command(
    profiles: &[std::path::PathBuf],
    check: bool,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let root = fleet_testkit::repo_root();
    let model_path = root.join(MODEL_PATH);
    let model: Value =
        serde_json::from_str(&std::fs::read_to_string(&model_path).map_err(|e| {
            format!(
                "cannot read {}: {e} (run `make docs`)",
                model_path.display()
            )
        })?)?;
    let template =
        fleet_testkit::template::Template::load(&fleet_testkit::template::default_template_path())?;
    let memory_of = |function: &str| {
        template
            .function_definitions
            .get(function)
            .map_or(128, |d| d.memory_mb)
    };
    let benchmarks: Value = std::fs::read_to_string(root.join(BENCHMARKS_PATH))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let billing = LambdaBilling::measured(
        memory_of("DashboardFunction"),
        memory_of("IngestFunction"),
        &benchmarks,
    );
    crate::simulate::write_or_print(profiles, check, REPORT_PATH, |sims| {
        render_report(sims, SEED_PROFILE, &model, &billing)
    })
}

/// The generated report.
pub const REPORT_PATH: &str = "docs/cost-model.md";
/// The measured per-pattern figures.
pub const MODEL_PATH: &str = "docs/model.json";
/// The profile that mirrors seed 000's cost example.
pub const SEED_PROFILE: &str = "seed-000-100k-users";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::{simulate, Profile};

    #[test]
    fn the_seed_figures_come_out_as_the_seed_states_them() {
        let ef = seed_month(
            seed::ENTITY_FIRST_RCU,
            seed::ENTITY_FIRST_GSI_GB,
            SEED_RRU_USD,
            SEED_WRU_USD,
        );
        let apf = seed_month(
            seed::PATTERN_FIRST_RCU,
            seed::PATTERN_FIRST_GSI_GB,
            SEED_RRU_USD,
            SEED_WRU_USD,
        );
        assert!((ef[3] - 12_600.0).abs() < 1e-6, "{ef:?}");
        assert!((apf[3] - 401.25).abs() < 1e-6, "{apf:?}");
        // Today's prices halve the request units: 100M x 15 RCU x $0.125/M = $187.50.
        let apf_now = seed_month(
            seed::PATTERN_FIRST_RCU,
            seed::PATTERN_FIRST_GSI_GB,
            RRU_USD,
            WRU_USD,
        );
        assert!((apf_now[0] - 187.5).abs() < 1e-6);
        assert!((apf_now[1] - 6.25).abs() < 1e-6);
    }

    #[test]
    fn measured_durations_come_from_the_power_table_at_the_template_sizes() {
        let bench: Value = serde_json::json!({"power": {"points": [
            {"memory_mb": 256, "paths": [
                {"path": "dashboard", "rust": {"warm_ms": {"p50": 4.2}}},
                {"path": "ingest", "rust": {"warm_ms": {"p50": 41.5}}}]},
            {"memory_mb": 1024, "paths": [
                {"path": "dashboard", "rust": {"warm_ms": {"p50": 3.1}}},
                {"path": "ingest", "rust": {"warm_ms": {"p50": 40.2}}}]}
        ]}});
        let billing = LambdaBilling::measured(1024, 256, &bench);
        assert!(billing.measured);
        assert_eq!((billing.read_ms, billing.read_memory_mb), (4.0, 1024));
        assert_eq!((billing.ingest_ms, billing.ingest_memory_mb), (42.0, 256));
        // A size the table does not have: the assumption, said so.
        let assumed = LambdaBilling::measured(2048, 256, &bench);
        assert!(!assumed.measured);
        assert_eq!(
            (assumed.read_ms, assumed.read_memory_mb),
            (READ_BILLED_MS, 2048)
        );
        assert!(!LambdaBilling::measured(128, 128, &Value::Null).measured);
    }

    #[test]
    fn a_hand_computed_month() {
        // 60 devices, one event a minute each in batches of 1, no reads, one event type.
        let profile: Profile = yaml_serde::from_str(
            "
name: hand
description: hand-computed
users: 6
devices_per_user: {distribution: fixed, devices: 10}
events: {per_device_per_minute: 1, batch_size: 1, types: {temperature: 1}}
twin: {desired_changes_per_device_per_month: 0, commands_per_device_per_month: 0, rollouts_per_month: 0}
offline: {per_day: 0}
",
        )
        .unwrap();
        let sim = simulate(profile, "test").unwrap();
        let m = MonthlyCost::of(&sim, &LambdaBilling::assumed());
        // 1 event/s in all. Per event: event item 1 WCU (telemetry is in no index) + the live
        // state's update (under 1 KB: 1) = 2; the SEEN# entry moves at most every 900 s per
        // device: 60 devices x 2 WCU / 900 s, and the offline check's due entry (GSI3) with it:
        // as much again. No twin traffic and no device going silent in this profile. Plus the
        // daily run's checkpoints: its 6 units
        // (one partition per owner: 10 devices each, under DEVICES_PER_SHARD) take one write
        // (under 100 units), its 4.9 s one more (under 10 s), and each of the 4 segments
        // writes its last = 6 a day.
        assert_eq!(fleet_testkit::capacity::write_units(sim.sizes.state), 1);
        assert_eq!(sim.workload.analytics_units_per_day, 6.0);
        let per_second = 2.0 + 2.0 * (60.0 * 2.0 / 900.0);
        let expected = per_second * SECONDS_PER_MONTH + 6.0 * DAYS_PER_MONTH;
        assert!(
            (m.write_units - expected).abs() < 1e-3,
            "{} vs {expected}",
            m.write_units
        );
        // Every request reads the registration (eventually consistent, 0.5 RCU) and the live
        // state (consistent, 1 RCU): API Gateway spreads a device's requests, so the
        // per-container caches miss. The offline detector Queries its 64 due and 16 reminder
        // shards every minute (0.5 RCU each, nothing due in this profile).
        let detector = 80.0 * 0.5 * (SECONDS_PER_MONTH / 60.0);
        assert!(
            (m.read_units - (1.5 * SECONDS_PER_MONTH + detector)).abs() < 1e-3,
            "{}",
            m.read_units
        );
        // Lambda: 1 ingest request/s of 30 ms at 0.125 GB, plus 30.4 daily runs, plus the
        // offline detector's run every minute.
        let requests = SECONDS_PER_MONTH + DAYS_PER_MONTH + SECONDS_PER_MONTH / 60.0;
        assert!(
            (m.lambda_requests - requests).abs() < 1e-6,
            "{} vs {requests}",
            m.lambda_requests
        );
        // The daily run reads 12 directory entries, 60 device and 60 state items and the day's
        // 86,400 events, not the 90 days stored.
        let items = 12.0 + 120.0 + 86_400.0;
        assert!((sim.workload.analytics_items_per_day - items).abs() < 1e-6);
        let gbs = 0.030 * 0.125 * SECONDS_PER_MONTH
            + items / ANALYTICS_ITEMS_PER_SECOND * 0.5 * DAYS_PER_MONTH
            + WATCH_SECONDS * WATCH_MEMORY_GB * SECONDS_PER_MONTH / 60.0;
        assert!((m.lambda_gb_seconds - gbs).abs() < 1e-6);
        // Dollars: units times prices.
        let dollars = m.write_units * 0.625e-6
            + (m.read_units + m.scan_read_units) * 0.125e-6
            + (m.storage_gb[0] + m.storage_gb[1]) * 0.25
            + requests * 0.2e-6
            + gbs * 0.000_013_333_4;
        assert!((m.total_usd() - dollars).abs() < 1e-9);
        // Storage: 90 days of 1 event/s.
        assert!((sim.workload.items - (90.0 * 86_400.0 + 3.0 * 60.0 + 6.0)).abs() < 1e-6);
    }
}
