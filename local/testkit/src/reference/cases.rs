//! One case per access pattern on the reference dataset: what it runs (the workload), at what
//! scale its budget applies, how to run it through `shared::ops`, and the request that reaches
//! it through its function's route. The same table feeds the budget contract test
//! (`tests/it/budgets.rs`), `make docs` (`fleet_perf::model_docs`) and `make bench`
//! (`fleet_perf::bench::patterns`).
//!
//! The cases run in table order on one seeded table: reads first, then the writes, whose
//! versions and devices follow from the ones before (AP-06 changes the status at version 1,
//! then the tags at version 2; AP-08 deletes the device AP-07 registered).

use std::future::Future;
use std::pin::Pin;

use serde_json::json;
use shared::model::alarm::{AlarmId, AlarmSource, RuleDefinition, RuleId, Severity, Transition};
use shared::model::ids::{CommandName, DeviceId, DeviceType, EventType, RolloutId, Tag, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::shard::ShardCounts;
use shared::model::status::DeviceStatus;
use shared::model::timestamp::Timestamp;
use shared::model::twin::{RolloutTarget, TwinDocument, MAX_DOCUMENT_BYTES};
use shared::ops::alarms::{lifecycle, rules, transition_actions, watch, AlarmDevice};
use shared::ops::analytics::DailyReport;
use shared::ops::credentials::{revoke_token, rotate_token};
use shared::ops::devices::by_status::devices_by_status;
use shared::ops::devices::delete::delete_device;
use shared::ops::devices::read::get_device;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::devices::update::{update_device, DevicePatch};
use shared::ops::events::TimeRange;
use shared::ops::ingest::{IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::pattern::BudgetScale;
use shared::ops::profile::{get_profile, upsert_profile, ProfileUpdate};
use shared::ops::twin::device::{sync_device, DeviceReport, SubmittedAck, SubmittedReport};
use shared::ops::twin::owner::{list_commands, queue_command, set_desired, NewCommand};
use shared::ops::twin::rollout::{advance_rollouts, get_rollout, start_rollout};
use shared::ops::{dashboard, events, reports};
use shared::store::metrics::{MeterSnapshot, RequestMeter};
use shared::{FleetError, FleetTable};

use super::{ingest_at_reference_time, now, Tokens, ALICE, BOB};
use crate::api_event::ApiEvent;
use shared::model::alarm::Rule;
use shared::model::entity::Entity;
use shared::model::items::{AlarmItem, RuleSetItem};

/// This file, relative to the workspace root, for the docs' links.
pub const CASES_SOURCE: &str = file!();

/// The operator who reads the `/admin` routes.
const OPERATOR: &str = "ref-operator";
/// The reference day, as the read patterns ask for it.
const DAY: (&str, &str) = ("2026-11-20T00:00:00.000Z", "2026-11-20T23:59:59.999Z");
/// Template logical ids of the functions the calls go to.
const DASHBOARD: &str = "DashboardFunction";
const DEVICE_UPDATES: &str = "DeviceUpdatesFunction";
const INGEST: &str = "IngestFunction";

/// A case's run in progress.
pub type RunFuture<'a> = Pin<Box<dyn Future<Output = Result<(), FleetError>> + Send + 'a>>;

/// Runs a case's workload on the seeded reference table (`tokens` from its seed), metered by
/// the caller; fails when the pattern returns something else than the dataset holds.
pub type Run = for<'a> fn(&'a FleetTable, &'a Tokens) -> RunFuture<'a>;

/// The events of a route call: given the reference tokens and the first timestamp new events
/// may take, the event of the `i`-th call (warm-up calls included).
pub type Events = fn(&Tokens, Timestamp) -> Box<dyn FnMut(usize) -> Vec<u8> + Send>;

/// One access pattern's case on the reference dataset.
pub struct PatternCase {
    /// The pattern.
    pub id: PatternId,
    /// What the run does, for the docs and the budget report.
    pub workload: &'static str,
    /// The run's scale, which turns the pattern's budget into a number of requests.
    pub scale: fn(&ShardCounts) -> BudgetScale,
    /// The run itself, through `shared::ops`.
    pub run: Run,
    /// The same pattern through its function's route (none for the report fields).
    pub call: Option<RouteCall>,
}

/// A pattern's request through the Lambda that serves it, repeatable for the benchmark.
pub struct RouteCall {
    /// The request, for the report.
    pub request: &'static str,
    /// Template logical id of the function that serves it.
    pub function: &'static str,
    /// The status every call must answer.
    pub expected: u16,
    /// The call's events.
    pub events: Events,
}

fn one(_: &ShardCounts) -> BudgetScale {
    BudgetScale::one()
}

fn alice() -> Result<UserId, FleetError> {
    Ok(UserId::parse(ALICE)?)
}

/// Alice's device `n` (`ref-alice-dev-{n}`).
fn device_id(n: u32) -> String {
    format!("{ALICE}-dev-{n}")
}

fn alice_device(n: u32) -> Result<DeviceId, FleetError> {
    Ok(DeviceId::parse(device_id(n))?)
}

fn day() -> Result<TimeRange, FleetError> {
    Ok(TimeRange::new(
        Timestamp::parse_field("from", DAY.0)?,
        Timestamp::parse_field("to", DAY.1)?,
    )?)
}

/// The route key of `id` (every pattern with a call has one).
fn route(id: PatternId) -> &'static str {
    id.definition().route.unwrap_or_default()
}

/// Asks for the reference day (`from` and `to`).
trait OverTheDay {
    fn over_the_day(self) -> Self;
}

impl OverTheDay for ApiEvent {
    fn over_the_day(self) -> Self {
        self.query("from", DAY.0).query("to", DAY.1)
    }
}

/// The same event for every call.
fn every_call(event: ApiEvent) -> Box<dyn FnMut(usize) -> Vec<u8> + Send> {
    Box::new(move |_| event.to_bytes())
}

/// A read through the dashboard function, answering 200.
const fn read(request: &'static str, events: Events) -> Option<RouteCall> {
    Some(RouteCall {
        request,
        function: DASHBOARD,
        expected: 200,
        events,
    })
}

/// A write through the device-updates function.
const fn write(request: &'static str, expected: u16, events: Events) -> Option<RouteCall> {
    Some(RouteCall {
        request,
        function: DEVICE_UPDATES,
        expected,
        events,
    })
}

/// `Ok` when the run found what the dataset holds.
fn found(ok: bool, id: PatternId) -> Result<(), FleetError> {
    if ok {
        Ok(())
    } else {
        Err(FleetError::internal(format!(
            "{id} returned an unexpected result on the reference dataset"
        )))
    }
}

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

/// A batch of 100 new events (ids `{prefix}-{n}`, types cycling through three) for `device`,
/// the `batch`-th from `from`: event `n` of batch `b` is at `from + (b * 100 + n)` seconds.
pub fn ingest_event(
    device: &str,
    token: &str,
    prefix: &str,
    from: Timestamp,
    batch: usize,
) -> Vec<u8> {
    const TYPES: [&str; 3] = ["temperature", "humidity", "door"];
    let events: Vec<_> = (0..100)
        .map(|n| {
            let offset = (batch * 100 + n) as i64;
            json!({"id": format!("{prefix}-{n}"), "type": TYPES[n % TYPES.len()],
                   "value": offset, "at": from.plus_seconds(offset).to_string()})
        })
        .collect();
    ApiEvent::new(
        route(PatternId::IngestEvents),
        format!("/devices/{device}/events"),
    )
    .param("deviceId", device)
    .header("Authorization", &format!("Bearer {token}"))
    .json(&json!({ "events": events }))
    .to_bytes()
}

/// Every case, in the order they run: reads, then writes that can follow one another.
pub static CASES: &[PatternCase] = &[
    PatternCase {
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
    },
    PatternCase {
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
    },
    PatternCase {
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
    },
    PatternCase {
        id: PatternId::DeviceEvents,
        workload: "a device's 10 events of the day",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let page =
                    events::device_events(table, &alice()?, &alice_device(0)?, day()?, 50, None)
                        .await?;
                found(page.items.len() == 10, PatternId::DeviceEvents)
            })
        },
        call: read(
            "GET /me/devices/{deviceId}/events (a day: 10 events)",
            |_, _| {
                let device = device_id(0);
                every_call(
                    ApiEvent::new(
                        route(PatternId::DeviceEvents),
                        format!("/me/devices/{device}/events"),
                    )
                    .caller(ALICE)
                    .param("deviceId", &device)
                    .over_the_day(),
                )
            },
        ),
    },
    PatternCase {
        id: PatternId::UserEvents,
        workload: "Alice's newest 50 of 100 events across devices",
        // Alice's 10 devices are one group: the device list plus one Query per device.
        scale: |_| BudgetScale {
            shards: shared::ops::events::DEVICE_GROUP as u32,
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                let page = events::user_events(table, &alice()?, day()?, 50, None).await?;
                found(page.items.len() == 50, PatternId::UserEvents)
            })
        },
        call: read("GET /me/events?limit=50 (a day: 100 events)", |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::UserEvents), "/me/events")
                    .caller(ALICE)
                    .over_the_day()
                    .query("limit", "50"),
            )
        }),
    },
    PatternCase {
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
    },
    PatternCase {
        id: PatternId::EventsByType,
        workload: "a day's alarm events (a searchable type; 12 of the day's 110, one on each of 12 devices), all users",
        scale: |shards| BudgetScale {
            days: 1,
            shards: u32::from(
                EventType::parse("alarm")
                    .ok()
                    .and_then(|alarm| shards.type_shards(&alarm))
                    .unwrap_or(1),
            ),
            // The 12 devices with an alarm that day, each read once.
            devices: 12,
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                let alarm = EventType::parse("alarm")?;
                let found_events = events::events_by_type(table, &alarm, day()?, 50).await?;
                found(
                    found_events.events.len() == 12
                        && found_events.devices == 12
                        && found_events.complete,
                    PatternId::EventsByType,
                )
            })
        },
        call: read("GET /admin/events?type=alarm&limit=50 (a day)", |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::EventsByType), "/admin/events")
                    .operator(OPERATOR)
                    .query("type", "alarm")
                    .over_the_day()
                    .query("limit", "50"),
            )
        }),
    },
    PatternCase {
        id: PatternId::DevicesByTag,
        workload: "Alice's 5 devices tagged kitchen",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let kitchen = Tag::parse("kitchen")?;
                let page =
                    dashboard::devices_with_tag(table, &alice()?, &kitchen, 50, None).await?;
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
    },
    PatternCase {
        id: PatternId::DevicesByStatus,
        workload: "active devices seen since the day began",
        scale: |shards| BudgetScale {
            shards: u32::from(shards.status_shards(DeviceStatus::Active)),
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                let list = devices_by_status(
                    table,
                    DeviceStatus::Active,
                    day()?.from,
                    50,
                )
                .await?;
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
    },
    PatternCase {
        id: PatternId::DailyReport,
        workload: "the day's report",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let report = reports::get_report(table, &day()?.from.day()).await?;
                let active = report.is_some_and(|r| r.devices.by_status.get("active") == Some(&12));
                found(active, PatternId::DailyReport)
            })
        },
        call: read("GET /admin/reports/{date}", |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::DailyReport), "/admin/reports/2026-11-20")
                    .operator(OPERATOR)
                    .param("date", "2026-11-20"),
            )
        }),
    },
    PatternCase {
        id: PatternId::DeviceCountByStatus,
        workload: "devices.byStatus of the AP-15 report (computed by the daily run)",
        scale: one,
        run: |table, _| {
            Box::pin(report_field(table, PatternId::DeviceCountByStatus, |r| {
                !r.devices.by_status.is_empty()
            }))
        },
        call: None,
    },
    PatternCase {
        id: PatternId::ActiveUsers,
        workload: "users.active30d of the AP-15 report (computed by the daily run)",
        scale: one,
        run: |table, _| {
            Box::pin(report_field(table, PatternId::ActiveUsers, |r| {
                r.users.active_30d > 0
            }))
        },
        call: None,
    },
    PatternCase {
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
    },
    // The runs change device 0; the calls change devices 9 and 7, both at version 1 after the
    // seed. Device 9 leaves `active` for good on the first call (AP-13 then always finds 11);
    // device 7 has only the tag `home` and never gets `kitchen` (AP-12 always finds 5).
    PatternCase {
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
    },
    PatternCase {
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
    },
    PatternCase {
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
    },
    PatternCase {
        id: PatternId::SyncDevice,
        workload: "a device with nothing to send and nothing pending, cold Lambda",
        scale: |_| BudgetScale {
            twin: 1,
            ..BudgetScale::one()
        },
        run: |table, tokens| {
            Box::pin(async move {
                let cold = Ingestor::new(table.clone(), IngestConfig::default());
                let device = alice_device(SYNC_DEVICE)?;
                let token = tokens
                    .get(device.as_str())
                    .ok_or_else(|| FleetError::internal("no token"))?;
                let registration = cold.authenticate(&device, token).await?;
                let work = sync_device(table, &registration, &DeviceReport::default()).await?;
                found(work.is_empty(), PatternId::SyncDevice)
            })
        },
        call: Some(RouteCall {
            request: "POST /devices/{deviceId}/sync (nothing pending, warm caches)",
            function: INGEST,
            expected: 200,
            events: |tokens, _| {
                let device = device_id(SYNC_DEVICE);
                let token = tokens.get(&device).cloned().unwrap_or_default();
                every_call(
                    ApiEvent::new(
                        route(PatternId::SyncDevice),
                        format!("/devices/{device}/sync"),
                    )
                    .param("deviceId", &device)
                    .header("Authorization", &format!("Bearer {token}")),
                )
            },
        }),
    },
    // The device twin's owner patterns work on Alice's device 3 (the calls: on the `bench-{i}`
    // device the AP-07 call of the same round registered, before AP-08's deletes it); its
    // device side (AP-T4) first syncs with nothing pending, then gets this work.
    PatternCase {
        id: PatternId::SetDesired,
        workload: "set a device's desired state (If-Match 0)",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let document = TwinDocument::parse(
                    "desired",
                    json!({"reportIntervalSeconds": 300}),
                    MAX_DOCUMENT_BYTES,
                )?;
                let set = set_desired(table, &alice()?, &alice_device(SYNC_DEVICE)?, 0, document)
                    .await?;
                found(set.version == 1, PatternId::SetDesired)
            })
        },
        call: write("PUT /me/devices/{deviceId}/desired (If-Match 0)", 200, |_, _| {
            Box::new(|i| {
                let device = format!("bench-{i}");
                ApiEvent::new(
                    route(PatternId::SetDesired),
                    format!("/me/devices/{device}/desired"),
                )
                .caller(ALICE)
                .param("deviceId", &device)
                .header("If-Match", "0")
                .json(&json!({"desired": {"reportIntervalSeconds": 300}}))
                .to_bytes()
            })
        }),
    },
    PatternCase {
        id: PatternId::QueueCommand,
        workload: "queue a command (an empty queue)",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let command = NewCommand {
                    name: CommandName::parse("reboot")?,
                    parameters: TwinDocument::default(),
                    expires_in_seconds: 3600,
                };
                let queued =
                    queue_command(table, &alice()?, &alice_device(SYNC_DEVICE)?, command).await?;
                found(queued.command_id == "cmd-1", PatternId::QueueCommand)
            })
        },
        call: write("POST /me/devices/{deviceId}/commands", 201, |_, _| {
            Box::new(|i| {
                let device = format!("bench-{i}");
                ApiEvent::new(
                    route(PatternId::QueueCommand),
                    format!("/me/devices/{device}/commands"),
                )
                .caller(ALICE)
                .param("deviceId", &device)
                .json(&json!({"name": "reboot"}))
                .to_bytes()
            })
        }),
    },
    PatternCase {
        id: PatternId::ListCommands,
        workload: "a device's commands (one queued)",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let listed = list_commands(table, &alice()?, &alice_device(SYNC_DEVICE)?).await?;
                found(
                    listed.is_some_and(|l| l.len() == 1),
                    PatternId::ListCommands,
                )
            })
        },
        call: read("GET /me/devices/{deviceId}/commands", |_, _| {
            Box::new(|i| {
                let device = format!("bench-{i}");
                ApiEvent::new(
                    route(PatternId::ListCommands),
                    format!("/me/devices/{device}/commands"),
                )
                .caller(ALICE)
                .param("deviceId", &device)
                .to_bytes()
            })
        }),
    },
    PatternCase {
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
    },
    // Token rotation and revocation work on Alice's device 8, which no other case ingests for.
    PatternCase {
        id: PatternId::RotateToken,
        workload: "rotate a device's token",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                rotate_token(table, &alice()?, &alice_device(TOKEN_DEVICE)?).await?;
                Ok(())
            })
        },
        call: write("POST /me/devices/{deviceId}/token", 200, |_, _| {
            let device = device_id(TOKEN_DEVICE);
            every_call(
                ApiEvent::new(
                    route(PatternId::RotateToken),
                    format!("/me/devices/{device}/token"),
                )
                .caller(ALICE)
                .param("deviceId", &device),
            )
        }),
    },
    PatternCase {
        id: PatternId::RevokeToken,
        workload: "revoke a device's tokens",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                revoke_token(table, &alice()?, &alice_device(TOKEN_DEVICE)?).await?;
                Ok(())
            })
        },
        call: write("DELETE /me/devices/{deviceId}/token", 204, |_, _| {
            let device = device_id(TOKEN_DEVICE);
            every_call(
                ApiEvent::new(
                    route(PatternId::RevokeToken),
                    format!("/me/devices/{device}/token"),
                )
                .caller(ALICE)
                .param("deviceId", &device),
            )
        }),
    },
    // The device side with work pending (the AP-T1 and AP-T2 cases set it on device 3): it
    // syncs (delivery), then reports and acknowledges.
    PatternCase {
        id: PatternId::SyncDevice,
        workload: "a desired change and a command pending: delivered",
        scale: |_| BudgetScale {
            twin: 4,
            ..BudgetScale::one()
        },
        run: |table, tokens| {
            Box::pin(async move {
                let registration = sync_registration(table, tokens).await?;
                let work = sync_device(table, &registration, &DeviceReport::default()).await?;
                found(
                    work.desired.is_some() && work.commands.len() == 1,
                    PatternId::SyncDevice,
                )
            })
        },
        call: Some(RouteCall {
            request: "POST /devices/{deviceId}/sync (asks for its pending work)",
            function: INGEST,
            expected: 200,
            events: |tokens, _| sync_call(tokens, json!({})),
        }),
    },
    PatternCase {
        id: PatternId::SyncDevice,
        workload: "report the desired version applied and acknowledge the command",
        scale: |_| BudgetScale {
            twin: 5,
            ..BudgetScale::one()
        },
        run: |table, tokens| {
            Box::pin(async move {
                let registration = sync_registration(table, tokens).await?;
                let report = DeviceReport::parse(
                    Some(SubmittedReport {
                        version: 1,
                        state: json!({"reportIntervalSeconds": 600}),
                    }),
                    vec![SubmittedAck {
                        command_id: "cmd-1".into(),
                        status: "succeeded".into(),
                        result: None,
                    }],
                )?;
                let work = sync_device(table, &registration, &report).await?;
                found(
                    work.acknowledged == ["cmd-1"] && work.desired.is_none(),
                    PatternId::SyncDevice,
                )
            })
        },
        call: Some(RouteCall {
            request: "POST /devices/{deviceId}/sync (a report and an acknowledgement)",
            function: INGEST,
            expected: 200,
            events: |tokens, _| {
                sync_call(
                    tokens,
                    json!({"reported": {"version": 1, "state": {"reportIntervalSeconds": 600}},
                           "acks": [{"commandId": "cmd-1", "status": "succeeded"}]}),
                )
            },
        }),
    },
    PatternCase {
        id: PatternId::StartRollout,
        workload: "start a fleet-wide change of Alice's devices tagged kitchen (4: AP-06 retagged device 0)",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let patch = TwinDocument::parse(
                    "desired",
                    json!({"firmwareChannel": "stable"}),
                    MAX_DOCUMENT_BYTES,
                )?;
                let started = start_rollout(
                    table,
                    &alice()?,
                    RolloutTarget::Tag(Tag::parse("kitchen")?),
                    patch,
                )
                .await?;
                found(started.devices_updated == 0, PatternId::StartRollout)
            })
        },
        call: write("POST /me/rollouts (tag)", 202, |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::StartRollout), "/me/rollouts")
                    .caller(ALICE)
                    .json(&json!({"tag": "bench", "desired": {"firmwareChannel": "beta"}})),
            )
        }),
    },
    PatternCase {
        id: PatternId::GetRollout,
        workload: "a fleet-wide change's progress",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                // Which rollout: read outside the case's meter (the worker's list).
                let id = RequestMeter::new()
                    .scope(first_running_rollout(table))
                    .await?;
                let got = get_rollout(table, &alice()?, &id).await?;
                found(got.is_some(), PatternId::GetRollout)
            })
        },
        // The id a call could name is random: the bench reads one that is not there (the same
        // one GetItem), answered 404.
        call: Some(RouteCall {
            request: "GET /me/rollouts/{rolloutId} (unknown id)",
            function: DASHBOARD,
            expected: 404,
            events: |_, _| {
                every_call(
                    ApiEvent::new(route(PatternId::GetRollout), "/me/rollouts/r-unknown")
                        .caller(ALICE)
                        .param("rolloutId", "r-unknown"),
                )
            },
        }),
    },
    PatternCase {
        id: PatternId::AdvanceRollouts,
        workload: "the rollout worker: one rollout, one page of 4 devices",
        scale: |_| BudgetScale {
            shards: 1,
            pages: 1,
            devices: 4,
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                let run = advance_rollouts(
                    table,
                    std::time::Instant::now() + std::time::Duration::from_secs(60),
                )
                .await?;
                found(
                    run.devices == 4 && run.finished == 1,
                    PatternId::AdvanceRollouts,
                )
            })
        },
        call: None,
    },
    PatternCase {
        id: PatternId::IngestEvents,
        workload: "100 events, cold Lambda (registration read)",
        scale: |_| BudgetScale {
            batch_items: 100,
            ..BudgetScale::one()
        },
        run: |table, tokens| Box::pin(ingest_cold(table, tokens)),
        call: Some(RouteCall {
            request: "POST /devices/{deviceId}/events (100 new events, warm caches)",
            function: INGEST,
            expected: 200,
            events: |tokens, from| {
                let device = device_id(1);
                let token = tokens.get(&device).cloned().unwrap_or_default();
                Box::new(move |i| ingest_event(&device, &token, &format!("p{i}"), from, i))
            },
        }),
    },
    // Alarms: a rule on Alice's device 2, changed, then an alarm of it acknowledged and the
    // lists read, then the rule deleted. Looking up the rule's id is outside the meter.
    PatternCase {
        id: PatternId::CreateRule,
        workload: "create a rule scoped to one device (its ownership checked)",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let body = json!({"name": "Hot", "eventType": "temperature",
                    "scope": {"deviceId": device_id(ALARM_DEVICE)},
                    "condition": {"above": 80}, "clear": {"below": 75}, "severity": "major"});
                rules::create_rule(table, &alice()?, RuleDefinition::parse(&body)?).await?;
                Ok(())
            })
        },
        // Each call a new owner's first rule (an owner keeps at most 32), scoped by type.
        call: write("POST /me/rules (a type scope)", 201, |_, _| {
            Box::new(|i| {
                ApiEvent::new(route(PatternId::CreateRule), "/me/rules")
                    .caller(&format!("ref-rule-owner-{i}"))
                    .json(&json!({"name": "Hot", "eventType": "temperature",
                        "scope": {"deviceType": "thermostat"}, "condition": {"above": 80},
                        "severity": "major"}))
                    .to_bytes()
            })
        }),
    },
    PatternCase {
        id: PatternId::ListRules,
        workload: "an owner's one rule",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let rules = rules::list_rules(table, &alice()?).await?;
                found(rules.len() == 1, PatternId::ListRules)
            })
        },
        call: read("GET /me/rules (Bob's one rule)", |_, _| {
            every_call(ApiEvent::new(route(PatternId::ListRules), "/me/rules").caller(BOB))
        }),
    },
    PatternCase {
        id: PatternId::UpdateRule,
        workload: "change a rule's severity at version 1",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let id = alice_rule(table).await?;
                rules::update_rule(table, &alice()?, &id, 1, &json!({"severity": "critical"}))
                    .await?;
                Ok(())
            })
        },
        // Bob's fixture rule, one version further each call.
        call: write("PATCH /me/rules/{ruleId} (severity)", 200, |_, _| {
            Box::new(|i| {
                ApiEvent::new(
                    route(PatternId::UpdateRule),
                    format!("/me/rules/{BOB_RULE}"),
                )
                .caller(BOB)
                .param("ruleId", BOB_RULE)
                .header("If-Match", &(i + 1).to_string())
                .json(&json!({"severity": if i % 2 == 0 { "minor" } else { "warning" }}))
                .to_bytes()
            })
        }),
    },
    PatternCase {
        id: PatternId::AcknowledgeAlarm,
        workload: "acknowledge an active alarm (raised outside the meter)",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let id = RequestMeter::new().scope(raise_reference_alarm(table)).await?;
                let alarm = lifecycle::acknowledge(table, &alice()?, &id).await?;
                found(
                    alarm.state == shared::model::alarm::AlarmState::Acknowledged,
                    PatternId::AcknowledgeAlarm,
                )
            })
        },
        // Each call one of Bob's fixture alarms, active until then.
        call: write("POST /me/alarms/{alarmId}/ack", 200, |_, _| {
            Box::new(|i| {
                let id = bob_fixture_alarm(i).to_string();
                ApiEvent::new(
                    route(PatternId::AcknowledgeAlarm),
                    format!("/me/alarms/{id}/ack"),
                )
                .caller(BOB)
                .param("alarmId", &id)
                .to_bytes()
            })
        }),
    },
    PatternCase {
        id: PatternId::OwnerAlarms,
        workload: "an owner's alarms, one partition",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let page = lifecycle::owner_alarms(table, &alice()?, 50, None).await?;
                found(page.items.len() == 1, PatternId::OwnerAlarms)
            })
        },
        call: read("GET /me/alarms (Bob's first page of 50)", |_, _| {
            every_call(ApiEvent::new(route(PatternId::OwnerAlarms), "/me/alarms").caller(BOB))
        }),
    },
    PatternCase {
        id: PatternId::DeviceAlarms,
        workload: "a device's alarm history",
        scale: one,
        run: |table, _| {
            Box::pin(async move {
                let page =
                    lifecycle::device_alarms(table, &alice()?, &alice_device(ALARM_DEVICE)?, 50, None)
                        .await?;
                found(page.items.len() == 1, PatternId::DeviceAlarms)
            })
        },
        call: read("GET /me/devices/{deviceId}/alarms (first page of 50)", |_, _| {
            every_call(
                ApiEvent::new(
                    route(PatternId::DeviceAlarms),
                    format!("/me/devices/{BOB_ALARM_DEVICE}/alarms"),
                )
                .caller(BOB)
                .param("deviceId", BOB_ALARM_DEVICE),
            )
        }),
    },
    PatternCase {
        id: PatternId::OpenAlarms,
        workload: "open critical alarms across owners",
        scale: |_| BudgetScale {
            shards: u32::from(shared::model::keys::OPEN_ALARM_SHARDS),
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                let page = lifecycle::open_alarms(table, Severity::Critical, 50, None).await?;
                found(page.items.len() == 1, PatternId::OpenAlarms)
            })
        },
        call: read("GET /admin/alarms?severity=warning (first page of 50)", |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::OpenAlarms), "/admin/alarms")
                    .operator("ref-operator")
                    .query("severity", "warning"),
            )
        }),
    },
    PatternCase {
        id: PatternId::DeleteRule,
        // The reference alarm (raised for AP-25) is the rule's: the deletion clears it.
        workload: "delete a rule with one open alarm",
        scale: |_| BudgetScale {
            devices: 1,
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                let id = alice_rule(table).await?;
                rules::delete_rule(table, &alice()?, &id).await
            })
        },
        // Each call one of the fixture owners' rules, 32 to an owner.
        call: write("DELETE /me/rules/{ruleId}", 204, |_, _| {
            Box::new(|i| {
                let (owner, rule) = deletable_rule(i);
                ApiEvent::new(
                    route(PatternId::DeleteRule),
                    format!("/me/rules/{rule}"),
                )
                .caller(&owner)
                .param("ruleId", &rule)
                .to_bytes()
            })
        }),
    },
    // The alarm watch's scheduled parts, last: they raise and remind on their own fixtures
    // (a device registered with an interval, an alarm with a due reminder), set up outside the
    // meter, and change nothing an earlier case reads.
    PatternCase {
        id: PatternId::OfflineCheck,
        workload: "the offline check at a watched device's due time: every due shard, the one due device raised",
        scale: |_| BudgetScale {
            shards: u32::from(shared::model::keys::DUE_SHARDS),
            batch_items: 1,
            devices: 1,
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                let due = RequestMeter::new().scope(watched_device(table)).await?;
                let run = watch::check_offline(
                    table,
                    due,
                    std::time::Instant::now() + std::time::Duration::from_secs(60),
                )
                .await?;
                found(
                    run.candidates == 1 && run.raised == 1,
                    PatternId::OfflineCheck,
                )
            })
        },
        call: None,
    },
    PatternCase {
        id: PatternId::AlarmReminders,
        workload: "reminders at the reference time: every reminder shard, the one due alarm reminded",
        scale: |_| BudgetScale {
            shards: u32::from(shared::model::keys::REMINDER_SHARDS),
            batch_items: 1,
            devices: 1,
            ..BudgetScale::one()
        },
        run: |table, _| {
            Box::pin(async move {
                RequestMeter::new().scope(alarm_to_remind(table)).await?;
                let run = watch::send_reminders(
                    table,
                    now(),
                    std::time::Instant::now() + std::time::Duration::from_secs(60),
                )
                .await?;
                found(run.reminders == 1, PatternId::AlarmReminders)
            })
        },
        call: None,
    },
];

