//! The owner's retention per device type: `PUT /me/retention` (AP-R1) and its read
//! `GET /me/retention` (AP-R2).

use crate::adapters::{present, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use shared::http::api::{json_response, parse_json_body, ApiError, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet, ViewerRole};
use shared::model::ids::DeviceType;
use shared::ops::retention;
use shared::ops::retention::RetentionChange;
use shared::FleetTable;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RetentionBody {
    device_type: String,
    #[serde(default, deserialize_with = "present")]
    raw_days: Option<serde_json::Value>,
}

/// `PUT /me/retention`: `rawDays` a whole number of days up to `RETENTION_DAYS`, or `null`
/// (the default again); it must be given either way.
pub(crate) async fn put_retention(
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
pub(crate) async fn get_retention(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
) -> Answer {
    let retention = retention::get_retention(&table, &fleet.owner).await?;
    Ok(json_response(StatusCode::OK, &retention))
}
