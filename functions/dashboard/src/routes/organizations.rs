//! Organizations: the caller's (AP-O2) and one (AP-O3).

use crate::adapters::{ok, Answer, ReadQuery};
use axum::extract::State;
use serde::Serialize;
use shared::http::api::Caller;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::QueryParams;
use shared::ops::orgs::manage;
use shared::FleetTable;

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

/// `GET /orgs`: a page of the caller's organizations, with their role in each (AP-O2).
pub(crate) async fn my_orgs(
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
pub(crate) async fn get_org(fleet: Fleet<ViewerRole>, State(table): State<FleetTable>) -> Answer {
    let access = fleet.org_access()?;
    let org = manage::get_org(&table, &access.org_id, access.role).await?;
    ok(&OrgAnswer { org })
}
