//! Ingestion (AP-14) end to end on DynamoDB Local: idempotent replay, out-of-order events,
//! concurrent batches, rejections that change nothing, TTL and denormalized fields, retries
//! driven by faults injected by the fault proxy in front of DynamoDB Local, and the 503
//! contract.

use std::sync::Arc;
use std::time::Duration;

use fleet_testkit::fault_proxy::{
    through_proxy, Aimed, ClientTimeouts, Fault, FaultProxy, FaultRates, ProxyConfig,
    THROTTLED_AFTER_APPLYING,
};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::device_state::{device_seen_key, DeviceStateItem};
use shared::model::entities::{Entity, EntityType, ItemKey};
use shared::model::ids::{EventId, EventType};
use shared::model::keys::{user_pk, IndexKeys};
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::ops::pattern::BudgetScale;
use shared::FleetTable;

const OWNER: &str = "user-owner";

fn config() -> IngestConfig {
    IngestConfig {
        retry_window: Duration::from_millis(400),
        ..IngestConfig::default()
    }
}

/// A table with one registered device; returns its token.
async fn with_device(device: &str) -> (FleetTable, String) {
    let table = fresh_table().await;
    let token = register(&table, OWNER, device).await;
    (table, token)
}

async fn register(table: &FleetTable, owner: &str, device: &str) -> String {
    register_device(table, owner, device).await
}

async fn send(ingestor: &Arc<Ingestor>, request: ApiRequest) -> Answer {
    let (response, used) =
        metered(gateway(ingest::router(std::sync::Arc::clone(ingestor))).handle(request.build()))
            .await;
    answer(response, used)
}

fn events_of(items: &[Item]) -> Vec<&Item> {
    items
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::Event))
        .collect()
}

