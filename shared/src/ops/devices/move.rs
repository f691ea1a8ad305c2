//! AP-M1: moving a device from one owner key to another (a person's fleet and an
//! organization's, `org:{orgId}`): its live items in one transaction, its token unchanged, and
//! its history copied in bounded runs that survive a Lambda's timeout (docs/design.md,
//! "Moving a device").
//!
//! Every item of a device is keyed by its owner, so a move rewrites them. The live items
//! (device, live state, tag links, the registration's owner and placement, both fleet counts)
//! move at once: after the transaction the device is the new owner's for every reader and for
//! ingestion. The history (the event partition `USER#{owner}#DEVICE#{deviceId}` and the alarm
//! partition `ALARM#{owner}#{deviceId}`) follows, item by item, from a move marker
//! (`MOVES#RUNNING` / `{deviceId}`, [`DeviceMoveItem`]): the request copies what fits in
//! [`MOVE_REQUEST_BUDGET`], the scheduled rollout worker the rest ([`continue_moves`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};
use serde::Serialize;

use super::fleet::{count_deletion, count_registration, read_fleet};
use super::view::Device;
use super::{put, state_key, tag_link};
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_move::{DeviceMoveItem, MovePhase, RUNNING_MOVES_PK};
use crate::model::entities::device_state::{placement, DeviceStateItem};
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{DeviceId, UserId};
use crate::model::pattern_id::PatternId;
use crate::model::schema::PK;
use crate::model::timestamp::Timestamp;
use crate::model::token::DeviceToken;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    number_value, read_consistent, string_value, transact, whole_partition, Transaction,
};
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, FleetTable, TransactionSlot, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

mod history;
pub use history::copy_history;
use history::MOVE_ATTEMPTS;

/// How long a move request works (its live transaction and then history) before it answers
/// (the rest is the scheduled worker's): at most half the device-updates function's timeout
/// (10 s in template.yaml; `tests/it/device_move.rs` reads both), so a large history never
/// has the function killed after the live transaction committed.
pub const MOVE_REQUEST_BUDGET: Duration = Duration::from_secs(4);

/// What a run's lease adds to its own deadline, so another run never takes a move over
/// while this one may still be writing.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// The answer to a move: the device as it is now, at its new owner, how far its history
/// has come, and its new token when the move rotated it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedDevice {
    /// The device at its new owner.
    pub device: Device,
    /// Its history's progress.
    pub history: MoveHistory,
    /// The device's new token, when the move rotated it (`"rotateToken": true`): shown once,
    /// only its digest is stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Until when the replaced token is still accepted (the overlap a rotation gives), when
    /// the move rotated the token and the overlap is not 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_token_valid_until: Option<String>,
}

/// What a move is asked to do besides moving.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveOptions {
    /// Give the device a new token in the move's transaction (`"rotateToken": true`): the
    /// previous owner knows the current one. The current one keeps working for the overlap a
    /// rotation gives (`TOKEN_OVERLAP_SECONDS`), so the device can be given the new one.
    pub rotate_token: bool,
}

/// How far a moved device's history has been copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveHistory {
    /// `moved` when every item is at the new owner; `moving` while the worker continues;
    /// `cancelled` when the device was deleted before its history was all copied.
    pub status: HistoryStatus,
    /// Items copied so far (events, summaries, twin documents, commands, alarms).
    pub items_moved: u64,
}

/// Whether a moved device's history is all at its new owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HistoryStatus {
    /// Being copied (readers at the new owner see it as it arrives).
    Moving,
    /// All copied.
    Moved,
    /// Stopped: the device was deleted at its new owner while its history was copying; what
    /// had not been copied is deleted at the old owner.
    Cancelled,
}

/// AP-M1, implemented by [`move_device`].
pub const MOVE_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::MoveDevice,
    description: "move a device to another owner (person or organization) with its history, its token unchanged",
    frequency: Frequency::Important,
    operations: &[
        Operation::GetItem,
        Operation::TransactWriteItems,
        Operation::Query,
        Operation::BatchWriteItem,
        Operation::PutItem,
        Operation::DeleteItem,
        Operation::UpdateItem,
    ],
    index: None,
    key_condition: "PK = USER#{from}, SK = DEVICE#{deviceId}; its live state; PK = USER#{to}, SK = FLEET; one transaction; then PK = ALARM#{from}#{deviceId} and PK = USER#{from}#DEVICE#{deviceId} page by page",
    budget: RequestBudget::Fixed(MOVE_FIXED_REQUESTS),
    max_read_units: None,
    // And its `/orgs/{orgId}/...` twin.
    route: Some("POST /me/devices/{deviceId}/move"),
    implemented_by: implemented_by!(move_device),
};

