//! device-updates: every owner write of the HTTP API (the JWT-authorized `/me...` routes
//! that change something). Besides what its name says (registering, changing and deleting a
//! device, AP-07/06/08, and its token, AP-17/18) it serves the owner's profile (`PUT /me`,
//! AP-16), a device's twin (`PUT .../desired` AP-T1, `POST .../commands` AP-T2), fleet-wide
//! changes (`POST /me/rollouts`, AP-T5), alarm rules (`POST /me/rules`, `PATCH|DELETE
//! /me/rules/{ruleId}`), alarm acknowledgement (`POST /me/alarms/{alarmId}/ack`) and the
//! owner's retention per device type (`PUT /me/retention`, AP-R1, and its read `GET
//! /me/retention`, AP-R2, served beside the write it shows, as a settings page reads it). The
//! functions split by caller and kind of request, not by entity: owners' reads are
//! `dashboard`'s, what devices send is `ingest`'s, owners' writes are this one's. The name is
//! kept because the template, Makefile, samples and docs all use it.
//!
//! A thin adapter: each route validates its input into the `shared` types, calls one
//! access-pattern operation, and maps the result to a response.

use axum::body::Bytes;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{FromRef, State};
use axum::routing::{get, patch, post, put};
use axum::Router;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};

use shared::http::api::{self, json_response, parse_json_body, ApiError, Caller, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet, FleetRoutes, OperatorRole, OwnerRole, ViewerRole};
use shared::http::gateway::{DeviceIdPath, PathParams};
use shared::model::alarm::ids::{AlarmId, RuleId};
use shared::model::alarm::rule::RuleDefinition;
use shared::model::alarm::MAX_RULES_PER_OWNER;
use shared::model::ids::{
    parse_display_name, parse_tags, CommandName, DeviceId, DeviceType, OrgId, Tag, UserId,
};
use shared::model::offline::{parse_report_every, OfflineDetection};
use shared::model::optional::not_null;
use shared::model::org::{InvitationId, Role, MAX_ORG_NAME};
use shared::model::status::DeviceStatus;
use shared::model::twin::{
    RolloutTarget, TwinDocument, DEFAULT_COMMAND_EXPIRY_SECONDS, MAX_COMMAND_EXPIRY_SECONDS,
    MAX_COMMAND_PARAMETERS_BYTES, MAX_DOCUMENT_BYTES,
};
use shared::ops::alarms::{lifecycle, rules};
use shared::ops::credentials;
use shared::ops::devices::r#move as device_move;
use shared::ops::devices::register::{self as register, DeviceRegistration};
use shared::ops::devices::update::{self as device_update, DevicePatch};
use shared::ops::devices::{delete as deletion, MAX_DEVICE_NAME};
use shared::ops::limits::{rate_limited, KeyedLimiter, RegistrationLimit};
use shared::ops::orgs::access::authorize;
use shared::ops::orgs::invitations::{self, InvitationTerms};
use shared::ops::orgs::{manage, members};
use shared::ops::profile::{self, ProfileUpdate, MAX_PROFILE_NAME};
use shared::ops::retention::{self, RetentionChange};
use shared::ops::twin::owner::{self as twin, NewCommand};
use shared::ops::twin::rollout;
use shared::FleetTable;

/// What the routes share in one execution environment: the table and the per-user
/// registration buckets.
#[derive(Clone)]
struct DeviceUpdates {
    table: FleetTable,
    registrations: Arc<KeyedLimiter<UserId>>,
}

impl FromRef<DeviceUpdates> for FleetTable {
    fn from_ref(state: &DeviceUpdates) -> Self {
        state.table.clone()
    }
}

impl FromRef<DeviceUpdates> for Arc<KeyedLimiter<UserId>> {
    fn from_ref(state: &DeviceUpdates) -> Self {
        state.registrations.clone()
    }
}

