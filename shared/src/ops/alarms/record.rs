//! Writing transitions: the alarm items a batch's (or the detector's) transitions put and
//! update, as actions of the transaction that also writes the device's live state, so an
//! alarm is recorded exactly when the state that says it is open is.

use aws_sdk_dynamodb::types::{
    ConditionCheck, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update as UpdateAction,
};

use crate::model::alarm::evaluation::Transition;

use crate::model::alarm::ids::AlarmSource;

use crate::model::alarm::rule::Rule;

use crate::model::alarm::status::AlarmState;
use crate::model::entities::alarm::owner_alarms_gsi3sk;
use crate::model::entities::alarm::AlarmItem;
use crate::model::entities::open_alarm::OpenAlarmItem;
use crate::model::entities::rule_set::RuleSetItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{DeviceId, UserId};
use crate::model::schema::{GSI1PK, GSI1SK, GSI3SK, PK};
use crate::model::timestamp::Timestamp;
use crate::store::dynamo::{number_value, string_value};
use crate::store::table::FleetTable;
use crate::store::with_expressions::WithExpressions;

/// The device whose alarms change.
#[derive(Clone, Debug)]
pub struct AlarmDevice {
    /// Owner.
    pub user: UserId,
    /// Device.
    pub device: DeviceId,
    /// Its owner live-state partition (its alarms' owner-list key).
    pub partition: u32,
    /// Its name (alarms keep the name they were raised under).
    pub name: String,
}

/// The transaction actions that record `transitions` (in order) for `device`: a raise puts
/// the alarm and its open pointer; a clear updates the alarm (cleared, out of the open part
/// of its owner's list, no reminder, an expiry) and deletes the pointer. A raise and clear of
/// the same alarm in one batch are one put of the cleared alarm. At most three actions per
/// rule: see [`crate::model::alarm::MAX_RULES_PER_OWNER`]. An alarm a rule leaves open is
/// conditioned on the rule still being in its owner's rule set ([`rule_check`]): one
/// action more, whatever the number of such alarms.
pub fn transition_actions(
    table: &FleetTable,
    device: &AlarmDevice,
    rules: &[Rule],
    transitions: &[Transition],
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let retention = i64::from(table.config.retention_days) * 86_400;
    let mut puts: Vec<AlarmItem> = Vec::new();
    let mut clears: Vec<(AlarmSource, Timestamp, Transition)> = Vec::new();
    for t in transitions {
        match t {
            Transition::Raised {
                source,
                severity,
                at,
                reading,
            } => {
                let rule = match source {
                    AlarmSource::Rule(id) => rules.iter().find(|r| &r.rule_id == id),
                    AlarmSource::Offline => None,
                };
                let remind_every = rule.and_then(|r| r.definition.remind_every_seconds);
                puts.push(AlarmItem {
                    user_id: device.user.clone(),
                    device_id: device.device.clone(),
                    partition: device.partition,
                    device_name: device.name.clone(),
                    source: source.as_str().to_string(),
                    rule_name: rule.map(|r| r.definition.name.clone()),
                    severity: *severity,
                    state: AlarmState::Active,
                    raised_at: *at,
                    cleared_at: None,
                    acknowledged_at: None,
                    reading: reading.clone(),
                    clear_reading: None,
                    last_seen: None,
                    remind_every_seconds: remind_every,
                    remind_at: remind_every.map(|s| at.plus_seconds(s as i64)),
                    reminders: 0,
                    ttl: None,
                });
            }
            Transition::Cleared {
                source,
                raised_at,
                at,
                reading,
                ..
            } => {
                let raised_here = puts
                    .iter_mut()
                    .find(|p| p.source == source.as_str() && p.raised_at == *raised_at);
                match raised_here {
                    Some(alarm) => {
                        alarm.state = AlarmState::Cleared;
                        alarm.cleared_at = Some(*at);
                        alarm.clear_reading = reading.clone();
                        alarm.remind_at = None;
                        alarm.ttl = Some(at.epoch_seconds() + retention);
                    }
                    None => clears.push((source.clone(), *raised_at, t.clone())),
                }
            }
        }
    }
    let mut actions = Vec::new();
    for (source, raised_at, t) in &clears {
        let Transition::Cleared { at, reading, .. } = t else {
            continue;
        };
        actions.push(clear_alarm(
            table, device, source, raised_at, at, reading, retention,
        )?);
        // The pointer goes unless this batch raised the source's next alarm (its put replaces it).
        if !puts
            .iter()
            .any(|p| p.source == source.as_str() && p.state != AlarmState::Cleared)
        {
            actions.push(delete_pointer(table, device, source)?);
        }
    }
    for alarm in &puts {
        actions.push(put(table, alarm)?);
        if alarm.state != AlarmState::Cleared {
            actions.push(put(table, &OpenAlarmItem::of(alarm))?);
        }
    }
    let opened_by_rules: Vec<&str> = puts
        .iter()
        .filter(|p| p.state != AlarmState::Cleared && p.source != AlarmSource::Offline.as_str())
        .map(|p| p.source.as_str())
        .collect();
    if !opened_by_rules.is_empty() {
        actions.push(rule_check(table, &device.user, &opened_by_rules)?);
    }
    Ok(actions)
}