fn text(item: &Item, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

async fn device_item(table: &FleetTable, owner: &str, device: &str) -> Item {
    item(table, &key::device(owner, device))
        .await
        .expect("device item")
}

/// The live state item of `owner`'s `device` (on the user partition: these fleets are small).
async fn state_item(table: &FleetTable, owner: &str, device: &str) -> Item {
    item(table, &key::state(owner, 0, device))
        .await
        .expect("live state item")
}

/// The live state as the dashboard shows it: `lastSeen`, `latest` by type, `recent`.
fn summary(state: &Item) -> Value {
    let attrs: std::collections::HashMap<_, _> = state.clone().into_iter().collect();
    let state = DeviceStateItem::from_item(attrs).unwrap();
    let latest: serde_json::Map<String, Value> = state
        .latest
        .iter()
        .map(|(t, r)| (t.clone(), serde_json::to_value(r.reading()).unwrap()))
        .collect();
    json!({
        "lastSeen": state.last_seen.map(|t| t.to_string()),
        "latest": latest,
        "recent": state.recent.iter().map(|e| e.recent_event()).collect::<Vec<_>>(),
    })
}

#[tokio::test]
async fn stores_events_with_their_keys_ttl_and_copies_and_updates_the_summary() {
    let (table, token) = with_device("thermo-1").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let (t1, t2, t3) = (ago(300), ago(200), ago(100));
    let a = send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([
                {"id": "e-1", "type": "temperature", "value": 21.5, "at": t1},
                {"id": "e-2", "type": "door", "value": true, "at": t2},
                {"id": "e-alarm", "type": "alarm", "value": "overheat", "at": t2},
                {"type": "temperature", "value": 22.0, "at": t3},
            ]),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["accepted"], 4);
    let derived = a.body["eventIds"][3].as_str().unwrap().to_string();
    assert!(derived.starts_with("d-"));

    let items = table_contents(&table).await;
    let events = events_of(&items);
    assert_eq!(events.len(), 4);
    let first = events.iter().find(|e| text(e, "id") == "e-1").unwrap();
    let at = Timestamp::parse_field("at", &t1).unwrap();
    let event_id = EventId::parse("e-1").unwrap();
    assert_eq!(
        key_of(first),
        ItemKey::Event {
            user: key::user(OWNER),
            device: key::device_id("thermo-1"),
            at,
            event: event_id.clone(),
        }
    );
    // Telemetry is in no index: one item, one write unit.
    for name in ["GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"] {
        assert!(!first.contains_key(name), "{name} on a temperature event");
    }
    // An alarm (a searchable type) is on GSI1 at the keys the key design gives it (shapes:
    // shared::model::keys tests), and on no other index.
    let alarm = events.iter().find(|e| text(e, "id") == "e-alarm").unwrap();
    let index = IndexKeys::event(
        &key::user(OWNER),
        &key::device_id("thermo-1"),
        &EventType::parse("alarm").unwrap(),
        &Timestamp::parse_field("at", &t2).unwrap(),
        &EventId::parse("e-alarm").unwrap(),
        &table.config.shards,
    );
    assert!(index.gsi1pk.is_some());
    for (name, expected) in [
        ("GSI1PK", &index.gsi1pk),
        ("GSI1SK", &index.gsi1sk),
        ("GSI2PK", &index.gsi2pk),
        ("GSI2SK", &index.gsi2sk),
    ] {
        assert_eq!(
            alarm.get(name).and_then(|v| v.as_s().ok()),
            expected.as_ref(),
            "{name}"
        );
    }
    // And the batch put one type mark for the alarm's type and hour: the entry of the type's
    // shared index partitions, which AP-09 lists before reading the device's alarms.
    let marks: Vec<_> = items
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::TypeMark))
        .collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    let alarm_at = Timestamp::parse_field("at", &t2).unwrap();
    assert_eq!(
        key_of(marks[0]),
        ItemKey::TypeMark {
            user: key::user(OWNER),
            device: key::device_id("thermo-1"),
            event_type: EventType::parse("alarm").unwrap(),
            window: shared::model::entities::type_mark::type_window(&alarm_at),
        }
    );
    // It expires with the last events of its hour, never before one it leads AP-09 to.
    let window = shared::model::entities::type_mark::type_window(&alarm_at);
    let mark_ttl = marks[0]["ttl"].as_n().unwrap().parse::<i64>().unwrap();
    assert_eq!(mark_ttl, window.epoch_seconds() + 3600 + 90 * 86_400);
    assert_eq!(text(first, "deviceName"), "Boiler room");
    assert_eq!(text(first, "deviceType"), "thermostat");
    let ttl = first["ttl"].as_n().unwrap().parse::<i64>().unwrap();
    assert_eq!(ttl, at.epoch_seconds() + 90 * 86_400);

    let state = state_item(&table, OWNER, "thermo-1").await;
    let s = summary(&state);
    assert_eq!(s["lastSeen"], t3.as_str());
    assert_eq!(s["latest"]["temperature"]["value"], 22.0);
    assert_eq!(s["latest"]["door"]["value"], true);
    let recent: Vec<&str> = s["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    // Newest first; e-2 and e-alarm share a time and go by id, descending.
    assert_eq!(
        recent,
        [derived.as_str(), "e-alarm", "e-2", "e-1"],
        "newest first"
    );
    assert_eq!(
        text(&state, "GSI1SK"),
        device_seen_key(
            &Timestamp::parse_field("at", &t3).unwrap(),
            &key::device_id("thermo-1")
        ),
        "seen devices enter GSI1 at their SEEN bucket"
    );
    let device = device_item(&table, OWNER, "thermo-1").await;
    assert!(
        !device.contains_key("latest"),
        "readings are on the live state only"
    );
    assert_eq!(
        device["version"].as_n().unwrap(),
        "1",
        "ingestion never bumps the owner's version"
    );

    let budget = PatternId::IngestEvents.definition();
    let scale = BudgetScale {
        batch_items: 3,
        ..BudgetScale::one()
    };
    budget
        .check(&a.used, &scale)
        .unwrap_or_else(|v| panic!("{v}"));
}

