//! dashboard: every read route. A thin adapter: validate path and query parameters into the
//! `shared` types, call one access-pattern operation, shape the JSON.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::{json, Value};

use shared::api::{self, json_response, path_param, ApiError, Caller};
use shared::ids::{DeviceId, EventType, Tag, UserId};
use shared::items::DeviceStatus;
use shared::ops::events::TimeRange;
use shared::ops::{dashboard, devices, events, fleet, profile, reports, DEFAULT_LIMIT, MAX_LIMIT};
use shared::timestamp::{Day, Timestamp};
use shared::{FleetError, FleetTable, ValidationError};

/// Default time range of event listings, when `from` is not given.
const DEFAULT_RANGE_SECONDS: i64 = 24 * 3600;

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
    let route = api::route_key(&req);
    let body = if route.starts_with("GET /admin/") {
        if !caller.is_admin() {
            return Err(ApiError::forbidden("operator routes need the admin group"));
        }
        operator_read(table, &route, &req).await?
    } else {
        user_read(table, &caller.user_id, &route, &req).await?
    };
    Ok(json_response(StatusCode::OK, &body))
}

/// The caller's own data: `GET /me...`.
async fn user_read(
    table: &FleetTable,
    user: &UserId,
    route: &str,
    req: &Request,
) -> Result<Value, ApiError> {
    Ok(match route {
        "GET /me" => {
            let profile = profile::get_profile(table, user)
                .await?
                .ok_or(ApiError::not_found("profile"))?;
            json!({ "profile": profile })
        }
        "GET /me/dashboard" => {
            let d = dashboard::dashboard(table, user, param(req, "cursor").as_deref()).await?;
            json!({ "profile": d.profile, "devices": d.devices, "cursor": d.cursor })
        }
        "GET /me/devices" => device_listing(table, user, req).await?,
        "GET /me/devices/{deviceId}" => {
            let id = path_param(req, "deviceId", |v| DeviceId::parse(v))?;
            let device = devices::get_device(table, user, &id)
                .await?
                .ok_or(ApiError::not_found("device"))?;
            json!({ "device": device })
        }
        "GET /me/devices/{deviceId}/events" => {
            let id = path_param(req, "deviceId", |v| DeviceId::parse(v))?;
            let page = events::device_events(
                table,
                user,
                &id,
                time_range(req)?,
                limit(req)?,
                param(req, "cursor").as_deref(),
            )
            .await?;
            json!({ "events": page.items, "cursor": page.cursor })
        }
        "GET /me/events" => {
            let page = events::user_events(
                table,
                user,
                time_range(req)?,
                limit(req)?,
                param(req, "cursor").as_deref(),
            )
            .await?;
            json!({ "events": page.items, "cursor": page.cursor })
        }
        other => return Err(ApiError::no_route(other)),
    })
}

/// `GET /me/devices`: all the caller's devices (AP-02), or those with `tag` (AP-12).
async fn device_listing(
    table: &FleetTable,
    user: &UserId,
    req: &Request,
) -> Result<Value, ApiError> {
    let limit = limit(req)?;
    let cursor = param(req, "cursor");
    let page = match param(req, "tag") {
        Some(tag) => {
            let tag = Tag::parse_field("tag", tag)?;
            let page =
                dashboard::devices_with_tag(table, user, &tag, limit, cursor.as_deref()).await?;
            json!({ "devices": page.items, "cursor": page.cursor })
        }
        None => {
            let page = dashboard::list_devices(table, user, limit, cursor.as_deref()).await?;
            json!({ "devices": page.items, "cursor": page.cursor })
        }
    };
    Ok(page)
}

/// Operator reads across users: `GET /admin/...` (the caller is in the admin group).
async fn operator_read(table: &FleetTable, route: &str, req: &Request) -> Result<Value, ApiError> {
    Ok(match route {
        "GET /admin/events" => {
            let event_type = EventType::parse_field("type", required(req, "type")?)?;
            let list =
                events::events_by_type(table, &event_type, time_range(req)?, limit(req)?).await?;
            json!({ "events": list })
        }
        "GET /admin/devices" => {
            let status = DeviceStatus::parse_field("status", &required(req, "status")?)?;
            let since = match param(req, "seenSince") {
                Some(t) => Timestamp::parse_field("seenSince", &t)?,
                None => Timestamp::now().plus_seconds(-DEFAULT_RANGE_SECONDS),
            };
            let list = fleet::devices_by_status(table, status, since, limit(req)?).await?;
            json!({ "devices": list })
        }
        "GET /admin/reports/{date}" => {
            let day = path_param(req, "date", |v| Day::parse_field("date", v))?;
            let report = reports::get_report(table, &day)
                .await?
                .ok_or(ApiError::not_found("report"))?;
            json!(report)
        }
        other => return Err(ApiError::no_route(other)),
    })
}

fn param(req: &Request, name: &str) -> Option<String> {
    req.query_string_parameters_ref()
        .and_then(|q| q.first(name))
        .map(str::to_string)
}

fn required(req: &Request, name: &str) -> Result<String, ValidationError> {
    param(req, name).ok_or_else(|| ValidationError::new(name, "is required"))
}

fn limit(req: &Request) -> Result<u32, ValidationError> {
    match param(req, "limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| ValidationError::new("limit", format!("must be 1..{MAX_LIMIT}"))),
    }
}

/// `from`/`to` (RFC 3339); `to` defaults to now and `from` to a day before `to`.
fn time_range(req: &Request) -> Result<TimeRange, ValidationError> {
    let to = match param(req, "to") {
        Some(t) => Timestamp::parse_field("to", &t)?,
        None => Timestamp::now(),
    };
    let from = match param(req, "from") {
        Some(f) => Timestamp::parse_field("from", &f)?,
        None => to.plus_seconds(-DEFAULT_RANGE_SECONDS),
    };
    TimeRange::new(from, to)
}
