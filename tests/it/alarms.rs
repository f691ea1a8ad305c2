//! Alarms (issue 22) on DynamoDB Local, through the handlers: rules, evaluation at ingest,
//! the lifecycle routes, isolation and bad input, and what alarms cost in write units.

use std::sync::Arc;
use std::time::Duration;

use fleet_testkit::pricing::{self, WriteKind};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::EntityType;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

const OWNER: &str = "alarm-owner";
const OTHER: &str = "alarm-other";

/// A cold ingestor (no warm caches) that sees rule changes at once.
fn ingestor(table: &FleetTable) -> Arc<Ingestor> {
    Arc::new(Ingestor::new(
        table.clone(),
        IngestConfig {
            rules_cache: Duration::ZERO,
            ..IngestConfig::default()
        },
    ))
}

fn hot_rule(device: &str) -> Value {
    json!({"name": "Boiler too hot", "eventType": "temperature",
        "scope": {"deviceId": device}, "condition": {"above": 80},
        "clear": {"below": 75}, "severity": "major"})
}

async fn create_rule(table: &FleetTable, user: &str, body: Value) -> Answer {
    device_updates(table, ApiRequest::post("/me/rules").caller(user).json(body)).await
}

/// Readings `(value, seconds ago)` of `temperature`, with ids so a replay is identical.
fn readings(prefix: &str, values: &[(f64, i64)]) -> Value {
    Value::Array(
        values
            .iter()
            .enumerate()
            .map(|(i, (v, ago_s))| {
                json!({"id": format!("{prefix}-{i}"), "type": "temperature", "value": v, "at": ago(*ago_s)})
            })
            .collect(),
    )
}

