//! The scheduled run of `alarm-watch` (docs/design.md, "Offline detection"): offline
//! detection from the due index and reminders of active alarms, for a given time.
//!
//! **Offline.** Each `DUE#{shard}` partition of GSI3 is queried for entries due at or before
//! the run's time (one Query per shard and page: the reads follow the devices that are due,
//! never the fleet). The candidates' live states are read with BatchGetItem and each is
//! judged by [`judge`]: due -> one transaction raises the `offline` alarm (the state's update,
//! conditioned on `ingestSeq` unchanged, with [`super::transition_actions`]) and takes the
//! device off the due index; watched but not due (its entry is early: a PATCH asked for a
//! recheck) -> the entry moves to where it belongs; not watched (inactive, never seen, no
//! interval) -> the entry goes. Every such write bumps `ingestSeq`, so a batch that read the
//! state before it fails its condition and merges again: nothing is overwritten.
//!
//! **Reminders.** Each `REMIND#{shard}` partition of GSI1 is queried for alarms whose
//! `remindAt` has passed; each still active one gets `reminders + 1` and its next `remindAt`
//! (conditioned on both being unchanged, so overlapping runs remind once), which its stream
//! record turns into a notification; one that is no longer active leaves the index.
//!
//! **One bad item stops nothing** (docs/reliability.md, "Hardening: stream poison records"):
//! a live state or alarm that cannot be read is skipped, logged and counted
//! ([`WatchRun::unreadable`]), and the rest of its page and shard go on; reminders run even
//! when the offline check failed (the run still fails, after them).

use std::time::Instant;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{KeysAndAttributes, Put, TransactWriteItem, Update as UpdateAction};
use futures::stream::{self, StreamExt};
use serde::Serialize;

use super::record::{transition_actions, AlarmDevice};
use crate::model::alarm::evaluation::Transition;
use crate::model::alarm::ids::AlarmSource;
use crate::model::alarm::status::{AlarmState, AlarmStatus};
use crate::model::alarm::OFFLINE;
use crate::model::entities::alarm::AlarmItem;
use crate::model::entities::alarm::{reminder_gsi1pk, reminder_gsi1sk, REMINDER_SHARDS};
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::device_state::{due_gsi3pk, due_until, DUE_SHARDS};
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Attribute, Condition, Expressions, Update};
use crate::model::keys::{IndexKeys, PrimaryKey};
use crate::model::offline::OFFLINE_SEVERITY;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, GSI1, GSI1PK, GSI1SK, GSI3, GSI3PK, GSI3SK, PK};
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    get_all, number_value, query, string_value, transact, Transaction, BATCH_GET_SIZE,
};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// Index entries read per Query page (one BatchGetItem of their items follows each page).
pub const PAGE: i32 = BATCH_GET_SIZE as i32;
/// Shards worked on at once, and writes in flight per shard: an outage's thousands of due
/// devices go through a bounded number of connections (16 x 16), not all at once.
pub const CONCURRENCY: usize = 16;

/// What one scheduled run did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchRun {
    /// The time the run evaluated.
    pub at: String,
    /// Due entries read.
    pub candidates: u64,
    /// Offline alarms raised.
    pub raised: u64,
    /// Due entries moved to where their state says they belong.
    pub rearmed: u64,
    /// Due entries removed (the device is not watched).
    pub removed: u64,
    /// Writes refused because the state changed since it was read (the device reported):
    /// the next run sees the entry where the report put it.
    pub conflicts: u64,
    /// Reminders recorded (each becomes a notification through the stream).
    pub reminders: u64,
    /// Reminder entries of alarms no longer active, removed.
    pub stale_reminders: u64,
    /// Live states and alarms the index pointed at that could not be read (a schema the code
    /// does not know, a hand-made item): skipped and logged, their entries left for a fix.
    pub unreadable: u64,
    /// False when the deadline came before every due entry and reminder was handled (the
    /// next run goes on: entries stay until handled).
    pub complete: bool,
}

