//! AP-06: a device's status, name, tags, reporting interval or offline detection changed at
//! an expected version, with no read first, and the copies (live state, tag links,
//! registration) brought in step.

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::view::Device;
use super::{put, state_key, tag_link};
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{DeviceId, Tag, UserId};
use crate::model::keys::IndexKeys;
use crate::model::offline::OfflineDetection;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, PK};
use crate::model::status::DeviceStatus;
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{number_value, string_value, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, FleetTable, TransactionSlot, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// A validated `PATCH /me/devices/{deviceId}`: at least one field is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevicePatch {
    /// New status.
    pub status: Option<DeviceStatus>,
    /// New display name.
    pub name: Option<String>,
    /// New tag set (replaces the old one).
    pub tags: Option<Vec<Tag>>,
    /// New declared reporting interval; `Some(None)` (JSON `null`) goes back to learning it.
    pub report_every_seconds: Option<Option<u64>>,
    /// New offline detection.
    pub offline_detection: Option<OfflineDetection>,
}

impl DevicePatch {
    /// Whether the patch touches what is copied onto tag links and the registration.
    pub fn changes_copies(&self) -> bool {
        self.name.is_some() || self.tags.is_some()
    }
}

/// AP-06, implemented by [`update_device`].
pub const UPDATE_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::UpdateDevice,
    description: "update a device's status, name or tags (optimistic version, no read first)",
    frequency: Frequency::Critical,
    operations: &[Operation::UpdateItem, Operation::TransactWriteItems],
    index: None,
    key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}, version = {If-Match}; the live state's status/name copy",
    budget: RequestBudget::FixedPlusSync(2),
    max_read_units: None,
    route: Some("PATCH /me/devices/{deviceId}"),
    implemented_by: implemented_by!(update_device),
};

/// AP-06: applies `patch` if the device is still at `expected_version`, in one conditional
/// UpdateItem with no read first. A stale version is [`FleetError::StaleVersion`]; a device
/// that does not exist for this user is [`FleetError::NotFound`]. When name or tags change,
/// one more transaction brings the tag links and the registration in step.
pub async fn update_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    expected_version: u64,
    patch: DevicePatch,
) -> Result<Device, FleetError> {
    if patch == DevicePatch::default() {
        return Err(ValidationError::new(
            "body",
            "nothing to update: give status, name, tags, reportEverySeconds or offlineDetection",
        )
        .into());
    }
    let now = Timestamp::now();
    let result = patch_request(table, user, device, expected_version, &patch, &now)?
        .send()
        .await;
    let item: DeviceItem = match result {
        Ok(out) => {
            let attributes = out
                .attributes
                .ok_or_else(|| FleetError::internal("UpdateItem returned no attributes"))?;
            DeviceItem::from_item(attributes)?
        }
        Err(err) => match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                patch_refused(failed.item(), expected_version, &now, &patch)?
            }
            _ => return Err(sdk_error(err)),
        },
    };
    // The update itself is committed: report it even if a copy lags, and say so in the log.
    // The next change of the same field brings it in step again.
    if patch.status.is_some()
        || patch.name.is_some()
        || patch.tags.is_some()
        || patch.report_every_seconds.is_some()
        || patch.offline_detection.is_some()
    {
        let recheck = patch.status.is_some()
            || patch.report_every_seconds.is_some()
            || patch.offline_detection.is_some();
        if let Err(err) = copy_to_state(table, &item, recheck).await {
            tracing::warn!(device = %item.device_id, error = %err, "live state's status/name copy out of step");
        }
    }
    if patch.changes_copies() {
        if let Err(err) = sync_copies(table, &item).await {
            tracing::warn!(device = %item.device_id, error = %err, "tag links and registration copy out of step");
        }
    }
    Ok(item.into())
}

