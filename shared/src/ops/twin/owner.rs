//! What an owner does with a device's twin: set its desired state (AP-T1), queue a command
//! (AP-T2), list its commands (AP-T3), and read the documents for AP-03.

use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};
use serde::Serialize;
use serde_json::Value;

use super::state::{desired_write, owned_device, read_state, state_key_of, TwinView};
use crate::model::entities::command::{command_sk, CommandItem, COMMAND_PREFIX};
use crate::model::entities::desired_state::{DesiredStateItem, TWIN_PREFIX};
use crate::model::entities::reported_state::ReportedStateItem;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{CommandName, DeviceId, UserId};
use crate::model::keys::event_pk;
use crate::model::pattern_id::PatternId;
use crate::model::schema::PK;
use crate::model::timestamp::Timestamp;
use crate::model::twin::{
    CommandStatus, TwinDocument, TwinVersions, COMMAND_KEPT_SECONDS, MAX_OPEN_COMMANDS,
};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{key_prefix, key_range, number_value, query, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::FleetTable;
use crate::store::with_expressions::WithExpressions;

/// A desired state as the owner reads it back.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredView {
    /// The device.
    pub device_id: String,
    /// Its version (the next `If-Match`).
    pub version: u64,
    /// The document.
    pub desired: Value,
    /// When it was set.
    pub updated_at: String,
}

/// AP-T1, implemented by [`set_desired`].
pub const SET_DESIRED: AccessPattern = AccessPattern {
    id: PatternId::SetDesired,
    description: "set a device's desired state, If-Match on its version",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::TransactWriteItems],
    index: None,
    key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}; then the live state and PK = USER#{userId}#DEVICE#{deviceId}, SK = TWIN#DESIRED together",
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("PUT /me/devices/{deviceId}/desired"),
    implemented_by: implemented_by!(set_desired),
};

/// AP-T1: makes `document` the desired state of `user`'s `device` if its desired version is
/// still `expected` (0: none yet). One consistent GetItem of the device item (its owner, and
/// where its live state is placed), then one transaction: the live state's `desiredVersion`
/// and the document. 404 for another user's or an unknown device, 412 when the version moved
/// (a third request, a GetItem, tells a deleted device's 404 from a 412 after a cancellation).
pub async fn set_desired(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    expected: u64,
    document: TwinDocument,
) -> Result<DesiredView, FleetError> {
    let item = owned_device(table, user, device)
        .await?
        .ok_or(FleetError::NotFound("device"))?;
    let state = state_key_of(&item);
    let (actions, stored) = desired_write(
        table,
        state.clone(),
        user,
        device,
        expected,
        &document,
        Timestamp::now(),
    )?;
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(DesiredView {
            device_id: device.to_string(),
            version: stored.version,
            desired: document.as_value(),
            updated_at: stored.updated_at.to_string(),
        }),
        Transaction::Cancelled(_) => match read_state(table, state).await? {
            Some(_) => Err(FleetError::StaleDesired { expected }),
            None => Err(FleetError::NotFound("device")),
        },
    }
}

/// AP-03's extra read for a device with a twin: its desired and reported documents, one
/// eventually consistent Query of the device's `TWIN#` items. Only documents of the device
/// registered at `registered` count: a deletion removes its device's documents, but a report
/// already in flight when the device was deleted can still land after it.
pub async fn twin_documents(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    registered: Timestamp,
    view: TwinView,
) -> Result<TwinView, FleetError> {
    let (items, _) = query(key_prefix(
        table,
        event_pk(user, device),
        TWIN_PREFIX,
        Expressions::builder(),
    ))
    .await?;
    let mut desired = None;
    let mut reported = None;
    for item in items {
        match EntityType::of(&item) {
            Some(EntityType::DesiredState) => desired = Some(DesiredStateItem::from_item(item)?),
            Some(EntityType::ReportedState) => reported = Some(ReportedStateItem::from_item(item)?),
            _ => {}
        }
    }
    // A document left by a deleted device of the same id is not this device's.
    let desired =
        desired.filter(|d| d.version == view.desired_version && d.updated_at >= registered);
    let reported = reported.filter(|r| r.reported_at >= registered);
    view.with_documents(desired, reported)
}

