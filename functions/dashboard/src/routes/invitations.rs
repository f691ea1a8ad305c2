//! An organization's open invitations (AP-O10).

use crate::adapters::{ok, Answer, ReadQuery};
use axum::extract::State;
use serde::Serialize;
use shared::http::fleet::{AdminRole, Fleet};
use shared::http::gateway::QueryParams;
use shared::ops::orgs::invitations;
use shared::FleetTable;

/// `{"invitations": [...], "cursor": ...}`: one page of open invitations.
#[derive(Serialize)]
struct InvitationsAnswer<T> {
    invitations: Vec<T>,
    cursor: Option<String>,
}

/// `GET /orgs/{orgId}/invitations` (admin; AP-O10): a page of the open invitations.
pub(crate) async fn org_invitations(
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
