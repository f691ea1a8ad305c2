//! alarm-watch on DynamoDB Local (issue 22 parts 2 and 5): the offline detector run for a
//! given time, reminders, and notifications fed to the handler from the table's real stream
//! (DynamoDB Local serves Streams); EventBridge and SQS, which have no local twin, are the
//! stand-ins that record each PutEvents and SendMessage request exactly as it would be sent.
//! Issue 30 item 2: a record, a live state or an alarm that cannot be read stops nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use fleet_testkit::alarm_events::{
    detail_types, lambda_event, AlarmStream, RecordedDeadLetters, RecordedPutEvents,
    LOCAL_DEAD_LETTER_QUEUE,
};
use fleet_testkit::fault_proxy::{
    through_proxy, ClientTimeouts, FaultProxy, FaultRates, ProxyConfig,
};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::alarm::ids::RuleId;
use shared::model::alarm::rule::{Rule, RuleDefinition};
use shared::model::alarm::status::AlarmState;
use shared::model::entities::alarm::AlarmItem;
use shared::model::entities::alarm::REMINDER_SHARDS;
use shared::model::entities::device_state::DeviceStateItem;
use shared::model::entities::device_state::DUE_SHARDS;
use shared::model::entities::rule_set::RuleSetItem;
use shared::model::entities::{Entity, EntityType};
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

const OWNER: &str = "watch-owner";

/// alarm-watch with the EventBridge and SQS stand-ins.
type Watch = alarm_watch::State<RecordedPutEvents, RecordedDeadLetters>;

fn watcher(table: &FleetTable) -> Watch {
    alarm_watch::State {
        table: table.clone(),
        publisher: RecordedPutEvents::default(),
        bus: "device-fleet-alarms".to_string(),
        dead_letters: RecordedDeadLetters::default(),
    }
}

/// One scheduled run at `at`, metered.
async fn run_at(watch: &Watch, at: Timestamp) -> (Value, shared::store::metrics::MeterSnapshot) {
    let deadline = Instant::now() + alarm_watch::TIMEOUT;
    let event = json!({"version": "0", "detail-type": "Scheduled Event", "source": "aws.events",
        "time": at.to_string(), "detail": {}});
    let (result, used) = metered(Box::pin(alarm_watch::handle(watch, event, deadline))).await;
    (result.expect("the run succeeds"), used)
}

/// Feeds the alarm records written since the last read of `stream` to the handler, as the
/// event source mapping would; returns the handler's answer.
async fn deliver(watch: &Watch, stream: &mut AlarmStream) -> Value {
    let records = stream.read().await.expect("stream read");
    if records.is_empty() {
        return json!({"batchItemFailures": [], "records": 0});
    }
    let deadline = Instant::now() + alarm_watch::TIMEOUT;
    let answer = alarm_watch::handle(watch, lambda_event(&records), deadline)
        .await
        .expect("the stream batch is handled");
    assert_documented(&watch.publisher.entries());
    answer
}

/// Every entry's `Detail` is valid against the schema docs/alarm-events.md publishes (the
/// document consumers write their rules to).
fn assert_documented(entries: &[Value]) {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let schema = SCHEMA.get_or_init(|| {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/alarm-events.md"),
        )
        .unwrap();
        let block = doc
            .split("## `detail` (JSON Schema, draft 2020-12)")
            .nth(1)
            .and_then(|rest| rest.split("```json").nth(1))
            .and_then(|rest| rest.split("```").next())
            .expect("docs/alarm-events.md has the detail schema");
        jsonschema::validator_for(&serde_json::from_str(block).unwrap()).unwrap()
    });
    for entry in entries {
        let detail: Value = serde_json::from_str(entry["Detail"].as_str().unwrap()).unwrap();
        let errors: Vec<String> = schema.iter_errors(&detail).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{detail}: {errors:?}");
    }
}

async fn state_of(table: &FleetTable, device: &str) -> DeviceStateItem {
    DeviceStateItem::from_item(item(table, &key::state(OWNER, 0, device)).await.unwrap()).unwrap()
}

/// The device's alarm history items.
async fn alarms_of(table: &FleetTable) -> Vec<AlarmItem> {
    table_contents(table)
        .await
        .into_iter()
        .filter(|i| entity_type(i) == Some(EntityType::Alarm))
        .map(|i| AlarmItem::from_item(i).unwrap())
        .collect()
}

