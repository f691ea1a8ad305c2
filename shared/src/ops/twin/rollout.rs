//! Fleet-wide desired-state changes (rollouts): one setting for every device of a tag or a
//! device type, as a first-class operation. Starting one is two small writes (AP-T5); the
//! scheduled worker (AP-T7, the daily-analytics function on a one-minute schedule) applies it
//! a page of [`ROLLOUT_PAGE`] devices at a time, at most [`ROLLOUT_DEVICES_PER_SECOND`],
//! checkpointing its position on the rollout after every page, so no request ever makes a
//! million writes and no key takes more than a page's share (docs/design.md, "Fleet-wide
//! changes").

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::KeysAndAttributes;
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;

use super::{desired_write, read_state, state_key_of};
use crate::model::entity::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{DeviceId, RolloutId, UserId};
use crate::model::items::{DeviceItem, DeviceStateItem, TagLinkItem};
use crate::model::keys::{
    device_sk, tag_link_prefix, tag_link_sk, user_pk, ItemKey, DEVICE_PREFIX, RUNNING_ROLLOUTS_PK,
};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, ENTITY_TYPE, PK, SK};
use crate::model::timestamp::Timestamp;
use crate::model::token::random_id;
use crate::model::twin::{
    DesiredStateItem, RolloutItem, RolloutStatus, RolloutTarget, RunningRolloutItem, TwinDocument,
};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{get_all, key_prefix, key_range, n, query, s, transact, Transaction};
use crate::store::expression::WithExpressions;
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};

/// Devices per page of a rollout (the desired documents and live states of a page are one
/// BatchGetItem of at most 100 keys).
pub const ROLLOUT_PAGE: usize = 50;
/// The worker's pace: at most this many devices a second per rollout. The owner's partition
/// is read a page at a time (tag links, or device items for a type) at this pace: at most
/// 20 pages a second, well under 3,000 RCU/s; each device's own keys take one write each.
pub const ROLLOUT_DEVICES_PER_SECOND: usize = 1000;
/// Devices of a page changed concurrently.
const CONCURRENCY: usize = 10;
/// Rollouts one worker run takes on.
const RUNNING_LISTED: i32 = 25;

/// A rollout as its owner reads it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    /// Its id.
    pub rollout_id: String,
    /// `{"tag": T}` or `{"type": T}`.
    pub target: RolloutTarget,
    /// The merge patch applied to each device's desired state.
    pub desired: Value,
    /// `running` or `done`.
    pub status: RolloutStatus,
    /// Devices whose desired state it changed so far.
    pub devices_updated: u64,
    /// When it was started.
    pub created_at: String,
    /// When the last device got it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl RolloutView {
    fn of(item: &RolloutItem) -> Self {
        Self {
            rollout_id: item.rollout_id.to_string(),
            target: item.target.clone(),
            desired: serde_json::from_str(&item.patch).unwrap_or(Value::Null),
            status: item.status,
            devices_updated: item.devices_updated,
            created_at: item.created_at.to_string(),
            finished_at: item.finished_at.map(|t| t.to_string()),
        }
    }
}

/// AP-T5, implemented by [`start_rollout`].
pub const START_ROLLOUT: AccessPattern = AccessPattern {
    id: PatternId::StartRollout,
    description: "start a fleet-wide desired-state change by tag or device type",
    frequency: Frequency::Analytics,
    operations: &[Operation::TransactWriteItems],
    index: None,
    key_condition: "PK = USER#{userId}, SK = ROLLOUT#{rolloutId}; PK = ROLLOUTS#RUNNING, SK = {userId}#{rolloutId}",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("POST /me/rollouts"),
    implemented_by: implemented_by!(start_rollout),
};

/// AP-T5: records a rollout of `patch` to `user`'s devices of `target` and lists it for the
/// worker, in one transaction; nothing is applied in the request.
pub async fn start_rollout(
    table: &FleetTable,
    user: &UserId,
    target: RolloutTarget,
    patch: TwinDocument,
) -> Result<RolloutView, FleetError> {
    let rollout_id = RolloutId::parse(format!("r-{}", random_id()?))?;
    let item = RolloutItem {
        user_id: user.clone(),
        rollout_id: rollout_id.clone(),
        target,
        patch: patch.to_text(),
        status: RolloutStatus::Running,
        position: None,
        devices_updated: 0,
        created_at: Timestamp::now(),
        finished_at: None,
    };
    let running = RunningRolloutItem {
        user_id: user.clone(),
        rollout_id,
    };
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
        put(running.to_item(&table.config.shards)?)?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(RolloutView::of(&item)),
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
    key_condition: "PK = USER#{userId}, SK = ROLLOUT#{rolloutId}",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("GET /me/rollouts/{rolloutId}"),
    implemented_by: implemented_by!(get_rollout),
};

