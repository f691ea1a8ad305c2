//! A device's twin (`PUT .../desired` AP-T1, `POST .../commands` AP-T2) and fleet-wide
//! changes (`POST /me/rollouts`, AP-T5, and staged firmware rollouts, issue 40).

use crate::adapters::{if_match, insert_etag, json_value, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use shared::http::api::{json_response, parse_json_body, ApiError, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet, OperatorRole};
use shared::http::gateway::DeviceIdPath;
use shared::model::firmware::{FirmwareId, StagePlan};
use shared::model::ids::{CommandName, DeviceType, Tag};
use shared::model::optional::not_null;
use shared::model::twin::{
    RolloutTarget, TwinDocument, DEFAULT_COMMAND_EXPIRY_SECONDS, MAX_COMMAND_EXPIRY_SECONDS,
    MAX_COMMAND_PARAMETERS_BYTES, MAX_DOCUMENT_BYTES,
};
use shared::ops::twin::owner::{self as twin, NewCommand};
use shared::ops::twin::rollout;
use shared::FleetTable;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DesiredBody {
    desired: serde_json::Value,
}

/// `PUT /me/devices/{deviceId}/desired` (AP-T1): `If-Match` is the desired version the
/// caller read (`0` before the first).
pub(crate) async fn set_desired(
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
pub(crate) async fn queue_command(
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

/// `POST /me/rollouts`'s body: a desired-state change (`tag`|`type`, `desired`) or a staged
/// firmware rollout (`target`, `firmwareId` and the stage plan).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RolloutBody {
    #[serde(default, deserialize_with = "not_null")]
    tag: Option<String>,
    #[serde(default, rename = "type", deserialize_with = "not_null")]
    device_type: Option<String>,
    #[serde(default)]
    target: Option<serde_json::Value>,
    #[serde(default)]
    desired: Option<serde_json::Value>,
    #[serde(default)]
    firmware_id: Option<serde_json::Value>,
    #[serde(default)]
    stages: Option<serde_json::Value>,
    #[serde(default)]
    soak_seconds: Option<serde_json::Value>,
    #[serde(default)]
    healthy_check_ins: Option<serde_json::Value>,
    #[serde(default)]
    success_percent: Option<serde_json::Value>,
    #[serde(default)]
    abort: Option<serde_json::Value>,
    #[serde(default)]
    maintenance_window: Option<serde_json::Value>,
}

/// `tag` or `type` (exactly one), top level or in `target`; errors name the field.
fn rollout_target(body: &RolloutBody) -> Result<RolloutTarget, ApiError> {
    let (tag, kind, prefix) = match &body.target {
        None => (body.tag.clone(), body.device_type.clone(), ""),
        Some(_) if body.tag.is_some() || body.device_type.is_some() => {
            return Err(ApiError::invalid(
                "target",
                "name the devices either in target or with tag/type, not both",
            ))
        }
        Some(serde_json::Value::Object(map)) => {
            if map.len() != 1 {
                return Err(ApiError::invalid(
                    "target",
                    "must be exactly one of {\"tag\": T} and {\"type\": T}",
                ));
            }
            let text = |key: &str| map.get(key).map(|v| v.as_str().unwrap_or("").to_string());
            (text("tag"), text("type"), "target.")
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "target",
                "must be {\"tag\": T} or {\"type\": T}",
            ))
        }
    };
    match (tag, kind) {
        (Some(tag), None) => Ok(RolloutTarget::Tag(Tag::parse_field(
            &format!("{prefix}tag"),
            tag,
        )?)),
        (None, Some(kind)) => Ok(RolloutTarget::Type(DeviceType::parse_field(
            &format!("{prefix}type"),
            kind,
        )?)),
        _ => Err(ApiError::invalid(
            if prefix.is_empty() { "tag" } else { "target" },
            "name exactly one of tag and type",
        )),
    }
}

/// `POST /me/rollouts` (AP-T5): 202, the change is applied by the scheduled worker. With a
/// `firmwareId` it is a staged firmware rollout of a `ready` package of the caller's.
pub(crate) async fn start_rollout(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: RolloutBody = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let target = rollout_target(&body)?;
    let started = match &body.firmware_id {
        Some(firmware_id) => {
            if body.desired.is_some() {
                return Err(ApiError::invalid(
                    "desired",
                    "a rollout takes either desired or firmwareId, not both",
                ));
            }
            let firmware_id = FirmwareId::parse(firmware_id.as_str().unwrap_or(""))?;
            let plan = StagePlan::parse(
                body.stages.as_ref(),
                body.soak_seconds.as_ref(),
                body.healthy_check_ins.as_ref(),
                body.success_percent.as_ref(),
                body.abort.as_ref(),
                body.maintenance_window.as_ref(),
            )?;
            rollout::start_firmware_rollout(&table, &fleet.owner, target, &firmware_id, plan)
                .await?
        }
        None => {
            let staged = [
                ("stages", &body.stages),
                ("soakSeconds", &body.soak_seconds),
                ("healthyCheckIns", &body.healthy_check_ins),
                ("successPercent", &body.success_percent),
                ("abort", &body.abort),
                ("maintenanceWindow", &body.maintenance_window),
            ];
            if let Some((field, _)) = staged.iter().find(|(_, v)| v.is_some()) {
                return Err(ApiError::invalid(
                    *field,
                    "is for a firmware rollout (with firmwareId) only",
                ));
            }
            let desired = body
                .desired
                .ok_or_else(|| ApiError::invalid("desired", "is required"))?;
            let patch = TwinDocument::parse("desired", desired, MAX_DOCUMENT_BYTES)?;
            rollout::start_rollout(&table, &fleet.owner, target, patch).await?
        }
    };
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
