//! An owner's rollouts listed (`GET /me/rollouts`), a rollout's end by its owner, `POST /me/rollouts/{rolloutId}/cancel`, and a firmware
//! rollout's pause and resume (`/pause`, `/resume`): here rather than in device-updates (which
//! starts rollouts) because that function's resource policy is near its 20 KB limit.

use axum::extract::State;
use lambda_http::http::StatusCode;
use serde::{Deserialize, Serialize};
use shared::http::api::{json_response, ApiError};
use shared::http::fleet::{AdminRole, Fleet, OperatorRole, ViewerRole};
use shared::http::gateway::{PathParams, QueryParams};
use shared::model::ids::RolloutId;
use shared::ops::page_limit;
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

/// `POST /me/rollouts/{rolloutId}/pause`: 200 with the paused firmware rollout (it offers
/// nothing until resumed); 409 `rollout_paused`, `rollout_ended`, `rollout_not_firmware` or
/// `rollout_not_running` on a wrong state. An operator may pause (the safe direction, as
/// cancel).
pub(crate) async fn pause_rollout(
    fleet: Fleet<OperatorRole>,
    State(state): State<FirmwareState>,
    PathParams(path): PathParams<RolloutPath>,
) -> Answer {
    let id = RolloutId::parse(path.rollout_id).map_err(|_| ApiError::not_found("rollout"))?;
    let paused = rollout::pause_rollout(&state.table, &fleet.owner, &id).await?;
    Ok(json_response(
        StatusCode::OK,
        &RolloutAnswer { rollout: paused },
    ))
}

/// `POST /me/rollouts/{rolloutId}/resume`: 200 with the running firmware rollout; 409
/// `rollout_not_paused`, `rollout_ended` or `rollout_not_firmware` on a wrong state. Resuming
/// offers firmware again, so it is an admin's, as starting is.
pub(crate) async fn resume_rollout(
    fleet: Fleet<AdminRole>,
    State(state): State<FirmwareState>,
    PathParams(path): PathParams<RolloutPath>,
) -> Answer {
    let id = RolloutId::parse(path.rollout_id).map_err(|_| ApiError::not_found("rollout"))?;
    let resumed = rollout::resume_rollout(&state.table, &fleet.owner, &id).await?;
    Ok(json_response(
        StatusCode::OK,
        &RolloutAnswer { rollout: resumed },
    ))
}

/// `GET /me/rollouts`: one page of the caller's rollouts of both kinds, newest first.
pub(crate) async fn list_rollouts(
    fleet: Fleet<ViewerRole>,
    State(state): State<FirmwareState>,
    QueryParams(q): QueryParams<super::PageQuery>,
) -> Answer {
    let limit = page_limit(q.limit.as_deref())?;
    let page =
        rollout::list_rollouts(&state.table, &fleet.owner, q.cursor.as_deref(), limit).await?;
    Ok(json_response(StatusCode::OK, &page))
}