/// The function's routes: the caller's profile and devices, registrations limited per user
/// by `limit` (in this execution environment).
pub fn router(table: FleetTable, limit: RegistrationLimit) -> Router {
    Router::new()
        .route("/me", put(put_profile))
        .fleet_route("/devices", post(register_device))
        .fleet_route(
            "/devices/{deviceId}",
            patch(update_device).delete(delete_device),
        )
        .fleet_route(
            "/devices/{deviceId}/token",
            post(rotate_token).delete(revoke_token),
        )
        .fleet_route("/devices/{deviceId}/desired", put(set_desired))
        .fleet_route("/devices/{deviceId}/commands", post(queue_command))
        .fleet_route("/rollouts", post(start_rollout))
        .fleet_route("/rules", post(create_rule))
        .fleet_route("/rules/{ruleId}", patch(update_rule).delete(delete_rule))
        .fleet_route("/alarms/{alarmId}/ack", post(acknowledge_alarm))
        .fleet_route("/retention", get(get_retention).put(put_retention))
        .route("/orgs", post(create_org))
        .route("/orgs/{orgId}", patch(rename_org).delete(delete_org))
        .route(
            "/orgs/{orgId}/members/{userId}",
            patch(change_member_role).delete(remove_member),
        )
        .route("/orgs/{orgId}/invitations", post(invite))
        .route(
            "/orgs/{orgId}/invitations/{invitationId}",
            axum::routing::delete(revoke_invitation),
        )
        .route("/invitations/{code}/accept", post(accept_invitation))
        .fleet_route("/devices/{deviceId}/move", post(move_device))
        .with_state(DeviceUpdates {
            table,
            registrations: Arc::new(limit.limiter()),
        })
}

/// What a route answers: its response, or an error in the contract.
type Answer = Result<axum::response::Response, ApiError>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileBody {
    name: String,
}