/// Alice's device that AP-T4 syncs (tagged home only: no rollout case reaches it).
const SYNC_DEVICE: u32 = 3;

/// Device 3's registration, read the way a cold Lambda does (outside no meter: it is the
/// pattern's first request).
async fn sync_registration(
    table: &FleetTable,
    tokens: &Tokens,
) -> Result<shared::model::items::RegistrationItem, FleetError> {
    let cold = Ingestor::new(table.clone(), IngestConfig::default());
    let device = alice_device(SYNC_DEVICE)?;
    let token = tokens
        .get(device.as_str())
        .ok_or_else(|| FleetError::internal("no token"))?;
    cold.authenticate(&device, token).await
}

/// A sync of device 3 with `body`, the same for every call.
fn sync_call(tokens: &Tokens, body: serde_json::Value) -> Box<dyn FnMut(usize) -> Vec<u8> + Send> {
    let device = device_id(SYNC_DEVICE);
    let token = tokens.get(&device).cloned().unwrap_or_default();
    every_call(
        ApiEvent::new(
            route(PatternId::SyncDevice),
            format!("/devices/{device}/sync"),
        )
        .param("deviceId", &device)
        .header("Authorization", &format!("Bearer {token}"))
        .json(&body),
    )
}

/// The first rollout on the worker's list.
async fn first_running_rollout(table: &FleetTable) -> Result<RolloutId, FleetError> {
    use shared::model::entity::Entity;
    use shared::model::twin::RunningRolloutItem;
    let listed = table
        .client
        .query()
        .table_name(table.name())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(
                shared::model::keys::RUNNING_ROLLOUTS_PK.to_string(),
            ),
        )
        .limit(1)
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    let item = listed
        .items
        .unwrap_or_default()
        .into_iter()
        .next()
        .ok_or_else(|| FleetError::internal("no running rollout"))?;
    Ok(RunningRolloutItem::from_item(item)?.rollout_id)
}

