//! Alarms as owners and operators see them (AP-23 to AP-26): lists and acknowledgement.
//!
//! An owner's list reads GSI3 `ALARMS#{userId}#{partition}`, one key per live-state
//! partition of the owner (one for nearly every owner; a fleet large enough to have more
//! spreads its alarm writes the way it spreads its states), merged newest first with open
//! alarms before cleared ones. Operators read the open-alarm pointers of one severity over
//! [`OPEN_ALARM_SHARDS`] keys. A device's history is its own partition of the table.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use serde::Serialize;

use crate::model::alarm::ids::{AlarmId, AlarmKind, AlarmSource};

use crate::model::alarm::severity::Severity;

use crate::model::alarm::status::{AlarmReading, AlarmState};
use crate::model::cursor::{self, Page, StartKey};
use crate::model::entities::alarm::{
    alarm_history_range, alarm_pk, owner_alarms_gsi3pk, AlarmItem,
};
use crate::model::entities::fleet::FleetItem;
use crate::model::entities::open_alarm::{open_alarms_gsi3pk, OpenAlarmItem, OPEN_ALARM_SHARDS};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{DeviceId, UserId};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, GSI1PK, GSI1SK, GSI3, GSI3PK, GSI3SK, PK, SK};
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{key_range, query, scatter_gather, string_value};
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// An alarm as the API shows it (docs/openapi.yaml, `Alarm`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmView {
    /// `{raisedAt ms}.{ruleId|offline}.{deviceId}`.
    pub alarm_id: String,
    /// The device.
    pub device_id: DeviceId,
    /// Its name when the alarm was raised.
    pub device_name: String,
    /// The rule (absent for offline).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// The rule's name when the alarm was raised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// `threshold` or `offline`.
    pub kind: AlarmKind,
    /// How urgent.
    pub severity: Severity,
    /// `active`, `acknowledged` or `cleared`.
    pub state: AlarmState,
    /// When it was raised.
    pub raised_at: Timestamp,
    /// When it cleared (`null` while open).
    pub cleared_at: Option<Timestamp>,
    /// When it was acknowledged (`null` if never).
    pub acknowledged_at: Option<Timestamp>,
    /// The reading that raised it (`null` for offline).
    pub reading: Option<AlarmReading>,
    /// The reading that cleared it.
    pub clear_reading: Option<AlarmReading>,
    /// Reminders sent.
    pub reminders: u32,
    /// The owner (operators' lists only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<UserId>,
}

impl AlarmView {
    /// The view of a stored alarm.
    pub fn of(alarm: &AlarmItem) -> Result<Self, FleetError> {
        let id = alarm.alarm_id()?;
        Ok(Self {
            alarm_id: id.to_string(),
            device_id: alarm.device_id.clone(),
            device_name: alarm.device_name.clone(),
            rule_id: rule_id(&id.source),
            rule_name: alarm.rule_name.clone(),
            kind: id.source.kind(),
            severity: alarm.severity,
            state: alarm.state,
            raised_at: alarm.raised_at,
            cleared_at: alarm.cleared_at,
            acknowledged_at: alarm.acknowledged_at,
            reading: alarm.reading.clone(),
            clear_reading: alarm.clear_reading.clone(),
            reminders: alarm.reminders,
            user_id: None,
        })
    }

    /// The view of an open alarm's pointer, with its owner (operators).
    pub fn of_open(open: &OpenAlarmItem) -> Result<Self, FleetError> {
        let source = AlarmSource::parse(&open.source)?;
        let id = AlarmId {
            device: open.device_id.clone(),
            source: source.clone(),
            raised_at: open.raised_at,
        };
        Ok(Self {
            alarm_id: id.to_string(),
            device_id: open.device_id.clone(),
            device_name: open.device_name.clone(),
            rule_id: rule_id(&source),
            rule_name: open.rule_name.clone(),
            kind: source.kind(),
            severity: open.severity,
            state: open.state,
            raised_at: open.raised_at,
            cleared_at: None,
            acknowledged_at: open.acknowledged_at,
            reading: open.reading.clone(),
            clear_reading: None,
            reminders: 0,
            user_id: Some(open.user_id.clone()),
        })
    }
}

