//! Where a rollout's walk is and what it did: the next page of its target, and its position
//! and counts written back, each conditioned on it running at the position read, so the
//! position only moves forward and a stale run changes nothing (both kinds of rollout).

use super::*;

/// What a worker run did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRun {
    /// Owners with running rollouts.
    pub owners: u32,
    /// Rollouts it worked on.
    pub rollouts: u32,
    /// Rollouts it finished.
    pub finished: u32,
    /// Pages of devices.
    pub pages: u32,
    /// Turns taken: each gives an owner at most one page, so an owner's pages in a run are at
    /// most its turns (its partition's reads are paced per owner, not per rollout).
    pub turns: u32,
    /// Devices whose desired state it changed.
    pub devices: u64,
    /// Devices it could not change (recorded on their rollouts).
    pub devices_failed: u64,
    /// Owners' turns that failed (their rollout is left where it was, for the next run).
    pub errors: u32,
    /// Rollouts another, overlapping run had moved past (left to it).
    pub stale: u32,
    /// Firmware rollouts it paused (a stage's failures reached the abort rule, its updated
    /// devices' health fell clearly below the rest's, or the package is gone).
    pub paused: u32,
    /// Stages of firmware rollouts it opened.
    pub stages_opened: u32,
    /// Devices it offered firmware.
    pub offered: u64,
    /// Offered devices it timed out.
    pub timed_out: u64,
    /// Failed devices it offered the image again (their class's retries and backoff allowed).
    pub retried: u64,
}

/// The next page of the rollout's devices after its position, and the position after the
/// page (`None`: this was the last page).
pub(super) async fn target_page(
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
            let filter =
                Condition::equals(ENTITY_TYPE, string_value(EntityType::Device.as_str())).and(
                    Condition::equals(DeviceItem::DEVICE_TYPE, string_value(kind.as_str())),
                );
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

pub(super) fn start_key(pk: String, sk: String) -> Item {
    HashMap::from([
        (PK.name().to_string(), string_value(pk)),
        (SK.name().to_string(), string_value(sk)),
    ])
}

/// The condition of a run's write of its progress on a rollout: still running, and still at
/// the position the run read (`read_at`; none before the first page). Pages are walked in
/// key order, so the position a run writes is always after the one it read: together, the
/// position only ever moves forward.
pub(super) fn still_at(read_at: Option<&DeviceId>) -> Condition {
    let at = match read_at {
        Some(position) => Condition::equals(RolloutItem::POSITION, string_value(position.as_str())),
        None => Condition::absent(RolloutItem::POSITION),
    };
    Condition::exists(PK)
        .and(Condition::equals(
            RolloutItem::STATUS,
            string_value(RolloutStatus::Running.as_str()),
        ))
        .and(at)
}

/// The progress after a page, with the counts and failures of `progress`: one conditional
/// UpdateItem ([`still_at`] `read_at`). `Ok(false)` when another run moved the rollout on
/// (or finished it) meanwhile: a stale run's checkpoint changes nothing, and is no error.
/// Public so the overlap can be tested on the table.
pub async fn checkpoint(
    table: &FleetTable,
    progress: &RolloutItem,
    read_at: Option<&DeviceId>,
) -> Result<bool, FleetError> {
    let mut update = progress_update(progress)?;
    if let Some(position) = &progress.position {
        update = update.set(RolloutItem::POSITION, string_value(position.as_str()));
    }
    conditional_progress(table, progress, update, read_at).await
}

fn progress_update(progress: &RolloutItem) -> Result<Update, FleetError> {
    Ok(Update::new()
        .set(
            RolloutItem::DEVICES_UPDATED,
            number_value(progress.devices_updated),
        )
        .set(
            RolloutItem::DEVICES_FAILED,
            number_value(progress.devices_failed),
        )
        .set(
            RolloutItem::FAILURES,
            serde_dynamo::to_attribute_value(&progress.failures)?,
        ))
}

async fn conditional_progress(
    table: &FleetTable,
    progress: &RolloutItem,
    update: Update,
    read_at: Option<&DeviceId>,
) -> Result<bool, FleetError> {
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(progress.item_key().attributes()))
        .expressions(Expressions::write(update, Some(still_at(read_at))))
        .send()
        .await;
    match sent {
        Ok(_) => Ok(true),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
        {
            Ok(false)
        }
        Err(err) => Err(sdk_error(err)),
    }
}

/// The rollout done with the counts of `progress`, and off the running list; `Ok(false)`
/// (nothing written) when another run moved it on or finished it meanwhile.
pub(super) async fn finish(
    table: &FleetTable,
    progress: &RolloutItem,
    read_at: Option<&DeviceId>,
) -> Result<bool, FleetError> {
    let update = progress_update(progress)?
        .set(
            RolloutItem::STATUS,
            serde_dynamo::to_attribute_value(RolloutStatus::Done)?,
        )
        .set(
            RolloutItem::FINISHED_AT,
            string_value(Timestamp::now().to_string()),
        );
    if !conditional_progress(table, progress, update, read_at).await? {
        return Ok(false);
    }
    delete_running(
        table,
        &RunningRolloutItem {
            user_id: progress.user_id.clone(),
            rollout_id: progress.rollout_id.clone(),
            firmware_id: None,
        },
    )
    .await?;
    Ok(true)
}
