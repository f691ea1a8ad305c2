//! One segment of the run: the directory (GSI2) in order, and for each entry its unit of
//! work: a profile is a user; a fleet is its owner's partitions, one per unit (the device
//! items and the live states, then each device's events of the day only); a purge marker is a
//! bounded purge. The checkpoint is a position, not a work list: the directory key of the last
//! entry finished and the owner in progress, so its size does not grow with a directory page
//! (a 1 MB page lists thousands of fleets). It is written every [`UNITS_PER_CHECKPOINT`]
//! units or [`CHECKPOINT_INTERVAL`], after every purge and before the invocation stops, so a
//! run cut off anywhere resumes there (at most that much work is done again), even inside a
//! million-device fleet, and checkpoints cost a small share of the reads they protect.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::plan::RunPlan;
use super::purge::purge_device;
use super::tally::{text, PageBounds, SegmentTally};
use crate::model::cursor::{exclusive_start_key, start_key, StartKey};
use crate::model::entities::device::{DeviceItem, DEVICE_PREFIX};
use crate::model::entities::device_state::{state_pk, DeviceStateItem};
use crate::model::entities::event::{EventItem, EVENT_PREFIX};
use crate::model::entities::fleet::FleetItem;
use crate::model::entities::profile::PROFILE_SK;
use crate::model::entities::purge_marker::PurgeMarkerItem;
use crate::model::entities::type_mark::type_window;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::Expressions;
use crate::model::ids::{DeviceId, EventType, UserId};
use crate::model::keys::{event_pk, IndexKeys};
use crate::model::schema::{Item, ENTITY_TYPE, GSI2, GSI2PK, GSI2SK, PK, SK};
use crate::model::timestamp::{Day, Timestamp};
use crate::store::dynamo::{key_range, query};
use crate::store::metrics::{MeterSnapshot, RequestMeter};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};

/// Checkpoints are removed by TTL this long after the run.
const CHECKPOINT_TTL_SECONDS: i64 = 14 * 86_400;

/// A segment's checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Checkpoint {
    pub(super) day: Day,
    pub(super) segment: u32,
    pub(super) segments: u32,
    pub(super) done: bool,
    /// The directory key of the last entry finished (the scan resumes after it).
    #[serde(default)]
    pub(super) last_key: Option<StartKey>,
    /// The owner whose partitions are being counted (its entry follows `last_key`).
    #[serde(default)]
    pub(super) current: Option<OwnerProgress>,
    pub(super) tally: SegmentTally,
    pub(super) ttl: i64,
}

impl Entity for Checkpoint {
    const ENTITY_TYPE: EntityType = EntityType::Checkpoint;
    fn item_key(&self) -> ItemKey {
        ItemKey::Checkpoint {
            day: self.day,
            segment: self.segment,
        }
    }
}

/// Attempts at one unit of work in one invocation (each after the SDK's own retries).
const UNIT_ATTEMPTS: u32 = 6;

/// Units of work between checkpoint writes at most. A unit reads at least 0.5 units (one
/// Query); a checkpoint write costs 1: one per unit cost more than the reads it protected.
pub const UNITS_PER_CHECKPOINT: u32 = 100;

/// Time between checkpoint writes at most (a resumed run redoes at most this much work).
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(10);

/// An owner whose partitions are being counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OwnerProgress {
    user: UserId,
    shards: u32,
    next_shard: u32,
    /// Whether a device of this owner already showed activity in the 30 days.
    active: bool,
    /// The owner's directory entry (the segment's position once the owner is done).
    entry: StartKey,
}

/// The directory page being worked through: the entries after the checkpoint's position
/// (not checkpointed: a resumed run reads them again from there). Read only while no owner is
/// in progress, so it never holds the entry of the owner in progress.
#[derive(Default)]
struct DirectoryPage {
    entries: Vec<Item>,
    next: usize,
    /// No page follows this one.
    last: bool,
    /// A page was read since the position was last restored.
    read: bool,
}

/// What a unit of work was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnitKind {
    /// The segment's directory is done.
    DirectoryEnd,
    Owner,
    Purge,
}