/// `PUT /me`.
async fn put_profile(
    caller: Caller,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: ProfileBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let update = ProfileUpdate {
        name: parse_display_name("name", &body.name, MAX_PROFILE_NAME)?,
        email: caller.email.clone(),
    };
    let profile = profile::upsert_profile(&table, &caller.user_id, update).await?;
    Ok(json_response(
        StatusCode::OK,
        &json_value(&ProfileAnswer { profile }),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RetentionBody {
    device_type: String,
    #[serde(default, deserialize_with = "present")]
    raw_days: Option<serde_json::Value>,
}

/// `PUT /me/retention`: `rawDays` a whole number of days up to `RETENTION_DAYS`, or `null`
/// (the default again); it must be given either way.
async fn put_retention(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: RetentionBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let device_type = DeviceType::parse_field("deviceType", body.device_type)?;
    let raw_days = match body.raw_days {
        None => {
            return Err(ApiError::invalid(
                "rawDays",
                "give a number of days, or null for the default",
            ))
        }
        Some(serde_json::Value::Null) => None,
        // Anything but a whole number (2.5, "30", -1) falls to u64::MAX: out of range.
        Some(value) => Some(value.as_u64().unwrap_or(u64::MAX)),
    };
    let change = RetentionChange::new(device_type, raw_days, table.config.retention_days)?;
    let retention = retention::set_raw_retention(&table, &fleet.owner, change).await?;
    Ok(json_response(StatusCode::OK, &retention))
}

/// `GET /me/retention`.
async fn get_retention(fleet: Fleet<ViewerRole>, State(table): State<FleetTable>) -> Answer {
    let retention = retention::get_retention(&table, &fleet.owner).await?;
    Ok(json_response(StatusCode::OK, &retention))
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
    /// Validated by [`parse_report_every`] (a 400 naming the field, not serde's message);
    /// `null` is refused: leave it out to have the interval learned.
    #[serde(default, deserialize_with = "not_null")]
    report_every_seconds: Option<serde_json::Value>,
    /// Validated by [`OfflineDetection::parse_field`]; `null` is refused like any other bad
    /// value (absent is standard).
    #[serde(default, deserialize_with = "present")]
    offline_detection: Option<serde_json::Value>,
}

/// A field that may be sent as `null` (which clears it): `Some(Value::Null)`, told apart from
/// an absent field (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

/// `POST /me/devices`.
async fn register_device(
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
async fn update_device(
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
async fn delete_device(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
) -> Answer {
    deletion::delete_device(&table, &fleet.owner, &device_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

/// `POST /me/devices/{deviceId}/token`.
async fn rotate_token(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
) -> Answer {
    let rotated = credentials::rotate_token(&table, &fleet.owner, &device_id).await?;
    Ok(json_response(StatusCode::OK, &rotated))
}

/// `DELETE /me/devices/{deviceId}/token`.
async fn revoke_token(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
) -> Answer {
    credentials::revoke_token(&table, &fleet.owner, &device_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DesiredBody {
    desired: serde_json::Value,
}

/// `PUT /me/devices/{deviceId}/desired` (AP-T1): `If-Match` is the desired version the
/// caller read (`0` before the first).
async fn set_desired(
    fleet: Fleet<OperatorRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let expected = if_match(
        &headers,
        0,
        "must be the desired version, e.g. 0 before the first",
    )?;
    let body: DesiredBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let document = TwinDocument::parse("desired", body.desired, MAX_DOCUMENT_BYTES)?;
    let desired = twin::set_desired(&table, &fleet.owner, &device_id, expected, document).await?;
    let mut response = json_response(
        StatusCode::OK,
        &json_value(&DesiredAnswer { desired: &desired }),
    );
    insert_etag(&mut response, desired.version);
    Ok(response)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CommandBody {
    name: String,
    #[serde(default, deserialize_with = "not_null")]
    parameters: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "not_null")]
    expires_in_seconds: Option<i64>,
}

/// `POST /me/devices/{deviceId}/commands` (AP-T2): 201 with the queued command.
async fn queue_command(
    fleet: Fleet<OperatorRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(device_id): DeviceIdPath,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: CommandBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let expires_in_seconds = body
        .expires_in_seconds
        .unwrap_or(DEFAULT_COMMAND_EXPIRY_SECONDS);
    if !(1..=MAX_COMMAND_EXPIRY_SECONDS).contains(&expires_in_seconds) {
        return Err(ApiError::invalid(
            "expiresInSeconds",
            format!("must be 1 to {MAX_COMMAND_EXPIRY_SECONDS} seconds"),
        ));
    }
    let command = NewCommand {
        name: CommandName::parse(body.name)?,
        parameters: TwinDocument::parse(
            "parameters",
            body.parameters
                .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
            MAX_COMMAND_PARAMETERS_BYTES,
        )?,
        expires_in_seconds,
    };
    let queued = twin::queue_command(&table, &fleet.owner, &device_id, command).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json_value(&CommandAnswer { command: &queued }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RolloutBody {
    #[serde(default, deserialize_with = "not_null")]
    tag: Option<String>,
    #[serde(default, rename = "type", deserialize_with = "not_null")]
    device_type: Option<String>,
    desired: serde_json::Value,
}

/// `POST /me/rollouts` (AP-T5): 202, the change is applied by the scheduled worker.
async fn start_rollout(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: RolloutBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let target = match (body.tag, body.device_type) {
        (Some(tag), None) => RolloutTarget::Tag(Tag::parse_field("tag", tag)?),
        (None, Some(kind)) => RolloutTarget::Type(DeviceType::parse(kind)?),
        _ => return Err(ApiError::invalid("tag", "name exactly one of tag and type")),
    };
    let patch = TwinDocument::parse("desired", body.desired, MAX_DOCUMENT_BYTES)?;
    let started = rollout::start_rollout(&table, &fleet.owner, target, patch).await?;
    let mut response = json_response(
        StatusCode::ACCEPTED,
        &json_value(&RolloutAnswer { rollout: &started }),
    );
    if let Ok(value) = HeaderValue::from_str(&format!(
        "{}/rollouts/{}",
        fleet.base_path(),
        started.rollout_id
    )) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

#[derive(Deserialize)]
struct RulePath {
    #[serde(rename = "ruleId")]
    rule_id: String,
}

/// A rule id from the path: one that cannot be a rule's is no rule of the caller's (404).
fn rule_id(path: &RulePath) -> Result<RuleId, ApiError> {
    RuleId::parse(&path.rule_id).map_err(|_| ApiError::not_found("rule"))
}

/// `POST /me/rules`.
async fn create_rule(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: serde_json::Value = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let definition = RuleDefinition::parse(&body)?;
    let rule = rules::create_rule(&table, &fleet.owner, definition).await?;
    let mut response = json_response(
        StatusCode::CREATED,
        &json_value(&RuleWithLimitAnswer {
            rule: &rule,
            limit: MAX_RULES_PER_OWNER,
        }),
    );
    insert_etag(&mut response, rule.version);
    if let Ok(value) =
        HeaderValue::from_str(&format!("{}/rules/{}", fleet.base_path(), rule.rule_id))
    {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// `PATCH /me/rules/{ruleId}` (If-Match: the rule's version).
async fn update_rule(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<RulePath>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let id = rule_id(&path)?;
    let expected = if_match_version(&headers)?;
    let body: serde_json::Value = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let rule = rules::update_rule(&table, &fleet.owner, &id, expected, &body).await?;
    let mut response = json_response(StatusCode::OK, &json_value(&RuleAnswer { rule: &rule }));
    insert_etag(&mut response, rule.version);
    Ok(response)
}

/// `DELETE /me/rules/{ruleId}`.
async fn delete_rule(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<RulePath>,
) -> Answer {
    rules::delete_rule(&table, &fleet.owner, &rule_id(&path)?).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

#[derive(Deserialize)]
struct AlarmPath {
    #[serde(rename = "alarmId")]
    alarm_id: String,
}

/// `POST /me/alarms/{alarmId}/ack`.
async fn acknowledge_alarm(
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

/// The version in `If-Match`: `2`, `"2"` or `W/"2"`. Missing is a 428, anything else a 400.
fn if_match_version(headers: &HeaderMap) -> Result<u64, ApiError> {
    if_match(headers, 1, "must be the version, e.g. 1")
}

/// The version in `If-Match`, at least `least`: missing is a 428, anything else a 400 saying
/// `hint`.
fn if_match(headers: &HeaderMap, least: u64, hint: &str) -> Result<u64, ApiError> {
    let raw = headers
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
        .filter(|v| *v >= least)
        .ok_or_else(|| ApiError::invalid("If-Match", hint))
}

/// `body` as a JSON value: the answer's bytes (key order) are those of its JSON object,
/// whatever the field order of its Rust type.
fn json_value(body: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(body).unwrap_or(serde_json::Value::Null)
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

/// `{"device": ..., "token": "..."}`: a new device and its token, shown this once.
#[derive(Serialize)]
struct RegisteredAnswer<'a, T> {
    device: T,
    token: &'a str,
}

/// `{"desired": ...}`.
#[derive(Serialize)]
struct DesiredAnswer<T> {
    desired: T,
}

/// `{"command": ...}`.
#[derive(Serialize)]
struct CommandAnswer<T> {
    command: T,
}

/// `{"rollout": ...}`.
#[derive(Serialize)]
struct RolloutAnswer<T> {
    rollout: T,
}

/// `{"rule": ...}`.
#[derive(Serialize)]
struct RuleAnswer<T> {
    rule: T,
}

/// `{"rule": ..., "limit": n}`: a new rule and how many rules one owner may keep.
#[derive(Serialize)]
struct RuleWithLimitAnswer<T> {
    rule: T,
    limit: usize,
}

/// `{"alarm": ...}`.
#[derive(Serialize)]
struct AlarmAnswer<T> {
    alarm: T,
}

fn insert_etag(response: &mut axum::response::Response, version: u64) {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
}

/// `{"org": ...}`.
#[derive(Serialize)]
struct OrgAnswer<T> {
    org: T,
}

/// `{"member": ...}`.
#[derive(Serialize)]
struct MemberAnswer<T> {
    member: T,
}

/// `{"invitation": ...}`.
#[derive(Serialize)]
struct InvitationAnswer<T> {
    invitation: T,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrgBody {
    name: String,
}

/// An organization's name from a body.
fn org_name(headers: &HeaderMap, body: &Bytes) -> Result<String, ApiError> {
    let body: OrgBody = parse_json_body(headers, body, MAX_BODY_BYTES)?;
    Ok(parse_display_name("name", &body.name, MAX_ORG_NAME)?)
}

/// `POST /orgs`: a new organization, the caller its owner (AP-O1).
async fn create_org(
    caller: Caller,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let name = org_name(&headers, &body)?;
    let org = manage::create_org(&table, &caller.user_id, caller.verified_email(), name).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json_value(&OrgAnswer { org }),
    ))
}

/// `PATCH /orgs/{orgId}` (admin; AP-O4).
async fn rename_org(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let name = org_name(&headers, &body)?;
    let access = fleet.org_access()?;
    let org = manage::rename_org(&table, &access.org_id, access.role, name).await?;
    Ok(json_response(
        StatusCode::OK,
        &json_value(&OrgAnswer { org }),
    ))
}

/// `DELETE /orgs/{orgId}` (owner; AP-O5): 409 `org_not_empty` while it has devices.
async fn delete_org(fleet: Fleet<OwnerRole>, State(table): State<FleetTable>) -> Answer {
    manage::delete_org(&table, &fleet.org_access()?.org_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MemberPath {
    user_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleBody {
    role: String,
}

/// `PATCH /orgs/{orgId}/members/{userId}` `{"role"}` (admin; the owner for `owner`, which
/// hands ownership over; AP-O7).
async fn change_member_role(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<MemberPath>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let target = UserId::parse(path.user_id)?;
    let body: RoleBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let role = Role::parse_field("role", &body.role)?;
    let org = &fleet.org_access()?.org_id;
    let member = members::change_role(&table, org, &fleet.actor()?, &target, role).await?;
    Ok(json_response(
        StatusCode::OK,
        &json_value(&MemberAnswer { member }),
    ))
}

/// `DELETE /orgs/{orgId}/members/{userId}`: an admin removes a member, or anyone leaves
/// (their own id; AP-O8).
async fn remove_member(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<MemberPath>,
) -> Answer {
    let target = UserId::parse(path.user_id)?;
    let org = &fleet.org_access()?.org_id;
    members::remove_member(&table, org, &fleet.actor()?, &target).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InvitationBody {
    role: String,
    #[serde(default, deserialize_with = "not_null")]
    expires_in_days: Option<serde_json::Value>,
}

/// `POST /orgs/{orgId}/invitations` `{"role", "expiresInDays"?}` (admin; AP-O9): the code,
/// shown this once.
async fn invite(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: InvitationBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let role = Role::parse_field("role", &body.role)?;
    // Anything but a whole number (2.5, "7", -1) falls to u64::MAX: out of range.
    let days = body.expires_in_days.map(|d| d.as_u64().unwrap_or(u64::MAX));
    let terms = InvitationTerms::new(role, days)?;
    let org = &fleet.org_access()?.org_id;
    let invitation = invitations::invite(&table, org, &fleet.actor()?, terms).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json_value(&InvitationAnswer { invitation }),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InvitationPath {
    invitation_id: String,
}

/// `DELETE /orgs/{orgId}/invitations/{invitationId}` (admin; AP-O11).
async fn revoke_invitation(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<InvitationPath>,
) -> Answer {
    // An id that cannot be an invitation's names none (404, like an unknown one).
    let id =
        InvitationId::parse(&path.invitation_id).map_err(|_| ApiError::not_found("invitation"))?;
    invitations::revoke_invitation(&table, &fleet.org_access()?.org_id, &id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

#[derive(Deserialize)]
struct CodePath {
    code: String,
}

/// `POST /invitations/{code}/accept`: the caller joins with the invitation's role (AP-O12).
async fn accept_invitation(
    caller: Caller,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<CodePath>,
) -> Answer {
    let org = invitations::accept_invitation(
        &table,
        &caller.user_id,
        caller.verified_email(),
        &path.code,
    )
    .await?;
    Ok(json_response(
        StatusCode::OK,
        &json_value(&OrgAnswer { org }),
    ))
}

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
async fn move_device(
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
