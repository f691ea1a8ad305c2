//! The cases of the owner's profile: read (AP-01) and change (AP-16).

use serde_json::json;
use shared::model::pattern_id::PatternId;
use shared::ops::profile::{get_profile, upsert_profile, ProfileUpdate};

use super::common::{alice, every_call, found, one, read, route, write, PatternCase, ALICE};
use crate::api_event::ApiEvent;

/// GetProfile: Alice's profile.
pub(super) const GET_PROFILE: PatternCase = PatternCase {
    id: PatternId::GetProfile,
    workload: "Alice's profile",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let profile = get_profile(table, &alice()?).await?;
            found(profile.is_some(), PatternId::GetProfile)
        })
    },
    call: read("GET /me", |_, _| {
        every_call(ApiEvent::new(route(PatternId::GetProfile), "/me").caller(ALICE))
    }),
};

/// PutProfile: Alice renames herself.
pub(super) const PUT_PROFILE: PatternCase = PatternCase {
    id: PatternId::PutProfile,
    workload: "Alice renames herself",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let rename = ProfileUpdate {
                name: "Alice L.".into(),
                email: None,
            };
            upsert_profile(table, &alice()?, rename).await?;
            Ok(())
        })
    },
    call: write("PUT /me (rename)", 200, |_, _| {
        Box::new(|i| {
            ApiEvent::new(route(PatternId::PutProfile), "/me")
                .caller(ALICE)
                .json(&json!({ "name": format!("Alice {i}") }))
                .to_bytes()
        })
    }),
};
