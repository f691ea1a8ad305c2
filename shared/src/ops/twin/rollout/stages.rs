//! The scheduled worker's part in a staged firmware rollout (issue 40 items 3 to 5): per run,
//! the stage counts summed from their shards decide whether the rollout pauses itself (a
//! stage's failures reached the abort rule), whether the next stage opens (the last open one
//! met the success share and soaked), or whether it is done; then a walk of the target, a page
//! at a time, offers the firmware to the devices of the open stages not offered yet and times
//! out the offered ones that went silent.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{KeysAndAttributes, Put, TransactWriteItem};

use super::progress::{finish, still_at, target_page, RolloutRun};
use super::*;
use crate::model::entities::firmware::FirmwareItem;
use crate::model::entities::firmware_offer::FirmwareOfferItem;
use crate::model::entities::rollout_counts::{RolloutCountsItem, ROLLOUT_COUNT_SHARDS};
use crate::model::firmware::stage_of;
use crate::model::rollout_health::{health_pause_reason, HealthTally};
use crate::model::rollout_progress::{
    counter_changes, retry_at, FailureClass, OfferPhase, StageCounter, StageCounts, StageGate,
};
use crate::ops::twin::firmware_offer::{count_changes, update_action};

/// How long a device with no known reporting interval (none declared, none learned yet) may
/// stay silent after its offer or its last check-in before it times out.
pub const TIMEOUT_WITHOUT_RHYTHM_SECONDS: i64 = 24 * 3600;

/// A stage as its owner reads it on `GET /me/rollouts/{rolloutId}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageView {
    /// The cumulative percent of the target.
    pub percent: u8,
    /// `waiting` (not open yet), `open`, `soaking` (met its success share, soaking before the
    /// next opens) or `passed` (the next one opened).
    pub status: &'static str,
    /// Its counts.
    #[serde(flatten)]
    pub counts: StageCounts,
}

/// The stages of `plan` with their `counts`, as `gate` has them open.
pub fn stage_views(
    plan: &FirmwarePlan,
    gate: &StageGate,
    counts: &BTreeMap<u32, StageCounts>,
) -> Vec<StageView> {
    plan.stages
        .iter()
        .enumerate()
        .map(|(i, percent)| {
            let i = i as u32;
            let status = if i > gate.open {
                "waiting"
            } else if i < gate.open {
                "passed"
            } else if gate.met_at.is_some() {
                "soaking"
            } else {
                "open"
            };
            StageView {
                percent: *percent,
                status,
                counts: counts.get(&i).copied().unwrap_or_default(),
            }
        })
        .collect()
}

/// A firmware rollout's counts per stage: one BatchGetItem of its [`ROLLOUT_COUNT_SHARDS`]
/// shards, summed.
pub async fn read_counts(
    table: &FleetTable,
    rollout: &RolloutItem,
) -> Result<BTreeMap<u32, StageCounts>, FleetError> {
    let keys: Vec<Item> = (0..ROLLOUT_COUNT_SHARDS)
        .map(|shard| {
            ItemKey::RolloutCounts {
                user: rollout.user_id.clone(),
                rollout: rollout.rollout_id.clone(),
                shard,
            }
            .attributes()
        })
        .collect();
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    let mut counts = BTreeMap::new();
    for item in get_all(table, request, &mut Retry::attempts(8)).await? {
        RolloutCountsItem::add_counts(&item, &mut counts);
    }
    Ok(counts)
}

