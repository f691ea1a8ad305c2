//! An organization's members: role changes and removal (AP-O7, AP-O8).

use crate::adapters::{json_value, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use shared::http::api;
use shared::http::api::{json_response, parse_json_body, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet, ViewerRole};
use shared::http::gateway::PathParams;
use shared::model::ids::UserId;
use shared::model::org::Role;
use shared::ops::orgs::members;
use shared::FleetTable;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemberPath {
    user_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleBody {
    role: String,
}

/// `PATCH /orgs/{orgId}/members/{userId}` `{"role"}` (admin; the owner for `owner`, which
/// hands ownership over; AP-O7).
pub(crate) async fn change_member_role(
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
pub(crate) async fn remove_member(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<MemberPath>,
) -> Answer {
    let target = UserId::parse(path.user_id)?;
    let org = &fleet.org_access()?.org_id;
    members::remove_member(&table, org, &fleet.actor()?, &target).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

/// `{"member": ...}`.
#[derive(Serialize)]
struct MemberAnswer<T> {
    member: T,
}