/// Runs one segment from its checkpoint until it is done, the deadline comes or the unit limit
/// is reached; returns the checkpoint as last written.
pub(super) async fn scan_segment(
    table: &FleetTable,
    plan: &RunPlan,
    segment: u32,
    resume: Option<Checkpoint>,
) -> Result<Checkpoint, FleetError> {
    let now = Timestamp::now();
    let bounds = PageBounds::for_day(&plan.day, &now);
    let mut checkpoint = resume.unwrap_or_else(|| first_checkpoint(plan, segment, &now));
    let mut page = DirectoryPage::default();
    let mut units = 0;
    let mut unsaved = 0;
    let mut saved_at = Instant::now();
    while !checkpoint.done {
        if Instant::now() >= plan.deadline || plan.max_pages.is_some_and(|max| units >= max) {
            break;
        }
        units += 1;
        let started = Instant::now();
        let meter = RequestMeter::new();
        // A unit that fails past the SDK's retries (throttling, faults) is done again from the
        // segment's state before it, a few times within the deadline, before the invocation
        // gives up and Lambda's retry resumes from the last checkpoint.
        let mut retry = Retry::until(plan.deadline).at_most(UNIT_ATTEMPTS);
        let before = checkpoint.clone();
        let mut step = Ok(UnitKind::DirectoryEnd);
        while retry.next_attempt().await {
            if retry.attempt() > 1 {
                // From the position before the unit: the page is read again from there.
                checkpoint = before.clone();
                page = DirectoryPage::default();
            }
            step = meter
                .clone()
                .scope(next_unit(
                    table,
                    plan,
                    segment,
                    &mut checkpoint,
                    &mut page,
                    &bounds,
                ))
                .await;
            if !step.as_ref().is_err_and(FleetError::is_retryable) {
                break;
            }
        }
        let used = meter.snapshot();
        // The unit's own meter hides its reads from the invocation's: hand them up.
        RequestMeter::add_to_current(&used);
        let kind = match step {
            Ok(kind) => kind,
            Err(err) => {
                // Keep the units done before this one: the next invocation resumes after them.
                if unsaved > 0 {
                    checkpoint = before;
                    let _ = save(table, &mut checkpoint, plan).await;
                }
                return Err(err);
            }
        };
        unit_done(&mut checkpoint, &used, started.elapsed());
        unsaved += 1;
        // A purge deletes: its count must not be lost or counted twice.
        if checkpoint.done
            || kind == UnitKind::Purge
            || unsaved >= UNITS_PER_CHECKPOINT
            || saved_at.elapsed() >= CHECKPOINT_INTERVAL
        {
            save(table, &mut checkpoint, plan).await?;
            (unsaved, saved_at) = (0, Instant::now());
        }
    }
    if unsaved > 0 {
        save(table, &mut checkpoint, plan).await?;
    }
    Ok(checkpoint)
}

/// Writes `checkpoint` (counting the write), again after a failure past the SDK's retries
/// (the same item: safe to repeat) while the deadline allows: the work since the last one is
/// done again if it is not written.
async fn save(
    table: &FleetTable,
    checkpoint: &mut Checkpoint,
    plan: &RunPlan,
) -> Result<(), FleetError> {
    checkpoint.tally.checkpoint_writes += 1;
    let mut retry = Retry::until(plan.deadline).at_most(UNIT_ATTEMPTS);
    let mut saved = Ok(());
    while retry.next_attempt().await {
        saved = crate::store::dynamo::put_item(table, &*checkpoint).await;
        if !saved.as_ref().is_err_and(FleetError::is_retryable) {
            break;
        }
    }
    saved
}

/// The checkpoint of a segment not started yet.
fn first_checkpoint(plan: &RunPlan, segment: u32, now: &Timestamp) -> Checkpoint {
    Checkpoint {
        day: plan.day,
        segment,
        segments: plan.segments,
        done: false,
        last_key: None,
        current: None,
        tally: Default::default(),
        ttl: now.epoch_seconds() + CHECKPOINT_TTL_SECONDS,
    }
}

/// Adds a unit's cost to the tally.
fn unit_done(checkpoint: &mut Checkpoint, used: &MeterSnapshot, elapsed: Duration) {
    let tally = &mut checkpoint.tally;
    tally.read_units += used.read_units;
    tally.write_units += used.write_units;
    tally.requests += u64::from(used.requests());
    tally.duration_ms += elapsed.as_millis() as u64;
}

/// The key a directory scan resumes after `entry`: its table and index keys.
fn entry_key(entry: &Item) -> StartKey {
    [PK, SK, GSI2PK, GSI2SK]
        .into_iter()
        .filter_map(|name| {
            Some((
                name.to_string(),
                entry.get(name.name())?.as_s().ok()?.clone(),
            ))
        })
        .collect()
}