/// What the detector does with a candidate's live state at time `at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Silent past its due time: raise the offline alarm.
    Raise,
    /// Watched, not due: the entry moves to this due time.
    Rearm(Timestamp),
    /// Not watched: the entry goes.
    Remove,
    /// The entry is where it belongs and not due (the index lagged the table): nothing.
    Keep,
}

/// The verdict on `state` at `at` (pure: the run's decisions, unit-tested).
pub fn judge(state: &DeviceStateItem, at: &Timestamp) -> Verdict {
    match state.due_at() {
        None if state.indexed_due.is_none() => Verdict::Keep,
        None => Verdict::Remove,
        Some(due) if due <= *at => Verdict::Raise,
        Some(due) if Some(due) != state.indexed_due => Verdict::Rearm(due),
        Some(_) => Verdict::Keep,
    }
}

/// AP-27, implemented by [`check_offline`].
pub const OFFLINE_CHECK: AccessPattern = AccessPattern {
    id: PatternId::OfflineCheck,
    description:
        "the schedule's offline check: devices silent past their due time raise an offline alarm",
    frequency: Frequency::Important,
    operations: &[
        Operation::Query,
        Operation::BatchGetItem,
        Operation::TransactWriteItems,
        Operation::UpdateItem,
    ],
    index: Some(GSI3),
    key_condition:
        "GSI3PK = DUE#{shard} AND GSI3SK <= {dueUntil}, every shard; the candidates' live states",
    budget: RequestBudget::DueShardPages,
    max_read_units: None,
    route: None,
    implemented_by: implemented_by!(check_offline),
};

/// AP-28, implemented by [`send_reminders`].
pub const ALARM_REMINDERS: AccessPattern = AccessPattern {
    id: PatternId::AlarmReminders,
    description: "the schedule's reminders: active alarms whose reminder is due are reminded once",
    frequency: Frequency::Important,
    operations: &[
        Operation::Query,
        Operation::BatchGetItem,
        Operation::UpdateItem,
    ],
    index: Some(GSI1),
    key_condition: "GSI1PK = REMIND#{shard} AND GSI1SK <= {dueUntil}, every shard; the alarms",
    budget: RequestBudget::DueShardPages,
    max_read_units: None,
    route: None,
    implemented_by: implemented_by!(send_reminders),
};

/// One scheduled run at `at`, until `deadline`: offline detection, then reminders. Reminders
/// run whatever the offline check did; a failure of either is the run's (after both ran).
pub async fn watch(
    table: &FleetTable,
    at: Timestamp,
    deadline: Instant,
) -> Result<WatchRun, FleetError> {
    let offline = check_offline(table, at, deadline).await;
    let reminded = send_reminders(table, at, deadline).await;
    match (offline, reminded) {
        (Ok(offline), Ok(reminded)) => Ok(WatchRun {
            reminders: reminded.reminders,
            stale_reminders: reminded.stale_reminders,
            conflicts: offline.conflicts + reminded.conflicts,
            unreadable: offline.unreadable + reminded.unreadable,
            complete: offline.complete && reminded.complete,
            ..offline
        }),
        (Err(err), Ok(reminded)) => {
            tracing::error!(
                error = %err,
                reminders = reminded.reminders,
                "offline check failed; reminders were sent"
            );
            Err(err)
        }
        (Ok(offline), Err(err)) => {
            tracing::error!(
                error = %err,
                raised = offline.raised,
                "reminders failed; the offline check was done"
            );
            Err(err)
        }
        (Err(err), Err(reminders)) => {
            tracing::error!(error = %reminders, "reminders failed too");
            Err(err)
        }
    }
}

/// AP-27: every `DUE#` shard's entries due by `at`, until `deadline` (the run's offline
/// part; its reminder counts stay 0).
pub async fn check_offline(
    table: &FleetTable,
    at: Timestamp,
    deadline: Instant,
) -> Result<WatchRun, FleetError> {
    let mut run = WatchRun {
        at: at.to_string(),
        complete: true,
        ..WatchRun::default()
    };
    // The futures are built first: a stream mapping a closure over borrowed data would not be
    // `Send` for every lifetime (tokio::spawn of a caller needs it).
    let runs: Vec<_> = (0..DUE_SHARDS)
        .map(|shard| detect_shard(table, shard, at, deadline))
        .collect();
    let shards: Vec<_> = stream::iter(runs)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    for shard in shards {
        let shard = shard?;
        run.candidates += shard.candidates;
        run.raised += shard.raised;
        run.rearmed += shard.rearmed;
        run.removed += shard.removed;
        run.conflicts += shard.conflicts;
        run.unreadable += shard.unreadable;
        run.complete &= shard.complete;
    }
    Ok(run)
}