async fn send(table: &FleetTable, device: &str, token: &str, events: Value) -> Answer {
    let a = ingest(&ingestor(table), ingest_request(device, token, events)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a
}

async fn owner_alarms(table: &FleetTable, user: &str) -> Vec<Value> {
    let a = dashboard(table, ApiRequest::get("/me/alarms").caller(user)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["alarms"].as_array().unwrap().clone()
}

fn alarm_items(items: &[shared::model::schema::Item]) -> (usize, usize) {
    let count = |t| items.iter().filter(|i| entity_type(i) == Some(t)).count();
    (count(EntityType::Alarm), count(EntityType::OpenAlarm))
}

#[tokio::test]
async fn a_crossing_raises_one_alarm_hysteresis_clears_it_once_and_a_replay_changes_nothing() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "boiler-1").await;
    let rule = create_rule(&table, OWNER, hot_rule("boiler-1")).await;
    assert_eq!(rule.status, 201, "{}", rule.body);
    let rule_id = rule.body["rule"]["ruleId"].as_str().unwrap().to_string();
    assert_eq!(rule.body["rule"]["version"], 1);

    // 100 readings over the threshold in one batch: one alarm, one open pointer.
    let hot: Vec<(f64, i64)> = (0..100).map(|i| (85.0 + (i % 3) as f64, 600 - i)).collect();
    let batch = readings("hot", &hot);
    let a = send(&table, "boiler-1", &token, batch.clone()).await;
    assert_eq!(a.used.count("TransactWriteItems"), 1, "{:?}", a.used);
    assert_eq!(alarm_items(&table_contents(&table).await), (1, 1));
    let alarms = owner_alarms(&table, OWNER).await;
    assert_eq!(alarms.len(), 1);
    let alarm = &alarms[0];
    assert_eq!(alarm["state"], "active");
    assert_eq!(alarm["kind"], "threshold");
    assert_eq!(alarm["severity"], "major");
    assert_eq!(alarm["ruleId"], rule_id.as_str());
    assert_eq!(alarm["deviceId"], "boiler-1");
    assert_eq!(alarm["reading"]["value"], 85.0, "the first reading over it");
    assert!(alarm["clearedAt"].is_null());
    // The dashboard shows it without reading alarms: one request, as before.
    let d = dashboard(&table, ApiRequest::get("/me/dashboard").caller(OWNER)).await;
    assert_eq!(d.used.requests(), 1, "{:?}", d.used);
    let device = &d.body["devices"][0];
    assert_eq!(device["connectivity"], "online");
    assert_eq!(
        device["alarms"],
        json!({"active": 1, "highestSeverity": "major"})
    );

    // The same batch again: nothing changes, not even the live state.
    let before = table_contents(&table).await;
    let again = send(&table, "boiler-1", &token, batch).await;
    assert_eq!(again.used.count("TransactWriteItems"), 0);
    assert_eq!(again.used.count("UpdateItem"), 0);
    assert_eq!(table_contents(&table).await, before);

    // Between the thresholds nothing happens; under the clear threshold it clears, once.
    send(
        &table,
        "boiler-1",
        &token,
        readings("mid", &[(78.0, 300), (82.0, 290)]),
    )
    .await;
    assert_eq!(owner_alarms(&table, OWNER).await[0]["state"], "active");
    let cleared = send(
        &table,
        "boiler-1",
        &token,
        readings("cool", &[(74.0, 200), (70.0, 190), (78.0, 180)]),
    )
    .await;
    assert_eq!(cleared.used.count("TransactWriteItems"), 1);
    assert_eq!(
        alarm_items(&table_contents(&table).await),
        (1, 0),
        "pointer gone"
    );
    let alarms = owner_alarms(&table, OWNER).await;
    assert_eq!(alarms.len(), 1);
    assert_eq!(alarms[0]["state"], "cleared");
    assert_eq!(alarms[0]["clearReading"]["value"], 74.0);
    assert!(alarms[0]["clearedAt"].is_string());

    // The device's history shows it; a new crossing is a second alarm, listed first (open).
    send(&table, "boiler-1", &token, readings("hot2", &[(90.0, 100)])).await;
    let alarms = owner_alarms(&table, OWNER).await;
    assert_eq!(
        alarms
            .iter()
            .map(|a| a["state"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["active", "cleared"]
    );
    let history = dashboard(
        &table,
        ApiRequest::get("/me/devices/boiler-1/alarms").caller(OWNER),
    )
    .await;
    assert_eq!(history.status, 200);
    assert_eq!(history.body["alarms"].as_array().unwrap().len(), 2);
    assert_eq!(history.body["alarms"][0]["state"], "active", "newest first");
}

#[tokio::test]
async fn a_duration_rule_ignores_a_single_spike_and_fires_when_the_condition_holds() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "boiler-2").await;
    let mut body = hot_rule("boiler-2");
    body["forSeconds"] = json!(300);
    assert_eq!(create_rule(&table, OWNER, body).await.status, 201);
    send(
        &table,
        "boiler-2",
        &token,
        readings("spike", &[(95.0, 3000), (60.0, 2940), (61.0, 2880)]),
    )
    .await;
    assert!(owner_alarms(&table, OWNER).await.is_empty(), "a spike");
    // Held over 300 s across readings (two batches): raised once, at the reading completing it.
    send(
        &table,
        "boiler-2",
        &token,
        readings("hold-a", &[(90.0, 2000), (91.0, 1900)]),
    )
    .await;
    assert!(
        owner_alarms(&table, OWNER).await.is_empty(),
        "held 100 s so far"
    );
    send(
        &table,
        "boiler-2",
        &token,
        readings("hold-b", &[(92.0, 1699), (93.0, 1600)]),
    )
    .await;
    let alarms = owner_alarms(&table, OWNER).await;
    assert_eq!(alarms.len(), 1);
    assert_eq!(alarms[0]["reading"]["value"], 92.0);
}

