//! Device operations: register (AP-07), read (AP-03), update (AP-06) and delete (AP-08).
//!
//! The device item carries `tags`; each tag also has a tag-link item (`TAG#{tag}#{deviceId}`)
//! so "devices with tag T" is one Query, and name/type are copied onto the links and onto the
//! registration (which ingestion copies onto events). Updates never read first: a status
//! change is one conditional UpdateItem. A change of name, type or tags is that same
//! UpdateItem plus one transaction that brings the copies in step, because a write that has
//! not read the item cannot know which old tag links to delete. The device item records
//! which tags have links (`linkedTags`) and a `syncVersion`, so concurrent updates converge:
//! only the sync of the newest name/tags can commit, and it deletes exactly the links that
//! exist.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use serde::Serialize;

use super::{n, s, RawItem};
use crate::catalog::{
    implemented_by, AccessPattern, Frequency, Operation, PatternId, RequestBudget,
};
use crate::dynamo::{transact, Transaction};
use crate::entity::Entity;
use crate::error::{FleetError, ValidationError};
use crate::ids::{DeviceId, DeviceType, Tag, UserId};
use crate::items::{DeviceItem, DeviceStatus, Reading, RecentEvent, RegistrationItem, TagLinkItem};
use crate::keys::{status_gsi1pk, status_shard, ItemKey};
use crate::retry::Retry;
use crate::schema::DELETING_AT;
use crate::table::{condition_failed_at, sdk_error, FleetTable, MAX_ATTEMPTS};
use crate::timestamp::Timestamp;
use crate::token::DeviceToken;

/// Longest device name, in characters.
pub const MAX_DEVICE_NAME: usize = 100;

/// A validated `POST /me/devices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRegistration {
    /// Requested id (unique across the table).
    pub device_id: DeviceId,
    /// Display name.
    pub name: String,
    /// Device type.
    pub device_type: DeviceType,
    /// Tags, validated, sorted, unique.
    pub tags: Vec<Tag>,
}

/// A validated `PATCH /me/devices/{deviceId}`: at least one field is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevicePatch {
    /// New status.
    pub status: Option<DeviceStatus>,
    /// New display name.
    pub name: Option<String>,
    /// New tag set (replaces the old one).
    pub tags: Option<Vec<Tag>>,
}

impl DevicePatch {
    /// Whether the patch touches what is copied onto tag links and the registration.
    pub fn changes_copies(&self) -> bool {
        self.name.is_some() || self.tags.is_some()
    }
}

/// A device as the API returns it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// Id.
    pub device_id: String,
    /// Display name.
    pub name: String,
    /// Device type.
    #[serde(rename = "type")]
    pub device_type: String,
    /// Status.
    pub status: DeviceStatus,
    /// Tags.
    pub tags: Vec<String>,
    /// Version for `If-Match`.
    pub version: u64,
    /// Registration time.
    pub created_at: String,
    /// Last owner update.
    pub updated_at: String,
    /// Newest event time, once the device has sent events.
    pub last_seen: Option<String>,
    /// Latest reading per event type.
    pub latest: BTreeMap<String, Reading>,
    /// Newest events, newest first.
    pub recent: Vec<RecentEvent>,
}

impl From<DeviceItem> for Device {
    fn from(item: DeviceItem) -> Self {
        Self {
            device_id: item.device_id.to_string(),
            name: item.name,
            device_type: item.device_type.to_string(),
            status: item.status,
            tags: item.tags.iter().map(ToString::to_string).collect(),
            version: item.version,
            created_at: item.created_at.to_string(),
            updated_at: item.updated_at.to_string(),
            last_seen: item.last_seen.map(|t| t.to_string()),
            latest: item.latest,
            recent: item.recent,
        }
    }
}

/// A freshly registered device and its token (returned to the owner once).
#[derive(Debug)]
pub struct RegisteredDevice {
    /// The device.
    pub device: Device,
    /// The bearer token the device authenticates with; only its digest is stored.
    pub token: DeviceToken,
}

type Item = HashMap<String, AttributeValue>;

fn device_key(user: &UserId, device: &DeviceId) -> Item {
    ItemKey::Device {
        user: user.clone(),
        device: device.clone(),
    }
    .attributes()
}

fn registration_key(device: &DeviceId) -> Item {
    ItemKey::Registration {
        device: device.clone(),
    }
    .attributes()
}

