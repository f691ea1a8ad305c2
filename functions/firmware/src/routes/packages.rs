//! Firmware packages: `POST /me/firmware`, `GET /me/firmware`, `GET|DELETE
//! /me/firmware/{firmwareId}`.

use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use shared::http::api::{empty_response, json_response, parse_json_body, ApiError, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet, ViewerRole};
use shared::http::gateway::{PathParams, QueryParams};
use shared::model::firmware::FirmwareId;
use shared::ops::firmware::{self, NewFirmware};
use shared::ops::page_limit;

use super::Answer;
use crate::FirmwareState;

/// `POST /me/firmware`'s body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateBody {
    device_type: String,
    version: String,
    sha256: String,
    size: serde_json::Value,
    #[serde(default)]
    signature: Option<String>,
}

/// `POST /me/firmware`: 201 with the pending package and its upload URL.
pub(crate) async fn create_firmware(
    fleet: Fleet<AdminRole>,
    State(state): State<FirmwareState>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: CreateBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    // Anything but a whole number of bytes (2.5, "10", -1) falls to 0: out of range.
    let size = body.size.as_u64().unwrap_or(0);
    let new = NewFirmware::new(
        &body.device_type,
        &body.version,
        &body.sha256,
        size,
        body.signature.as_deref(),
    )?;
    let created = firmware::create_firmware(&state.table, &state.images, &fleet.owner, new).await?;
    let mut response = json_response(StatusCode::CREATED, &created);
    if let Ok(value) = HeaderValue::from_str(&format!(
        "{}/firmware/{}",
        fleet.base_path(),
        created.firmware.firmware_id
    )) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// `{firmwareId}` of the path.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FirmwarePath {
    firmware_id: String,
}

/// `GET /me/firmware/{firmwareId}`: a pending package is checked against its stored image
/// first.
pub(crate) async fn get_firmware(
    fleet: Fleet<ViewerRole>,
    State(state): State<FirmwareState>,
    PathParams(path): PathParams<FirmwarePath>,
) -> Answer {
    let id = package_id(path)?;
    let package = firmware::get_firmware(&state.table, &state.images, &fleet.owner, &id).await?;
    Ok(json_response(StatusCode::OK, &package))
}

/// `DELETE /me/firmware/{firmwareId}`: 204; 409 while a running rollout uses it.
pub(crate) async fn delete_firmware(
    fleet: Fleet<AdminRole>,
    State(state): State<FirmwareState>,
    PathParams(path): PathParams<FirmwarePath>,
) -> Answer {
    let id = package_id(path)?;
    firmware::delete_firmware(&state.table, &state.images, &fleet.owner, &id).await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// An id that is not a firmware id names no package: 404, as another owner's does.
fn package_id(path: FirmwarePath) -> Result<FirmwareId, ApiError> {
    FirmwareId::parse(path.firmware_id).map_err(|_| ApiError::not_found("firmware"))
}

/// `GET /me/firmware`: one page, newest first.
pub(crate) async fn list_firmware(
    fleet: Fleet<ViewerRole>,
    State(state): State<FirmwareState>,
    QueryParams(q): QueryParams<super::PageQuery>,
) -> Answer {
    let limit = page_limit(q.limit.as_deref())?;
    let page =
        firmware::list_firmware(&state.table, &fleet.owner, q.cursor.as_deref(), limit).await?;
    Ok(json_response(StatusCode::OK, &page))
}