/// AP-T6: `user`'s rollout `rollout`, or `None` (another user's or unknown).
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
    Ok(out
        .item
        .map(RolloutItem::from_item)
        .transpose()?
        .map(|r| RolloutView::of(&r)))
}

/// What a worker run did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRun {
    /// Rollouts it worked on.
    pub rollouts: u32,
    /// Rollouts it finished.
    pub finished: u32,
    /// Pages of devices.
    pub pages: u32,
    /// Devices whose desired state it changed.
    pub devices: u64,
}

/// AP-T7, implemented by [`advance_rollouts`].
pub const ADVANCE_ROLLOUTS: AccessPattern = AccessPattern {
    id: PatternId::AdvanceRollouts,
    description: "the scheduled worker applies running rollouts, a paced page at a time",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::Query,
        Operation::GetItem,
        Operation::BatchGetItem,
        Operation::TransactWriteItems,
        Operation::UpdateItem,
        Operation::DeleteItem,
    ],
    index: None,
    key_condition: "PK = ROLLOUTS#RUNNING; the rollout; per page PK = USER#{userId} (tag links or device items), the devices' live states and desired states",
    budget: RequestBudget::RolloutPages,
    max_read_units: None,
    route: None,
    implemented_by: implemented_by!(advance_rollouts),
};

/// AP-T7: carries the running rollouts forward until `deadline`: one Query of the running
/// list, then for each rollout a GetItem of it and page after page (the targets: one Query;
/// for a tag, their device items: one BatchGetItem; their live states and desired
/// documents: one BatchGetItem; one transaction per device, at most [`CONCURRENCY`] at once;
/// the position: one UpdateItem) until done (the rollout marked done and taken off the list:
/// an UpdateItem and a DeleteItem) or the deadline. Paced to
/// [`ROLLOUT_DEVICES_PER_SECOND`]. Safe to stop anywhere: a page is done again from the
/// position before it, and a device it reached twice gets the same patch merged again.
pub async fn advance_rollouts(
    table: &FleetTable,
    deadline: Instant,
) -> Result<RolloutRun, FleetError> {
    let listed = Expressions::builder()
        .key_condition(Condition::equals(PK, s(RUNNING_ROLLOUTS_PK)))
        .build();
    let (running, _) = query(
        table
            .client
            .query()
            .table_name(table.name())
            .expressions(listed)
            .limit(RUNNING_LISTED)
            .consistent_read(true),
    )
    .await?;
    let mut run = RolloutRun::default();
    for item in running {
        if Instant::now() >= deadline {
            break;
        }
        let running = RunningRolloutItem::from_item(item)?;
        run.rollouts += 1;
        let Some(mut rollout) = read_rollout(table, &running).await? else {
            delete_running(table, &running).await?;
            continue;
        };
        let patch = TwinDocument::from_text(&rollout.patch)?;
        loop {
            if Instant::now() >= deadline {
                break;
            }
            let started = Instant::now();
            let (devices, next) = target_page(table, &rollout).await?;
            let changed = apply_page(table, &devices, &patch).await?;
            run.pages += 1;
            run.devices += changed;
            rollout.devices_updated += changed;
            rollout.position = next.clone().or(rollout.position);
            if next.is_none() {
                finish(table, &rollout, changed).await?;
                run.finished += 1;
                break;
            }
            checkpoint(table, &rollout, changed).await?;
            // The pace: a page of ROLLOUT_PAGE devices takes at least its share of a second.
            let floor =
                Duration::from_secs_f64(ROLLOUT_PAGE as f64 / ROLLOUT_DEVICES_PER_SECOND as f64);
            if let Some(rest) = floor.checked_sub(started.elapsed()) {
                tokio::time::sleep(rest.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
            }
        }
    }
    Ok(run)
}

async fn read_rollout(
    table: &FleetTable,
    running: &RunningRolloutItem,
) -> Result<Option<RolloutItem>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Rollout {
                user: running.user_id.clone(),
                rollout: running.rollout_id.clone(),
            }
            .attributes(),
        ))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(out
        .item
        .map(RolloutItem::from_item)
        .transpose()?
        .filter(|r| r.status == RolloutStatus::Running))
}