/// A command as the owner reads it (and the device receives it).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandView {
    /// `cmd-{seq}`.
    pub command_id: String,
    /// What to do.
    pub name: String,
    /// Its parameters.
    pub parameters: Value,
    /// Where it is now (`expired` once its expiry passed unfinished).
    pub status: CommandStatus,
    /// When it was queued.
    pub created_at: String,
    /// After this it is never delivered.
    pub expires_at: String,
    /// First delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    /// The device's acknowledgement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// What the device said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

impl CommandView {
    /// `command` as it stands at `now`.
    pub fn of(command: &CommandItem, now: Timestamp) -> Self {
        let json = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
        Self {
            command_id: command.command_id(),
            name: command.name.to_string(),
            parameters: json(&command.parameters),
            status: command.status_at(now),
            created_at: command.created_at.to_string(),
            expires_at: command.expires_at.to_string(),
            delivered_at: command.delivered_at.map(|t| t.to_string()),
            finished_at: command.finished_at.map(|t| t.to_string()),
            result: command.result.as_deref().map(json),
        }
    }
}

/// A new command: what to do, with what, until when.
#[derive(Clone, Debug, PartialEq)]
pub struct NewCommand {
    /// What to do.
    pub name: CommandName,
    /// Its parameters (bounded like a document, [`crate::model::twin::MAX_COMMAND_PARAMETERS_BYTES`]).
    pub parameters: TwinDocument,
    /// Seconds from now after which it is never delivered.
    pub expires_in_seconds: i64,
}

/// AP-T2, implemented by [`queue_command`].
pub const QUEUE_COMMAND: AccessPattern = AccessPattern {
    id: PatternId::QueueCommand,
    description: "queue a command for a device (bounded queue)",
    frequency: Frequency::Important,
    operations: &[
        Operation::GetItem,
        Operation::Query,
        Operation::TransactWriteItems,
    ],
    index: None,
    key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}; the live state; PK = USER#{userId}#DEVICE#{deviceId}, SK = COMMAND#{seq}",
    budget: RequestBudget::Fixed(4),
    max_read_units: None,
    route: Some("POST /me/devices/{deviceId}/commands"),
    implemented_by: implemented_by!(queue_command),
};

/// Attempts of [`queue_command`] when another command for the same device was queued in between.
const QUEUE_ATTEMPTS: u32 = 4;

/// AP-T2: queues `command` for `user`'s `device` and returns it (`queued`, with its id). A
/// consistent GetItem of the device item and one of its live state (`commandSeq`,
/// `commandsDone`), then one transaction: the state's `commandSeq` + 1 (conditioned on it
/// being unchanged) and the command item. When the live state counts
/// [`MAX_OPEN_COMMANDS`] open commands, one Query of them tells which are really open (some
/// may have finished or expired since the device last asked): still full is a 409
/// [`FleetError::CommandQueueFull`], before any write.
pub async fn queue_command(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    command: NewCommand,
) -> Result<CommandView, FleetError> {
    let item = owned_device(table, user, device)
        .await?
        .ok_or(FleetError::NotFound("device"))?;
    let state_key = state_key_of(&item);
    for _ in 0..QUEUE_ATTEMPTS {
        let now = Timestamp::now();
        let state = read_state(table, state_key.clone())
            .await?
            .ok_or(FleetError::NotFound("device"))?;
        let versions = state.twin;
        let mut done = versions.commands_done;
        if versions.open_commands() >= MAX_OPEN_COMMANDS {
            let open = open_commands(table, user, device, &versions).await?;
            let (finished_up_to, still_open) = watermark(&open, &versions, now);
            if still_open >= MAX_OPEN_COMMANDS {
                return Err(FleetError::CommandQueueFull {
                    limit: MAX_OPEN_COMMANDS,
                });
            }
            done = finished_up_to;
        }
        let seq = versions.command_seq + 1;
        let stored = CommandItem {
            user_id: user.clone(),
            device_id: device.clone(),
            seq,
            name: command.name.clone(),
            parameters: command.parameters.to_text(),
            status: CommandStatus::Queued,
            created_at: now,
            expires_at: now.plus_seconds(command.expires_in_seconds),
            delivered_at: None,
            finished_at: None,
            result: None,
            ttl: now.plus_seconds(command.expires_in_seconds).epoch_seconds()
                + COMMAND_KEPT_SECONDS,
        };
        let unchanged = if versions.command_seq == 0 {
            Condition::absent(TwinVersions::COMMAND_SEQ).or(Condition::equals(
                TwinVersions::COMMAND_SEQ,
                number_value(0),
            ))
        } else {
            Condition::equals(
                TwinVersions::COMMAND_SEQ,
                number_value(versions.command_seq),
            )
        };
        let mut changes = UpdateExpression::new().set(TwinVersions::COMMAND_SEQ, number_value(seq));
        if done > versions.commands_done {
            changes = changes.set(TwinVersions::COMMANDS_DONE, number_value(done));
        }
        let update = Update::builder()
            .table_name(table.name())
            .set_key(Some(state_key.attributes()))
            .expressions(Expressions::write(
                changes,
                Some(Condition::exists(PK).and(unchanged)),
            ))
            .build()
            .map_err(FleetError::internal)?;
        let put = Put::builder()
            .table_name(table.name())
            .set_item(Some(stored.to_item(&table.config.shards)?))
            .build()
            .map_err(FleetError::internal)?;
        let actions = vec![
            TransactWriteItem::builder().update(update).build(),
            TransactWriteItem::builder().put(put).build(),
        ];
        if let Transaction::Committed = transact(table, actions, Retry::attempts(4)).await? {
            return Ok(CommandView::of(&stored, now));
        }
        // Another command was queued in between (or the device was deleted): read again.
    }
    Err(crate::store::dynamo::throttled())
}

