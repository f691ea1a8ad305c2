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

use crate::model::alarm::{open_summary, Severity, OFFLINE};
use std::collections::BTreeMap;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    CancellationReason, Delete, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use serde::Serialize;

use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::{placement, state_sk, DeviceStateItem};
use crate::model::entities::fleet::FleetItem;
use crate::model::entities::purge_marker::PurgeMarkerItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::released_registration::ReleasedRegistrationItem;
use crate::model::entities::tag_link::TagLinkItem;
use crate::model::entities::ItemKey;
use crate::model::entities::{Entity, EntityType};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{DeviceId, DeviceType, Tag, UserId};
use crate::model::keys::IndexKeys;
use crate::model::offline::OfflineDetection;
use crate::model::pattern_id::PatternId;
use crate::model::readings::{Reading, RecentEvent};
use crate::model::schema::{Item, PK};
use crate::model::status::DeviceStatus;
use crate::model::timestamp::Timestamp;
use crate::model::token::DeviceToken;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::ops::twin::owner::twin_documents;
use crate::ops::twin::TwinView;
use crate::store::dynamo::{number_value, string_value, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, FleetTable, TransactionSlot, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

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
    /// Declared reporting interval (offline detection); `None`: learned from the device.
    pub report_every_seconds: Option<u64>,
    /// How closely its silence is watched (`offlineDetection`, standard unless asked).
    pub offline_detection: OfflineDetection,
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
    /// Declared reporting interval, if any (otherwise the device's rhythm is learned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_every_seconds: Option<u64>,
    /// The interval learned from the device's rhythm, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learned_every_seconds: Option<u64>,
    /// `tight` when the owner asked for it; absent: standard (every other device's answer
    /// stays as it was).
    #[serde(skip_serializing_if = "OfflineDetection::is_standard")]
    pub offline_detection: OfflineDetection,
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
    /// The twin's versions (desired, reported, open commands) once it has one; AP-03 adds the
    /// documents and their delta ([`crate::ops::twin`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub twin: Option<TwinView>,
    /// `online` (reporting), `offline` (an open offline alarm) or `unknown` (never reported).
    pub connectivity: Connectivity,
    /// The device's open alarms: how many, and the highest severity.
    pub alarms: AlarmSummary,
}

/// Whether a device is reporting, from its live state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Connectivity {
    /// It has reported and is not overdue.
    Online,
    /// It stopped reporting: an offline alarm is open.
    Offline,
    /// It has never reported.
    Unknown,
}

/// A device's open alarms as the dashboard shows them (from the statuses on its live state:
/// no read of its alarms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmSummary {
    /// Open alarms (active or acknowledged).
    pub active: usize,
    /// The highest severity among them.
    pub highest_severity: Option<Severity>,
}

impl Device {
    /// The device as the API shows it: what its owner set, with the readings of its live
    /// state (none before its first batch, or while a reader has not found the state).
    pub fn with_state(item: DeviceItem, state: Option<&DeviceStateItem>) -> Self {
        Self {
            last_seen: state.and_then(|s| s.last_seen).map(|t| t.to_string()),
            learned_every_seconds: state.and_then(|s| s.learned_every_seconds),
            latest: state
                .map(|s| {
                    s.latest
                        .iter()
                        .map(|(t, r)| (t.clone(), r.reading()))
                        .collect()
                })
                .unwrap_or_default(),
            recent: state
                .map(|s| s.recent.iter().map(|e| e.recent_event()).collect())
                .unwrap_or_default(),
            twin: state.and_then(TwinView::of_state),
            connectivity: match state {
                Some(s) if s.alarms.get(OFFLINE).is_some_and(|a| a.raised_at.is_some()) => {
                    Connectivity::Offline
                }
                Some(s) if s.last_seen.is_some() => Connectivity::Online,
                _ => Connectivity::Unknown,
            },
            alarms: state
                .map(|s| {
                    let (active, highest_severity) = open_summary(&s.alarms);
                    AlarmSummary {
                        active,
                        highest_severity,
                    }
                })
                .unwrap_or_default(),
            ..Device::from(item)
        }
    }
}