fn rule_id(source: &AlarmSource) -> Option<String> {
    match source {
        AlarmSource::Rule(id) => Some(id.to_string()),
        AlarmSource::Offline => None,
    }
}

/// AP-23, implemented by [`owner_alarms`].
pub const OWNER_ALARMS: AccessPattern = AccessPattern {
    id: PatternId::OwnerAlarms,
    description: "an owner's alarms: open ones first, then cleared, each newest first",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::Query],
    index: Some(GSI3),
    key_condition: "PK = USER#{userId}, SK = FLEET (its partitions); GSI3PK = ALARMS#{userId}#{partition}, one Query per partition per page",
    budget: RequestBudget::PerShardPagePlus(1),
    max_read_units: None,
    route: Some("GET /me/alarms"),
    implemented_by: implemented_by!(owner_alarms),
};

/// AP-24, implemented by [`device_alarms`].
pub const DEVICE_ALARMS: AccessPattern = AccessPattern {
    id: PatternId::DeviceAlarms,
    description: "one device's alarm history, newest first",
    frequency: Frequency::Important,
    operations: &[Operation::Query, Operation::GetItem],
    index: None,
    key_condition: "PK = ALARM#{userId}#{deviceId} AND SK BETWEEN 0 AND 9~",
    budget: RequestBudget::PerPagePlusEmptyCheck(1),
    max_read_units: None,
    route: Some("GET /me/devices/{deviceId}/alarms"),
    implemented_by: implemented_by!(device_alarms),
};

/// AP-25, implemented by [`acknowledge`].
pub const ACKNOWLEDGE_ALARM: AccessPattern = AccessPattern {
    id: PatternId::AcknowledgeAlarm,
    description: "acknowledge an active alarm (idempotent; a cleared one is a 409)",
    frequency: Frequency::Important,
    operations: &[Operation::UpdateItem],
    index: None,
    key_condition: "PK = ALARM#{userId}#{deviceId}, SK = {raisedAt}#{source}, state = active; its OPEN#{source} pointer",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /me/alarms/{alarmId}/ack"),
    implemented_by: implemented_by!(acknowledge),
};

/// AP-26, implemented by [`open_alarms`].
pub const OPEN_ALARMS: AccessPattern = AccessPattern {
    id: PatternId::OpenAlarms,
    description: "open alarms of one severity across owners, newest first (operators)",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: Some(GSI3),
    key_condition: "GSI3PK = OPEN#{severity}#{shard}, one Query per shard per page",
    budget: RequestBudget::PerShardPage,
    max_read_units: None,
    route: Some("GET /admin/alarms"),
    implemented_by: implemented_by!(open_alarms),
};