/// Does the next unit of work: the next partition of the owner in progress, else the next
/// fleet or purge marker of the directory (reading directory pages and counting profiles on
/// the way), or finds the directory done.
async fn next_unit(
    table: &FleetTable,
    plan: &RunPlan,
    segment: u32,
    checkpoint: &mut Checkpoint,
    page: &mut DirectoryPage,
    bounds: &PageBounds,
) -> Result<UnitKind, FleetError> {
    if let Some(owner) = checkpoint.current.take() {
        let seen_active =
            count_partition(table, &owner.user, owner.next_shard, checkpoint, bounds).await?;
        let active = owner.active || seen_active;
        if owner.next_shard + 1 < owner.shards {
            checkpoint.current = Some(OwnerProgress {
                next_shard: owner.next_shard + 1,
                active,
                ..owner
            });
        } else {
            // `users` counts people: an organization's fleet is counted apart.
            if owner.user.is_org_fleet() {
                checkpoint.tally.active_orgs += u64::from(active);
            } else {
                checkpoint.tally.active_users += u64::from(active);
            }
            checkpoint.last_key = Some(owner.entry);
        }
        return Ok(UnitKind::Owner);
    }
    loop {
        let Some(entry) = page.entries.get(page.next) else {
            if page.read && page.last {
                checkpoint.done = true;
                return Ok(UnitKind::DirectoryEnd);
            }
            read_directory_page(table, plan, segment, checkpoint, page).await?;
            continue;
        };
        page.next += 1;
        checkpoint.tally.scanned += 1;
        let key = entry_key(entry);
        match EntityType::of(entry) {
            Some(EntityType::Fleet) => {
                let fleet = FleetItem::from_item(entry.clone())?;
                checkpoint.current = Some(OwnerProgress {
                    user: fleet.user_id,
                    shards: fleet.partitions.max(1),
                    next_shard: 0,
                    active: false,
                    entry: key,
                });
                return Box::pin(next_unit(table, plan, segment, checkpoint, page, bounds)).await;
            }
            Some(EntityType::PurgeMarker) => {
                let marker = PurgeMarkerItem::from_item(entry.clone())?;
                checkpoint.tally.purged += purge_device(table, &marker, plan.deadline).await?;
                checkpoint.last_key = Some(key);
                return Ok(UnitKind::Purge);
            }
            Some(EntityType::Profile) => checkpoint.tally.users += 1,
            _ => {}
        }
        checkpoint.last_key = Some(key);
    }
}

/// Reads the segment's directory page after the checkpoint's position (an empty page moves
/// the position to where the next one starts).
async fn read_directory_page(
    table: &FleetTable,
    plan: &RunPlan,
    segment: u32,
    checkpoint: &mut Checkpoint,
    page: &mut DirectoryPage,
) -> Result<(), FleetError> {
    let out = table
        .client
        .scan()
        .table_name(table.name())
        .index_name(GSI2)
        .segment(segment as i32)
        .total_segments(plan.segments as i32)
        .set_limit(plan.page_limit)
        .set_exclusive_start_key(checkpoint.last_key.as_ref().map(exclusive_start_key))
        .send()
        .await
        .map_err(sdk_error)?;
    let entries = out.items.unwrap_or_default();
    if entries.is_empty() {
        if let Some(next) = out.last_evaluated_key.as_ref().map(entry_key) {
            checkpoint.last_key = Some(next);
        }
    }
    *page = DirectoryPage {
        last: out.last_evaluated_key.is_none(),
        entries,
        next: 0,
        read: true,
    };
    Ok(())
}

/// Every item of a Query, page after page.
async fn query_all(
    request: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
) -> Result<Vec<Item>, FleetError> {
    let mut items = Vec::new();
    let mut start: Option<StartKey> = None;
    loop {
        let (page, last) = query(
            request
                .clone()
                .set_exclusive_start_key(start.as_ref().map(exclusive_start_key)),
        )
        .await?;
        items.extend(page);
        match last.as_ref().and_then(start_key) {
            Some(key) => start = Some(key),
            None => return Ok(items),
        }
    }
}

