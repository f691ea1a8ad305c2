//! Fleet-wide desired-state changes (rollouts): one setting for every device of a tag or a
//! device type, as a first-class operation. Starting one is a count of the owner's running
//! rollouts and one transaction of three small writes, the cap a conditional one (AP-T5;
//! the count in `running.rs`); the scheduled worker (AP-T7, the rollout-worker
//! function on a one-minute schedule) applies them, owners taking turns a page of
//! [`ROLLOUT_PAGE`] devices at a time, at most [`ROLLOUT_DEVICES_PER_SECOND`] per owner,
//! checkpointing the position on the rollout after every page (forward only; a firmware
//! walk every few seconds, `stages::WALK_CHECKPOINT_SECONDS`), so no request
//! ever makes a million writes, no key takes more than a page's share and no owner waits for
//! another's rollout (docs/design.md, "Fleet-wide changes").

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::KeysAndAttributes;
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;

use super::running::{condition_failed, delete_running, rollout_limit, take_slot};
use super::state::{desired_write, read_state, state_key_of};
use crate::model::entities::desired_state::DesiredStateItem;
use crate::model::entities::device::{device_sk, DeviceItem, DEVICE_PREFIX};
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::rollout::RolloutItem;
use crate::model::entities::running_rollout::{
    running_rollout_prefix, RunningRolloutItem, RUNNING_ROLLOUTS_PK,
};
use crate::model::entities::tag_link::{tag_link_prefix, tag_link_sk, TagLinkItem};
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::firmware::{FirmwareId, FirmwarePlan, FirmwareStatus, OfferedImage, StagePlan};
use crate::model::ids::{DeviceId, RolloutId, UserId};
use crate::model::keys::user_pk;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, ENTITY_TYPE, PK, SK};
use crate::model::timestamp::Timestamp;
use crate::model::twin::{
    RolloutFailure, RolloutStatus, RolloutTarget, TwinDocument, MAX_DOCUMENT_BYTES,
    MAX_RUNNING_ROLLOUTS,
};
use crate::ops::firmware::read_firmware;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    get_all, key_prefix, key_range, number_value, query, read_consistent, string_value, transact,
    Transaction,
};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// Devices per page of a rollout (the desired documents and live states of a page are one
/// BatchGetItem of at most 100 keys).
pub const ROLLOUT_PAGE: usize = 50;
/// The worker's pace: at most this many devices a second per rollout. The owner's partition
/// is read a page at a time (tag links, or device items for a type) at this pace: at most
/// 20 pages a second, well under 3,000 RCU/s; each device's own keys take one write each.
pub const ROLLOUT_DEVICES_PER_SECOND: usize = 1000;
/// Devices of a page changed concurrently.
const CONCURRENCY: usize = 10;

/// A rollout as its owner reads it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    /// Its id.
    pub rollout_id: String,
    /// `{"tag": T}` or `{"type": T}`.
    pub target: RolloutTarget,
    /// The merge patch applied to each device's desired state (absent for a firmware rollout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Value>,
    /// A firmware rollout's package and stages (absent for a desired-state change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwarePlan>,
    /// `running`, `paused` (a firmware rollout), `done` or `cancelled`.
    pub status: RolloutStatus,
    /// Why a paused firmware rollout paused, with the counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
    /// A firmware rollout's stages: each one's percent, status and counts (as the worker's
    /// last whole walk of the target tallied them; the walk under way's until one ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageView>>,
    /// When the walk that tallied `stages`' counts ended (absent while the first walk runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted_at: Option<String>,
    /// A firmware rollout's health as its last whole walk of the target saw it: per stage its
    /// updated devices and how many were offline or alarmed, and the same of the devices not
    /// yet updated (the health rule's comparison; absent until a walk ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::model::rollout_health::HealthTally>,
    /// Devices whose desired state it changed so far.
    pub devices_updated: u64,
    /// Devices it left as they were (see `failures`).
    pub devices_failed: u64,
    /// The first devices it left as they were, and why.
    pub failures: Vec<RolloutFailure>,
    /// When it was started.
    pub created_at: String,
    /// When the last device got it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// When its owner cancelled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled_at: Option<String>,
}