impl From<DeviceItem> for Device {
    fn from(item: DeviceItem) -> Self {
        Self {
            device_id: item.device_id.to_string(),
            name: item.name,
            device_type: item.device_type.to_string(),
            status: item.status,
            tags: item.tags.iter().map(ToString::to_string).collect(),
            report_every_seconds: item.report_every_seconds,
            learned_every_seconds: None,
            offline_detection: item.offline_detection,
            version: item.version,
            created_at: item.created_at.to_string(),
            updated_at: item.updated_at.to_string(),
            last_seen: None,
            latest: BTreeMap::new(),
            recent: Vec::new(),
            twin: None,
            connectivity: Connectivity::Unknown,
            alarms: AlarmSummary::default(),
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
    condition: Option<Condition>,
) -> Result<TransactWriteItem, FleetError> {
    let mut put = Put::builder()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?));
    if let Some(condition) = condition {
        put = put.expressions(Expressions::condition(condition));
    }
    let put = put.build().map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

fn delete(table: &FleetTable, key: ItemKey) -> Result<TransactWriteItem, FleetError> {
    crate::store::dynamo::delete_action(table, &key)
}

/// The device item of a new registration: active, version 1, its tags linked, its live state
/// placed on `shard`.
fn new_device(
    user: &UserId,
    registration: &DeviceRegistration,
    shard: u32,
    now: Timestamp,
) -> DeviceItem {
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
        partition: shard,
        created_at: now,
        updated_at: now,
        deleting_at: None,
        report_every_seconds: registration.report_every_seconds,
        offline_detection: registration.offline_detection,
    }
}

/// The live state of a device that has not reported yet.
fn new_state(device: &DeviceItem) -> DeviceStateItem {
    DeviceStateItem {
        user_id: device.user_id.clone(),
        device_id: device.device_id.clone(),
        partition: device.partition,
        status: device.status,
        name: device.name.clone(),
        device_type: device.device_type.clone(),
        last_seen: None,
        latest: BTreeMap::new(),
        recent: Vec::new(),
        ingest_seq: 0,
        device_version: device.version,
        twin: Default::default(),
        tags: device.tags.clone(),
        alarms: BTreeMap::new(),
        report_every_seconds: device.report_every_seconds,
        offline_detection: device.offline_detection,
        learned_every_seconds: None,
        learned_jitter_seconds: None,
        indexed_due: None,
    }
}

/// The key of `device`'s live state (on the partition it was placed on).
pub(crate) fn state_key(device: &DeviceItem) -> ItemKey {
    ItemKey::DeviceState {
        user: device.user_id.clone(),
        partition: device.partition,
        device: device.device_id.clone(),
    }
}

/// An owner's fleet as registration reads it: live-state partitions and devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetSize {
    /// Live-state partitions (`None`: the owner has no fleet item yet).
    pub partitions: Option<u32>,
    /// Registered devices.
    pub devices: u64,
}

impl FleetSize {
    /// The partitions after one more registration: doubled once the devices would exceed
    /// `devices_per_shard` on each. Never fewer than now.
    pub fn partitions_after_one_more(&self, devices_per_partition: u32) -> u32 {
        let shards = self.partitions.unwrap_or(1).max(1);
        if self.devices + 1 > u64::from(shards) * u64::from(devices_per_partition) {
            shards.saturating_mul(2)
        } else {
            shards
        }
    }
}

/// Reads `user`'s fleet item (consistently: a registration places by it).
async fn read_fleet(table: &FleetTable, user: &UserId) -> Result<FleetSize, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(match out.item {
        Some(item) => {
            let fleet = FleetItem::from_item(item)?;
            FleetSize {
                partitions: Some(fleet.partitions),
                devices: fleet.devices,
            }
        }
        None => FleetSize {
            partitions: None,
            devices: 0,
        },
    })
}

/// The transaction action counting one more device on the fleet item (creating it), setting
/// its partitions to `shards`, on the condition that nobody changed them since `read`.
fn count_registration(
    table: &FleetTable,
    user: &UserId,
    read: FleetSize,
    shards: u32,
) -> Result<TransactWriteItem, FleetError> {
    // The fleet item is created by its first registration: its type and directory entry
    // (GSI2) come from the entity.
    let fleet = FleetItem {
        user_id: user.clone(),
        partitions: shards,
        devices: read.devices + 1,
    };
    let changes = UpdateExpression::new()
        .set(FleetItem::PARTITIONS, number_value(shards))
        .set_all([FleetItem::ENTITY_TYPE.assignment()])
        .set_all(fleet.index_keys(&table.config.shards).attributes())
        .add(FleetItem::DEVICES, number_value(1));
    let unchanged = match read.partitions {
        Some(current) => Condition::equals(FleetItem::PARTITIONS, number_value(current)),
        None => Condition::absent(FleetItem::PARTITIONS),
    };
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .expressions(Expressions::write(changes, Some(unchanged)));
    Ok(TransactWriteItem::builder()
        .update(update.build().map_err(FleetError::internal)?)
        .build())
}

