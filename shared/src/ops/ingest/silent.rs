//! AP-30: the scheduled worker rolls the summaries of devices that stopped reporting (issue 38
//! item 6, docs/design.md section 13, "A device gone silent").
//!
//! A batch flushes and rolls its device's summaries, so a device that stops reporting would
//! keep its last open buckets in its live state and its last days unrolled: once the 5-minute
//! blocks expire, the hours and days they held would be gone. Once a day has ended (and
//! [`ROLL_GRACE`] has passed, so every device still reporting has moved its `SEEN#` entry
//! into the new day), the worker walks the devices whose `SEEN#` bucket (GSI1) falls between
//! its last walk and that day, and for each writes the buckets before the day into their
//! blocks and rolls every day before it, exactly as the device's next batch would: in one
//! transaction with the live state, conditioned on its `ingestSeq`. A device that reported
//! meanwhile fails the condition and is left to its own batches. Each device is looked at
//! once a silence, the walk reads only the devices that went silent since the last one, and
//! a checkpoint ([`SilentRollItem`]) lets the walk span runs.

use std::time::Instant;

use aws_sdk_dynamodb::types::{KeysAndAttributes, TransactWriteItem, Update};
use serde::Serialize;

use super::series::timestamp;
pub use super::series::ROLL_GRACE;
use super::series::{SeriesItems, SeriesOwner, SeriesRetention, SeriesStore};
use super::state::{unchanged_since_read, StateSlot, MAX_TRANSACTION_ACTIONS};
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::{seen_bucket_bound, seen_partitions, DeviceStateItem};
use crate::model::entities::event::registration_stamp;
use crate::model::entities::silent_roll::{SeenPosition, SilentRollItem};
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::keys::PrimaryKey;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, GSI1, GSI1PK, GSI1SK, PK, SK};
use crate::model::series::Resolution;
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{get_all, number_value, put_item, query, string_value, transact};
use crate::store::dynamo::{read_consistent, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, FleetTable, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// Devices one page of a `SEEN#` partition lists: their live states and device items are read
/// with one BatchGetItem of 100 keys.
const SEEN_PAGE: i32 = 50;

/// AP-30, implemented by [`roll_silent_devices`].
pub const SILENT_ROLLS: AccessPattern = AccessPattern {
    id: PatternId::SilentRolls,
    description: "the scheduled worker rolls the summaries of devices silent since before the last day ended",
    frequency: Frequency::Important,
    operations: &[
        Operation::GetItem,
        Operation::Query,
        Operation::BatchGetItem,
        Operation::TransactWriteItems,
        Operation::PutItem,
    ],
    index: Some(GSI1),
    key_condition: "PK = ROLLS#SILENT, SK = CHECKPOINT; GSI1PK = STATUS#{status}#{shard} AND GSI1SK BETWEEN SEEN#{through} AND SEEN#{day}, every partition; the devices' live states and device items",
    budget: RequestBudget::SilentRollPages,
    max_read_units: None,
    route: None,
    implemented_by: implemented_by!(roll_silent_devices),
};

/// What a run of the silent devices' roll did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SilentRollRun {
    /// The day start devices are rolled to (`None`: no walk was due).
    pub target: Option<String>,
    /// Devices whose `SEEN#` entry the run listed.
    pub devices_seen: u32,
    /// Devices whose summaries it wrote (buckets flushed, days rolled).
    pub devices_rolled: u32,
    /// Devices that reported meanwhile (their own batches roll them).
    pub devices_reporting: u32,
    /// Whether the walk to `target` is finished.
    pub finished: bool,
}