impl RolloutView {
    fn of(item: &RolloutItem) -> Self {
        Self {
            paused_reason: item.paused_reason.clone(),
            stages: item
                .firmware
                .as_ref()
                .map(|plan| stage_views(plan, &item.gate.clone().unwrap_or_default())),
            counted_at: item
                .gate
                .as_ref()
                .and_then(|g| g.counted_at)
                .map(|t| t.to_string()),
            health: item.gate.as_ref().and_then(|g| g.last_health.clone()),
            rollout_id: item.rollout_id.to_string(),
            target: item.target.clone(),
            desired: match &item.firmware {
                Some(_) => None,
                None => Some(serde_json::from_str(&item.patch).unwrap_or(Value::Null)),
            },
            firmware: item.firmware.clone(),
            status: item.status,
            devices_updated: item.devices_updated,
            devices_failed: item.devices_failed,
            failures: item.failures.clone(),
            created_at: item.created_at.to_string(),
            finished_at: item.finished_at.map(|t| t.to_string()),
            cancelled_at: item.cancelled_at.map(|t| t.to_string()),
        }
    }
}

/// AP-T5, implemented by [`start_rollout`].
pub const START_ROLLOUT: AccessPattern = AccessPattern {
    id: PatternId::StartRollout,
    description: "start a fleet-wide desired-state change by tag or device type",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query, Operation::TransactWriteItems],
    index: None,
    key_condition: "PK = ROLLOUTS#RUNNING, SK begins_with {userId}# (the owner's running entries); PK = USER#{userId}, SK = ROLLOUT#{rolloutId}; PK = ROLLOUTS#RUNNING, SK = {userId}#{rolloutId}; PK = USER#{userId}, SK = ROLLOUTS (the running count, conditioned under the cap)",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /me/rollouts"),
    implemented_by: implemented_by!(start_rollout),
};

/// AP-T5: records a rollout of `patch` to `user`'s devices of `target` and lists it for the
/// worker, in one transaction; nothing is applied in the request. A 409 `rollout_limit`,
/// with nothing written, when the owner has [`MAX_RUNNING_ROLLOUTS`] running: early from one
/// Query of their running-list keys (at most that many), and for certain from the
/// transaction's conditional increment of their count
/// ([`crate::model::entities::rollout_slots::RolloutSlotsItem`]), so racing
/// starts cannot both pass. Its id sorts after every earlier one of the owner's
/// ([`RolloutId::generate`]), so it is applied after them.
pub async fn start_rollout(
    table: &FleetTable,
    user: &UserId,
    target: RolloutTarget,
    patch: TwinDocument,
) -> Result<RolloutView, FleetError> {
    start(table, user, target, patch.to_text(), None).await
}

/// AP-F6, implemented by [`start_firmware_rollout`]: AP-T5's route with a `firmwareId`.
pub const START_FIRMWARE_ROLLOUT: AccessPattern = AccessPattern {
    id: PatternId::StartFirmwareRollout,
    description: "start a staged firmware rollout of a ready package (AP-T5's start, after a read of the package)",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::GetItem,
        Operation::Query,
        Operation::TransactWriteItems,
    ],
    index: None,
    key_condition: "PK = FIRMWARE#{userId}, SK = PACKAGE#{firmwareId}; PK = ROLLOUTS#RUNNING, SK begins_with {userId}# (keys only); the rollout USER#{userId} / ROLLOUT#{rolloutId}, its entry ROLLOUTS#RUNNING / {userId}#{rolloutId} and the owner's count USER#{userId} / ROLLOUTS in one transaction",
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("POST /me/rollouts"),
    implemented_by: implemented_by!(start_firmware_rollout),
};