#[tokio::test]
async fn type_and_tag_scopes_acknowledgement_and_the_operators_list() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "meter-1").await;
    let tagged = device_updates(
        &table,
        ApiRequest::post("/me/devices").caller(OWNER).json(
            json!({"deviceId": "door-1", "name": "Cold room door", "type": "door", "tags": ["cold-room"]}),
        ),
    )
    .await;
    let door_token = tagged.body["token"].as_str().unwrap().to_string();
    let by_type = json!({"name": "thermostats hot", "eventType": "temperature",
        "scope": {"deviceType": "thermostat"}, "condition": {"outside": [5, 80]},
        "severity": "critical", "remindEverySeconds": 600});
    let by_tag = json!({"name": "door open", "eventType": "door",
        "scope": {"tag": "cold-room"}, "condition": {"equals": "open"}, "severity": "minor"});
    assert_eq!(create_rule(&table, OWNER, by_type).await.status, 201);
    assert_eq!(create_rule(&table, OWNER, by_tag).await.status, 201);
    send(&table, "meter-1", &token, readings("cold", &[(2.0, 60)])).await;
    let door = json!([{"id": "d-1", "type": "door", "value": "open", "at": ago(50)}]);
    send(&table, "door-1", &door_token, door).await;
    let alarms = owner_alarms(&table, OWNER).await;
    assert_eq!(alarms.len(), 2, "{alarms:?}");

    // Operators see open alarms by severity, with the owner.
    let critical = dashboard(
        &table,
        ApiRequest::get("/admin/alarms")
            .admin("ops")
            .query("severity", "critical"),
    )
    .await;
    assert_eq!(critical.status, 200, "{}", critical.body);
    let open = critical.body["alarms"].as_array().unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["deviceId"], "meter-1");
    assert_eq!(open[0]["userId"], OWNER);
    let refused = dashboard(
        &table,
        ApiRequest::get("/admin/alarms")
            .caller(OWNER)
            .query("severity", "critical"),
    )
    .await;
    assert_eq!(refused.status, 403);
    let missing = dashboard(&table, ApiRequest::get("/admin/alarms").admin("ops")).await;
    assert_eq!((missing.status, missing.error_field()), (400, "severity"));

    // Acknowledge: active -> acknowledged, shown to operators too; again: the same answer.
    let id = alarms.iter().find(|a| a["deviceId"] == "meter-1").unwrap()["alarmId"]
        .as_str()
        .unwrap()
        .to_string();
    let ack = device_updates(
        &table,
        ApiRequest::post(&format!("/me/alarms/{id}/ack")).caller(OWNER),
    )
    .await;
    assert_eq!(ack.status, 200, "{}", ack.body);
    assert_eq!(ack.body["alarm"]["state"], "acknowledged");
    assert!(ack.body["alarm"]["acknowledgedAt"].is_string());
    let twice = device_updates(
        &table,
        ApiRequest::post(&format!("/me/alarms/{id}/ack")).caller(OWNER),
    )
    .await;
    assert_eq!(twice.status, 200);
    assert_eq!(twice.body["alarm"], ack.body["alarm"]);
    let critical = dashboard(
        &table,
        ApiRequest::get("/admin/alarms")
            .admin("ops")
            .query("severity", "critical"),
    )
    .await;
    assert_eq!(critical.body["alarms"][0]["state"], "acknowledged");

    // Back inside the range clears it; acknowledging a cleared alarm is a 409.
    send(&table, "meter-1", &token, readings("ok", &[(20.0, 30)])).await;
    let late = device_updates(
        &table,
        ApiRequest::post(&format!("/me/alarms/{id}/ack")).caller(OWNER),
    )
    .await;
    assert_eq!((late.status, late.error_code()), (409, "alarm_cleared"));
    let critical = dashboard(
        &table,
        ApiRequest::get("/admin/alarms")
            .admin("ops")
            .query("severity", "critical"),
    )
    .await;
    assert!(critical.body["alarms"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn rules_are_listed_changed_with_if_match_and_deleted_and_a_deleted_rules_alarm_clears() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "boiler-3").await;
    let created = create_rule(&table, OWNER, hot_rule("boiler-3")).await;
    let id = created.body["rule"]["ruleId"].as_str().unwrap().to_string();
    let path = format!("/me/rules/{id}");
    let listed = dashboard(&table, ApiRequest::get("/me/rules").caller(OWNER)).await;
    assert_eq!(listed.body["rules"].as_array().unwrap().len(), 1);
    assert_eq!(listed.body["rules"][0], created.body["rule"]);

    // A stale If-Match is a 412 and changes nothing; a missing one a 428.
    let before = table_contents(&table).await;
    let stale = device_updates(
        &table,
        ApiRequest::patch(&path)
            .caller(OWNER)
            .header("if-match", "\"7\"")
            .json(json!({"severity": "critical"})),
    )
    .await;
    assert_eq!(
        (stale.status, stale.error_code()),
        (412, "version_mismatch")
    );
    let unconditional = device_updates(
        &table,
        ApiRequest::patch(&path)
            .caller(OWNER)
            .json(json!({"severity": "critical"})),
    )
    .await;
    assert_eq!(unconditional.status, 428);
    assert_eq!(table_contents(&table).await, before);
    let changed = device_updates(
        &table,
        ApiRequest::patch(&path)
            .caller(OWNER)
            .header("if-match", "\"1\"")
            .json(json!({"severity": "critical", "condition": {"above": 90}})),
    )
    .await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_eq!(changed.body["rule"]["version"], 2);
    assert_eq!(changed.body["rule"]["severity"], "critical");
    assert_eq!(changed.body["rule"]["condition"], json!({"above": 90.0}));
    assert_eq!(changed.body["rule"]["name"], "Boiler too hot", "untouched");

    // The changed condition applies to the next batch (the test's cache holds nothing).
    send(&table, "boiler-3", &token, readings("h", &[(85.0, 100)])).await;
    assert!(
        owner_alarms(&table, OWNER).await.is_empty(),
        "85 is under 90 now"
    );
    send(&table, "boiler-3", &token, readings("h2", &[(95.0, 90)])).await;
    assert_eq!(owner_alarms(&table, OWNER).await[0]["severity"], "critical");

    // Deleting the rule: 204, gone from the list, and its open alarm clears on the next batch.
    let deleted = device_updates(&table, ApiRequest::delete(&path).caller(OWNER)).await;
    assert_eq!(deleted.status, 204);
    let again = device_updates(&table, ApiRequest::delete(&path).caller(OWNER)).await;
    assert_eq!((again.status, again.error_code()), (404, "not_found"));
    send(&table, "boiler-3", &token, readings("h3", &[(99.0, 80)])).await;
    let alarms = owner_alarms(&table, OWNER).await;
    assert_eq!(alarms[0]["state"], "cleared");
    assert!(alarms[0]["clearReading"].is_null());
}