/// Why a stage's failures stop the rollout, if they do: at least `abort.failurePercent` of at
/// least `abort.minFinished` finished devices of one open stage.
pub fn abort_reason(
    plan: &FirmwarePlan,
    gate: &StageGate,
    counts: &BTreeMap<u32, StageCounts>,
) -> Option<String> {
    (0..=gate.open).find_map(|stage| {
        let c = counts.get(&stage).copied().unwrap_or_default();
        // Counted from the owner's last resume, if any.
        let (finished_before, failed_before) = gate
            .baseline
            .iter()
            .find(|b| b.stage == stage)
            .map_or((0, 0), |b| (b.finished, b.failed));
        let finished = c.finished() - finished_before;
        let failed = c.failed - failed_before;
        let over = finished > 0
            && finished >= i64::from(plan.abort.min_finished)
            && failed * 100 >= i64::from(plan.abort.failure_percent) * finished;
        over.then(|| {
            format!(
                "stage {stage} ({}%): {failed} of {finished} finished devices failed ({} timed \
                 out in all), at least {}% of at least {}",
                plan.stages.get(stage as usize).copied().unwrap_or(100),
                c.timed_out,
                plan.abort.failure_percent,
                plan.abort.min_finished
            )
        })
    })
}

/// Whether the last open stage met its success criterion: walked whole since it opened, and
/// at least `successPercent` of its offered devices succeeded (a stage with no devices of its
/// own meets it).
pub fn stage_met(
    plan: &FirmwarePlan,
    gate: &StageGate,
    counts: &BTreeMap<u32, StageCounts>,
) -> bool {
    let c = counts.get(&gate.open).copied().unwrap_or_default();
    gate.walked && c.succeeded * 100 >= i64::from(plan.success_percent) * c.offered
}

/// A firmware rollout taken up in a worker run: judged, then walked a page a turn
/// ([`walk_firmware_page`]), in a lane of its own among the owners' turns.
pub(super) struct FirmwareWalk {
    /// The rollout as last written (its gate and position move with each page).
    pub(super) rollout: RolloutItem,
    plan: FirmwarePlan,
    package: FirmwareItem,
}

/// Takes up a running firmware rollout for a run ([`advance_rollouts`] does, when its lane's
/// turn first comes): the package (one GetItem) and the counts (one BatchGetItem) read; then
/// one of: paused by its abort rule, or for a missing package (one conditional UpdateItem);
/// done (every stage open, walked and finished: the worker's finish); the next stage opened,
/// or the soak started (one conditional UpdateItem). Returns the walk to go on with, page by
/// page, or `None` when the run has nothing more to do for it. What it did is counted on
/// `run`.
pub(super) async fn take_up_firmware(
    table: &FleetTable,
    mut rollout: RolloutItem,
    run: &mut RolloutRun,
) -> Result<Option<FirmwareWalk>, FleetError> {
    let Some(plan) = rollout.firmware.clone() else {
        return Ok(None);
    };
    let mut gate = rollout.gate.clone().unwrap_or_default();
    let package: Option<FirmwareItem> = read_consistent(
        table,
        &ItemKey::Firmware {
            user: rollout.user_id.clone(),
            firmware: plan.firmware_id.clone(),
        },
    )
    .await?;
    let Some(package) = package.filter(|p| p.status == FirmwareStatus::Ready) else {
        pause(
            table,
            &rollout,
            "its firmware package is gone or no longer ready: nothing more is offered".into(),
        )
        .await?;
        run.paused += 1;
        return Ok(None);
    };
    let counts = read_counts(table, &rollout).await?;
    if let Some(reason) = abort_reason(&plan, &gate, &counts) {
        pause(table, &rollout, reason).await?;
        run.paused += 1;
        return Ok(None);
    }
    let last = plan.stages.len().saturating_sub(1) as u32;
    if stage_met(&plan, &gate, &counts) {
        let now = Timestamp::now();
        let all_finished = (0..=gate.open).all(|s| {
            let c = counts.get(&s).copied().unwrap_or_default();
            c.finished() >= c.offered
        });
        if gate.open == last && all_finished {
            if finish(table, &rollout, rollout.position.as_ref()).await? {
                run.finished += 1;
            }
            return Ok(None);
        }
        let soaked = gate
            .met_at
            .is_some_and(|met| met.plus_seconds(i64::from(plan.soak_seconds)) <= now);
        if gate.open < last && soaked {
            gate.open += 1;
            gate.opened_at.push(now);
            gate.met_at = None;
            gate.walked = false;
            // A walk's tally is of one set of open stages.
            gate.health = HealthTally::default();
            if !save_gate(table, &rollout, &gate, None).await? {
                run.stale += 1;
                return Ok(None);
            }
            rollout.position = None;
            run.stages_opened += 1;
        } else if gate.met_at.is_none() && gate.open < last {
            gate.met_at = Some(now);
            if !save_gate(table, &rollout, &gate, rollout.position.as_ref()).await? {
                run.stale += 1;
                return Ok(None);
            }
        }
    }
    rollout.gate = Some(gate);
    Ok(Some(FirmwareWalk {
        rollout,
        plan,
        package,
    }))
}

