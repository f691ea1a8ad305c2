//! AP-07: registering a device: its id claimed across the table, its item, live state and
//! tag links written, and the owner's fleet counting it, in one transaction.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{
    CancellationReason, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};

use super::fleet::{count_registration, read_fleet, FleetSize};
use super::view::Device;
use super::{put, tag_link};
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::placement;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::released_registration::ReleasedRegistrationItem;
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions};
use crate::model::ids::{DeviceId, DeviceType, Tag, UserId};
use crate::model::offline::OfflineDetection;
use crate::model::pattern_id::PatternId;
use crate::model::schema::PK;
use crate::model::status::DeviceStatus;
use crate::model::timestamp::Timestamp;
use crate::model::token::DeviceToken;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{string_value, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, FleetTable, TransactionSlot, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

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

/// A freshly registered device and its token (returned to the owner once).
#[derive(Debug)]
pub struct RegisteredDevice {
    /// The device.
    pub device: Device,
    /// The bearer token the device authenticates with; only its digest is stored.
    pub token: DeviceToken,
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
        series: Default::default(),
        moving_from: None,
        firmware: None,
        firmware_seq: 0,
        indexed_due: None,
    }
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
                if condition_failed(&reasons, RegistrationSlot::NoRunningMove) {
                    return Err(move_in_progress());
                }
                if user.is_org_fleet() && condition_failed(&reasons, RegistrationSlot::Organization)
                {
                    return Err(FleetError::NotFound("organization"));
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
    /// Checks no move of a device with this id is still copying its history (fails while one
    /// is: the copy reads the old owner's partition of this id, which a new device's events
    /// would join; 409 `move_in_progress`).
    NoRunningMove,
    /// For an organization's fleet only: checks the organization exists and is not being
    /// deleted (fails once its deletion began: 404 `organization not found`).
    Organization,
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
        // The owner's retention for this type, from the fleet item read to place the device.
        let raw_retention_days = fleet.raw_retention.get(&registration.device_type).copied();
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
            raw_retention_days,
            retention_version: fleet.retention_version,
        };
        // In the order of `RegistrationSlot`.
        let mut actions = vec![
            claim_registration(table, &registration_item)?,
            put(table, &device, Some(Condition::absent(PK)))?,
            put(table, &new_state(&device), None)?,
            count_registration(table, user, &fleet, shards)?,
            condition_check_absent(
                table,
                &crate::model::entities::ItemKey::DeviceMove {
                    device: registration.device_id.clone(),
                },
            )?,
        ];
        actions.extend(super::org_admits_check(table, user)?);
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

/// The 409 of a registration (or a second move) while a move of the same device id still
/// copies its history.
pub(crate) fn move_in_progress() -> FleetError {
    FleetError::Conflict {
        code: "move_in_progress",
        message: "a move of this device id is still copying its history: try again in a minute"
            .into(),
    }
}

/// A transaction action that only checks nothing is at `key`.
pub(super) fn condition_check_absent(
    table: &FleetTable,
    key: &crate::model::entities::ItemKey,
) -> Result<TransactWriteItem, FleetError> {
    let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::condition(Condition::absent(PK)))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// A put of `item` at a device id's registration key under `condition`.
pub(super) fn registration_key_put(
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
pub(super) fn released() -> Condition {
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
