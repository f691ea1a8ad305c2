//! A rollout's end by its owner: `POST /me/rollouts/{rolloutId}/cancel`, here rather than in
//! device-updates (which starts rollouts) because that function's resource policy is near its
//! 20 KB limit.

use axum::extract::State;
use lambda_http::http::StatusCode;
use serde::{Deserialize, Serialize};
use shared::http::api::{json_response, ApiError};
use shared::http::fleet::{Fleet, OperatorRole};
use shared::http::gateway::PathParams;
use shared::model::ids::RolloutId;
use shared::ops::twin::rollout;

use super::Answer;
use crate::FirmwareState;

/// `{rolloutId}` of the path.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RolloutPath {
    rollout_id: String,
}

/// `{"rollout": ...}`, as `GET /me/rollouts/{rolloutId}` answers.
#[derive(Serialize)]
struct RolloutAnswer<T> {
    rollout: T,
}

/// `POST /me/rollouts/{rolloutId}/cancel`: 200 with the cancelled rollout; 409
/// `rollout_ended` when it is over already. An operator may cancel (stopping a change is
/// the safe direction); starting one stays an admin's.
pub(crate) async fn cancel_rollout(
    fleet: Fleet<OperatorRole>,
    State(state): State<FirmwareState>,
    PathParams(path): PathParams<RolloutPath>,
) -> Answer {
    // An id that is not a rollout id names no rollout: 404, as another owner's does.
    let id = RolloutId::parse(path.rollout_id).map_err(|_| ApiError::not_found("rollout"))?;
    let cancelled = rollout::cancel_rollout(&state.table, &fleet.owner, &id).await?;
    Ok(json_response(
        StatusCode::OK,
        &RolloutAnswer { rollout: cancelled },
    ))
}