/// One page of a firmware rollout's walk: its turn in the run ([`walk_page`], then the page's
/// health merged and the position checkpointed under the running condition). Returns whether
/// the walk goes on in this run: not once it reached the end of the target (a whole walk per
/// run at most: the next run walks again, for devices that joined the target and for silent
/// ones, and judges the stages first), nor after the health rule paused it or another run
/// moved it.
pub(super) async fn walk_firmware_page(
    table: &FleetTable,
    walk: &mut FirmwareWalk,
    run: &mut RolloutRun,
) -> Result<bool, FleetError> {
    let rollout = &mut walk.rollout;
    let (devices, next) = target_page(table, rollout).await?;
    let page = walk_page(table, rollout, &walk.plan, &walk.package, &devices).await?;
    run.pages += 1;
    run.offered += page.offered;
    run.timed_out += page.timed_out;
    run.retried += page.retried;
    let mut gate = rollout.gate.clone().unwrap_or_default();
    gate.health.merge(&page.health);
    if next.is_none() {
        gate.walked = true;
        // The health rule judges each whole walk's tally.
        let tally = std::mem::take(&mut gate.health);
        let plan = &walk.plan;
        let reason = health_pause_reason(&tally, gate.health_accepted_through, |stage| {
            plan.stages.get(stage as usize).copied().unwrap_or(100)
        });
        gate.last_health = Some(tally);
        if let Some(reason) = reason {
            let paused = pause_with_gate(table, rollout, &gate, reason).await?;
            run.paused += u32::from(paused);
            run.stale += u32::from(!paused);
            return Ok(false);
        }
    }
    if !save_gate(table, rollout, &gate, next.as_ref()).await? {
        run.stale += 1;
        return Ok(false);
    }
    rollout.position = next.clone();
    rollout.gate = Some(gate);
    Ok(next.is_some())
}

/// What a page of the walk did, and the health it saw.
struct WalkPage {
    offered: u64,
    timed_out: u64,
    retried: u64,
    health: HealthTally,
}

