//! The cases of the owner's retention per device type: change (AP-R1) and read (AP-R2).

use serde_json::json;
use shared::model::ids::{DeviceType, UserId};
use shared::model::pattern_id::PatternId;
use shared::ops::pattern::BudgetScale;
use shared::ops::retention::{get_retention, set_raw_retention, RetentionChange};
use shared::FleetError;

use super::common::{found, one, route, write, PatternCase, RouteCall, BOB, DEVICE_UPDATES};
use crate::api_event::ApiEvent;
use crate::reference::dataset::REFERENCE_RETENTION_DAYS;

/// Bob's devices: both thermostats, none registered or deleted by another case.
const BOB_THERMOSTATS: u32 = 2;

fn bob() -> Result<UserId, FleetError> {
    Ok(UserId::parse(BOB)?)
}

/// One page of Bob's devices, one registration copy per thermostat.
fn bob_thermostats(_: &shared::model::shard::ShardCounts) -> BudgetScale {
    BudgetScale {
        devices: BOB_THERMOSTATS,
        ..BudgetScale::one()
    }
}

/// SetRetention: Bob sets his thermostats' raw retention to the template's (so every later
/// case's events keep their expiry), which still copies it onto both registrations.
pub(super) const SET_RETENTION: PatternCase = PatternCase {
    id: PatternId::SetRetention,
    workload: "Bob sets his 2 thermostats' raw retention",
    scale: bob_thermostats,
    run: |table, _| {
        Box::pin(async move {
            let change = RetentionChange::new(
                DeviceType::parse("thermostat")?,
                Some(u64::from(REFERENCE_RETENTION_DAYS)),
                table.config.retention_days,
            )?;
            let retention = set_raw_retention(table, &bob()?, change).await?;
            found(retention.device_types.len() == 1, PatternId::SetRetention)
        })
    },
    call: write("PUT /me/retention", 200, |_, _| {
        Box::new(|_| {
            ApiEvent::new(route(PatternId::SetRetention), "/me/retention")
                .caller(BOB)
                .json(&json!({ "deviceType": "thermostat", "rawDays": REFERENCE_RETENTION_DAYS }))
                .to_bytes()
        })
    }),
};

/// GetRetention: Bob's retentions.
pub(super) const GET_RETENTION: PatternCase = PatternCase {
    id: PatternId::GetRetention,
    workload: "Bob's retentions (one type shortened)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let retention = get_retention(table, &bob()?).await?;
            found(retention.device_types.len() == 1, PatternId::GetRetention)
        })
    },
    // A read served by device-updates, beside the write it shows.
    call: Some(RouteCall {
        request: "GET /me/retention",
        function: DEVICE_UPDATES,
        expected: 200,
        events: |_, _| {
            Box::new(|_| {
                ApiEvent::new(route(PatternId::GetRetention), "/me/retention")
                    .caller(BOB)
                    .to_bytes()
            })
        },
    }),
};
