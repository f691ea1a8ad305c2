//! A device's live state (`lastSeen`, `latest`, `recent`, the `SEEN#` index key), kept on its
//! own compact item placed in one of its owner's partitions, and its conditional update.
//!
//! The state item is the only item ingestion rewrites per batch, so it is kept small: the
//! newest [`RECENT_EVENTS`] and the latest reading of at most [`MAX_STATE_TYPES`] types, in
//! one compact binary attribute ([`crate::model::readings`]). A typical device's state is under
//! 1 KB (one write unit per batch); [`MAX_STATE_BYTES`] bounds any state (every id, type,
//! name and text value at its longest), which a unit test checks.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update as UpdateAction,
};

use super::{Ingestor, NewEvent, CACHE_CAPACITY, RECENT_EVENTS};
use crate::model::alarm::evaluation::{evaluate, Observed, Subject, Transition};
use crate::model::alarm::rule::Rule;
use crate::model::entity::Entity;
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::DeviceId;
use crate::model::items::{DeviceStateItem, RegistrationItem};
use crate::model::keys::{IndexKeys, ItemKey};
use crate::model::readings::newest_millis;
use crate::model::readings::{StoredEvent, StoredReading};
use crate::model::schema::Item;
use crate::model::schema::{GSI1SK, GSI3PK, GSI3SK, PK};
use crate::model::twin::TwinVersions;
use crate::ops::alarms::{transition_actions, AlarmDevice};
use crate::store::dynamo::{n, transact, Transaction};
use crate::store::expression::WithExpressions;
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, transient, TransactionSlot, Transient};

/// Most event types whose latest reading a device's live state keeps. A batch that would
/// add more is a 400 naming the first event of a type over the cap.
pub const MAX_STATE_TYPES: usize = 8;
/// Largest size a live state item can reach, in bytes (DynamoDB's item size rules), with every
/// field at its longest. A typical device's is under 1 KB.
pub const MAX_STATE_BYTES: usize = 4096;

/// Conditional-update attempts on the live state before giving up (each conflict means
/// another batch for the same device committed, so N concurrent batches need up to N).
const STATE_ATTEMPTS: u32 = 16;

/// `state` with `events` merged in: `lastSeen` never moves backwards, a late event never
/// replaces a newer reading, `recent` keeps the newest [`RECENT_EVENTS`] without duplicates,
/// and `latest` at most [`MAX_STATE_TYPES`] types (the oldest reading goes, should concurrent
/// batches of two containers get past the cap together).
pub fn merged(state: &DeviceStateItem, events: &[NewEvent]) -> DeviceStateItem {
    let mut next = state.clone();
    for e in events {
        if next.last_seen.is_none_or(|seen| e.at > seen) {
            next.last_seen = Some(e.at);
        }
        let at = e.at.epoch_millis();
        let newer = next
            .latest
            .get(e.event_type.as_str())
            .is_none_or(|r| at > r.0);
        if newer {
            next.latest
                .insert(e.event_type.to_string(), StoredReading(at, e.value.clone()));
        }
        if !next.recent.iter().any(|r| r.0 == at && r.1 == e.id) {
            next.recent.push(StoredEvent(
                at,
                e.id.clone(),
                e.event_type.clone(),
                e.value.clone(),
            ));
        }
    }
    while next.latest.len() > MAX_STATE_TYPES {
        let oldest = next
            .latest
            .iter()
            .min_by_key(|(_, r)| r.0)
            .map(|(t, _)| t.clone())
            .expect("not empty");
        next.latest.remove(&oldest);
    }
    next.recent
        .sort_by(|a, b| (b.0, b.1.as_str()).cmp(&(a.0, a.1.as_str())));
    next.recent.truncate(RECENT_EVENTS);
    next.learn_rhythm(state);
    next
}

