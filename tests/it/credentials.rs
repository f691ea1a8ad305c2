//! A device's credential lifecycle (AP-17 rotate, AP-18 revoke) as the owner and the device
//! see it: the old token keeps working for the configured overlap, a revoked token stops
//! (within the ingest registration cache window), the device and its history stay, and
//! nobody else can rotate or revoke.

use std::sync::Arc;
use std::time::Duration;

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

const OWNER: &str = "token-owner";
const DEVICE: &str = "thermo-1";

/// A fresh Lambda's ingestion (empty caches): each call authenticates against the table.
fn cold_ingestor(table: &FleetTable) -> Arc<Ingestor> {
    Arc::new(Ingestor::new(
        table.clone(),
        IngestConfig {
            registration_cache: Duration::ZERO,
            ..IngestConfig::default()
        },
    ))
}

async fn send(ingestor: &Arc<Ingestor>, token: &str, id: &str) -> Answer {
    let events = json!([{"id": id, "type": "temperature", "value": 21.5, "at": ago(30)}]);
    let request = ingest_request(DEVICE, token, events);
    let (response, used) =
        metered(gateway(ingest::router(std::sync::Arc::clone(ingestor))).handle(request.build()))
            .await;
    answer(response, used)
}

fn ago(seconds: i64) -> String {
    Timestamp::now().plus_seconds(-seconds).to_string()
}

/// A table whose device-updates function keeps replaced tokens for `overlap_seconds`, with
/// the owner's device registered; returns the device's first token.
async fn with_device(overlap_seconds: u32) -> (FleetTable, String) {
    let mut table = fresh_table().await;
    table.config.token_overlap_seconds = overlap_seconds;
    let a = device_updates(
        &table,
        ApiRequest::post("/me/devices")
            .caller(OWNER)
            .json(json!({"deviceId": DEVICE, "name": "Boiler", "type": "thermostat"})),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    (table, a.body["token"].as_str().unwrap().to_string())
}

async fn rotate(table: &FleetTable, caller: &str) -> Answer {
    let path = format!("/me/devices/{DEVICE}/token");
    device_updates(table, ApiRequest::post(&path).caller(caller)).await
}

async fn revoke(table: &FleetTable, caller: &str) -> Answer {
    let path = format!("/me/devices/{DEVICE}/token");
    device_updates(table, ApiRequest::delete(&path).caller(caller)).await
}

fn new_token(a: &Answer) -> String {
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["deviceId"], DEVICE);
    a.body["token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_rotated_token_replaces_the_old_one_after_the_overlap() {
    let (table, first) = with_device(3600).await;
    let ingest = cold_ingestor(&table);
    assert_eq!(send(&ingest, &first, "e-1").await.status, 200);

    let before = Timestamp::now();
    let a = rotate(&table, OWNER).await;
    let second = new_token(&a);
    assert_ne!(second, first);
    assert_eq!(
        (a.used.count("UpdateItem"), a.used.requests()),
        (1, 1),
        "AP-17"
    );
    let until =
        Timestamp::parse_field("until", a.body["previousTokenValidUntil"].as_str().unwrap())
            .unwrap();
    assert!(until >= before.plus_seconds(3600) && until <= Timestamp::now().plus_seconds(3600));
    // Both work during the overlap.
    assert_eq!(send(&ingest, &second, "e-2").await.status, 200);
    assert_eq!(send(&ingest, &first, "e-3").await.status, 200);
    assert!(
        !format!("{:?}", table_contents(&table).await).contains(&second),
        "the new token itself is never stored"
    );

    // Without an overlap the replaced token stops at once.
    let (table, first) = with_device(0).await;
    let ingest = cold_ingestor(&table);
    let a = rotate(&table, OWNER).await;
    let second = new_token(&a);
    assert_eq!(a.body["previousTokenValidUntil"], Value::Null);
    let refused = send(&ingest, &first, "e-1").await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (401, "unauthorized")
    );
    assert_eq!(send(&ingest, &second, "e-2").await.status, 200);
}

