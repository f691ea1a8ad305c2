//! Alarm acknowledgement: `POST /me/alarms/{alarmId}/ack`.

use crate::adapters::{json_value, Answer};
use axum::extract::State;
use lambda_http::http::StatusCode;
use serde::{Deserialize, Serialize};
use shared::http::api::{json_response, ApiError};
use shared::http::fleet::{Fleet, OperatorRole};
use shared::http::gateway::PathParams;
use shared::model::alarm::ids::AlarmId;
use shared::ops::alarms::lifecycle;
use shared::FleetTable;

#[derive(Deserialize)]
pub(crate) struct AlarmPath {
    #[serde(rename = "alarmId")]
    alarm_id: String,
}

/// `POST /me/alarms/{alarmId}/ack`.
pub(crate) async fn acknowledge_alarm(
    fleet: Fleet<OperatorRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<AlarmPath>,
) -> Answer {
    let id = AlarmId::parse(&path.alarm_id).map_err(|_| ApiError::not_found("alarm"))?;
    let alarm = lifecycle::acknowledge(&table, &fleet.owner, &id).await?;
    Ok(json_response(
        StatusCode::OK,
        &json_value(&AlarmAnswer { alarm }),
    ))
}

/// `{"alarm": ...}`.
#[derive(Serialize)]
struct AlarmAnswer<T> {
    alarm: T,
}
