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

use aws_sdk_dynamodb::types::{
    Delete, DeleteRequest, Put, PutRequest, TransactWriteItem, Update, WriteRequest,
};
use serde::Serialize;

use super::fleet::{count_deletion, count_registration, read_fleet};
use super::view::Device;
use super::{put, state_key, tag_link};
use crate::model::entities::alarm::{alarm_pk, AlarmItem};
use crate::model::entities::command::{CommandItem, COMMAND_PREFIX};
use crate::model::entities::desired_state::DesiredStateItem;
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_move::{DeviceMoveItem, MovePhase, RUNNING_MOVES_PK};
use crate::model::entities::device_state::{placement, DeviceStateItem};
use crate::model::entities::event::{EventItem, EVENT_PREFIX};
use crate::model::entities::open_alarm::OpenAlarmItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::reported_state::ReportedStateItem;
use crate::model::entities::series::{SeriesItem, SERIES_PREFIX};
use crate::model::entities::type_mark::TypeMarkItem;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::{event_pk, PrimaryKey};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, KEY_ATTRIBUTES, PK, SK};
use crate::model::timestamp::Timestamp;
use crate::model::token::DeviceToken;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    number_value, query, read_consistent, string_value, transact, whole_partition, write_all,
    Transaction, BATCH_WRITE_SIZE,
};
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, FleetTable, TransactionSlot, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// How long a move request works (its live transaction and then history) before it answers
/// (the rest is the scheduled worker's): at most half the device-updates function's timeout
/// (10 s in template.yaml; `tests/it/device_move.rs` reads both), so a large history never
/// has the function killed after the live transaction committed.
pub const MOVE_REQUEST_BUDGET: Duration = Duration::from_secs(4);

/// What a run's lease adds to its own deadline, so another run never takes a move over
/// while this one may still be writing.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// Items read from the source per Query: a page copies in well under a second, so a run
/// stops close to its deadline.
const PAGE_ITEMS: i32 = 1_000;

/// BatchWriteItem calls in flight at once while copying events.
const CONCURRENT_BATCHES: usize = 8;

/// Items copied between two looks at the deadline: one round of [`CONCURRENT_BATCHES`].
const CHUNK_ITEMS: usize = CONCURRENT_BATCHES * BATCH_WRITE_SIZE;

/// Items per transaction when copying what can change under the copy (each is a put at the
/// target and a delete at the source: two of DynamoDB's 100 actions).
const ITEMS_PER_TRANSACTION: usize = 50;

/// Attempts of the live transaction against concurrent writers (a batch changing the live
/// state, a PATCH, a registration growing the target fleet).
const MOVE_ATTEMPTS: u32 = 5;

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

/// The source partition and sort-key condition of `phase` of the move of `marker`.
fn phase_range(marker: &DeviceMoveItem) -> (String, Option<Condition>) {
    let from = &marker.from_user_id;
    let device = &marker.device_id;
    match marker.phase {
        MovePhase::Alarms => (alarm_pk(from, device), None),
        MovePhase::Commands => (
            event_pk(from, device),
            Some(Condition::begins_with(SK, string_value(COMMAND_PREFIX))),
        ),
        MovePhase::Summaries => (
            event_pk(from, device),
            Some(Condition::at_least(SK, string_value(SERIES_PREFIX))),
        ),
        MovePhase::Events => (
            event_pk(from, device),
            Some(Condition::begins_with(SK, string_value(EVENT_PREFIX))),
        ),
    }
}

