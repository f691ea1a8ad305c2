//! A device's live state (`lastSeen`, `latest`, `recent`, the `SEEN#` index key), kept on its
//! own compact item placed in one of its owner's partitions: its caps, how a batch merges into
//! it and comes back out, and the parts of its conditional update (sent by `Ingestor`).
//!
//! The state item is the only item ingestion rewrites per batch, so it is kept small: the
//! newest [`RECENT_EVENTS`] and the latest reading of at most [`MAX_STATE_TYPES`] types, in
//! one compact binary attribute ([`crate::model::readings`]). A typical device's state is under
//! 1 KB (one write unit per batch); [`MAX_STATE_BYTES`] bounds any state (every id, type,
//! name and text value at its longest), which a unit test checks.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::{CancellationReason, TransactWriteItem};

use super::validate::NewEvent;
use crate::model::alarm::evaluation::{evaluate, Observed, Subject, Transition};
use crate::model::alarm::rule::Rule;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::rule_set::RuleSetItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::Condition;
use crate::model::readings::{StoredEvent, StoredReading};
use crate::model::schema::{Item, PK};
use crate::model::twin::TwinVersions;
use crate::store::dynamo::number_value;
use crate::store::table::TransactionSlot;

/// Events kept in a device's `recent` list (the dashboard shows the last 10).
pub const RECENT_EVENTS: usize = 10;

/// Most event types whose latest reading a device's live state keeps. A batch that would
/// add more is a 400 naming the first event of a type over the cap.
pub const MAX_STATE_TYPES: usize = 8;
/// Largest size a live state item can reach, in bytes (DynamoDB's item size rules), with every
/// field at its longest. A typical device's is under 1 KB.
pub const MAX_STATE_BYTES: usize = 4096;

