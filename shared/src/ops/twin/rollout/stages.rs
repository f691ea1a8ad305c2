//! The scheduled worker's part in a staged firmware rollout (issue 40 items 3 to 5): per run,
//! the stage counts its last whole walk tallied decide whether the next stage opens (the last
//! open one met the success share and soaked), or whether it is done; then a walk of the
//! target, a page at a time, offers the firmware to the devices of the open stages not offered
//! yet, times out the offered ones that went silent, retries the failed ones their class
//! allows, and tallies every device's part from the live states it reads: at the walk's end
//! those counts are judged by the abort rule and the health rule.

use super::progress::{finish, still_at, target_page, RolloutRun};
use super::*;
use crate::model::entities::firmware::FirmwareItem;
use crate::model::firmware::stage_of;
use crate::model::rollout_health::{health_pause_reason, HealthTally};
use crate::model::rollout_progress::{retry_at, FailureClass, FirmwareProgress, OfferPhase};
use crate::model::rollout_stages::{merge_tally, tally_device, StageCounts, StageGate, StageTally};
use crate::ops::twin::firmware_offer::write_progress;

/// How often at most a firmware rollout's walk writes its position and tally on the rollout
/// item between its ends: a walk's page moves devices (their live states), never the rollout,
/// so the checkpoint only bounds what a crashed run walks again and how long a pause or cancel
/// by the owner takes to stop the walk (a paused rollout's offers are not served meanwhile:
/// the check-in reads the status). Per page, as before, it cost a million-device rollout 2.5
/// write units a device; by time, the checkpoints no longer grow with the fleet.
pub const WALK_CHECKPOINT_SECONDS: u64 = 5;

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

/// The stages of `plan` as `gate` has them open, with the counts of the last whole walk (of
/// the walk under way until one ended).
pub fn stage_views(plan: &FirmwarePlan, gate: &StageGate) -> Vec<StageView> {
    let counts = gate.counts.as_ref().unwrap_or(&gate.tally);
    plan.stages
        .iter()
        .enumerate()
        .map(|(i, percent)| {
            let status = if i as u32 > gate.open {
                "waiting"
            } else if (i as u32) < gate.open {
                "passed"
            } else if gate.met_at.is_some() {
                "soaking"
            } else {
                "open"
            };
            StageView {
                percent: *percent,
                status,
                counts: counts.get(i).copied().unwrap_or_default(),
            }
        })
        .collect()
}