/// The transaction action counting one device less on the fleet item.
fn count_deletion(table: &FleetTable, user: &UserId) -> Result<TransactWriteItem, FleetError> {
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new().add(FleetItem::DEVICES, number_value(-1)),
            Some(Condition::exists(FleetItem::PARTITIONS)),
        ))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Fleet-item conflicts a registration retries (each means another registration of the same
/// owner doubled its partitions in between).
const PLACEMENT_ATTEMPTS: u32 = 5;

/// AP-07, implemented by [`register_device`].
pub const REGISTER_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::RegisterDevice,
    description: "register a device (device id unique across the table)",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::TransactWriteItems],
    index: None,
    key_condition:
        "PK = USER#{userId}, SK = FLEET; PK = DEVICE#{deviceId}, SK = REGISTRATION (attribute_not_exists) + device + state + tag links + fleet",
    budget: RequestBudget::Fixed(2),
    max_read_units: Some(1.0),
    route: Some("POST /me/devices"),
    implemented_by: implemented_by!(register_device),
};

/// AP-07: registers a device for `user`: one consistent GetItem of the owner's fleet item (to
/// place the device's live state), then one TransactWriteItems (registration, device item,
/// live state, tag links, and the fleet item counting it). The registration's
/// `attribute_not_exists` condition makes the id unique across the whole table: a taken id,
/// by anyone, is [`FleetError::DeviceIdTaken`]. The fleet item's condition catches another
/// registration that grew the fleet in between: then the placement is read again.
pub async fn register_device(
    table: &FleetTable,
    user: &UserId,
    registration: DeviceRegistration,
) -> Result<RegisteredDevice, FleetError> {
    let token = DeviceToken::generate()?;
    // A release this request saw: its attempts from then on are made after it.
    let mut seen_release: Option<Timestamp> = None;
    for _ in 0..PLACEMENT_ATTEMPTS {
        let fleet = read_fleet(table, user).await?;
        // Timed per attempt: a deletion's released registration admits only attempts made
        // after it. A live request that met a release newer than itself (another Lambda's
        // clock a little ahead) times its next attempt after that release.
        let at = match seen_release {
            Some(released) => Timestamp::now().max(released.plus_millis(1)),
            None => Timestamp::now(),
        };
        let attempt = RegistrationAttempt::new(table, user, &registration, &token, fleet, at)?;
        match transact(table, attempt.actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => {
                return Ok(RegisteredDevice {
                    device: attempt.device.into(),
                    token,
                })
            }
            Transaction::Cancelled(reasons) => {
                // Released after this attempt's time (by a deletion racing it): a live
                // request, so it tries again with a later time.
                if let Some(released) = released_at(&reasons, RegistrationSlot::Registration) {
                    seen_release = Some(released);
                    continue;
                }
                if condition_failed(&reasons, RegistrationSlot::Registration)
                    || condition_failed(&reasons, RegistrationSlot::Device)
                {
                    return Err(FleetError::DeviceIdTaken(
                        registration.device_id.to_string(),
                    ));
                }
                // The fleet grew in between: place again.
                if condition_failed(&reasons, RegistrationSlot::FleetCount) {
                    continue;
                }
                return Err(FleetError::internal(format!(
                    "registration cancelled: {reasons:?}"
                )));
            }
        }
    }
    Err(crate::store::dynamo::throttled())
}

/// One attempt of AP-07: the transaction registering a device, built at one moment (its
/// `createdAt`) from the owner's fleet as read just before.
pub struct RegistrationAttempt {
    /// The device item it creates.
    pub device: DeviceItem,
    /// The transaction's actions: those of [`RegistrationSlot`] in order, then tag links.
    pub actions: Vec<TransactWriteItem>,
}

/// The actions of a registration's transaction, named by their place in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationSlot {
    /// Claims the device id (fails on a taken id or a newer release).
    Registration,
    /// Puts the device item (fails if the owner has it already).
    Device,
    /// Puts the live state.
    State,
    /// Counts the device on the fleet item (fails if the placement changed since it was read).
    FleetCount,
}

impl TransactionSlot for RegistrationSlot {
    fn position(self) -> usize {
        self as usize
    }
}

