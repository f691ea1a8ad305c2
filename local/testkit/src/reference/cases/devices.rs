//! The cases of devices: the owner's reads (list, one device, the dashboard, by tag), the
//! operators' listing by status, and the owner's writes (update, register, delete).

use serde_json::json;
use shared::model::ids::{DeviceId, DeviceType, OrgId, Tag, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::status::DeviceStatus;
use shared::ops::dashboard;
use shared::ops::devices::by_status::devices_by_status;
use shared::ops::devices::delete::delete_device;
use shared::ops::devices::r#move::{move_device, HistoryStatus};
use shared::ops::devices::read::get_device;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::devices::update::{update_device, DevicePatch};
use shared::ops::pattern::BudgetScale;

use super::common::{
    alice, alice_device, day, device_id, every_call, found, one, read, route, write, PatternCase,
    ALICE, DAY, OPERATOR,
};
use super::orgs::{movable_device, BENCH_ORG, BENCH_ORG_OWNER};
use crate::api_event::ApiEvent;

/// ListDevices: Alice's 10 devices, one page.
pub(super) const LIST_DEVICES: PatternCase = PatternCase {
    id: PatternId::ListDevices,
    workload: "Alice's 10 devices, one page",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let page = dashboard::list_devices(table, &alice()?, 50, None).await?;
            found(page.items.len() == 10, PatternId::ListDevices)
        })
    },
    call: read("GET /me/devices (10 devices)", |_, _| {
        every_call(ApiEvent::new(route(PatternId::ListDevices), "/me/devices").caller(ALICE))
    }),
};

/// GetDevice: one device with 10 recent events.
pub(super) const GET_DEVICE: PatternCase = PatternCase {
    id: PatternId::GetDevice,
    workload: "one device with 10 recent events",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let device = get_device(table, &alice()?, &alice_device(0)?).await?;
            found(device.is_some(), PatternId::GetDevice)
        })
    },
    call: read("GET /me/devices/{deviceId}", |_, _| {
        let device = device_id(0);
        every_call(
            ApiEvent::new(route(PatternId::GetDevice), format!("/me/devices/{device}"))
                .caller(ALICE)
                .param("deviceId", &device),
        )
    }),
};

/// Dashboard: profile + 10 devices x 10 recent events.
pub(super) const OWNER_DASHBOARD: PatternCase = PatternCase {
    id: PatternId::Dashboard,
    workload: "profile + 10 devices x 10 recent events",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let dash = dashboard::dashboard(table, &alice()?, None).await?;
            found(
                dash.devices.len() == 10 && dash.profile.is_some(),
                PatternId::Dashboard,
            )
        })
    },
    call: read("GET /me/dashboard (10 devices x 10 events)", |_, _| {
        every_call(ApiEvent::new(route(PatternId::Dashboard), "/me/dashboard").caller(ALICE))
    }),
};

/// DevicesByTag: Alice's 5 devices tagged kitchen.
pub(super) const DEVICES_BY_TAG: PatternCase = PatternCase {
    id: PatternId::DevicesByTag,
    workload: "Alice's 5 devices tagged kitchen",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let kitchen = Tag::parse("kitchen")?;
            let page = dashboard::devices_with_tag(table, &alice()?, &kitchen, 50, None).await?;
            found(page.items.len() == 5, PatternId::DevicesByTag)
        })
    },
    call: read("GET /me/devices?tag=kitchen", |_, _| {
        every_call(
            ApiEvent::new(route(PatternId::DevicesByTag), "/me/devices")
                .caller(ALICE)
                .query("tag", "kitchen"),
        )
    }),
};

/// DevicesByStatus: active devices seen since the day began.
pub(super) const DEVICES_BY_STATUS: PatternCase = PatternCase {
    id: PatternId::DevicesByStatus,
    workload: "active devices seen since the day began",
    scale: |shards| BudgetScale {
        shards: u32::from(shards.status_shards(DeviceStatus::Active)),
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let list = devices_by_status(table, DeviceStatus::Active, day()?.from, 50).await?;
            found(list.len() == 12, PatternId::DevicesByStatus)
        })
    },
    call: read(
        "GET /admin/devices?status=active&seenSince=(the day)",
        |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::DevicesByStatus), "/admin/devices")
                    .operator(OPERATOR)
                    .query("status", "active")
                    .query("seenSince", DAY.0),
            )
        },
    ),
};

/// UpdateDevice: status change.
pub(super) const UPDATE_STATUS: PatternCase = PatternCase {
    id: PatternId::UpdateDevice,
    workload: "status change",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let status_only = DevicePatch {
                status: Some(DeviceStatus::Maintenance),
                ..DevicePatch::default()
            };
            update_device(table, &alice()?, &alice_device(0)?, 1, status_only).await?;
            Ok(())
        })
    },
    call: write("PATCH /me/devices/{deviceId} (status)", 200, |_, _| {
        patch_calls(9, |i| {
            let status = ["maintenance", "inactive"][i % 2];
            json!({ "status": status })
        })
    }),
};

/// UpdateDevice: tag change (+ link sync).
pub(super) const UPDATE_TAGS: PatternCase = PatternCase {
    id: PatternId::UpdateDevice,
    workload: "tag change (+ link sync)",
    scale: |_| BudgetScale {
        follow_up: true,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let retag = DevicePatch {
                tags: Some(vec![Tag::parse("garage")?]),
                ..DevicePatch::default()
            };
            update_device(table, &alice()?, &alice_device(0)?, 2, retag).await?;
            Ok(())
        })
    },
    call: write("PATCH /me/devices/{deviceId} (tags)", 200, |_, _| {
        patch_calls(7, |i| {
            let tag = ["garage", "home"][i % 2];
            json!({ "tags": [tag] })
        })
    }),
};