/// Issue 39 item 7: a warm ingest container holds the owner's rules for `rules_cache` (60 s
/// by default). After the rule's deletion it evaluates a hot reading with its cached copy;
/// the alarm it would raise must not be left open by a device that then stays silent (no
/// later batch would clear it). The raise is refused by its transaction's check that the
/// rule still exists: the batch is stored (200) with no alarm, and the container takes the
/// rules the refusal returned, so its next batch raises nothing either.
#[tokio::test]
async fn a_deleted_rules_alarm_never_stays_open_however_warm_the_ingest_container() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "boiler-9").await;
    let created = create_rule(&table, OWNER, hot_rule("boiler-9")).await;
    let id = created.body["rule"]["ruleId"].as_str().unwrap().to_string();
    // Two containers: a warm one (the default 60 s rules cache) that caches the rule with a
    // quiet reading, and a cold one that sees every change at once.
    let warm = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let cold = ingestor(&table);
    let quiet = ingest(
        &warm,
        ingest_request("boiler-9", &token, readings("q", &[(20.0, 300)])),
    )
    .await;
    assert_eq!(quiet.status, 200, "{}", quiet.body);
    let deleted = device_updates(
        &table,
        ApiRequest::delete(&format!("/me/rules/{id}")).caller(OWNER),
    )
    .await;
    assert_eq!(deleted.status, 204);
    // Within the cache window the warm container still holds the deleted rule.
    let hot = ingest(
        &warm,
        ingest_request("boiler-9", &token, readings("w", &[(95.0, 200)])),
    )
    .await;
    assert_eq!(hot.status, 200, "the readings are stored: {}", hot.body);
    let (_, open) = alarm_items(&table_contents(&table).await);
    assert_eq!(
        open, 0,
        "an alarm of the deleted rule {id} is open, and the silent device would keep it open"
    );
    assert!(
        owner_alarms(&table, OWNER)
            .await
            .iter()
            .all(|a| a["state"] != "active"),
        "no active alarm is listed"
    );
    // The same container's next hot batch, and another container's, raise nothing.
    let again = ingest(
        &warm,
        ingest_request("boiler-9", &token, readings("w2", &[(97.0, 100)])),
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.body);
    let other = ingest(
        &cold,
        ingest_request("boiler-9", &token, readings("c", &[(99.0, 50)])),
    )
    .await;
    assert_eq!(other.status, 200, "{}", other.body);
    assert_eq!(
        alarm_items(&table_contents(&table).await),
        (0, 0),
        "no alarm at all"
    );
    let device = dashboard(
        &table,
        ApiRequest::get("/me/devices/boiler-9").caller(OWNER),
    )
    .await;
    assert_eq!(device.status, 200, "{}", device.body);
    assert_eq!(
        device.body["device"]["alarms"]["active"], 0,
        "{}",
        device.body
    );
}