impl RegistrationAttempt {
    /// The attempt to register `registration` for `user` with `token` at `now`, placed by
    /// `fleet`.
    pub fn new(
        table: &FleetTable,
        user: &UserId,
        registration: &DeviceRegistration,
        token: &DeviceToken,
        fleet: FleetSize,
        now: Timestamp,
    ) -> Result<Self, FleetError> {
        let shards = fleet.partitions_after_one_more(table.config.devices_per_partition);
        let device = new_device(
            user,
            registration,
            placement(&registration.device_id, shards),
            now,
        );
        let registration_item = RegistrationItem {
            device_id: registration.device_id.clone(),
            user_id: user.clone(),
            token_sha256: token.sha256_hex(),
            device_name: registration.name.clone(),
            device_type: registration.device_type.clone(),
            partition: device.partition,
            created_at: now,
            previous_token_sha256: None,
            previous_token_until: None,
            revoked_at: None,
        };
        // In the order of `RegistrationSlot`.
        let mut actions = vec![
            claim_registration(table, &registration_item)?,
            put(table, &device, Some(Condition::absent(PK)))?,
            put(table, &new_state(&device), None)?,
            count_registration(table, user, fleet, shards)?,
        ];
        for tag in &device.tags {
            actions.push(put(table, &tag_link(&device, tag), None)?);
        }
        Ok(Self { device, actions })
    }
}

/// The transaction action claiming the device id: it puts `registration` where no
/// registration is, or where a deletion released one before this attempt began
/// (`createdAt`). An attempt that lands later than the deletion of the device it was
/// cancelled by (delayed in the network past its client's retries) fails, so it cannot bring
/// the deleted device back.
fn claim_registration(
    table: &FleetTable,
    registration: &RegistrationItem,
) -> Result<TransactWriteItem, FleetError> {
    let released_before = released().and(Condition::below(
        ReleasedRegistrationItem::RELEASED_AT,
        string_value(registration.created_at.to_string()),
    ));
    let put = registration_key_put(
        table,
        registration,
        Condition::absent(PK).or(released_before),
    )?
    .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    .build()
    .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// A put of `item` at a device id's registration key under `condition`.
fn registration_key_put(
    table: &FleetTable,
    item: &impl Entity,
    condition: Condition,
) -> Result<aws_sdk_dynamodb::types::builders::PutBuilder, FleetError> {
    Ok(Put::builder()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .expressions(Expressions::condition(condition)))
}

/// The item at a registration key is a released registration.
fn released() -> Condition {
    let (attribute, value) = EntityType::ReleasedRegistration.assignment();
    Condition::equals(attribute, value)
}

/// When the action at `slot` failed on a released registration (released after the
/// attempt's time): the release time.
fn released_at(reasons: &[CancellationReason], slot: RegistrationSlot) -> Option<Timestamp> {
    let item = reasons.get(slot.position())?.item()?;
    if EntityType::of(item) != Some(EntityType::ReleasedRegistration) {
        return None;
    }
    ReleasedRegistrationItem::from_item(item.clone())
        .ok()
        .map(|released| released.released_at)
}

/// AP-03, implemented by [`get_device`].
pub const GET_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::GetDevice,
    description: "one device, with its live state (and its twin's documents once it has one)",
    frequency: Frequency::Critical,
    operations: &[Operation::Query, Operation::GetItem],
    index: None,
    key_condition:
        "PK = USER#{userId} AND SK BETWEEN DEVICE#{deviceId} AND DEVICE#{deviceId}#STATE; with a twin, PK = USER#{userId}#DEVICE#{deviceId} AND SK begins_with TWIN#",
    budget: RequestBudget::FixedPlusPlacedStateAndTwin(1),
    max_read_units: Some(1.0),
    route: Some("GET /me/devices/{deviceId}"),
    implemented_by: implemented_by!(get_device),
};

