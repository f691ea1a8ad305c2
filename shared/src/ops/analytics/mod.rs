//! The daily analytics run (docs/design.md, "Daily analytics"): a parallel Scan of the directory (GSI2: one entry per
//! profile, fleet and purge marker), checkpointed per segment, that writes `REPORT#{day}` and
//! purges the events of deleted devices. It reads what scales with the day, never the history:
//! the directory, each owner's device and live-state items, and each device's events of the
//! day only (a device last seen before the day has none, so it is not read at all).
//!
//! Every segment keeps a [`SegmentTally`]; after each unit of work (a directory page, one of an
//! owner's partitions, a purge) the tally and the segment's position are written to the
//! segment's own checkpoint key (`ANALYTICS#{day}#{n}`), so a run cut off by the Lambda timeout
//! resumes where it stopped, even inside a large fleet. When every segment is done the tallies
//! are merged into the report; running the day again reuses the finished checkpoints and writes
//! the same report.

mod plan;
mod purge;
mod report;
mod scan;
mod tally;

pub use plan::RunPlan;
pub use purge::PURGE_PER_RUN;
pub use report::{
    build_report, DailyReport, DeviceFigures, EventFigures, KeyHeat, RunFigures, TopDevice,
    UserFigures, HOT_SHARE,
};
pub use scan::{CHECKPOINT_INTERVAL, UNITS_PER_CHECKPOINT};
pub use tally::{PartitionCount, SegmentTally, HEAT_KEYS, TOP_DEVICES};

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::KeysAndAttributes;

use crate::model::entities::report::ReportItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::pattern_id::PatternId;
use crate::model::timestamp::{Day, Timestamp};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, RequestBudget};
use crate::store::table::{sdk_error, FleetTable, MAX_ATTEMPTS};
use scan::{scan_segment, Checkpoint};

/// The UTC day before `at` (the scheduled run at 00:15 reports the day that just ended).
pub fn previous_day(at: &Timestamp) -> Day {
    at.day().previous()
}

/// The outcome of one invocation.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// Every segment is done and the report is written.
    pub complete: bool,
    /// Segments done so far.
    pub segments_done: u32,
    /// Every segment this invocation was asked to scan is done (the report may still wait for
    /// segments other invocations scan).
    pub requested_done: bool,
    /// The report, when complete.
    pub report: Option<DailyReport>,
}

/// A figure [`run_daily_report`] computes into the daily report: no request of its own at read
/// time (it is read with AP-15).
const fn daily_report_figure(id: PatternId, description: &'static str) -> AccessPattern {
    AccessPattern {
        id,
        description,
        frequency: Frequency::Analytics,
        operations: &[],
        index: None,
        key_condition: "daily report",
        budget: RequestBudget::ZeroAtReadTime,
        max_read_units: None,
        route: None,
        implemented_by: implemented_by!(run_daily_report),
    }
}

/// AP-10, the report's `devices.byStatus`.
pub const DEVICE_COUNT_BY_STATUS: AccessPattern =
    daily_report_figure(PatternId::DeviceCountByStatus, "device count by status");

/// AP-11, the report's `users.active30d`.
pub const ACTIVE_USERS: AccessPattern =
    daily_report_figure(PatternId::ActiveUsers, "active users in the last 30 days");

/// Runs (or resumes) the daily analytics for `plan.day`.
pub async fn run_daily_report(
    table: &FleetTable,
    plan: &RunPlan,
) -> Result<RunOutcome, FleetError> {
    if plan.fresh {
        forget_checkpoints(table, &plan.day, plan.segments).await?;
    }
    let mut checkpoints = load_checkpoints(table, &plan.day, plan.segments).await?;
    if let Some(other) = checkpoints.values().find(|c| c.segments != plan.segments) {
        return Err(ValidationError::new(
            "segments",
            format!(
                "the run for {} started with {} segments",
                plan.day, other.segments
            ),
        )
        .into());
    }
    let wanted: Vec<u32> = plan
        .only
        .clone()
        .unwrap_or_else(|| (0..plan.segments).collect());
    let work = wanted
        .into_iter()
        .filter(|s| *s < plan.segments)
        .filter(|s| !checkpoints.get(s).is_some_and(|c| c.done))
        .map(|segment| {
            let resume = checkpoints.get(&segment).cloned();
            // Boxed: the scan's future is deep, and boxing keeps every caller's type small.
            Box::pin(scan_segment(table, plan, segment, resume))
        });
    for result in futures::future::join_all(work).await {
        let checkpoint = result?;
        checkpoints.insert(checkpoint.segment, checkpoint);
    }
    let done = checkpoints.values().filter(|c| c.done).count() as u32;
    let requested_done = plan
        .only
        .clone()
        .unwrap_or_else(|| (0..plan.segments).collect())
        .iter()
        .all(|s| checkpoints.get(s).is_some_and(|c| c.done));
    if done < plan.segments {
        return Ok(RunOutcome {
            complete: false,
            segments_done: done,
            requested_done,
            report: None,
        });
    }
    let tallies: Vec<&SegmentTally> = checkpoints.values().map(|c| &c.tally).collect();
    let report = build_report(plan.day, &tallies, plan.segments);
    // Replaces an earlier run's report for the same day: reports are idempotent per day.
    let item = ReportItem {
        day: report.date,
        report_json: serde_json::to_string(&report).map_err(FleetError::internal)?,
    };
    crate::store::dynamo::put_item(table, &item).await?;
    Ok(RunOutcome {
        complete: true,
        segments_done: done,
        requested_done,
        report: Some(report),
    })
}

/// The day's checkpoints: one key per segment, read together (consistently).
async fn load_checkpoints(
    table: &FleetTable,
    day: &Day,
    segments: u32,
) -> Result<BTreeMap<u32, Checkpoint>, FleetError> {
    let mut found = BTreeMap::new();
    let keys: Vec<_> = (0..segments)
        .map(|segment| ItemKey::Checkpoint { day: *day, segment }.attributes())
        .collect();
    for chunk in keys.chunks(crate::store::dynamo::BATCH_GET_SIZE) {
        let request = KeysAndAttributes::builder()
            .set_keys(Some(chunk.to_vec()))
            .consistent_read(true)
            .build()
            .map_err(FleetError::internal)?;
        let items = crate::store::dynamo::get_all(
            table,
            request,
            &mut crate::store::retry::Retry::attempts(MAX_ATTEMPTS),
        )
        .await?;
        for item in items {
            let c = Checkpoint::from_item(item)?;
            found.insert(c.segment, c);
        }
    }
    Ok(found)
}

async fn forget_checkpoints(
    table: &FleetTable,
    day: &Day,
    segments: u32,
) -> Result<(), FleetError> {
    for segment in load_checkpoints(table, day, segments).await?.into_keys() {
        table
            .client
            .delete_item()
            .table_name(table.name())
            .set_key(Some(
                ItemKey::Checkpoint { day: *day, segment }.attributes(),
            ))
            .send()
            .await
            .map_err(sdk_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_scheduled_run_reports_the_day_before() {
        let at = Timestamp::parse_field("time", "2024-04-11T00:15:00Z").unwrap();
        assert_eq!(previous_day(&at), "2024-04-10");
        assert!(Day::parse_field("date", "2024-02-30").is_err());
        let leap = Day::parse_field("date", "2024-02-29").unwrap();
        assert!(RunPlan::new(leap, 0, Instant::now()).is_err());
        assert!(RunPlan::new(leap, 4, Instant::now()).is_ok());
    }
}
