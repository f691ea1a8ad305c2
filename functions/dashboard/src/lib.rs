//! dashboard: every read route. A thin adapter: validate path and query parameters into the
//! `shared` types, call one access-pattern operation, shape the JSON.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use shared::http::api::{empty_response, json_response, ApiError, Caller};
use shared::http::gateway::{DeviceIdPath, Operator, PathParams, QueryParams};
use shared::model::alarm::severity::Severity;
use shared::model::alarm::MAX_RULES_PER_OWNER;
use shared::model::ids::{EventType, RolloutId, Tag};
use shared::model::status::DeviceStatus;
use shared::model::timestamp::{Day, Timestamp};
use shared::ops::alarms::{lifecycle, rules};
use shared::ops::events::TimeRange;
use shared::ops::series::SeriesRequest;
use shared::ops::{
    dashboard, devices, events, profile, reports, series, twin, DEFAULT_LIMIT, MAX_LIMIT,
};
use shared::{FleetTable, ValidationError};

/// Default time range of event listings, when `from` is not given.
const DEFAULT_RANGE_SECONDS: i64 = 24 * 3600;

/// The function's routes: the caller's own data (`GET /me...`) and operator reads across
/// users (`GET /admin/...`, admin group only).
pub fn router(table: FleetTable) -> Router {
    Router::new()
        .route("/me", get(get_profile))
        .route("/me/dashboard", get(get_dashboard))
        .route("/me/devices", get(device_listing))
        .route("/me/devices/{deviceId}", get(get_device))
        .route("/me/devices/{deviceId}/events", get(device_events))
        .route("/me/devices/{deviceId}/series", get(device_series))
        .route("/me/devices/{deviceId}/commands", get(device_commands))
        .route("/me/rollouts/{rolloutId}", get(get_rollout))
        .route("/me/events", get(user_events))
        .route("/admin/events", get(events_by_type))
        .route("/admin/devices", get(devices_by_status))
        .route("/admin/reports/{date}", get(get_report))
        .route("/me/rules", get(list_rules))
        .route("/me/alarms", get(owner_alarms))
        .route("/me/devices/{deviceId}/alarms", get(device_alarms))
        .route("/admin/alarms", get(open_alarms))
        .with_state(table)
}

/// What a route answers: its response, or an error in the contract.
type Answer = Result<axum::response::Response, ApiError>;

fn ok(body: Value) -> Answer {
    Ok(json_response(StatusCode::OK, &body))
}

/// The query parameters of the read routes, each validated by the route that uses it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadQuery {
    cursor: Option<String>,
    limit: Option<String>,
    from: Option<String>,
    to: Option<String>,
    tag: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    status: Option<String>,
    seen_since: Option<String>,
    severity: Option<String>,
    resolution: Option<String>,
}

/// `GET /me`.
async fn get_profile(caller: Caller, State(table): State<FleetTable>) -> Answer {
    let profile = profile::get_profile(&table, &caller.user_id)
        .await?
        .ok_or(ApiError::not_found("profile"))?;
    ok(json!({ "profile": profile }))
}

/// `GET /me/dashboard`, with an `ETag` of the answer: a console polling with
/// `If-None-Match` gets a bodiless 304 while nothing changed. The read is the same one
/// (AP-DASH's budget), so the tag is a hash of what it read, not a further request.
async fn get_dashboard(
    caller: Caller,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let d = dashboard::dashboard(&table, &caller.user_id, q.cursor.as_deref()).await?;
    let body = json!({ "profile": d.profile, "devices": d.devices, "cursor": d.cursor });
    Ok(with_etag(&headers, &body))
}

