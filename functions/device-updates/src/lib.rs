//! device-updates: `PUT /me`, `POST|PATCH|DELETE /me/devices...` and a device's token
//! (`POST|DELETE /me/devices/{deviceId}/token`).
//!
//! A thin adapter: each route validates its input into the `shared` types, calls one
//! access-pattern operation, and maps the result to a response.

use lambda_http::http::{header, HeaderValue, StatusCode};
use lambda_http::{Body, Request, Response};
use serde::Deserialize;
use serde_json::json;

use shared::api::{self, json_body, json_response, path_param, ApiError, Caller, MAX_BODY_BYTES};
use shared::ids::{parse_display_name, parse_tags, DeviceId, DeviceType};
use shared::items::DeviceStatus;
use shared::ops::credentials;
use shared::ops::devices::{self, DevicePatch, DeviceRegistration, MAX_DEVICE_NAME};
use shared::ops::profile::{self, ProfileUpdate, MAX_PROFILE_NAME};
use shared::{FleetError, FleetTable};

/// What every request of this execution environment shares: the table client, built once by
/// [`State::from_env`].
pub struct State {
    /// The table.
    pub table: FleetTable,
}

impl State {
    /// The table from the environment.
    pub async fn from_env() -> Result<Self, FleetError> {
        Ok(Self {
            table: FleetTable::from_env().await?,
        })
    }

    /// One API Gateway request (the Lambda bootstrap calls this).
    pub async fn handle(&self, req: Request) -> Response<Body> {
        handle(&self.table, req).await
    }
}

/// Serves one API Gateway request (the Lambda handler and the local dev server both call this).
pub async fn handle(table: &FleetTable, req: Request) -> Response<Body> {
    api::serve(req, |req| route(table, req)).await
}

async fn route(table: &FleetTable, req: Request) -> Result<Response<Body>, ApiError> {
    let caller = Caller::from_request(&req)?;
    match api::route_key(&req).as_str() {
        "PUT /me" => put_profile(table, &caller, &req).await,
        "POST /me/devices" => register_device(table, &caller, &req).await,
        "PATCH /me/devices/{deviceId}" => update_device(table, &caller, &req).await,
        "DELETE /me/devices/{deviceId}" => delete_device(table, &caller, &req).await,
        "POST /me/devices/{deviceId}/token" => rotate_token(table, &caller, &req).await,
        "DELETE /me/devices/{deviceId}/token" => revoke_token(table, &caller, &req).await,
        other => Err(ApiError::no_route(other)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileBody {
    name: String,
}

async fn put_profile(
    table: &FleetTable,
    caller: &Caller,
    req: &Request,
) -> Result<Response<Body>, ApiError> {
    let body: ProfileBody = json_body(req, MAX_BODY_BYTES)?;
    let update = ProfileUpdate {
        name: parse_display_name("name", &body.name, MAX_PROFILE_NAME)?,
        email: caller.email.clone(),
    };
    let profile = profile::upsert_profile(table, &caller.user_id, update).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "profile": profile }),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RegisterDeviceBody {
    device_id: String,
    name: String,
    #[serde(rename = "type")]
    device_type: String,
    #[serde(default)]
    tags: Vec<String>,
}

async fn register_device(
    table: &FleetTable,
    caller: &Caller,
    req: &Request,
) -> Result<Response<Body>, ApiError> {
    let body: RegisterDeviceBody = json_body(req, MAX_BODY_BYTES)?;
    let registration = DeviceRegistration {
        device_id: DeviceId::parse(body.device_id)?,
        name: parse_display_name("name", &body.name, MAX_DEVICE_NAME)?,
        device_type: DeviceType::parse(body.device_type)?,
        tags: parse_tags(body.tags)?,
    };
    shared::limits::take_registration(&caller.user_id)?;
    let registered = devices::register_device(table, &caller.user_id, registration).await?;
    let location = format!("/me/devices/{}", registered.device.device_id);
    let mut response = json_response(
        StatusCode::CREATED,
        &json!({ "device": registered.device, "token": registered.token.reveal() }),
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
    status: Option<String>,
    name: Option<String>,
    tags: Option<Vec<String>>,
}

async fn update_device(
    table: &FleetTable,
    caller: &Caller,
    req: &Request,
) -> Result<Response<Body>, ApiError> {
    let device_id = path_param(req, "deviceId", |v| DeviceId::parse(v))?;
    let expected_version = if_match_version(req)?;
    let body: PatchDeviceBody = json_body(req, MAX_BODY_BYTES)?;
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
    };
    let device =
        devices::update_device(table, &caller.user_id, &device_id, expected_version, patch).await?;
    let version = device.version;
    let mut response = json_response(StatusCode::OK, &json!({ "device": device }));
    insert_etag(&mut response, version);
    Ok(response)
}

async fn delete_device(
    table: &FleetTable,
    caller: &Caller,
    req: &Request,
) -> Result<Response<Body>, ApiError> {
    let device_id = path_param(req, "deviceId", |v| DeviceId::parse(v))?;
    devices::delete_device(table, &caller.user_id, &device_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

async fn rotate_token(
    table: &FleetTable,
    caller: &Caller,
    req: &Request,
) -> Result<Response<Body>, ApiError> {
    let device_id = path_param(req, "deviceId", |v| DeviceId::parse(v))?;
    let rotated = credentials::rotate_token(table, &caller.user_id, &device_id).await?;
    Ok(json_response(StatusCode::OK, &rotated))
}

async fn revoke_token(
    table: &FleetTable,
    caller: &Caller,
    req: &Request,
) -> Result<Response<Body>, ApiError> {
    let device_id = path_param(req, "deviceId", |v| DeviceId::parse(v))?;
    credentials::revoke_token(table, &caller.user_id, &device_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

/// The version in `If-Match`: `2`, `"2"` or `W/"2"`. Missing is a 428, anything else a 400.
fn if_match_version(req: &Request) -> Result<u64, ApiError> {
    let raw = req
        .headers()
        .get(header::IF_MATCH)
        .ok_or_else(ApiError::precondition_required)?;
    // Exactly `N`, `"N"` or `W/"N"` (docs/openapi.yaml's pattern), nothing looser.
    let text = raw.to_str().map(str::trim).unwrap_or("");
    let digits = if let Some(weak) = text.strip_prefix("W/") {
        weak.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
    } else if let Some(quoted) = text.strip_prefix('"') {
        quoted.strip_suffix('"')
    } else {
        Some(text)
    };
    digits
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|v| *v >= 1)
        .ok_or_else(|| ApiError::invalid("If-Match", "must be the device version, e.g. 1"))
}

fn insert_etag(response: &mut Response<Body>, version: u64) {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
}