/// Copies `device`'s status (its GSI1 partition), name, tags, declared reporting interval and
/// offline detection onto its live state, unless a newer version of the device already did
/// (concurrent PATCHes may land in any order). `recheck` (the status, the interval or the
/// detection changed, so the device's offline-check due time may have): the state's due entry
/// is set to now, so the detector reads the state at its next run and puts the entry where it
/// belongs (or removes it), and a shortened interval or a tightened detection is never waited
/// out at the old due time. The entry is the detector's to fix, not this copy's: the state's
/// `lastSeen` is not read here.
async fn copy_to_state(
    table: &FleetTable,
    device: &DeviceItem,
    recheck: bool,
) -> Result<(), FleetError> {
    // The status index partition follows the status: derived by the entity, as on a put
    // (the sort key, which follows `lastSeen`, is ingestion's and stays as it is).
    let status_partition =
        IndexKeys::device_state(device.status, &device.device_id, None, &table.config.shards);
    let changes = UpdateExpression::new()
        .set(
            DeviceStateItem::STATUS,
            string_value(device.status.as_str()),
        )
        .set(DeviceStateItem::NAME, string_value(device.name.clone()))
        .set(
            DeviceStateItem::TAGS,
            serde_dynamo::to_attribute_value(&device.tags)?,
        )
        .set_all(status_partition.attributes())
        .set(
            DeviceStateItem::DEVICE_VERSION,
            number_value(device.version),
        );
    let changes = match device.report_every_seconds {
        Some(every) => changes.set(DeviceStateItem::REPORT_EVERY_SECONDS, number_value(every)),
        None => changes.remove(DeviceStateItem::REPORT_EVERY_SECONDS),
    };
    let changes = match device.offline_detection {
        OfflineDetection::Standard => changes.remove(DeviceStateItem::OFFLINE_DETECTION),
        tight => changes.set(
            DeviceStateItem::OFFLINE_DETECTION,
            string_value(tight.as_str()),
        ),
    };
    let changes = if recheck {
        let now = Timestamp::now();
        changes.set_all(IndexKeys::due(&device.device_id, Some(&now)).attributes())
    } else {
        changes
    };
    let not_newer = Condition::exists(PK).and(
        Condition::absent(DeviceStateItem::DEVICE_VERSION).or(Condition::below(
            DeviceStateItem::DEVICE_VERSION,
            number_value(device.version),
        )),
    );
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(state_key(device).attributes()))
        .expressions(Expressions::write(changes, Some(not_newer)))
        .send()
        .await;
    // A newer version's copy is there already (or the device is being deleted).
    crate::store::table::done_unless_failed(result)
}

/// The conditional UpdateItem applying `patch` at `expected_version`, stamped `now`.
fn patch_request(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    expected_version: u64,
    patch: &DevicePatch,
    now: &Timestamp,
) -> Result<UpdateItemFluentBuilder, FleetError> {
    let mut changes = UpdateExpression::new()
        .set(DeviceItem::VERSION, number_value(expected_version + 1))
        .set(DeviceItem::UPDATED_AT, string_value(now.to_string()));
    if let Some(status) = patch.status {
        changes = changes.set(DeviceItem::STATUS, string_value(status.as_str()));
    }
    if let Some(name) = &patch.name {
        changes = changes.set(DeviceItem::NAME, string_value(name.clone()));
    }
    if let Some(tags) = &patch.tags {
        changes = changes.set(DeviceItem::TAGS, serde_dynamo::to_attribute_value(tags)?);
    }
    match patch.report_every_seconds {
        Some(Some(every)) => {
            changes = changes.set(DeviceItem::REPORT_EVERY_SECONDS, number_value(every))
        }
        Some(None) => changes = changes.remove(DeviceItem::REPORT_EVERY_SECONDS),
        None => {}
    }
    match patch.offline_detection {
        Some(OfflineDetection::Standard) => changes = changes.remove(DeviceItem::OFFLINE_DETECTION),
        Some(tight) => {
            changes = changes.set(DeviceItem::OFFLINE_DETECTION, string_value(tight.as_str()))
        }
        None => {}
    }
    if patch.changes_copies() {
        changes = changes.increment(DeviceItem::SYNC_VERSION, number_value(1));
    }
    let at_version = Condition::exists(PK)
        .and(Condition::equals(
            DeviceItem::VERSION,
            number_value(expected_version),
        ))
        .and(Condition::absent(DeviceItem::DELETING_AT));
    Ok(table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::device(user, device).attributes()))
        .expressions(Expressions::write(changes, Some(at_version)))
        .return_values(ReturnValue::AllNew)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld))
}

