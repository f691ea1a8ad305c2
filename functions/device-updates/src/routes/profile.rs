//! The caller's profile: `PUT /me` (AP-16).

use crate::adapters::{json_value, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use shared::http::api::{json_response, parse_json_body, Caller, MAX_BODY_BYTES};
use shared::model::ids::parse_display_name;
use shared::ops::profile;
use shared::ops::profile::{ProfileUpdate, MAX_PROFILE_NAME};
use shared::FleetTable;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileBody {
    name: String,
}

/// `PUT /me`.
pub(crate) async fn put_profile(
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

/// `{"profile": ...}`.
#[derive(Serialize)]
struct ProfileAnswer<T> {
    profile: T,
}
