//! Access-pattern contracts: each implemented pattern runs on DynamoDB Local against the demo
//! dataset, and what it issued (requests, operations, consumed capacity) is checked against
//! its budget in `shared::catalog`. The budgets live in the catalog, not here.

use std::collections::BTreeSet;

use fleet_tests::*;
use shared::catalog::{pattern, BudgetScale, CATALOG, PROFILE_UPSERT};
use shared::ids::{DeviceId, DeviceType, Tag, UserId};
use shared::items::DeviceStatus;
use shared::metrics::MeterSnapshot;
use shared::ops::devices::{
    delete_device, get_device, register_device, update_device, DevicePatch, DeviceRegistration,
};
use shared::ops::profile::{upsert_profile, ProfileUpdate};

fn check(id: &str, used: &MeterSnapshot, scale: BudgetScale) {
    let p = pattern(id).unwrap_or_else(|| panic!("{id} is not in the catalog"));
    assert!(
        p.implemented_by.is_some(),
        "{id} is measured but not marked implemented"
    );
    if let Err(violation) = p.check(used, &scale) {
        panic!("{violation}");
    }
    assert!(
        used.requests() >= 1,
        "{id} issued nothing: the meter is not wired"
    );
}

/// Patterns with a contract test in this file; a pattern marked implemented in the catalog
/// without one fails `every_implemented_pattern_has_a_contract`.
const COVERED: [&str; 6] = ["AP-03", "AP-06", "AP-07", "AP-08", "AP-14", "AP-16"];

#[test]
fn every_implemented_pattern_has_a_contract() {
    let implemented: BTreeSet<&str> = CATALOG
        .iter()
        .filter(|p| p.implemented_by.is_some())
        .map(|p| p.id)
        .collect();
    let covered: BTreeSet<&str> = COVERED.into_iter().collect();
    assert_eq!(implemented, covered);
}

#[tokio::test]
async fn write_and_read_patterns_stay_within_budget() {
    let (table, _) = demo_table().await;
    let alice = UserId::parse("demo-alice").unwrap();
    let kitchen = DeviceId::parse("thermo-kitchen").unwrap();

    let (profile, used) = metered(upsert_profile(
        &table,
        &alice,
        ProfileUpdate {
            name: "Alice".into(),
            email: None,
        },
    ))
    .await;
    profile.unwrap();
    check(PROFILE_UPSERT.id, &used, BudgetScale::one());

    let (device, used) = metered(get_device(&table, &alice, &kitchen)).await;
    assert!(device.unwrap().is_some());
    check("AP-03", &used, BudgetScale::one());

    let status_only = DevicePatch {
        status: Some(DeviceStatus::Maintenance),
        ..DevicePatch::default()
    };
    let (updated, used) = metered(update_device(&table, &alice, &kitchen, 1, status_only)).await;
    assert_eq!(updated.unwrap().version, 2);
    check("AP-06", &used, BudgetScale::one());
    assert_eq!(used.requests(), 1, "a status change is one write");

    let retag = DevicePatch {
        tags: Some(vec![Tag::parse("home").unwrap()]),
        ..DevicePatch::default()
    };
    let (updated, used) = metered(update_device(&table, &alice, &kitchen, 2, retag)).await;
    assert_eq!(updated.unwrap().version, 3);
    check(
        "AP-06",
        &used,
        BudgetScale {
            sync: true,
            ..BudgetScale::one()
        },
    );

    let registration = DeviceRegistration {
        device_id: DeviceId::parse("thermo-budget").unwrap(),
        name: "Budget".into(),
        device_type: DeviceType::parse("thermostat").unwrap(),
        tags: (0..10)
            .map(|i| Tag::parse(format!("t{i}")).unwrap())
            .collect(),
    };
    let (registered, used) = metered(register_device(&table, &alice, registration)).await;
    registered.unwrap();
    check("AP-07", &used, BudgetScale::one());

    let (deleted, used) = metered(delete_device(
        &table,
        &alice,
        &DeviceId::parse("thermo-budget").unwrap(),
    ))
    .await;
    deleted.unwrap();
    check("AP-08", &used, BudgetScale::one());
}

#[tokio::test]
async fn ingesting_a_full_batch_stays_within_budget_even_on_a_cold_lambda() {
    use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, SubmittedEvent};
    use shared::timestamp::Timestamp;

    let (table, devices) = demo_table().await;
    let kitchen = devices
        .iter()
        .find(|d| d.device_id == "thermo-kitchen")
        .unwrap();
    let now = Timestamp::now();
    let submitted: Vec<SubmittedEvent> = (0..100)
        .map(|i| SubmittedEvent {
            id: Some(format!("e-{i}")),
            event_type: ["temperature", "humidity", "door"][i % 3].to_string(),
            value: serde_json::json!(i),
            at: now.plus_seconds(-(i as i64)).to_string(),
        })
        .collect();
    let events = validate_batch(submitted, now, 90, std::time::Duration::from_secs(300)).unwrap();
    // A cold Lambda: no cached registration or summary.
    let ingestor = Ingestor::new(table, IngestConfig::default());
    let device = DeviceId::parse(kitchen.device_id).unwrap();
    let ((), used) = metered(async {
        let registration = ingestor
            .authenticate(&device, &kitchen.token)
            .await
            .unwrap();
        let far = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let outcome = ingestor.ingest(&registration, events, far).await.unwrap();
        assert_eq!(outcome.accepted.len(), 100);
        assert!(outcome.failed.is_empty());
    })
    .await;
    check(
        "AP-14",
        &used,
        BudgetScale {
            batch_items: 100,
            ..BudgetScale::one()
        },
    );
    assert_eq!(used.count("BatchWriteItem"), 4);
}