/// The next page of the rollout's devices after its position, and the position after the
/// page (`None`: this was the last page).
async fn target_page(
    table: &FleetTable,
    rollout: &RolloutItem,
) -> Result<(Vec<DeviceItem>, Option<DeviceId>), FleetError> {
    let user = &rollout.user_id;
    match &rollout.target {
        RolloutTarget::Tag(tag) => {
            let mut request = key_prefix(
                table,
                user_pk(user),
                tag_link_prefix(tag),
                Expressions::builder(),
            )
            .limit(ROLLOUT_PAGE as i32);
            if let Some(after) = &rollout.position {
                request = request.set_exclusive_start_key(Some(start_key(
                    user_pk(user),
                    tag_link_sk(tag, after),
                )));
            }
            let (items, last) = query(request).await?;
            let links: Vec<TagLinkItem> = items
                .into_iter()
                .map(TagLinkItem::from_item)
                .collect::<Result<_, _>>()?;
            let next = last.and(links.last().map(|l| l.device_id.clone()));
            let keys: Vec<Item> = links
                .iter()
                .map(|l| ItemKey::device(user, &l.device_id).attributes())
                .collect();
            let mut devices = Vec::new();
            if !keys.is_empty() {
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .build()
                    .map_err(FleetError::internal)?;
                for item in get_all(table, request, &mut Retry::attempts(8)).await? {
                    devices.push(DeviceItem::from_item(item)?);
                }
            }
            Ok((devices, next))
        }
        RolloutTarget::Type(kind) => {
            let filter = Condition::equals(ENTITY_TYPE, s(EntityType::Device.as_str()))
                .and(Condition::equals(DeviceItem::DEVICE_TYPE, s(kind.as_str())));
            let mut request = key_range(
                table,
                user_pk(user),
                DEVICE_PREFIX,
                format!("{DEVICE_PREFIX}\u{10FFFF}"),
                Expressions::builder().condition(filter),
            )
            .limit(ROLLOUT_PAGE as i32);
            if let Some(after) = &rollout.position {
                request = request
                    .set_exclusive_start_key(Some(start_key(user_pk(user), device_sk(after))));
            }
            let (items, last) = query(request).await?;
            let devices: Vec<DeviceItem> = items
                .into_iter()
                .map(DeviceItem::from_item)
                .collect::<Result<_, _>>()?;
            // The page may end on a live state the filter dropped: resume from its device.
            let next = match last {
                Some(key) => Some(match ItemKey::of(&key)? {
                    ItemKey::Device { device, .. } | ItemKey::DeviceState { device, .. } => device,
                    other => {
                        return Err(FleetError::internal(format!(
                            "a device page ended on {other:?}"
                        )))
                    }
                }),
                None => None,
            };
            Ok((devices, next))
        }
    }
}

fn start_key(pk: String, sk: String) -> Item {
    HashMap::from([
        (PK.name().to_string(), s(pk)),
        (SK.name().to_string(), s(sk)),
    ])
}