/// RegisterDevice: register a device with 2 tags.
pub(super) const REGISTER_DEVICE: PatternCase = PatternCase {
    id: PatternId::RegisterDevice,
    workload: "register a device with 2 tags",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let registration = DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
                device_id: DeviceId::parse(NEW_DEVICE)?,
                name: "New".into(),
                device_type: DeviceType::parse("thermostat")?,
                tags: vec![Tag::parse("home")?, Tag::parse("new")?],
            };
            register_device(table, &alice()?, registration).await?;
            Ok(())
        })
    },
    call: write("POST /me/devices (2 tags)", 201, |_, _| {
        Box::new(|i| {
            let body = json!({"deviceId": format!("bench-{i}"), "name": format!("Bench {i}"),
                              "type": "thermostat", "tags": ["home", "new"]});
            ApiEvent::new(route(PatternId::RegisterDevice), "/me/devices")
                .caller(ALICE)
                .json(&body)
                .to_bytes()
        })
    }),
};

/// DeleteDevice: delete a device with 2 tags.
pub(super) const DELETE_DEVICE: PatternCase = PatternCase {
    id: PatternId::DeleteDevice,
    workload: "delete a device with 2 tags",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            delete_device(table, &alice()?, &DeviceId::parse(NEW_DEVICE)?).await?;
            Ok(())
        })
    },
    // Deletes the device the AP-07 call of the same round registered.
    call: write("DELETE /me/devices/{deviceId} (2 tags)", 204, |_, _| {
        Box::new(|i| {
            let device = format!("bench-{i}");
            ApiEvent::new(
                route(PatternId::DeleteDevice),
                format!("/me/devices/{device}"),
            )
            .caller(ALICE)
            .param("deviceId", &device)
            .to_bytes()
        })
    }),
};

/// MoveDevice: move a device without history from Alice's fleet to an organization's.
pub(super) const MOVE_DEVICE: PatternCase = PatternCase {
    id: PatternId::MoveDevice,
    workload: "move a device (2 tags, no history yet) to an organization's fleet",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            // Registered outside the meter: the case measures the move alone.
            let registration = DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
                device_id: DeviceId::parse(MOVED_DEVICE)?,
                name: "Moved".into(),
                device_type: DeviceType::parse("thermostat")?,
                tags: vec![Tag::parse("home")?, Tag::parse("new")?],
            };
            shared::store::metrics::RequestMeter::new()
                .scope(register_device(table, &alice()?, registration))
                .await?;
            // The organization it moves into exists (a move into one checks it is not being
            // deleted), written outside the meter too.
            let organization = shared::model::entities::organization::OrganizationItem {
                org_id: OrgId::parse(REFERENCE_ORG)?,
                name: "Reference moves".into(),
                owner: alice()?,
                created_by: alice()?,
                created_at: shared::model::timestamp::Timestamp::now(),
                member_count: 1,
                deleting_at: None,
            };
            shared::store::metrics::RequestMeter::new()
                .scope(async {
                    use shared::model::entities::Entity;
                    table
                        .client
                        .put_item()
                        .table_name(table.name())
                        .set_item(Some(organization.to_item(&table.config.shards)?))
                        .send()
                        .await
                        .map_err(shared::FleetError::internal)
                })
                .await?;
            let moved = move_device(
                table,
                &DeviceId::parse(MOVED_DEVICE)?,
                &alice()?,
                &UserId::org_fleet(&OrgId::parse(REFERENCE_ORG)?),
            )
            .await?;
            found(
                moved.history.status == HistoryStatus::Moved,
                PatternId::MoveDevice,
            )
        })
    },
    // Each call moves a device of its own (a fixture per call), from the bench organization's
    // owner's fleet into the organization; a month of history is tests/it/device_move.rs.
    call: write("POST /me/devices/{deviceId}/move", 200, |_, _| {
        Box::new(|i| {
            let device = movable_device(i);
            ApiEvent::new(
                route(PatternId::MoveDevice),
                format!("/me/devices/{device}/move"),
            )
            .caller(BENCH_ORG_OWNER)
            .param("deviceId", &device)
            .json(&json!({ "toOrgId": BENCH_ORG }))
            .to_bytes()
        })
    }),
};

/// The device the AP-M1 run moves.
const MOVED_DEVICE: &str = "ref-moved";
/// The organization whose fleet the AP-M1 case moves a device to (its item written by the
/// case: a move into an organization checks it is not being deleted).
const REFERENCE_ORG: &str = "o00000000000000000ref";

/// `PATCH /me/devices/{deviceId}` of Alice's device `n` with `body(i)` on the `i`-th call; the
/// device is at version 1 after the seed and every call bumps it by one.
fn patch_calls(
    n: u32,
    body: fn(usize) -> serde_json::Value,
) -> Box<dyn FnMut(usize) -> Vec<u8> + Send> {
    let device = device_id(n);
    Box::new(move |i| {
        ApiEvent::new(
            route(PatternId::UpdateDevice),
            format!("/me/devices/{device}"),
        )
        .caller(ALICE)
        .param("deviceId", &device)
        .header("If-Match", &(i + 1).to_string())
        .json(&body(i))
        .to_bytes()
    })
}

/// The device the AP-07 run registers and the AP-08 run deletes.
const NEW_DEVICE: &str = "ref-new";
