//! Invitations to an organization: invite, revoke, accept (AP-O9, AP-O11, AP-O12).

use super::organizations::OrgAnswer;
use crate::adapters::{json_value, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use shared::http::api;
use shared::http::api::{json_response, parse_json_body, ApiError, Caller, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet};
use shared::http::gateway::PathParams;
use shared::model::optional::not_null;
use shared::model::org::{InvitationId, Role};
use shared::ops::orgs::invitations;
use shared::ops::orgs::invitations::InvitationTerms;
use shared::FleetTable;

/// `{"invitation": ...}`.
#[derive(Serialize)]
struct InvitationAnswer<T> {
    invitation: T,
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
pub(crate) async fn invite(
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
pub(crate) struct InvitationPath {
    invitation_id: String,
}

/// `DELETE /orgs/{orgId}/invitations/{invitationId}` (admin; AP-O11).
pub(crate) async fn revoke_invitation(
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
pub(crate) struct CodePath {
    code: String,
}

/// `POST /invitations/{code}/accept`: the caller joins with the invitation's role (AP-O12).
pub(crate) async fn accept_invitation(
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