/// Copies the history of the move of `marker` to its new owner until `until` or the end,
/// recording its progress on `marker`. Returns whether every item is copied.
///
/// Safe to repeat and to stop anywhere: events and type marks never change once written, so
/// they are put at the target, then deleted at the source (a run that stops between the two
/// puts them again); what can change under the copy (alarms, commands, summaries, twin
/// documents) moves in transactions, each item put at the target only where the new owner
/// has not written it since the move, and deleted at the source in the same transaction.
pub async fn copy_history(
    table: &FleetTable,
    marker: &mut DeviceMoveItem,
    until: Instant,
) -> Result<bool, FleetError> {
    loop {
        if Instant::now() >= until {
            return Ok(false);
        }
        let (pk, sort) = phase_range(marker);
        let mut key = Condition::equals(PK, string_value(pk.clone()));
        if let Some(sort) = sort {
            key = key.and(sort);
        }
        let start = marker.resume_after.as_ref().map(|sk| {
            PrimaryKey {
                pk: pk.clone(),
                sk: sk.clone(),
            }
            .attributes()
        });
        let request = table
            .client
            .query()
            .table_name(table.name())
            .expressions(Expressions::builder().key_condition(key).build())
            .consistent_read(true)
            .limit(PAGE_ITEMS)
            .set_exclusive_start_key(start);
        let (items, next) = query(request).await?;
        // A page goes in chunks, so a run stops close to its deadline.
        for chunk in items.chunks(CHUNK_ITEMS) {
            if Instant::now() >= until {
                return Ok(false);
            }
            if marker.cancelled_at.is_some() {
                delete_source(table, chunk).await?;
            } else if marker.phase == MovePhase::Events {
                copy_events(table, marker, chunk).await?;
            } else {
                copy_changing(table, marker, chunk).await?;
            }
            if marker.cancelled_at.is_none() {
                marker.items_moved += chunk.len() as u64;
            }
            marker.resume_after = chunk.last().and_then(PrimaryKey::of).map(|k| k.sk);
        }
        if next.is_none() {
            match marker.phase.next() {
                Some(phase) => {
                    marker.phase = phase;
                    marker.resume_after = None;
                }
                None => return Ok(true),
            }
        }
    }
}