/// AP-M1's requests for a device with a small history (under a page per phase, at most 25
/// events and 50 other items): 3 reads, the transaction, 4 Queries, a put and a delete batch,
/// a transaction for the other items, the new state's `movingFrom` removed and the marker's
/// delete. Beyond that, per 25 events
/// two BatchWriteItems, per 50 other items a transaction, per page of 1,000 a Query
/// (`tests/it/device_move.rs` holds a month of readings to that).
pub const MOVE_FIXED_REQUESTS: u32 = 12;

/// AP-M1: moves `device` from owner key `from` to owner key `to`, its token unchanged, and
/// copies its history for at most [`MOVE_REQUEST_BUDGET`] (the scheduled worker continues an
/// unfinished copy: [`continue_moves`]). [`FleetError::NotFound`] when `from` has no such
/// device; a 409 `move_in_progress` while an earlier move of it is still copying.
pub async fn move_device(
    table: &FleetTable,
    device: &DeviceId,
    from: &UserId,
    to: &UserId,
) -> Result<MovedDevice, FleetError> {
    move_device_with(table, device, from, to, MoveOptions::default()).await
}

/// [`move_device`] with `options` (a token rotated in the move's transaction).
pub async fn move_device_with(
    table: &FleetTable,
    device: &DeviceId,
    from: &UserId,
    to: &UserId,
    options: MoveOptions,
) -> Result<MovedDevice, FleetError> {
    move_device_until_with(
        table,
        device,
        from,
        to,
        options,
        Instant::now() + MOVE_REQUEST_BUDGET,
    )
    .await
}

/// [`move_device`] copying history until `until`.
pub async fn move_device_until(
    table: &FleetTable,
    device: &DeviceId,
    from: &UserId,
    to: &UserId,
    until: Instant,
) -> Result<MovedDevice, FleetError> {
    move_device_until_with(table, device, from, to, MoveOptions::default(), until).await
}

/// [`move_device_with`] copying history until `until`.
pub async fn move_device_until_with(
    table: &FleetTable,
    device: &DeviceId,
    from: &UserId,
    to: &UserId,
    options: MoveOptions,
    until: Instant,
) -> Result<MovedDevice, FleetError> {
    if from == to {
        return Err(ValidationError::new("toOrgId", "the device is already in that fleet").into());
    }
    let token = options
        .rotate_token
        .then(DeviceToken::generate)
        .transpose()?;
    let overlap = i64::from(table.config.token_overlap_seconds);
    let previous_until = Timestamp::now().plus_seconds(overlap);
    let rotation = token.as_ref().map(|t| (t, previous_until));
    let (moved, state, mut marker) =
        move_live_items(table, device, from, to, rotation, until).await?;
    let done = copy_history(table, &mut marker, until).await?;
    save_progress(table, &marker, done).await?;
    Ok(MovedDevice {
        device: Device::with_state(moved, state.as_ref()),
        history: MoveHistory {
            status: if done {
                HistoryStatus::Moved
            } else {
                HistoryStatus::Moving
            },
            items_moved: marker.items_moved,
        },
        token: token.as_ref().map(|t| t.reveal().to_string()),
        previous_token_valid_until: (token.is_some() && overlap > 0)
            .then(|| previous_until.to_string()),
    })
}

/// The actions of the live transaction whose failed condition means something.
#[derive(Clone, Copy, Debug)]
enum MoveSlot {
    /// The device at its old owner, as read (fails on a PATCH, a deletion or another move).
    SourceDevice = 0,
    /// The live state at its old owner, as read (fails when a batch changed it since).
    SourceState = 2,
    /// The target's fleet count (fails when its placement changed since it was read).
    TargetFleet = 6,
    /// The move marker (fails while an earlier move of the device is still copying).
    Marker = 7,
    /// For a move into an organization: it exists and is not being deleted.
    TargetOrganization = 8,
}

impl TransactionSlot for MoveSlot {
    fn position(self) -> usize {
        self as usize
    }
}

// The live transaction fits DynamoDB's 100 actions: 9 fixed, the old links (tags and links of
// an unfinished sync) and the new ones.
const _: () = assert!(9 + 3 * crate::model::ids::MAX_TAGS_PER_DEVICE <= 100);

