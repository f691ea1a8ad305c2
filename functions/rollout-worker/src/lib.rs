//! rollout-worker: the device twin's scheduled worker (AP-T7). Every minute EventBridge
//! invokes it, and it carries the running fleet-wide desired-state changes forward for at
//! most [`ROLLOUT_RUN`] (`shared::ops::twin::rollout::advance_rollouts`): owners take turns a
//! page at a time, a device it cannot change is recorded on its rollout, and a rollout's
//! position only moves forward.
//!
//! It also continues the history copies of moved devices that did not fit their request
//! (`shared::ops::devices::r#move::continue_moves`, issue 33).
//!
//! A function of its own (issue 30, item 9) so that only this role may write devices' desired
//! state and live state: the daily report's role reads and purges, and never writes a device.

use std::time::{Duration, Instant};

use lambda_runtime::LambdaEvent;
use serde_json::Value;
use shared::observe::served::serve_invocation;
use shared::ops::worker::scheduled_run;
use shared::store::firmware_images::FirmwareImages;
use shared::{FleetError, FleetTable};

/// The function's `Timeout` in `template.yaml`: the time an invocation gets when the runtime
/// sends no usable deadline (see [`shared::store::deadline`]).
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Longest run: less than the schedule's minute, so runs of one schedule do not overlap (and
/// when one does, the forward-only checkpoint makes the later one step aside).
pub const ROLLOUT_RUN: Duration = Duration::from_secs(50);

/// Time kept in reserve before the Lambda's deadline for the last page and the answer.
const MARGIN: Duration = Duration::from_secs(5);

/// The name of a run's subsegment in its trace.
pub const RUN_SEGMENT: &str = "rollout run";

/// What every invocation of this execution environment shares: the table client and the
/// firmware image bucket (a deleted organization's images).
pub struct State {
    /// The table.
    pub table: FleetTable,
    /// The firmware image bucket.
    pub images: FirmwareImages,
}

impl State {
    /// The table and the bucket from the environment.
    pub async fn from_env() -> Result<Self, FleetError> {
        Ok(Self {
            table: FleetTable::from_env().await?,
            images: FirmwareImages::from_env().await?,
        })
    }

    /// One Lambda invocation, until the deadline Lambda gave (or [`TIMEOUT`] when it gave none
    /// usable).
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, FleetError> {
        serve_invocation(
            "rollout-worker",
            RUN_SEGMENT,
            event.context.deadline(),
            TIMEOUT,
            event.context.xray_trace_id.as_deref(),
            |deadline| handle(&self.table, &self.images, event.payload, deadline),
        )
        .await
    }
}

/// One run, whatever the scheduled event says: `shared::ops::worker::WorkerAnswer` as JSON
/// (the rollouts carried forward, then moved devices' histories).
pub async fn handle(
    table: &FleetTable,
    images: &FirmwareImages,
    _event: Value,
    deadline: Instant,
) -> Result<Value, FleetError> {
    let until = deadline
        .checked_sub(MARGIN)
        .unwrap_or(deadline)
        .min(Instant::now() + ROLLOUT_RUN);
    let run = scheduled_run(table, images, until).await?;
    serde_json::to_value(run).map_err(FleetError::internal)
}