/// DynamoDB's size of `item`: attribute names plus values (numbers about 1 byte per 2 digits
/// + 1, lists and maps 3 bytes + 1 per element), what its write units are counted from.
pub fn item_bytes(item: &Item) -> usize {
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

/// The state size past which ingest writes the closed 5-minute buckets of the open summaries
/// out: one write unit.
pub(super) const STATE_FLUSH_BYTES: usize = 1024;

/// Conditional-update attempts on the live state before giving up (each conflict means
/// another batch for the same device committed, so N concurrent batches need up to N).
pub(super) const STATE_ATTEMPTS: u32 = 16;

/// `state` with `events` merged in: `lastSeen` never moves backwards, a late event never
/// replaces a newer reading, `recent` keeps the newest [`RECENT_EVENTS`] without duplicates,
/// and `latest` every type's newest reading. Concurrent batches of two containers can take
/// `latest` past [`MAX_STATE_TYPES`] together (each checked the cap against the state it
/// read); no type is dropped then: a type's latest reading decides whether its readings are
/// new to the summaries, and a dropped type's replayed readings would be counted again
/// (issue 38). [`check_type_cap`] then refuses further types, not the ones the state has.
pub fn state_with_batch(state: &DeviceStateItem, events: &[NewEvent]) -> DeviceStateItem {
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
    next.recent
        .sort_by(|a, b| (b.0, b.1.as_str()).cmp(&(a.0, a.1.as_str())));
    next.recent.truncate(RECENT_EVENTS);
    next.learn_rhythm(state);
    next
}

/// Refuses a batch that would make `state` keep more than [`MAX_STATE_TYPES`] types: a 400
/// naming `events[i].type` of the first event of a type over the cap.
pub fn check_type_cap(state: &DeviceStateItem, events: &[NewEvent]) -> Result<(), ValidationError> {
    let mut types: BTreeSet<&str> = state.latest.keys().map(String::as_str).collect();
    for (i, e) in events.iter().enumerate() {
        // A type the state has is never refused, even by a state past the cap (two racing
        // batches, above).
        if types.insert(e.event_type.as_str()) && types.len() > MAX_STATE_TYPES {
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
pub(super) fn unchanged_since_read(read: &DeviceStateItem) -> Condition {
    Condition::exists(PK).and(Condition::equals(
        DeviceStateItem::INGEST_SEQ,
        number_value(read.ingest_seq),
    ))
}

/// A live-state update that folded a batch in.
pub(super) struct FoldedState {
    /// The twin's versions as DynamoDB returned the item written (`None` when the write was a
    /// transaction, which returns no item: the caller reads them if it needs them).
    pub(super) twin: Option<TwinVersions>,
    /// What the update did with the device's part in a firmware rollout.
    pub(super) firmware: Option<crate::ops::twin::firmware_offer::FirmwareFold>,
}

/// What a batch's state write holds: `base` with `events` merged in and the alarm statuses
/// after evaluating `rules` on them (readings newer than `base`'s latest of their type only),
/// and the transitions to record.
pub(super) fn evaluated(
    registration: &RegistrationItem,
    base: &DeviceStateItem,
    rules: &[Rule],
    events: &[NewEvent],
) -> (DeviceStateItem, Vec<Transition>) {
    let mut next = state_with_batch(base, events);
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
pub(super) enum Recorded {
    /// State and alarms written.
    Committed,
    /// The state changed since it was read: the item as it is now (`None`: gone).
    StateChanged(Option<Item>),
    /// A rule the batch opened an alarm for is gone (deleted since the rules were cached):
    /// nothing was written; the owner's rules as they are now, to evaluate again with.
    RulesChanged(Vec<Rule>),
}

/// The owner's rules as a refused transaction returned them, when what refused it was the
/// check that the rules it opens alarms for still exist (the transaction's only
/// `ConditionCheck`, [`crate::ops::alarms::record::rule_check`]); `None` otherwise.
pub(super) fn rules_refused(
    actions: &[TransactWriteItem],
    reasons: &[CancellationReason],
) -> Result<Option<Vec<Rule>>, FleetError> {
    let refused = actions.iter().zip(reasons).find(|(action, reason)| {
        action.condition_check().is_some()
            && reason.code().is_some_and(|c| c == "ConditionalCheckFailed")
    });
    let Some((_, reason)) = refused else {
        return Ok(None);
    };
    Ok(Some(match reason.item() {
        Some(item) => RuleSetItem::from_item(item.clone())?.rule_list(),
        None => Vec::new(),
    }))
}

/// Most actions of one TransactWriteItems (DynamoDB's limit).
pub(super) const MAX_TRANSACTION_ACTIONS: usize = 100;

/// The live state's update is the first action of a transition's transaction.
#[derive(Clone, Copy)]
pub(super) struct StateSlot;

impl TransactionSlot for StateSlot {
    fn position(self) -> usize {
        0
    }
}

/// The key of the live state of the device of `registration` (its placement is on the
/// registration, which ingestion reads anyway).
pub(super) fn state_key(registration: &RegistrationItem) -> ItemKey {
    ItemKey::DeviceState {
        user: registration.user_id.clone(),
        partition: registration.partition,
        device: registration.device_id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::entities::Entity;
    use crate::model::ids::{DeviceId, DeviceType, EventId, EventType, UserId};
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
            series: Default::default(),
            moving_from: None,
            firmware: None,
            firmware_seq: 0,
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
        let s1 = state_with_batch(&empty("u", "d", "n"), &first);
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
        assert_eq!(state_with_batch(&s1, &late), s1);
        // A replay changes nothing (so no write is sent).
        assert_eq!(state_with_batch(&s1, &first), s1);
        // A late reading of a new type is still that type's latest.
        let s3 = state_with_batch(
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
        state = state_with_batch(&state, &types);
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
        // Past the check (two containers racing), merging drops no type: a type's latest
        // reading is its readings' newness (issue 38). The state over the cap still takes
        // readings of its own types, and refuses any other.
        let over = state_with_batch(&state, &batch);
        assert_eq!(over.latest.len(), MAX_STATE_TYPES + 1);
        assert!(over.latest.contains_key("t9") && over.latest.contains_key("t0"));
        check_type_cap(&over, &batch).unwrap();
        let another = [event(
            "c",
            "t10",
            EventValue::Flag(true),
            "2024-04-10T10:02:00Z",
        )];
        assert_eq!(
            check_type_cap(&over, &another).unwrap_err().field,
            "events[0].type"
        );
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
        typical = state_with_batch(&typical, &batch);
        typical.ingest_seq = 123_456;
        let size = item_bytes(&typical.to_item(&shards).unwrap());
        assert!(
            size < 1024,
            "a typical state is one write unit: {size} bytes"
        );

        // Largest: every id, type, name and text at its longest.
        let long = |c: char, n: usize| c.to_string().repeat(n);
        let mut largest = empty(&long('u', 128), &long('d', 64), &long('n', 100));
        largest.partition = 1_000_000;
        let text = EventValue::Text(long('v', crate::ops::ingest::validate::MAX_TEXT_VALUE));
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
        largest = state_with_batch(&largest, &batch);
        largest.ingest_seq = u64::MAX;
        largest.device_version = u64::MAX;
        let size = item_bytes(&largest.to_item(&shards).unwrap());
        assert!(size <= MAX_STATE_BYTES, "largest state {size} bytes");
        assert!(
            size > MAX_STATE_BYTES / 2,
            "the bound is tight enough to mean something: {size}"
        );
    }
}