/// The commands a live state says may be open (`commandsDone + 1 ..= commandSeq`), read
/// consistently, oldest first.
pub(super) async fn open_commands(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    versions: &TwinVersions,
) -> Result<Vec<CommandItem>, FleetError> {
    let (items, _) = query(
        key_range(
            table,
            event_pk(user, device),
            command_sk(versions.commands_done + 1),
            command_sk(versions.command_seq),
            Expressions::builder(),
        )
        .consistent_read(true),
    )
    .await?;
    items.into_iter().map(CommandItem::from_item).collect()
}

/// How far every command is finished or expired (the new `commandsDone`), and how many of
/// `commands` are still open at `now`. A sequence number without an item (a command of a
/// deleted device of the same id, gone) counts as finished.
pub(super) fn watermark(
    commands: &[CommandItem],
    versions: &TwinVersions,
    now: Timestamp,
) -> (u64, u64) {
    let mut done = versions.commands_done;
    let mut contiguous = true;
    let mut open = 0;
    for seq in versions.commands_done + 1..=versions.command_seq {
        let finished = commands
            .iter()
            .find(|c| c.seq == seq)
            .is_none_or(|c| c.status_at(now).is_finished());
        if finished && contiguous {
            done = seq;
        } else if !finished {
            contiguous = false;
            open += 1;
        }
    }
    (done, open)
}

/// Most commands AP-T3 lists (newest first).
pub const COMMANDS_LISTED: i32 = 50;

/// AP-T3, implemented by [`list_commands`].
pub const LIST_COMMANDS: AccessPattern = AccessPattern {
    id: PatternId::ListCommands,
    description: "a device's commands with their state, newest first",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}; PK = USER#{userId}#DEVICE#{deviceId}, SK begins_with COMMAND#",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("GET /me/devices/{deviceId}/commands"),
    implemented_by: implemented_by!(list_commands),
};

/// AP-T3: the newest [`COMMANDS_LISTED`] commands of `user`'s `device`, each with its state
/// now, or `None` for another user's or an unknown device. The device item (a GetItem: the
/// 404, and its registration time: a deleted device of the same id left its commands) and
/// the commands (a Query, newest first) are read together.
pub async fn list_commands(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<Vec<CommandView>>, FleetError> {
    let (item, commands) = tokio::join!(
        owned_device(table, user, device),
        query(
            key_prefix(
                table,
                event_pk(user, device),
                COMMAND_PREFIX,
                Expressions::builder(),
            )
            .scan_index_forward(false)
            .limit(COMMANDS_LISTED),
        )
    );
    let Some(item) = item? else {
        return Ok(None);
    };
    let now = Timestamp::now();
    let mut listed = Vec::new();
    for found in commands?.0 {
        let command = CommandItem::from_item(found)?;
        if command.created_at >= item.created_at {
            listed.push(CommandView::of(&command, now));
        }
    }
    Ok(Some(listed))
}

/// The key of a command (for the device side's acknowledgements and deliveries).
pub(super) fn command_key(user: &UserId, device: &DeviceId, seq: u64) -> ItemKey {
    ItemKey::Command {
        user: user.clone(),
        device: device.clone(),
        seq,
    }
}