/// The JSON answer with a strong `ETag` over its bytes, or `304 Not Modified` (no body) when
/// `If-None-Match` names that tag (or `*`).
fn with_etag(request: &HeaderMap, body: &Value) -> axum::response::Response {
    let text = body.to_string();
    // xxh3 is stable across builds and machines, so every Lambda gives the same tag.
    let tag = format!("\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(text.as_bytes()));
    let matches = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*");
    let mut response = if matches {
        empty_response(StatusCode::NOT_MODIFIED)
    } else {
        json_response(StatusCode::OK, body)
    };
    if let Ok(value) = HeaderValue::from_str(&tag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// `GET /me/devices`: all the caller's devices (AP-02), or those with `tag` (AP-12).
async fn device_listing(
    caller: Caller,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let limit = limit(&q)?;
    let cursor = q.cursor.as_deref();
    match q.tag {
        Some(tag) => {
            let tag = Tag::parse_field("tag", tag)?;
            let page =
                dashboard::devices_with_tag(&table, &caller.user_id, &tag, limit, cursor).await?;
            ok(json!({ "devices": page.items, "cursor": page.cursor }))
        }
        None => {
            let page = dashboard::list_devices(&table, &caller.user_id, limit, cursor).await?;
            ok(json!({ "devices": page.items, "cursor": page.cursor }))
        }
    }
}

/// `GET /me/devices/{deviceId}`.
async fn get_device(
    caller: Caller,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
) -> Answer {
    let device = devices::read::get_device(&table, &caller.user_id, &id)
        .await?
        .ok_or(ApiError::not_found("device"))?;
    ok(json!({ "device": device }))
}

/// `GET /me/devices/{deviceId}/commands` (AP-T3).
async fn device_commands(
    caller: Caller,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
) -> Answer {
    let commands = twin::owner::list_commands(&table, &caller.user_id, &id)
        .await?
        .ok_or(ApiError::not_found("device"))?;
    ok(json!({ "commands": commands }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RolloutPath {
    rollout_id: String,
}

/// `GET /me/rollouts/{rolloutId}` (AP-T6).
async fn get_rollout(
    caller: Caller,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<RolloutPath>,
) -> Answer {
    let id = RolloutId::parse(path.rollout_id)?;
    let rollout = twin::rollout::get_rollout(&table, &caller.user_id, &id)
        .await?
        .ok_or(ApiError::not_found("rollout"))?;
    ok(json!({ "rollout": rollout }))
}

/// `GET /me/devices/{deviceId}/events`.
async fn device_events(
    caller: Caller,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let range = time_range(&q)?;
    let page = events::device_events(
        &table,
        &caller.user_id,
        &id,
        range,
        limit(&q)?,
        q.cursor.as_deref(),
    )
    .await?;
    ok(json!({ "events": page.items, "cursor": page.cursor }))
}

/// `GET /me/devices/{deviceId}/series` (AP-29).
async fn device_series(
    caller: Caller,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let request = SeriesRequest::parse(
        &table.config,
        Timestamp::now(),
        q.event_type.as_deref(),
        q.from.as_deref(),
        q.to.as_deref(),
        q.resolution.as_deref(),
    )?;
    let found = series::device_series(&table, &caller.user_id, &id, &request).await?;
    ok(json!(found))
}

/// `GET /me/events`.
async fn user_events(
    caller: Caller,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let range = time_range(&q)?;
    let page = events::user_events(
        &table,
        &caller.user_id,
        range,
        limit(&q)?,
        q.cursor.as_deref(),
    )
    .await?;
    ok(json!({ "events": page.items, "cursor": page.cursor }))
}

/// `GET /admin/events?type=`.
async fn events_by_type(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let event_type = EventType::parse_field("type", required("type", q.event_type.clone())?)?;
    let found = events::events_by_type(&table, &event_type, time_range(&q)?, limit(&q)?).await?;
    ok(json!(found))
}

/// `GET /admin/devices?status=`.
async fn devices_by_status(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let status = DeviceStatus::parse_field("status", &required("status", q.status.clone())?)?;
    let since = match &q.seen_since {
        Some(t) => Timestamp::parse_field("seenSince", t)?,
        None => Timestamp::now().plus_seconds(-DEFAULT_RANGE_SECONDS),
    };
    let list = devices::by_status::devices_by_status(&table, status, since, limit(&q)?).await?;
    ok(json!({ "devices": list }))
}

#[derive(Deserialize)]
struct ReportPath {
    date: String,
}

/// `GET /admin/reports/{date}`.
async fn get_report(
    _: Operator,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<ReportPath>,
) -> Answer {
    let day = Day::parse_field("date", &path.date)?;
    let report = reports::get_report(&table, &day)
        .await?
        .ok_or(ApiError::not_found("report"))?;
    ok(json!(report))
}

/// `GET /me/rules`.
async fn list_rules(caller: Caller, State(table): State<FleetTable>) -> Answer {
    let rules = rules::list_rules(&table, &caller.user_id).await?;
    ok(json!({ "rules": rules, "limit": MAX_RULES_PER_OWNER }))
}

/// `GET /me/alarms`: open first, then cleared, newest first within each.
async fn owner_alarms(
    caller: Caller,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page =
        lifecycle::owner_alarms(&table, &caller.user_id, limit(&q)?, q.cursor.as_deref()).await?;
    ok(json!({ "alarms": page.items, "cursor": page.cursor }))
}

/// `GET /me/devices/{deviceId}/alarms`: the device's alarm history, newest first.
async fn device_alarms(
    caller: Caller,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page = lifecycle::device_alarms(
        &table,
        &caller.user_id,
        &id,
        limit(&q)?,
        q.cursor.as_deref(),
    )
    .await?;
    ok(json!({ "alarms": page.items, "cursor": page.cursor }))
}

/// `GET /admin/alarms?severity=`: open alarms of one severity across owners.
async fn open_alarms(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let severity = Severity::parse_field("severity", &required("severity", q.severity.clone())?)?;
    let page = lifecycle::open_alarms(&table, severity, limit(&q)?, q.cursor.as_deref()).await?;
    ok(json!({ "alarms": page.items, "cursor": page.cursor }))
}

fn required(name: &str, value: Option<String>) -> Result<String, ValidationError> {
    value.ok_or_else(|| ValidationError::new(name, "is required"))
}

fn limit(q: &ReadQuery) -> Result<u32, ValidationError> {
    match &q.limit {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| ValidationError::new("limit", format!("must be 1..{MAX_LIMIT}"))),
    }
}

/// `from`/`to` (RFC 3339); `to` defaults to now and `from` to a day before `to`.
fn time_range(q: &ReadQuery) -> Result<TimeRange, ValidationError> {
    let to = match &q.to {
        Some(t) => Timestamp::parse_field("to", t)?,
        None => Timestamp::now(),
    };
    let from = match &q.from {
        Some(f) => Timestamp::parse_field("from", f)?,
        None => to.plus_seconds(-DEFAULT_RANGE_SECONDS),
    };
    TimeRange::new(from, to)
}
