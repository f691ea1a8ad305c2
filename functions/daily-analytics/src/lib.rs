//! daily-analytics: writes `REPORT#{day}` for the previous UTC day when EventBridge's schedule
//! fires, or for `{"date": "YYYY-MM-DD"}` when invoked by hand (`"fresh": true` scans again
//! instead of reusing the day's finished checkpoints; `"segments": [0, 1]` works on a subset,
//! for fanning a large table out over several invocations).
//!
//! An invocation that runs out of time checkpoints and fails, so Lambda's asynchronous retry
//! resumes it where it stopped.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};
use shared::metrics::RequestMeter;
use shared::ops::analytics::{previous_day, run_daily_report, RunPlan};
use shared::timestamp::Timestamp;
use shared::{FleetError, FleetTable, ValidationError};

/// Scan segments (`SCAN_SEGMENTS`, default 4) and page size (`SCAN_PAGE_LIMIT`, default
/// DynamoDB's 1 MB pages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnalyticsConfig {
    /// Total segments.
    pub segments: u32,
    /// Items per Scan page, if limited.
    pub page_limit: Option<i32>,
}

impl AnalyticsConfig {
    /// From the environment.
    pub fn from_env() -> Result<Self, FleetError> {
        let read = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let segments = match read("SCAN_SEGMENTS") {
            None => 4,
            Some(v) => v.trim().parse().map_err(|_| {
                FleetError::Internal(format!("SCAN_SEGMENTS={v:?} is not a number"))
            })?,
        };
        let page_limit = match read("SCAN_PAGE_LIMIT") {
            None => None,
            Some(v) => Some(v.trim().parse().map_err(|_| {
                FleetError::Internal(format!("SCAN_PAGE_LIMIT={v:?} is not a number"))
            })?),
        };
        Ok(Self {
            segments,
            page_limit,
        })
    }
}

impl Default for AnalyticsConfig {
    fn default() -> Self {
        Self {
            segments: 4,
            page_limit: None,
        }
    }
}

#[derive(Deserialize)]
struct Invocation {
    /// Manual runs: the day to report.
    date: Option<String>,
    /// EventBridge scheduled events: when the schedule fired.
    time: Option<String>,
    #[serde(default)]
    fresh: bool,
    segments: Option<Vec<u32>>,
}

/// Time kept in reserve before the Lambda's deadline to save the last checkpoint and answer.
const MARGIN: Duration = Duration::from_secs(20);

/// Handles one invocation: the report JSON when the day is complete, an error (after
/// checkpointing) when it is not.
pub async fn handle(
    table: &FleetTable,
    config: &AnalyticsConfig,
    event: Value,
    deadline: Instant,
) -> Result<Value, FleetError> {
    let started = Instant::now();
    let meter = RequestMeter::new();
    let result = meter
        .clone()
        .scope(Box::pin(run(table, config, event, deadline)))
        .await;
    let used = meter.snapshot();
    tracing::info!(
        function = "daily-analytics",
        ok = result.is_ok(),
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        ddb_requests = used.requests(),
        rcu = used.read_units,
        wcu = used.write_units,
        "invocation"
    );
    result
}

async fn run(
    table: &FleetTable,
    config: &AnalyticsConfig,
    event: Value,
    deadline: Instant,
) -> Result<Value, FleetError> {
    let invocation: Invocation =
        serde_json::from_value(event).map_err(|e| ValidationError::new("event", e.to_string()))?;
    let day = match (invocation.date, invocation.time) {
        (Some(date), _) => date,
        (None, Some(time)) => previous_day(&Timestamp::parse_field("time", &time)?),
        (None, None) => {
            return Err(
                ValidationError::new("date", "give a date, or send a scheduled event").into(),
            )
        }
    };
    let mut plan = RunPlan::new(
        &day,
        config.segments,
        deadline.checked_sub(MARGIN).unwrap_or(deadline),
    )?;
    plan.page_limit = config.page_limit;
    plan.fresh = invocation.fresh;
    plan.only = invocation.segments;
    let outcome = run_daily_report(table, &plan).await?;
    match outcome.report {
        Some(report) => Ok(json!({"date": day, "complete": true, "report": report})),
        // This invocation's share is done; another invocation's segments are still running,
        // and whichever finishes last writes the report.
        None if outcome.requested_done => Ok(json!({
            "date": day,
            "complete": false,
            "segmentsDone": outcome.segments_done,
        })),
        None => Err(FleetError::Internal(format!(
            "report for {day} incomplete: {} of {} segments done; invoke again to resume",
            outcome.segments_done, config.segments
        ))),
    }
}