/// A patch whose condition failed, given the item as it is now (`current`): the device when
/// an earlier attempt of this very request was applied and its answer lost (the SDK retried),
/// else [`FleetError::StaleVersion`], or [`FleetError::NotFound`] for a device that does not
/// exist for this user or is being deleted.
fn patch_refused(
    current: Option<&Item>,
    expected_version: u64,
    now: &Timestamp,
    patch: &DevicePatch,
) -> Result<DeviceItem, FleetError> {
    let current = current
        .filter(|old| !old.contains_key(DeviceItem::DELETING_AT.name()))
        .map(|old| DeviceItem::from_item(old.clone()))
        .transpose()?;
    match current {
        Some(device) if applied_by(&device, expected_version, now, patch) => Ok(device),
        Some(_) => Err(FleetError::StaleVersion {
            expected: expected_version,
        }),
        None => Err(FleetError::NotFound("device")),
    }
}

/// Whether `device` is the result of applying `patch` at `expected_version` with `updatedAt`
/// = `now`: the same request's earlier attempt (a write by another request in the same
/// millisecond with the same fields is indistinguishable from it, and equivalent).
fn applied_by(
    device: &DeviceItem,
    expected_version: u64,
    now: &Timestamp,
    patch: &DevicePatch,
) -> bool {
    device.version == expected_version + 1
        && device.updated_at == *now
        && patch.status.is_none_or(|s| device.status == s)
        && patch.name.as_ref().is_none_or(|n| &device.name == n)
        && patch.tags.as_ref().is_none_or(|t| &device.tags == t)
        && patch
            .report_every_seconds
            .is_none_or(|r| device.report_every_seconds == r)
        && patch
            .offline_detection
            .is_none_or(|d| device.offline_detection == d)
}

/// Brings tag links and the registration's name/type copy in step with `device` (as
/// returned by the update that bumped its `syncVersion`). Commits only while the device still
/// has that `syncVersion`: a newer change does its own sync from the `linkedTags` this one
/// would have set.
async fn sync_copies(table: &FleetTable, device: &DeviceItem) -> Result<(), FleetError> {
    let update_device = Update::builder()
        .table_name(table.name())
        .set_key(Some(device.item_key().attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new().set(
                DeviceItem::LINKED_TAGS,
                serde_dynamo::to_attribute_value(&device.tags)?,
            ),
            Some(
                Condition::equals(DeviceItem::SYNC_VERSION, number_value(device.sync_version))
                    .and(Condition::absent(DeviceItem::DELETING_AT)),
            ),
        ))
        .build()
        .map_err(FleetError::internal)?;
    let update_registration = Update::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::registration(&device.device_id).attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new()
                .set(
                    RegistrationItem::DEVICE_NAME,
                    string_value(device.name.clone()),
                )
                .set(
                    RegistrationItem::DEVICE_TYPE,
                    string_value(device.device_type.as_str()),
                ),
            Some(Condition::equals(
                RegistrationItem::USER_ID,
                string_value(device.user_id.as_str()),
            )),
        ))
        .build()
        .map_err(FleetError::internal)?;
    let mut actions = vec![
        TransactWriteItem::builder().update(update_device).build(),
        TransactWriteItem::builder()
            .update(update_registration)
            .build(),
    ];
    for stale in device
        .linked_tags
        .iter()
        .filter(|t| !device.tags.contains(t))
    {
        actions.push(crate::store::dynamo::delete_action(
            table,
            &tag_link(device, stale).item_key(),
        )?);
    }
    for tag in &device.tags {
        actions.push(put(table, &tag_link(device, tag), None)?);
    }
    match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
        Transaction::Committed => Ok(()),
        // A newer name/tag change (or a deletion) got there first: its own sync applies.
        Transaction::Cancelled(reasons) if condition_failed(&reasons, SyncSlot::Device) => Ok(()),
        Transaction::Cancelled(reasons) => Err(FleetError::internal(format!(
            "copy sync cancelled: {reasons:?}"
        ))),
    }
}

/// The first action of a copy sync's transaction (then the registration's copy and the tag
/// links).
#[derive(Clone, Copy, Debug)]
enum SyncSlot {
    /// Sets the device's `linkedTags`; fails when a newer change or a deletion came first.
    Device,
}

impl TransactionSlot for SyncSlot {
    fn position(self) -> usize {
        self as usize
    }
}