async fn register(table: &FleetTable, device: &str, body: Value) -> String {
    let mut body = body;
    body["deviceId"] = json!(device);
    body["name"] = json!("Cold room");
    body["type"] = json!("thermostat");
    let a = device_updates(
        table,
        ApiRequest::post("/me/devices").caller(OWNER).json(body),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["token"].as_str().unwrap().to_string()
}

/// The first minute of the schedule (`rate(1 minute)`) at or after `t`.
fn next_minute(t: &Timestamp) -> Timestamp {
    let s = t.epoch_seconds();
    let up = if t.epoch_millis() % 60_000 == 0 {
        s
    } else {
        s - s.rem_euclid(60) + 60
    };
    Timestamp::from_epoch_millis(up * 1000).unwrap()
}

#[tokio::test]
async fn a_silent_device_is_offline_at_the_first_run_after_its_due_time_once_and_online_when_it_reports(
) {
    let table = fresh_table_with_stream().await;
    let token = register(&table, "cold-1", json!({"reportEverySeconds": 60})).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let body = json!([{"type": "temperature", "value": 4.0, "at": ago(1500)}]);
    assert_eq!(
        ingest(&ingestor, ingest_request("cold-1", &token, body))
            .await
            .status,
        200
    );
    let state = state_of(&table, "cold-1").await;
    let due = state
        .due_at()
        .expect("a device with an interval is watched");
    assert_eq!(
        state.indexed_due,
        Some(due),
        "on the due index at its due time"
    );
    let seen = state.last_seen.unwrap();
    let silence = due.epoch_seconds() - seen.epoch_seconds();
    assert!(
        (60 + 60..=60 + 60 + 900).contains(&silence),
        "interval + grace + the rest of its 15-minute bucket: {silence} s"
    );
    let mut stream = AlarmStream::open(&table, endpoint()).await.unwrap();
    let watch = watcher(&table);

    // The schedule's runs: the one before the due time sees nothing, the first at or after
    // it raises the alarm.
    let first = next_minute(&due);
    let (before, _) = run_at(&watch, first.plus_seconds(-60)).await;
    assert_eq!(
        (before["candidates"].as_u64(), before["raised"].as_u64()),
        (Some(0), Some(0))
    );
    let before_raise = fleet_testkit::pricing::snapshot(&table).await.unwrap();
    let started = Instant::now();
    let (run, used) = run_at(&watch, first).await;
    let run_time = started.elapsed();
    // What the raise bills by DynamoDB's rules (DynamoDB Local reports 2.0 for any transaction).
    let raise_units = fleet_testkit::pricing::write_units(
        &fleet_testkit::pricing::changes(
            &before_raise,
            &fleet_testkit::pricing::snapshot(&table).await.unwrap(),
        ),
        fleet_testkit::pricing::WriteKind::Transaction,
    );
    eprintln!("offline raise: {raise_units} write units by DynamoDB's rules (state update, alarm and pointer puts in one transaction, their index entries)");
    assert_eq!(run["raised"], 1, "{run}");
    assert_eq!(run["complete"], true);
    let delay = Duration::from_millis((first.epoch_millis() - due.epoch_millis()) as u64);
    eprintln!(
        "detection delay: due {due}, raised by the run of {first}: {:.0} s after due (schedule) + {:.0} ms run time; {} requests, {:.1} RCU, {:.1} WCU",
        delay.as_secs_f64(),
        run_time.as_secs_f64() * 1000.0,
        used.requests(),
        used.read_units,
        used.write_units
    );
    assert!(
        delay + run_time < Duration::from_secs(120),
        "within 2 minutes of due"
    );
    // Reads follow the due devices: one Query per shard, one BatchGetItem, one transaction.
    assert_eq!(used.count("Query"), u32::from(DUE_SHARDS + REMINDER_SHARDS));
    assert_eq!(used.count("BatchGetItem"), 1);
    assert_eq!(used.count("TransactWriteItems"), 1);
    assert_eq!(used.count("Scan"), 0);

    let alarms = alarms_of(&table).await;
    assert_eq!(alarms.len(), 1);
    let offline = &alarms[0];
    assert_eq!(offline.source, "offline");
    assert_eq!(offline.state, AlarmState::Active);
    assert_eq!(offline.raised_at, first);
    assert_eq!(offline.last_seen, Some(seen));
    let state = state_of(&table, "cold-1").await;
    assert!(state.alarms.contains_key("offline"));
    assert_eq!(state.indexed_due, None, "off the due index while offline");
    // The owner's dashboard shows it offline, with its alarm.
    let board = dashboard(&table, ApiRequest::get("/me/dashboard").caller(OWNER)).await;
    assert_eq!(board.status, 200, "{:?}", board.body);
    let shown = board.body["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["deviceId"] == "cold-1")
        .unwrap()
        .clone();
    assert_eq!(shown["connectivity"], "offline", "{shown}");
    assert_eq!(shown["alarms"]["active"], 1);

    // Later runs raise nothing more: the device is not a candidate any longer.
    let (again, _) = run_at(&watch, first.plus_seconds(60)).await;
    assert_eq!(
        (again["candidates"].as_u64(), again["raised"].as_u64()),
        (Some(0), Some(0))
    );

    // The stream carries the raise: exactly one "Raised".
    let answer = deliver(&watch, &mut stream).await;
    assert_eq!(answer["batchItemFailures"], json!([]));
    let entries = watch.publisher.entries();
    assert_eq!(
        detail_types(&entries),
        [(
            "Device Fleet Alarm Raised".to_string(),
            offline.alarm_id().unwrap().to_string()
        )]
    );
    let detail: Value = serde_json::from_str(entries[0]["Detail"].as_str().unwrap()).unwrap();
    assert_eq!(entries[0]["Source"], "device-fleet");
    assert_eq!(entries[0]["EventBusName"], "device-fleet-alarms");
    assert_eq!(detail["kind"], "offline");
    assert_eq!(detail["userId"], OWNER);
    assert_eq!(detail["deviceId"], "cold-1");
    assert_eq!(detail["state"], "active");
    assert_eq!(detail["reading"]["lastSeen"], seen.to_string());
    assert!(detail.get("ruleId").is_none());

    // It reports again: the alarm clears (one "Cleared") and the device is watched again.
    let body = json!([{"type": "temperature", "value": 4.5, "at": ago(5)}]);
    assert_eq!(
        ingest(&ingestor, ingest_request("cold-1", &token, body.clone()))
            .await
            .status,
        200
    );
    let state = state_of(&table, "cold-1").await;
    assert!(!state.alarms.contains_key("offline"));
    assert_eq!(state.indexed_due, state.due_at());
    assert!(state.indexed_due.is_some(), "back on the due index");
    assert_eq!(alarms_of(&table).await[0].state, AlarmState::Cleared);
    deliver(&watch, &mut stream).await;
    assert_eq!(
        detail_types(&watch.publisher.entries())
            .into_iter()
            .map(|(t, _)| t)
            .collect::<Vec<_>>(),
        ["Device Fleet Alarm Raised", "Device Fleet Alarm Cleared"]
    );
    // The same batch again changes nothing: no stream record, nothing published.
    ingest(&ingestor, ingest_request("cold-1", &token, body)).await;
    assert_eq!(deliver(&watch, &mut stream).await["records"], 0);
    assert_eq!(watch.publisher.entries().len(), 2);
}

#[tokio::test]
async fn a_learned_rhythm_watches_a_device_without_a_declared_interval() {
    let table = fresh_table().await;
    let token = register(&table, "meter-9", json!({})).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    // Reports every 20 minutes: each report is in a new SEEN bucket.
    let start = Timestamp::now().plus_seconds(-7200);
    for k in 0..4 {
        let at = start.plus_seconds(1200 * k).to_string();
        let body = json!([{"type": "energy", "value": k, "at": at}]);
        assert_eq!(
            ingest(&ingestor, ingest_request("meter-9", &token, body))
                .await
                .status,
            200
        );
        let state = state_of(&table, "meter-9").await;
        if k == 0 {
            assert_eq!(state.due_at(), None, "one report teaches no interval");
            assert_eq!(state.indexed_due, None);
        } else {
            assert_eq!(
                state.learned_every_seconds,
                Some(1200),
                "learned from the gaps"
            );
            assert_eq!(state.indexed_due, state.due_at());
        }
    }
    let due = state_of(&table, "meter-9").await.due_at().unwrap();
    let watch = watcher(&table);
    let (run, _) = run_at(&watch, next_minute(&due)).await;
    assert_eq!(run["raised"], 1, "{run}");
}

/// Sends one reading a minute for `device`, the last at `last`, `minutes` in all.
async fn report_every_minute(
    ingestor: &Arc<Ingestor>,
    device: &str,
    token: &str,
    last: Timestamp,
    minutes: i64,
) {
    for k in (0..minutes).rev() {
        let at = last.plus_seconds(-60 * k).to_string();
        let body = json!([{"type": "temperature", "value": 4.0, "at": at}]);
        let a = ingest(ingestor, ingest_request(device, token, body)).await;
        assert_eq!(a.status, 200, "{device}: {:?}", a.body);
    }
}

#[tokio::test]
async fn a_tight_one_minute_device_is_flagged_within_its_interval_plus_two_minutes_a_standard_one_is_not(
) {
    let table = fresh_table().await;
    let tight = register(
        &table,
        "tight-1",
        json!({"reportEverySeconds": 60, "offlineDetection": "tight"}),
    )
    .await;
    let standard = register(&table, "std-1", json!({"reportEverySeconds": 60})).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    // T, the last report of both, 30 s into the standard device's 15-minute SEEN bucket: the
    // standard device is then due 16.5 minutes after T, the tight one 2 minutes after T.
    let std_device = key::device_id("std-1");
    let last =
        shared::model::offline::seen_bucket(&Timestamp::now().plus_seconds(-3600), &std_device)
            .plus_seconds(30);
    // Ten minutes of reports a minute apart: the tight device's due entry follows each one.
    for k in (0..10).rev() {
        let at = last.plus_seconds(-60 * k);
        report_every_minute(&ingestor, "tight-1", &tight, at, 1).await;
        let state = state_of(&table, "tight-1").await;
        assert_eq!(state.last_seen, Some(at));
        assert_eq!(
            state.indexed_due,
            Some(at.plus_seconds(120)),
            "tight: the interval and a minute after each report"
        );
    }
    report_every_minute(&ingestor, "std-1", &standard, last, 10).await;
    let std_due = state_of(&table, "std-1").await.indexed_due.unwrap();
    assert_eq!(
        std_due,
        last.plus_seconds(-30 + 900 + 120),
        "standard: from its bucket's end"
    );

    let watch = watcher(&table);
    // Silent after T. The run a second before T + interval + 1 min finds nothing.
    let (early, _) = run_at(&watch, last.plus_seconds(60 + 60 - 1)).await;
    assert_eq!(
        (early["candidates"].as_u64(), early["raised"].as_u64()),
        (Some(0), Some(0)),
        "{early}"
    );
    // The run at T + interval + 2 minutes flags the tight device, and only it.
    let (run, _) = run_at(&watch, last.plus_seconds(60 + 120)).await;
    assert_eq!(run["raised"], 1, "{run}");
    let alarms = alarms_of(&table).await;
    assert_eq!(alarms.len(), 1);
    assert_eq!(alarms[0].device_id.as_str(), "tight-1");
    assert_eq!(alarms[0].source, "offline");
    assert_eq!(alarms[0].last_seen, Some(last));
    assert!(state_of(&table, "tight-1")
        .await
        .alarms
        .contains_key("offline"));
    let standard_state = state_of(&table, "std-1").await;
    assert!(
        !standard_state.alarms.contains_key("offline"),
        "a standard device is not flagged yet"
    );
    assert_eq!(standard_state.indexed_due, Some(std_due));
    // The standard device keeps today's bound: flagged at its due time, 16.5 minutes after T.
    let (later, _) = run_at(&watch, std_due.plus_seconds(-1)).await;
    assert_eq!(later["raised"], 0, "{later}");
    let (due, _) = run_at(&watch, std_due).await;
    assert_eq!(due["raised"], 1, "{due}");
    assert!(state_of(&table, "std-1")
        .await
        .alarms
        .contains_key("offline"));
}

#[tokio::test]
async fn offline_detection_is_standard_or_tight_and_a_bad_value_is_a_400_naming_it() {
    let table = fresh_table().await;
    register(&table, "meter-5", json!({"reportEverySeconds": 60})).await;
    let before = table_contents(&table).await;
    for bad in [
        json!("fast"),
        json!("Tight"),
        json!(""),
        json!(1),
        json!(null),
        json!({"mode": "tight"}),
    ] {
        let a = device_updates(
            &table,
            ApiRequest::post("/me/devices").caller(OWNER).json(
                json!({"deviceId": "meter-6", "name": "M", "type": "meter", "offlineDetection": bad}),
            ),
        )
        .await;
        assert_eq!(
            (a.status, a.error_code(), a.error_field()),
            (400, "invalid_request", "offlineDetection"),
            "{bad}: {:?}",
            a.body
        );
        let a = device_updates(
            &table,
            ApiRequest::patch("/me/devices/meter-5")
                .caller(OWNER)
                .header("if-match", "1")
                .json(json!({"offlineDetection": bad})),
        )
        .await;
        assert_eq!(
            (a.status, a.error_code(), a.error_field()),
            (400, "invalid_request", "offlineDetection"),
            "{bad}: {:?}",
            a.body
        );
    }
    assert_eq!(table_contents(&table).await, before, "nothing stored");

    // Tight and back: the device and its live state say so, the answer shows it while tight.
    let a = device_updates(
        &table,
        ApiRequest::patch("/me/devices/meter-5")
            .caller(OWNER)
            .header("if-match", "1")
            .json(json!({"offlineDetection": "tight"})),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["device"]["offlineDetection"], "tight");
    assert_eq!(
        state_of(&table, "meter-5").await.offline_detection,
        shared::model::offline::OfflineDetection::Tight
    );
    let a = device_updates(
        &table,
        ApiRequest::patch("/me/devices/meter-5")
            .caller(OWNER)
            .header("if-match", "2")
            .json(json!({"offlineDetection": "standard"})),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(
        a.body["device"].get("offlineDetection").is_none(),
        "standard is the default: {}",
        a.body
    );
    let state = item(&table, &key::state(OWNER, 0, "meter-5"))
        .await
        .unwrap();
    assert!(
        !state.contains_key("offlineDetection"),
        "a standard device stores nothing more"
    );
}

#[tokio::test]
async fn a_warm_ingest_container_places_the_due_entry_by_a_detection_patched_after_it_cached_the_state(
) {
    let table = fresh_table().await;
    let token = register(&table, "meter-8", json!({"reportEverySeconds": 60})).await;
    // One container for every batch: it caches the live state at the first.
    let warm = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let last = Timestamp::now().plus_seconds(-1800);
    report_every_minute(&warm, "meter-8", &token, last.plus_seconds(-120), 1).await;
    let patched = device_updates(
        &table,
        ApiRequest::patch("/me/devices/meter-8")
            .caller(OWNER)
            .header("if-match", "1")
            .json(json!({"offlineDetection": "tight"})),
    )
    .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    // The PATCH does not move ingestSeq, so the container's writes succeed on its cached
    // state: the first batch after it learns the new copies from its update's answer, the next
    // places the entry by them.
    report_every_minute(&warm, "meter-8", &token, last, 2).await;
    let state = state_of(&table, "meter-8").await;
    assert_eq!(state.last_seen, Some(last));
    assert_eq!(
        state.indexed_due,
        Some(last.plus_seconds(120)),
        "tight from the second batch after the PATCH"
    );
}

/// A rule set with one rule of `body`, put for `OWNER`.
async fn put_rule(table: &FleetTable, body: Value) -> Rule {
    let rule = Rule {
        rule_id: RuleId::generate(),
        version: 1,
        definition: RuleDefinition::parse(&body).unwrap(),
        created_at: Timestamp::now(),
        updated_at: Timestamp::now(),
    };
    put_entity(
        table,
        &RuleSetItem {
            user_id: key::user(OWNER),
            rules: BTreeMap::from([(rule.rule_id.to_string(), rule.clone())]),
            version: 1,
        },
    )
    .await;
    rule
}

fn hot_rule(extra: Value) -> Value {
    let mut body = json!({"name": "Too warm", "eventType": "temperature",
        "scope": {"deviceType": "thermostat"}, "condition": {"above": 8},
        "clear": {"below": 6}, "severity": "critical"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

#[tokio::test]
async fn a_crossing_publishes_one_raised_a_clear_one_cleared_and_replays_publish_nothing() {
    let table = fresh_table_with_stream().await;
    let devices = 10;
    let mut tokens = Vec::new();
    for d in 0..devices {
        tokens.push(register(&table, &format!("room-{d}"), json!({})).await);
    }
    put_rule(&table, hot_rule(json!({}))).await;
    let mut stream = AlarmStream::open(&table, endpoint()).await.unwrap();
    let watch = watcher(&table);
    // 10 devices x 10 batches x 25 events = 2,500 events: batches 3-5 of each device are over
    // the threshold (one crossing), batch 7 below the clear threshold (one clear).
    let batch = |d: usize, b: usize| -> Value {
        let value = match b {
            3..=5 => 9.5,
            7 => 5.0,
            _ => 7.0,
        };
        Value::Array(
            (0..25)
                .map(|i| {
                    json!({"id": format!("e{d}-{b}-{i}"), "type": "temperature",
                        "value": value, "at": ago(3600 - (b * 100 + i) as i64)})
                })
                .collect(),
        )
    };
    let send_all = || {
        let table = table.clone();
        let tokens = tokens.clone();
        async move {
            let sends = (0..devices).map(|d| {
                let (table, token) = (table.clone(), tokens[d].clone());
                async move {
                    let ingestor = Arc::new(Ingestor::new(table, IngestConfig::default()));
                    for b in 0..10 {
                        // A 503 names events to resend (a loaded machine's DynamoDB Local can
                        // be slower than the retry window): the device resends, as it would.
                        let mut status = 0;
                        for _ in 0..5 {
                            let request = ingest_request(&format!("room-{d}"), &token, batch(d, b));
                            status = ingest(&ingestor, request).await.status;
                            if status == 200 {
                                break;
                            }
                        }
                        assert_eq!(status, 200, "room-{d} batch {b}");
                    }
                }
            });
            futures::future::join_all(sends).await;
        }
    };
    send_all().await;
    let answer = deliver(&watch, &mut stream).await;
    assert_eq!(answer["batchItemFailures"], json!([]));
    let published = detail_types(&watch.publisher.entries());
    let raised = published
        .iter()
        .filter(|(t, _)| t == "Device Fleet Alarm Raised")
        .count();
    let cleared = published
        .iter()
        .filter(|(t, _)| t == "Device Fleet Alarm Cleared")
        .count();
    assert_eq!((raised, cleared), (devices, devices), "{published:?}");
    // Per device, in order: its Raised before its Cleared.
    for d in 0..devices {
        let mine: Vec<&String> = published
            .iter()
            .filter(|(_, id)| id.ends_with(&format!(".room-{d}")))
            .map(|(t, _)| t)
            .collect();
        assert_eq!(
            mine,
            ["Device Fleet Alarm Raised", "Device Fleet Alarm Cleared"]
        );
    }
    let before = watch.publisher.entries().len();
    // The 2,500 events replayed twice: no alarm item changes, no stream record, nothing sent.
    for _ in 0..2 {
        send_all().await;
        assert_eq!(deliver(&watch, &mut stream).await["records"], 0);
    }
    assert_eq!(watch.publisher.entries().len(), before);
    eprintln!(
        "2,500 events: {before} transitions published; replayed twice: {} more",
        watch.publisher.entries().len() - before
    );
}

#[tokio::test]
async fn an_unacknowledged_alarm_is_reminded_once_per_interval_and_a_failed_publish_is_retried_in_order(
) {
    let table = fresh_table_with_stream().await;
    let token = register(&table, "freezer", json!({})).await;
    put_rule(&table, hot_rule(json!({"remindEverySeconds": 600}))).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let body = json!([{"type": "temperature", "value": 12.0, "at": ago(3000)}]);
    assert_eq!(
        ingest(&ingestor, ingest_request("freezer", &token, body))
            .await
            .status,
        200
    );
    let alarm = alarms_of(&table).await.pop().expect("raised at ingest");
    let remind_at = alarm.remind_at.expect("a reminder is due");
    let watch = watcher(&table);
    let (early, _) = run_at(&watch, remind_at.plus_seconds(-1)).await;
    assert_eq!(early["reminders"], 0);
    let (run, _) = run_at(&watch, remind_at).await;
    assert_eq!(run["reminders"], 1, "{run}");
    let (same, _) = run_at(&watch, remind_at).await;
    assert_eq!(
        same["reminders"], 0,
        "one reminder per interval, however often it runs"
    );
    // A run that was late reminds once, then keeps the interval.
    let (late, _) = run_at(&watch, remind_at.plus_seconds(1300)).await;
    assert_eq!(late["reminders"], 1);
    let alarm = alarms_of(&table).await.pop().unwrap();
    assert_eq!(alarm.reminders, 2);
    assert_eq!(alarm.remind_at, Some(remind_at.plus_seconds(1800)));

    // The stream: Raised, then two reminders. The first PutEvents call fails: the handler
    // reports its record and publishes nothing after it; Lambda's retry from there publishes
    // all three, in order.
    let mut stream = AlarmStream::open(&table, endpoint()).await.unwrap();
    let records = stream.read().await.unwrap();
    assert_eq!(records.len(), 3, "insert and two reminder updates");
    watch.publisher.refuse_first_entry_of_calls([0]);
    let deadline = Instant::now() + alarm_watch::TIMEOUT;
    let answer = alarm_watch::handle(&watch, lambda_event(&records), deadline)
        .await
        .unwrap();
    assert_eq!(
        answer["batchItemFailures"],
        json!([{"itemIdentifier": records[0].sequence_number}])
    );
    assert!(
        watch.publisher.entries().is_empty(),
        "nothing after the failed record"
    );
    let answer = alarm_watch::handle(&watch, lambda_event(&records), deadline)
        .await
        .unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]));
    let entries = watch.publisher.entries();
    assert_documented(&entries);
    let reminders: Vec<Value> = entries
        .iter()
        .map(|e| {
            serde_json::from_str::<Value>(e["Detail"].as_str().unwrap()).unwrap()["reminder"]
                .clone()
        })
        .collect();
    assert_eq!(reminders, [Value::Null, json!(1), json!(2)]);
    assert!(detail_types(&entries)
        .iter()
        .all(|(t, _)| t == "Device Fleet Alarm Raised"));
    assert_eq!(
        watch.publisher.requests().len(),
        3,
        "one device's entries go one per call, in order"
    );
}

#[tokio::test]
async fn the_stream_sample_is_published_as_one_raised_event() {
    let table = fresh_table().await;
    let watch = watcher(&table);
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../events/stream/alarm-stream-raised.json"),
    )
    .unwrap();
    let deadline = Instant::now() + alarm_watch::TIMEOUT;
    let answer = alarm_watch::handle(&watch, serde_json::from_str(&text).unwrap(), deadline)
        .await
        .unwrap();
    assert_eq!(answer, json!({"batchItemFailures": []}));
    assert_documented(&watch.publisher.entries());
    let requests = watch.publisher.requests();
    assert_eq!(requests.len(), 1);
    let entry = &requests[0]["Entries"][0];
    assert_eq!(entry["Source"], "device-fleet");
    assert_eq!(entry["DetailType"], "Device Fleet Alarm Raised");
    let detail: Value = serde_json::from_str(entry["Detail"].as_str().unwrap()).unwrap();
    assert_eq!(detail["alarmId"], "1795172400000.offline.thermo-kitchen");
    assert_eq!(
        detail["reading"],
        json!({"lastSeen": "2026-11-20T10:00:05.000Z"})
    );
}

/// Sets `attribute` of the item at `key` to the text `value`, bypassing the code (a schema the
/// code does not know: a later deploy's, or a hand-made item).
async fn garble(
    table: &FleetTable,
    key: &shared::model::entities::ItemKey,
    attribute: &str,
    value: &str,
) {
    table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .update_expression("SET #a = :v")
        .expression_attribute_names("#a", attribute)
        .expression_attribute_values(":v", AttributeValue::S(value.to_string()))
        .send()
        .await
        .expect("update_item");
}

/// Ingests one reading of `value` taken `seconds_ago` for `device`, answered 200.
async fn report(table: &FleetTable, device: &str, token: &str, value: f64, seconds_ago: i64) {
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let body = json!([{"type": "temperature", "value": value, "at": ago(seconds_ago)}]);
    let answer = ingest(&ingestor, ingest_request(device, token, body)).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
}

#[tokio::test]
async fn an_unreadable_alarm_record_goes_to_the_dead_letter_queue_and_the_records_after_it_are_published(
) {
    let table = fresh_table_with_stream().await;
    let mut tokens = BTreeMap::new();
    for device in ["room-a", "room-p", "room-b"] {
        tokens.insert(device, register(&table, device, json!({})).await);
    }
    put_rule(&table, hot_rule(json!({}))).await;
    // Good records, then the poison one (room-p's alarm rewritten with a severity this code
    // does not know: schema drift), then good records again.
    report(&table, "room-a", &tokens["room-a"], 12.0, 3000).await;
    report(&table, "room-p", &tokens["room-p"], 12.0, 3000).await;
    let poisoned = alarms_of(&table).await;
    let poisoned = poisoned
        .iter()
        .find(|a| a.device_id.as_str() == "room-p")
        .expect("room-p's alarm");
    garble(
        &table,
        &poisoned.item_key(),
        AlarmItem::SEVERITY.name(),
        "apocalyptic",
    )
    .await;
    report(&table, "room-b", &tokens["room-b"], 12.0, 2000).await;
    report(&table, "room-a", &tokens["room-a"], 5.0, 1000).await;
    let mut stream = AlarmStream::open(&table, endpoint()).await.unwrap();
    let records = stream.read().await.unwrap();
    assert_eq!(records.len(), 5, "4 good records and the poison one");
    let poison = records
        .iter()
        .position(|r| {
            r.new_image
                .get(AlarmItem::SEVERITY.name())
                .and_then(|v| v.as_s().ok())
                .is_some_and(|s| s == "apocalyptic")
        })
        .expect("the poison record is on the stream");
    assert!(
        poison + 1 < records.len(),
        "good records come after the poison one"
    );
    let watch = watcher(&table);
    let deadline = Instant::now() + alarm_watch::TIMEOUT;

    // SQS refuses the first SendMessage: the poison record is a batch item failure (it may be
    // kept on retry), and nothing after it is done, so order holds.
    watch.dead_letters.refuse_next(1);
    let answer = alarm_watch::handle(&watch, lambda_event(&records), deadline)
        .await
        .expect("the batch is handled");
    assert_eq!(
        answer["batchItemFailures"],
        json!([{"itemIdentifier": records[poison].sequence_number}])
    );
    assert_eq!(
        watch.publisher.entries().len(),
        poison,
        "only what came before"
    );
    assert!(watch.dead_letters.requests().is_empty());

    // Lambda's retry from that record: the poison one goes to the dead-letter queue, every
    // record after it is published.
    let answer = alarm_watch::handle(&watch, lambda_event(&records[poison..]), deadline)
        .await
        .expect("the batch is handled");
    assert_eq!(answer["batchItemFailures"], json!([]));
    let entries = watch.publisher.entries();
    assert_documented(&entries);
    let published: Vec<(String, String)> = detail_types(&entries)
        .into_iter()
        .map(|(t, id)| (t, id.rsplit('.').next().unwrap().to_string()))
        .collect();
    let raised = "Device Fleet Alarm Raised".to_string();
    assert_eq!(
        published,
        [
            (raised.clone(), "room-a".to_string()),
            (raised.clone(), "room-p".to_string()),
            (raised, "room-b".to_string()),
            (
                "Device Fleet Alarm Cleared".to_string(),
                "room-a".to_string()
            ),
        ]
    );
    let after = records.len() - poison - 1;
    eprintln!(
        "poison record at {poison} of {}: {after} records after it published, 1 dead-lettered",
        records.len()
    );
    let requests = watch.dead_letters.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["QueueUrl"], LOCAL_DEAD_LETTER_QUEUE);
    let letter = &watch.dead_letters.letters()[0];
    assert_eq!(letter.sequence_number, records[poison].sequence_number);
    assert!(letter.reason.contains("apocalyptic"), "{}", letter.reason);
    assert_eq!(
        letter.record["dynamodb"]["NewImage"]["severity"],
        json!({"S": "apocalyptic"}),
        "the record as delivered"
    );
    // The letter's record is a stream event again (the redrive in docs/operations.md): read by
    // this code it is still unreadable, so it goes back to the queue, nothing published.
    let redriven = json!({"Records": [letter.record]});
    let answer = alarm_watch::handle(&watch, redriven, deadline)
        .await
        .unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]));
    assert_eq!(watch.dead_letters.requests().len(), 2);
    assert_eq!(watch.publisher.entries().len(), 4);

    // A record that is not even a stream record (the event's shape changed) is a dead letter
    // too, and the good record after it is published.
    let mut event = lambda_event(&records[..1]);
    event["Records"].as_array_mut().unwrap().insert(
        0,
        json!({"eventName": 7, "dynamodb": {"SequenceNumber": "1"}}),
    );
    let fresh = watcher(&table);
    let answer = alarm_watch::handle(&fresh, event, deadline).await.unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]));
    assert_eq!(fresh.dead_letters.letters()[0].sequence_number, "1");
    assert_eq!(fresh.publisher.entries().len(), 1);
}