#[tokio::test]
async fn another_owner_gets_404s_and_changes_nothing() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "boiler-4").await;
    register_device(&table, OTHER, "other-1").await;
    let created = create_rule(&table, OWNER, hot_rule("boiler-4")).await;
    let id = created.body["rule"]["ruleId"].as_str().unwrap().to_string();
    send(&table, "boiler-4", &token, readings("h", &[(90.0, 60)])).await;
    let alarm_id = owner_alarms(&table, OWNER).await[0]["alarmId"]
        .as_str()
        .unwrap()
        .to_string();
    let before = table_contents(&table).await;

    let path = format!("/me/rules/{id}");
    let attempts = [
        device_updates(
            &table,
            ApiRequest::patch(&path)
                .caller(OTHER)
                .header("if-match", "1")
                .json(json!({"severity": "minor"})),
        )
        .await,
        device_updates(&table, ApiRequest::delete(&path).caller(OTHER)).await,
        device_updates(
            &table,
            ApiRequest::post(&format!("/me/alarms/{alarm_id}/ack")).caller(OTHER),
        )
        .await,
        dashboard(
            &table,
            ApiRequest::get("/me/devices/boiler-4/alarms").caller(OTHER),
        )
        .await,
        // A rule of OTHER's own scoped to OWNER's device.
        create_rule(&table, OTHER, hot_rule("boiler-4")).await,
    ];
    for a in &attempts {
        assert_eq!(a.status, 404, "{}", a.body);
        assert_eq!(a.error_code(), "not_found");
    }
    assert_eq!(table_contents(&table).await, before, "nothing changed");
    // OTHER's lists hold nothing of OWNER's.
    assert!(owner_alarms(&table, OTHER).await.is_empty());
    let rules = dashboard(&table, ApiRequest::get("/me/rules").caller(OTHER)).await;
    assert_eq!(rules.body["rules"], json!([]));
}

#[tokio::test]
async fn bad_rule_input_is_a_400_naming_the_field_and_changes_nothing() {
    let table = fresh_table().await;
    register_device(&table, OWNER, "boiler-5").await;
    let before = table_contents(&table).await;
    let good = hot_rule("boiler-5");
    let cases: Vec<(&str, Value, &str)> = vec![
        ("severity", json!("urgent"), "severity"),
        ("condition", json!({"above": "hot"}), "condition.above"),
        ("condition", json!({"between": [1, 2]}), "condition"),
        (
            "condition",
            json!({"outside": [80, 5]}),
            "condition.outside",
        ),
        ("scope", json!({"deviceId": "a#b"}), "scope.deviceId"),
        ("scope", json!({"owner": "x"}), "scope"),
        ("eventType", json!(""), "eventType"),
        ("forSeconds", json!(-5), "forSeconds"),
        ("remindEverySeconds", json!(1), "remindEverySeconds"),
        ("clear", json!({"below": 85}), "clear"),
        ("name", json!(null), "name"),
        ("shape", json!("circle"), "shape"),
        // Valid JSON numbers DynamoDB cannot store (main: a 500).
        ("condition", json!({"above": 1e200}), "condition.above"),
        ("condition", json!({"below": -1e-200}), "condition.below"),
        (
            "condition",
            json!({"outside": [1e-131, 1e126]}),
            "condition.outside",
        ),
        ("condition", json!({"equals": 1e200}), "condition.equals"),
        ("clear", json!({"below": -1e200}), "clear.below"),
    ];
    for (field, value, named) in cases {
        let mut body = good.clone();
        body[field] = value.clone();
        let a = create_rule(&table, OWNER, body).await;
        assert_eq!(
            (a.status, a.error_code(), a.error_field()),
            (400, "invalid_request", named),
            "{field}={value}: {}",
            a.body
        );
    }
    let not_json = device_updates(
        &table,
        ApiRequest::post("/me/rules")
            .caller(OWNER)
            .body("{not json"),
    )
    .await;
    assert_eq!(not_json.status, 400);
    assert_eq!(table_contents(&table).await, before);

    // The owner's limit: a 409 past it, nothing written.
    for i in 0..shared::model::alarm::MAX_RULES_PER_OWNER {
        let mut body = good.clone();
        body["name"] = json!(format!("rule {i}"));
        assert_eq!(create_rule(&table, OWNER, body).await.status, 201);
    }
    let full = table_contents(&table).await;
    let over = create_rule(&table, OWNER, good).await;
    assert_eq!((over.status, over.error_code()), (409, "rule_limit"));
    assert_eq!(table_contents(&table).await, full);
}