fn tag_link_key(user: &UserId, tag: &Tag, device: &DeviceId) -> Item {
    ItemKey::TagLink {
        user: user.clone(),
        tag: tag.clone(),
        device: device.clone(),
    }
    .attributes()
}

fn tag_link(device: &DeviceItem, tag: &Tag) -> TagLinkItem {
    TagLinkItem {
        user_id: device.user_id.clone(),
        tag: tag.clone(),
        device_id: device.device_id.clone(),
        name: device.name.clone(),
        device_type: device.device_type.clone(),
    }
}

fn put(
    table: &FleetTable,
    item: &impl Entity,
    condition: Option<&str>,
) -> Result<TransactWriteItem, FleetError> {
    let put = Put::builder()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .set_condition_expression(condition.map(str::to_string))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

fn delete(table: &FleetTable, key: Item) -> Result<TransactWriteItem, FleetError> {
    let delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(key))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().delete(delete).build())
}

/// The device item of a new registration: active, version 1, its tags linked.
fn new_device(user: &UserId, registration: &DeviceRegistration, now: Timestamp) -> DeviceItem {
    DeviceItem {
        user_id: user.clone(),
        device_id: registration.device_id.clone(),
        name: registration.name.clone(),
        device_type: registration.device_type.clone(),
        status: DeviceStatus::Active,
        tags: registration.tags.clone(),
        version: 1,
        sync_version: 1,
        linked_tags: registration.tags.clone(),
        created_at: now,
        updated_at: now,
        last_seen: None,
        latest: BTreeMap::new(),
        recent: Vec::new(),
        deleting_at: None,
    }
}

/// AP-07, implemented by [`register_device`].
pub const REGISTER_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::Ap07,
    description: "register a device (device id unique across the table)",
    frequency: Frequency::Important,
    operations: &[Operation::TransactWriteItems],
    index: None,
    key_condition:
        "PK = DEVICE#{deviceId}, SK = REGISTRATION (attribute_not_exists) + device + tag links",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("POST /me/devices"),
    implemented_by: implemented_by!(register_device),
};

/// AP-07: registers a device for `user` in one TransactWriteItems (registration item, device
/// item, tag links). The registration's `attribute_not_exists` condition makes the id unique
/// across the whole table: a taken id, by anyone, is [`FleetError::DeviceIdTaken`].
pub async fn register_device(
    table: &FleetTable,
    user: &UserId,
    registration: DeviceRegistration,
) -> Result<RegisteredDevice, FleetError> {
    let token = DeviceToken::generate()?;
    let now = Timestamp::now();
    let device = new_device(user, &registration, now);
    let registration_item = RegistrationItem {
        device_id: registration.device_id.clone(),
        user_id: user.clone(),
        token_sha256: token.sha256_hex(),
        device_name: registration.name,
        device_type: registration.device_type,
        created_at: now,
        previous_token_sha256: None,
        previous_token_until: None,
        revoked_at: None,
    };
    let not_exists = Some("attribute_not_exists(PK)");
    let mut actions = vec![
        put(table, &registration_item, not_exists)?,
        put(table, &device, not_exists)?,
    ];
    for tag in &device.tags {
        actions.push(put(table, &tag_link(&device, tag), None)?);
    }
    match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
        Transaction::Committed => Ok(RegisteredDevice {
            device: device.into(),
            token,
        }),
        Transaction::Cancelled(reasons)
            if condition_failed_at(&reasons, 0) || condition_failed_at(&reasons, 1) =>
        {
            Err(FleetError::DeviceIdTaken(
                registration.device_id.to_string(),
            ))
        }
        Transaction::Cancelled(reasons) => Err(FleetError::internal(format!(
            "registration cancelled: {reasons:?}"
        ))),
    }
}

/// AP-03, implemented by [`get_device`].
pub const GET_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::Ap03,
    description: "one device",
    frequency: Frequency::Critical,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}",
    budget: RequestBudget::Fixed(1),
    max_read_units: Some(1.0),
    route: Some("GET /me/devices/{deviceId}"),
    implemented_by: implemented_by!(get_device),
};