/// Alice's device the alarm cases use.
const ALARM_DEVICE: u32 = 2;

/// Bob's fixture rule, which the AP-21 calls change.
const BOB_RULE: &str = "r00000000000000b0";
/// Bob's device whose fixture alarms the AP-25 calls acknowledge.
const BOB_ALARM_DEVICE: &str = "ref-bob-dev-0";
/// Fixture alarms and deletable rules: enough for `make bench`'s warm-up and calls.
const FIXTURE_CALLS: usize = 400;

/// Bob's `i`-th fixture alarm (warning, active), a minute apart before the reference time.
fn bob_fixture_alarm(i: usize) -> AlarmId {
    AlarmId {
        device: DeviceId::parse(BOB_ALARM_DEVICE).expect("valid constant"),
        source: AlarmSource::Rule(RuleId::parse(BOB_RULE).expect("valid constant")),
        raised_at: now().plus_seconds(-60 * (i as i64 + 1)),
    }
}

/// The owner and id of the `i`-th rule the AP-22 calls delete.
fn deletable_rule(i: usize) -> (String, String) {
    let per_owner = shared::model::alarm::MAX_RULES_PER_OWNER;
    (
        format!("ref-rule-keeper-{}", i / per_owner),
        format!("r{:016x}", i % per_owner),
    )
}