#[tokio::test]
async fn an_unreadable_live_state_is_skipped_and_counted_and_the_other_due_devices_are_raised() {
    let table = fresh_table().await;
    let mut due = Vec::new();
    for device in ["cold-1", "broken-1"] {
        let token = register(&table, device, json!({"reportEverySeconds": 60})).await;
        report(&table, device, &token, 4.0, 1500).await;
        due.push(state_of(&table, device).await.due_at().unwrap());
    }
    let broken = key::state(OWNER, 0, "broken-1");
    garble(&table, &broken, DeviceStateItem::STATUS.name(), "exploded").await;
    let garbled = item(&table, &broken).await.unwrap();
    let watch = watcher(&table);
    let at = next_minute(due.iter().max().unwrap());
    for minute in 0..2 {
        let (run, _) = run_at(&watch, at.plus_seconds(60 * minute)).await;
        let expected_raised = if minute == 0 { 1 } else { 0 };
        assert_eq!(run["raised"], expected_raised, "{run}");
        assert_eq!(run["unreadable"], 1, "skipped, counted every run: {run}");
        assert_eq!(run["complete"], true);
    }
    let alarms = alarms_of(&table).await;
    assert_eq!(alarms.len(), 1);
    assert_eq!(alarms[0].device_id.as_str(), "cold-1");
    assert_eq!(
        item(&table, &broken).await.unwrap(),
        garbled,
        "the unreadable state is left as it is"
    );
}

