//! Alarm rules: `GET /me/rules`.

use crate::adapters::{ok, Answer};
use axum::extract::State;
use serde::Serialize;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::model::alarm::MAX_RULES_PER_OWNER;
use shared::ops::alarms::rules;
use shared::FleetTable;

/// `{"rules": [...], "limit": n}`: the owner's rules and how many one may keep.
#[derive(Serialize)]
struct RulesAnswer<T> {
    rules: Vec<T>,
    limit: usize,
}

/// `GET /me/rules`.
pub(crate) async fn list_rules(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
) -> Answer {
    let rules = rules::list_rules(&table, &fleet.owner).await?;
    ok(&RulesAnswer {
        rules,
        limit: MAX_RULES_PER_OWNER,
    })
}