/// The item `item` of the move of `marker` as its new owner stores it: keys, index keys and
/// owner from its entity with the owner (and, for an alarm, the placement) changed; every other
/// attribute as it was.
fn rehomed(table: &FleetTable, marker: &DeviceMoveItem, item: &Item) -> Result<Item, FleetError> {
    let to = &marker.to_user_id;
    let shards = &table.config.shards;
    fn change<E: Entity>(item: &Item, f: impl FnOnce(&mut E)) -> Result<E, FleetError> {
        let mut entity = E::from_item(item.clone())?;
        f(&mut entity);
        Ok(entity)
    }
    let moved = match EntityType::of(item) {
        Some(EntityType::Event) => {
            change(item, |e: &mut EventItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::TypeMark) => {
            change(item, |e: &mut TypeMarkItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::Series) => {
            change(item, |e: &mut SeriesItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::DesiredState) => {
            change(item, |e: &mut DesiredStateItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::ReportedState) => {
            change(item, |e: &mut ReportedStateItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::Command) => {
            change(item, |e: &mut CommandItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::Alarm) => change(item, |e: &mut AlarmItem| {
            e.user_id = to.clone();
            e.partition = marker.partition;
        })?
        .to_item(shards)?,
        Some(EntityType::OpenAlarm) => {
            change(item, |e: &mut OpenAlarmItem| e.user_id = to.clone())?.to_item(shards)?
        }
        other => {
            return Err(FleetError::internal(format!(
                "a {:?} item in a moved device's history",
                other.map(|t| t.as_str())
            )))
        }
    };
    let mut out = item.clone();
    for attribute in KEY_ATTRIBUTES {
        out.remove(attribute.name());
    }
    out.extend(moved);
    Ok(out)
}

/// The key attributes of a stored item.
fn key_of(item: &Item) -> Result<Item, FleetError> {
    PrimaryKey::of(item)
        .map(|k| k.attributes())
        .ok_or_else(|| FleetError::internal("an item without PK and SK"))
}

/// Events and type marks (never changed once written): put at the target in concurrent
/// BatchWriteItems, then deleted at the source the same way.
async fn copy_events(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    items: &[Item],
) -> Result<(), FleetError> {
    let mut puts = Vec::with_capacity(items.len());
    let mut deletes = Vec::with_capacity(items.len());
    for item in items {
        let put = PutRequest::builder()
            .set_item(Some(rehomed(table, marker, item)?))
            .build()
            .map_err(FleetError::internal)?;
        puts.push(WriteRequest::builder().put_request(put).build());
        let delete = DeleteRequest::builder()
            .set_key(Some(key_of(item)?))
            .build()
            .map_err(FleetError::internal)?;
        deletes.push(WriteRequest::builder().delete_request(delete).build());
    }
    write_batches(table, puts).await?;
    write_batches(table, deletes).await
}

/// Deletes `items` at the source of a cancelled move (the device was deleted at its new
/// owner): what the copy had not reached yet goes with the deleted device.
async fn delete_source(table: &FleetTable, items: &[Item]) -> Result<(), FleetError> {
    let mut deletes = Vec::with_capacity(items.len());
    for item in items {
        let delete = DeleteRequest::builder()
            .set_key(Some(key_of(item)?))
            .build()
            .map_err(FleetError::internal)?;
        deletes.push(WriteRequest::builder().delete_request(delete).build());
    }
    write_batches(table, deletes).await
}

/// Writes `requests` in BatchWriteItems of 25, [`CONCURRENT_BATCHES`] at a time (on this task,
/// so the request meter sees them); [`crate::store::dynamo::throttled`] if any is left.
async fn write_batches(table: &FleetTable, requests: Vec<WriteRequest>) -> Result<(), FleetError> {
    let batches: Vec<Vec<WriteRequest>> = requests
        .chunks(BATCH_WRITE_SIZE)
        .map(<[WriteRequest]>::to_vec)
        .collect();
    for group in batches.chunks(CONCURRENT_BATCHES) {
        let results = futures::future::join_all(group.iter().cloned().map(|batch| async move {
            let mut retry = Retry::attempts(MAX_ATTEMPTS);
            write_all(table, batch, &mut retry).await
        }))
        .await;
        for left in results {
            if !left?.is_empty() {
                return Err(crate::store::dynamo::throttled());
            }
        }
    }
    Ok(())
}

/// Items that can change under the copy, in transactions of [`ITEMS_PER_TRANSACTION`]: each
/// put at the target where the new owner has no such item yet and deleted at the source.
/// An item the new owner wrote since the move is newer than the copy and is kept; a summary
/// item gets the copy's buckets the new owner's lacks ([`merge_summary`]).
///
/// Summary items are written by ingest only in transactions conditioned on the live state's
/// `ingestSeq`, which reads them first (issue 38): a copy that wrote them behind its back
/// could be overwritten by an attempt that read them before. So a transaction that copies
/// summary items also moves the new owner's `ingestSeq` ([`fence_summaries`]): an ingest
/// attempt that read before the copy fails its condition and reads again (finding the copy).
async fn copy_changing(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    items: &[Item],
) -> Result<(), FleetError> {
    let per_transaction = if marker.phase == MovePhase::Summaries {
        ITEMS_PER_TRANSACTION - 1
    } else {
        ITEMS_PER_TRANSACTION
    };
    for chunk in items.chunks(per_transaction) {
        let mut pending: Vec<&Item> = chunk.iter().collect();
        let mut fenced = marker.phase == MovePhase::Summaries;
        while !pending.is_empty() {
            let mut actions = Vec::with_capacity(2 * pending.len() + 1);
            for item in &pending {
                let put = Put::builder()
                    .table_name(table.name())
                    .set_item(Some(rehomed(table, marker, item)?))
                    .expressions(Expressions::condition(Condition::absent(PK)))
                    .build()
                    .map_err(FleetError::internal)?;
                actions.push(TransactWriteItem::builder().put(put).build());
                let delete = Delete::builder()
                    .table_name(table.name())
                    .set_key(Some(key_of(item)?))
                    .build()
                    .map_err(FleetError::internal)?;
                actions.push(TransactWriteItem::builder().delete(delete).build());
            }
            if fenced {
                actions.push(fence_summaries(table, marker)?);
            }
            match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
                Transaction::Committed => break,
                Transaction::Cancelled(reasons) => {
                    if fenced
                        && reasons.get(2 * pending.len()).and_then(|r| r.code())
                            == Some("ConditionalCheckFailed")
                    {
                        // No live state at the new owner: the device was deleted there (its
                        // move is being cancelled) and nobody ingests for it.
                        fenced = false;
                        continue;
                    }
                    let taken: Vec<usize> = (0..pending.len())
                        .filter(|i| {
                            reasons.get(2 * i).and_then(|r| r.code())
                                == Some("ConditionalCheckFailed")
                        })
                        .collect();
                    if taken.is_empty() {
                        return Err(FleetError::internal(format!(
                            "history copy cancelled: {reasons:?}"
                        )));
                    }
                    for &i in &taken {
                        merge_taken(table, marker, pending[i]).await?;
                    }
                    pending = pending
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| !taken.contains(i))
                        .map(|(_, item)| item)
                        .collect();
                }
            }
        }
    }
    Ok(())
}

/// The update that moves the new owner's live-state `ingestSeq` on, where that state exists:
/// what serializes a copy of summary items with ingest's writes of them.
fn fence_summaries(
    table: &FleetTable,
    marker: &DeviceMoveItem,
) -> Result<TransactWriteItem, FleetError> {
    let state = ItemKey::DeviceState {
        user: marker.to_user_id.clone(),
        partition: marker.partition,
        device: marker.device_id.clone(),
    };
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(state.attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new().increment(DeviceStateItem::INGEST_SEQ, number_value(1)),
            Some(Condition::exists(PK)),
        ))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// An item of the source that the new owner wrote too since the move: a summary item is
/// merged ([`merge_summary`]), anything else kept as the new owner wrote it; the source's goes.
async fn merge_taken(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    item: &Item,
) -> Result<(), FleetError> {
    if EntityType::of(item) == Some(EntityType::Series) {
        return merge_summary(table, marker, item).await;
    }
    table
        .client
        .delete_item()
        .table_name(table.name())
        .set_key(Some(key_of(item)?))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(())
}

/// A summary item both owners have: the new owner's buckets with the ones only the copy has
/// added (the new owner's are newer where both have one), written on the condition that the
/// new owner's item is unchanged since read, with the source's delete, in one transaction.
async fn merge_summary(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    item: &Item,
) -> Result<(), FleetError> {
    let source = SeriesItem::from_item(item.clone())?;
    let target_key = SeriesItem {
        user_id: marker.to_user_id.clone(),
        ..source.clone()
    }
    .item_key();
    // Written with the new owner's `ingestSeq` moved on, as a copy is (see [`copy_changing`]).
    let mut fenced = true;
    for _ in 0..MOVE_ATTEMPTS {
        let out = table
            .client
            .get_item()
            .table_name(table.name())
            .set_key(Some(target_key.attributes()))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let (mut merged, unchanged) = match out.item {
            Some(stored) => {
                let buckets = stored.get(SeriesItem::BUCKETS.name()).cloned();
                let target = SeriesItem::from_item(stored)?;
                let condition = match buckets {
                    Some(b) => Condition::equals(SeriesItem::BUCKETS, b),
                    None => Condition::absent(SeriesItem::BUCKETS),
                };
                (target, condition)
            }
            None => (
                SeriesItem {
                    user_id: marker.to_user_id.clone(),
                    ..source.clone()
                },
                Condition::absent(PK),
            ),
        };
        // Ingest builds a summary item the new owner lacks from the source's during a move
        // (`ops::ingest`'s fallback read), so the new owner's holds the source's buckets; a
        // bucket only the source has comes with its reading identities.
        for (start, bucket) in &source.buckets.0 {
            if !merged.buckets.0.contains_key(start) {
                merged.buckets.0.insert(*start, bucket.clone());
                if let Some(ids) = source.ids.0.get(start) {
                    merged.ids.0.insert(*start, ids.clone());
                }
            }
        }
        merged.ttl = merged.ttl.max(source.ttl);
        let put = Put::builder()
            .table_name(table.name())
            .set_item(Some(merged.to_item(&table.config.shards)?))
            .expressions(Expressions::condition(unchanged))
            .build()
            .map_err(FleetError::internal)?;
        let delete = Delete::builder()
            .table_name(table.name())
            .set_key(Some(key_of(item)?))
            .build()
            .map_err(FleetError::internal)?;
        let mut actions = vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().delete(delete).build(),
        ];
        if fenced {
            actions.push(fence_summaries(table, marker)?);
        }
        match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => return Ok(()),
            // No live state at the new owner (deleted there): nothing to fence.
            Transaction::Cancelled(reasons)
                if fenced
                    && reasons.get(2).and_then(|r| r.code()) == Some("ConditionalCheckFailed") =>
            {
                fenced = false
            }
            Transaction::Cancelled(_) => {}
        }
    }
    Err(crate::store::dynamo::throttled())
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
