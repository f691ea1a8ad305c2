//! A device's move between fleets: `POST .../devices/{deviceId}/move` (AP-M1).

use crate::adapters::{json_value, present, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use shared::http::api::{json_response, parse_json_body, ApiError, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet};
use shared::http::gateway::DeviceIdPath;
use shared::model::ids::{OrgId, UserId};
use shared::model::org::Role;
use shared::ops::devices::r#move as device_move;
use shared::ops::orgs::access::authorize;
use shared::FleetTable;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MoveBody {
    #[serde(default, deserialize_with = "present")]
    to_org_id: Option<serde_json::Value>,
    #[serde(default)]
    rotate_token: bool,
}

/// `POST .../devices/{deviceId}/move` `{"toOrgId": "o..." | null, "rotateToken": bool}` (admin
/// of the device's fleet, and of the target organization; `null` is the caller's own fleet):
/// the device, its history and token go with it (AP-M1); `"rotateToken": true` gives it a new
/// token in the same transaction (the previous owner knows the current one). 200 when the
/// history is all moved within the request, 202 while the scheduled worker continues it.
pub(crate) async fn move_device(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: MoveBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let target = match body.to_org_id {
        None => {
            return Err(ApiError::invalid(
                "toOrgId",
                "give the organization to move the device to, or null for your own fleet",
            ))
        }
        Some(serde_json::Value::Null) => fleet.caller.user_id.clone(),
        Some(serde_json::Value::String(org)) => {
            let org = OrgId::parse_field("toOrgId", org)?;
            authorize(&table, &fleet.caller.user_id, &org, Role::Admin).await?;
            UserId::org_fleet(&org)
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "toOrgId",
                "must be an organization id or null",
            ))
        }
    };
    let options = device_move::MoveOptions {
        rotate_token: body.rotate_token,
    };
    let moved =
        device_move::move_device_with(&table, &device_id, &fleet.owner, &target, options).await?;
    let status = match moved.history.status {
        device_move::HistoryStatus::Moved => StatusCode::OK,
        _ => StatusCode::ACCEPTED,
    };
    Ok(json_response(status, &json_value(&moved)))
}