#[tokio::test]
async fn an_unreadable_alarm_on_the_reminder_index_is_skipped_and_the_others_are_reminded() {
    let table = fresh_table().await;
    put_rule(&table, hot_rule(json!({"remindEverySeconds": 600}))).await;
    for device in ["freezer-1", "freezer-2"] {
        let token = register(&table, device, json!({})).await;
        report(&table, device, &token, 12.0, 3000).await;
    }
    let alarms = alarms_of(&table).await;
    let broken = alarms
        .iter()
        .find(|a| a.device_id.as_str() == "freezer-2")
        .unwrap();
    garble(
        &table,
        &broken.item_key(),
        AlarmItem::STATE.name(),
        "smouldering",
    )
    .await;
    let remind_at = alarms.iter().filter_map(|a| a.remind_at).max().unwrap();
    let watch = watcher(&table);
    let (run, _) = run_at(&watch, remind_at).await;
    assert_eq!(run["reminders"], 1, "{run}");
    assert_eq!(run["unreadable"], 1, "{run}");
}

#[tokio::test]
async fn reminders_are_sent_when_the_offline_check_fails() {
    let table = fresh_table().await;
    put_rule(&table, hot_rule(json!({"remindEverySeconds": 600}))).await;
    let token = register(&table, "freezer", json!({"reportEverySeconds": 60})).await;
    report(&table, "freezer", &token, 12.0, 3000).await;
    let alarm = alarms_of(&table).await.pop().expect("raised at ingest");
    let due = state_of(&table, "freezer").await.due_at().unwrap();
    let at = std::cmp::max(alarm.remind_at.unwrap(), next_minute(&due));
    // Every TransactWriteItems fails (the offline raise's): the offline check fails.
    let mut config = ProxyConfig::new(30, FaultRates::none());
    config.operations.insert(
        "TransactWriteItems".to_string(),
        FaultRates {
            internal_error: 1.0,
            ..FaultRates::none()
        },
    );
    let proxy = FaultProxy::start(endpoint(), config).await.unwrap();
    let faulty = through_proxy(&table, proxy.endpoint(), ClientTimeouts::default()).await;
    let watch = watcher(&faulty);
    let event = json!({"detail-type": "Scheduled Event", "source": "aws.events",
        "time": at.to_string(), "detail": {}});
    let deadline = Instant::now() + alarm_watch::TIMEOUT;
    let result = alarm_watch::handle(&watch, event, deadline).await;
    assert!(result.is_err(), "the run fails (Errors alarm): {result:?}");
    let alarms = alarms_of(&table).await;
    assert_eq!(alarms.len(), 1, "no offline alarm was raised");
    assert_eq!(alarms[0].reminders, 1, "the reminder was sent all the same");
}

