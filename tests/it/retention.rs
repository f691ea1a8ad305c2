//! Retention per device type (`PUT|GET /me/retention`, AP-R1/AP-R2) end to end on DynamoDB
//! Local: the round trip, bad input answered 400 naming the field with the table unchanged,
//! the shorter `ttl` on events stored afterwards (by present and newly registered devices of
//! the type), the default restored with `null`, and other owners and types untouched.

use std::sync::Arc;

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::{EntityType, ItemKey};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

const ALICE: &str = "user-alice";
const BOB: &str = "user-bob";
const DAY: i64 = 86_400;

fn put_retention(body: Value) -> ApiRequest {
    ApiRequest::put("/me/retention").json(body)
}

/// Registers `device` of `kind` for `owner`; returns its token.
async fn registered(table: &FleetTable, owner: &str, device: &str, kind: &str) -> String {
    let a = device_updates(
        table,
        ApiRequest::post("/me/devices")
            .caller(owner)
            .json(json!({"deviceId": device, "name": "Sensor", "type": kind})),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["token"].as_str().unwrap().to_string()
}

async fn retention_of(table: &FleetTable, owner: &str) -> Value {
    let a = device_updates(table, ApiRequest::get("/me/retention").caller(owner)).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    a.body
}

/// The `rawRetentionDays` on `device`'s registration, if any.
async fn registration_days(table: &FleetTable, device: &str) -> Option<i64> {
    let items = table_contents(table).await;
    let registration = items
        .iter()
        .find(|i| {
            key_of(i)
                == ItemKey::Registration {
                    device: key::device_id(device),
                }
        })
        .unwrap_or_else(|| panic!("no registration of {device}"));
    registration
        .get("rawRetentionDays")
        .map(|v| v.as_n().unwrap().parse().unwrap())
}

/// Sends one reading of `device` at `at` through a fresh ingest Lambda (no cached
/// registration) and returns the stored event's `ttl` minus its time, in days.
async fn stored_ttl_days(table: &FleetTable, device: &str, token: &str, id: &str) -> i64 {
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let at = ago(60);
    let a = ingest(
        &ingestor,
        ingest_request(
            device,
            token,
            json!([{"id": id, "type": "temperature", "value": 21.5, "at": at}]),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let items = table_contents(table).await;
    let event = items
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::Event))
        .find(|i| i.get("id").and_then(|v| v.as_s().ok()).map(String::as_str) == Some(id))
        .unwrap_or_else(|| panic!("event {id} not stored"));
    let ttl: i64 = event["ttl"].as_n().unwrap().parse().unwrap();
    let at = shared::model::timestamp::Timestamp::parse_field("at", &at).unwrap();
    let seconds = ttl - at.epoch_seconds();
    assert_eq!(
        seconds % DAY,
        0,
        "ttl is a whole number of days after the reading"
    );
    seconds / DAY
}

#[tokio::test]
async fn an_owner_shortens_one_type_and_reads_it_back() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", "thermostat").await;
    registered(&table, ALICE, "meter-1", "power-meter").await;
    let before = retention_of(&table, ALICE).await;
    assert_eq!(
        before,
        json!({"defaultRawDays": 90, "hourlyDays": 400, "dailyDays": 1826, "deviceTypes": []})
    );

    let a = device_updates(
        &table,
        put_retention(json!({"deviceType": "thermostat", "rawDays": 30})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let expected = json!({
        "defaultRawDays": 90, "hourlyDays": 400, "dailyDays": 1826,
        "deviceTypes": [{"deviceType": "thermostat", "rawDays": 30}],
    });
    assert_eq!(a.body, expected);
    assert_eq!(retention_of(&table, ALICE).await, expected);
    // Copied onto the registration ingestion reads; the other type keeps the default.
    assert_eq!(registration_days(&table, "thermo-1").await, Some(30));
    assert_eq!(registration_days(&table, "meter-1").await, None);

    // The budget: read the fleet item, write it, one page of devices, one copy.
    assert_eq!(a.used.operations.get("GetItem"), Some(&1), "{:?}", a.used);
    assert_eq!(a.used.operations.get("Query"), Some(&1), "{:?}", a.used);
    assert_eq!(
        a.used.operations.get("UpdateItem"),
        Some(&2),
        "{:?}",
        a.used
    );
}

#[tokio::test]
async fn bad_retention_input_is_a_400_naming_the_field_and_changes_nothing() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", "thermostat").await;
    let before = table_contents(&table).await;
    let cases = [
        (
            json!({"deviceType": "thermostat", "rawDays": 91}),
            "rawDays",
        ),
        (json!({"deviceType": "thermostat", "rawDays": 0}), "rawDays"),
        (
            json!({"deviceType": "thermostat", "rawDays": -1}),
            "rawDays",
        ),
        (
            json!({"deviceType": "thermostat", "rawDays": 2.5}),
            "rawDays",
        ),
        (
            json!({"deviceType": "thermostat", "rawDays": "30"}),
            "rawDays",
        ),
        (json!({"deviceType": "thermostat"}), "rawDays"),
        (json!({"deviceType": "a#b", "rawDays": 30}), "deviceType"),
        (json!({"deviceType": "", "rawDays": 30}), "deviceType"),
        (
            json!({"deviceType": "x".repeat(33), "rawDays": 30}),
            "deviceType",
        ),
        (json!({"rawDays": 30}), "deviceType"),
    ];
    for (body, field) in cases {
        let a = device_updates(&table, put_retention(body.clone()).caller(ALICE)).await;
        assert_eq!(a.status, 400, "{body}: {:?}", a.body);
        let message = a.body.to_string();
        assert!(message.contains(field), "{body}: {message}");
    }
    assert_eq!(table_contents(&table).await, before, "nothing written");
    assert_eq!(retention_of(&table, ALICE).await["deviceTypes"], json!([]));
}

#[tokio::test]
async fn events_stored_after_a_shortened_retention_expire_sooner_and_new_devices_follow_it() {
    let table = fresh_table().await;
    let thermo = registered(&table, ALICE, "thermo-1", "thermostat").await;
    let meter = registered(&table, ALICE, "meter-1", "power-meter").await;
    assert_eq!(
        stored_ttl_days(&table, "thermo-1", &thermo, "e-before").await,
        90
    );

    let a = device_updates(
        &table,
        put_retention(json!({"deviceType": "thermostat", "rawDays": 7})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(
        stored_ttl_days(&table, "thermo-1", &thermo, "e-after").await,
        7
    );
    assert_eq!(
        stored_ttl_days(&table, "meter-1", &meter, "m-after").await,
        90,
        "another type keeps the default"
    );
    // A thermostat registered afterwards copies the setting from the fleet item it reads.
    let newer = registered(&table, ALICE, "thermo-2", "thermostat").await;
    assert_eq!(registration_days(&table, "thermo-2").await, Some(7));
    assert_eq!(stored_ttl_days(&table, "thermo-2", &newer, "n-1").await, 7);

    // Restored: events from then on keep the template's retention again, on every device.
    let a = device_updates(
        &table,
        put_retention(json!({"deviceType": "thermostat", "rawDays": null})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["deviceTypes"], json!([]));
    assert_eq!(registration_days(&table, "thermo-1").await, None);
    assert_eq!(registration_days(&table, "thermo-2").await, None);
    assert_eq!(
        stored_ttl_days(&table, "thermo-1", &thermo, "e-restored").await,
        90
    );
    assert_eq!(stored_ttl_days(&table, "thermo-2", &newer, "n-2").await, 90);
}

#[tokio::test]
async fn a_retention_set_before_any_device_applies_to_the_first_registration() {
    let table = fresh_table().await;
    let a = device_updates(
        &table,
        put_retention(json!({"deviceType": "thermostat", "rawDays": 14})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let token = registered(&table, ALICE, "thermo-1", "thermostat").await;
    assert_eq!(registration_days(&table, "thermo-1").await, Some(14));
    assert_eq!(stored_ttl_days(&table, "thermo-1", &token, "e-1").await, 14);
    // The fleet item the setting created counts the device as any other fleet does.
    let dashboard = dashboard(&table, ApiRequest::get("/me/devices").caller(ALICE)).await;
    assert_eq!(dashboard.status, 200, "{:?}", dashboard.body);
    assert_eq!(dashboard.body["devices"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn one_owners_retention_leaves_another_owners_devices_alone() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-a", "thermostat").await;
    let bobs = registered(&table, BOB, "thermo-b", "thermostat").await;
    let a = device_updates(
        &table,
        put_retention(json!({"deviceType": "thermostat", "rawDays": 3})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(registration_days(&table, "thermo-a").await, Some(3));
    assert_eq!(registration_days(&table, "thermo-b").await, None);
    assert_eq!(retention_of(&table, BOB).await["deviceTypes"], json!([]));
    assert_eq!(stored_ttl_days(&table, "thermo-b", &bobs, "b-1").await, 90);
}

/// Validation stays at the template's retention: a reading older than its type's shortened
/// retention is accepted (its summaries count it), and its raw copy is already expired, so
/// the device's event list does not show it.
#[tokio::test]
async fn a_reading_older_than_its_types_retention_is_accepted_and_already_expired() {
    let table = fresh_table().await;
    let token = registered(&table, ALICE, "thermo-1", "thermostat").await;
    let a = device_updates(
        &table,
        put_retention(json!({"deviceType": "thermostat", "rawDays": 7})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let late = ago(10 * DAY);
    let a = ingest(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([{"id": "late", "type": "temperature", "value": 20.0, "at": late}]),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["accepted"], 1);
    let listed = dashboard(
        &table,
        ApiRequest::get("/me/devices/thermo-1/events")
            .caller(ALICE)
            .param("deviceId", "thermo-1")
            .query("from", &ago(30 * DAY))
            .query("to", &ago(0)),
    )
    .await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body["events"], json!([]), "expired on arrival");
}