/// `POST /me/rollouts` with a `firmwareId` (issue 40 item 2): a staged firmware rollout of
/// `user`'s package `firmware` to the devices of `target`, recorded and listed for the
/// worker like [`start_rollout`] (the same cap), after one consistent GetItem of the package:
/// a 404 `firmware` when `user` has no such package (another owner's included), a 409
/// `firmware_not_ready` unless it is `ready`, a 400 naming `target.type` when a type target
/// is not the package's type. The plan copies the package's version and type, and the
/// running-list entry names the package, so a package in use cannot be deleted
/// ([`crate::ops::firmware::used_by_running_rollout`]). Requests: GetItem, Query,
/// TransactWriteItems ([`START_FIRMWARE_ROLLOUT`]).
pub async fn start_firmware_rollout(
    table: &FleetTable,
    user: &UserId,
    target: RolloutTarget,
    firmware: &FirmwareId,
    plan: StagePlan,
) -> Result<RolloutView, FleetError> {
    let package = read_firmware(table, user, firmware).await?;
    if package.status != FirmwareStatus::Ready {
        return Err(FleetError::Conflict {
            code: "firmware_not_ready",
            message: "only a ready package can be rolled out: its image must be uploaded and \
                      checked (GET /me/firmware/{firmwareId})"
                .to_string(),
        });
    }
    if let RolloutTarget::Type(kind) = &target {
        if *kind != package.device_type {
            return Err(ValidationError::new(
                "target.type",
                format!("must be the package's device type, {}", package.device_type),
            )
            .into());
        }
    }
    let terms = package.rollout_terms(plan);
    start(table, user, target, String::new(), Some(terms)).await
}

/// Records a rollout and lists it for the worker (see [`start_rollout`]).
async fn start(
    table: &FleetTable,
    user: &UserId,
    target: RolloutTarget,
    patch: String,
    firmware: Option<(FirmwarePlan, OfferedImage)>,
) -> Result<RolloutView, FleetError> {
    let (running, _) = query(
        key_prefix(
            table,
            RUNNING_ROLLOUTS_PK,
            running_rollout_prefix(user),
            Expressions::builder().projection(&[PK]),
        )
        .limit(MAX_RUNNING_ROLLOUTS as i32)
        .consistent_read(true),
    )
    .await?;
    if running.len() >= MAX_RUNNING_ROLLOUTS {
        return Err(rollout_limit());
    }
    let created_at = Timestamp::now();
    let item = RolloutItem::started(
        user.clone(),
        RolloutId::generate(created_at),
        target,
        patch,
        firmware,
        created_at,
    );
    let running_entry = RunningRolloutItem::of(&item);
    let put = |item: Item| -> Result<_, FleetError> {
        Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .put(
                aws_sdk_dynamodb::types::Put::builder()
                    .table_name(table.name())
                    .set_item(Some(item))
                    .build()
                    .map_err(FleetError::internal)?,
            )
            .build())
    };
    let actions = vec![
        put(item.to_item(&table.config.shards)?)?,
        put(running_entry.to_item(&table.config.shards)?)?,
        // The cap itself (issue 39 item 8); the Query above only answers early.
        take_slot(table, user, running.len())?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(RolloutView::of(&item)),
        Transaction::Cancelled(reasons) if condition_failed(&reasons, 2) => Err(rollout_limit()),
        Transaction::Cancelled(_) => Err(FleetError::internal("a new rollout id was taken")),
    }
}

/// AP-T6, implemented by [`get_rollout`].
pub const GET_ROLLOUT: AccessPattern = AccessPattern {
    id: PatternId::GetRollout,
    description: "a fleet-wide change's progress",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem],
    index: None,
    key_condition:
        "PK = USER#{userId}, SK = ROLLOUT#{rolloutId} (a firmware rollout's stage counts are on it)",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("GET /me/rollouts/{rolloutId}"),
    implemented_by: implemented_by!(get_rollout),
};

