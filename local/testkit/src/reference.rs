//! The reference dataset (the workload of docs/design.md's budgets: a user with 10 devices x 10 events, plus a
//! second user, an operator, and an organization with a member of each role and one device) and, in [`cases`], one case per access pattern run on it. The
//! budget contract tests check those runs against the catalog; `fleet-perf docs` writes their
//! figures into `docs/access-patterns.md`; `make bench` times their routes. Timestamps are
//! fixed so the figures are the same on every run.

pub mod cases;
mod dataset;

pub use cases::firmware::seed_rollout_fixtures;
pub use cases::{measure_patterns, Measurement};
pub use dataset::{
    Tokens, ALICE, BOB, ORG_ADMIN, ORG_DEVICE, ORG_OPERATOR, ORG_OWNER, ORG_VIEWER, REFERENCE_NOW,
    REFERENCE_RETENTION_DAYS, REF_ORG,
};

use dataset::{ingest_at_reference_time, now, seed_organization, SEEDED_FLEETS};

use std::time::{Duration, Instant};

use serde_json::json;
use shared::model::ids::{DeviceId, DeviceType, Tag, UserId};
use shared::ops::analytics::{run_daily_report, RunPlan};
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::{IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::profile::{upsert_profile, ProfileUpdate};
use shared::{FleetError, FleetTable};

/// Seeds the reference dataset into an empty `table` (whose retention must be
/// [`REFERENCE_RETENTION_DAYS`]).
pub async fn seed(table: &FleetTable) -> Result<Tokens, FleetError> {
    let mut tokens = Tokens::new();
    let ingestor = Ingestor::new(table.clone(), IngestConfig::default());
    for (user, name, devices, events) in SEEDED_FLEETS {
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
                    offline_detection: Default::default(),
                    report_every_seconds: None,
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
                    // The last event of each device is an alarm: a type operators search
                    // (AP-09), so it is the one kind of event copied into GSI1.
                    event_type: if i + 1 == events {
                        "alarm".into()
                    } else {
                        ["temperature", "humidity"][i % 2].into()
                    },
                    value: json!(20.0 + i as f64 / 2.0),
                    at: now().plus_seconds(-3600 + (d * 60 + i) as i64).to_string(),
                })
                .collect();
            let outcome = ingest_at_reference_time(&ingestor, &registration, submitted).await?;
            if !outcome.failed.is_empty() {
                return Err(FleetError::internal("reference events not stored"));
            }
            tokens.insert(device_id, token);
        }
    }
    cases::alarms::seed_alarm_fixtures(table).await?;
    cases::series::seed_series_fixtures(table).await?;
    let plan = RunPlan::new(now().day(), 4, Instant::now() + Duration::from_secs(60))?;
    let outcome = run_daily_report(table, &plan).await?;
    if !outcome.complete {
        return Err(FleetError::internal("reference report incomplete"));
    }
    // After the day's report, which counts the people's devices only (so its figures, and
    // AP-13's, are the ones the budgets were set on).
    seed_organization(table, &mut tokens).await?;
    cases::orgs::seed_org_fixtures(table).await?;
    cases::webhooks::seed_webhook_fixtures(table).await?;
    cases::firmware::seed_firmware_fixtures(table).await?;
    Ok(tokens)
}