/// One page of `devices` of the target: the offers and live states of its devices of the
/// package's type read (one consistent BatchGetItem), which the health rule tallies (updated
/// devices per stage, and the not yet updated, each healthy or not); then, in the open stages:
/// each device with no offer of this rollout is offered it (one transaction: the offer, the
/// live state's mark, the stage's `offered` count; a device still busy with another rollout's
/// unfinished offer is left for a later walk); each of this rollout's unfinished offers whose
/// device has been silent past its expected interval and grace (the offline detection's, from
/// the later of its last check-in and its offer) fails as `timeout` (one transaction: the
/// offer, the counts, the mark removed); each failed one whose class allows another try and
/// whose backoff is over is offered again (one transaction: the offer, the mark, `failed` down
/// and `retried` up).
async fn walk_page(
    table: &FleetTable,
    rollout: &RolloutItem,
    plan: &FirmwarePlan,
    package: &FirmwareItem,
    devices: &[DeviceItem],
) -> Result<WalkPage, FleetError> {
    let gate = rollout.gate.clone().unwrap_or_default();
    let mut outcome = WalkPage {
        offered: 0,
        timed_out: 0,
        retried: 0,
        health: HealthTally::default(),
    };
    let targeted: Vec<(&DeviceItem, u32)> = devices
        .iter()
        .filter(|d| d.deleting_at.is_none() && d.device_type == plan.device_type)
        .filter_map(|d| Some((d, stage_of(&plan.stages, &d.device_id)? as u32)))
        .collect();
    if targeted.is_empty() {
        return Ok(outcome);
    }
    let (mut states, mut offers) = states_and(
        table,
        targeted.iter().map(|(d, _)| *d),
        |d| ItemKey::FirmwareOffer {
            user: d.user_id.clone(),
            device: d.device_id.clone(),
        },
        |offer: &FirmwareOfferItem| &offer.device_id,
    )
    .await?;
    let now = Timestamp::now();
    // Timeouts count at any hour; new offers and retries only in the maintenance window.
    let offering = plan.maintenance_window.is_none_or(|w| w.contains(now));
    let mut writes = Vec::new();
    for (device, stage) in targeted {
        // No live state: the device is being deleted.
        let Some(state) = states.remove(&device.device_id) else {
            continue;
        };
        let offer = offers.remove(&device.device_id);
        let ours = offer
            .as_ref()
            .filter(|o| o.rollout_id == rollout.rollout_id);
        tally_health(&mut outcome.health, ours, stage, state.has_open_alarm());
        if stage > gate.open {
            continue;
        }
        match offer {
            Some(offer) if offer.rollout_id == rollout.rollout_id => {
                if !offer.phase.finished() && silent_past(&state, &offer, now) {
                    writes
                        .push(time_out(table, device, &offer, now).map(|a| (a, Walked::TimedOut)));
                } else if offering && retry_due(&offer, now) {
                    let attempts = offer.attempts.max(1) + 1;
                    let mut counters = vec![(StageCounter::Failed, -1), (StageCounter::Retried, 1)];
                    if offer.failure == Some(FailureClass::Timeout) {
                        counters.push((StageCounter::TimedOut, -1));
                    }
                    writes.push(
                        offer_to(
                            table,
                            rollout,
                            (plan, package),
                            (device, stage),
                            Some(offer),
                            (attempts, &counters),
                            now,
                        )
                        .map(|a| (a, Walked::Retried)),
                    );
                }
            }
            // Busy with another rollout's offer: left for a later walk.
            Some(other) if !other.phase.finished() && state.firmware_rollout.is_some() => {}
            // Outside the maintenance window no device gets a new offer.
            previous => {
                if offering {
                    writes.push(
                        offer_to(
                            table,
                            rollout,
                            (plan, package),
                            (device, stage),
                            previous,
                            (1, &[(StageCounter::Offered, 1)]),
                            now,
                        )
                        .map(|a| (a, Walked::Offered)),
                    );
                }
            }
        }
    }
    let sent = futures::stream::iter(writes.into_iter().map(|w| async move {
        let (actions, walked) = w?;
        Ok::<_, FleetError>((transact(table, actions, Retry::attempts(4)).await?, walked))
    }))
    .buffer_unordered(CONCURRENCY)
    .collect::<Vec<_>>()
    .await;
    for result in sent {
        match result? {
            (Transaction::Committed, Walked::Offered) => outcome.offered += 1,
            (Transaction::Committed, Walked::TimedOut) => outcome.timed_out += 1,
            (Transaction::Committed, Walked::Retried) => outcome.retried += 1,
            // A check-in, or another run, moved the device meanwhile: the next walk sees it.
            (Transaction::Cancelled(_), _) => {}
        }
    }
    Ok(outcome)
}

/// What the walk did to one device.
#[derive(Clone, Copy)]
enum Walked {
    Offered,
    TimedOut,
    Retried,
}

/// Counts a device of `stage` with `ours` (its offer of this rollout, if any) for the health
/// rule: updated when it runs the new image (`updated`, `succeeded`, or failed `unhealthy`
/// after updating), not yet updated when it has no offer of this rollout or has not started on
/// it; a device in the middle (downloading, installing: rebooting) or failed otherwise (it
/// runs the old image after a failed update) is in neither group.
fn tally_health(
    tally: &mut HealthTally,
    ours: Option<&FirmwareOfferItem>,
    stage: u32,
    unhealthy: bool,
) {
    match ours.map(|o| (o.phase, o.failure)) {
        Some((OfferPhase::Updated | OfferPhase::Succeeded, _))
        | Some((OfferPhase::Failed, Some(FailureClass::Unhealthy))) => {
            tally.count_updated(stage, unhealthy)
        }
        None | Some((OfferPhase::Offered, _)) => tally.count_not_updated(unhealthy),
        _ => {}
    }
}

