//! An organization's members (AP-O6).

use crate::adapters::{ok, Answer, ReadQuery};
use axum::extract::State;
use serde::Serialize;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::QueryParams;
use shared::ops::orgs::members;
use shared::FleetTable;

/// `{"members": [...], "cursor": ...}`: one page of members.
#[derive(Serialize)]
struct MembersPage<T> {
    members: Vec<T>,
    cursor: Option<String>,
}

/// `GET /orgs/{orgId}/members` (viewer; AP-O6).
pub(crate) async fn org_members(
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