#[tokio::test]
async fn a_revoked_device_keeps_its_history_and_takes_no_token_until_rotated_again() {
    let (table, first) = with_device(3600).await;
    let ingest = cold_ingestor(&table);
    assert_eq!(send(&ingest, &first, "e-1").await.status, 200);
    let second = new_token(&rotate(&table, OWNER).await);

    let a = revoke(&table, OWNER).await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    assert_eq!(
        (a.used.count("UpdateItem"), a.used.requests()),
        (1, 1),
        "AP-18"
    );
    for token in [&first, &second] {
        let refused = send(&ingest, token, "e-2").await;
        assert_eq!(
            (refused.status, refused.error_code()),
            (401, "unauthorized")
        );
    }
    // Revoking again changes nothing and still answers 204.
    let contents = table_contents(&table).await;
    assert_eq!(revoke(&table, OWNER).await.status, 204);
    assert_eq!(table_contents(&table).await, contents);
    // The device and the event it sent are still the owner's.
    let path = format!("/me/devices/{DEVICE}/events");
    let events = dashboard(&table, ApiRequest::get(&path).caller(OWNER)).await;
    assert_eq!(events.status, 200, "{:?}", events.body);
    assert_eq!(events.body["events"][0]["id"], "e-1");

    // Rotating again issues a token that works; the revoked ones get no overlap.
    let a = rotate(&table, OWNER).await;
    let third = new_token(&a);
    assert_eq!(a.body["previousTokenValidUntil"], Value::Null);
    assert_eq!(send(&ingest, &third, "e-3").await.status, 200);
    for token in [&first, &second] {
        assert_eq!(send(&ingest, token, "e-4").await.status, 401);
    }
}

#[tokio::test]
async fn a_warm_ingest_container_refuses_a_revoked_token_once_its_cache_window_ends() {
    let (table, token) = with_device(3600).await;
    let window = Duration::from_millis(1500);
    let warm = Arc::new(Ingestor::new(
        table.clone(),
        IngestConfig {
            registration_cache: window,
            ..IngestConfig::default()
        },
    ));
    assert_eq!(send(&warm, &token, "e-1").await.status, 200);
    assert_eq!(revoke(&table, OWNER).await.status, 204);
    tokio::time::sleep(window + Duration::from_millis(100)).await;
    let refused = send(&warm, &token, "e-2").await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (401, "unauthorized")
    );
}

#[tokio::test]
async fn nobody_else_can_rotate_or_revoke_and_unknown_devices_are_404() {
    let (table, token) = with_device(3600).await;
    let contents = table_contents(&table).await;
    for answer in [
        rotate(&table, "someone-else").await,
        revoke(&table, "someone-else").await,
    ] {
        assert_eq!((answer.status, answer.error_code()), (404, "not_found"));
        assert!(
            !answer.body.to_string().contains("token\""),
            "{:?}",
            answer.body
        );
    }
    assert_eq!(table_contents(&table).await, contents, "nothing changed");
    assert_eq!(
        send(&cold_ingestor(&table), &token, "e-1").await.status,
        200
    );
    let contents = table_contents(&table).await;

    let unknown = device_updates(
        &table,
        ApiRequest::post("/me/devices/nobody-has-this/token").caller(OWNER),
    )
    .await;
    assert_eq!((unknown.status, unknown.error_code()), (404, "not_found"));
    let bad = device_updates(
        &table,
        ApiRequest::delete("/me/devices/a%23b/token").caller(OWNER),
    )
    .await;
    assert_eq!((bad.status, bad.error_field()), (400, "deviceId"));
    let anonymous = device_updates(
        &table,
        ApiRequest::post(&format!("/me/devices/{DEVICE}/token")),
    )
    .await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(table_contents(&table).await, contents, "nothing changed");
}
