//! Open alarms whose device or rule is gone (issue 30 item 4). A batch clears an alarm of a
//! deleted rule, but a silent device sends none, and a deleted device never will: without
//! this, such alarms stay open in the owner's list and the operators' list, and keep being
//! reminded, for good.
//!
//! A clear here is the ordinary one ([`super::transition_actions`]: the alarm cleared with no
//! reading, off the open part of its owner's list and the reminder index, an expiry like any
//! cleared alarm's, its `OPEN#` pointer deleted), written in one transaction with the live
//! state that says the alarm is open: the state loses the status (or, for a deleted device,
//! is deleted by the same transaction) and its `ingestSeq` is the condition, so a batch
//! evaluated against the old state fails its own condition and evaluates again. The alarm's
//! stream record is a `cleared` transition like any other, so the owner is notified.

use aws_sdk_dynamodb::types::{TransactWriteItem, Update as UpdateAction};

use super::record::{transition_actions, AlarmDevice};
use crate::model::alarm::evaluation::Transition;
use crate::model::alarm::ids::{AlarmSource, RuleId};
use crate::model::alarm::status::{AlarmState, AlarmStatuses};
use crate::model::entities::alarm::AlarmItem;
use crate::model::entities::alarm::{owner_alarms_gsi3pk, owner_open_alarms_prefix};
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::UserId;
use crate::model::schema::{GSI3, GSI3PK, GSI3SK, PK};
use crate::model::timestamp::Timestamp;
use crate::store::dynamo::{number_value, query, string_value, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{FleetTable, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// Most open alarms one rule deletion clears. Each costs a consistent read of its device's
/// live state and one transaction; the rest (a rule open on more devices than this) clear
/// on their devices' next batch, as before.
pub const MAX_CLEARED_PER_RULE_DELETION: usize = 500;

/// Items read per page of the open part of an owner's alarm list.
const PAGE: i32 = 100;

/// Attempts per device against concurrent batches (each fails the other's condition once).
const ATTEMPTS: u32 = 4;

/// The clears, at `at` and with no reading, of the open alarms in `statuses` whose source is
/// `gone`, and the statuses left (a gone source's pending status goes too).
pub fn withdrawn(
    statuses: &AlarmStatuses,
    at: Timestamp,
    gone: impl Fn(&AlarmSource) -> bool,
) -> (AlarmStatuses, Vec<Transition>) {
    let mut left = AlarmStatuses::new();
    let mut clears = Vec::new();
    for (key, status) in statuses {
        let Some(source) = AlarmSource::parse(key).ok().filter(|s| gone(s)) else {
            left.insert(key.clone(), status.clone());
            continue;
        };
        if let (Some(raised), Some(severity)) = (status.raised_at, status.severity) {
            clears.push(Transition::Cleared {
                source,
                raised_at: Timestamp::from_epoch_millis(raised).unwrap_or_else(Timestamp::min),
                severity,
                at,
                reading: None,
            });
        }
    }
    (left, clears)
}

/// The actions that clear every open alarm of the device whose live state is `state`
/// (which the caller deletes in the same transaction).
pub fn device_clears(
    table: &FleetTable,
    state: &DeviceStateItem,
    at: Timestamp,
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let (_, clears) = withdrawn(&state.alarms, at, |_| true);
    transition_actions(table, &alarm_device(state), &[], &clears)
}

/// The owner's device as its alarms name it.
fn alarm_device(state: &DeviceStateItem) -> AlarmDevice {
    AlarmDevice {
        user: state.user_id.clone(),
        device: state.device_id.clone(),
        partition: state.partition,
        name: state.name.clone(),
    }
}

/// Clears the open alarms of `user`'s deleted rule `rule` (at most
/// [`MAX_CLEARED_PER_RULE_DELETION`]): reads the open part of the owner's alarm list (one
/// Query per live-state partition and page) and, for each alarm of the rule, its device's
/// live state and one transaction. Returns how many it cleared.
pub async fn clear_rule_alarms(
    table: &FleetTable,
    user: &UserId,
    rule: &RuleId,
) -> Result<usize, FleetError> {
    let source = AlarmSource::Rule(rule.clone());
    let partitions = super::lifecycle::fleet_partitions(table, user).await?;
    let mut cleared = 0;
    for partition in 0..partitions {
        let mut start = None;
        loop {
            let key =
                Condition::equals(GSI3PK, string_value(owner_alarms_gsi3pk(user, partition))).and(
                    Condition::begins_with(GSI3SK, string_value(owner_open_alarms_prefix())),
                );
            let (items, next) = query(
                table
                    .client
                    .query()
                    .table_name(table.name())
                    .index_name(GSI3)
                    .expressions(Expressions::builder().key_condition(key).build())
                    .set_exclusive_start_key(start)
                    .limit(PAGE),
            )
            .await?;
            for item in items {
                let alarm = AlarmItem::from_item(item)?;
                if alarm.source != source.as_str() || alarm.state == AlarmState::Cleared {
                    continue;
                }
                if cleared >= MAX_CLEARED_PER_RULE_DELETION {
                    return Ok(cleared);
                }
                if clear_one(table, &alarm, &source).await? {
                    cleared += 1;
                }
            }
            match next {
                Some(key) => start = Some(key),
                None => break,
            }
        }
    }
    Ok(cleared)
}

/// Clears `alarm` of the gone `source`, and its status on its device's live state in the
/// same transaction (conditioned on the state unchanged, retried on a concurrent batch);
/// false when the state kept moving through every attempt.
async fn clear_one(
    table: &FleetTable,
    alarm: &AlarmItem,
    source: &AlarmSource,
) -> Result<bool, FleetError> {
    let state_key = ItemKey::DeviceState {
        user: alarm.user_id.clone(),
        partition: alarm.partition,
        device: alarm.device_id.clone(),
    };
    let device = AlarmDevice {
        user: alarm.user_id.clone(),
        device: alarm.device_id.clone(),
        partition: alarm.partition,
        name: alarm.device_name.clone(),
    };
    for _ in 0..ATTEMPTS {
        let now = Timestamp::now();
        let state = read_state(table, &state_key).await?;
        let listed = |t: &Transition| matches!(t, Transition::Cleared { raised_at, .. } if *raised_at == alarm.raised_at);
        let mut actions = Vec::new();
        let clears = match &state {
            Some(state) => {
                let (left, clears) = withdrawn(&state.alarms, now, |s| s == source);
                if clears.iter().any(listed) {
                    actions.push(status_removal(table, &state_key, state, &left)?);
                }
                clears
            }
            None => Vec::new(),
        };
        let clears = if clears.iter().any(listed) {
            clears
        } else {
            // The device is gone, or its live state does not list this alarm (deleted before
            // deletions cleared alarms, or written apart from a state): the alarm and its
            // pointer alone.
            vec![Transition::Cleared {
                source: source.clone(),
                raised_at: alarm.raised_at,
                severity: alarm.severity,
                at: now,
                reading: None,
            }]
        };
        actions.extend(transition_actions(table, &device, &[], &clears)?);
        match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => return Ok(true),
            // A batch moved the state in between, or cleared the alarm: read again.
            Transaction::Cancelled(_) => continue,
        }
    }
    // Still moving after every attempt (a device sending batch after batch): its next batch
    // without the rule clears it, as a deleted rule's alarm always cleared.
    Ok(false)
}

/// The update that leaves `left` as the statuses of the live state `state` (at `key`), bumping
/// its `ingestSeq` and conditioned on it: a batch that read the state before fails its own
/// condition and evaluates again.
fn status_removal(
    table: &FleetTable,
    key: &ItemKey,
    state: &DeviceStateItem,
    left: &AlarmStatuses,
) -> Result<TransactWriteItem, FleetError> {
    let changes = if left.is_empty() {
        Update::new().remove(DeviceStateItem::ALARMS)
    } else {
        Update::new().set(
            DeviceStateItem::ALARMS,
            serde_dynamo::to_attribute_value(left)?,
        )
    }
    .set(
        DeviceStateItem::INGEST_SEQ,
        number_value(state.ingest_seq + 1),
    );
    let unchanged = Condition::exists(PK).and(Condition::equals(
        DeviceStateItem::INGEST_SEQ,
        number_value(state.ingest_seq),
    ));
    let update = UpdateAction::builder()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::write(changes, Some(unchanged)))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// The live state at `key`, read consistently (the transaction is conditioned on it).
async fn read_state(
    table: &FleetTable,
    key: &ItemKey,
) -> Result<Option<DeviceStateItem>, FleetError> {
    crate::store::dynamo::read_consistent(table, key).await
}

/// When a device's deletion and the clears of all its open alarms would not fit one
/// transaction: the actions that clear the first `room / 2` of them (each a clear and a
/// pointer's delete) and take their statuses off the live state, conditioned on its
/// `ingestSeq` (which they bump). The deletion then reads the state again and goes on.
pub fn partial_device_clears(
    table: &FleetTable,
    state: &DeviceStateItem,
    at: Timestamp,
    room: usize,
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let open: Vec<String> = state
        .alarms
        .iter()
        .filter(|(_, s)| s.raised_at.is_some())
        .map(|(k, _)| k.clone())
        .take(room.saturating_sub(1) / 2)
        .collect();
    let (left, clears) = withdrawn(&state.alarms, at, |s| open.iter().any(|o| o == s.as_str()));
    let update = status_removal(table, &state.item_key(), state, &left)?;
    let mut actions = vec![update];
    actions.extend(transition_actions(
        table,
        &alarm_device(state),
        &[],
        &clears,
    )?);
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alarm::severity::Severity;
    use crate::model::alarm::status::AlarmStatus;
    use crate::model::alarm::OFFLINE;

    #[test]
    fn a_gone_source_clears_its_open_alarm_and_drops_its_pending_status_only() {
        let (open, pending, other) = (
            RuleId::parse("r0000000000000001").unwrap(),
            RuleId::parse("r0000000000000002").unwrap(),
            RuleId::parse("r0000000000000003").unwrap(),
        );
        let raised = |ms| AlarmStatus {
            raised_at: Some(ms),
            severity: Some(Severity::Major),
            pending_since: None,
        };
        let statuses = AlarmStatuses::from([
            (open.to_string(), raised(1_000)),
            (
                pending.to_string(),
                AlarmStatus {
                    pending_since: Some(5),
                    ..AlarmStatus::default()
                },
            ),
            (other.to_string(), raised(2_000)),
            (OFFLINE.to_string(), raised(3_000)),
        ]);
        let at = Timestamp::from_epoch_millis(9_000).unwrap();
        let gone = [AlarmSource::Rule(open.clone()), AlarmSource::Rule(pending)];
        let (left, clears) = withdrawn(&statuses, at, |s| gone.contains(s));
        assert_eq!(
            left.keys().cloned().collect::<Vec<_>>(),
            [OFFLINE.to_string(), other.to_string()]
        );
        assert_eq!(
            clears,
            [Transition::Cleared {
                source: AlarmSource::Rule(open),
                raised_at: Timestamp::from_epoch_millis(1_000).unwrap(),
                severity: Severity::Major,
                at,
                reading: None,
            }]
        );
        // A device's deletion: every open alarm, none left.
        let (left, clears) = withdrawn(&statuses, at, |_| true);
        assert!(left.is_empty());
        assert_eq!(clears.len(), 3);
    }
}