/// The alarms of the operators' list, every severity.
async fn operators_open_alarms(table: &FleetTable) -> Vec<Value> {
    let mut open = Vec::new();
    for severity in ["critical", "major", "minor", "warning"] {
        let a = dashboard(
            table,
            ApiRequest::get("/admin/alarms")
                .admin("ops")
                .query("severity", severity),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.body);
        open.extend(a.body["alarms"].as_array().unwrap().iter().cloned());
    }
    open
}

/// The owner's list.
async fn owner_list(table: &FleetTable) -> Vec<Value> {
    let a = dashboard(table, ApiRequest::get("/me/alarms").caller(OWNER)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["alarms"].as_array().unwrap().clone()
}

fn open_pointers(items: &[shared::model::schema::Item]) -> usize {
    items
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::OpenAlarm))
        .count()
}

fn cleared_published(entries: &[Value]) -> usize {
    detail_types(entries)
        .iter()
        .filter(|(t, _)| t == "Device Fleet Alarm Cleared")
        .count()
}

/// Issue 30 item 4: deleting a device clears its open alarms (a rule's and its offline one)
/// in the deletion's transaction: cleared, expiring like any cleared alarm, off both lists and
/// the reminder index, each published once as Cleared; no reminder is sent for them.
#[tokio::test]
async fn a_deleted_devices_open_alarms_clear_are_published_once_leave_both_lists_and_are_not_reminded(
) {
    let table = fresh_table_with_stream().await;
    let token = register(&table, "cold-9", json!({"reportEverySeconds": 60})).await;
    put_rule(&table, hot_rule(json!({"remindEverySeconds": 600}))).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let body = json!([{"type": "temperature", "value": 12.0, "at": ago(1500)}]);
    assert_eq!(
        ingest(&ingestor, ingest_request("cold-9", &token, body))
            .await
            .status,
        200
    );
    let due = state_of(&table, "cold-9").await.due_at().unwrap();
    let watch = watcher(&table);
    let (run, _) = run_at(&watch, next_minute(&due)).await;
    assert_eq!(run["raised"], 1, "{run}");
    let open = alarms_of(&table).await;
    assert_eq!(open.len(), 2, "the rule's and offline");
    assert!(open.iter().all(|a| a.state == AlarmState::Active));
    let remind_at = open.iter().find_map(|a| a.remind_at).expect("a reminder");
    assert_eq!(operators_open_alarms(&table).await.len(), 2);
    let mut stream = AlarmStream::open(&table, endpoint()).await.unwrap();
    deliver(&watch, &mut stream).await;
    let published = watch.publisher.entries().len();

    let deleted = device_updates(
        &table,
        ApiRequest::delete("/me/devices/cold-9").caller(OWNER),
    )
    .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);

    let alarms = alarms_of(&table).await;
    assert_eq!(alarms.len(), 2);
    for alarm in &alarms {
        assert_eq!(alarm.state, AlarmState::Cleared, "{alarm:?}");
        assert!(alarm.cleared_at.is_some() && alarm.clear_reading.is_none());
        assert!(alarm.ttl.is_some(), "expires like any cleared alarm");
        assert!(alarm.remind_at.is_none(), "off the reminder index");
    }
    assert_eq!(open_pointers(&table_contents(&table).await), 0);
    assert!(owner_list(&table)
        .await
        .iter()
        .all(|a| a["state"] == "cleared"));
    assert!(operators_open_alarms(&table).await.is_empty());

    let answer = deliver(&watch, &mut stream).await;
    assert_eq!(answer["batchItemFailures"], json!([]));
    assert_eq!(
        cleared_published(&watch.publisher.entries()[published..]),
        2,
        "the owner is told each alarm cleared"
    );
    let (run, _) = run_at(&watch, remind_at.plus_seconds(60)).await;
    assert_eq!(run["reminders"], 0, "{run}");
}

