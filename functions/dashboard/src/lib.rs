//! dashboard: every read route. A thin adapter: validate path and query parameters into the
//! `shared` types, call one access-pattern operation, shape the JSON.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use shared::http::api::{empty_response, json_response, ApiError, Caller};
use shared::http::fleet::{AdminRole, Fleet, FleetRoutes, ViewerRole};
use shared::http::gateway::{DeviceIdPath, Operator, PathParams, QueryParams};
use shared::model::alarm::severity::Severity;
use shared::model::alarm::MAX_RULES_PER_OWNER;
use shared::model::ids::{EventType, RolloutId, Tag};
use shared::model::status::DeviceStatus;
use shared::model::timestamp::{Day, Timestamp};
use shared::ops::alarms::{lifecycle, rules};
use shared::ops::events::TimeRange;
use shared::ops::orgs::{invitations, manage, members};
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
        .fleet_route("/dashboard", get(get_dashboard))
        .fleet_route("/devices", get(device_listing))
        .fleet_route("/devices/{deviceId}", get(get_device))
        .fleet_route("/devices/{deviceId}/events", get(device_events))
        .fleet_route("/devices/{deviceId}/series", get(device_series))
        .fleet_route("/devices/{deviceId}/commands", get(device_commands))
        .fleet_route("/rollouts/{rolloutId}", get(get_rollout))
        .fleet_route("/events", get(user_events))
        .route("/admin/events", get(events_by_type))
        .route("/admin/devices", get(devices_by_status))
        .route("/admin/reports/{date}", get(get_report))
        .fleet_route("/rules", get(list_rules))
        .fleet_route("/alarms", get(owner_alarms))
        .fleet_route("/devices/{deviceId}/alarms", get(device_alarms))
        .route("/admin/alarms", get(open_alarms))
        .route("/orgs", get(my_orgs))
        .route("/orgs/{orgId}", get(get_org))
        .route("/orgs/{orgId}/members", get(org_members))
        .route("/orgs/{orgId}/invitations", get(org_invitations))
        .with_state(table)
}

/// What a route answers: its response, or an error in the contract.
type Answer = Result<axum::response::Response, ApiError>;

/// `200 OK` with `body`'s JSON: through a [`Value`], so the bytes (key order) are those of
/// the answer's JSON object, whatever the field order of its Rust type.
fn ok(body: &impl Serialize) -> Answer {
    Ok(json_response(StatusCode::OK, &json_value(body)))
}

fn json_value(body: &impl Serialize) -> Value {
    serde_json::to_value(body).unwrap_or(Value::Null)
}

/// `{"profile": ...}`.
#[derive(Serialize)]
struct ProfileAnswer<T> {
    profile: T,
}

/// `{"device": ...}`.
#[derive(Serialize)]
struct DeviceAnswer<T> {
    device: T,
}

/// `{"devices": [...]}`: a listing without paging.
#[derive(Serialize)]
struct DevicesAnswer<T> {
    devices: Vec<T>,
}

/// `{"devices": [...], "cursor": ...}`: one page of devices.
#[derive(Serialize)]
struct DevicesPage<T> {
    devices: Vec<T>,
    cursor: Option<String>,
}

/// `{"events": [...], "cursor": ...}`: one page of events.
#[derive(Serialize)]
struct EventsPage<T> {
    events: Vec<T>,
    cursor: Option<String>,
}

/// `{"alarms": [...], "cursor": ...}`: one page of alarms.
#[derive(Serialize)]
struct AlarmsPage<T> {
    alarms: Vec<T>,
    cursor: Option<String>,
}

/// `{"commands": [...]}`.
#[derive(Serialize)]
struct CommandsAnswer<T> {
    commands: Vec<T>,
}

/// `{"rollout": ...}`.
#[derive(Serialize)]
struct RolloutAnswer<T> {
    rollout: T,
}

