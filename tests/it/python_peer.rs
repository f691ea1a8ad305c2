//! The Python + boto3 reference peer (`bench/python-peer/`) against the Rust handlers on
//! DynamoDB Local: the same dashboard answer, the same stored items for an ingest batch, the
//! same rejections. The peer runs in the virtualenv `make python-peer` builds (`.venv-peer/`),
//! one `invoke.py` process per event, with the environment the Rust bootstraps read.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use fleet_testkit::api_event::ApiEvent;
use fleet_testkit::demo::DEMO_KITCHEN_TOKEN;
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::device_state::DeviceStateItem;
use shared::model::entities::{Entity, EntityType};
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;
use tokio::io::AsyncWriteExt;

fn python() -> PathBuf {
    let python = fleet_testkit::repo_root().join(".venv-peer/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make python-peer` (make test does)",
        python.display()
    );
    python
}

/// Runs `handler` of the peer on `event` against `table`; returns its status and JSON body.
async fn peer(table: &FleetTable, handler: &str, event: &Value) -> (u16, Value) {
    let root = fleet_testkit::repo_root();
    let shards = &table.config.shards;
    let mut child = tokio::process::Command::new(python())
        .arg(root.join("bench/python-peer/invoke.py"))
        .arg(handler)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TABLE_NAME", table.name())
        .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("RETENTION_DAYS", table.config.retention_days.to_string())
        .env("STATUS_SHARDS", shards.status.to_string())
        .env("ACTIVE_STATUS_SHARDS", shards.active_status.to_string())
        .env("EVENT_TYPE_SHARDS", shards.event_type.to_string())
        .env(
            "SEARCHABLE_EVENT_TYPES",
            shards
                .searchable
                .iter()
                .map(|(t, n)| format!("{t}:{n}"))
                .collect::<Vec<_>>()
                .join(","),
        )
        .env(
            "DEVICES_PER_SHARD",
            table.config.devices_per_partition.to_string(),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the peer");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(event.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let response: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "peer printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let status = response["statusCode"].as_u64().unwrap() as u16;
    let body = response["body"].as_str().unwrap_or("");
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap()
    };
    (status, body)
}