/// Counts one of `user`'s partitions: on the user partition (shard 0) the device items (by
/// status and type) and the live states there; on another, its live states. For each device
/// seen since the day began, its events of the day (one Query of that range only). Returns
/// whether a device showed activity in the 30 days before the day's end.
async fn count_partition(
    table: &FleetTable,
    user: &UserId,
    shard: u32,
    checkpoint: &mut Checkpoint,
    bounds: &PageBounds,
) -> Result<bool, FleetError> {
    // The device item's and the live state's status and type share their names.
    let request = key_range(
        table,
        state_pk(user, shard),
        DEVICE_PREFIX,
        PROFILE_SK,
        Expressions::builder().projection(&[
            PK,
            SK,
            ENTITY_TYPE,
            DeviceItem::STATUS,
            DeviceItem::DEVICE_TYPE,
            DeviceStateItem::LAST_SEEN,
            DeviceItem::DELETING_AT,
        ]),
    );
    let items = query_all(request).await?;
    let tally = &mut checkpoint.tally;
    let mut seen: Vec<(DeviceId, Timestamp)> = Vec::new();
    for item in &items {
        tally.scanned += 1;
        match EntityType::of(item) {
            Some(EntityType::Device) if !item.contains_key(DeviceItem::DELETING_AT.name()) => {
                tally.count_device(item)
            }
            Some(EntityType::DeviceState) => {
                let last_seen = text(item, DeviceStateItem::LAST_SEEN)
                    .and_then(|t| Timestamp::parse_field("lastSeen", t).ok());
                if let (Ok(ItemKey::DeviceState { device, .. }), Some(at)) =
                    (ItemKey::of(item), last_seen)
                {
                    seen.push((device, at));
                }
            }
            _ => {}
        }
    }
    let mut active = false;
    for (device, last_seen) in seen {
        // A device last seen before the window never had an event in it: nothing to read.
        if last_seen < bounds.active_since {
            continue;
        }
        let day_events = if last_seen >= bounds.from {
            count_day(table, user, &device, checkpoint, bounds).await?
        } else {
            0
        };
        // Seen within the window (before the day's end), or during the day: active. Seen only
        // after the day: an event before the day within the window decides it.
        if !active {
            active = day_events > 0
                || last_seen < bounds.to
                || active_before_the_day(table, user, &device, bounds).await?;
        }
    }
    Ok(active)
}

/// Counts `device`'s events of the day (not expired) into the tally; returns how many.
async fn count_day(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    checkpoint: &mut Checkpoint,
    bounds: &PageBounds,
) -> Result<u64, FleetError> {
    let partition = event_pk(user, device);
    let request = key_range(
        table,
        partition.clone(),
        format!("{EVENT_PREFIX}{}", bounds.from),
        // The day's end is exclusive: every event key of the day sorts below its first instant.
        format!("{EVENT_PREFIX}{}", bounds.to),
        Expressions::builder().projection(&[EventItem::EVENT_TYPE, EventItem::TTL, EventItem::AT]),
    );
    let items = query_all(request).await?;
    let tally = &mut checkpoint.tally;
    let mut counted = 0;
    // The shared index partitions take one type mark per device, searchable type and window
    // (what ingestion writes there), not one entry per event: count those.
    let mut marked = std::collections::HashSet::new();
    for item in &items {
        tally.scanned += 1;
        let expired = item
            .get(EventItem::TTL.name())
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<i64>().ok())
            .is_some_and(|ttl| ttl <= bounds.now);
        if expired {
            continue;
        }
        let event_type = text(item, EventItem::EVENT_TYPE).unwrap_or("unknown");
        let mark = EventType::parse(event_type)
            .ok()
            .zip(text(item, EventItem::AT).and_then(|at| Timestamp::parse_field("at", at).ok()))
            .filter(|(t, at)| marked.insert((t.clone(), type_window(at))))
            .and_then(|(t, at)| {
                IndexKeys::type_mark(user, device, &t, &type_window(&at), &table.config.shards)
                    .gsi1pk
            });
        tally.count_event(&partition, event_type, mark.as_deref());
        counted += 1;
    }
    tally.close_partition();
    if counted > 0 {
        tally.online_24h += 1;
    }
    Ok(counted)
}

/// Whether `device`, seen again after the day, had an event in the 30 days before the day
/// began (one Query, newest first, at most one item).
async fn active_before_the_day(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    bounds: &PageBounds,
) -> Result<bool, FleetError> {
    let (items, _) = query(
        key_range(
            table,
            event_pk(user, device),
            format!("{EVENT_PREFIX}{}", bounds.active_since),
            format!("{EVENT_PREFIX}{}", bounds.from),
            Expressions::builder().projection(&[PK]),
        )
        .scan_index_forward(false)
        .limit(1),
    )
    .await?;
    Ok(!items.is_empty())
}