/// AP-28: every `REMIND#` shard's alarms whose reminder is due by `at`, until `deadline` (the
/// run's reminder part; its offline counts stay 0).
pub async fn send_reminders(
    table: &FleetTable,
    at: Timestamp,
    deadline: Instant,
) -> Result<WatchRun, FleetError> {
    let mut run = WatchRun {
        at: at.to_string(),
        complete: true,
        ..WatchRun::default()
    };
    let runs: Vec<_> = (0..REMINDER_SHARDS)
        .map(|shard| remind_shard(table, shard, at, deadline))
        .collect();
    let shards: Vec<_> = stream::iter(runs)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    for shard in shards {
        let shard = shard?;
        run.reminders += shard.reminders;
        run.stale_reminders += shard.stale_reminders;
        run.conflicts += shard.conflicts;
        run.unreadable += shard.unreadable;
        run.complete &= shard.complete;
    }
    Ok(run)
}

/// A due index: the partition of one shard and the sort key that orders its entries by when
/// they are due.
struct DueIndex {
    index: &'static str,
    partition: (Attribute, String),
    due_key: Attribute,
}

impl DueIndex {
    /// One page of the entries due by `at`, from `start`.
    async fn page(
        &self,
        table: &FleetTable,
        at: &Timestamp,
        start: Option<Item>,
    ) -> Result<(Vec<Item>, Option<Item>), FleetError> {
        let key = Condition::equals(self.partition.0, string_value(self.partition.1.clone())).and(
            Condition::at_most(self.due_key, string_value(due_until(at))),
        );
        query(
            table
                .client
                .query()
                .table_name(table.name())
                .index_name(self.index)
                .expressions(Expressions::builder().key_condition(key).build())
                .set_exclusive_start_key(start)
                .limit(PAGE),
        )
        .await
    }
}

/// The items the entries of a due index point at (the index projects the table's key),
/// eventually consistent: every write made from them is conditioned on what was read, so a
/// stale read costs a refused write, never a wrong alarm. An item that cannot be read is
/// logged and counted (the second value), not an error: it would fail its shard every minute.
async fn read_pointed<T: Entity>(
    table: &FleetTable,
    entries: &[Item],
    deadline: Instant,
) -> Result<(Vec<T>, u64), FleetError> {
    let keys: Vec<Item> = entries
        .iter()
        .filter_map(|e| ItemKey::of(e).ok())
        .map(|k| k.attributes())
        .collect();
    if keys.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .build()
        .map_err(FleetError::internal)?;
    let items = get_all(
        table,
        request,
        &mut Retry::until(deadline).at_most(MAX_ATTEMPTS),
    )
    .await?;
    let mut read = Vec::with_capacity(items.len());
    let mut unreadable = 0;
    for item in items {
        let key = PrimaryKey::of(&item);
        match T::from_item(item) {
            Ok(entity) => read.push(entity),
            Err(err) => {
                tracing::error!(key = ?key, error = %err, "unreadable item on a due index: skipped");
                unreadable += 1;
            }
        }
    }
    Ok((read, unreadable))
}