/// AP-T6: `user`'s rollout `rollout`, or `None` (another user's or unknown), in one GetItem: a
/// firmware rollout's stages carry the counts the worker's walk tallied on it.
pub async fn get_rollout(
    table: &FleetTable,
    user: &UserId,
    rollout: &RolloutId,
) -> Result<Option<RolloutView>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Rollout {
                user: user.clone(),
                rollout: rollout.clone(),
            }
            .attributes(),
        ))
        .send()
        .await
        .map_err(sdk_error)?;
    let Some(item) = out.item.map(RolloutItem::from_item).transpose()? else {
        return Ok(None);
    };
    Ok(Some(RolloutView::of(&item)))
}

/// AP-F9, implemented by [`cancel_rollout`].
pub const CANCEL_ROLLOUT: AccessPattern = AccessPattern {
    id: PatternId::CancelRollout,
    description: "cancel a running or paused rollout of either kind: its status, then its running-list entry with the owner's slot",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::GetItem,
        Operation::UpdateItem,
        Operation::TransactWriteItems,
        Operation::DeleteItem,
    ],
    index: None,
    key_condition: "PK = USER#{userId}, SK = ROLLOUT#{rolloutId} (read, then its status conditioned on running or paused); ROLLOUTS#RUNNING / {userId}#{rolloutId} with USER#{userId} / ROLLOUTS",
    // 3; an entry whose owner has no count (an organization being deleted) is deleted alone:
    // at most 4.
    budget: RequestBudget::Fixed(4),
    max_read_units: None,
    route: Some("POST /me/rollouts/{rolloutId}/cancel"),
    implemented_by: implemented_by!(cancel_rollout),
};

/// `POST /me/rollouts/{rolloutId}/cancel`, implemented by [`cancel_rollout`]: the rollout
/// (consistent GetItem), its status (conditional UpdateItem), its running-list entry and the
/// owner's slot (the worker's own end, one TransactWriteItems). Served by the firmware function
/// (device-updates' resource policy is near its limit): AP-F9 ([`CANCEL_ROLLOUT`]).
///
/// `user`'s rollout `rollout` cancelled: `cancelled` with `cancelledAt`, off the running list
/// and its slot given back. A 404 `rollout` when `user` has no such rollout (another owner's
/// included) and a 409 `rollout_ended` when it is `done` or `cancelled` already, nothing
/// changed either way. The status is written first, conditioned on `running` (as the worker's
/// checkpoints and its finish are), so of two cancels, or a cancel and the worker's finish,
/// exactly one ends it; the entry goes with the slot in [`delete_running`], conditioned on the
/// entry, so the slot comes back once however the ends race. A cancel stopped between the two
/// writes leaves an entry whose rollout is not running, which the worker's next run takes off
/// (giving the slot back then). A desired-state rollout's devices already changed keep their
/// value: a page a run has in flight at the moment of the cancel still finishes its device
/// writes (at most [`ROLLOUT_PAGE`]), but its checkpoint finds the rollout not running, and
/// no run takes it up again.
pub async fn cancel_rollout(
    table: &FleetTable,
    user: &UserId,
    rollout: &RolloutId,
) -> Result<RolloutView, FleetError> {
    let key = ItemKey::Rollout {
        user: user.clone(),
        rollout: rollout.clone(),
    };
    let mut item = read_consistent::<RolloutItem>(table, &key)
        .await?
        .ok_or(FleetError::NotFound("rollout"))?;
    if !matches!(item.status, RolloutStatus::Running | RolloutStatus::Paused) {
        return Err(rollout_ended());
    }
    let cancelled_at = Timestamp::now();
    let update = Update::new()
        .set(
            RolloutItem::STATUS,
            serde_dynamo::to_attribute_value(RolloutStatus::Cancelled)?,
        )
        .set(
            RolloutItem::CANCELLED_AT,
            string_value(cancelled_at.to_string()),
        );
    // Running or paused (a paused firmware rollout is cancelled as it stands).
    let running = Condition::exists(PK).and(
        Condition::equals(
            RolloutItem::STATUS,
            string_value(RolloutStatus::Running.as_str()),
        )
        .or(Condition::equals(
            RolloutItem::STATUS,
            string_value(RolloutStatus::Paused.as_str()),
        )),
    );
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::write(update, Some(running)))
        .send()
        .await;
    match sent {
        Ok(_) => {}
        // Another cancel, or the worker's finish, ended it since the read.
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
        {
            return Err(rollout_ended());
        }
        Err(err) => return Err(sdk_error(err)),
    }
    delete_running(table, &RunningRolloutItem::of(&item)).await?;
    item.status = RolloutStatus::Cancelled;
    item.cancelled_at = Some(cancelled_at);
    Ok(RolloutView::of(&item))
}

