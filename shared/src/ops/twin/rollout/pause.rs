//! An owner's pause and resume of a staged firmware rollout (issue 40 item 4):
//! `POST /me/rollouts/{rolloutId}/pause` and `/resume`, served by the firmware function (beside
//! cancel). A paused rollout offers nothing; devices already on it still report and count.

use super::stages::conditional;
use super::*;
use crate::model::rollout_stages::StageBaseline;

/// What an owner's pause says, as `pausedReason`.
pub const PAUSED_BY_OWNER: &str = "paused by its owner";

/// AP-F7, implemented by [`pause_rollout`].
pub const PAUSE_ROLLOUT: AccessPattern = AccessPattern {
    id: PatternId::PauseRollout,
    description: "an owner pauses a running firmware rollout (nothing more is offered until it resumes)",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem, Operation::UpdateItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = ROLLOUT#{rolloutId} (read, then its status conditioned on running)",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /me/rollouts/{rolloutId}/pause"),
    implemented_by: implemented_by!(pause_rollout),
};

/// AP-F8, implemented by [`resume_rollout`].
pub const RESUME_ROLLOUT: AccessPattern = AccessPattern {
    id: PatternId::ResumeRollout,
    description: "resume a paused firmware rollout, the counts of the worker's last walk its abort rule's new baseline",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem, Operation::UpdateItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = ROLLOUT#{rolloutId} (read, then its status and gate conditioned on paused)",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /me/rollouts/{rolloutId}/resume"),
    implemented_by: implemented_by!(resume_rollout),
};

/// `user`'s firmware rollout `rollout` paused: `paused` with `pausedReason`, offering nothing
/// until resumed. One consistent GetItem and one UpdateItem conditioned on `running` (a race
/// with the worker's own pause or finish, or a cancel, is the 409 of the state it found). A 404
/// `rollout` when `user` has no such rollout; a 409 `rollout_not_firmware` for a desired-state
/// rollout (it has no stages to stop between), `rollout_paused` when paused already,
/// `rollout_ended` when done or cancelled; nothing changed on any of them.
pub async fn pause_rollout(
    table: &FleetTable,
    user: &UserId,
    rollout: &RolloutId,
) -> Result<RolloutView, FleetError> {
    let mut item = firmware_rollout(table, user, rollout).await?;
    match item.status {
        RolloutStatus::Running => {}
        RolloutStatus::Paused => {
            return Err(conflict("rollout_paused", "the rollout is paused already"))
        }
        RolloutStatus::Done | RolloutStatus::Cancelled => return Err(rollout_ended()),
    }
    let update = Update::new()
        .set(
            RolloutItem::STATUS,
            serde_dynamo::to_attribute_value(RolloutStatus::Paused)?,
        )
        .set(RolloutItem::PAUSED_REASON, string_value(PAUSED_BY_OWNER));
    if !conditional(table, &item, update, with_status(RolloutStatus::Running)).await? {
        return Err(conflict(
            "rollout_not_running",
            "the rollout stopped running meanwhile (paused by itself, done or cancelled): read it again",
        ));
    }
    item.status = RolloutStatus::Paused;
    item.paused_reason = Some(PAUSED_BY_OWNER.to_string());
    Ok(RolloutView::of(&item))
}

/// `user`'s paused firmware rollout `rollout` running again: the worker offers the open stages
/// again at its next run, never re-offering a device that succeeded (its offer is finished).
/// The abort rule starts afresh: failures before the resume are the stage's baseline, so a
/// rollout that paused itself is not paused again by the same failures (the counts of the
/// worker's last whole walk, on the rollout). One consistent GetItem, one UpdateItem
/// conditioned on `paused`. A 404 `rollout`; a
/// 409 `rollout_not_firmware`, `rollout_not_paused` (running), `rollout_ended` (done or
/// cancelled); nothing changed on any of them.
pub async fn resume_rollout(
    table: &FleetTable,
    user: &UserId,
    rollout: &RolloutId,
) -> Result<RolloutView, FleetError> {
    let mut item = firmware_rollout(table, user, rollout).await?;
    match item.status {
        RolloutStatus::Paused => {}
        RolloutStatus::Running => {
            return Err(conflict(
                "rollout_not_paused",
                "the rollout is running: there is nothing to resume",
            ))
        }
        RolloutStatus::Done | RolloutStatus::Cancelled => return Err(rollout_ended()),
    }
    let mut gate = item.gate.clone().unwrap_or_default();
    gate.baseline = gate
        .counts
        .iter()
        .flatten()
        .enumerate()
        .map(|(stage, c)| StageBaseline {
            stage: stage as u32,
            finished: c.finished(),
            failed: c.failed,
        })
        .collect();
    // The health rule leaves the stages open now be: the owner accepted them as they are.
    gate.health_accepted_through = Some(gate.open);
    let update = Update::new()
        .set(
            RolloutItem::STATUS,
            serde_dynamo::to_attribute_value(RolloutStatus::Running)?,
        )
        .set(RolloutItem::GATE, serde_dynamo::to_attribute_value(&gate)?)
        .remove(RolloutItem::PAUSED_REASON);
    if !conditional(table, &item, update, with_status(RolloutStatus::Paused)).await? {
        return Err(conflict(
            "rollout_not_paused",
            "the rollout is no longer paused (resumed or cancelled meanwhile): read it again",
        ));
    }
    item.status = RolloutStatus::Running;
    item.paused_reason = None;
    item.gate = Some(gate);
    Ok(RolloutView::of(&item))
}

/// `user`'s firmware rollout `rollout`, read consistently: 404 when none, 409 when it is a
/// desired-state rollout.
async fn firmware_rollout(
    table: &FleetTable,
    user: &UserId,
    rollout: &RolloutId,
) -> Result<RolloutItem, FleetError> {
    let key = ItemKey::Rollout {
        user: user.clone(),
        rollout: rollout.clone(),
    };
    let item = read_consistent::<RolloutItem>(table, &key)
        .await?
        .ok_or(FleetError::NotFound("rollout"))?;
    if item.firmware.is_none() {
        return Err(conflict(
            "rollout_not_firmware",
            "only a staged firmware rollout pauses and resumes; cancel a desired-state rollout",
        ));
    }
    Ok(item)
}

/// The rollout exists with `status`.
fn with_status(status: RolloutStatus) -> Condition {
    Condition::exists(PK).and(Condition::equals(
        RolloutItem::STATUS,
        string_value(status.as_str()),
    ))
}

fn conflict(code: &'static str, message: &str) -> FleetError {
    FleetError::Conflict {
        code,
        message: message.to_string(),
    }
}

/// The 409 of a cancel, pause or resume of a rollout that is over already.
pub(super) fn rollout_ended() -> FleetError {
    FleetError::Conflict {
        code: "rollout_ended",
        message:
            "the rollout is done or cancelled already: it no longer cancels, pauses or resumes"
                .to_string(),
    }
}