/// The check that every rule of `rule_ids` is still in `user`'s rule set, as a transaction
/// action (issue 39 item 7): a warm ingest container evaluates with rules cached for up to
/// `RULES_CACHE_SECONDS`, and an alarm it opened from a rule deleted meanwhile would stay
/// open for good on a device that then stays silent (the deletion's clearing pass has run;
/// only the device's next batch clears it). With the check the raise is refused instead,
/// and the refusal returns the rule set as it is (`ALL_OLD`), so the batch is evaluated
/// again with the current rules and no extra read. The only `ConditionCheck` of a
/// transition's transaction: that is how the caller tells its refusal from others.
pub fn rule_check(
    table: &FleetTable,
    user: &UserId,
    rule_ids: &[&str],
) -> Result<TransactWriteItem, FleetError> {
    let mut condition = Condition::exists(PK);
    for id in rule_ids {
        condition = condition.and(Condition::has_entry(RuleSetItem::RULES, *id));
    }
    let check = ConditionCheck::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::RuleSet { user: user.clone() }.attributes()))
        .expressions(Expressions::condition(condition))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

fn put(table: &FleetTable, item: &impl Entity) -> Result<TransactWriteItem, FleetError> {
    let put = Put::builder()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

fn delete_pointer(
    table: &FleetTable,
    device: &AlarmDevice,
    source: &AlarmSource,
) -> Result<TransactWriteItem, FleetError> {
    let key = ItemKey::OpenAlarm {
        user: device.user.clone(),
        device: device.device.clone(),
        source: source.clone(),
    };
    crate::store::dynamo::delete_action(table, &key)
}

/// The update that clears an open alarm; conditioned on the alarm existing (an update would
/// otherwise create a fragment of an alarm whose raise was never recorded).
fn clear_alarm(
    table: &FleetTable,
    device: &AlarmDevice,
    source: &AlarmSource,
    raised_at: &Timestamp,
    at: &Timestamp,
    reading: &Option<crate::model::alarm::status::AlarmReading>,
    retention: i64,
) -> Result<TransactWriteItem, FleetError> {
    let key = ItemKey::Alarm {
        user: device.user.clone(),
        device: device.device.clone(),
        raised_at: *raised_at,
        source: source.clone(),
    };
    let mut changes = Update::new()
        .set(AlarmItem::STATE, string_value(AlarmState::Cleared.as_str()))
        .set(AlarmItem::CLEARED_AT, string_value(at.to_string()))
        .set(
            GSI3SK,
            string_value(owner_alarms_gsi3sk(
                false,
                raised_at,
                &device.device,
                source,
            )),
        )
        .set(AlarmItem::TTL, number_value(at.epoch_seconds() + retention))
        .remove(AlarmItem::REMIND_AT)
        .remove(GSI1PK)
        .remove(GSI1SK);
    if let Some(reading) = reading {
        changes = changes.set(
            AlarmItem::CLEAR_READING,
            serde_dynamo::to_attribute_value(reading)?,
        );
    }
    let update = UpdateAction::builder()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::write(changes, Some(Condition::exists(PK))))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}