/// The live move: reads the device and its live state at `from` and `to`'s fleet item, then
/// one transaction moves device, live state (placed on `to`'s partitions), tag links and the
/// registration's owner, counts the device off and on the two fleets and writes the move
/// marker. Returns the moved device, its live state and the marker.
async fn move_live_items(
    table: &FleetTable,
    device: &DeviceId,
    from: &UserId,
    to: &UserId,
    rotation: Option<(&DeviceToken, Timestamp)>,
    until: Instant,
) -> Result<(DeviceItem, Option<DeviceStateItem>, DeviceMoveItem), FleetError> {
    for _ in 0..MOVE_ATTEMPTS {
        let item: DeviceItem = read_consistent(table, &ItemKey::device(from, device))
            .await?
            .filter(|d: &DeviceItem| d.deleting_at.is_none())
            .ok_or(FleetError::NotFound("device"))?;
        let state: Option<DeviceStateItem> = read_consistent(table, &state_key(&item)).await?;
        let fleet = read_fleet(table, to).await?;
        let shards = fleet.partitions_after_one_more(table.config.devices_per_partition);
        let partition = placement(device, shards);
        let now = Timestamp::now();
        let moved = DeviceItem {
            user_id: to.clone(),
            partition,
            linked_tags: item.tags.clone(),
            updated_at: now,
            ..item.clone()
        };
        let moved_state = state.clone().map(|s| DeviceStateItem {
            user_id: to.clone(),
            partition,
            moving_from: Some(from.clone()),
            firmware: None,
            firmware_seq: 0,
            ..s
        });
        let marker = DeviceMoveItem {
            device_id: device.clone(),
            from_user_id: from.clone(),
            to_user_id: to.clone(),
            partition,
            started_at: now,
            phase: MovePhase::Alarms,
            resume_after: None,
            items_moved: 0,
            lease_until: lease_until(until),
            registered_at: Some(item.created_at),
            cancelled_at: None,
        };
        let source_device = Delete::builder()
            .table_name(table.name())
            .set_key(Some(ItemKey::device(from, device).attributes()))
            .expressions(Expressions::condition(
                Condition::equals(DeviceItem::VERSION, number_value(item.version))
                    .and(Condition::equals(
                        DeviceItem::SYNC_VERSION,
                        number_value(item.sync_version),
                    ))
                    .and(Condition::absent(DeviceItem::DELETING_AT)),
            ))
            .build()
            .map_err(FleetError::internal)?;
        let source_state = {
            let condition = match &state {
                Some(state) => Condition::exists(PK).and(Condition::equals(
                    DeviceStateItem::INGEST_SEQ,
                    number_value(state.ingest_seq),
                )),
                None => Condition::absent(PK),
            };
            Delete::builder()
                .table_name(table.name())
                .set_key(Some(state_key(&item).attributes()))
                .expressions(Expressions::condition(condition))
                .build()
                .map_err(FleetError::internal)?
        };
        // In the order of `MoveSlot`.
        let mut actions = vec![
            TransactWriteItem::builder().delete(source_device).build(),
            put(table, &moved, Some(Condition::absent(PK)))?,
            TransactWriteItem::builder().delete(source_state).build(),
            match &moved_state {
                Some(state) => put(table, state, Some(Condition::absent(PK)))?,
                // A device without a live state (never in practice: registration writes it)
                // keeps having none; the slot checks the target has none either.
                None => super::register::condition_check_absent(table, &state_key(&moved))?,
            },
            registration_owner(table, &moved, from, &fleet, rotation)?,
            count_deletion(table, from)?,
            count_registration(table, to, &fleet, shards)?,
            put(table, &marker, Some(Condition::absent(PK)))?,
        ];
        let into_org = super::org_admits_check(table, to)?;
        let checks_org = into_org.is_some();
        actions.extend(into_org);
        let old_links: BTreeSet<_> = item.linked_tags.iter().chain(item.tags.iter()).collect();
        for tag in old_links {
            actions.push(crate::store::dynamo::delete_action(
                table,
                &ItemKey::TagLink {
                    user: from.clone(),
                    tag: tag.clone(),
                    device: device.clone(),
                },
            )?);
        }
        for tag in &moved.tags {
            actions.push(put(table, &tag_link(&moved, tag), None)?);
        }
        match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => return Ok((moved, moved_state, marker)),
            Transaction::Cancelled(reasons) if condition_failed(&reasons, MoveSlot::Marker) => {
                return Err(super::register::move_in_progress())
            }
            Transaction::Cancelled(reasons)
                if checks_org && condition_failed(&reasons, MoveSlot::TargetOrganization) =>
            {
                return Err(FleetError::NotFound("organization"))
            }
            // Changed in between (a PATCH, a batch, a registration growing the target fleet,
            // another move or a deletion): read again; a device gone is a 404 then.
            Transaction::Cancelled(reasons)
                if condition_failed(&reasons, MoveSlot::SourceDevice)
                    || condition_failed(&reasons, MoveSlot::SourceState)
                    || condition_failed(&reasons, MoveSlot::TargetFleet) =>
            {
                continue
            }
            Transaction::Cancelled(reasons) => {
                return Err(FleetError::internal(format!("move cancelled: {reasons:?}")))
            }
        }
    }
    Err(crate::store::dynamo::throttled())
}