/// AP-30: until `until`, walks the devices whose `SEEN#` bucket is before the start of the day
/// [`ROLL_GRACE`] before `now` and was not walked yet, and rolls each one's summaries to that
/// day ([`roll_device`]); the walk goes on from its checkpoint in the next run.
pub async fn roll_silent_devices(
    table: &FleetTable,
    now: Timestamp,
    until: Instant,
) -> Result<SilentRollRun, FleetError> {
    let day = Resolution::Day.bucket_start(now.epoch_millis() - ROLL_GRACE.as_millis() as i64);
    let day = timestamp(day)?;
    let mut checkpoint: SilentRollItem = read_consistent(table, &ItemKey::SilentRoll {})
        .await?
        .unwrap_or_default();
    let target = match checkpoint.target {
        Some(target) => target,
        None if checkpoint.through.is_some_and(|t| t >= day) => {
            return Ok(SilentRollRun {
                finished: true,
                ..SilentRollRun::default()
            })
        }
        None => {
            checkpoint.target = Some(day);
            checkpoint.partition = 0;
            checkpoint.after = None;
            day
        }
    };
    let mut run = SilentRollRun {
        target: Some(target.to_string()),
        ..SilentRollRun::default()
    };
    let partitions = seen_partitions(&table.config.shards);
    // Entries from the start of the index when no walk came before: every device's.
    let from = checkpoint
        .through
        .map(|t| seen_bucket_bound(&t))
        .unwrap_or_else(|| seen_bucket_bound(&timestamp(0).expect("the epoch")));
    let to = seen_bucket_bound(&target);
    while (checkpoint.partition as usize) < partitions.len() && Instant::now() < until {
        let partition = &partitions[checkpoint.partition as usize];
        let start = checkpoint.after.as_ref().map(|after| {
            Item::from([
                (GSI1PK.name().to_string(), string_value(partition.clone())),
                (
                    GSI1SK.name().to_string(),
                    string_value(after.seen_key.clone()),
                ),
                (PK.name().to_string(), string_value(after.pk.clone())),
                (SK.name().to_string(), string_value(after.sk.clone())),
            ])
        });
        let (entries, last) = query(
            table
                .client
                .query()
                .table_name(table.name())
                .index_name(GSI1)
                .expressions(
                    Expressions::builder()
                        .key_condition(
                            Condition::equals(GSI1PK, string_value(partition.clone())).and(
                                Condition::between(
                                    GSI1SK,
                                    string_value(from.clone()),
                                    string_value(to.clone()),
                                ),
                            ),
                        )
                        .build(),
                )
                .limit(SEEN_PAGE)
                .set_exclusive_start_key(start),
        )
        .await?;
        let states: Vec<&Item> = entries
            .iter()
            .filter(|e| EntityType::of(e) == Some(EntityType::DeviceState))
            .collect();
        run.devices_seen += states.len() as u32;
        for (state, device) in read_states(table, &states).await? {
            match roll_device(table, &state, &device, target.epoch_millis()).await? {
                DeviceRoll::Rolled => run.devices_rolled += 1,
                DeviceRoll::Reporting => run.devices_reporting += 1,
                DeviceRoll::Nothing => {}
            }
        }
        match last {
            Some(_) => checkpoint.after = entries.last().map(position).transpose()?,
            None => {
                checkpoint.partition += 1;
                checkpoint.after = None;
            }
        }
        // After every page of devices: a run cut off redoes at most a page (a device rolled
        // twice finds nothing left the second time).
        if !states.is_empty() {
            put_item(table, &checkpoint).await?;
        }
    }
    if checkpoint.partition as usize >= partitions.len() {
        checkpoint.through = Some(target);
        checkpoint.target = None;
        checkpoint.partition = 0;
        checkpoint.after = None;
        run.finished = true;
    }
    put_item(table, &checkpoint).await?;
    Ok(run)
}

/// What [`roll_device`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceRoll {
    /// Its buckets before the day are in blocks and its days before it rolled.
    Rolled,
    /// It had nothing before the day to write.
    Nothing,
    /// Its live state changed since it was read (it reported): left to its own batches.
    Reporting,
}