/// States written before the compact `readings` attribute held `latest` and `recent` as
/// lists. Such a state shows the same on the dashboard, and the next batch rewrites it in the
/// compact form with nothing lost.
#[tokio::test]
async fn a_state_stored_as_lists_shows_the_same_and_the_next_batch_rewrites_it_compactly() {
    let (table, token) = with_device("thermo-old").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let (t1, t2, t3) = (ago(300), ago(200), ago(100));
    let first = send(
        &ingestor,
        ingest_request(
            "thermo-old",
            &token,
            json!([
                {"id": "e-1", "type": "temperature", "value": 21.5, "at": t1},
                {"type": "door", "value": "ajar", "at": t2},
            ]),
        ),
    )
    .await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let compact = state_item(&table, OWNER, "thermo-old").await;
    assert!(compact.contains_key("readings"));
    assert!(!compact.contains_key("latest") && !compact.contains_key("recent"));
    let shown = dashboard(&table, ApiRequest::get("/me/dashboard").caller(OWNER)).await;
    assert_eq!(shown.status, 200);

    // The same state as the list form stored it.
    let state = DeviceStateItem::from_item(compact.clone().into_iter().collect()).unwrap();
    let mut lists = compact.clone();
    lists.remove("readings");
    lists.insert(
        "latest".into(),
        serde_dynamo::to_attribute_value(&state.latest).unwrap(),
    );
    lists.insert(
        "recent".into(),
        serde_dynamo::to_attribute_value(&state.recent).unwrap(),
    );
    put_item(&table, lists.into_iter().collect()).await;
    let from_lists = dashboard(&table, ApiRequest::get("/me/dashboard").caller(OWNER)).await;
    assert_eq!(from_lists.body, shown.body, "the list form reads the same");

    // A new ingestor (no cached state) reads the list form and folds the next batch into it.
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let next = send(
        &ingestor,
        ingest_request(
            "thermo-old",
            &token,
            json!([{"id": "e-3", "type": "temperature", "value": 23.0, "at": t3}]),
        ),
    )
    .await;
    assert_eq!(next.status, 200, "{:?}", next.body);
    let rewritten = state_item(&table, OWNER, "thermo-old").await;
    assert!(rewritten.contains_key("readings"), "rewritten compactly");
    assert!(
        !rewritten.contains_key("latest") && !rewritten.contains_key("recent"),
        "the lists are gone"
    );
    let s = summary(&rewritten);
    assert_eq!(s["lastSeen"], t3.as_str());
    assert_eq!(s["latest"]["temperature"]["value"], 23.0);
    assert_eq!(s["latest"]["door"]["value"], "ajar");
    let ids: Vec<&str> = s["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!((ids[0], ids[2]), ("e-3", "e-1"), "nothing lost: {ids:?}");
    assert!(
        ids[1].starts_with("d-"),
        "the derived id comes back: {ids:?}"
    );
}

#[tokio::test]
async fn a_replayed_batch_stores_nothing_twice() {
    let (table, token) = with_device("thermo-1").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let body = json!([
        {"id": "e-1", "type": "temperature", "value": 20, "at": ago(60)},
        {"type": "humidity", "value": 40, "at": ago(50)},
    ]);
    for _ in 0..3 {
        let a = send(&ingestor, ingest_request("thermo-1", &token, body.clone())).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
    }
    // A fresh Lambda (empty caches) replaying it too.
    let cold = Arc::new(Ingestor::new(table.clone(), config()));
    assert_eq!(
        send(&cold, ingest_request("thermo-1", &token, body))
            .await
            .status,
        200
    );
    let items = table_contents(&table).await;
    assert_eq!(events_of(&items).len(), 2);
    let s = summary(&state_item(&table, OWNER, "thermo-1").await);
    assert_eq!(s["recent"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn late_events_never_move_last_seen_back_or_replace_newer_readings() {
    let (table, token) = with_device("thermo-1").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let newest = ago(10);
    send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([{"id": "new", "type": "temperature", "value": 25, "at": newest}]),
        ),
    )
    .await;
    let a = send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([{"id": "old", "type": "temperature", "value": 5, "at": ago(3600)}]),
        ),
    )
    .await;
    assert_eq!(a.status, 200);
    let s = summary(&state_item(&table, OWNER, "thermo-1").await);
    assert_eq!(s["lastSeen"], newest.as_str());
    assert_eq!(s["latest"]["temperature"]["value"], 25.0);
    let recent: Vec<&str> = s["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(recent, ["new", "old"]);
    assert_eq!(
        events_of(&table_contents(&table).await).len(),
        2,
        "the late event is stored"
    );
}

#[tokio::test]
async fn concurrent_batches_for_one_device_lose_no_update() {
    let (table, token) = with_device("thermo-1").await;
    // Two warm Lambdas with their own caches, five batches each, all at once.
    let patient = || IngestConfig {
        retry_window: Duration::from_secs(10),
        ..config()
    };
    let lambdas = [
        Arc::new(Ingestor::new(table.clone(), patient())),
        Arc::new(Ingestor::new(table.clone(), patient())),
    ];
    let mut calls = Vec::new();
    for i in 0..10 {
        let ingestor = &lambdas[i % 2];
        let events = json!([{"id": format!("e-{i}"), "type": format!("type-{}", i % 5), "value": i, "at": ago(100 - i as i64)}]);
        calls.push(send(ingestor, ingest_request("thermo-1", &token, events)));
    }
    let answers = futures::future::join_all(calls).await;
    assert!(answers.iter().all(|a| a.status == 200), "{answers:?}");
    let s = summary(&state_item(&table, OWNER, "thermo-1").await);
    for k in 0..5 {
        assert_eq!(
            s["latest"][format!("type-{k}")]["value"],
            f64::from(k + 5),
            "every type's newest reading survived: {s}"
        );
    }
    let recent: Vec<&str> = s["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..10).rev().map(|i| format!("e-{i}")).collect();
    assert_eq!(recent, expected, "every batch's event survived");
}

#[tokio::test]
async fn rejected_batches_answer_4xx_and_change_nothing() {
    let (table, token) = with_device("thermo-1").await;
    let other_token = register(&table, "user-other", "thermo-2").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let before = table_contents(&table).await;
    let good = || json!([{"type": "temperature", "value": 1, "at": ago(10)}]);
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"id": format!("e{i}"), "type": "t", "value": i, "at": ago(10)}))
        .collect();
    let cases: Vec<(&str, ApiRequest, u16, &str)> = vec![
        (
            "no token",
            ApiRequest::post("/devices/thermo-1/events").json(json!({"events": good()})),
            401,
            "",
        ),
        (
            "wrong token",
            ingest_request("thermo-1", "dft_wrong", good()),
            401,
            "",
        ),
        (
            "another device's token",
            ingest_request("thermo-1", &other_token, good()),
            401,
            "",
        ),
        (
            "unknown device",
            ingest_request("thermo-9", &token, good()),
            401,
            "",
        ),
        (
            "basic auth",
            ingest_request("thermo-1", &token, good())
                .header("Authorization", &format!("Basic {token}")),
            401,
            "",
        ),
        (
            "bad device id",
            ingest_request(&user_pk(&key::user("x")), &token, good())
                .param("deviceId", &user_pk(&key::user("x"))),
            400,
            "deviceId",
        ),
        (
            "no events",
            ingest_request("thermo-1", &token, json!([])),
            400,
            "events",
        ),
        (
            "101 events",
            ingest_request("thermo-1", &token, Value::Array(many)),
            400,
            "events",
        ),
        (
            "bad type",
            ingest_request(
                "thermo-1",
                &token,
                json!([good()[0], {"type": "a#b", "value": 1, "at": ago(1)}]),
            ),
            400,
            "events[1].type",
        ),
        (
            "object value",
            ingest_request(
                "thermo-1",
                &token,
                json!([{"type": "t", "value": {"x": 1}, "at": ago(1)}]),
            ),
            400,
            "events[0].value",
        ),
        (
            "future",
            ingest_request(
                "thermo-1",
                &token,
                json!([{"type": "t", "value": 1, "at": Timestamp::now().plus_seconds(3600).to_string()}]),
            ),
            400,
            "events[0].at",
        ),
        (
            "too old",
            ingest_request(
                "thermo-1",
                &token,
                json!([{"type": "t", "value": 1, "at": ago(91 * 86_400)}]),
            ),
            400,
            "events[0].at",
        ),
        (
            "bad id",
            ingest_request(
                "thermo-1",
                &token,
                json!([{"id": "a b", "type": "t", "value": 1, "at": ago(1)}]),
            ),
            400,
            "events[0].id",
        ),
        (
            "unknown field",
            ingest_request(
                "thermo-1",
                &token,
                json!([{"type": "t", "value": 1, "at": ago(1), "unit": "C"}]),
            ),
            400,
            "events[0].unit",
        ),
        (
            "missing at",
            ingest_request("thermo-1", &token, json!([{"type": "t", "value": 1}])),
            400,
            "events[0]",
        ),
        (
            "too large",
            ingest_request(
                "thermo-1",
                &token,
                json!([{"type": "t", "value": "x".repeat(70_000), "at": ago(1)}]),
            ),
            413,
            "",
        ),
    ];
    let mut unauthorized_bodies = Vec::new();
    for (what, request, status, field) in cases {
        let a = send(&ingestor, request).await;
        assert_eq!(a.status, status, "{what}: {:?}", a.body);
        assert_eq!(a.error_field(), field, "{what}: {:?}", a.body);
        assert_eq!(
            a.used.count("BatchWriteItem") + a.used.count("UpdateItem"),
            0,
            "{what}: nothing written"
        );
        if status == 401 {
            unauthorized_bodies.push(a.body.clone());
        }
    }
    assert!(
        unauthorized_bodies.windows(2).all(|w| w[0] == w[1]),
        "unknown device and wrong token are indistinguishable: {unauthorized_bodies:?}"
    );
    assert_eq!(table_contents(&table).await, before);
}

