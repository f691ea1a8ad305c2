//! Organizations: creation, renaming and deletion (AP-O1, AP-O4, AP-O5).

use crate::adapters::{json_value, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use shared::http::api;
use shared::http::api::{json_response, parse_json_body, ApiError, Caller, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet, OwnerRole};
use shared::model::ids::parse_display_name;
use shared::model::org::MAX_ORG_NAME;
use shared::ops::orgs::manage;
use shared::store::firmware_images::FirmwareImages;
use shared::FleetTable;

/// `{"org": ...}`.
#[derive(Serialize)]
pub(crate) struct OrgAnswer<T> {
    pub(crate) org: T,
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
pub(crate) async fn create_org(
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
pub(crate) async fn rename_org(
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

/// `DELETE /orgs/{orgId}` (owner; AP-O5): 409 `org_not_empty` while it has devices. Its
/// firmware goes too, images from `images`.
pub(crate) async fn delete_org(
    fleet: Fleet<OwnerRole>,
    State(table): State<FleetTable>,
    State(images): State<FirmwareImages>,
) -> Answer {
    manage::delete_org(&table, &images, &fleet.org_access()?.org_id).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}