/// Merges `patch` into the desired state of each of `devices` (skipping any being deleted),
/// returning how many changed.
async fn apply_page(
    table: &FleetTable,
    devices: &[DeviceItem],
    patch: &TwinDocument,
) -> Result<u64, FleetError> {
    let devices: Vec<&DeviceItem> = devices.iter().filter(|d| d.deleting_at.is_none()).collect();
    if devices.is_empty() {
        return Ok(0);
    }
    // The live states (the version) and the desired documents of the page: one BatchGetItem.
    let mut keys = Vec::new();
    for d in &devices {
        keys.push(state_key_of(d).attributes());
        keys.push(
            ItemKey::Desired {
                user: d.user_id.clone(),
                device: d.device_id.clone(),
            }
            .attributes(),
        );
    }
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    let mut states: HashMap<DeviceId, DeviceStateItem> = HashMap::new();
    let mut documents: HashMap<DeviceId, DesiredStateItem> = HashMap::new();
    for item in get_all(table, request, &mut Retry::attempts(8)).await? {
        match EntityType::of(&item) {
            Some(EntityType::DeviceState) => {
                let state = DeviceStateItem::from_item(item)?;
                states.insert(state.device_id.clone(), state);
            }
            Some(EntityType::DesiredState) => {
                let desired = DesiredStateItem::from_item(item)?;
                documents.insert(desired.device_id.clone(), desired);
            }
            _ => {}
        }
    }
    let mut changes = Vec::new();
    for d in devices {
        // A device without a live state is being deleted: nothing to change.
        let Some(state) = states.remove(&d.device_id) else {
            continue;
        };
        let current = documents
            .remove(&d.device_id)
            .filter(|doc| doc.version == state.twin.desired_version);
        changes.push(apply_one(
            table,
            d,
            state.twin.desired_version,
            current,
            patch,
        ));
    }
    let results: Vec<Result<bool, FleetError>> = futures::stream::iter(changes)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut changed = 0;
    for result in results {
        changed += u64::from(result?);
    }
    Ok(changed)
}

/// One device's desired state with `patch` merged in; on a conflict (its owner set it
/// meanwhile) read again and merge into the newer one (a few times).
async fn apply_one(
    table: &FleetTable,
    device: &DeviceItem,
    mut version: u64,
    mut current: Option<DesiredStateItem>,
    patch: &TwinDocument,
) -> Result<bool, FleetError> {
    for _ in 0..4 {
        let base = match &current {
            Some(doc) => TwinDocument::from_text(&doc.document)?,
            None => TwinDocument::default(),
        };
        let next = base.merged(patch);
        if current.is_some() && next == base {
            return Ok(false);
        }
        let (actions, _) = desired_write(
            table,
            state_key_of(device),
            &device.user_id,
            &device.device_id,
            version,
            &next,
            Timestamp::now(),
        )?;
        if let Transaction::Committed = transact(table, actions, Retry::attempts(4)).await? {
            return Ok(true);
        }
        let Some(state) = read_state(table, state_key_of(device)).await? else {
            return Ok(false);
        };
        version = state.twin.desired_version;
        let out = table
            .client
            .get_item()
            .table_name(table.name())
            .set_key(Some(
                ItemKey::Desired {
                    user: device.user_id.clone(),
                    device: device.device_id.clone(),
                }
                .attributes(),
            ))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        current = out
            .item
            .map(DesiredStateItem::from_item)
            .transpose()?
            .filter(|d| d.version == version);
    }
    Err(crate::store::dynamo::throttled())
}

/// The position and count after a page.
async fn checkpoint(
    table: &FleetTable,
    rollout: &RolloutItem,
    changed: u64,
) -> Result<(), FleetError> {
    let mut update = Update::new().add(RolloutItem::DEVICES_UPDATED, n(changed));
    if let Some(position) = &rollout.position {
        update = update.set(RolloutItem::POSITION, s(position.as_str()));
    }
    table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(rollout.item_key().attributes()))
        .expressions(Expressions::write(update, Some(Condition::exists(PK))))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(())
}

/// The rollout done, and off the running list.
async fn finish(table: &FleetTable, rollout: &RolloutItem, changed: u64) -> Result<(), FleetError> {
    let update = Update::new()
        .add(RolloutItem::DEVICES_UPDATED, n(changed))
        .set(
            RolloutItem::STATUS,
            serde_dynamo::to_attribute_value(RolloutStatus::Done)?,
        )
        .set(RolloutItem::FINISHED_AT, s(Timestamp::now().to_string()));
    table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(rollout.item_key().attributes()))
        .expressions(Expressions::write(update, Some(Condition::exists(PK))))
        .send()
        .await
        .map_err(sdk_error)?;
    delete_running(
        table,
        &RunningRolloutItem {
            user_id: rollout.user_id.clone(),
            rollout_id: rollout.rollout_id.clone(),
        },
    )
    .await
}

async fn delete_running(
    table: &FleetTable,
    running: &RunningRolloutItem,
) -> Result<(), FleetError> {
    table
        .client
        .delete_item()
        .table_name(table.name())
        .set_key(Some(running.item_key().attributes()))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(())
}