#[tokio::test]
async fn a_warm_lambda_skips_the_registration_read_and_stops_a_deleted_device() {
    let (table, token) = with_device("thermo-1").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let first = send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([{"type": "t", "value": 1, "at": ago(20)}]),
        ),
    )
    .await;
    assert_eq!(
        (
            first.used.count("GetItem"),
            first.used.count("BatchGetItem")
        ),
        (1, 1),
        "a cold Lambda reads the registration, then the live state with the owner's rules"
    );
    let second = send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([{"type": "t", "value": 2, "at": ago(10)}]),
        ),
    )
    .await;
    assert_eq!(second.status, 200);
    assert_eq!(
        second.used.count("GetItem"),
        0,
        "registration served from the cache"
    );
    assert_eq!(
        second.used.requests(),
        2,
        "one BatchWriteItem and one UpdateItem: {:?}",
        second.used
    );

    let deleted = device_updates(
        &table,
        ApiRequest::delete("/me/devices/thermo-1").caller(OWNER),
    )
    .await;
    assert_eq!(deleted.status, 204);
    // Still cached, but the device is gone: no acknowledgement, and the cache is dropped.
    let a = send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([{"type": "t", "value": 3, "at": ago(5)}]),
        ),
    )
    .await;
    assert_eq!(a.status, 401, "{:?}", a.body);
    // Re-registered by someone else: the old token is refused, the new one lands with the new owner.
    let new_token = register(&table, "user-new", "thermo-1").await;
    assert_eq!(
        send(
            &ingestor,
            ingest_request(
                "thermo-1",
                &token,
                json!([{"type": "t", "value": 4, "at": ago(4)}])
            )
        )
        .await
        .status,
        401
    );
    let a = send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &new_token,
            json!([{"id": "mine", "type": "t", "value": 5, "at": ago(3)}]),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let s = summary(&state_item(&table, "user-new", "thermo-1").await);
    assert_eq!(s["recent"][0]["id"], "mine");
    assert_eq!(
        s["recent"].as_array().unwrap().len(),
        1,
        "nothing of the old owner's events"
    );
}