/// What the alarm routes' bench calls work on, written directly (fixtures, not transitions):
/// Bob's rule, his active warning alarms, and owners with 32 rules each to delete.
pub async fn seed_alarm_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    let rule = |id: &str, severity: &str| -> Result<Rule, FleetError> {
        Ok(Rule {
            rule_id: RuleId::parse(id)?,
            version: 1,
            definition: RuleDefinition::parse(
                &json!({"name": "Pressure", "eventType": "pressure",
                "scope": {"deviceType": "thermostat"}, "condition": {"above": 5},
                "severity": severity}),
            )?,
            created_at: now(),
            updated_at: now(),
        })
    };
    let mut sets = vec![RuleSetItem {
        user_id: UserId::parse(BOB)?,
        rules: [(BOB_RULE.to_string(), rule(BOB_RULE, "warning")?)].into(),
        version: 1,
    }];
    let per_owner = shared::model::alarm::MAX_RULES_PER_OWNER;
    for owner in 0..FIXTURE_CALLS.div_ceil(per_owner) {
        let rules = (0..per_owner)
            .map(|k| {
                let id = format!("r{k:016x}");
                rule(&id, "minor").map(|r| (id, r))
            })
            .collect::<Result<_, FleetError>>()?;
        sets.push(RuleSetItem {
            user_id: UserId::parse(format!("ref-rule-keeper-{owner}"))?,
            rules,
            version: 1,
        });
    }
    let mut items = Vec::new();
    for set in &sets {
        items.push(set.to_item(&table.config.shards)?);
    }
    let bob_rule = rule(BOB_RULE, "warning")?;
    for i in 0..FIXTURE_CALLS {
        let id = bob_fixture_alarm(i);
        let alarm = AlarmItem {
            user_id: UserId::parse(BOB)?,
            device_id: id.device.clone(),
            partition: 0,
            device_name: "Sensor 0".into(),
            source: BOB_RULE.into(),
            rule_name: Some(bob_rule.definition.name.clone()),
            severity: Severity::Warning,
            state: shared::model::alarm::AlarmState::Active,
            raised_at: id.raised_at,
            cleared_at: None,
            acknowledged_at: None,
            reading: None,
            clear_reading: None,
            last_seen: None,
            remind_every_seconds: None,
            remind_at: None,
            reminders: 0,
            ttl: None,
        };
        items.push(alarm.to_item(&table.config.shards)?);
    }
    for chunk in items.chunks(25) {
        let requests = chunk
            .iter()
            .map(|item| {
                let request = aws_sdk_dynamodb::types::WriteRequest::builder()
                    .put_request(
                        aws_sdk_dynamodb::types::PutRequest::builder()
                            .set_item(Some(item.clone()))
                            .build()
                            .map_err(FleetError::internal)?,
                    )
                    .build();
                Ok(request)
            })
            .collect::<Result<Vec<_>, FleetError>>()?;
        let mut pending = requests;
        while !pending.is_empty() {
            let out = table
                .client
                .batch_write_item()
                .request_items(table.name(), pending)
                .send()
                .await
                .map_err(shared::store::table::sdk_error)?;
            pending = out
                .unprocessed_items
                .and_then(|mut u| u.remove(table.name()))
                .unwrap_or_default();
        }
    }
    Ok(())
}