/// AP-03: one device of `user` with its live state, or `None` (also for another user's device
/// or one being deleted). One eventually consistent Query of the device item and the state
/// beside it; a device of a large fleet whose state is placed on another partition takes one
/// GetItem more.
pub async fn get_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<Device>, FleetError> {
    let key = ItemKey::device(user, device).primary_key();
    let (items, _) = crate::store::dynamo::query(crate::store::dynamo::key_range(
        table,
        key.pk,
        key.sk,
        state_sk(device),
        Expressions::builder(),
    ))
    .await?;
    let mut found = None;
    let mut state = None;
    for item in items {
        match EntityType::of(&item) {
            Some(EntityType::Device) => found = Some(DeviceItem::from_item(item)?),
            Some(EntityType::DeviceState) => state = Some(DeviceStateItem::from_item(item)?),
            other => {
                return Err(FleetError::internal(format!(
                    "unexpected {other:?} item in a device's range"
                )))
            }
        }
    }
    let Some(item) = found.filter(|d| d.deleting_at.is_none()) else {
        return Ok(None);
    };
    if state.is_none() && item.partition > 0 {
        let out = table
            .client
            .get_item()
            .table_name(table.name())
            .set_key(Some(state_key(&item).attributes()))
            .send()
            .await
            .map_err(sdk_error)?;
        state = out.item.map(DeviceStateItem::from_item).transpose()?;
    }
    let id = device;
    let registered = item.created_at;
    let mut device = Device::with_state(item, state.as_ref());
    // A device with a twin: its documents, one Query more.
    if let Some(view) = device.twin.take() {
        device.twin = Some(twin_documents(table, user, id, registered, view).await?);
    }
    Ok(Some(device))
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
        actions.push(delete(table, tag_link(device, stale).item_key())?);
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

/// The actions of a deletion's transaction whose failed condition means something: the
/// device first, then the registration's release, the live state, the fleet count, the
/// purge marker, the twin's documents, the tag links and the clears of open alarms.
#[derive(Clone, Copy, Debug)]
enum DeletionSlot {
    /// Deletes the marked device; fails when another request completed the deletion.
    Device = 0,
    /// Deletes the live state as it was read; fails when a batch (or the offline detector)
    /// changed it since, which may have raised an alarm the clears do not name.
    State = 2,
}

/// Most actions in one TransactWriteItems (DynamoDB's limit).
const MAX_TRANSACTION_ACTIONS: usize = 100;

/// Attempts of a deletion against batches that keep changing the live state.
const DELETION_ATTEMPTS: u32 = 5;

// A deletion fits one transaction in the worst case: the 5 fixed actions, 2 twin documents,
// the links of old and new tags during a sync, and a clear and a pointer delete per open
// alarm (one per rule and offline). A device with more open alarms still works: see
// `delete_device`.
const _: () = assert!(
    7 + 2 * crate::model::ids::MAX_TAGS_PER_DEVICE
        + 2 * (crate::model::alarm::MAX_RULES_PER_OWNER + 1)
        <= MAX_TRANSACTION_ACTIONS
);

impl TransactionSlot for DeletionSlot {
    fn position(self) -> usize {
        self as usize
    }
}

/// Marks `user`'s device as being deleted (keeping an earlier mark) and returns it as it is
/// now; [`FleetError::NotFound`] if there is no such device.
async fn mark_deleting(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<DeviceItem, FleetError> {
    let now = Timestamp::now().to_string();
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::device(user, device).attributes()))
        // A device registered after this request was made is not the one it means to delete:
        // a request that lands late (after its own retry, a re-registration and all) must not
        // mark the new device.
        .expressions(Expressions::write(
            UpdateExpression::new()
                .set_if_absent(DeviceItem::DELETING_AT, string_value(now.clone())),
            Some(Condition::exists(PK).and(Condition::at_most(
                DeviceItem::CREATED_AT,
                string_value(now),
            ))),
        ))
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

/// The transaction deleting the marked device `item`, its registration, its live state as
/// read (`state`), its twin's documents and its tag links.
fn deletion(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    item: &DeviceItem,
    state: Option<&DeviceStateItem>,
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let device_delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::device(user, device).attributes()))
        .expressions(Expressions::condition(Condition::exists(
            DeviceItem::DELETING_AT,
        )))
        .build()
        .map_err(FleetError::internal)?;
    // The registration is replaced by its released fence. One that is already gone (or
    // already released) must not block the clean-up; one that belongs to someone else must
    // never be touched.
    let released = ReleasedRegistrationItem::new(device.clone(), Timestamp::now());
    let registration_release = registration_key_put(
        table,
        &released,
        Condition::absent(PK)
            .or(Condition::equals(
                RegistrationItem::USER_ID,
                string_value(user.as_str()),
            ))
            .or(self::released()),
    )?
    .build()
    .map_err(FleetError::internal)?;
    let mut actions = vec![
        TransactWriteItem::builder().delete(device_delete).build(),
        TransactWriteItem::builder()
            .put(registration_release)
            .build(),
        state_delete(table, item, state)?,
        count_deletion(table, user)?,
        // The daily run finds the device's events from this marker, not by reading history.
        put(
            table,
            &PurgeMarkerItem {
                user_id: user.clone(),
                device_id: device.clone(),
                deleted_at: item.deleting_at.unwrap_or_else(Timestamp::now),
            },
            None,
        )?,
        // The twin's documents go with the device: a device registered again under this id
        // must not be shown (or measured against) the old one's configuration.
        delete(
            table,
            ItemKey::Desired {
                user: user.clone(),
                device: device.clone(),
            },
        )?,
        delete(
            table,
            ItemKey::Reported {
                user: user.clone(),
                device: device.clone(),
            },
        )?,
    ];
    for tag in item
        .linked_tags
        .iter()
        .chain(item.tags.iter())
        .collect::<std::collections::BTreeSet<_>>()
    {
        actions.push(delete(
            table,
            ItemKey::TagLink {
                user: user.clone(),
                tag: tag.clone(),
                device: device.clone(),
            },
        )?);
    }
    Ok(actions)
}

