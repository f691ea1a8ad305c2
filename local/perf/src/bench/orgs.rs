//! An organization's read in the benchmark (issue 33): Alice owns an organization whose fleet
//! is a copy of her reference fleet (10 devices x 10 events, under the owner key
//! `org:{orgId}`), and `GET /orgs/{orgId}/dashboard` is timed beside `GET /me/dashboard`: the
//! same dashboard after the one membership read every organization request makes (AP-O13).
//! Seeded after the reference measurement, so the reference figures are unchanged.

use std::time::{Duration, Instant};

use serde_json::json;
use shared::model::ids::{DeviceId, DeviceType, OrgId, Tag, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;
use shared::ops::dashboard;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::orgs::{access, manage};
use shared::ops::pattern::BudgetScale;
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use super::patterns::Case;
use fleet_testkit::api_event::ApiEvent;
use fleet_testkit::reference::{Measurement, ALICE, REFERENCE_NOW, REFERENCE_RETENTION_DAYS};

/// The organization route the benchmark times.
pub const ORG_DASHBOARD_ROUTE: &str = "GET /orgs/{orgId}/dashboard";
/// What it reads, for the report.
pub const ORG_DASHBOARD_WORKLOAD: &str =
    "organization: 10 devices x 10 events, after the caller's membership read (AP-O13)";
/// The request the organization's dashboard case times.
pub const ORG_DASHBOARD_REQUEST: &str = "GET /orgs/{orgId}/dashboard (10 devices x 10 events)";
/// Devices of the organization's fleet, and events of each (the reference user's).
const DEVICES: usize = 10;
const EVENTS: usize = 10;

/// Creates Alice's organization on the seeded reference `table` and fills its fleet like
/// Alice's own: 10 thermostats, each with 10 events of the reference hour.
pub async fn seed(table: &FleetTable) -> Result<OrgId, FleetError> {
    let alice = UserId::parse(ALICE)?;
    let org = manage::create_org(
        table,
        &alice,
        Some(format!("{ALICE}@example.com")),
        "Reference organization".into(),
    )
    .await?;
    let org = OrgId::parse(org.org_id)?;
    let owner = UserId::org_fleet(&org);
    let ingestor = Ingestor::new(table.clone(), IngestConfig::default());
    let now = Timestamp::parse_field("now", REFERENCE_NOW)?;
    for d in 0..DEVICES {
        let device_id = DeviceId::parse(format!("{ALICE}-org-dev-{d}"))?;
        let tags = if d % 2 == 0 {
            vec!["home", "kitchen"]
        } else {
            vec!["home"]
        };
        let registered = register_device(
            table,
            &owner,
            DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
                device_id: device_id.clone(),
                name: format!("Sensor {d}"),
                device_type: DeviceType::parse("thermostat")?,
                tags: tags.into_iter().map(Tag::parse).collect::<Result<_, _>>()?,
            },
        )
        .await?;
        let registration = ingestor
            .authenticate(&device_id, registered.token.reveal())
            .await?;
        let events = (0..EVENTS)
            .map(|i| SubmittedEvent {
                id: Some(format!("e-{i:02}")),
                event_type: if i + 1 == EVENTS {
                    "alarm".into()
                } else {
                    ["temperature", "humidity"][i % 2].into()
                },
                value: json!(20.0 + i as f64 / 2.0),
                at: now.plus_seconds(-3600 + (d * 60 + i) as i64).to_string(),
            })
            .collect();
        let batch = validate_batch(
            events,
            now,
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
            return Err(FleetError::internal("organization events not stored"));
        }
    }
    Ok(org)
}

/// The organization dashboard's requests and units, measured as a request makes them: the
/// caller's membership, then the dashboard of the organization's fleet.
pub async fn measure(table: &FleetTable, org: &OrgId) -> Result<Measurement, FleetError> {
    let alice = UserId::parse(ALICE)?;
    let meter = RequestMeter::new();
    let devices = meter
        .clone()
        .scope(async {
            if access::member_role(table, &alice, org).await?.is_none() {
                return Err(FleetError::internal(
                    "Alice is not a member of her organization",
                ));
            }
            let dash = dashboard::dashboard(table, &UserId::org_fleet(org), None).await?;
            Ok::<_, FleetError>(dash.devices.len())
        })
        .await?;
    if devices != DEVICES {
        return Err(FleetError::internal(format!(
            "the organization's dashboard shows {devices} devices, not {DEVICES}"
        )));
    }
    Ok(Measurement {
        id: PatternId::Dashboard,
        used: meter.snapshot(),
        scale: BudgetScale::one(),
        workload: ORG_DASHBOARD_WORKLOAD,
    })
}

/// The organization's timed reads: its dashboard, as Alice (its owner).
pub fn cases(org: &OrgId) -> Vec<Case> {
    let event = ApiEvent::new(ORG_DASHBOARD_ROUTE, format!("/orgs/{org}/dashboard"))
        .param("orgId", org.as_str())
        .caller(ALICE);
    vec![Case {
        id: PatternId::Dashboard,
        request: ORG_DASHBOARD_REQUEST,
        function: "DashboardFunction",
        expected: 200,
        event: Box::new(move |_| event.to_bytes()),
    }]
}