/// The id of Alice's one rule, read outside the meter.
async fn alice_rule(table: &FleetTable) -> Result<RuleId, FleetError> {
    let rules = RequestMeter::new()
        .scope(rules::list_rules(table, &alice()?))
        .await?;
    rules
        .first()
        .map(|r| r.rule_id.clone())
        .ok_or_else(|| FleetError::internal("no reference rule"))
}

/// An active critical alarm of Alice's rule on her alarm device, written as a transition is.
async fn raise_reference_alarm(table: &FleetTable) -> Result<AlarmId, FleetError> {
    let rule = rules::list_rules(table, &alice()?)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| FleetError::internal("no reference rule"))?;
    let at = now().plus_seconds(-60);
    let device = AlarmDevice {
        user: alice()?,
        device: alice_device(ALARM_DEVICE)?,
        partition: 0,
        name: "Sensor".into(),
    };
    let raised = Transition::Raised {
        source: AlarmSource::Rule(rule.rule_id.clone()),
        severity: rule.definition.severity,
        at,
        reading: None,
    };
    let actions = transition_actions(table, &device, std::slice::from_ref(&rule), &[raised])?;
    table
        .client
        .transact_write_items()
        .set_transact_items(Some(actions))
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    Ok(AlarmId {
        device: device.device,
        source: AlarmSource::Rule(rule.rule_id),
        raised_at: at,
    })
}