fn sample(name: &str) -> Value {
    let path = fleet_testkit::repo_root().join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn request(event: &Value) -> lambda_http::Request {
    lambda_http::request::from_str(&event.to_string()).expect("valid event")
}

async fn rust_dashboard(table: &FleetTable, event: &Value) -> Answer {
    let (response, used) =
        metered(gateway(dashboard::router(FleetTable::clone(table))).handle(request(event))).await;
    answer(response, used)
}

/// The authorizer claims a signed-in `sub` carries, as the one event builder writes them.
fn caller_claims(sub: &str) -> Value {
    ApiEvent::new("GET /me", "/me").caller(sub).to_json()["requestContext"]["authorizer"]["jwt"]
        ["claims"]
        .clone()
}

async fn rust_ingest(table: &FleetTable, event: &Value) -> Answer {
    let ingestor = std::sync::Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let (response, used) =
        metered(gateway(ingest::router(std::sync::Arc::clone(&ingestor))).handle(request(event)))
            .await;
    answer(response, used)
}

#[tokio::test]
async fn the_dashboard_answers_exactly_as_the_rust_handler() {
    let (table, _) = demo_table().await;
    let alice = sample("get-dashboard.json");
    let mut bob = alice.clone();
    bob["requestContext"]["authorizer"]["jwt"]["claims"] = caller_claims("demo-bob");
    let mut stranger = alice.clone();
    stranger["requestContext"]["authorizer"]["jwt"]["claims"] = caller_claims("nobody-here");
    let mut anonymous = alice.clone();
    anonymous["requestContext"]
        .as_object_mut()
        .unwrap()
        .remove("authorizer");
    let mut bad_cursor = alice.clone();
    bad_cursor["queryStringParameters"] = json!({"cursor": "not-a-cursor"});
    bad_cursor["rawQueryString"] = json!("cursor=not-a-cursor");
    for (what, event) in [
        ("alice", &alice),
        ("bob", &bob),
        ("no profile, no devices", &stranger),
        ("no claims", &anonymous),
        ("bad cursor", &bad_cursor),
    ] {
        let rust = rust_dashboard(&table, event).await;
        let (status, body) = peer(&table, "dashboard_handler", event).await;
        assert_eq!(status, rust.status, "{what}");
        assert_eq!(body, rust.body, "{what}");
    }
    let rust = rust_dashboard(&table, &alice).await;
    assert_eq!(rust.status, 200);
    assert_eq!(
        rust.body["devices"].as_array().unwrap().len(),
        3,
        "demo data"
    );
}

/// A batch for thermo-kitchen newer than its demo readings, 12 events (so `recent` holds only
/// these), ids given and derived, numbers that render differently in Rust and Python, text,
/// booleans, offsets and sub-millisecond times, and a duplicate.
fn kitchen_batch(now: Timestamp) -> ApiRequest {
    let at = |s: i64| now.plus_seconds(-120 + s).to_string();
    let offset = {
        let t = now.plus_seconds(-60);
        let plus_one = t.plus_seconds(3600).to_string();
        format!("{}+01:00", &plus_one[..19])
    };
    let events = json!([
        {"id": "k-1", "type": "temperature", "value": 21.5, "at": at(0)},
        {"id": "k-2", "type": "humidity", "value": 44, "at": at(1)},
        {"type": "door", "value": "closed", "at": at(2)},
        {"type": "door", "value": true, "at": at(3)},
        {"type": "temperature", "value": 1e16, "at": at(4)},
        {"type": "temperature", "value": 0.000001, "at": at(5)},
        {"type": "humidity", "value": 0.30000000000000004, "at": at(6)},
        {"type": "power", "value": -0.5, "at": offset},
        {"id": "k-9", "type": "temperature", "value": 19, "at": format!("{}123456Z", &at(7)[..20])},
        {"id": "k-10", "type": "humidity", "value": "say \"hi\"", "at": at(8)},
        {"id": "k-11", "type": "temperature", "value": 22.25, "at": at(9)},
        {"id": "k-12", "type": "humidity", "value": false, "at": at(10)},
        // A searchable type: its own GSI1 entry under the device, and the hour's type mark.
        {"id": "k-13", "type": "alarm", "value": "overheat", "at": at(11)},
        {"id": "k-1", "type": "temperature", "value": 99, "at": at(0)},
    ]);
    ingest_request("thermo-kitchen", DEMO_KITCHEN_TOKEN, events)
}

type Items = BTreeMap<(String, String), Item>;

async fn keyed(table: &FleetTable) -> Items {
    table_contents(table)
        .await
        .into_iter()
        .map(|i| {
            let key = |n: &str| i[n].as_s().unwrap().clone();
            ((key("PK"), key("SK")), i)
        })
        .collect()
}

/// Items added or changed between two snapshots, without the fields the demo seeding stamped
/// with its own clock (the two tables were seeded moments apart; ingestion never sets them).
fn changes(before: &Items, after: &Items) -> Items {
    after
        .iter()
        .filter(|(k, item)| before.get(*k) != Some(*item))
        .map(|(k, item)| {
            let mut item = item.clone();
            item.remove("createdAt");
            item.remove("updatedAt");
            (k.clone(), item)
        })
        .collect()
}

/// The stamp (`reg`) of the registration whose event partition is `pk`, from `items`.
fn registration_stamp(items: &Items, pk: &str) -> Option<AttributeValue> {
    let device = pk.rsplit_once("#DEVICE#")?.1;
    let registration = items.get(&(format!("DEVICE#{device}"), "REGISTRATION".to_string()))?;
    let created = registration.get("createdAt")?.as_s().ok()?;
    let created = Timestamp::parse_field("createdAt", created).ok()?;
    Some(AttributeValue::N(
        shared::model::entities::event::registration_stamp(&created).to_string(),
    ))
}

/// The items a batch added or changed on each table are the same, byte for byte, but for the
/// learned rhythm: it follows the gap from the demo's last reading, stamped with each seeding's
/// own clock, so each side is checked against the shared rule applied to its own state before
/// the batch, and the rest compared as it is.
/// Two tables holding the same demo data, item for item: the second a copy of the first, so
/// the summaries' reading identities (which hold each seeded reading's millisecond) match.
async fn twin_demo_tables() -> (FleetTable, FleetTable) {
    let (rust_table, _) = demo_table().await;
    let peer_table = fresh_table().await;
    for item in table_contents(&rust_table).await {
        peer_table
            .client
            .put_item()
            .table_name(peer_table.name())
            .set_item(Some(item))
            .send()
            .await
            .expect("copy a demo item");
    }
    (rust_table, peer_table)
}

fn assert_same_changes(rust: (&Items, &Items), peer: (&Items, &Items)) {
    let ((rust_before, rust_changes), (peer_before, peer_changes)) = (rust, peer);
    assert_eq!(
        rust_changes.keys().collect::<Vec<_>>(),
        peer_changes.keys().collect::<Vec<_>>()
    );
    let rhythm = ["learnedEverySeconds", "learnedJitterSeconds", "GSI3SK"];
    for (key, item) in rust_changes {
        let mut ours = item.clone();
        let mut theirs = peer_changes.get(key).cloned().unwrap_or_default();
        // The registration stamp (`reg`, events and summary items): each side's own
        // registration's `createdAt` (the two tables registered the device moments apart).
        for (before, after) in [(rust_before, &mut ours), (peer_before, &mut theirs)] {
            if let Some(stamp) = after.remove("reg") {
                assert_eq!(
                    Some(stamp),
                    registration_stamp(before, &key.0),
                    "{key:?}: the stamp of the registration that wrote it"
                );
            }
        }
        if entity_type(item) == Some(EntityType::DeviceState) {
            for (before, after) in [(rust_before, item), (peer_before, &theirs)] {
                let after = DeviceStateItem::from_item(after.clone()).unwrap();
                let mut expected = after.clone();
                expected.learn_rhythm(&DeviceStateItem::from_item(before[key].clone()).unwrap());
                assert_eq!(
                    (
                        expected.learned_every_seconds,
                        expected.learned_jitter_seconds
                    ),
                    (after.learned_every_seconds, after.learned_jitter_seconds),
                    "{key:?}: the rhythm learned from the state before"
                );
            }
            for name in rhythm {
                ours.remove(name);
                theirs.remove(name);
            }
        }
        assert_eq!(ours, theirs, "{key:?}");
    }
}

/// A meter's batch of 100 minutes of two new types, every 2 minutes each (and a reading of
/// each of the demo's types), with values that
/// need full doubles: its open 5-minute buckets push the state past one write unit, so the
/// batch flushes its closed 5-minute buckets into their blocks in the state's transaction.
fn meter_batch(now: Timestamp) -> ApiRequest {
    let events: Vec<Value> = (0..98)
        .map(|i: i64| {
            let (kind, value) = if i % 2 == 0 {
                ("power", 200.0 + i as f64 * 0.37)
            } else {
                ("voltage", 229.0 + (i % 7) as f64 * 0.113)
            };
            json!({"id": format!("m-{i}"), "type": kind, "value": value,
                   "at": now.plus_seconds(-6000 + 60 * i).to_string()})
        })
        .chain([
            // The demo's own types too: their latest readings were stamped with each
            // seeding's clock, and the state stores them relative to the newest.
            json!({"id": "m-t", "type": "temperature", "value": 21.25, "at": now.to_string()}),
            json!({"id": "m-h", "type": "humidity", "value": 40, "at": now.to_string()}),
        ])
        .collect();
    ingest_request("thermo-kitchen", DEMO_KITCHEN_TOKEN, json!(events))
}

/// Readings of `power` 40 to 90 minutes old that the meter batch did not send (late: their
/// buckets are flushed), one of its readings again (a replay) and a text reading.
fn late_batch(now: Timestamp) -> ApiRequest {
    let mut events: Vec<Value> = (0..10)
        .map(|i: i64| {
            json!({"id": format!("late-{i}"), "type": "power", "value": 150.5 + i as f64,
                   "at": now.plus_seconds(-5400 + 300 * i + 17).to_string()})
        })
        .collect();
    events.push(
        json!({"id": "m-10", "type": "power", "value": 200.0 + 10.0 * 0.37,
                       "at": now.plus_seconds(-6000 + 600).to_string()}),
    );
    events.push(
        json!({"id": "late-text", "type": "power", "value": "calibrating",
                       "at": now.plus_seconds(-4000).to_string()}),
    );
    ingest_request("thermo-kitchen", DEMO_KITCHEN_TOKEN, json!(events))
}

#[tokio::test]
async fn a_batch_that_flushes_summaries_and_late_readings_store_exactly_what_rust_stores() {
    let (rust_table, peer_table) = twin_demo_tables().await;
    let now = Timestamp::now();
    for (what, batch) in [
        ("flush", meter_batch(now)),
        ("late and replayed", late_batch(now)),
    ] {
        let rust_before = keyed(&rust_table).await;
        let peer_before = keyed(&peer_table).await;
        let rust = rust_ingest(&rust_table, &batch.event()).await;
        let (status, body) = peer(&peer_table, "ingest_handler", &batch.event()).await;
        assert_eq!(rust.status, 200, "{what}: {}", rust.body);
        assert_eq!((status, &body), (rust.status, &rust.body), "{what}");
        let rust_changes = changes(&rust_before, &keyed(&rust_table).await);
        let peer_changes = changes(&peer_before, &keyed(&peer_table).await);
        let blocks = rust_changes
            .keys()
            .filter(|(_, sk)| sk.starts_with("SERIES#power#5m#"))
            .count();
        assert!(blocks >= 1, "{what}: the batch wrote a 5-minute block");
        let state = rust_changes
            .values()
            .find(|i| entity_type(i) == Some(EntityType::DeviceState))
            .expect("the state changed");
        assert!(
            state.contains_key("series"),
            "{what}: the state carries open summaries"
        );
        assert_same_changes((&rust_before, &rust_changes), (&peer_before, &peer_changes));
    }
    // Issue 38: days-late readings in shuffled order (their days are rolled: block, hour and
    // day added once each), the same batch again and the late batch again (replays: nothing
    // written), then the first late batch's readings newest first with new ones among them.
    for (what, batch) in [
        ("days late, shuffled", days_late_batch(now, false)),
        ("days late, replayed", days_late_batch(now, false)),
        ("late, replayed", late_batch(now)),
        (
            "days late, newest first with new ones",
            days_late_batch(now, true),
        ),
    ] {
        let rust_before = keyed(&rust_table).await;
        let peer_before = keyed(&peer_table).await;
        let rust = rust_ingest(&rust_table, &batch.event()).await;
        let (status, body) = peer(&peer_table, "ingest_handler", &batch.event()).await;
        assert_eq!(rust.status, 200, "{what}: {}", rust.body);
        assert_eq!((status, &body), (rust.status, &rust.body), "{what}");
        let rust_changes = changes(&rust_before, &keyed(&rust_table).await);
        let peer_changes = changes(&peer_before, &keyed(&peer_table).await);
        if what.ends_with("replayed") {
            assert!(
                !rust_changes.keys().any(|(_, sk)| sk.starts_with("SERIES#")),
                "{what}: a replay writes no summary item"
            );
        }
        assert_same_changes((&rust_before, &rust_changes), (&peer_before, &peer_changes));
    }
}

/// Readings of `power` two to three days old, in a shuffled order; `newest_first`: the same
/// readings newest first with as many new ones between them.
fn days_late_batch(now: Timestamp, newest_first: bool) -> ApiRequest {
    let reading = |i: i64, id: String| {
        json!({"id": id, "type": "power", "value": 180.25 + (i % 9) as f64 * 0.37,
               "at": now.plus_seconds(-3 * 86_400 + 420 * i).to_string()})
    };
    let events: Vec<Value> = if newest_first {
        (0..40)
            .rev()
            .flat_map(|i| {
                [
                    reading(2 * i, format!("old-{i}")),
                    reading(2 * i + 1, format!("new-{i}")),
                ]
            })
            .collect()
    } else {
        (0..40)
            .map(|k| (k * 17) % 40)
            .map(|i| reading(2 * i, format!("old-{i}")))
            .collect()
    };
    ingest_request("thermo-kitchen", DEMO_KITCHEN_TOKEN, json!(events))
}

#[tokio::test]
async fn an_ingest_batch_stores_exactly_the_items_the_rust_handler_stores() {
    let (rust_table, peer_table) = twin_demo_tables().await;
    let batch = kitchen_batch(Timestamp::now());
    let rust_before = keyed(&rust_table).await;
    let peer_before = keyed(&peer_table).await;

    let rust = rust_ingest(&rust_table, &batch.event()).await;
    let (status, body) = peer(&peer_table, "ingest_handler", &batch.event()).await;
    assert_eq!(rust.status, 200, "{}", rust.body);
    assert_eq!((status, &body), (rust.status, &rust.body));
    assert_eq!(body["accepted"], 13, "14 events, one duplicate");

    let rust_changes = changes(&rust_before, &keyed(&rust_table).await);
    let peer_changes = changes(&peer_before, &keyed(&peer_table).await);
    // 13 events, the alarm's type mark and the device summary.
    assert_eq!(rust_changes.len(), 15);
    assert_eq!(
        rust_changes.keys().collect::<Vec<_>>(),
        peer_changes.keys().collect::<Vec<_>>()
    );
    assert_same_changes((&rust_before, &rust_changes), (&peer_before, &peer_changes));

    // A replay through the peer stores nothing new and answers the same.
    let (status, again) = peer(&peer_table, "ingest_handler", &batch.event()).await;
    assert_eq!((status, &again), (200, &body));
    let replayed = keyed(&peer_table).await;
    assert_eq!(
        changes(&peer_before, &replayed).keys().collect::<Vec<_>>(),
        peer_changes.keys().collect::<Vec<_>>()
    );
}

/// Makes the demo's kitchen thermostat a tight-detection device (`offlineDetection`), as
/// its owner would.
async fn tighten_kitchen(table: &FleetTable) {
    let device = shared::model::entities::device::DeviceItem::from_item(
        item(table, &key::device("demo-alice", "thermo-kitchen"))
            .await
            .unwrap(),
    )
    .unwrap();
    let patched = device_updates(
        table,
        ApiRequest::patch("/me/devices/thermo-kitchen")
            .caller("demo-alice")
            .header("if-match", &device.version.to_string())
            .json(json!({"offlineDetection": "tight"})),
    )
    .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
}

#[tokio::test]
async fn a_tight_devices_due_entry_moves_with_each_batch_in_the_peer_as_in_rust() {
    let (rust_table, peer_table) = twin_demo_tables().await;
    tighten_kitchen(&rust_table).await;
    tighten_kitchen(&peer_table).await;
    let now = Timestamp::now();
    for batch in [kitchen_batch(now.plus_seconds(-60)), kitchen_batch(now)] {
        let rust = rust_ingest(&rust_table, &batch.event()).await;
        let (status, _) = peer(&peer_table, "ingest_handler", &batch.event()).await;
        assert_eq!((rust.status, status), (200, 200), "{}", rust.body);
        let due = |item: Item| {
            let state = DeviceStateItem::from_item(item).unwrap();
            let last_seen = state.last_seen.unwrap();
            assert_eq!(
                state.indexed_due,
                state.due_at(),
                "the entry is where the state says"
            );
            (state.indexed_due, last_seen)
        };
        let state = key::state("demo-alice", 0, "thermo-kitchen");
        let (rust_due, rust_seen) = due(item(&rust_table, &state).await.unwrap());
        let (peer_due, peer_seen) = due(item(&peer_table, &state).await.unwrap());
        assert_eq!(rust_seen, peer_seen);
        // Tight: the kitchen's declared 300 s and a minute after its last report, on both.
        assert_eq!(rust_due, Some(rust_seen.plus_seconds(360)));
        assert_eq!(peer_due, rust_due);
    }
}

#[tokio::test]
async fn rejections_match_the_rust_handler_and_change_nothing() {
    let (table, _) = demo_table().await;
    let before = table_contents(&table).await;
    let now = Timestamp::now();
    let good = json!([{"id": "r-1", "type": "temperature", "value": 1, "at": now.to_string()}]);
    let cases = [
        (
            "wrong token",
            ingest_request("thermo-kitchen", "dft_wrong", good.clone()),
        ),
        (
            "unknown device",
            ingest_request("no-such-device", DEMO_KITCHEN_TOKEN, good.clone()),
        ),
        (
            "bad device id",
            ingest_request("a%23b", DEMO_KITCHEN_TOKEN, good.clone()),
        ),
        (
            "bad type",
            ingest_request(
                "thermo-kitchen",
                DEMO_KITCHEN_TOKEN,
                json!([{"type": "a#b", "value": 1, "at": now.to_string()}]),
            ),
        ),
        (
            "future event",
            ingest_request(
                "thermo-kitchen",
                DEMO_KITCHEN_TOKEN,
                json!([{"type": "t", "value": 1, "at": now.plus_seconds(3600).to_string()}]),
            ),
        ),
        (
            "a number DynamoDB cannot store",
            ingest_request(
                "thermo-kitchen",
                DEMO_KITCHEN_TOKEN,
                json!([{"type": "t", "value": 1e200, "at": now.to_string()}]),
            ),
        ),
        (
            "a number too small for DynamoDB",
            ingest_request(
                "thermo-kitchen",
                DEMO_KITCHEN_TOKEN,
                json!([{"type": "t", "value": -1e-131, "at": now.to_string()}]),
            ),
        ),
        (
            "value is an object",
            ingest_request(
                "thermo-kitchen",
                DEMO_KITCHEN_TOKEN,
                json!([{"type": "t", "value": {"a": 1}, "at": now.to_string()}]),
            ),
        ),
        (
            "no events",
            ingest_request("thermo-kitchen", DEMO_KITCHEN_TOKEN, json!([])),
        ),
    ];
    for (what, request) in &cases {
        let rust = rust_ingest(&table, &request.event()).await;
        let (status, body) = peer(&table, "ingest_handler", &request.event()).await;
        assert!(rust.status >= 400, "{what}: {}", rust.status);
        assert_eq!((status, &body), (rust.status, &rust.body), "{what}");
    }
    let mut no_token = ingest_request("thermo-kitchen", "x", good);
    no_token = no_token.header("Authorization", "Basic abc");
    let rust = rust_ingest(&table, &no_token.event()).await;
    let (status, body) = peer(&table, "ingest_handler", &no_token.event()).await;
    assert_eq!((status, &body), (401, &rust.body));
    assert_eq!(
        table_contents(&table).await,
        before,
        "rejections change nothing"
    );
}

/// The device twin through the peer's ingest: the pending desired state and command in the
/// answer, then the report and acknowledgement, answered and stored as the Rust handler does
/// (the command's times differ between the two tables; everything else is compared).
#[tokio::test]
async fn the_twins_delivery_report_and_acknowledgement_match_the_rust_handler() {
    use shared::model::ids::{CommandName, DeviceId, UserId};
    use shared::model::twin::{TwinDocument, MAX_DOCUMENT_BYTES};
    use shared::ops::twin::owner::{queue_command, set_desired, NewCommand};
    let mut answers = Vec::new();
    for side in ["rust", "peer"] {
        let (table, _) = demo_table().await;
        let (alice, kitchen) = (
            UserId::parse("demo-alice").unwrap(),
            DeviceId::parse("thermo-kitchen").unwrap(),
        );
        let desired =
            TwinDocument::parse("desired", json!({"interval": 300}), MAX_DOCUMENT_BYTES).unwrap();
        set_desired(&table, &alice, &kitchen, 0, desired)
            .await
            .unwrap();
        let command = NewCommand {
            name: CommandName::parse("reboot").unwrap(),
            parameters: TwinDocument::default(),
            expires_in_seconds: 3600,
        };
        queue_command(&table, &alice, &kitchen, command)
            .await
            .unwrap();
        let now = Timestamp::now();
        let first = ApiRequest::post("/devices/thermo-kitchen/events")
            .header("Authorization", &format!("Bearer {DEMO_KITCHEN_TOKEN}"))
            .json(json!({"events": [{"id": "t-1", "type": "temperature", "value": 21, "at": now.plus_seconds(-2).to_string()}]}));
        let second = ApiRequest::post("/devices/thermo-kitchen/events")
            .header("Authorization", &format!("Bearer {DEMO_KITCHEN_TOKEN}"))
            .json(json!({"events": [{"id": "t-2", "type": "temperature", "value": 22, "at": now.plus_seconds(-1).to_string()}],
                         "reported": {"version": 1, "state": {"interval": 300}},
                         "acks": [{"commandId": "cmd-1", "status": "succeeded"}]}));
        let mut bodies = Vec::new();
        for request in [&first, &second, &second] {
            let (status, mut body) = match side {
                "rust" => {
                    let a = rust_ingest(&table, &request.event()).await;
                    (a.status, a.body)
                }
                _ => peer(&table, "ingest_handler", &request.event()).await,
            };
            assert_eq!(status, 200, "{side}: {body}");
            // The expiry is the table's own command's.
            if let Some(c) = body["commands"].get_mut(0) {
                c["expiresAt"] = json!("-");
            }
            bodies.push(body);
        }
        assert_eq!(
            bodies[0]["desired"],
            json!({"version": 1, "state": {"interval": 300}}),
            "{side}"
        );
        assert_eq!(bodies[0]["commands"][0]["commandId"], "cmd-1", "{side}");
        assert_eq!(bodies[1]["acknowledged"], json!(["cmd-1"]), "{side}");
        assert!(
            bodies[2].get("acknowledged").is_none(),
            "{side}: a replay acknowledges nothing"
        );
        let state = item(&table, &key::state("demo-alice", 0, "thermo-kitchen"))
            .await
            .unwrap();
        let versions: Vec<_> = [
            "desiredVersion",
            "reportedVersion",
            "commandSeq",
            "commandsDone",
        ]
        .iter()
        .map(|n| state.get(*n).cloned())
        .collect();
        answers.push((bodies, versions));
    }
    assert_eq!(answers[0], answers[1]);
}

/// Issue 38 item 9: with the owner's raw retention of thermostats shortened to 7 days
/// (`PUT /me/retention`), the peer writes the events, type marks and 5-minute blocks with the
/// same `ttl` as the Rust ingest (it wrote them from `RETENTION_DAYS`, ignoring the setting).
#[tokio::test]
async fn a_shortened_raw_retention_gives_the_peers_items_the_same_ttl() {
    let (rust_table, peer_table) = twin_demo_tables().await;
    for table in [&rust_table, &peer_table] {
        let a = device_updates(
            table,
            ApiRequest::put("/me/retention")
                .caller("demo-alice")
                .json(json!({"deviceType": "thermostat", "rawDays": 7})),
        )
        .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
    }
    let now = Timestamp::now();
    let batch = meter_batch(now);
    let rust_before = keyed(&rust_table).await;
    let peer_before = keyed(&peer_table).await;
    let rust = rust_ingest(&rust_table, &batch.event()).await;
    let (status, body) = peer(&peer_table, "ingest_handler", &batch.event()).await;
    assert_eq!(rust.status, 200, "{}", rust.body);
    assert_eq!((status, &body), (rust.status, &rust.body));
    let rust_changes = changes(&rust_before, &keyed(&rust_table).await);
    let peer_changes = changes(&peer_before, &keyed(&peer_table).await);
    let event = rust_changes
        .values()
        .find(|i| entity_type(i) == Some(EntityType::Event))
        .expect("an event stored");
    let at = Timestamp::parse_field("at", event["at"].as_s().unwrap()).unwrap();
    assert_eq!(
        event["ttl"].as_n().unwrap().parse::<i64>().unwrap(),
        at.epoch_seconds() + 7 * 86_400,
        "Rust's events expire by the shortened retention"
    );
    assert_same_changes((&rust_before, &rust_changes), (&peer_before, &peer_changes));
}