/// Issue 30 item 7: a clear condition that holds for some value where the condition holds
/// (compared as sets of numbers, whatever their kinds) is refused, on create and on change.
#[tokio::test]
async fn a_clear_that_holds_where_the_condition_holds_is_a_400_naming_clear() {
    let table = fresh_table().await;
    register_device(&table, OWNER, "boiler-6").await;
    let kept = create_rule(&table, OWNER, hot_rule("boiler-6")).await;
    assert_eq!(kept.status, 201, "{}", kept.body);
    let rule_id = kept.body["rule"]["ruleId"].as_str().unwrap().to_string();
    let before = table_contents(&table).await;
    for (condition, clear) in [
        // -5 is outside [0, 10] and below 100: it would raise and clear on every reading.
        (json!({"outside": [0, 10]}), json!({"below": 100})),
        (json!({"outside": [0, 10]}), json!({"above": -20})),
        (json!({"above": 80}), json!({"above": 90})),
        (json!({"below": 5}), json!({"outside": [10, 20]})),
        (json!({"equals": 3}), json!({"equals": 3})),
    ] {
        let mut body = hot_rule("boiler-6");
        body["condition"] = condition.clone();
        body["clear"] = clear.clone();
        let created = create_rule(&table, OWNER, body).await;
        let patched = device_updates(
            &table,
            ApiRequest::patch(&format!("/me/rules/{rule_id}"))
                .caller(OWNER)
                .header("if-match", "\"1\"")
                .json(json!({"condition": condition, "clear": clear})),
        )
        .await;
        for a in [created, patched] {
            assert_eq!(
                (a.status, a.error_code(), a.error_field()),
                (400, "invalid_request", "clear"),
                "{condition} / {clear}: {}",
                a.body
            );
        }
    }
    assert_eq!(table_contents(&table).await, before, "nothing changed");
}

/// Write units of one request by DynamoDB's rules: single-item writes once, the items a
/// transaction wrote (the live state and alarms of a transition's batch) twice.
fn billed(before: &pricing::Snapshot, after: &pricing::Snapshot, transacted: bool) -> u64 {
    pricing::changes(before, after)
        .iter()
        .map(|c| {
            let item = c.after.as_ref().or(c.before.as_ref());
            let in_transaction = transacted
                && item.and_then(entity_type).is_some_and(|t| {
                    matches!(
                        t,
                        EntityType::DeviceState | EntityType::Alarm | EntityType::OpenAlarm
                    )
                });
            let kind = if in_transaction {
                WriteKind::Transaction
            } else {
                WriteKind::Single
            };
            c.write_units(kind)
        })
        .sum()
}

/// Whether a request wrote an alarm (a transition). Not "it sent a transaction": summary
/// flushes go in the state's transaction too (issue 38), alarm or not.
fn wrote_an_alarm(before: &pricing::Snapshot, after: &pricing::Snapshot) -> bool {
    pricing::changes(before, after).iter().any(|c| {
        c.after
            .as_ref()
            .or(c.before.as_ref())
            .and_then(EntityType::of)
            .is_some_and(|t| matches!(t, EntityType::Alarm | EntityType::OpenAlarm))
    })
}

/// One reading in a hundred over 80, the next back under 75.
fn spike(i: usize) -> f64 {
    if i % 100 == 50 {
        90.0
    } else {
        20.0
    }
}