/// The due entries of one shard, page by page, until none is left or the deadline.
async fn detect_shard(
    table: &FleetTable,
    shard: u16,
    at: Timestamp,
    deadline: Instant,
) -> Result<WatchRun, FleetError> {
    let due = DueIndex {
        index: GSI3,
        partition: (GSI3PK, due_gsi3pk(shard)),
        due_key: GSI3SK,
    };
    let mut run = WatchRun {
        complete: true,
        ..WatchRun::default()
    };
    let mut start: Option<Item> = None;
    loop {
        if Instant::now() >= deadline {
            run.complete = false;
            return Ok(run);
        }
        let (entries, next) = due.page(table, &at, start.take()).await?;
        run.candidates += entries.len() as u64;
        let (states, unreadable): (Vec<DeviceStateItem>, _) =
            read_pointed(table, &entries, deadline).await?;
        run.unreadable += unreadable;
        let acts: Vec<_> = states.iter().map(|state| act(table, state, &at)).collect();
        let outcomes: Vec<_> = stream::iter(acts)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for outcome in outcomes {
            match outcome? {
                Acted::Raised => run.raised += 1,
                Acted::Rearmed => run.rearmed += 1,
                Acted::Removed => run.removed += 1,
                Acted::Conflict => run.conflicts += 1,
                Acted::Nothing => {}
            }
        }
        match next {
            Some(key) => start = Some(key),
            None => return Ok(run),
        }
    }
}

enum Acted {
    Raised,
    Rearmed,
    Removed,
    Conflict,
    Nothing,
}

async fn act(
    table: &FleetTable,
    state: &DeviceStateItem,
    at: &Timestamp,
) -> Result<Acted, FleetError> {
    match judge(state, at) {
        Verdict::Raise => raise_offline(table, state, at).await,
        Verdict::Rearm(due) => {
            let changes =
                Update::new().set_all(IndexKeys::due(&state.device_id, Some(&due)).attributes());
            move_entry(table, state, changes, Acted::Rearmed).await
        }
        Verdict::Remove => {
            let changes = Update::new().remove(GSI3PK).remove(GSI3SK);
            move_entry(table, state, changes, Acted::Removed).await
        }
        Verdict::Keep => Ok(Acted::Nothing),
    }
}

/// The condition of every detector write to a live state: unchanged since it was read.
fn unchanged(state: &DeviceStateItem) -> Condition {
    Condition::exists(PK).and(Condition::equals(
        DeviceStateItem::INGEST_SEQ,
        number_value(state.ingest_seq),
    ))
}

async fn move_entry(
    table: &FleetTable,
    state: &DeviceStateItem,
    changes: Update,
    done: Acted,
) -> Result<Acted, FleetError> {
    let changes = changes.set(
        DeviceStateItem::INGEST_SEQ,
        number_value(state.ingest_seq + 1),
    );
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(state.item_key().attributes()))
        .expressions(Expressions::write(changes, Some(unchanged(state))))
        .send()
        .await;
    match result {
        Ok(_) => Ok(done),
        Err(err) => match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(Acted::Conflict),
            _ => Err(sdk_error(err)),
        },
    }
}

/// Raises `state`'s offline alarm at `at`: one transaction of the state's update (the
/// `offline` status, off the due index, `ingestSeq` + 1, conditioned on it unchanged) and the
/// alarm's items. A refused transaction means the device reported since the read.
async fn raise_offline(
    table: &FleetTable,
    state: &DeviceStateItem,
    at: &Timestamp,
) -> Result<Acted, FleetError> {
    let mut alarms = state.alarms.clone();
    alarms.insert(
        OFFLINE.to_string(),
        AlarmStatus {
            raised_at: Some(at.epoch_millis()),
            severity: Some(OFFLINE_SEVERITY),
            pending_since: None,
        },
    );
    let changes = Update::new()
        .set(
            DeviceStateItem::ALARMS,
            serde_dynamo::to_attribute_value(&alarms)?,
        )
        .set(
            DeviceStateItem::INGEST_SEQ,
            number_value(state.ingest_seq + 1),
        )
        .remove(GSI3PK)
        .remove(GSI3SK);
    let update = UpdateAction::builder()
        .table_name(table.name())
        .set_key(Some(state.item_key().attributes()))
        .expressions(Expressions::write(changes, Some(unchanged(state))))
        .build()
        .map_err(FleetError::internal)?;
    let device = AlarmDevice {
        user: state.user_id.clone(),
        device: state.device_id.clone(),
        partition: state.partition,
        name: state.name.clone(),
    };
    let raised = Transition::Raised {
        source: AlarmSource::Offline,
        severity: OFFLINE_SEVERITY,
        at: *at,
        reading: None,
    };
    let mut actions = vec![TransactWriteItem::builder().update(update).build()];
    for action in transition_actions(table, &device, &[], &[raised])? {
        actions.push(with_last_seen(action, state.last_seen)?);
    }
    match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
        Transaction::Committed => Ok(Acted::Raised),
        Transaction::Cancelled(_) => Ok(Acted::Conflict),
    }
}