/// `state` without the `unstored` events, which an update folded in on top of `before`
/// together with the `stored` ones: their recent entries go (and `before`'s come back in their
/// place), a latest reading that is one of them falls back to `before`'s or a stored event's,
/// and `lastSeen` is the newest of what is left.
pub fn without(
    state: &DeviceStateItem,
    before: &DeviceStateItem,
    stored: &[NewEvent],
    unstored: &[NewEvent],
) -> DeviceStateItem {
    let gone = |at: i64, id: &crate::model::ids::EventId| {
        unstored
            .iter()
            .any(|e| e.at.epoch_millis() == at && e.id == *id)
    };
    let mut next = state.clone();
    next.recent.retain(|e| !gone(e.0, &e.1));
    for e in &before.recent {
        if !next.recent.iter().any(|r| r.0 == e.0 && r.1 == e.1) {
            next.recent.push(e.clone());
        }
    }
    next.recent
        .sort_by(|a, b| (b.0, b.1.as_str()).cmp(&(a.0, a.1.as_str())));
    next.recent.truncate(RECENT_EVENTS);
    let replaced: Vec<String> = next
        .latest
        .iter()
        .filter(|(kind, reading)| {
            unstored.iter().any(|e| {
                e.event_type.as_str() == kind.as_str()
                    && e.at.epoch_millis() == reading.0
                    && e.value == reading.1
            })
        })
        .map(|(kind, _)| kind.clone())
        .collect();
    for kind in replaced {
        match before.latest.get(&kind) {
            Some(reading) => next.latest.insert(kind, reading.clone()),
            None => next.latest.remove(&kind),
        };
    }
    let newest = newest_millis(&next.latest, &next.recent)
        .and_then(crate::model::timestamp::Timestamp::from_epoch_millis);
    next.last_seen = before.last_seen.max(newest);
    // The rhythm is learned from `before` to what is left, as if only the stored events came.
    next.learned_every_seconds = before.learned_every_seconds;
    next.learned_jitter_seconds = before.learned_jitter_seconds;
    let mut repaired = merged(&next, stored);
    repaired.learned_every_seconds = before.learned_every_seconds;
    repaired.learned_jitter_seconds = before.learned_jitter_seconds;
    repaired.learn_rhythm(before);
    repaired
}