/// Write units per event of `device`: four 100-event batches, then 200 single events, one
/// reading in a hundred a spike. Returns (batched, single, batches and requests that wrote a
/// transition).
async fn units_per_event(table: &FleetTable, device: &str, token: &str) -> (f64, f64, usize) {
    let snapshot = || async { pricing::snapshot(table).await.expect("snapshot") };
    let (mut units, mut events, mut transitions) = (0, 0, 0);
    // Nothing else writes to the table between two sends: one send's `after` is the next
    // one's `before` (a Scan of the whole table each, so one per send, not two).
    let mut before = snapshot().await;
    for batch in 0..4usize {
        let body: Vec<Value> = (0..100)
            .map(|i| {
                json!({"type": "temperature", "value": spike(i),
                    "at": ago(4000 - (batch * 100 + i) as i64)})
            })
            .collect();
        let a = send(table, device, token, Value::Array(body)).await;
        let transacted = a.used.count("TransactWriteItems") > 0;
        let after = snapshot().await;
        transitions += usize::from(wrote_an_alarm(&before, &after));
        units += billed(&before, &after, transacted);
        events += 100;
        before = after;
    }
    let batched = units as f64 / events as f64;
    let (mut units, mut requests) = (0, 0);
    for i in 0..200usize {
        let body =
            json!([{"type": "temperature", "value": spike(i), "at": ago(3000 - i as i64 * 10)}]);
        let a = send(table, device, token, body).await;
        let transacted = a.used.count("TransactWriteItems") > 0;
        let after = snapshot().await;
        transitions += usize::from(wrote_an_alarm(&before, &after));
        units += billed(&before, &after, transacted);
        requests += 1;
        before = after;
    }
    (batched, units as f64 / f64::from(requests), transitions)
}

#[tokio::test]
async fn alarms_keep_write_units_per_event_within_the_goals_at_one_percent_crossings() {
    let table = fresh_table().await;
    let quiet = register_device(&table, OTHER, "meter-0").await;
    let token = register_device(&table, OWNER, "meter-9").await;
    let rule = json!({"name": "spike", "eventType": "temperature",
        "scope": {"deviceType": "thermostat"}, "condition": {"above": 80},
        "clear": {"below": 75}, "severity": "warning"});
    assert_eq!(create_rule(&table, OWNER, rule).await.status, 201);

    let (batched_without, single_without, none) = units_per_event(&table, "meter-0", &quiet).await;
    assert_eq!(none, 0, "no rule, no transition");
    let (batched, single, transitions) = units_per_event(&table, "meter-9", &token).await;
    eprintln!(
        "write units per event, 1% crossings: 100-event batches {batched_without:.3} without alarms, {batched:.3} with; single events {single_without:.3} without, {single:.3} with"
    );
    // Each batch raises and clears its spike in one transaction; each single spike raises and
    // the next reading clears it.
    assert_eq!(transitions, 4 + 2 * 2);
    assert!(batched <= 1.5, "{batched}");
    assert!(single <= 3.0, "{single}");
    let alarms = owner_alarms(&table, OWNER).await;
    assert_eq!(alarms.len(), 6, "4 batched and 2 single spikes: {alarms:?}");
}

/// A cold rule on `device`: below 10, cleared above 15.
fn cold_rule(device: &str) -> Value {
    json!({"name": "Boiler too cold", "eventType": "temperature",
        "scope": {"deviceId": device}, "condition": {"below": 10},
        "clear": {"above": 15}, "severity": "minor"})
}

/// `count` readings alternating 90 and 0, one second apart: each one crosses both the hot
/// and the cold rule. `last_high` makes the batch end on 90.
fn flapping(prefix: &str, count: usize, oldest_ago: i64, last_high: bool) -> Value {
    let shift = usize::from(last_high != (count % 2 == 1));
    let values: Vec<(f64, i64)> = (0..count)
        .map(|i| {
            let high = (i + shift) % 2 == 0;
            (if high { 90.0 } else { 0.0 }, oldest_ago - i as i64)
        })
        .collect();
    readings(prefix, &values)
}

fn stored_events(items: &[shared::model::schema::Item]) -> usize {
    items
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::Event))
        .count()
}