/// Events whose id starts with `prefix` (an item in DynamoDB JSON).
fn id_starts_with(prefix: &'static str) -> impl Fn(&Value) -> bool + Send + Sync {
    move |item| {
        item.pointer("/id/S")
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with(prefix))
    }
}

/// `table` as the ingest function sees it through a fault proxy that breaks exactly the
/// `aimed` requests (no random faults).
async fn with_faults(table: &FleetTable, aimed: Vec<Aimed>) -> (FleetTable, FaultProxy) {
    let config = ProxyConfig {
        aimed,
        ..ProxyConfig::new(0, FaultRates::none())
    };
    let proxy = FaultProxy::start(endpoint(), config)
        .await
        .expect("start the fault proxy");
    let faulty = through_proxy(table, proxy.endpoint(), ClientTimeouts::default()).await;
    (faulty, proxy)
}

#[tokio::test]
async fn unprocessed_items_and_throttling_are_retried_until_everything_is_stored_once() {
    let (table, token) = with_device("thermo-1").await;
    let (faulty, proxy) = with_faults(
        &table,
        vec![
            Aimed::hold_back(id_starts_with("e-1"), 2),
            Aimed::throttle_after_applying("BatchWriteItem", 2),
        ],
    )
    .await;
    let ingestor = Arc::new(Ingestor::new(
        faulty,
        IngestConfig {
            retry_window: Duration::from_secs(5),
            ..config()
        },
    ));
    let events: Vec<Value> = (0..60)
        .map(|i| json!({"id": format!("e-{i}"), "type": "t", "value": i, "at": ago(100 - i)}))
        .collect();
    let a = send(
        &ingestor,
        ingest_request("thermo-1", &token, Value::Array(events)),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["accepted"], 60);
    let stats = proxy.stats();
    assert!(stats.items_held_back > 0, "faults were injected: {stats:?}");
    assert!(stats.faults.contains_key(Fault::Unprocessed.name()));
    assert_eq!(stats.faults.get(THROTTLED_AFTER_APPLYING), Some(&2));
    assert!(a.used.count("BatchWriteItem") > 3, "retried: {:?}", a.used);
    assert!(
        a.used.attempts > a.used.requests(),
        "the SDK retried the throttled calls"
    );
    let items = table_contents(&table).await;
    assert_eq!(
        events_of(&items).len(),
        60,
        "every event stored exactly once"
    );
}

