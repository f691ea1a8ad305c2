//! A device's commands (AP-T3) and a rollout (AP-T6).

use crate::adapters::{ok, Answer};
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shared::http::api::ApiError;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::{DeviceIdPath, PathParams};
use shared::model::ids::RolloutId;
use shared::ops::twin;
use shared::FleetTable;

/// `{"commands": [...]}`.
#[derive(Serialize)]
struct CommandsAnswer<T> {
    commands: Vec<T>,
}

/// `{"rollout": ...}`.
#[derive(Serialize)]
struct RolloutAnswer<T> {
    rollout: T,
}

/// `GET /me/devices/{deviceId}/commands` (AP-T3).
pub(crate) async fn device_commands(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
) -> Answer {
    let commands = twin::owner::list_commands(&table, &fleet.owner, &id)
        .await?
        .ok_or(ApiError::not_found("device"))?;
    ok(&CommandsAnswer { commands })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RolloutPath {
    rollout_id: String,
}

/// `GET /me/rollouts/{rolloutId}` (AP-T6).
pub(crate) async fn get_rollout(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<RolloutPath>,
) -> Answer {
    let id = RolloutId::parse(path.rollout_id)?;
    let rollout = twin::rollout::get_rollout(&table, &fleet.owner, &id)
        .await?
        .ok_or(ApiError::not_found("rollout"))?;
    ok(&RolloutAnswer { rollout })
}