/// Alice's device whose token AP-17 rotates and AP-18 revokes.
const TOKEN_DEVICE: u32 = 8;

/// The device the AP-07 run registers and the AP-08 run deletes.
const NEW_DEVICE: &str = "ref-new";

/// AP-10 and AP-11 are fields of the AP-15 report: they cost nothing of their own at read
/// time. The report is read outside the case's meter (that read is AP-15's, measured there).
async fn report_field(
    table: &FleetTable,
    id: PatternId,
    figure: fn(&DailyReport) -> bool,
) -> Result<(), FleetError> {
    let day = day()?.from.day();
    let report = RequestMeter::new()
        .scope(reports::get_report(table, &day))
        .await?;
    found(report.as_ref().is_some_and(figure), id)
}

/// AP-14 as a cold Lambda sees it: authenticate (reads the registration), then store 100 new
/// events for Alice's device 1.
async fn ingest_cold(table: &FleetTable, tokens: &Tokens) -> Result<(), FleetError> {
    let cold = Ingestor::new(table.clone(), IngestConfig::default());
    let device = alice_device(1)?;
    let token = tokens
        .get(device.as_str())
        .ok_or_else(|| FleetError::internal("no token"))?;
    let submitted = (0..100)
        .map(|i| SubmittedEvent {
            id: Some(format!("x-{i:03}")),
            event_type: "temperature".into(),
            value: json!(i),
            at: now().plus_seconds(-1800 + i).to_string(),
        })
        .collect();
    let registration = cold.authenticate(&device, token).await?;
    let outcome = ingest_at_reference_time(&cold, &registration, submitted).await?;
    found(outcome.failed.is_empty(), PatternId::IngestEvents)
}