/// Refuses a batch that would make `state` keep more than [`MAX_STATE_TYPES`] types: a 400
/// naming `events[i].type` of the first event of a type over the cap.
pub fn check_type_cap(state: &DeviceStateItem, events: &[NewEvent]) -> Result<(), ValidationError> {
    let mut types: BTreeSet<&str> = state.latest.keys().map(String::as_str).collect();
    for (i, e) in events.iter().enumerate() {
        types.insert(e.event_type.as_str());
        if types.len() > MAX_STATE_TYPES {
            return Err(ValidationError::new(
                format!("events[{i}].type"),
                format!(
                    "a device reports at most {MAX_STATE_TYPES} event types; this one already has {}",
                    state.latest.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The condition of every live-state update: the item still exists (a deleted device's
/// state is gone) and nobody updated it since `:seq` was read.
fn unchanged_since_read(read: &DeviceStateItem) -> Condition {
    Condition::exists(PK).and(Condition::equals(
        DeviceStateItem::INGEST_SEQ,
        n(read.ingest_seq),
    ))
}

/// A live-state update that folded a batch in: the state it merged onto and the state it
/// stored (what a repair works from).
pub(super) struct FoldedState {
    before: DeviceStateItem,
    written: DeviceStateItem,
    /// The twin's versions as DynamoDB returned the item written (`None` when the write was a
    /// transaction, which returns no item: the caller reads them if it needs them).
    pub(super) twin: Option<TwinVersions>,
}

impl Ingestor {
    /// The live state of the device of `registration` and its owner's alarm rules: this warm
    /// Lambda's copies, or one consistent BatchGetItem of what is not cached (a read costs half
    /// of a failed conditional write of the item, and API Gateway spreads a device's batches
    /// over containers, so most batches miss the state cache). A device without a state item
    /// is gone: [`FleetError::Unauthorized`].
    pub(super) async fn live_state(
        &self,
        registration: &RegistrationItem,
    ) -> Result<(DeviceStateItem, Arc<Vec<Rule>>), FleetError> {
        let cached = self.cached_state(&registration.device_id);
        let read = self
            .read_state_and_rules(registration, state_key(registration), cached.is_none())
            .await;
        match read {
            Ok((Some(state), rules)) => {
                self.remember_state(state.clone());
                Ok((state, rules))
            }
            Ok((None, rules)) => Ok((cached.expect("the state was cached"), rules)),
            Err(FleetError::Unauthorized) => {
                self.forget(&registration.device_id);
                Err(FleetError::Unauthorized)
            }
            Err(err) => Err(err),
        }
    }

    /// Folds `events` into the live state `base` and evaluates the owner's alarm `rules` on
    /// them, with one conditional UpdateItem, or, when an alarm is raised or cleared, one
    /// TransactWriteItems of the same update and the alarm writes ([`transition_actions`]);
    /// skipped when it would change nothing (a replay). On a conflict the failed write returns
    /// the current item, which is merged and evaluated again (no separate read). Returns what
    /// the write folded in ([`FoldedState`], `None` when skipped), which a repair needs.
    pub(super) async fn update_state(
        &self,
        registration: &RegistrationItem,
        mut base: DeviceStateItem,
        rules: &[Rule],
        events: &[NewEvent],
        deadline: Instant,
    ) -> Result<Option<FoldedState>, FleetError> {
        let device = &registration.device_id;
        let mut retry = Retry::until(deadline).at_most(STATE_ATTEMPTS);
        // What the caller is told if the attempts run out: conflicts and throttling are busy.
        let mut gave_up = Transient::Busy;
        // Whether this batch's alarm changes are written; a refused alarm write must not
        // refuse the readings (see below).
        let mut record_alarms = true;
        while retry.next_attempt().await {
            let (mut next, mut transitions) = evaluated(registration, &base, rules, events);
            if !record_alarms {
                next.alarms = base.alarms.clone();
                transitions.clear();
            }
            if next == base {
                return Ok(None);
            }
            let (changes, stored) = self.state_changes(registration, &base, next)?;
            if !transitions.is_empty() {
                let recorded = self
                    .record_transitions(registration, &base, changes, rules, &transitions, deadline)
                    .await;
                let recorded = match recorded {
                    Ok(recorded) => recorded,
                    Err(err) if err.is_retryable() || matches!(err, FleetError::Unauthorized) => {
                        return Err(err)
                    }
                    Err(err) => {
                        // DynamoDB refused the alarm writes themselves (a ValidationException, or
                        // a cancellation no retry changes). Resending would be refused the same
                        // way forever, so the readings are stored and folded in without this
                        // batch's alarm changes, and the refusal is logged as an error.
                        tracing::error!(device = %registration.device_id, error = %err, transitions = transitions.len(), "alarm writes refused: the batch is stored without its alarm changes");
                        record_alarms = false;
                        continue;
                    }
                };
                match recorded {
                    Recorded::Committed => {
                        self.remember_state(stored.clone());
                        return Ok(Some(FoldedState {
                            before: base,
                            written: stored,
                            twin: None,
                        }));
                    }
                    Recorded::StateChanged(current) => {
                        base = self.after_conflict(device, current.as_ref())?;
                        continue;
                    }
                }
            }
            let request = self.state_request(registration, changes);
            let err = match request.return_values(ReturnValue::AllNew).send().await {
                Ok(out) => {
                    // The item as written carries what others own on it too: the twin's
                    // versions tell the device's pending work without a read (ops::twin), and
                    // the owner's copies bring the cached state in step with a PATCH.
                    let (twin, stored) = match out.attributes {
                        Some(item) => {
                            let written = DeviceStateItem::from_item(item)?;
                            (Some(written.twin), stored.with_copies_of(&written))
                        }
                        None => (None, stored),
                    };
                    self.remember_state(stored.clone());
                    return Ok(Some(FoldedState {
                        before: base,
                        written: stored,
                        twin,
                    }));
                }
                Err(err) => err,
            };
            match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    base = self.after_conflict(device, failed.item())?;
                }
                _ => match transient(&err) {
                    Some(kind) => gave_up = kind,
                    None => return Err(sdk_error(err)),
                },
            }
        }
        Err(gave_up.error())
    }

    /// Sends the live state's update with the alarm writes of `transitions` in one
    /// transaction. A clear whose alarm item is gone (expired or removed by hand) is dropped
    /// and the rest sent again, so a lost item never blocks a device's ingestion.
    async fn record_transitions(
        &self,
        registration: &RegistrationItem,
        base: &DeviceStateItem,
        changes: Expressions,
        rules: &[Rule],
        transitions: &[Transition],
        deadline: Instant,
    ) -> Result<Recorded, FleetError> {
        let state = UpdateAction::builder()
            .table_name(self.table.name())
            .set_key(Some(state_key(registration).attributes()))
            .expressions(changes)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(FleetError::internal)?;
        let device = AlarmDevice {
            user: registration.user_id.clone(),
            device: registration.device_id.clone(),
            partition: registration.partition,
            name: base.name.clone(),
        };
        let mut actions = vec![TransactWriteItem::builder().update(state).build()];
        actions.extend(transition_actions(
            &self.table,
            &device,
            rules,
            transitions,
        )?);
        loop {
            let retry = Retry::until(deadline).at_most(STATE_ATTEMPTS);
            let reasons = match transact(&self.table, actions.clone(), retry).await? {
                Transaction::Committed => return Ok(Recorded::Committed),
                Transaction::Cancelled(reasons) => reasons,
            };
            if condition_failed(&reasons, StateSlot) {
                return Ok(Recorded::StateChanged(reasons[0].item().cloned()));
            }
            let failed: Vec<usize> = (1..actions.len())
                .filter(|i| {
                    reasons
                        .get(*i)
                        .and_then(|r| r.code())
                        .is_some_and(|c| c == "ConditionalCheckFailed")
                })
                .collect();
            if failed.is_empty() {
                return Err(FleetError::internal(format!(
                    "alarm transaction cancelled: {reasons:?}"
                )));
            }
            tracing::warn!(device = %registration.device_id, dropped = failed.len(), "clearing alarms whose items are gone");
            actions = actions
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !failed.contains(i))
                .map(|(_, a)| a)
                .collect();
        }
    }

    /// Takes `unstored` events back out of the live state after an update that folded them in
    /// (`folded`) while their writes failed: the state shows only stored events again.
    /// Conditioned like every update; on a conflict the current state is repaired instead.
    /// Best effort within `deadline`, logged when it cannot be made: the device is told to
    /// resend these events, and a resend that stores them makes the state right either way.
    pub(super) async fn repair_state(
        &self,
        registration: &RegistrationItem,
        folded: FoldedState,
        stored: &[NewEvent],
        unstored: &[NewEvent],
        deadline: Instant,
    ) {
        let repaired = async {
            let device = &registration.device_id;
            let mut current = folded.written;
            let mut retry = Retry::until(deadline).at_most(STATE_ATTEMPTS);
            let mut gave_up = Transient::Busy;
            while retry.next_attempt().await {
                let repaired = without(&current, &folded.before, stored, unstored);
                if repaired == current {
                    return Ok(());
                }
                let (changes, stored) = self.state_changes(registration, &current, repaired)?;
                let err = match self.state_request(registration, changes).send().await {
                    Ok(_) => {
                        self.remember_state(stored);
                        return Ok(());
                    }
                    Err(err) => err,
                };
                match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                        match self.after_conflict(device, failed.item()) {
                            Ok(now) => current = now,
                            // The device is gone: nothing left to repair.
                            Err(FleetError::Unauthorized) => return Ok(()),
                            Err(other) => return Err(other),
                        }
                    }
                    _ => match transient(&err) {
                        Some(kind) => gave_up = kind,
                        None => return Err(sdk_error(err)),
                    },
                }
            }
            Err(gave_up.error())
        };
        let result: Result<(), FleetError> = repaired.await;
        if let Err(err) = result {
            tracing::warn!(device = %registration.device_id, error = %err, "live state shows events that were not stored until they are resent");
        }
    }

    fn cached_state(&self, device: &DeviceId) -> Option<DeviceStateItem> {
        self.states.lock().expect("cache lock").get(device).cloned()
    }

    fn remember_state(&self, state: DeviceStateItem) {
        let mut cache = self.states.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(&state.device_id) {
            cache.clear();
        }
        cache.insert(state.device_id.clone(), state);
    }

    /// The conditional update that turns `base` (what this Lambda believes is stored) into
    /// `next`, and the state stored once it succeeds. Only what ingestion owns is written, so
    /// an owner's concurrent status or name change is never overwritten.
    fn state_changes(
        &self,
        registration: &RegistrationItem,
        base: &DeviceStateItem,
        mut next: DeviceStateItem,
    ) -> Result<(Expressions, DeviceStateItem), FleetError> {
        let device = &registration.device_id;
        next.ingest_seq = base.ingest_seq + 1;
        let mut changes = Update::new()
            .set(
                DeviceStateItem::LAST_SEEN,
                serde_dynamo::to_attribute_value(next.last_seen)?,
            )
            .set(DeviceStateItem::READINGS, next.readings_attribute())
            .set(DeviceStateItem::INGEST_SEQ, n(next.ingest_seq));
        if next.alarms != base.alarms {
            changes = if next.alarms.is_empty() {
                changes.remove(DeviceStateItem::ALARMS)
            } else {
                changes.set(
                    DeviceStateItem::ALARMS,
                    serde_dynamo::to_attribute_value(&next.alarms)?,
                )
            };
        }
        // The index entry moves (a delete and a put on GSI1) only when the device's own
        // offset SEEN bucket does: at most once per bucket, never for all devices at once.
        // Only the sort key is ingestion's: the partition follows the owner's status.
        let seen_key = |state: &DeviceStateItem| {
            IndexKeys::device_state(
                state.status,
                device,
                state.last_seen.as_ref(),
                &self.table.config.shards,
            )
            .attributes()
            .find(|(name, _)| *name == GSI1SK)
        };
        if let Some(moved) = seen_key(&next).filter(|k| Some(k) != seen_key(base).as_ref()) {
            changes = changes.set_all([moved]);
        }
        // The learned rhythm and the offline-check due entry (GSI3) change only when the SEEN
        // bucket does (or when the entry is not where the state says it belongs: a PATCH asked
        // for a recheck, the detector removed it, an offline alarm cleared).
        if next.rhythm() != base.rhythm() {
            changes = changes
                .set(
                    DeviceStateItem::LEARNED_EVERY_SECONDS,
                    serde_dynamo::to_attribute_value(next.learned_every_seconds)?,
                )
                .set(
                    DeviceStateItem::LEARNED_JITTER_SECONDS,
                    serde_dynamo::to_attribute_value(next.learned_jitter_seconds)?,
                );
        }
        let due = next.due_at();
        if due != base.indexed_due {
            changes = match due {
                Some(at) => changes.set_all(IndexKeys::due(device, Some(&at)).attributes()),
                None => changes.remove(GSI3PK).remove(GSI3SK),
            };
        }
        next.indexed_due = due;
        // The list form of states written before `readings` goes as they are rewritten.
        let changes = changes
            .remove(DeviceStateItem::LEGACY_LATEST)
            .remove(DeviceStateItem::LEGACY_RECENT);
        Ok((
            Expressions::write(changes, Some(unchanged_since_read(base))),
            next,
        ))
    }

    /// The UpdateItem of `changes` on the device's live state; a failed condition returns the
    /// item as it is.
    fn state_request(
        &self,
        registration: &RegistrationItem,
        changes: Expressions,
    ) -> UpdateItemFluentBuilder {
        self.table
            .client
            .update_item()
            .table_name(self.table.name())
            .set_key(Some(state_key(registration).attributes()))
            .expressions(changes)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    }

    /// After a failed condition, with the item as it is now: the state to merge into next, or
    /// [`FleetError::Unauthorized`] when the device is gone.
    fn after_conflict(
        &self,
        device: &DeviceId,
        current: Option<&Item>,
    ) -> Result<DeviceStateItem, FleetError> {
        let Some(current) = current else {
            self.forget(device);
            return Err(FleetError::Unauthorized);
        };
        let current = DeviceStateItem::from_item(current.clone())?;
        self.remember_state(current.clone());
        Ok(current)
    }
}

/// What a batch's state write holds: `base` with `events` merged in and the alarm statuses
/// after evaluating `rules` on them (readings newer than `base`'s latest of their type only),
/// and the transitions to record.
fn evaluated(
    registration: &RegistrationItem,
    base: &DeviceStateItem,
    rules: &[Rule],
    events: &[NewEvent],
) -> (DeviceStateItem, Vec<Transition>) {
    let mut next = merged(base, events);
    let observed: Vec<Observed<'_>> = events
        .iter()
        .map(|e| Observed {
            id: &e.id,
            event_type: &e.event_type,
            value: &e.value,
            at: e.at,
        })
        .collect();
    let subject = Subject {
        device: &registration.device_id,
        device_type: &registration.device_type,
        tags: &base.tags,
    };
    let (statuses, transitions) = evaluate(&subject, rules, &base.alarms, &observed, |t| {
        base.latest.get(t.as_str()).map(|r| r.0)
    });
    next.alarms = statuses;
    (next, transitions)
}

/// The outcome of a transaction that records transitions.
enum Recorded {
    /// State and alarms written.
    Committed,
    /// The state changed since it was read: the item as it is now (`None`: gone).
    StateChanged(Option<Item>),
}

/// The live state's update is the first action of a transition's transaction.
#[derive(Clone, Copy)]
struct StateSlot;

impl TransactionSlot for StateSlot {
    fn position(self) -> usize {
        0
    }
}

/// The key of the live state of the device of `registration` (its placement is on the
/// registration, which ingestion reads anyway).
fn state_key(registration: &RegistrationItem) -> ItemKey {
    ItemKey::DeviceState {
        user: registration.user_id.clone(),
        partition: registration.partition,
        device: registration.device_id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ids::{DeviceType, EventId, EventType, UserId};
    use crate::model::readings::EventValue;
    use crate::model::shard::ShardCounts;
    use crate::model::status::DeviceStatus;
    use crate::model::timestamp::Timestamp;
    use std::collections::BTreeMap;

    fn event(id: &str, t: &str, v: EventValue, at: &str) -> NewEvent {
        NewEvent {
            id: EventId::parse(id).unwrap(),
            event_type: EventType::parse(t).unwrap(),
            value: v,
            at: Timestamp::parse_field("at", at).unwrap(),
        }
    }

    fn empty(user: &str, device: &str, name: &str) -> DeviceStateItem {
        DeviceStateItem {
            user_id: UserId::parse(user).unwrap(),
            device_id: DeviceId::parse(device).unwrap(),
            partition: 0,
            status: DeviceStatus::Active,
            name: name.into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            last_seen: None,
            latest: BTreeMap::new(),
            recent: Vec::new(),
            ingest_seq: 0,
            device_version: 1,
            tags: Vec::new(),
            alarms: BTreeMap::new(),
            twin: Default::default(),
            report_every_seconds: None,
            offline_detection: Default::default(),
            learned_every_seconds: None,
            learned_jitter_seconds: None,
            indexed_due: None,
        }
    }

    #[test]
    fn merging_keeps_newest_readings_and_ten_recent_without_duplicates() {
        let first: Vec<NewEvent> = (0..12)
            .map(|i| {
                event(
                    &format!("e{i:02}"),
                    "temp",
                    EventValue::Number(f64::from(i)),
                    &format!("2024-04-10T10:{i:02}:00Z"),
                )
            })
            .collect();
        let s1 = merged(&empty("u", "d", "n"), &first);
        assert_eq!(s1.recent.len(), RECENT_EVENTS);
        assert_eq!(s1.recent[0].1.as_str(), "e11", "newest first");
        assert_eq!(
            s1.last_seen.unwrap().to_string(),
            "2024-04-10T10:11:00.000Z"
        );
        assert_eq!(s1.latest["temp"].1, EventValue::Number(11.0));
        // A late event changes neither lastSeen nor the newer reading, and falls off recent.
        let late = [event(
            "late",
            "temp",
            EventValue::Number(-1.0),
            "2024-04-10T09:00:00Z",
        )];
        assert_eq!(merged(&s1, &late), s1);
        // A replay changes nothing (so no write is sent).
        assert_eq!(merged(&s1, &first), s1);
        // A late reading of a new type is still that type's latest.
        let s3 = merged(
            &s1,
            &[event(
                "h",
                "humidity",
                EventValue::Number(40.0),
                "2024-04-10T09:00:00Z",
            )],
        );
        assert_eq!(s3.latest["humidity"].1, EventValue::Number(40.0));
        assert_eq!(s3.last_seen, s1.last_seen);
    }

    #[test]
    fn the_type_cap_names_the_first_event_over_it() {
        let mut state = empty("u", "d", "n");
        let types: Vec<NewEvent> = (0..MAX_STATE_TYPES)
            .map(|i| {
                event(
                    &format!("e{i}"),
                    &format!("t{i}"),
                    EventValue::Flag(true),
                    "2024-04-10T10:00:00Z",
                )
            })
            .collect();
        check_type_cap(&state, &types).unwrap();
        state = merged(&state, &types);
        // Known types pass; a new one is refused by index.
        let batch = [
            event("a", "t0", EventValue::Flag(false), "2024-04-10T10:01:00Z"),
            event("b", "t9", EventValue::Flag(false), "2024-04-10T10:01:00Z"),
        ];
        let err = check_type_cap(&state, &batch).unwrap_err();
        assert_eq!(err.field, "events[1].type");
        assert!(
            err.reason.contains("at most 8 event types"),
            "{}",
            err.reason
        );
        // Even past the check (two containers racing), merging never keeps more than the cap.
        let over = merged(&state, &batch);
        assert_eq!(over.latest.len(), MAX_STATE_TYPES);
        assert!(over.latest.contains_key("t9"), "the newest reading stays");
    }

    #[test]
    fn taking_unstored_events_out_restores_what_only_stored_ones_give() {
        let before = merged(
            &empty("u", "d", "n"),
            &(0..10)
                .map(|i| {
                    event(
                        &format!("old-{i}"),
                        ["temp", "hum"][i % 2],
                        EventValue::Number(i as f64),
                        &format!("2024-04-10T09:{i:02}:00Z"),
                    )
                })
                .collect::<Vec<_>>(),
        );
        let batch = [
            event(
                "kept",
                "temp",
                EventValue::Number(1.0),
                "2024-04-10T10:00:00Z",
            ),
            event(
                "lost-1",
                "temp",
                EventValue::Number(2.0),
                "2024-04-10T10:05:00Z",
            ),
            event(
                "lost-2",
                "door",
                EventValue::Flag(true),
                "2024-04-10T10:06:00Z",
            ),
        ];
        let written = merged(&before, &batch);
        assert_eq!(written.latest["temp"].1, EventValue::Number(2.0));
        let repaired = without(&written, &before, &batch[..1], &batch[1..]);
        assert_eq!(
            repaired,
            merged(&before, &batch[..1]),
            "as if only `kept` came"
        );
        assert_eq!(
            repaired.recent.len(),
            RECENT_EVENTS,
            "older events come back"
        );
        // Nothing unstored: nothing changes.
        assert_eq!(without(&written, &before, &batch, &[]), written);
    }

    /// DynamoDB's item size: attribute names plus values (numbers ~1 byte per 2 digits + 1,
    /// lists and maps 3 bytes + 1 per element).
    fn dynamodb_size(item: &crate::model::schema::Item) -> usize {
        use aws_sdk_dynamodb::types::AttributeValue as A;
        fn value(v: &A) -> usize {
            match v {
                A::S(s) => s.len(),
                A::B(b) => b.as_ref().len(),
                A::N(n) => n.trim_start_matches('-').replace('.', "").len().div_ceil(2) + 1,
                A::Bool(_) | A::Null(_) => 1,
                A::L(l) => 3 + l.iter().map(|v| 1 + value(v)).sum::<usize>(),
                A::M(m) => 3 + m.iter().map(|(k, v)| 1 + k.len() + value(v)).sum::<usize>(),
                _ => 0,
            }
        }
        item.iter().map(|(k, v)| k.len() + value(v)).sum()
    }

    #[test]
    fn a_state_stays_under_its_documented_bounds() {
        let shards = ShardCounts::default();
        // Typical: short ids, three numeric types, ten recent readings with derived ids.
        let mut typical = empty("us-east-1_abc:7f3a2c", "thermo-0042", "Kitchen thermostat");
        let batch: Vec<NewEvent> = (0..10)
            .map(|i| {
                let kind = ["temperature", "humidity", "battery"][i % 3];
                let at = format!("2024-04-10T10:{i:02}:00Z");
                NewEvent {
                    id: crate::model::readings::derive_event_id(
                        &EventType::parse(kind).unwrap(),
                        &EventValue::Number(21.5),
                        &Timestamp::parse_field("at", &at).unwrap(),
                    ),
                    ..event("x", kind, EventValue::Number(21.5 + i as f64), &at)
                }
            })
            .collect();
        typical = merged(&typical, &batch);
        typical.ingest_seq = 123_456;
        let size = dynamodb_size(&typical.to_item(&shards).unwrap());
        assert!(
            size < 1024,
            "a typical state is one write unit: {size} bytes"
        );

        // Largest: every id, type, name and text at its longest.
        let long = |c: char, n: usize| c.to_string().repeat(n);
        let mut largest = empty(&long('u', 128), &long('d', 64), &long('n', 100));
        largest.partition = 1_000_000;
        let text = EventValue::Text(long('v', super::super::MAX_TEXT_VALUE));
        let batch: Vec<NewEvent> = (0..RECENT_EVENTS + MAX_STATE_TYPES)
            .map(|i| {
                let mut id = format!("{i:02}");
                id.push_str(&long('e', 62));
                let mut kind = format!("{:02}", i % MAX_STATE_TYPES);
                kind.push_str(&long('t', 30));
                event(
                    &id,
                    &kind,
                    text.clone(),
                    &format!("2024-04-10T10:{i:02}:00Z"),
                )
            })
            .collect();
        largest = merged(&largest, &batch);
        largest.ingest_seq = u64::MAX;
        largest.device_version = u64::MAX;
        let size = dynamodb_size(&largest.to_item(&shards).unwrap());
        assert!(size <= MAX_STATE_BYTES, "largest state {size} bytes");
        assert!(
            size > MAX_STATE_BYTES / 2,
            "the bound is tight enough to mean something: {size}"
        );
    }
}