/// AP-03: one device of `user`, or `None` (also for another user's device or one being
/// deleted). One eventually consistent GetItem.
pub async fn get_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<Device>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(device_key(user, device)))
        .send()
        .await
        .map_err(sdk_error)?;
    let Some(attributes) = out.item else {
        return Ok(None);
    };
    let item = DeviceItem::from_item(attributes)?;
    Ok(item.deleting_at.is_none().then(|| item.into()))
}

/// AP-06, implemented by [`update_device`].
pub const UPDATE_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::Ap06,
    description: "update a device's status, name or tags (optimistic version, no read first)",
    frequency: Frequency::Critical,
    operations: &[Operation::UpdateItem, Operation::TransactWriteItems],
    index: None,
    key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}, version = {If-Match}",
    budget: RequestBudget::FixedPlusSync(1),
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
        return Err(
            ValidationError::new("body", "nothing to update: give status, name or tags").into(),
        );
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
    if patch.changes_copies() {
        // The update itself is committed: report it even if the copies lag, and say so in
        // the log. The next name/tag change brings them in step again.
        if let Err(err) = sync_copies(table, &item).await {
            tracing::warn!(device = %item.device_id, error = %err, "tag links and registration copy out of step");
        }
    }
    Ok(item.into())
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
    let mut sets = vec![
        "version = :next".to_string(),
        "updatedAt = :now".to_string(),
    ];
    let mut request = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(device_key(user, device)))
        .condition_expression(
            "attribute_exists(PK) AND version = :expected AND attribute_not_exists(deletingAt)",
        )
        .expression_attribute_values(":expected", n(expected_version))
        .expression_attribute_values(":next", n(expected_version + 1))
        .expression_attribute_values(":now", s(now.to_string()));
    if let Some(status) = patch.status {
        sets.push("#status = :status".into());
        sets.push("GSI1PK = :statusKey".into());
        request = request
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":status", s(status.as_str()))
            .expression_attribute_values(
                ":statusKey",
                s(status_gsi1pk(
                    status,
                    status_shard(device, &table.config.shards),
                )),
            );
    }
    if let Some(name) = &patch.name {
        sets.push("#name = :name".into());
        request = request
            .expression_attribute_names("#name", "name")
            .expression_attribute_values(":name", s(name.clone()));
    }
    if let Some(tags) = &patch.tags {
        sets.push("tags = :tags".into());
        request =
            request.expression_attribute_values(":tags", serde_dynamo::to_attribute_value(tags)?);
    }
    if patch.changes_copies() {
        sets.push("syncVersion = syncVersion + :one".into());
        request = request.expression_attribute_values(":one", n(1));
    }
    Ok(request
        .update_expression(format!("SET {}", sets.join(", ")))
        .return_values(ReturnValue::AllNew)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld))
}

/// A patch whose condition failed, given the item as it is now (`current`): the device when
/// an earlier attempt of this very request was applied and its answer lost (the SDK retried),
/// else [`FleetError::StaleVersion`], or [`FleetError::NotFound`] for a device that does not
/// exist for this user or is being deleted.
fn patch_refused(
    current: Option<&RawItem>,
    expected_version: u64,
    now: &Timestamp,
    patch: &DevicePatch,
) -> Result<DeviceItem, FleetError> {
    let current = current
        .filter(|old| !old.contains_key(DELETING_AT))
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
}

/// Brings tag links and the registration's name/type copy in step with `device` (as
/// returned by the update that bumped its `syncVersion`). Commits only while the device still
/// has that `syncVersion`: a newer change does its own sync from the `linkedTags` this one
/// would have set.
async fn sync_copies(table: &FleetTable, device: &DeviceItem) -> Result<(), FleetError> {
    let update_device = Update::builder()
        .table_name(table.name())
        .set_key(Some(device_key(&device.user_id, &device.device_id)))
        .update_expression("SET linkedTags = :tags")
        .condition_expression("syncVersion = :sync AND attribute_not_exists(deletingAt)")
        .expression_attribute_values(":tags", serde_dynamo::to_attribute_value(&device.tags)?)
        .expression_attribute_values(":sync", n(device.sync_version))
        .build()
        .map_err(FleetError::internal)?;
    let update_registration = Update::builder()
        .table_name(table.name())
        .set_key(Some(registration_key(&device.device_id)))
        .update_expression("SET deviceName = :name, deviceType = :type")
        .condition_expression("userId = :user")
        .expression_attribute_values(":name", s(device.name.clone()))
        .expression_attribute_values(":type", s(device.device_type.as_str()))
        .expression_attribute_values(":user", s(device.user_id.as_str()))
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
        actions.push(delete(
            table,
            tag_link_key(&device.user_id, stale, &device.device_id),
        )?);
    }
    for tag in &device.tags {
        actions.push(put(table, &tag_link(device, tag), None)?);
    }
    match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
        Transaction::Committed => Ok(()),
        // A newer name/tag change (or a deletion) got there first: its own sync applies.
        Transaction::Cancelled(reasons) if condition_failed_at(&reasons, 0) => Ok(()),
        Transaction::Cancelled(reasons) => Err(FleetError::internal(format!(
            "copy sync cancelled: {reasons:?}"
        ))),
    }
}