/// Writes the 5-minute buckets of `state` before `day` (a day start) into their blocks and
/// rolls every day before it, in one transaction with the live state conditioned on its
/// `ingestSeq` (one per type when all of them do not fit one transaction).
pub async fn roll_device(
    table: &FleetTable,
    state: &DeviceStateItem,
    device: &DeviceItem,
    day: i64,
) -> Result<DeviceRoll, FleetError> {
    let store = SeriesStore {
        table,
        owner: SeriesOwner {
            user_id: state.user_id.clone(),
            device_id: state.device_id.clone(),
            stamp: registration_stamp(&device.created_at),
            moving_from: state.moving_from.clone(),
        },
    };
    let retention = SeriesRetention {
        block_days: table.config.retention_days,
        hourly_days: table.config.hourly_retention_days,
        daily_days: table.config.daily_retention_days,
    };
    let mut base = state.clone();
    let mut rolled = false;
    // All types at once; a device whose types do not fit one transaction, one type at a time.
    let kinds: Vec<String> = state.series.0.keys().cloned().collect();
    let mut groups = vec![kinds.clone()];
    let mut split = false;
    while let Some(group) = groups.pop() {
        let mut series = base.series.clone();
        let mut items = SeriesItems::default();
        store
            .flush_before(
                &mut series,
                day,
                |k| group.iter().any(|g| g == k),
                &mut items,
            )
            .await?;
        if series == base.series && items.changed() == 0 {
            continue;
        }
        if 1 + items.changed() > MAX_TRANSACTION_ACTIONS {
            if !split && group.len() > 1 {
                split = true;
                groups = kinds.iter().rev().map(|k| vec![k.clone()]).collect();
                continue;
            }
            // Over 99 items for one type: weeks unrolled, which a daily walk never leaves.
            tracing::error!(device = %state.device_id, event_type = %group.join(","), items = items.changed(), "a silent device's roll does not fit a transaction: left as it is");
            continue;
        }
        let mut next = base.clone();
        next.series = series;
        next.ingest_seq = base.ingest_seq + 1;
        let changes = match next.series_attribute() {
            Some(value) => UpdateExpression::new().set(DeviceStateItem::SERIES, value),
            None => UpdateExpression::new().remove(DeviceStateItem::SERIES),
        }
        .set(DeviceStateItem::INGEST_SEQ, number_value(next.ingest_seq));
        let update = Update::builder()
            .table_name(table.name())
            .set_key(Some(state.item_key().attributes()))
            .expressions(Expressions::write(
                changes,
                Some(unchanged_since_read(&base)),
            ))
            .build()
            .map_err(FleetError::internal)?;
        let mut actions = vec![TransactWriteItem::builder().update(update).build()];
        actions.extend(items.actions(table, &store.owner, retention)?);
        match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => {
                rolled = true;
                base = next;
            }
            Transaction::Cancelled(reasons) => {
                if condition_failed(&reasons, StateSlot) {
                    return Ok(DeviceRoll::Reporting);
                }
                return Err(FleetError::internal(format!(
                    "silent roll cancelled: {reasons:?}"
                )));
            }
        }
    }
    Ok(if rolled {
        DeviceRoll::Rolled
    } else {
        DeviceRoll::Nothing
    })
}

/// The live states of `entries` (`SEEN#` entries) that hold summaries, each with its device
/// item (its registration's stamp), read consistently: one BatchGetItem per page.
async fn read_states(
    table: &FleetTable,
    entries: &[&Item],
) -> Result<Vec<(DeviceStateItem, DeviceItem)>, FleetError> {
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let mut keys = Vec::new();
    for entry in entries {
        let listed = DeviceStateItem::from_item((*entry).clone())?;
        keys.push(
            PrimaryKey::of(entry)
                .ok_or_else(|| FleetError::internal("a SEEN entry without its state's key"))?
                .attributes(),
        );
        keys.push(ItemKey::device(&listed.user_id, &listed.device_id).attributes());
    }
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    let found = get_all(table, request, &mut Retry::attempts(MAX_ATTEMPTS)).await?;
    let mut states = Vec::new();
    let mut devices = Vec::new();
    for item in found {
        match EntityType::of(&item) {
            Some(EntityType::DeviceState) => states.push(DeviceStateItem::from_item(item)?),
            Some(EntityType::Device) => devices.push(DeviceItem::from_item(item)?),
            _ => {}
        }
    }
    Ok(states
        .into_iter()
        .filter(|s| !s.series.0.is_empty())
        .filter_map(|s| {
            let device = devices
                .iter()
                .find(|d| d.user_id == s.user_id && d.device_id == s.device_id)?
                .clone();
            Some((s, device))
        })
        .collect())
}

/// Where a page of a `SEEN#` partition ends: its last entry's index and primary keys.
fn position(entry: &Item) -> Result<SeenPosition, FleetError> {
    let text = |name: &str| {
        entry
            .get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .ok_or_else(|| FleetError::internal(format!("a SEEN entry without {name}")))
    };
    Ok(SeenPosition {
        seen_key: text(GSI1SK.name())?,
        pk: text(PK.name())?,
        sk: text(SK.name())?,
    })
}