/// `{"rules": [...], "limit": n}`: the owner's rules and how many one may keep.
#[derive(Serialize)]
struct RulesAnswer<T> {
    rules: Vec<T>,
    limit: usize,
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

/// `{"orgs": [...], "cursor": ...}`: one page of the caller's organizations.
#[derive(Serialize)]
struct OrgsAnswer<T> {
    orgs: Vec<T>,
    cursor: Option<String>,
}

/// `{"org": ...}`.
#[derive(Serialize)]
struct OrgAnswer<T> {
    org: T,
}

/// `{"members": [...], "cursor": ...}`: one page of members.
#[derive(Serialize)]
struct MembersPage<T> {
    members: Vec<T>,
    cursor: Option<String>,
}

/// `{"invitations": [...], "cursor": ...}`: one page of open invitations.
#[derive(Serialize)]
struct InvitationsAnswer<T> {
    invitations: Vec<T>,
    cursor: Option<String>,
}

/// `GET /orgs`: a page of the caller's organizations, with their role in each (AP-O2).
async fn my_orgs(
    caller: Caller,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page = manage::my_orgs(&table, &caller.user_id, q.cursor.as_deref()).await?;
    ok(&OrgsAnswer {
        orgs: page.items,
        cursor: page.cursor,
    })
}

/// `GET /orgs/{orgId}` (viewer; AP-O3).
async fn get_org(fleet: Fleet<ViewerRole>, State(table): State<FleetTable>) -> Answer {
    let access = fleet.org_access()?;
    let org = manage::get_org(&table, &access.org_id, access.role).await?;
    ok(&OrgAnswer { org })
}

/// `GET /orgs/{orgId}/members` (viewer; AP-O6).
async fn org_members(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page =
        members::list_members(&table, &fleet.org_access()?.org_id, q.cursor.as_deref()).await?;
    ok(&MembersPage {
        members: page.items,
        cursor: page.cursor,
    })
}

/// `GET /orgs/{orgId}/invitations` (admin; AP-O10): a page of the open invitations.
async fn org_invitations(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page =
        invitations::list_invitations(&table, &fleet.org_access()?.org_id, q.cursor.as_deref())
            .await?;
    ok(&InvitationsAnswer {
        invitations: page.items,
        cursor: page.cursor,
    })
}

/// `GET /me`.
async fn get_profile(caller: Caller, State(table): State<FleetTable>) -> Answer {
    let profile = profile::get_profile(&table, &caller.user_id)
        .await?
        .ok_or(ApiError::not_found("profile"))?;
    ok(&ProfileAnswer { profile })
}

/// `GET /me/dashboard`, with an `ETag` of the answer: a console polling with
/// `If-None-Match` gets a bodiless 304 while nothing changed. The read is the same one
/// (AP-DASH's budget), so the tag is a hash of what it read, not a further request.
async fn get_dashboard(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let d = dashboard::dashboard(&table, &fleet.owner, q.cursor.as_deref()).await?;
    Ok(with_etag(&headers, &d))
}

/// The JSON answer with a strong `ETag` over its bytes, or `304 Not Modified` (no body) when
/// `If-None-Match` names that tag (or `*`).
fn with_etag(request: &HeaderMap, body: &impl Serialize) -> axum::response::Response {
    let body = json_value(body);
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
        json_response(StatusCode::OK, &body)
    };
    if let Ok(value) = HeaderValue::from_str(&tag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// `GET /me/devices`: all the caller's devices (AP-02), or those with `tag` (AP-12).
async fn device_listing(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let limit = limit(&q)?;
    let cursor = q.cursor.as_deref();
    match q.tag {
        Some(tag) => {
            let tag = Tag::parse_field("tag", tag)?;
            let page =
                dashboard::devices_with_tag(&table, &fleet.owner, &tag, limit, cursor).await?;
            ok(&DevicesPage {
                devices: page.items,
                cursor: page.cursor,
            })
        }
        None => {
            let page = dashboard::list_devices(&table, &fleet.owner, limit, cursor).await?;
            ok(&DevicesPage {
                devices: page.items,
                cursor: page.cursor,
            })
        }
    }
}

/// `GET /me/devices/{deviceId}`.
async fn get_device(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
) -> Answer {
    let device = devices::read::get_device(&table, &fleet.owner, &id)
        .await?
        .ok_or(ApiError::not_found("device"))?;
    ok(&DeviceAnswer { device })
}

/// `GET /me/devices/{deviceId}/commands` (AP-T3).
async fn device_commands(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
) -> Answer {
    let commands = twin::owner::list_commands(&table, &fleet.owner, &id)
        .await?
        .ok_or(ApiError::not_found("device"))?;
    ok(&CommandsAnswer { commands })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RolloutPath {
    rollout_id: String,
}

/// `GET /me/rollouts/{rolloutId}` (AP-T6).
async fn get_rollout(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<RolloutPath>,
) -> Answer {
    let id = RolloutId::parse(path.rollout_id)?;
    let rollout = twin::rollout::get_rollout(&table, &fleet.owner, &id)
        .await?
        .ok_or(ApiError::not_found("rollout"))?;
    ok(&RolloutAnswer { rollout })
}

/// `GET /me/devices/{deviceId}/events`.
async fn device_events(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let range = time_range(&q)?;
    let page = events::device_events(
        &table,
        &fleet.owner,
        &id,
        range,
        limit(&q)?,
        q.cursor.as_deref(),
    )
    .await?;
    ok(&EventsPage {
        events: page.items,
        cursor: page.cursor,
    })
}

/// `GET /me/devices/{deviceId}/series` (AP-29).
async fn device_series(
    fleet: Fleet<ViewerRole>,
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
    let found = series::device_series(&table, &fleet.owner, &id, &request).await?;
    ok(&found)
}

/// `GET /me/events`.
async fn user_events(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let range = time_range(&q)?;
    let page =
        events::user_events(&table, &fleet.owner, range, limit(&q)?, q.cursor.as_deref()).await?;
    ok(&EventsPage {
        events: page.items,
        cursor: page.cursor,
    })
}

/// `GET /admin/events?type=`.
async fn events_by_type(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let event_type = EventType::parse_field("type", required("type", q.event_type.clone())?)?;
    let found = events::events_by_type(&table, &event_type, time_range(&q)?, limit(&q)?).await?;
    ok(&found)
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
    ok(&DevicesAnswer { devices: list })
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
    ok(&report)
}

/// `GET /me/rules`.
async fn list_rules(fleet: Fleet<ViewerRole>, State(table): State<FleetTable>) -> Answer {
    let rules = rules::list_rules(&table, &fleet.owner).await?;
    ok(&RulesAnswer {
        rules,
        limit: MAX_RULES_PER_OWNER,
    })
}

/// `GET /me/alarms`: open first, then cleared, newest first within each.
async fn owner_alarms(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page =
        lifecycle::owner_alarms(&table, &fleet.owner, limit(&q)?, q.cursor.as_deref()).await?;
    ok(&AlarmsPage {
        alarms: page.items,
        cursor: page.cursor,
    })
}

/// `GET /me/devices/{deviceId}/alarms`: the device's alarm history, newest first.
async fn device_alarms(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page = lifecycle::device_alarms(&table, &fleet.owner, &id, limit(&q)?, q.cursor.as_deref())
        .await?;
    ok(&AlarmsPage {
        alarms: page.items,
        cursor: page.cursor,
    })
}

/// `GET /admin/alarms?severity=`: open alarms of one severity across owners.
async fn open_alarms(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let severity = Severity::parse_field("severity", &required("severity", q.severity.clone())?)?;
    let page = lifecycle::open_alarms(&table, severity, limit(&q)?, q.cursor.as_deref()).await?;
    ok(&AlarmsPage {
        alarms: page.items,
        cursor: page.cursor,
    })
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
