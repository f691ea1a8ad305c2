//! Signing keys: `PUT /me/firmware-keys/{deviceType}`.

use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use shared::http::api::{json_response, parse_json_body, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet};
use shared::http::gateway::PathParams;
use shared::model::ids::DeviceType;
use shared::ops::firmware::keys;

use super::Answer;
use crate::FirmwareState;

/// `{deviceType}` of the path.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyPath {
    device_type: String,
}

/// The body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KeyBody {
    public_key: String,
}

/// `PUT /me/firmware-keys/{deviceType}` `{"publicKey"}` (base64 of 32 bytes): 200 with the key.
pub(crate) async fn put_signing_key(
    fleet: Fleet<AdminRole>,
    State(state): State<FirmwareState>,
    PathParams(path): PathParams<KeyPath>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let device_type = DeviceType::parse_field("deviceType", path.device_type)?;
    let body: KeyBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let key =
        keys::set_signing_key(&state.table, &fleet.owner, device_type, &body.public_key).await?;
    Ok(json_response(StatusCode::OK, &key))
}
