//! The scheduled worker of rollouts (AP-T7, the rollout-worker function every minute): owners
//! take turns a page of [`ROLLOUT_PAGE`] devices at a time, checkpointing each page on the
//! rollout (a firmware walk: at its end, at most every few seconds between, and when the run
//! stops); a rollout whose devices are all done is finished, its slot given back. A staged
//! firmware rollout takes turns in a lane of its own (`stages::take_up_firmware`, then
//! `stages::walk_firmware_page` a turn); a paused one is skipped, never ended.

use super::progress::{checkpoint, finish, target_page, RolloutRun};
use super::stages::{save_walk, take_up_firmware, walk_firmware_page, FirmwareWalk};
use super::*;

/// The rollout worker's answer to its scheduled event: `{"rollouts": {...}}`, what it did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RolloutWorkerAnswer {
    /// What the run did.
    pub rollouts: RolloutRun,
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

/// The rollout a lane has in hand.
// One per lane of a run (a few hundred bytes each, never moved in bulk): boxing buys nothing.
#[allow(clippy::large_enum_variant)]
enum InHand {
    /// A desired-state rollout and its patch.
    Desired(RolloutItem, TwinDocument),
    /// A staged firmware rollout's walk.
    Firmware(FirmwareWalk),
}

impl InHand {
    fn rollout(&self) -> &RolloutItem {
        match self {
            InHand::Desired(rollout, _) => rollout,
            InHand::Firmware(walk) => &walk.rollout,
        }
    }
}

/// One lane's work in a run: an owner's running desired-state rollouts oldest first, or one
/// staged firmware rollout; and the one in hand.
struct OwnerTurns {
    /// Whose rollouts: an owner's lanes share the owner's pace.
    owner: UserId,
    /// Pages this lane took in the run (an owner's turn goes to its lane with the fewest).
    pages: u32,
    waiting: VecDeque<RunningRolloutItem>,
    current: Option<InHand>,
    /// Nothing more for this owner in this run (all done, a failed turn, or a stale rollout).
    over: bool,
}

/// AP-T7: carries the running rollouts forward until `deadline`. The running list is read
/// whole (Query pages of `ROLLOUTS#RUNNING`); then turn after turn, every owner gets one page
/// of one of its lanes (the one with the fewest pages in the run):
/// an owner's desired-state rollouts are one lane, each staged firmware rollout (which
/// changes no desired state, so it needs no place in that order) a lane of its own, walked
/// a page a turn until it has passed its whole target once in the run
/// (`stages::walk_firmware_page`). A desired-state lane's page is of the owner's oldest
/// running rollout (a GetItem of
/// it when taken up; the targets: one Query; for a tag, their device items: one
/// BatchGetItem; their live states and desired documents: one BatchGetItem; one transaction
/// per device, at most [`CONCURRENCY`] at once; the position: one conditional UpdateItem),
/// so no owner's large or endless rollout delays another owner's by more than a page a turn.
/// An owner's rollouts are applied one after another in creation order (their ids sort by
/// it), so a newer rollout's value is the one a device keeps. A device whose merged
/// document would break the document contract, or whose write fails, is recorded on the
/// rollout and skipped; a turn that fails (its page could not be read) is logged and leaves
/// that rollout where it was for the next run, the other owners going on. The position only
/// moves forward ([`checkpoint`]): an overlapping run that finds it moved leaves the owner
/// to the run ahead. A turn takes at least a page's share of a second at
/// [`ROLLOUT_DEVICES_PER_SECOND`].
pub async fn advance_rollouts(
    table: &FleetTable,
    deadline: Instant,
) -> Result<RolloutRun, FleetError> {
    let running = list_running(table).await?;
    let mut owners: Vec<OwnerTurns> = Vec::new();
    let mut last_owner: Option<UserId> = None;
    for entry in running {
        if entry.firmware_id.is_some() {
            owners.push(OwnerTurns {
                owner: entry.user_id.clone(),
                pages: 0,
                waiting: VecDeque::from([entry]),
                current: None,
                over: false,
            });
            continue;
        }
        if last_owner.as_ref() != Some(&entry.user_id) {
            last_owner = Some(entry.user_id.clone());
            owners.push(OwnerTurns {
                owner: entry.user_id.clone(),
                pages: 0,
                waiting: VecDeque::new(),
                current: None,
                over: false,
            });
        }
        if let Some(owner) = owners.last_mut() {
            owner.waiting.push_back(entry);
        }
    }
    let mut run = RolloutRun {
        owners: owners
            .iter()
            .map(|o| &o.owner)
            .collect::<std::collections::HashSet<_>>()
            .len() as u32,
        ..RolloutRun::default()
    };
    // The pace: a turn gives each owner at most one page of ROLLOUT_PAGE devices (from the
    // owner's lane with the fewest pages so far, so its firmware walks and its desired-state
    // changes share the owner's pace and its partition's reads stay bounded however many it
    // runs), and takes at least that page's share of a second.
    let floor = Duration::from_secs_f64(ROLLOUT_PAGE as f64 / ROLLOUT_DEVICES_PER_SECOND as f64);
    'turns: while owners.iter().any(|o| !o.over) {
        let started = Instant::now();
        run.turns += 1;
        let mut chosen: Vec<usize> = Vec::new();
        for (i, lane) in owners.iter().enumerate().filter(|(_, o)| !o.over) {
            match chosen.iter_mut().find(|c| owners[**c].owner == lane.owner) {
                Some(c) if owners[*c].pages > lane.pages => *c = i,
                Some(_) => {}
                None => chosen.push(i),
            }
        }
        for i in chosen {
            let owner = &mut owners[i];
            owner.pages += 1;
            if Instant::now() >= deadline {
                break 'turns;
            }
            if let Err(err) = owner_turn(table, owner, &mut run).await {
                run.errors += 1;
                owner.over = true;
                if let Some(rollout) = owner.current.as_ref().map(InHand::rollout) {
                    tracing::warn!(
                        user = %rollout.user_id,
                        rollout = %rollout.rollout_id,
                        error = %err,
                        "a rollout's turn failed; it resumes from its position next run"
                    );
                } else {
                    tracing::warn!(error = %err, "a rollout owner's turn failed");
                }
            }
        }
        if let Some(rest) = floor.checked_sub(started.elapsed()) {
            tokio::time::sleep(rest.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }
    // The firmware walks stopped by the deadline (or a failed turn) checkpoint what they
    // walked since their last checkpoint, so the next run goes on from there.
    for owner in &mut owners {
        if let Some(InHand::Firmware(walk)) = owner.current.as_mut() {
            match save_walk(table, walk).await {
                Ok(true) => {}
                Ok(false) => run.stale += 1,
                Err(err) => {
                    run.errors += 1;
                    tracing::warn!(
                        user = %walk.rollout.user_id,
                        rollout = %walk.rollout.rollout_id,
                        error = %err,
                        "a firmware walk's checkpoint failed; the next run walks its pages again"
                    );
                }
            }
        }
    }
    Ok(run)
}

/// The whole running list, in key order: owner by owner, each owner's rollouts oldest first.
async fn list_running(table: &FleetTable) -> Result<Vec<RunningRolloutItem>, FleetError> {
    let mut running = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let listed = Expressions::builder()
            .key_condition(Condition::equals(PK, string_value(RUNNING_ROLLOUTS_PK)))
            .build();
        let (items, last) = query(
            table
                .client
                .query()
                .table_name(table.name())
                .expressions(listed)
                .set_exclusive_start_key(start.take())
                .consistent_read(true),
        )
        .await?;
        for item in items {
            running.push(RunningRolloutItem::from_item(item)?);
        }
        match last {
            Some(key) => start = Some(key),
            None => return Ok(running),
        }
    }
}