/// Marks `user`'s device as being deleted (keeping an earlier mark) and returns it as it is
/// now; [`FleetError::NotFound`] if there is no such device.
async fn mark_deleting(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<DeviceItem, FleetError> {
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(device_key(user, device)))
        .update_expression("SET deletingAt = if_not_exists(deletingAt, :now)")
        // A device registered after this request was made is not the one it means to delete:
        // a request that lands late (after its own retry, a re-registration and all) must not
        // mark the new device.
        .condition_expression("attribute_exists(PK) AND createdAt <= :now")
        .expression_attribute_values(":now", s(Timestamp::now().to_string()))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    let out = match result {
        Ok(out) => out,
        Err(err) => {
            if let Some(UpdateItemError::ConditionalCheckFailedException(_)) =
                err.as_service_error()
            {
                return Err(FleetError::NotFound("device"));
            }
            return Err(sdk_error(err));
        }
    };
    let attributes = out
        .attributes
        .ok_or_else(|| FleetError::internal("UpdateItem returned no attributes"))?;
    DeviceItem::from_item(attributes)
}

/// The transaction deleting the marked device `item`, its registration and its tag links.
fn deletion(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    item: &DeviceItem,
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let device_delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(device_key(user, device)))
        .condition_expression("attribute_exists(deletingAt)")
        .build()
        .map_err(FleetError::internal)?;
    // A registration that is already gone must not block the clean-up; one that belongs to
    // someone else must never be deleted.
    let registration_delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(registration_key(device)))
        .condition_expression("attribute_not_exists(PK) OR userId = :user")
        .expression_attribute_values(":user", s(user.as_str()))
        .build()
        .map_err(FleetError::internal)?;
    let mut actions = vec![
        TransactWriteItem::builder().delete(device_delete).build(),
        TransactWriteItem::builder()
            .delete(registration_delete)
            .build(),
    ];
    for tag in item
        .linked_tags
        .iter()
        .chain(item.tags.iter())
        .collect::<std::collections::BTreeSet<_>>()
    {
        actions.push(delete(table, tag_link_key(user, tag, device))?);
    }
    Ok(actions)
}

/// AP-08, implemented by [`delete_device`].
pub const DELETE_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::Ap08,
    description: "delete a device and free its id (events purged by the next daily run)",
    frequency: Frequency::Important,
    operations: &[Operation::UpdateItem, Operation::TransactWriteItems],
    index: None,
    key_condition:
        "PK = USER#{userId}, SK = DEVICE#{deviceId}; PK = DEVICE#{deviceId}, SK = REGISTRATION",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("DELETE /me/devices/{deviceId}"),
    implemented_by: implemented_by!(delete_device),
};

/// AP-08: deletes `user`'s device, its tag links and its registration, which frees the id.
/// Its events are purged by the next daily analytics run.
///
/// Two requests: an UpdateItem marks the device as being deleted and returns which tag links
/// it has (a write that has not read the item cannot know them), then one transaction deletes
/// device, registration and links together. A device marked but not yet deleted is gone for
/// every reader, and a retried DELETE completes it.
pub async fn delete_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<(), FleetError> {
    let item = mark_deleting(table, user, device).await?;
    let actions = deletion(table, user, device, &item)?;
    match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
        Transaction::Committed => Ok(()),
        // A concurrent DELETE of the same device completed first.
        Transaction::Cancelled(reasons) if condition_failed_at(&reasons, 0) => Ok(()),
        Transaction::Cancelled(reasons) => Err(FleetError::internal(format!(
            "deletion cancelled: {reasons:?}"
        ))),
    }
}
