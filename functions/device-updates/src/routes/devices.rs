//! Devices: registration, change and deletion (AP-07/06/08) and the device token
//! (AP-17/18).

use crate::adapters::{if_match_version, insert_etag, json_value, present, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use shared::http::api;
use shared::http::api::{json_response, parse_json_body, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet};
use shared::http::gateway::DeviceIdPath;
use shared::model::ids::{parse_display_name, parse_tags, DeviceId, DeviceType, UserId};
use shared::model::offline::{parse_report_every, OfflineDetection};
use shared::model::optional::not_null;
use shared::model::status::DeviceStatus;
use shared::ops::credentials;
use shared::ops::devices::delete as deletion;
use shared::ops::devices::register::{self as register, DeviceRegistration};
use shared::ops::devices::update::{self as device_update, DevicePatch};
use shared::ops::devices::MAX_DEVICE_NAME;
use shared::ops::limits::{rate_limited, KeyedLimiter};
use shared::FleetTable;
use std::sync::Arc;
use std::time::Instant;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RegisterDeviceBody {
    device_id: String,
    name: String,
    #[serde(rename = "type")]
    device_type: String,
    #[serde(default)]
    tags: Vec<String>,
    /// Validated by [`parse_report_every`] (a 400 naming the field, not serde's message);
    /// `null` is refused: leave it out to have the interval learned.
    #[serde(default, deserialize_with = "not_null")]
    report_every_seconds: Option<serde_json::Value>,
    /// Validated by [`OfflineDetection::parse_field`]; `null` is refused like any other bad
    /// value (absent is standard).
    #[serde(default, deserialize_with = "present")]
    offline_detection: Option<serde_json::Value>,
}

/// `POST /me/devices`.
pub(crate) async fn register_device(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    State(registrations): State<Arc<KeyedLimiter<UserId>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: RegisterDeviceBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let registration = DeviceRegistration {
        report_every_seconds: body
            .report_every_seconds
            .map(|v| parse_report_every("reportEverySeconds", &v))
            .transpose()?,
        offline_detection: body
            .offline_detection
            .map(|v| OfflineDetection::parse_field("offlineDetection", &v))
            .transpose()?
            .unwrap_or_default(),
        device_id: DeviceId::parse(body.device_id)?,
        name: parse_display_name("name", &body.name, MAX_DEVICE_NAME)?,
        device_type: DeviceType::parse(body.device_type)?,
        tags: parse_tags(body.tags)?,
    };
    registrations
        .take(&fleet.owner, Instant::now())
        .map_err(rate_limited)?;
    let registered = register::register_device(&table, &fleet.owner, registration).await?;
    let location = format!(
        "{}/devices/{}",
        fleet.base_path(),
        registered.device.device_id
    );
    let mut response = json_response(
        StatusCode::CREATED,
        &json_value(&RegisteredAnswer {
            device: &registered.device,
            token: registered.token.reveal(),
        }),
    );
    insert_etag(&mut response, registered.device.version);
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchDeviceBody {
    #[serde(default, deserialize_with = "not_null")]
    status: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    name: Option<String>,
    /// `[]` removes every tag; `null` is refused.
    #[serde(default, deserialize_with = "not_null")]
    tags: Option<Vec<String>>,
    #[serde(default, rename = "reportEverySeconds", deserialize_with = "present")]
    report_every_seconds: Option<serde_json::Value>,
    #[serde(default, rename = "offlineDetection", deserialize_with = "present")]
    offline_detection: Option<serde_json::Value>,
}

/// `PATCH /me/devices/{deviceId}`.
pub(crate) async fn update_device(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let expected_version = if_match_version(&headers)?;
    let body: PatchDeviceBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let patch = DevicePatch {
        status: body
            .status
            .map(|s| DeviceStatus::parse_field("status", &s))
            .transpose()?,
        name: body
            .name
            .map(|n| parse_display_name("name", &n, MAX_DEVICE_NAME))
            .transpose()?,
        tags: body.tags.map(parse_tags).transpose()?,
        report_every_seconds: body
            .report_every_seconds
            .map(|v| match v {
                serde_json::Value::Null => Ok(None),
                v => parse_report_every("reportEverySeconds", &v).map(Some),
            })
            .transpose()?,
        offline_detection: body
            .offline_detection
            .map(|v| OfflineDetection::parse_field("offlineDetection", &v))
            .transpose()?,
    };
    let device =
        device_update::update_device(&table, &fleet.owner, &device_id, expected_version, patch)
            .await?;
    let version = device.version;
    let mut response = json_response(
        StatusCode::OK,
        &json_value(&DeviceAnswer { device: &device }),
    );
    insert_etag(&mut response, version);
    Ok(response)
}

/// `DELETE /me/devices/{deviceId}`.
pub(crate) async fn delete_device(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
) -> Answer {
    deletion::delete_device(&table, &fleet.owner, &device_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

/// `POST /me/devices/{deviceId}/token`.
pub(crate) async fn rotate_token(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
) -> Answer {
    let rotated = credentials::rotate_token(&table, &fleet.owner, &device_id).await?;
    Ok(json_response(StatusCode::OK, &rotated))
}

/// `DELETE /me/devices/{deviceId}/token`.
pub(crate) async fn revoke_token(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
) -> Answer {
    credentials::revoke_token(&table, &fleet.owner, &device_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

/// `{"device": ...}`.
#[derive(Serialize)]
struct DeviceAnswer<T> {
    device: T,
}

/// `{"device": ..., "token": "..."}`: a new device and its token, shown this once.
#[derive(Serialize)]
struct RegisteredAnswer<'a, T> {
    device: T,
    token: &'a str,
}