/// Issue 30 item 4: deleting a rule clears its open alarm on a device that stays silent (no
/// batch will come to clear it), with one Cleared notification; the device's live state
/// forgets it, so a later batch clears nothing twice.
#[tokio::test]
async fn deleting_a_rule_clears_its_open_alarm_on_a_silent_device_once() {
    let table = fresh_table_with_stream().await;
    let token = register(&table, "cold-8", json!({})).await;
    let rule = put_rule(&table, hot_rule(json!({"remindEverySeconds": 600}))).await;
    // A second rule (of another event type) keeps the rule set's map non-empty: DynamoDB
    // Local writes an empty map into a stream record as `{}`, which the SDK cannot read.
    let other = device_updates(
        &table,
        ApiRequest::post("/me/rules")
            .caller(OWNER)
            .json(json!({"name": "Door",
            "eventType": "door", "scope": {"deviceType": "thermostat"},
            "condition": {"equals": "open"}, "severity": "minor"})),
    )
    .await;
    assert_eq!(other.status, 201, "{}", other.body);
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let body = json!([{"type": "temperature", "value": 12.0, "at": ago(1500)}]);
    assert_eq!(
        ingest(&ingestor, ingest_request("cold-8", &token, body))
            .await
            .status,
        200
    );
    let remind_at = alarms_of(&table).await[0].remind_at.unwrap();
    let watch = watcher(&table);
    let mut stream = AlarmStream::open(&table, endpoint()).await.unwrap();
    deliver(&watch, &mut stream).await;
    let published = watch.publisher.entries().len();

    let deleted = device_updates(
        &table,
        ApiRequest::delete(&format!("/me/rules/{}", rule.rule_id)).caller(OWNER),
    )
    .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);

    let alarms = alarms_of(&table).await;
    assert_eq!(alarms.len(), 1);
    assert_eq!(alarms[0].state, AlarmState::Cleared);
    assert!(alarms[0].ttl.is_some() && alarms[0].remind_at.is_none());
    assert_eq!(open_pointers(&table_contents(&table).await), 0);
    assert!(operators_open_alarms(&table).await.is_empty());
    assert!(owner_list(&table)
        .await
        .iter()
        .all(|a| a["state"] == "cleared"));
    assert!(state_of(&table, "cold-8").await.alarms.is_empty());
    let device = dashboard(&table, ApiRequest::get("/me/devices/cold-8").caller(OWNER)).await;
    assert_eq!(device.body["device"]["alarms"]["active"], 0);
    deliver(&watch, &mut stream).await;
    assert_eq!(
        cleared_published(&watch.publisher.entries()[published..]),
        1
    );
    let (run, _) = run_at(&watch, remind_at.plus_seconds(60)).await;
    assert_eq!(run["reminders"], 0, "{run}");

    // The device reports again (to a container that read the rules after the deletion):
    // nothing more to clear, nothing raised, nothing published.
    let body = json!([{"type": "temperature", "value": 12.0, "at": ago(100)}]);
    let cold = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    assert_eq!(
        ingest(&cold, ingest_request("cold-8", &token, body))
            .await
            .status,
        200
    );
    assert_eq!(alarms_of(&table).await, alarms);
    assert_eq!(deliver(&watch, &mut stream).await["records"], 0);
}