/// Why a stage's failures stop the rollout, if they do: at least `abort.failurePercent` of at
/// least `abort.minFinished` finished devices of one open stage.
pub fn abort_reason(
    plan: &FirmwarePlan,
    gate: &StageGate,
    counts: &[StageCounts],
) -> Option<String> {
    (0..=gate.open).find_map(|stage| {
        let c = counts.get(stage as usize).copied().unwrap_or_default();
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
pub fn stage_met(plan: &FirmwarePlan, gate: &StageGate, counts: &[StageCounts]) -> bool {
    let c = counts.get(gate.open as usize).copied().unwrap_or_default();
    gate.walked && c.succeeded * 100 >= i64::from(plan.success_percent) * c.offered
}

/// A firmware rollout taken up in a worker run: judged, then walked a page a turn
/// ([`walk_firmware_page`]), in a lane of its own among the owners' turns.
pub(super) struct FirmwareWalk {
    /// The rollout as the walk has it (its gate and position move with each page, in memory
    /// until the next checkpoint).
    pub(super) rollout: RolloutItem,
    plan: FirmwarePlan,
    /// The position the rollout item holds (its last checkpoint): the condition of the next.
    saved_position: Option<DeviceId>,
    /// When the walk last wrote its checkpoint (or was taken up).
    saved_at: Instant,
    /// Whether pages were walked since then (the rollout item is behind the walk).
    unsaved: bool,
}

/// Takes up a running firmware rollout for a run ([`advance_rollouts`] does, when its lane's
/// turn first comes): the package read (one GetItem); then, judged on the counts of its last
/// whole walk (on the rollout), one of: paused for a missing package (one conditional
/// UpdateItem); done (every stage open, walked and finished: the worker's finish); the next
/// stage opened, or the soak started (one conditional UpdateItem). Returns the walk to go on with, page by
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
    if !package.is_some_and(|p| p.status == FirmwareStatus::Ready) {
        pause(
            table,
            &rollout,
            "its firmware package is gone or no longer ready: nothing more is offered".into(),
        )
        .await?;
        run.paused += 1;
        return Ok(None);
    }
    let counts = gate.counts.clone().unwrap_or_default();
    let last = plan.stages.len().saturating_sub(1) as u32;
    if stage_met(&plan, &gate, &counts) {
        let now = Timestamp::now();
        let all_finished = (0..=gate.open).all(|s| {
            let c = counts.get(s as usize).copied().unwrap_or_default();
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
            // A walk's tallies are of one set of open stages.
            gate.health = HealthTally::default();
            gate.tally = StageTally::new();
            if !save_gate(table, &rollout, rollout.position.as_ref(), &gate, None).await? {
                run.stale += 1;
                return Ok(None);
            }
            rollout.position = None;
            run.stages_opened += 1;
        } else if gate.met_at.is_none() && gate.open < last {
            gate.met_at = Some(now);
            let at = rollout.position.as_ref();
            if !save_gate(table, &rollout, at, &gate, at).await? {
                run.stale += 1;
                return Ok(None);
            }
        }
    }
    rollout.gate = Some(gate);
    Ok(Some(FirmwareWalk {
        saved_position: rollout.position.clone(),
        rollout,
        plan,
        saved_at: Instant::now(),
        unsaved: false,
    }))
}

/// One page of a firmware rollout's walk: its turn in the run ([`walk_page`], then the page's
/// counts and health merged into the walk's tally). The position and tally are checkpointed on
/// the rollout under the running condition at the walk's end, and between its ends at most
/// every [`WALK_CHECKPOINT_SECONDS`] ([`save_walk`] writes what is left when the run stops).
/// Returns whether the walk goes on in this run: not once it reached the end of the target (a
/// whole walk per run at most: the next run walks again, for devices that joined the target
/// and for silent ones, and judges the stages first), nor after the health rule paused it or
/// another run, a pause or a cancel moved it.
pub(super) async fn walk_firmware_page(
    table: &FleetTable,
    walk: &mut FirmwareWalk,
    run: &mut RolloutRun,
) -> Result<bool, FleetError> {
    let rollout = &mut walk.rollout;
    let (devices, next) = target_page(table, rollout).await?;
    let page = walk_page(table, rollout, &walk.plan, &devices).await?;
    run.pages += 1;
    run.offered += page.offered;
    run.timed_out += page.timed_out;
    run.retried += page.retried;
    let mut gate = rollout.gate.clone().unwrap_or_default();
    gate.health.merge(&page.health);
    merge_tally(&mut gate.tally, &page.counts);
    if next.is_none() {
        gate.walked = true;
        // Each whole walk's tallies are the counts the rules judge and the owner reads.
        let counts = std::mem::take(&mut gate.tally);
        let tally = std::mem::take(&mut gate.health);
        let plan = &walk.plan;
        let reason = abort_reason(plan, &gate, &counts).or_else(|| {
            health_pause_reason(&tally, gate.health_accepted_through, |stage| {
                plan.stages.get(stage as usize).copied().unwrap_or(100)
            })
        });
        // The last open stage met its criterion on this walk's counts: its soak starts now.
        let last = plan.stages.len().saturating_sub(1) as u32;
        if reason.is_none()
            && gate.met_at.is_none()
            && gate.open < last
            && stage_met(plan, &gate, &counts)
        {
            gate.met_at = Some(Timestamp::now());
        }
        gate.counts = Some(counts);
        gate.counted_at = Some(Timestamp::now());
        gate.last_health = Some(tally);
        if let Some(reason) = reason {
            let paused =
                pause_with_gate(table, rollout, walk.saved_position.as_ref(), &gate, reason)
                    .await?;
            walk.unsaved = false;
            run.paused += u32::from(paused);
            run.stale += u32::from(!paused);
            return Ok(false);
        }
    }
    rollout.position = next.clone();
    rollout.gate = Some(gate);
    walk.unsaved = true;
    let due = Duration::from_secs(WALK_CHECKPOINT_SECONDS);
    if (next.is_none() || walk.saved_at.elapsed() >= due) && !save_walk(table, walk).await? {
        run.stale += 1;
        return Ok(false);
    }
    Ok(next.is_some())
}

/// The walk's checkpoint: its position and tally on the rollout (one conditional UpdateItem,
/// [`still_at`] the position last written), when pages were walked since; `Ok(false)` when
/// another run, a pause or a cancel moved the rollout meanwhile (the pages since are walked
/// again by whoever carries it on).
pub(super) async fn save_walk(
    table: &FleetTable,
    walk: &mut FirmwareWalk,
) -> Result<bool, FleetError> {
    if !walk.unsaved {
        return Ok(true);
    }
    let gate = walk.rollout.gate.clone().unwrap_or_default();
    let position = walk.rollout.position.clone();
    let saved = save_gate(
        table,
        &walk.rollout,
        walk.saved_position.as_ref(),
        &gate,
        position.as_ref(),
    )
    .await?;
    walk.unsaved = false;
    if saved {
        walk.saved_position = position;
        walk.saved_at = Instant::now();
    }
    Ok(saved)
}

/// What a page of the walk did, and the counts and health it saw.
struct WalkPage {
    offered: u64,
    timed_out: u64,
    retried: u64,
    counts: StageTally,
    health: HealthTally,
}

/// One page of `devices` of the target: the live states of its devices of the package's type
/// read (one consistent BatchGetItem), each device's part in this rollout tallied for the
/// counts and for the health rule (updated devices per stage, and the not yet updated, each
/// healthy or not); then, in the open stages, one conditional UpdateItem of the live state's
/// `firmware` ([`write_progress`]) for each device the walk moves: one with no part in this
/// rollout is offered it (a device still busy with another rollout's open part is left for a
/// later walk); one whose open part has been silent past its expected interval and grace (the
/// offline detection's, from the later of its last check-in and its part's last move) fails as
/// `timeout`; a failed one whose class allows another try and whose backoff is over is offered
/// it again. A write that loses a race with a check-in changes nothing (the next walk sees the
/// device), and the device is counted as read.
async fn walk_page(
    table: &FleetTable,
    rollout: &RolloutItem,
    plan: &FirmwarePlan,
    devices: &[DeviceItem],
) -> Result<WalkPage, FleetError> {
    let gate = rollout.gate.clone().unwrap_or_default();
    let mut outcome = WalkPage {
        offered: 0,
        timed_out: 0,
        retried: 0,
        counts: StageTally::new(),
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
    let mut states = read_states(table, targeted.iter().map(|(d, _)| *d)).await?;
    let now = Timestamp::now();
    // Timeouts count at any hour; new offers and retries only in the maintenance window.
    let offering = plan.maintenance_window.is_none_or(|w| w.contains(now));
    let mut writes = Vec::new();
    for (device, stage) in targeted {
        // No live state: the device is being deleted.
        let Some(state) = states.remove(&device.device_id) else {
            continue;
        };
        let ours = state
            .firmware
            .as_ref()
            .filter(|p| p.rollout_id == rollout.rollout_id);
        tally_health(&mut outcome.health, ours, stage, state.has_open_alarm());
        if stage > gate.open {
            continue;
        }
        let offer = |attempts: u32| {
            FirmwareProgress::offered(
                rollout.rollout_id.clone(),
                (plan.firmware_id.clone(), plan.version.clone()),
                stage,
                attempts,
                now,
            )
        };
        let walked = match (ours, &state.firmware) {
            (Some(part), _) if part.open() && silent_past(&state, part, now) => {
                Some((part.timed_out(now), Walked::TimedOut))
            }
            (Some(part), _) if offering && retry_due(part, now) => {
                Some((offer(part.attempts.max(1) + 1), Walked::Retried))
            }
            (Some(_), _) => None,
            // Busy with another rollout's open part: left for a later walk.
            (None, Some(other)) if other.open() => continue,
            // Outside the maintenance window no device gets a new offer.
            (None, _) if offering => Some((offer(1), Walked::Offered)),
            (None, _) => continue,
        };
        match walked {
            Some((next, walked)) => writes.push((state_key_of(device), state, next, walked)),
            None => {
                if let Some(part) = ours {
                    tally_device(&mut outcome.counts, part);
                }
            }
        }
    }
    let sent = futures::stream::iter(writes.into_iter().map(|w| async move {
        let (key, state, next, walked) = w;
        let committed = write_walked(table, key, &state, &next).await?;
        Ok::<_, FleetError>((state, next, walked, committed))
    }))
    .buffer_unordered(CONCURRENCY)
    .collect::<Vec<_>>()
    .await;
    for result in sent {
        let (state, next, walked, committed) = result?;
        if !committed {
            // A check-in, or another run, moved the device meanwhile: counted as read (the
            // next walk sees where it is).
            if let Some(part) = state
                .firmware
                .as_ref()
                .filter(|p| p.rollout_id == rollout.rollout_id)
            {
                tally_device(&mut outcome.counts, part);
            }
            continue;
        }
        tally_device(&mut outcome.counts, &next);
        match walked {
            Walked::Offered => outcome.offered += 1,
            Walked::TimedOut => outcome.timed_out += 1,
            Walked::Retried => outcome.retried += 1,
        }
    }
    Ok(outcome)
}

/// The walk's write of a device's part as `next` (one conditional UpdateItem of its live state
/// at `key`, [`write_progress`], on the part as `state` had it); `Ok(false)` when a check-in or
/// another run moved it meanwhile, or the device is gone.
async fn write_walked(
    table: &FleetTable,
    key: ItemKey,
    state: &DeviceStateItem,
    next: &FirmwareProgress,
) -> Result<bool, FleetError> {
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(write_progress(next, state.firmware_seq)?)
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

/// What the walk did to one device.
#[derive(Clone, Copy)]
enum Walked {
    Offered,
    TimedOut,
    Retried,
}

/// Counts a device of `stage` with `ours` (its part in this rollout, if any) for the health
/// rule: updated when it runs the new image (`updated`, `succeeded`, or failed `unhealthy`
/// after updating), not yet updated when it has no part in this rollout or has not started on
/// it; a device in the middle (downloading, installing: rebooting) or failed otherwise (it
/// runs the old image after a failed update) is in neither group.
fn tally_health(
    tally: &mut HealthTally,
    ours: Option<&FirmwareProgress>,
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

/// Whether `part` failed of a class with a retry left and its backoff is over.
fn retry_due(part: &FirmwareProgress, now: Timestamp) -> bool {
    part.phase == OfferPhase::Failed
        && !part.ended
        && part
            .failure
            .and_then(|class| retry_at(class, part.attempts, part.updated_at))
            .is_some_and(|at| at <= now)
}

/// Whether `state`'s device has been silent past its expected interval and grace since the
/// later of its last check-in and `part`'s last move.
fn silent_past(state: &DeviceStateItem, part: &FirmwareProgress, now: Timestamp) -> bool {
    let since = match state.last_seen {
        Some(seen) => seen.max(part.updated_at),
        None => part.updated_at,
    };
    let due = crate::model::offline::due_at(&since, &state.device_id, &state.rhythm())
        .unwrap_or_else(|| since.plus_seconds(TIMEOUT_WITHOUT_RHYTHM_SECONDS));
    now > due
}

/// The walk's position and the gate, conditioned on the rollout running at `read_at`, the
/// position it holds ([`still_at`]); `Ok(false)` when another run or a pause or cancel moved
/// it meanwhile.
async fn save_gate(
    table: &FleetTable,
    rollout: &RolloutItem,
    read_at: Option<&DeviceId>,
    gate: &StageGate,
    position: Option<&DeviceId>,
) -> Result<bool, FleetError> {
    let mut update = Update::new().set(RolloutItem::GATE, serde_dynamo::to_attribute_value(gate)?);
    update = match position {
        Some(p) => update.set(RolloutItem::POSITION, string_value(p.as_str())),
        None => update.remove(RolloutItem::POSITION),
    };
    conditional(table, rollout, update, still_at(read_at)).await
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
    read_at: Option<&DeviceId>,
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
    conditional(table, rollout, update, still_at(read_at)).await
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