/// The live states of `devices` and, beside each, the `T` that `companion` keys (its desired
/// document, its firmware offer), by device: one consistent BatchGetItem (more only for keys
/// DynamoDB left unprocessed). A device with no live state is being deleted; one with no `T`
/// has none yet.
async fn states_and<'a, T: Entity>(
    table: &FleetTable,
    devices: impl IntoIterator<Item = &'a DeviceItem>,
    companion: impl Fn(&DeviceItem) -> ItemKey,
    device_of: impl Fn(&T) -> &DeviceId,
) -> Result<(HashMap<DeviceId, DeviceStateItem>, HashMap<DeviceId, T>), FleetError> {
    let mut keys = Vec::new();
    for d in devices {
        keys.push(state_key_of(d).attributes());
        keys.push(companion(d).attributes());
    }
    let mut states = HashMap::new();
    let mut companions = HashMap::new();
    if keys.is_empty() {
        return Ok((states, companions));
    }
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    for item in get_all(table, request, &mut Retry::attempts(8)).await? {
        match EntityType::of(&item) {
            Some(EntityType::DeviceState) => {
                let state = DeviceStateItem::from_item(item)?;
                states.insert(state.device_id.clone(), state);
            }
            Some(found) if found == T::ENTITY_TYPE => {
                let companion = T::from_item(item)?;
                companions.insert(device_of(&companion).clone(), companion);
            }
            _ => {}
        }
    }
    Ok((states, companions))
}

/// The live states of `devices`, in consistent BatchGetItems of up to 100 keys.
async fn read_states<'a>(
    table: &FleetTable,
    devices: impl IntoIterator<Item = &'a DeviceItem>,
) -> Result<HashMap<DeviceId, DeviceStateItem>, FleetError> {
    let keys: Vec<Item> = devices
        .into_iter()
        .map(|d| state_key_of(d).attributes())
        .collect();
    let mut states = HashMap::new();
    if keys.is_empty() {
        return Ok(states);
    }
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    for item in get_all(table, request, &mut Retry::attempts(8)).await? {
        let state = DeviceStateItem::from_item(item)?;
        states.insert(state.device_id.clone(), state);
    }
    Ok(states)
}

mod list;
mod pause;
mod progress;
mod stages;
pub mod worker;

pub use list::{list_rollouts, RolloutPage, LIST_ROLLOUTS};
use pause::rollout_ended;
pub use pause::{pause_rollout, resume_rollout, PAUSED_BY_OWNER, PAUSE_ROLLOUT, RESUME_ROLLOUT};
pub use progress::{checkpoint, RolloutRun};
pub use stages::{
    abort_reason, stage_met, stage_views, StageView, TIMEOUT_WITHOUT_RHYTHM_SECONDS,
    WALK_CHECKPOINT_SECONDS,
};
pub use worker::{advance_rollouts, RolloutWorkerAnswer, ADVANCE_ROLLOUTS};