/// An offline alarm's put with the device's last report (`lastSeen`: what its reading shows).
fn with_last_seen(
    action: TransactWriteItem,
    last_seen: Option<Timestamp>,
) -> Result<TransactWriteItem, FleetError> {
    let (Some(put), Some(seen)) = (action.put(), last_seen) else {
        return Ok(action);
    };
    if crate::model::entities::EntityType::of(put.item())
        != Some(crate::model::entities::EntityType::Alarm)
    {
        return Ok(action);
    }
    let mut item = put.item().clone();
    item.insert(
        AlarmItem::LAST_SEEN.name().to_string(),
        string_value(seen.to_string()),
    );
    let put = Put::builder()
        .table_name(put.table_name())
        .set_item(Some(item))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The alarms of one reminder shard whose reminder is due, page by page.
async fn remind_shard(
    table: &FleetTable,
    shard: u16,
    at: Timestamp,
    deadline: Instant,
) -> Result<WatchRun, FleetError> {
    let due = DueIndex {
        index: GSI1,
        partition: (GSI1PK, reminder_gsi1pk(shard)),
        due_key: GSI1SK,
    };
    let mut run = WatchRun {
        complete: true,
        ..WatchRun::default()
    };
    let mut start: Option<Item> = None;
    loop {
        if Instant::now() >= deadline {
            run.complete = false;
            return Ok(run);
        }
        let (entries, next) = due.page(table, &at, start.take()).await?;
        let (alarms, unreadable): (Vec<AlarmItem>, _) =
            read_pointed(table, &entries, deadline).await?;
        run.unreadable += unreadable;
        let reminds: Vec<_> = alarms.iter().map(|a| remind(table, a, &at)).collect();
        let outcomes: Vec<_> = stream::iter(reminds)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for outcome in outcomes {
            match outcome? {
                Reminded::Sent => run.reminders += 1,
                Reminded::Stale => run.stale_reminders += 1,
                Reminded::Conflict => run.conflicts += 1,
                Reminded::Unreadable => run.unreadable += 1,
                Reminded::NotYet => {}
            }
        }
        match next {
            Some(key) => start = Some(key),
            None => return Ok(run),
        }
    }
}

enum Reminded {
    Sent,
    Stale,
    Conflict,
    Unreadable,
    NotYet,
}

/// The next reminder of an alarm whose reminder at `remind_at` is due at `at`: the first one
/// after `at` on its interval (a run that was late reminds once, not once per missed interval).
pub fn next_reminder(remind_at: &Timestamp, every_seconds: u64, at: &Timestamp) -> Timestamp {
    let every = every_seconds.max(1) as i64;
    let missed = (at.epoch_seconds() - remind_at.epoch_seconds()).max(0) / every;
    remind_at.plus_seconds((missed + 1) * every)
}

async fn remind(
    table: &FleetTable,
    alarm: &AlarmItem,
    at: &Timestamp,
) -> Result<Reminded, FleetError> {
    let key = alarm.item_key();
    let source = match alarm.alarm_source() {
        Ok(source) => source,
        Err(err) => {
            tracing::error!(key = ?key, error = %err, "unreadable alarm on the reminder index: skipped");
            return Ok(Reminded::Unreadable);
        }
    };
    let (changes, condition, outcome) =
        match (alarm.state, alarm.remind_at, alarm.remind_every_seconds) {
            (AlarmState::Active, Some(remind_at), Some(every)) => {
                if remind_at > *at {
                    return Ok(Reminded::NotYet);
                }
                let next = next_reminder(&remind_at, every, at);
                let changes = Update::new()
                    .set(AlarmItem::REMINDERS, number_value(alarm.reminders + 1))
                    .set(AlarmItem::REMIND_AT, string_value(next.to_string()))
                    .set(
                        GSI1SK,
                        string_value(reminder_gsi1sk(
                            &next,
                            &alarm.user_id,
                            &alarm.device_id,
                            &source,
                        )),
                    );
                let condition =
                    Condition::equals(AlarmItem::STATE, string_value(AlarmState::Active.as_str()))
                        .and(Condition::equals(
                            AlarmItem::REMIND_AT,
                            string_value(remind_at.to_string()),
                        ))
                        .and(Condition::equals(
                            AlarmItem::REMINDERS,
                            number_value(alarm.reminders),
                        ));
                (changes, condition, Reminded::Sent)
            }
            // Acknowledged or cleared (or no interval): no reminder, off the index.
            (state, _, _) => {
                let changes = Update::new()
                    .remove(AlarmItem::REMIND_AT)
                    .remove(GSI1PK)
                    .remove(GSI1SK);
                let condition = Condition::equals(AlarmItem::STATE, string_value(state.as_str()));
                (changes, condition, Reminded::Stale)
            }
        };
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::write(
            changes,
            Some(Condition::exists(PK).and(condition)),
        ))
        .send()
        .await;
    match result {
        Ok(_) => Ok(outcome),
        Err(err) => match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(Reminded::Conflict),
            _ => Err(sdk_error(err)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ids::{DeviceId, DeviceType, UserId};
    use crate::model::status::DeviceStatus;
    use std::collections::BTreeMap;

    fn state(last_seen: Option<Timestamp>, every: Option<u64>) -> DeviceStateItem {
        DeviceStateItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            partition: 0,
            status: DeviceStatus::Active,
            name: "n".into(),
            device_type: DeviceType::parse("t").unwrap(),
            last_seen,
            latest: BTreeMap::new(),
            recent: Vec::new(),
            ingest_seq: 3,
            device_version: 1,
            tags: Vec::new(),
            alarms: BTreeMap::new(),
            report_every_seconds: every,
            offline_detection: Default::default(),
            learned_every_seconds: None,
            learned_jitter_seconds: None,
            series: Default::default(),
            moving_from: None,
            firmware: None,
            firmware_seq: 0,
            indexed_due: None,
            twin: Default::default(),
        }
    }

    #[test]
    fn the_detector_raises_what_is_due_and_moves_or_removes_what_is_not() {
        let seen = Timestamp::from_epoch_millis(1_700_000_000_000).unwrap();
        let mut s = state(Some(seen), Some(60));
        let due = s.due_at().unwrap();
        s.indexed_due = Some(due);
        assert_eq!(judge(&s, &due), Verdict::Raise);
        assert_eq!(judge(&s, &due.plus_seconds(-1)), Verdict::Keep);
        // A PATCH asked for a recheck: the entry is early, it moves to the due time.
        s.indexed_due = Some(seen);
        assert_eq!(judge(&s, &seen), Verdict::Rearm(due));
        // Not watched: inactive, or offline already.
        let mut inactive = s.clone();
        inactive.status = DeviceStatus::Inactive;
        assert_eq!(judge(&inactive, &due), Verdict::Remove);
        let mut offline = s.clone();
        offline
            .alarms
            .insert(OFFLINE.into(), AlarmStatus::default());
        assert_eq!(judge(&offline, &due), Verdict::Remove);
        let mut unknown = state(Some(seen), None);
        unknown.indexed_due = Some(seen);
        assert_eq!(judge(&unknown, &due), Verdict::Remove);
    }

    #[test]
    fn a_late_run_reminds_once_and_keeps_the_interval() {
        let t = Timestamp::from_epoch_millis(1_700_000_000_000).unwrap();
        assert_eq!(next_reminder(&t, 600, &t), t.plus_seconds(600));
        assert_eq!(
            next_reminder(&t, 600, &t.plus_seconds(59)),
            t.plus_seconds(600)
        );
        assert_eq!(
            next_reminder(&t, 600, &t.plus_seconds(1900)),
            t.plus_seconds(2400)
        );
    }
}