/// The owner of the device the AP-27 case watches.
const WATCH_OWNER: &str = "ref-watch-owner";

/// Registers a device that promises to report every minute and stores one report of it (the
/// first report puts it on the due index); returns its due time.
async fn watched_device(table: &FleetTable) -> Result<Timestamp, FleetError> {
    let owner = UserId::parse(WATCH_OWNER)?;
    let device = DeviceId::parse("ref-watched")?;
    let registered = register_device(
        table,
        &owner,
        DeviceRegistration {
            offline_detection: Default::default(),
            device_id: device.clone(),
            name: "Watched meter".into(),
            device_type: DeviceType::parse("power-meter")?,
            tags: Vec::new(),
            report_every_seconds: Some(60),
        },
    )
    .await?;
    let ingestor = Ingestor::new(table.clone(), IngestConfig::default());
    let registration = ingestor
        .authenticate(&device, registered.token.reveal())
        .await?;
    let report = vec![SubmittedEvent {
        id: Some("watched-1".into()),
        event_type: "power".into(),
        value: json!(1.5),
        at: now().plus_seconds(-60).to_string(),
    }];
    ingest_at_reference_time(&ingestor, &registration, report).await?;
    let key = shared::model::keys::ItemKey::DeviceState {
        user: owner,
        partition: registration.partition,
        device,
    };
    shared::store::dynamo::read_consistent::<shared::model::items::DeviceStateItem>(table, &key)
        .await?
        .ok_or_else(|| FleetError::internal("the watched device has no live state"))?
        .due_at()
        .ok_or_else(|| FleetError::internal("the watched device is not on the due index"))
}