/// The registration's new owner and placement (and the new owner's raw retention for the
/// device's type, as registration copies it), on the condition that it still names `from`:
/// of two concurrent moves only one can win. Its token digests are not touched, unless the
/// move rotates the token (`rotation`: the new token and until when the current one is still
/// accepted), which it does as AP-17 does (`ops::credentials::rotate_token`).
fn registration_owner(
    table: &FleetTable,
    moved: &DeviceItem,
    from: &UserId,
    fleet: &super::fleet::FleetSize,
    rotation: Option<(&DeviceToken, Timestamp)>,
) -> Result<TransactWriteItem, FleetError> {
    let mut changes = UpdateExpression::new();
    if let Some((token, previous_until)) = rotation {
        // The replaced digest moves aside for the overlap; after a revocation it is the
        // revoked marker, which matches no token, so nothing revoked comes back.
        changes = changes
            .copy(
                RegistrationItem::PREVIOUS_TOKEN_SHA256,
                RegistrationItem::TOKEN_SHA256,
            )
            .set(
                RegistrationItem::PREVIOUS_TOKEN_UNTIL,
                string_value(previous_until.to_string()),
            )
            .set(
                RegistrationItem::TOKEN_SHA256,
                string_value(token.sha256_hex()),
            )
            .remove(RegistrationItem::REVOKED_AT);
    }
    changes = changes
        .set(
            RegistrationItem::USER_ID,
            string_value(moved.user_id.as_str()),
        )
        .set(RegistrationItem::PARTITION, number_value(moved.partition));
    changes = match fleet.raw_retention.get(&moved.device_type) {
        Some(days) => changes.set(RegistrationItem::RAW_RETENTION_DAYS, number_value(days)),
        None => changes.remove(RegistrationItem::RAW_RETENTION_DAYS),
    };
    changes = match fleet.retention_version {
        Some(version) => changes.set(RegistrationItem::RETENTION_VERSION, number_value(version)),
        None => changes.remove(RegistrationItem::RETENTION_VERSION),
    };
    let (attribute, value) = EntityType::Registration.assignment();
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Registration {
                device: moved.device_id.clone(),
            }
            .attributes(),
        ))
        .expressions(Expressions::write(
            changes,
            Some(
                Condition::equals(RegistrationItem::USER_ID, string_value(from.as_str()))
                    .and(Condition::equals(attribute, value)),
            ),
        ))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// A run's lease: its deadline and a margin.
fn lease_until(until: Instant) -> Timestamp {
    let left = until.saturating_duration_since(Instant::now()) + LEASE_MARGIN;
    Timestamp::now().plus_millis(left.as_millis() as i64)
}

/// Records where the move of `marker` is: its marker deleted when `done`, else rewritten with
/// its progress and its lease released (while it still exists: another run may have finished
/// the move in between).
async fn save_progress(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    done: bool,
) -> Result<(), FleetError> {
    if done {
        // Ingest no longer reads the previous owner's summary items (the state first: a run
        // cut off here finds the marker and does this again).
        let state = ItemKey::DeviceState {
            user: marker.to_user_id.clone(),
            partition: marker.partition,
            device: marker.device_id.clone(),
        };
        let result = table
            .client
            .update_item()
            .table_name(table.name())
            .set_key(Some(state.attributes()))
            .expressions(Expressions::write(
                UpdateExpression::new().remove(DeviceStateItem::MOVING_FROM),
                Some(Condition::exists(PK)),
            ))
            .send()
            .await;
        if let Err(err) = result {
            // No live state there: the device was deleted at its new owner.
            if !matches!(
                err.as_service_error(),
                Some(
                    aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(_)
                )
            ) {
                return Err(sdk_error(err));
            }
        }
        table
            .client
            .delete_item()
            .table_name(table.name())
            .set_key(Some(marker.item_key().attributes()))
            .send()
            .await
            .map_err(sdk_error)?;
        return Ok(());
    }
    let released = DeviceMoveItem {
        lease_until: Timestamp::now(),
        ..marker.clone()
    };
    let result = table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(released.to_item(&table.config.shards)?))
        .expressions(Expressions::condition(Condition::exists(PK)))
        .send()
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(
                    aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(
                        _
                    )
                )
            ) =>
        {
            Ok(())
        }
        Err(err) => Err(sdk_error(err)),
    }
}