/// The owner's alarms, open first then cleared, newest first within each.
pub async fn owner_alarms(
    table: &FleetTable,
    user: &UserId,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<AlarmView>, FleetError> {
    let partitions = fleet_partitions(table, user).await?;
    let keys: Vec<String> = (0..partitions)
        .map(|p| owner_alarms_gsi3pk(user, p))
        .collect();
    merged_page(
        table,
        PatternId::OwnerAlarms,
        &keys,
        limit,
        cursor,
        |item| AlarmView::of(&AlarmItem::from_item(item)?),
    )
    .await
}

/// Open alarms of `severity` across owners, newest first.
pub async fn open_alarms(
    table: &FleetTable,
    severity: Severity,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<AlarmView>, FleetError> {
    let keys: Vec<String> = (0..OPEN_ALARM_SHARDS)
        .map(|k| open_alarms_gsi3pk(severity, k))
        .collect();
    merged_page(table, PatternId::OpenAlarms, &keys, limit, cursor, |item| {
        AlarmView::of_open(&OpenAlarmItem::from_item(item)?)
    })
    .await
}

/// A device's alarm history, newest first; a 404 for a device the owner does not have.
pub async fn device_alarms(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<AlarmView>, FleetError> {
    let pk = alarm_pk(user, device);
    let start = cursor::resume(PatternId::DeviceAlarms, cursor, &[(PK, &pk)], &[(SK, "")])?;
    let (first, last) = alarm_history_range();
    let (items, next) = query(
        key_range(table, pk.clone(), first, last, Expressions::builder())
            .scan_index_forward(false)
            .limit(limit as i32)
            .set_exclusive_start_key(start.clone()),
    )
    .await?;
    if items.is_empty() && start.is_none() && !owns_device(table, user, device).await? {
        return Err(FleetError::NotFound("device"));
    }
    let alarms = items
        .into_iter()
        .map(|item| AlarmView::of(&AlarmItem::from_item(item)?))
        .collect::<Result<Vec<_>, FleetError>>()?;
    Ok(Page {
        items: alarms,
        cursor: cursor::after(PatternId::DeviceAlarms, next.as_ref()),
    })
}

/// Acknowledges alarm `id` of `user`: an active alarm becomes acknowledged (no more
/// reminders); an acknowledged one is answered as it is; a cleared one is a 409; anything
/// else (another owner's, an unknown id) is a 404.
pub async fn acknowledge(
    table: &FleetTable,
    user: &UserId,
    id: &AlarmId,
) -> Result<AlarmView, FleetError> {
    let key = ItemKey::Alarm {
        user: user.clone(),
        device: id.device.clone(),
        raised_at: id.raised_at,
        source: id.source.clone(),
    };
    let now = Timestamp::now();
    let changes = Update::new()
        .set(
            AlarmItem::STATE,
            string_value(AlarmState::Acknowledged.as_str()),
        )
        .set(AlarmItem::ACKNOWLEDGED_AT, string_value(now.to_string()))
        .remove(AlarmItem::REMIND_AT)
        .remove(GSI1PK)
        .remove(GSI1SK);
    let active = Condition::exists(PK).and(Condition::equals(
        AlarmItem::STATE,
        string_value(AlarmState::Active.as_str()),
    ));
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::write(changes, Some(active)))
        .return_values(ReturnValue::AllNew)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    let alarm = match result {
        Ok(out) => AlarmItem::from_item(out.attributes.unwrap_or_default())?,
        Err(err) => {
            let current = match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    failed.item().cloned()
                }
                _ => return Err(sdk_error(err)),
            };
            let current = current
                .map(AlarmItem::from_item)
                .transpose()?
                .ok_or(FleetError::NotFound("alarm"))?;
            return match current.state {
                AlarmState::Acknowledged => AlarmView::of(&current),
                _ => Err(FleetError::Conflict {
                    code: "alarm_cleared",
                    message: "the alarm has cleared: there is nothing to acknowledge".into(),
                }),
            };
        }
    };
    // The operators' pointer shows the state too; it is gone if the alarm cleared meanwhile.
    let pointer = ItemKey::OpenAlarm {
        user: user.clone(),
        device: id.device.clone(),
        source: id.source.clone(),
    };
    let same_alarm = Condition::equals(
        OpenAlarmItem::RAISED_AT,
        string_value(id.raised_at.to_string()),
    );
    let pointed = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(pointer.attributes()))
        .expressions(Expressions::write(
            Update::new()
                .set(
                    OpenAlarmItem::STATE,
                    string_value(AlarmState::Acknowledged.as_str()),
                )
                .set(
                    OpenAlarmItem::ACKNOWLEDGED_AT,
                    string_value(now.to_string()),
                ),
            Some(same_alarm),
        ))
        .send()
        .await;
    if let Err(err) = pointed {
        match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(_)) => {}
            _ => return Err(sdk_error(err)),
        }
    }
    AlarmView::of(&alarm)
}

/// The owner's live-state partitions (1 without a fleet item).
pub(super) async fn fleet_partitions(table: &FleetTable, user: &UserId) -> Result<u32, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(out
        .item
        .map(FleetItem::from_item)
        .transpose()?
        .map_or(1, |f| f.partitions.max(1)))
}

/// Whether `user` has `device` (not being deleted): one eventually consistent GetItem of the
/// device item.
pub(crate) async fn owns_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<bool, FleetError> {
    Ok(
        crate::ops::ownership::owned_device(table, user, device, false)
            .await?
            .is_some(),
    )
}