#[tokio::test]
async fn a_flapping_sensor_is_stored_and_answered_200_and_its_alarms_net_out_per_batch() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "boiler-1").await;
    for rule in [hot_rule("boiler-1"), cold_rule("boiler-1")] {
        assert_eq!(create_rule(&table, OWNER, rule).await.status, 201);
    }
    // 100 readings alternating across both rules' thresholds (main answered 503
    // partially_stored to this and to every resend: 200 transitions in one transaction).
    let batch = flapping("flap", 100, 1000, false);
    let a = send(&table, "boiler-1", &token, batch.clone()).await;
    assert_eq!(a.body["accepted"], 100, "{}", a.body);
    assert_eq!(a.used.count("TransactWriteItems"), 1, "{:?}", a.used);
    let items = table_contents(&table).await;
    assert_eq!(stored_events(&items), 100);
    // Hot: raised at the first 90 and cleared by the last 0; cold: raised at the first 0, open.
    assert_eq!(alarm_items(&items), (2, 1));
    let alarms = owner_alarms(&table, OWNER).await;
    let states: Vec<(&str, &str)> = alarms
        .iter()
        .map(|a| {
            (
                a["ruleName"].as_str().unwrap(),
                a["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [("Boiler too cold", "active"), ("Boiler too hot", "cleared")]
    );
    let hot = &alarms[1];
    assert_eq!(
        hot["reading"]["value"], 90.0,
        "raised by the first crossing"
    );
    assert_eq!(hot["clearReading"]["value"], 0.0, "cleared by the last one");
    // The dashboard shows the device as the batch left it: its live state moved.
    let d = dashboard(&table, ApiRequest::get("/me/dashboard").caller(OWNER)).await;
    assert_eq!(
        d.body["devices"][0]["alarms"],
        json!({"active": 1, "highestSeverity": "minor"})
    );
    // A resend is a replay: 200, nothing changes.
    let before = table_contents(&table).await;
    let again = send(&table, "boiler-1", &token, batch).await;
    assert_eq!(again.body["accepted"], 100);
    assert_eq!(table_contents(&table).await, before);

    // Four readings sharing one time, flapping (main: two raises under one alarm key, which a
    // transaction refuses): one alarm per rule, all four stored.
    let at = ago(500);
    let same: Value = [(90.0, "s-1"), (0.0, "s-2"), (91.0, "s-3"), (1.0, "s-4")]
        .iter()
        .map(|(v, id)| json!({"id": id, "type": "temperature", "value": v, "at": at}))
        .collect();
    let a = send(&table, "boiler-1", &token, same).await;
    assert_eq!(a.body["accepted"], 4, "{}", a.body);
    let items = table_contents(&table).await;
    assert_eq!(stored_events(&items), 104);
    assert!(
        items
            .iter()
            .filter(|i| entity_type(i) == Some(EntityType::Alarm))
            .count()
            <= 4
    );
}

#[tokio::test]
async fn the_worst_batch_every_rule_flapping_is_one_transaction_within_its_limits() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "boiler-1").await;
    let limit = shared::model::alarm::MAX_RULES_PER_OWNER;
    for i in 0..limit {
        let mut rule = hot_rule("boiler-1");
        rule["name"] = json!(format!("hot {i}"));
        rule["condition"] = json!({"above": 50 + i as i64});
        rule["clear"] = json!({"below": 40});
        assert_eq!(create_rule(&table, OWNER, rule).await.status, 201);
    }
    // Every rule raised, then a batch that clears each, raises each again and ends open:
    // per rule a clear, a new alarm and its pointer, the most a rule can take.
    send(&table, "boiler-1", &token, readings("hot", &[(90.0, 2000)])).await;
    assert_eq!(alarm_items(&table_contents(&table).await), (limit, limit));
    let snapshot = || async { pricing::snapshot(&table).await.expect("snapshot") };
    let before = snapshot().await;
    let a = send(
        &table,
        "boiler-1",
        &token,
        flapping("flap", 100, 1500, true),
    )
    .await;
    assert_eq!(a.body["accepted"], 100, "{}", a.body);
    assert_eq!(a.used.count("TransactWriteItems"), 1, "{:?}", a.used);
    let units = billed(&before, &snapshot().await, true);
    let items = table_contents(&table).await;
    assert_eq!(stored_events(&items), 101);
    assert_eq!(
        alarm_items(&items),
        (2 * limit, limit),
        "one new open alarm per rule"
    );
    eprintln!(
        "worst batch: {limit} rules flapping on 100 readings, 1 TransactWriteItems of {} actions (the state, 3 per rule, the rules' check), {units} write units in all ({:.2} per event)",
        2 + 3 * limit,
        units as f64 / 100.0
    );
}