/// One move's progress after a run of the scheduled worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveProgress {
    /// The device.
    pub device_id: String,
    /// Its history's progress.
    pub history: MoveHistory,
}

/// The scheduled worker's part (run by the rollout worker beside the rollouts): lists the
/// unfinished moves (one Query of `MOVES#RUNNING`) and continues each one no other run holds,
/// one after the other, until `until`. A run takes a move by moving its lease forward on the
/// condition that it is the lease it read, so two runs never copy the same move at once.
pub async fn continue_moves(
    table: &FleetTable,
    until: Instant,
) -> Result<Vec<MoveProgress>, FleetError> {
    let items = whole_partition(table, RUNNING_MOVES_PK).await?;
    let mut progress = Vec::new();
    for item in items {
        if Instant::now() >= until {
            break;
        }
        let mut marker = DeviceMoveItem::from_item(item)?;
        if marker.lease_until > Timestamp::now() || !take_lease(table, &marker, until).await? {
            continue;
        }
        if marker.cancelled_at.is_none() && !still_the_moved_device(table, &marker).await? {
            // Deleted at its new owner (or its id released and registered again): copying on
            // would hand whatever its old partition holds to an owner it no longer is. What is
            // left there is the deleted device's and goes.
            marker.cancelled_at = Some(Timestamp::now());
            marker.phase = MovePhase::Alarms;
            marker.resume_after = None;
        }
        let done = copy_history(table, &mut marker, until).await?;
        save_progress(table, &marker, done).await?;
        progress.push(MoveProgress {
            device_id: marker.device_id.to_string(),
            history: MoveHistory {
                status: if marker.cancelled_at.is_some() {
                    HistoryStatus::Cancelled
                } else if done {
                    HistoryStatus::Moved
                } else {
                    HistoryStatus::Moving
                },
                items_moved: marker.items_moved,
            },
        });
    }
    Ok(progress)
}

/// Whether the id of the move of `marker` is still registered to the device that moved: its
/// registration names the new owner and has the moved one's `createdAt` (one consistent
/// GetItem per run). A marker from before `registeredAt` was kept checks the owner only.
async fn still_the_moved_device(
    table: &FleetTable,
    marker: &DeviceMoveItem,
) -> Result<bool, FleetError> {
    let key = ItemKey::Registration {
        device: marker.device_id.clone(),
    };
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    let Some(stored) = out.item else {
        return Ok(false);
    };
    if EntityType::of(&stored) != Some(EntityType::Registration) {
        return Ok(false);
    }
    let registration = RegistrationItem::from_item(stored)?;
    Ok(registration.user_id == marker.to_user_id
        && marker
            .registered_at
            .is_none_or(|at| at == registration.created_at))
}

/// Takes the move of `marker` for a run until `until`, if its lease is still the one read.
async fn take_lease(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    until: Instant,
) -> Result<bool, FleetError> {
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(marker.item_key().attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new().set(
                DeviceMoveItem::LEASE_UNTIL,
                string_value(lease_until(until).to_string()),
            ),
            Some(Condition::equals(
                DeviceMoveItem::LEASE_UNTIL,
                string_value(marker.lease_until.to_string()),
            )),
        ))
        .send()
        .await;
    match result {
        Ok(_) => Ok(true),
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(_))
            ) =>
        {
            Ok(false)
        }
        Err(err) => Err(sdk_error(err)),
    }
}

/// The running move of `device`, if its history is still being copied (read consistently).
pub async fn running_move(
    table: &FleetTable,
    device: &DeviceId,
) -> Result<Option<DeviceMoveItem>, FleetError> {
    read_consistent(
        table,
        &ItemKey::DeviceMove {
            device: device.clone(),
        },
    )
    .await
}