/// One page over several GSI3 keys read backwards (newest first), merged by sort key: each
/// key's Query asks for `limit` items from where the cursor left it; the page is the
/// `limit` greatest, and the cursor remembers, per key, the last item taken from it (or
/// that it is exhausted). Every key in a cursor is checked to be one of `keys`. `view` turns
/// each item taken into what the route answers.
async fn merged_page(
    table: &FleetTable,
    pattern: PatternId,
    keys: &[String],
    limit: u32,
    cursor: Option<&str>,
    view: impl Fn(Item) -> Result<AlarmView, FleetError>,
) -> Result<Page<AlarmView>, FleetError> {
    let starts: Vec<Option<StartKey>> = match cursor {
        None => vec![None; keys.len()],
        Some(text) => {
            let starts = cursor::decode(pattern, text, keys.len())?;
            for (start, pk) in starts.iter().zip(keys) {
                if let Some(start) = start {
                    check_start(start, pk)?;
                }
            }
            starts
        }
    };
    let fresh = cursor.is_none();
    let reads = keys.iter().zip(&starts).map(|(pk, start)| {
        let done = !fresh && start.is_none();
        async move {
            if done {
                return Ok((Vec::new(), None));
            }
            let request = table
                .client
                .query()
                .table_name(table.name())
                .index_name(GSI3)
                .expressions(
                    Expressions::builder()
                        .key_condition(Condition::equals(GSI3PK, string_value(pk.clone())))
                        .build(),
                )
                .scan_index_forward(false)
                .limit(limit as i32)
                .set_exclusive_start_key(
                    start
                        .as_ref()
                        .filter(|k| !k.is_empty())
                        .map(cursor::exclusive_start_key),
                );
            query(request).await
        }
    });
    let results: Vec<(Vec<Item>, Option<Item>)> = scatter_gather(reads).await?;
    let sort_key = |item: &Item| {
        item.get(GSI3SK.name())
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    let mut rows: Vec<(String, usize, Item)> = results
        .iter()
        .enumerate()
        .flat_map(|(k, (items, _))| items.iter().map(move |i| (sort_key(i), k, i.clone())))
        .collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    rows.truncate(limit as usize);
    // Where each key resumes: after its last item on this page; where it stood if none of
    // its items made the page; exhausted when all it had were taken and it had no more.
    let mut next: Vec<Option<StartKey>> = Vec::with_capacity(keys.len());
    for (k, (items, last)) in results.iter().enumerate() {
        let taken = rows.iter().filter(|r| r.1 == k).count();
        let resume = if taken == 0 {
            if !fresh && starts[k].is_none() || (items.is_empty() && last.is_none()) {
                None
            } else {
                starts[k].clone().or_else(|| Some(StartKey::new()))
            }
        } else if taken == items.len() && last.is_none() {
            None
        } else {
            let item = &rows.iter().rfind(|r| r.1 == k).expect("taken").2;
            cursor::start_key(&index_key(item))
        };
        next.push(resume);
    }
    let more = next.iter().any(Option::is_some);
    Ok(Page {
        items: rows
            .into_iter()
            .map(|r| view(r.2))
            .collect::<Result<_, _>>()?,
        cursor: more.then(|| cursor::encode(pattern, next)),
    })
}

/// The key attributes of an index item (what `ExclusiveStartKey` takes).
fn index_key(item: &Item) -> Item {
    [PK, SK, GSI3PK, GSI3SK]
        .iter()
        .filter_map(|a| {
            item.get(a.name())
                .map(|v| (a.name().to_string(), v.clone()))
        })
        .collect()
}

/// A cursor's start key for `pk`: empty (not started yet) or exactly an index key of `pk`.
fn check_start(start: &StartKey, pk: &str) -> Result<(), FleetError> {
    if start.is_empty() {
        return Ok(());
    }
    cursor::check_key(
        start,
        &[(GSI3PK, pk)],
        &[(PK, "ALARM#"), (SK, ""), (GSI3SK, "")],
    )?;
    Ok(())
}