#[tokio::test]
async fn events_that_cannot_be_stored_get_a_503_naming_exactly_them() {
    let (table, token) = with_device("thermo-1").await;
    let (faulty, _proxy) = with_faults(
        &table,
        vec![Aimed::hold_back(id_starts_with("lost-"), u32::MAX)],
    )
    .await;
    let ingestor = Arc::new(Ingestor::new(faulty, config()));
    let a = send(
        &ingestor,
        ingest_request(
            "thermo-1",
            &token,
            json!([
                {"id": "kept-1", "type": "t", "value": 1, "at": ago(30)},
                {"id": "lost-1", "type": "t", "value": 2, "at": ago(20)},
                {"id": "kept-2", "type": "t", "value": 3, "at": ago(10)},
            ]),
        ),
    )
    .await;
    assert_eq!(a.status, 503, "{:?}", a.body);
    assert_eq!(a.headers["retry-after"], "1");
    assert_eq!(a.body["accepted"], json!(["kept-1", "kept-2"]));
    assert_eq!(a.body["failed"], json!(["lost-1"]));
    let items = table_contents(&table).await;
    let stored: Vec<String> = events_of(&items).iter().map(|e| text(e, "id")).collect();
    assert_eq!(
        stored,
        ["kept-1", "kept-2"],
        "only acknowledged events are stored"
    );
    let s = summary(&state_item(&table, OWNER, "thermo-1").await);
    assert!(
        !s.to_string().contains("lost-1"),
        "the summary shows only stored events"
    );
}

#[tokio::test]
async fn a_summary_that_cannot_be_updated_acknowledges_nothing_and_a_resend_recovers() {
    let (table, token) = with_device("thermo-1").await;
    let (faulty, _proxy) = with_faults(
        &table,
        vec![Aimed::throttle_after_applying("UpdateItem", u32::MAX)],
    )
    .await;
    let broken = Arc::new(Ingestor::new(faulty, config()));
    let body = json!([{"id": "e-1", "type": "t", "value": 1, "at": ago(10)}]);
    let a = send(&broken, ingest_request("thermo-1", &token, body.clone())).await;
    assert_eq!(a.status, 503, "{:?}", a.body);
    assert_eq!(a.body["accepted"], json!([]));
    assert_eq!(a.body["failed"], json!(["e-1"]));
    let healthy = Arc::new(Ingestor::new(table.clone(), config()));
    let a = send(&healthy, ingest_request("thermo-1", &token, body)).await;
    assert_eq!(a.status, 200);
    assert_eq!(events_of(&table_contents(&table).await).len(), 1);
    let s = summary(&state_item(&table, OWNER, "thermo-1").await);
    assert_eq!(s["recent"][0]["id"], "e-1");
}

