//! The caller's profile: `GET /me`.

use crate::adapters::{ok, Answer};
use axum::extract::State;
use serde::Serialize;
use shared::http::api::{ApiError, Caller};
use shared::ops::profile;
use shared::FleetTable;

/// `{"profile": ...}`.
#[derive(Serialize)]
struct ProfileAnswer<T> {
    profile: T,
}

/// `GET /me`.
pub(crate) async fn get_profile(caller: Caller, State(table): State<FleetTable>) -> Answer {
    let profile = profile::get_profile(&table, &caller.user_id)
        .await?
        .ok_or(ApiError::not_found("profile"))?;
    ok(&ProfileAnswer { profile })
}