/// Whether `offer` failed of a class with a retry left and its backoff is over.
fn retry_due(offer: &FirmwareOfferItem, now: Timestamp) -> bool {
    offer.phase == OfferPhase::Failed
        && offer
            .failure
            .and_then(|class| retry_at(class, offer.attempts, offer.updated_at))
            .is_some_and(|at| at <= now)
}

/// Whether `state`'s device has been silent past its expected interval and grace since the
/// later of its last check-in and `offer`'s last move.
fn silent_past(state: &DeviceStateItem, offer: &FirmwareOfferItem, now: Timestamp) -> bool {
    let since = match state.last_seen {
        Some(seen) => seen.max(offer.updated_at),
        None => offer.updated_at,
    };
    let due = crate::model::offline::due_at(&since, &state.device_id, &state.rhythm())
        .unwrap_or_else(|| since.plus_seconds(TIMEOUT_WITHOUT_RHYTHM_SECONDS));
    now > due
}

/// The transaction offering `device` (of `stage`) the package, its `attempts`-th time: its
/// offer (replacing `previous`, a finished offer, of an earlier rollout or this one's failed
/// one, conditioned on it being as read), the live state's mark, and the stage's `counters`.
fn offer_to(
    table: &FleetTable,
    rollout: &RolloutItem,
    (plan, package): (&FirmwarePlan, &FirmwareItem),
    (device, stage): (&DeviceItem, u32),
    previous: Option<FirmwareOfferItem>,
    (attempts, counters): (u32, &[(StageCounter, i64)]),
    now: Timestamp,
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let offer = FirmwareOfferItem {
        user_id: device.user_id.clone(),
        device_id: device.device_id.clone(),
        rollout_id: rollout.rollout_id.clone(),
        firmware_id: plan.firmware_id.clone(),
        version: plan.version.clone(),
        sha256: package.sha256.clone(),
        size: package.size,
        signature: package.signature.clone(),
        object_key: package.object_key(),
        object_version: package.object_version.clone(),
        stage,
        phase: OfferPhase::Offered,
        from_version: None,
        healthy_check_ins: 0,
        failure: None,
        reason: None,
        attempts,
        offered_at: now,
        updated_at: now,
    };
    let as_read = match &previous {
        None => Condition::absent(PK),
        Some(p) => Condition::equals(
            FirmwareOfferItem::ROLLOUT_ID,
            string_value(p.rollout_id.as_str()),
        )
        .and(Condition::equals(
            FirmwareOfferItem::PHASE,
            serde_dynamo::to_attribute_value(p.phase)?,
        )),
    };
    let put = Put::builder()
        .table_name(table.name())
        .set_item(Some(offer.to_item(&table.config.shards)?))
        .expressions(Expressions::condition(as_read))
        .build()
        .map_err(FleetError::internal)?;
    let mark = update_action(
        table,
        state_key_of(device).attributes(),
        Expressions::write(
            Update::new().set(
                DeviceStateItem::FIRMWARE_ROLLOUT,
                string_value(rollout.rollout_id.as_str()),
            ),
            Some(Condition::exists(PK)),
        ),
    )?;
    let mut actions = vec![TransactWriteItem::builder().put(put).build(), mark];
    actions.extend(count_changes(
        table,
        &device.user_id,
        &rollout.rollout_id,
        &device.device_id,
        stage,
        counters,
    )?);
    Ok(actions)
}