/// One owner's turn: one page of their oldest running rollout (taking up the next one
/// first when none is in hand). Sets `over` when the owner has nothing more in this run.
async fn owner_turn(
    table: &FleetTable,
    owner: &mut OwnerTurns,
    run: &mut RolloutRun,
) -> Result<(), FleetError> {
    if owner.current.is_none() {
        loop {
            let Some(running) = owner.waiting.pop_front() else {
                owner.over = true;
                return Ok(());
            };
            match read_rollout(table, &running).await? {
                // Paused: it keeps its place on the list (and its package), offering nothing
                // until resumed.
                Some(rollout) if rollout.status == RolloutStatus::Paused => continue,
                // A firmware rollout (its own lane): its stages judged now, then its walk a
                // page a turn.
                Some(rollout)
                    if rollout.firmware.is_some() && rollout.status == RolloutStatus::Running =>
                {
                    run.rollouts += 1;
                    match take_up_firmware(table, rollout, run).await? {
                        Some(walk) => {
                            owner.current = Some(InHand::Firmware(walk));
                            break;
                        }
                        None => continue,
                    }
                }
                Some(rollout) if rollout.status == RolloutStatus::Running => {
                    let patch = TwinDocument::from_text(&rollout.patch)?;
                    run.rollouts += 1;
                    owner.current = Some(InHand::Desired(rollout, patch));
                    break;
                }
                // Gone, done or cancelled: its entry left behind by an end cut short.
                _ => delete_running(table, &running).await?,
            }
        }
    }
    let (rollout, patch) = match owner.current.as_mut() {
        None => return Ok(()),
        Some(InHand::Firmware(walk)) => {
            if !walk_firmware_page(table, walk, run).await? {
                // Walked once this run (or paused, or another run's): the lane is done.
                owner.current = None;
            }
            return Ok(());
        }
        Some(InHand::Desired(rollout, patch)) => (rollout, patch),
    };
    let (devices, next) = target_page(table, rollout).await?;
    let page = apply_page(table, &devices, patch).await?;
    run.pages += 1;
    run.devices += page.changed;
    run.devices_failed += page.failures.len() as u64;
    let read_at = rollout.position.clone();
    let mut progress = rollout.clone();
    progress.devices_updated += page.changed;
    progress.record_failures(page.failures);
    progress.position = next.clone().or(progress.position);
    let moved = if next.is_none() {
        finish(table, &progress, read_at.as_ref()).await?
    } else {
        checkpoint(table, &progress, read_at.as_ref()).await?
    };
    if !moved {
        // Another run moved this rollout on meanwhile: it is that run's to carry on, and so
        // are this owner's later rollouts (taking them up here could apply them before it).
        run.stale += 1;
        owner.current = None;
        owner.over = true;
        return Ok(());
    }
    if next.is_none() {
        run.finished += 1;
        owner.current = None;
        owner.over = owner.waiting.is_empty();
    } else {
        *rollout = progress;
    }
    Ok(())
}

