//! The scheduled worker's run (the rollout-worker function, every minute): running fleet-wide
//! changes first (AP-T7), then the history copies of moved devices that did not fit their
//! request (AP-M1), each with its share of the run.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::error::FleetError;
use crate::ops::devices::r#move::{continue_moves, MoveProgress};
use crate::ops::twin::rollout::{advance_rollouts, RolloutRun};
use crate::store::table::FleetTable;

/// Time of a run kept for moves, so a long rollout never starves a device's history (and
/// a run with no move to continue gives it back at once).
pub const MOVES_SHARE: Duration = Duration::from_secs(15);

/// What a run did: `{"rollouts": {...}, "moves": [...]}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerAnswer {
    /// The rollouts' part.
    pub rollouts: RolloutRun,
    /// Each moved device's history worked on, and how far it has come.
    pub moves: Vec<MoveProgress>,
}

/// One run until `until`: rollouts until [`MOVES_SHARE`] before it, then moves.
pub async fn scheduled_run(table: &FleetTable, until: Instant) -> Result<WorkerAnswer, FleetError> {
    let rollouts_until = until
        .checked_sub(MOVES_SHARE)
        .unwrap_or(until)
        .max(Instant::now());
    let rollouts = advance_rollouts(table, rollouts_until).await?;
    let moves = continue_moves(table, until).await?;
    Ok(WorkerAnswer { rollouts, moves })
}