/// The transaction timing `offer` out: failed as `timeout`, the counts, the mark removed.
fn time_out(
    table: &FleetTable,
    device: &DeviceItem,
    offer: &FirmwareOfferItem,
    now: Timestamp,
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let changes = Update::new()
        .set(
            FirmwareOfferItem::PHASE,
            serde_dynamo::to_attribute_value(OfferPhase::Failed)?,
        )
        .set(
            FirmwareOfferItem::FAILURE,
            serde_dynamo::to_attribute_value(FailureClass::Timeout)?,
        )
        .set(
            FirmwareOfferItem::REASON,
            string_value("the device did not check in within its expected interval and grace"),
        )
        .set(FirmwareOfferItem::UPDATED_AT, string_value(now.to_string()));
    let as_read = Condition::equals(
        FirmwareOfferItem::ROLLOUT_ID,
        string_value(offer.rollout_id.as_str()),
    )
    .and(Condition::equals(
        FirmwareOfferItem::PHASE,
        serde_dynamo::to_attribute_value(offer.phase)?,
    ))
    .and(Condition::equals(
        FirmwareOfferItem::UPDATED_AT,
        string_value(offer.updated_at.to_string()),
    ));
    let mut actions = vec![update_action(
        table,
        offer.item_key().attributes(),
        Expressions::write(changes, Some(as_read)),
    )?];
    actions.extend(count_changes(
        table,
        &device.user_id,
        &offer.rollout_id,
        &device.device_id,
        offer.stage,
        &counter_changes(offer.phase, OfferPhase::Failed, Some(FailureClass::Timeout)),
    )?);
    actions.push(update_action(
        table,
        state_key_of(device).attributes(),
        Expressions::write(
            Update::new().remove(DeviceStateItem::FIRMWARE_ROLLOUT),
            Some(Condition::equals(
                DeviceStateItem::FIRMWARE_ROLLOUT,
                string_value(offer.rollout_id.as_str()),
            )),
        ),
    )?);
    Ok(actions)
}

/// The walk's position and the gate, conditioned on the rollout running at the position read
/// ([`still_at`]); `Ok(false)` when another run or a pause or cancel moved it meanwhile.
async fn save_gate(
    table: &FleetTable,
    rollout: &RolloutItem,
    gate: &StageGate,
    position: Option<&DeviceId>,
) -> Result<bool, FleetError> {
    let mut update = Update::new().set(RolloutItem::GATE, serde_dynamo::to_attribute_value(gate)?);
    update = match position {
        Some(p) => update.set(RolloutItem::POSITION, string_value(p.as_str())),
        None => update.remove(RolloutItem::POSITION),
    };
    conditional(table, rollout, update, still_at(rollout.position.as_ref())).await
}

/// The rollout paused by the worker with `reason` (conditioned on it running).
async fn pause(
    table: &FleetTable,
    rollout: &RolloutItem,
    reason: String,
) -> Result<bool, FleetError> {
    let update = Update::new()
        .set(
            RolloutItem::STATUS,
            serde_dynamo::to_attribute_value(RolloutStatus::Paused)?,
        )
        .set(RolloutItem::PAUSED_REASON, string_value(reason));
    conditional(table, rollout, update, still_at(rollout.position.as_ref())).await
}

/// The rollout paused by the worker with `reason` at the end of a walk, its `gate` (the walk
/// done, the tally judged) saved with it, conditioned on it running at the position read.
async fn pause_with_gate(
    table: &FleetTable,
    rollout: &RolloutItem,
    gate: &StageGate,
    reason: String,
) -> Result<bool, FleetError> {
    let update = Update::new()
        .set(
            RolloutItem::STATUS,
            serde_dynamo::to_attribute_value(RolloutStatus::Paused)?,
        )
        .set(RolloutItem::PAUSED_REASON, string_value(reason))
        .set(RolloutItem::GATE, serde_dynamo::to_attribute_value(gate)?)
        .remove(RolloutItem::POSITION);
    conditional(table, rollout, update, still_at(rollout.position.as_ref())).await
}

/// One conditional UpdateItem of the rollout; `Ok(false)` when the condition failed.
pub(super) async fn conditional(
    table: &FleetTable,
    rollout: &RolloutItem,
    update: Update,
    condition: Condition,
) -> Result<bool, FleetError> {
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(rollout.item_key().attributes()))
        .expressions(Expressions::write(update, Some(condition)))
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
