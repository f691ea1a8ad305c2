//! The reference dataset (seed 000's workload: a user with 10 devices x 10 events, plus a
//! second user and an operator) and one run of every implemented access pattern on it. The
//! budget contract tests check that run against the catalog; `fleet-perf docs` writes its
//! figures into `docs/access-patterns.md`. Timestamps are fixed so the figures are the same on
//! every run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use shared::catalog::BudgetScale;
use shared::ids::{DeviceId, DeviceType, EventType, Tag, UserId};
use shared::items::DeviceStatus;
use shared::metrics::{MeterSnapshot, RequestMeter};
use shared::ops::analytics::{run_daily_report, RunPlan};
use shared::ops::devices::{
    delete_device, get_device, register_device, update_device, DevicePatch, DeviceRegistration,
};
use shared::ops::events::TimeRange;
use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::profile::{get_profile, upsert_profile, ProfileUpdate};
use shared::ops::{dashboard, events, fleet, reports};
use shared::timestamp::Timestamp;
use shared::{FleetError, FleetTable};

/// The reference time: every event of the dataset is on this day, before it.
pub const REFERENCE_NOW: &str = "2026-11-20T12:00:00.000Z";
/// Retention the reference table runs with, so the fixed timestamps stay valid.
pub const REFERENCE_RETENTION_DAYS: u32 = 3650;
/// The user with 10 devices x 10 events.
pub const ALICE: &str = "ref-alice";
/// A second user.
pub const BOB: &str = "ref-bob";

fn now() -> Timestamp {
    Timestamp::parse_field("now", REFERENCE_NOW).expect("valid constant")
}

/// The device tokens of the dataset, by device id.
pub type Tokens = BTreeMap<String, String>;

/// Seeds the reference dataset into an empty `table` (whose retention must be
/// [`REFERENCE_RETENTION_DAYS`]).
pub async fn seed(table: &FleetTable) -> Result<Tokens, FleetError> {
    let mut tokens = Tokens::new();
    let ingestor = Ingestor::new(table.clone(), IngestConfig::default());
    for (user, name, devices, events) in [(ALICE, "Alice", 10, 10), (BOB, "Bob", 2, 5)] {
        let user_id = UserId::parse(user)?;
        upsert_profile(
            table,
            &user_id,
            ProfileUpdate {
                name: name.into(),
                email: Some(format!("{user}@example.com")),
            },
        )
        .await?;
        for d in 0..devices {
            let device_id = format!("{user}-dev-{d}");
            let tags = if d % 2 == 0 {
                vec!["home", "kitchen"]
            } else {
                vec!["home"]
            };
            let registered = register_device(
                table,
                &user_id,
                DeviceRegistration {
                    device_id: DeviceId::parse(&device_id)?,
                    name: format!("Sensor {d}"),
                    device_type: DeviceType::parse("thermostat")?,
                    tags: tags.into_iter().map(Tag::parse).collect::<Result<_, _>>()?,
                },
            )
            .await?;
            let token = registered.token.reveal().to_string();
            let registration = ingestor
                .authenticate(&DeviceId::parse(&device_id)?, &token)
                .await?;
            let submitted = (0..events)
                .map(|i| SubmittedEvent {
                    id: Some(format!("e-{i:02}")),
                    event_type: ["temperature", "humidity"][i % 2].into(),
                    value: json!(20.0 + i as f64 / 2.0),
                    at: now().plus_seconds(-3600 + (d * 60 + i) as i64).to_string(),
                })
                .collect();
            let batch = validate_batch(
                submitted,
                now(),
                REFERENCE_RETENTION_DAYS,
                Duration::from_secs(300),
            )?;
            let outcome = ingestor
                .ingest(
                    &registration,
                    batch,
                    Instant::now() + Duration::from_secs(30),
                )
                .await?;
            if !outcome.failed.is_empty() {
                return Err(FleetError::internal("reference events not stored"));
            }
            tokens.insert(device_id, token);
        }
    }
    let plan = RunPlan::new(&now().day(), 4, Instant::now() + Duration::from_secs(60))?;
    let outcome = run_daily_report(table, &plan).await?;
    if !outcome.complete {
        return Err(FleetError::internal("reference report incomplete"));
    }
    Ok(tokens)
}

