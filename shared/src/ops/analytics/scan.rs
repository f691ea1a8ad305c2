//! The parallel Scan: one segment page by page from its checkpoint, counting each page into
//! the segment's tally and purging the events of deleted devices.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::purge::{check_registrations, delete_items};
use super::tally::{is_orphaned_event, PageBounds};
use super::{Checkpoint, RunPlan, SegmentTally, CHECKPOINT_TTL_SECONDS};
use crate::cursor::{exclusive_start_key, start_key, StartKey};
use crate::error::FleetError;
use crate::items::EntityType;
use crate::keys::PrimaryKey;
use crate::metrics::{MeterSnapshot, RequestMeter};
use crate::schema::ENTITY_TYPE;
use crate::table::{sdk_error, FleetTable};
use crate::timestamp::Timestamp;

/// The fields the scan projects (everything the report and the purge need, nothing more).
const PROJECTION: &str =
    "PK, SK, #entityType, userId, deviceId, #status, #type, lastSeen, #at, #ttl, deletingAt, GSI1PK";

/// Scans one segment from its checkpoint until it is done or the deadline comes, saving a
/// checkpoint after every page.
pub(super) async fn scan_segment(
    table: &FleetTable,
    plan: &RunPlan,
    segment: u32,
    resume: Option<Checkpoint>,
) -> Result<Checkpoint, FleetError> {
    let now = Timestamp::now();
    let bounds = PageBounds::for_day(&plan.day, &now);
    let mut checkpoint = resume.unwrap_or_else(|| first_checkpoint(plan, segment, &now));
    // Registration checks made in this invocation: partition -> owner still registered.
    let mut live: HashMap<String, bool> = HashMap::new();
    let mut pages = 0;
    loop {
        if Instant::now() >= plan.deadline || plan.max_pages.is_some_and(|max| pages >= max) {
            return Ok(checkpoint);
        }
        pages += 1;
        let started = Instant::now();
        let meter = RequestMeter::new();
        let page = meter
            .clone()
            .scope(scan_page(
                table,
                plan,
                segment,
                &mut checkpoint,
                &mut live,
                &bounds,
            ))
            .await;
        let page_used = meter.snapshot();
        // The page's own meter hides its reads from the invocation's: hand them up.
        RequestMeter::add_to_current(&page_used);
        page_done(&mut checkpoint, page?, &page_used, started.elapsed());
        crate::ops::put_item(table, &checkpoint).await?;
        if checkpoint.done {
            return Ok(checkpoint);
        }
    }
}

/// The checkpoint of a segment not started yet.
fn first_checkpoint(plan: &RunPlan, segment: u32, now: &Timestamp) -> Checkpoint {
    Checkpoint {
        day: plan.day,
        segment,
        segments: plan.segments,
        done: false,
        last_key: None,
        tally: SegmentTally::default(),
        ttl: now.epoch_seconds() + CHECKPOINT_TTL_SECONDS,
    }
}

/// Adds a scanned page's cost to the tally and moves the checkpoint past it (`last_key`:
/// the page's `LastEvaluatedKey`, `None` on the segment's last page).
fn page_done(
    checkpoint: &mut Checkpoint,
    last_key: Option<StartKey>,
    used: &MeterSnapshot,
    elapsed: Duration,
) {
    let tally = &mut checkpoint.tally;
    tally.read_units += used.read_units;
    tally.write_units += used.write_units;
    tally.requests += u64::from(used.requests());
    tally.duration_ms += elapsed.as_millis() as u64;
    if last_key.is_none() {
        tally.close_partition();
        checkpoint.done = true;
    }
    checkpoint.last_key = last_key;
    // One checkpoint write per page, counted as `pages` rather than in `write_units`
    // (its cost is only known after it is written into itself).
    checkpoint.tally.pages += 1;
}

/// Reads one page of the segment into the tally and purges the page's events of deleted
/// devices; returns the page's `LastEvaluatedKey`.
async fn scan_page(
    table: &FleetTable,
    plan: &RunPlan,
    segment: u32,
    checkpoint: &mut Checkpoint,
    live: &mut HashMap<String, bool>,
    bounds: &PageBounds,
) -> Result<Option<StartKey>, FleetError> {
    let out = table
        .client
        .scan()
        .table_name(table.name())
        .segment(segment as i32)
        .total_segments(plan.segments as i32)
        .projection_expression(PROJECTION)
        .expression_attribute_names("#entityType", ENTITY_TYPE)
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#type", "type")
        .expression_attribute_names("#at", "at")
        .expression_attribute_names("#ttl", "ttl")
        .set_limit(plan.page_limit)
        .set_exclusive_start_key(checkpoint.last_key.as_ref().map(exclusive_start_key))
        .send()
        .await
        .map_err(sdk_error)?;
    let items = out.items.unwrap_or_default();
    let next = out.last_evaluated_key.as_ref().and_then(start_key);

    // Which event partitions of this page belong to devices still registered to their owner.
    let unknown: Vec<String> = items
        .iter()
        .filter(|i| EntityType::of(i) == Some(EntityType::Event))
        .filter_map(|i| PrimaryKey::of(i).map(|key| key.pk))
        .filter(|pk| !live.contains_key(pk))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for (pk, registered) in check_registrations(table, &unknown, plan.deadline).await? {
        live.insert(pk, registered);
    }

    let tally = &mut checkpoint.tally;
    let (purge, count): (Vec<_>, Vec<_>) = items
        .into_iter()
        .partition(|item| is_orphaned_event(item, live));
    for item in &count {
        tally.count_item(item, bounds);
    }
    tally.scanned += purge.len() as u64;
    tally.purged += purge.len() as u64;
    delete_items(table, purge, plan.deadline).await?;
    Ok(next)
}
