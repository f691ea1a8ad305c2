//! daily-analytics: writes `REPORT#{day}` for the previous UTC day when EventBridge's schedule
//! fires, or for `{"date": "YYYY-MM-DD"}` when invoked by hand (`"fresh": true` scans again
//! instead of reusing the day's finished checkpoints; `"segments": [0, 1]` works on a subset,
//! for fanning a large table out over several invocations).
//!
//! An invocation that runs out of time checkpoints and fails, so Lambda's asynchronous retry
//! resumes it where it stopped.
//!
//! The twin's rollout worker is a function of its own (`functions/rollout-worker`), so this
//! role reads and purges but never writes a device's desired state or live state.

use std::time::{Duration, Instant};

use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::model::settings::{number_setting, optional_number_setting};
use shared::model::timestamp::{Day, Timestamp};
use shared::observe::served::{serve_invocation, serve_traced_run};
use shared::ops::analytics::{previous_day, run_daily_report, DailyReport, RunPlan};
use shared::{FleetError, FleetTable, ValidationError};

/// The function's `Timeout` in `template.yaml`: the time an invocation gets when the runtime
/// sends no usable deadline (see [`shared::store::deadline`]).
pub const TIMEOUT: Duration = Duration::from_secs(900);

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
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, FleetError> {
        Ok(Self {
            segments: number_setting(&lookup, "SCAN_SEGMENTS", 4, 1..=1_000_000)?,
            page_limit: optional_number_setting(&lookup, "SCAN_PAGE_LIMIT", 1..=i32::MAX)?,
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

/// What every invocation of this execution environment shares: the table client and the
/// settings, built once by [`State::from_env`].
pub struct State {
    /// The table.
    pub table: FleetTable,
    /// The settings.
    pub config: AnalyticsConfig,
}

impl State {
    /// The table and settings from the environment.
    pub async fn from_env() -> Result<Self, FleetError> {
        Ok(Self {
            table: FleetTable::from_env().await?,
            config: AnalyticsConfig::from_env()?,
        })
    }

    /// One Lambda invocation, until the deadline Lambda gave (or [`TIMEOUT`] when it gave none
    /// usable).
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, FleetError> {
        serve_invocation(
            "daily-analytics",
            RUN_SEGMENT,
            event.context.deadline(),
            TIMEOUT,
            event.context.xray_trace_id.as_deref(),
            |deadline| run(&self.table, &self.config, event.payload, deadline),
        )
        .await
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

/// The name of a run's subsegment in its trace.
pub const RUN_SEGMENT: &str = "daily analytics run";

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
    handle_traced(table, config, event, deadline, None).await
}

/// [`handle`] in the X-Ray trace of `trace_header` (the invocation's `Lambda-Runtime-Trace-Id`):
/// when it is sampled, one subsegment for the run and one per DynamoDB call under it, as the
/// API functions send for each request.
pub async fn handle_traced(
    table: &FleetTable,
    config: &AnalyticsConfig,
    event: Value,
    deadline: Instant,
    trace_header: Option<&str>,
) -> Result<Value, FleetError> {
    serve_traced_run(
        "daily-analytics",
        trace_header,
        RUN_SEGMENT,
        Box::pin(run(table, config, event, deadline)),
    )
    .await
}

/// A run's answer: the report when the day is complete, else how far this invocation's share
/// went.
#[derive(Serialize)]
#[serde(untagged)]
pub enum RunAnswer {
    /// `{"date", "complete": true, "report"}`.
    Complete {
        /// The report day.
        date: Day,
        /// Always `true`.
        complete: bool,
        /// The report written.
        report: Box<DailyReport>,
    },
    /// `{"date", "complete": false, "segmentsDone"}`: other invocations' segments still run.
    #[serde(rename_all = "camelCase")]
    Shared {
        /// The report day.
        date: Day,
        /// Always `false`.
        complete: bool,
        /// Segments done so far.
        segments_done: u32,
    },
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
        (Some(date), _) => Day::parse_field("date", &date)?,
        (None, Some(time)) => previous_day(&Timestamp::parse_field("time", &time)?),
        (None, None) => {
            return Err(
                ValidationError::new("date", "give a date, or send a scheduled event").into(),
            )
        }
    };
    let mut plan = RunPlan::new(
        day,
        config.segments,
        deadline.checked_sub(MARGIN).unwrap_or(deadline),
    )?;
    plan.page_limit = config.page_limit;
    plan.fresh = invocation.fresh;
    plan.only = invocation.segments;
    let outcome = run_daily_report(table, &plan).await?;
    let answer = match outcome.report {
        Some(report) => RunAnswer::Complete {
            date: day,
            complete: true,
            report: Box::new(report),
        },
        // This invocation's share is done; another invocation's segments are still running,
        // and whichever finishes last writes the report.
        None if outcome.requested_done => RunAnswer::Shared {
            date: day,
            complete: false,
            segments_done: outcome.segments_done,
        },
        None => {
            return Err(FleetError::Internal(format!(
                "report for {day} incomplete: {} of {} segments done; invoke again to resume",
                outcome.segments_done, config.segments
            )))
        }
    };
    serde_json::to_value(answer).map_err(FleetError::internal)
}