/// One pattern's run.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Pattern id.
    pub id: &'static str,
    /// What it issued.
    pub used: MeterSnapshot,
    /// The run's scale, for the budget.
    pub scale: BudgetScale,
    /// What was measured.
    pub workload: &'static str,
}

async fn measure<T, F>(
    out: &mut Vec<Measurement>,
    id: &'static str,
    workload: &'static str,
    scale: BudgetScale,
    fut: F,
) -> Result<T, FleetError>
where
    F: std::future::Future<Output = Result<T, FleetError>>,
{
    let meter = RequestMeter::new();
    let value = meter.clone().scope(fut).await?;
    out.push(Measurement {
        id,
        used: meter.snapshot(),
        scale,
        workload,
    });
    Ok(value)
}

/// Runs every implemented pattern once on the reference dataset (seeded by [`seed`]).
pub async fn measure_patterns(
    table: &FleetTable,
    tokens: &Tokens,
) -> Result<Vec<Measurement>, FleetError> {
    let one = BudgetScale::one();
    let alice = UserId::parse(ALICE)?;
    let first = DeviceId::parse(format!("{ALICE}-dev-0"))?;
    let day = TimeRange::new(
        Timestamp::parse_field("from", "2026-11-20T00:00:00Z")?,
        Timestamp::parse_field("to", "2026-11-20T23:59:59.999Z")?,
    )?;
    let shards = table.config.shards;
    let mut m = Vec::new();

    let profile = measure(
        &mut m,
        "AP-01",
        "Alice's profile",
        one,
        get_profile(table, &alice),
    )
    .await?;
    assert_found(profile.is_some(), "AP-01")?;
    let page = measure(
        &mut m,
        "AP-02",
        "Alice's 10 devices, one page",
        one,
        dashboard::list_devices(table, &alice, 50, None),
    )
    .await?;
    assert_found(page.items.len() == 10, "AP-02")?;
    let device = measure(
        &mut m,
        "AP-03",
        "one device with 10 recent events",
        one,
        get_device(table, &alice, &first),
    )
    .await?;
    assert_found(device.is_some(), "AP-03")?;
    let page = measure(
        &mut m,
        "AP-04",
        "a device's 10 events of the day",
        one,
        events::device_events(table, &alice, &first, day, 50, None),
    )
    .await?;
    assert_found(page.items.len() == 10, "AP-04")?;
    let scale = BudgetScale {
        shards: u32::from(shards.owner),
        ..one
    };
    let page = measure(
        &mut m,
        "AP-05",
        "Alice's newest 50 of 100 events across devices",
        scale,
        events::user_events(table, &alice, day, 50, None),
    )
    .await?;
    assert_found(page.items.len() == 50, "AP-05")?;
    let dash = measure(
        &mut m,
        "AP-DASH",
        "profile + 10 devices x 10 recent events",
        one,
        dashboard::dashboard(table, &alice, None),
    )
    .await?;
    assert_found(
        dash.devices.len() == 10 && dash.profile.is_some(),
        "AP-DASH",
    )?;
    let scale = BudgetScale {
        days: 1,
        shards: u32::from(shards.event_type),
        ..one
    };
    let list = measure(
        &mut m,
        "AP-09",
        "newest 50 temperature events of a day, all users",
        scale,
        events::events_by_type(table, &EventType::parse("temperature")?, day, 50),
    )
    .await?;
    assert_found(list.len() == 50, "AP-09")?;
    let page = measure(
        &mut m,
        "AP-12",
        "Alice's 5 devices tagged kitchen",
        one,
        dashboard::devices_with_tag(table, &alice, &Tag::parse("kitchen")?, 50, None),
    )
    .await?;
    assert_found(page.items.len() == 5, "AP-12")?;
    let scale = BudgetScale {
        shards: u32::from(shards.status),
        ..one
    };
    let list = measure(
        &mut m,
        "AP-13",
        "active devices seen since the day began",
        scale,
        fleet::devices_by_status(table, DeviceStatus::Active, day.from, 50),
    )
    .await?;
    assert_found(list.len() == 12, "AP-13")?;
    let report = measure(
        &mut m,
        "AP-15",
        "the day's report",
        one,
        reports::get_report(table, &day.from.day()),
    )
    .await?;
    let report = report.unwrap_or_default();
    assert_found(report["devices"]["byStatus"]["active"] == 12, "AP-15")?;
    // AP-10 and AP-11 are fields of that report: no request of their own at read time.
    for (id, workload, value) in [
        (
            "AP-10",
            "devices.byStatus of the AP-15 report (computed by the daily run)",
            &report["devices"]["byStatus"],
        ),
        (
            "AP-11",
            "users.active30d of the AP-15 report (computed by the daily run)",
            &report["users"]["active30d"],
        ),
    ] {
        assert_found(!value.is_null(), id)?;
        m.push(Measurement {
            id,
            used: MeterSnapshot::default(),
            scale: one,
            workload,
        });
    }

    measure(
        &mut m,
        "AP-16",
        "Alice renames herself",
        one,
        upsert_profile(
            table,
            &alice,
            ProfileUpdate {
                name: "Alice L.".into(),
                email: None,
            },
        ),
    )
    .await?;
    let status_only = DevicePatch {
        status: Some(DeviceStatus::Maintenance),
        ..DevicePatch::default()
    };
    measure(
        &mut m,
        "AP-06",
        "status change",
        one,
        update_device(table, &alice, &first, 1, status_only),
    )
    .await?;
    let retag = DevicePatch {
        tags: Some(vec![Tag::parse("garage")?]),
        ..DevicePatch::default()
    };
    measure(
        &mut m,
        "AP-06",
        "tag change (+ link sync)",
        BudgetScale {
            follow_up: true,
            ..one
        },
        update_device(table, &alice, &first, 2, retag),
    )
    .await?;
    let new_id = DeviceId::parse("ref-new")?;
    measure(
        &mut m,
        "AP-07",
        "register a device with 2 tags",
        one,
        register_device(
            table,
            &alice,
            DeviceRegistration {
                device_id: new_id.clone(),
                name: "New".into(),
                device_type: DeviceType::parse("thermostat")?,
                tags: vec![Tag::parse("home")?, Tag::parse("new")?],
            },
        ),
    )
    .await?;
    measure(
        &mut m,
        "AP-08",
        "delete a device with 2 tags",
        one,
        delete_device(table, &alice, &new_id),
    )
    .await?;

    let cold = Ingestor::new(table.clone(), IngestConfig::default());
    let second = DeviceId::parse(format!("{ALICE}-dev-1"))?;
    let token = tokens
        .get(second.as_str())
        .ok_or_else(|| FleetError::internal("no token"))?;
    let submitted = (0..100)
        .map(|i| SubmittedEvent {
            id: Some(format!("x-{i:03}")),
            event_type: "temperature".into(),
            value: json!(i),
            at: now().plus_seconds(-1800 + i).to_string(),
        })
        .collect();
    let batch = validate_batch(
        submitted,
        now(),
        REFERENCE_RETENTION_DAYS,
        Duration::from_secs(300),
    )?;
    let scale = BudgetScale {
        batch_items: 100,
        ..one
    };
    let outcome = measure(
        &mut m,
        "AP-14",
        "100 events, cold Lambda (registration read)",
        scale,
        async {
            let registration = cold.authenticate(&second, token).await?;
            cold.ingest(
                &registration,
                batch,
                Instant::now() + Duration::from_secs(30),
            )
            .await
        },
    )
    .await?;
    assert_found(outcome.failed.is_empty(), "AP-14")?;
    Ok(m)
}

fn assert_found(ok: bool, id: &str) -> Result<(), FleetError> {
    if ok {
        Ok(())
    } else {
        Err(FleetError::internal(format!(
            "{id} returned an unexpected result on the reference dataset"
        )))
    }
}