async fn read_rollout(
    table: &FleetTable,
    running: &RunningRolloutItem,
) -> Result<Option<RolloutItem>, FleetError> {
    read_consistent(
        table,
        &ItemKey::Rollout {
            user: running.user_id.clone(),
            rollout: running.rollout_id.clone(),
        },
    )
    .await
}

/// What a page did: devices changed, and those left as they were with the reason.
struct PageOutcome {
    changed: u64,
    failures: Vec<RolloutFailure>,
}

/// What became of one device.
enum DeviceOutcome {
    Changed,
    Unchanged,
    /// Left as it was, for this reason (the owner reads it on the rollout).
    Refused(String),
}

/// Merges `patch` into the desired state of each of `devices` (skipping any being deleted):
/// how many changed, and which could not be (recorded, not fatal: the others go on).
async fn apply_page(
    table: &FleetTable,
    devices: &[DeviceItem],
    patch: &TwinDocument,
) -> Result<PageOutcome, FleetError> {
    let mut outcome = PageOutcome {
        changed: 0,
        failures: Vec::new(),
    };
    let devices: Vec<&DeviceItem> = devices.iter().filter(|d| d.deleting_at.is_none()).collect();
    if devices.is_empty() {
        return Ok(outcome);
    }
    // The live states (the version) and the desired documents of the page: one BatchGetItem.
    let (mut states, mut documents) = states_and(
        table,
        devices.iter().copied(),
        |d| ItemKey::Desired {
            user: d.user_id.clone(),
            device: d.device_id.clone(),
        },
        |doc: &DesiredStateItem| &doc.device_id,
    )
    .await?;
    let mut changes = Vec::new();
    for d in devices {
        // A device without a live state is being deleted: nothing to change.
        let Some(state) = states.remove(&d.device_id) else {
            continue;
        };
        let current = documents
            .remove(&d.device_id)
            .filter(|doc| doc.version == state.twin.desired_version);
        changes.push(async move {
            let result = apply_one(table, d, state.twin.desired_version, current, patch).await;
            (d, result)
        });
    }
    let results: Vec<(&DeviceItem, Result<DeviceOutcome, FleetError>)> =
        futures::stream::iter(changes)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
    for (device, result) in results {
        let reason = match result {
            Ok(DeviceOutcome::Changed) => {
                outcome.changed += 1;
                continue;
            }
            Ok(DeviceOutcome::Unchanged) => continue,
            Ok(DeviceOutcome::Refused(reason)) => reason,
            Err(err) => {
                tracing::warn!(
                    user = %device.user_id,
                    device = %device.device_id,
                    error = %err,
                    "a rollout could not change a device's desired state"
                );
                "its desired state could not be read or written; it was left as it was".into()
            }
        };
        outcome.failures.push(RolloutFailure {
            device_id: device.device_id.clone(),
            reason,
        });
    }
    // Failures in the order the devices are walked, whatever order the writes finished in.
    outcome
        .failures
        .sort_by(|a, b| a.device_id.cmp(&b.device_id));
    Ok(outcome)
}

/// One device's desired state with `patch` merged in; on a conflict (its owner set it
/// meanwhile) read again and merge into the newer one (a few times). A merge whose result
/// breaks the contract of `PUT .../desired` ([`MAX_DOCUMENT_BYTES`], the depth) is refused,
/// not written: the device's report of it would be refused, and the document could grow
/// toward DynamoDB's 400 KB item limit, past which every write to it fails.
async fn apply_one(
    table: &FleetTable,
    device: &DeviceItem,
    mut version: u64,
    mut current: Option<DesiredStateItem>,
    patch: &TwinDocument,
) -> Result<DeviceOutcome, FleetError> {
    for _ in 0..4 {
        let base = match &current {
            Some(doc) => TwinDocument::from_text(&doc.document)?,
            None => TwinDocument::default(),
        };
        let next = base.merged(patch);
        if current.is_some() && next == base {
            return Ok(DeviceOutcome::Unchanged);
        }
        if let Err(refused) = TwinDocument::parse("desired", next.as_value(), MAX_DOCUMENT_BYTES) {
            return Ok(DeviceOutcome::Refused(format!(
                "the merged desired document would break its contract: {refused}"
            )));
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
            return Ok(DeviceOutcome::Changed);
        }
        let Some(state) = read_state(table, state_key_of(device)).await? else {
            return Ok(DeviceOutcome::Unchanged);
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