#[tokio::test]
async fn a_ninth_event_type_or_a_long_text_is_a_400_naming_the_field_and_changes_nothing() {
    let (table, token) = with_device("thermo-1").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let eight: Vec<Value> = (0..8)
        .map(|i| json!({"id": format!("e-{i}"), "type": format!("type-{i}"), "value": i, "at": ago(100)}))
        .collect();
    let a = send(&ingestor, ingest_request("thermo-1", &token, json!(eight))).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let before = table_contents(&table).await;
    // Known types are fine; the first event of a ninth type is named. A fresh container (which
    // must read the state to know) refuses it the same way.
    let fresh = Arc::new(Ingestor::new(table.clone(), config()));
    for lambda in [&ingestor, &fresh] {
        let a = send(
            lambda,
            ingest_request(
                "thermo-1",
                &token,
                json!([
                    {"type": "type-3", "value": 1, "at": ago(50)},
                    {"type": "type-9", "value": 1, "at": ago(50)},
                ]),
            ),
        )
        .await;
        assert_eq!(a.status, 400, "{:?}", a.body);
        assert_eq!(a.error_field(), "events[1].type");
        assert!(
            a.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("at most 8 event types"),
            "{:?}",
            a.body
        );
        assert_eq!(
            a.used.count("BatchWriteItem") + a.used.count("UpdateItem"),
            0
        );
    }
    // One event whose text value has `chars` characters.
    let text_of = |chars: usize| {
        ingest_request(
            "thermo-1",
            &token,
            json!([{"type": "type-1", "value": "x".repeat(chars), "at": ago(40)}]),
        )
    };
    let a = send(&ingestor, text_of(65)).await;
    assert_eq!(
        (a.status, a.error_field()),
        (400, "events[0].value"),
        "{:?}",
        a.body
    );
    assert_eq!(table_contents(&table).await, before, "nothing changed");
    // Exactly 64 characters is fine.
    let a = send(&ingestor, text_of(64)).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
}

#[tokio::test]
async fn numbers_past_dynamodbs_range_are_a_400_naming_the_field_and_the_edges_are_stored() {
    let (table, token) = with_device("thermo-1").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), config()));
    let before = table_contents(&table).await;
    // Valid JSON that DynamoDB cannot store (main: a 500 for this and for every resend).
    for (i, bad) in [1e200, -1e200, 1e-200, -1e-131, 1e126]
        .into_iter()
        .enumerate()
    {
        let events = json!([
            {"type": "temperature", "value": 21.5, "at": ago(60)},
            {"type": "temperature", "value": bad, "at": ago(50 - i as i64)},
        ]);
        let a = send(&ingestor, ingest_request("thermo-1", &token, events)).await;
        assert_eq!(
            (a.status, a.error_code(), a.error_field()),
            (400, "invalid_request", "events[1].value"),
            "{bad}: {:?}",
            a.body
        );
        assert!(a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1e-130"));
    }
    assert_eq!(table_contents(&table).await, before, "nothing stored");
    // The edges themselves are numbers DynamoDB stores, and read back the same.
    let edges = [
        9.999_999_999_999_99e125,
        -9.999_999_999_999_99e125,
        1e-130,
        -1e-130,
        0.0,
    ];
    let events: Vec<Value> = edges
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"id": format!("edge-{i}"), "type": "temperature", "value": v, "at": ago(40 - i as i64)}))
        .collect();
    let a = send(&ingestor, ingest_request("thermo-1", &token, json!(events))).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let listed = dashboard(
        &table,
        ApiRequest::get("/me/devices/thermo-1/events").caller(OWNER),
    )
    .await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let mut values: Vec<f64> = listed.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["value"].as_f64().unwrap())
        .collect();
    values.sort_by(f64::total_cmp);
    let mut expected = edges.to_vec();
    expected.sort_by(f64::total_cmp);
    assert_eq!(values, expected);
}
