//! The scheduled worker's run (the rollout-worker function, every minute): organization
//! deletions that did not fit their request (AP-O5) first, then the summaries of devices gone
//! silent (AP-30, once a day after a day ends), then running fleet-wide changes (AP-T7), then
//! the history copies of moved devices that did not fit their request (AP-M1), each with its
//! share of the run.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::error::FleetError;
use crate::model::timestamp::Timestamp;
use crate::ops::devices::r#move::{continue_moves, MoveProgress};
use crate::ops::ingest::silent::{roll_silent_devices, SilentRollRun};
use crate::ops::orgs::manage::{continue_org_deletions, OrgDeletionProgress};
use crate::ops::twin::rollout::{advance_rollouts, RolloutRun};
use crate::store::firmware_images::FirmwareImages;
use crate::store::table::FleetTable;

/// Time of a run kept for moves, so a long rollout never starves a device's history (and
/// a run with no move to continue gives it back at once).
pub const MOVES_SHARE: Duration = Duration::from_secs(15);

/// Longest time of a run spent on organization deletions (a deletion is a few pages of
/// deletes; an organization with thousands of invitations takes several runs).
pub const ORG_DELETIONS_SHARE: Duration = Duration::from_secs(10);

/// Longest time of a run spent rolling silent devices' summaries (a walk of many devices
/// goes on from its checkpoint in the next runs).
pub const SILENT_ROLLS_SHARE: Duration = Duration::from_secs(15);

/// What a run did: `{"rollouts": {...}, "moves": [...]}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerAnswer {
    /// The rollouts' part.
    pub rollouts: RolloutRun,
    /// Each moved device's history worked on, and how far it has come.
    pub moves: Vec<MoveProgress>,
    /// Each organization deletion worked on, and whether it is finished.
    #[serde(rename = "orgDeletions")]
    pub org_deletions: Vec<OrgDeletionProgress>,
    /// The silent devices' roll.
    #[serde(rename = "silentRolls")]
    pub silent_rolls: SilentRollRun,
}

/// One run until `until`: organization deletions (their firmware images deleted from
/// `images`) for at most [`ORG_DELETIONS_SHARE`], silent devices' rolls for at most
/// [`SILENT_ROLLS_SHARE`], rollouts until [`MOVES_SHARE`] before `until`, then moves.
pub async fn scheduled_run(
    table: &FleetTable,
    images: &FirmwareImages,
    until: Instant,
) -> Result<WorkerAnswer, FleetError> {
    let deletions_until = (Instant::now() + ORG_DELETIONS_SHARE).min(until);
    let org_deletions = continue_org_deletions(table, images, deletions_until).await?;
    let rolls_until = (Instant::now() + SILENT_ROLLS_SHARE).min(until);
    let silent_rolls = roll_silent_devices(table, Timestamp::now(), rolls_until).await?;
    let rollouts_until = until
        .checked_sub(MOVES_SHARE)
        .unwrap_or(until)
        .max(Instant::now());
    let rollouts = advance_rollouts(table, rollouts_until).await?;
    let moves = continue_moves(table, until).await?;
    Ok(WorkerAnswer {
        rollouts,
        moves,
        org_deletions,
        silent_rolls,
    })
}