/// An active alarm of Bob's whose reminder is due a minute before the reference time, written
/// directly like the other alarm fixtures (a day older than all of them).
async fn alarm_to_remind(table: &FleetTable) -> Result<(), FleetError> {
    let alarm = AlarmItem {
        user_id: UserId::parse(BOB)?,
        device_id: DeviceId::parse(BOB_ALARM_DEVICE)?,
        partition: 0,
        device_name: "Sensor 0".into(),
        source: BOB_RULE.into(),
        rule_name: Some("Pressure".into()),
        severity: Severity::Warning,
        state: shared::model::alarm::AlarmState::Active,
        raised_at: now().plus_seconds(-86_400),
        cleared_at: None,
        acknowledged_at: None,
        reading: None,
        clear_reading: None,
        last_seen: None,
        remind_every_seconds: Some(3600),
        remind_at: Some(now().plus_seconds(-60)),
        reminders: 0,
        ttl: None,
    };
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(alarm.to_item(&table.config.shards)?))
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    Ok(())
}

/// One case's run.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Pattern id.
    pub id: PatternId,
    /// What it issued.
    pub used: MeterSnapshot,
    /// The run's scale, for the budget.
    pub scale: BudgetScale,
    /// What was measured.
    pub workload: &'static str,
}

/// Runs every case once, in order, on the reference dataset (seeded by
/// [`seed`](super::seed), which gave `tokens`), each under its own meter.
pub async fn measure_patterns(
    table: &FleetTable,
    tokens: &Tokens,
) -> Result<Vec<Measurement>, FleetError> {
    let mut measurements = Vec::with_capacity(CASES.len());
    for case in CASES {
        let meter = RequestMeter::new();
        meter.clone().scope((case.run)(table, tokens)).await?;
        measurements.push(Measurement {
            id: case.id,
            used: meter.snapshot(),
            scale: (case.scale)(&table.config.shards),
            workload: case.workload,
        });
    }
    Ok(measurements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_has_a_case_and_every_routed_pattern_a_call_on_its_route() {
        for id in PatternId::ALL {
            let cases: Vec<_> = CASES.iter().filter(|c| c.id == id).collect();
            assert!(!cases.is_empty(), "{id} has no case");
            let routed = id.definition().route.is_some();
            for case in cases {
                assert_eq!(
                    case.call.is_some(),
                    routed,
                    "{id} ({}): a call exactly when the pattern has a route",
                    case.workload
                );
            }
        }
    }

    #[test]
    fn calls_go_to_the_route_of_their_pattern() {
        let tokens = Tokens::from([(device_id(1), "token".to_string())]);
        let from = now();
        for case in CASES {
            let Some(call) = &case.call else { continue };
            let event: serde_json::Value =
                serde_json::from_slice(&(call.events)(&tokens, from)(0)).expect("event JSON");
            assert_eq!(
                event["routeKey"],
                route(case.id),
                "{} {}",
                case.id,
                call.request
            );
        }
    }
}