/// The delete of the live state as it was read: unchanged since (`ingestSeq`), or still
/// absent when none was read.
fn state_delete(
    table: &FleetTable,
    item: &DeviceItem,
    state: Option<&DeviceStateItem>,
) -> Result<TransactWriteItem, FleetError> {
    let condition = match state {
        Some(state) => Condition::exists(PK).and(Condition::equals(
            DeviceStateItem::INGEST_SEQ,
            number_value(state.ingest_seq),
        )),
        None => Condition::absent(PK),
    };
    let delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(state_key(item).attributes()))
        .expressions(Expressions::condition(condition))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().delete(delete).build())
}

/// The live state of `item`, read consistently (the deletion is conditioned on it).
async fn read_state(
    table: &FleetTable,
    item: &DeviceItem,
) -> Result<Option<DeviceStateItem>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(state_key(item).attributes()))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    out.item.map(DeviceStateItem::from_item).transpose()
}

/// AP-08, implemented by [`delete_device`].
pub const DELETE_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::DeleteDevice,
    description:
        "delete a device and free its id (a purge marker: the next daily runs purge its events)",
    frequency: Frequency::Important,
    operations: &[
        Operation::UpdateItem,
        Operation::GetItem,
        Operation::TransactWriteItems,
    ],
    index: None,
    key_condition:
        "PK = USER#{userId}, SK = DEVICE#{deviceId}; its live state; PK = DEVICE#{deviceId}, SK = REGISTRATION",
    budget: RequestBudget::Fixed(3),
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
///
/// The device's open alarms clear in the same transaction (issue 30 item 4: nothing would
/// clear them afterwards). Which alarms are open is what its live state says, read
/// consistently just before (one GetItem more); the state's delete is conditioned on it being
/// unchanged, so an alarm a batch raised in between is not left behind: the deletion reads
/// again. Past DynamoDB's 100 actions (never with today's limits, checked above), the
/// alarms clear in transactions of their own first.
pub async fn delete_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<(), FleetError> {
    let item = mark_deleting(table, user, device).await?;
    for _ in 0..DELETION_ATTEMPTS {
        let state = read_state(table, &item).await?;
        let now = Timestamp::now();
        let mut actions = deletion(table, user, device, &item, state.as_ref())?;
        let clears = match &state {
            Some(state) => crate::ops::alarms::withdraw::device_clears(table, state, now)?,
            None => Vec::new(),
        };
        if let (Some(state), true) = (
            &state,
            actions.len() + clears.len() > MAX_TRANSACTION_ACTIONS,
        ) {
            let some = crate::ops::alarms::withdraw::partial_device_clears(
                table,
                state,
                now,
                MAX_TRANSACTION_ACTIONS,
            )?;
            transact(table, some, Retry::attempts(MAX_ATTEMPTS)).await?;
            continue;
        }
        actions.extend(clears);
        match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => return Ok(()),
            // A concurrent DELETE of the same device completed first.
            Transaction::Cancelled(reasons) if condition_failed(&reasons, DeletionSlot::Device) => {
                return Ok(())
            }
            // A batch changed the live state since it was read: read it again.
            Transaction::Cancelled(reasons) if condition_failed(&reasons, DeletionSlot::State) => {
                continue
            }
            Transaction::Cancelled(reasons) => {
                return Err(FleetError::internal(format!(
                    "deletion cancelled: {reasons:?}"
                )))
            }
        }
    }
    Err(crate::store::dynamo::throttled())
}
