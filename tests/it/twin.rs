//! The device twin (issue 25) end to end on DynamoDB Local: desired state delivered in the
//! answer to the device's next batch and not again once reported, commands delivered,
//! acknowledged and listed as succeeded, expiry, replays, the bounded queue, a fleet-wide
//! change reaching every device of a tag and of a type, the cost of a batch with and without
//! pending work, isolation and bad input.

use std::sync::Arc;
use std::time::Duration;

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::reported_state::ReportedStateItem;
use shared::model::entities::EntityType;
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;
use shared::model::twin::MAX_OPEN_COMMANDS;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::ops::pattern::BudgetScale;
use shared::ops::twin::rollout;
use shared::FleetTable;

const OWNER: &str = "twin-owner";
const OTHER: &str = "twin-other";

fn ingestor(table: &FleetTable) -> Arc<Ingestor> {
    Arc::new(Ingestor::new(table.clone(), IngestConfig::default()))
}

/// A fresh ingestor per request: a device's batches reach a different container each time
/// (the normal case on AWS), so nothing comes from a warm cache.
async fn batch(table: &FleetTable, device: &str, token: &str, body: Value) -> Answer {
    ingest(
        &ingestor(table),
        ApiRequest::post(&format!("/devices/{device}/events"))
            .header("Authorization", &format!("Bearer {token}"))
            .json(body),
    )
    .await
}

fn reading(id: &str) -> Value {
    json!([{"id": id, "type": "temperature", "value": 21.5, "at": ago(5)}])
}

async fn sync(table: &FleetTable, device: &str, token: &str, body: Value) -> Answer {
    ingest(
        &ingestor(table),
        ApiRequest::post(&format!("/devices/{device}/sync"))
            .header("Authorization", &format!("Bearer {token}"))
            .json(body),
    )
    .await
}

async fn put_desired(
    table: &FleetTable,
    owner: &str,
    device: &str,
    version: u64,
    desired: Value,
) -> Answer {
    device_updates(
        table,
        ApiRequest::put(&format!("/me/devices/{device}/desired"))
            .caller(owner)
            .header("If-Match", &version.to_string())
            .json(json!({ "desired": desired })),
    )
    .await
}

async fn post_command(table: &FleetTable, owner: &str, device: &str, body: Value) -> Answer {
    device_updates(
        table,
        ApiRequest::post(&format!("/me/devices/{device}/commands"))
            .caller(owner)
            .json(body),
    )
    .await
}

async fn commands(table: &FleetTable, owner: &str, device: &str) -> Answer {
    dashboard(
        table,
        ApiRequest::get(&format!("/me/devices/{device}/commands")).caller(owner),
    )
    .await
}

async fn get_device(table: &FleetTable, owner: &str, device: &str) -> Answer {
    dashboard(
        table,
        ApiRequest::get(&format!("/me/devices/{device}")).caller(owner),
    )
    .await
}

#[tokio::test]
async fn a_desired_change_reaches_the_device_in_its_next_batch_and_not_again_once_reported() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "thermo-1").await;
    // Nothing pending: the answer is what it always was.
    let a = batch(
        &table,
        "thermo-1",
        &token,
        json!({"events": reading("e-0")}),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(a.body.get("desired").is_none() && a.body.get("commands").is_none());

    // Two changes while the device sleeps: it gets the newest, never a stale one.
    let set = put_desired(&table, OWNER, "thermo-1", 0, json!({"interval": 60})).await;
    assert_eq!(set.status, 200, "{:?}", set.body);
    assert_eq!(set.body["desired"]["version"], 1);
    assert_eq!(set.headers["etag"], "\"1\"");
    let set = put_desired(
        &table,
        OWNER,
        "thermo-1",
        1,
        json!({"interval": 300, "led": {"on": false}}),
    )
    .await;
    assert_eq!(set.status, 200, "{:?}", set.body);

    let a = batch(
        &table,
        "thermo-1",
        &token,
        json!({"events": reading("e-1")}),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(
        a.body["desired"],
        json!({"version": 2, "state": {"interval": 300, "led": {"on": false}}})
    );
    // Not reported yet: it comes again (at least once).
    let a = batch(
        &table,
        "thermo-1",
        &token,
        json!({"events": reading("e-2")}),
    )
    .await;
    assert_eq!(a.body["desired"]["version"], 2);

    // The owner sees desired, the delta and the versions.
    let d = get_device(&table, OWNER, "thermo-1").await;
    assert_eq!(d.body["device"]["twin"]["desiredVersion"], 2);
    assert_eq!(d.body["device"]["twin"]["inSync"], false);
    assert_eq!(
        d.body["device"]["twin"]["delta"],
        json!({"interval": 300, "led": {"on": false}})
    );

    // The device reports with its next batch: nothing comes any more.
    let a = batch(
        &table,
        "thermo-1",
        &token,
        json!({"events": reading("e-3"), "reported": {"version": 2, "state": {"interval": 300, "led": {"on": true}}}}),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(a.body.get("desired").is_none(), "{:?}", a.body);
    let a = batch(
        &table,
        "thermo-1",
        &token,
        json!({"events": reading("e-4")}),
    )
    .await;
    assert!(a.body.get("desired").is_none(), "{:?}", a.body);
    assert_eq!(a.used.operations.get("Query"), None);

    let d = get_device(&table, OWNER, "thermo-1").await;
    let twin = &d.body["device"]["twin"];
    assert_eq!(twin["reportedVersion"], 2);
    assert_eq!(twin["inSync"], true);
    assert_eq!(
        twin["reported"],
        json!({"interval": 300, "led": {"on": true}})
    );
    assert_eq!(
        twin["delta"],
        json!({"led": {"on": false}}),
        "what the device did not apply"
    );
    // The dashboard shows the versions.
    let dash = dashboard(&table, ApiRequest::get("/me/dashboard").caller(OWNER)).await;
    let shown = &dash.body["devices"][0]["twin"];
    assert_eq!(shown["desiredVersion"], 2);
    assert_eq!(shown["reportedVersion"], 2);
    assert!(
        shown.get("desired").is_none(),
        "documents only on the device's own read"
    );

    // A stale If-Match is a 412 and changes nothing.
    let before = table_contents(&table).await;
    let stale = put_desired(&table, OWNER, "thermo-1", 1, json!({"interval": 5})).await;
    assert_eq!(stale.status, 412, "{:?}", stale.body);
    assert_eq!(stale.error_code(), "version_mismatch");
    assert_eq!(table_contents(&table).await, before);
    // No If-Match: 428.
    let missing = device_updates(
        &table,
        ApiRequest::put("/me/devices/thermo-1/desired")
            .caller(OWNER)
            .json(json!({"desired": {}})),
    )
    .await;
    assert_eq!(missing.status, 428);
}

#[tokio::test]
async fn a_command_is_delivered_acknowledged_and_shown_as_succeeded_and_a_replay_acknowledges_nothing_twice(
) {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "valve-1").await;
    let queued = post_command(
        &table,
        OWNER,
        "valve-1",
        json!({"name": "open-valve", "parameters": {"percent": 40}, "expiresInSeconds": 600}),
    )
    .await;
    assert_eq!(queued.status, 201, "{:?}", queued.body);
    assert_eq!(queued.body["command"]["status"], "queued");
    let id = queued.body["command"]["commandId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(id, "cmd-1");

    let a = batch(&table, "valve-1", &token, json!({"events": reading("e-1")})).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["commands"][0]["commandId"], id);
    assert_eq!(a.body["commands"][0]["name"], "open-valve");
    assert_eq!(a.body["commands"][0]["parameters"], json!({"percent": 40}));
    let listed = commands(&table, OWNER, "valve-1").await;
    assert_eq!(listed.body["commands"][0]["status"], "delivered");

    // Its answer was lost: the next request gets it again (at least once).
    let a = batch(&table, "valve-1", &token, json!({"events": reading("e-2")})).await;
    assert_eq!(a.body["commands"][0]["commandId"], id);

    // Acknowledged in a later request.
    let ack = json!({"events": reading("e-3"), "acks": [{"commandId": id, "status": "succeeded", "result": {"opened": 40}}]});
    let a = batch(&table, "valve-1", &token, ack.clone()).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["acknowledged"], json!([id]));
    assert!(
        a.body.get("commands").is_none(),
        "finished: not delivered again {:?}",
        a.body
    );
    let listed = commands(&table, OWNER, "valve-1").await;
    let shown = &listed.body["commands"][0];
    assert_eq!(shown["status"], "succeeded");
    assert_eq!(shown["result"], json!({"opened": 40}));
    let finished_at = shown["finishedAt"].clone();

    // The same batch again (a replay): nothing is acknowledged twice, nothing changes.
    let before = table_contents(&table).await;
    let again = batch(&table, "valve-1", &token, ack).await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert!(again.body.get("acknowledged").is_none(), "{:?}", again.body);
    assert_eq!(table_contents(&table).await, before);
    assert_eq!(
        commands(&table, OWNER, "valve-1").await.body["commands"][0]["finishedAt"],
        finished_at
    );

    // A failure is reported as such.
    let second = post_command(&table, OWNER, "valve-1", json!({"name": "reboot"})).await;
    let id2 = second.body["command"]["commandId"]
        .as_str()
        .unwrap()
        .to_string();
    let s = sync(&table, "valve-1", &token, json!({})).await;
    assert_eq!(s.body["commands"][0]["commandId"], id2);
    let s = sync(
        &table,
        "valve-1",
        &token,
        json!({"acks": [{"commandId": id2, "status": "failed"}]}),
    )
    .await;
    assert_eq!(s.body["acknowledged"], json!([id2]));
    assert_eq!(
        commands(&table, OWNER, "valve-1").await.body["commands"][0]["status"],
        "failed"
    );
}

#[tokio::test]
async fn an_expired_command_is_never_delivered() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "valve-2").await;
    let short = post_command(
        &table,
        OWNER,
        "valve-2",
        json!({"name": "reboot", "expiresInSeconds": 1}),
    )
    .await;
    assert_eq!(short.status, 201, "{:?}", short.body);
    let long = post_command(
        &table,
        OWNER,
        "valve-2",
        json!({"name": "calibrate", "expiresInSeconds": 3600}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let a = batch(&table, "valve-2", &token, json!({"events": reading("e-1")})).await;
    let delivered: Vec<&str> = a.body["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commandId"].as_str().unwrap())
        .collect();
    assert_eq!(
        delivered,
        vec![long.body["command"]["commandId"].as_str().unwrap()]
    );
    let listed = commands(&table, OWNER, "valve-2").await;
    let statuses: Vec<&str> = listed.body["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["delivered", "expired"], "newest first");
    // An acknowledgement of the expired command (never delivered) takes no effect.
    let id = short.body["command"]["commandId"].as_str().unwrap();
    let s = sync(
        &table,
        "valve-2",
        &token,
        json!({"acks": [{"commandId": id, "status": "succeeded"}]}),
    )
    .await;
    assert_eq!(s.status, 200);
    assert!(s.body.get("acknowledged").is_none(), "{:?}", s.body);
    assert_eq!(
        commands(&table, OWNER, "valve-2").await.body["commands"][1]["status"],
        "expired"
    );
}

#[tokio::test]
async fn the_queue_is_bounded_with_a_clear_409_and_frees_up_as_commands_finish() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "valve-3").await;
    for i in 0..MAX_OPEN_COMMANDS {
        let a = post_command(
            &table,
            OWNER,
            "valve-3",
            json!({"name": format!("step-{i}")}),
        )
        .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
    }
    let before = table_contents(&table).await;
    let full = post_command(&table, OWNER, "valve-3", json!({"name": "one-more"})).await;
    assert_eq!(full.status, 409, "{:?}", full.body);
    assert_eq!(full.error_code(), "command_queue_full");
    assert_eq!(
        table_contents(&table).await,
        before,
        "a refused command changes nothing"
    );
    // The device gets them all, then finishes the first two: there is room again.
    let s = sync(&table, "valve-3", &token, json!({})).await;
    assert_eq!(
        s.body["commands"].as_array().unwrap().len() as u64,
        MAX_OPEN_COMMANDS
    );
    let acks: Vec<Value> = (1..=2)
        .map(|i| json!({"commandId": format!("cmd-{i}"), "status": "succeeded"}))
        .collect();
    let s = sync(&table, "valve-3", &token, json!({"acks": acks})).await;
    assert_eq!(s.body["acknowledged"], json!(["cmd-1", "cmd-2"]));
    assert_eq!(
        s.body["commands"].as_array().unwrap().len() as u64,
        MAX_OPEN_COMMANDS - 2
    );
    let more = post_command(&table, OWNER, "valve-3", json!({"name": "one-more"})).await;
    assert_eq!(more.status, 201, "{:?}", more.body);
}

#[tokio::test]
async fn a_fleet_wide_change_reaches_every_device_of_a_tag_and_of_a_type_in_paced_pages() {
    let table = fresh_table().await;
    let mut tokens = Vec::new();
    // 60 meters tagged `feeder-7` (more than a page), 3 other devices.
    for i in 0..60 {
        let id = format!("meter-{i:03}");
        let a = device_updates(
            &table,
            ApiRequest::post("/me/devices").caller(OWNER).json(
                json!({"deviceId": id, "name": "Meter", "type": "power-meter", "tags": ["feeder-7"]}),
            ),
        )
        .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        tokens.push((id, a.body["token"].as_str().unwrap().to_string()));
    }
    for id in ["thermo-a", "thermo-b", "thermo-c"] {
        register_device(&table, OWNER, id).await;
    }
    // One meter already has a setting of its own, which the change keeps.
    let own = put_desired(&table, OWNER, "meter-007", 0, json!({"tariff": "night"})).await;
    assert_eq!(own.status, 200);

    let started = device_updates(
        &table,
        ApiRequest::post("/me/rollouts")
            .caller(OWNER)
            .json(json!({"tag": "feeder-7", "desired": {"interval": 900}})),
    )
    .await;
    assert_eq!(started.status, 202, "{:?}", started.body);
    assert!(
        started.used.requests() <= 2,
        "starting is two requests (the owner's running count, one transaction): {:?}",
        started.used
    );
    let rollout_id = started.body["rollout"]["rolloutId"]
        .as_str()
        .unwrap()
        .to_string();

    // The scheduled worker (AP-T7, the rollout-worker function's schedule), held to
    // its budget, its writes priced by DynamoDB's rules from the items it changed.
    let before = fleet_testkit::pricing::snapshot(&table).await.unwrap();
    let (run, used) = metered(Box::pin(rollout::advance_rollouts(
        &table,
        std::time::Instant::now() + Duration::from_secs(120),
    )))
    .await;
    let after = fleet_testkit::pricing::snapshot(&table).await.unwrap();
    let priced = fleet_testkit::pricing::case_write_units(
        &used,
        &fleet_testkit::pricing::changes(&before, &after),
    );
    let run = run.unwrap();
    assert_eq!((run.devices, run.finished), (60, 1), "{run:?}");
    assert_eq!(run.pages, 2, "60 devices in pages of 50");
    PatternId::AdvanceRollouts
        .definition()
        .check(
            &used,
            &BudgetScale {
                shards: 1,
                pages: run.pages,
                devices: 60,
                ..BudgetScale::one()
            },
        )
        .unwrap_or_else(|v| panic!("{v}"));
    println!(
        "twin cost: rollout of 60 devices: {} requests {:?}, {:.1} RCU, {priced} WCU by DynamoDB's rules ({:.2} requests, {:.3} RCU, {:.2} WCU per device)",
        used.requests(),
        used.operations,
        used.read_units,
        f64::from(used.requests()) / 60.0,
        used.read_units / 60.0,
        priced as f64 / 60.0,
    );
    // Beside 4 units per device, the rollout's own bookkeeping: its checkpoints and its end,
    // a transaction of the running entry's deletion and the owner's count (issue 39 item 8).
    assert!(
        priced <= 4 * 60 + 11,
        "4 units per device (a transaction of two small items): {priced}"
    );

    let progress = dashboard(
        &table,
        ApiRequest::get(&format!("/me/rollouts/{rollout_id}")).caller(OWNER),
    )
    .await;
    assert_eq!(
        progress.body["rollout"]["status"], "done",
        "{:?}",
        progress.body
    );
    assert_eq!(progress.body["rollout"]["devicesUpdated"], 60);

    // Every meter gets it in the answer to its next batch; the others get nothing.
    for (id, token) in &tokens {
        let a = batch(&table, id, token, json!({"events": reading("e-1")})).await;
        let state = &a.body["desired"]["state"];
        assert_eq!(state["interval"], 900, "{id}: {:?}", a.body);
        if id == "meter-007" {
            assert_eq!(
                state["tariff"], "night",
                "a merge patch keeps the device's own settings"
            );
        }
    }
    let d = get_device(&table, OWNER, "thermo-a").await;
    assert!(d.body["device"].get("twin").is_none(), "{:?}", d.body);

    // A second run has nothing to do: one Query.
    let (_, used) = metered(Box::pin(rollout::advance_rollouts(
        &table,
        std::time::Instant::now() + Duration::from_secs(60),
    )))
    .await;
    assert_eq!(used.requests(), 1, "{:?}", used.operations);

    // By type: the three thermostats, through the function as its schedule invokes it.
    let started = device_updates(
        &table,
        ApiRequest::post("/me/rollouts")
            .caller(OWNER)
            .json(json!({"type": "thermostat", "desired": {"setpoint": 20}})),
    )
    .await;
    assert_eq!(started.status, 202);
    let run = rollout_worker::handle(
        &table,
        &fleet_testkit::moto_server::firmware_images_from_env(),
        json!({"detail-type": "Scheduled Event", "source": "aws.events"}),
        std::time::Instant::now() + Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(run["rollouts"]["devices"], 3, "{run}");
    let d = get_device(&table, OWNER, "thermo-b").await;
    assert_eq!(d.body["device"]["twin"]["desired"], json!({"setpoint": 20}));
}

/// The figures of the closing note: requests and units of a batch of 100 and of a single event
/// with nothing pending and with a pending desired change and command, every request from a
/// cold container (the production case). Printed, and held to the budgets.
#[tokio::test]
async fn ingest_costs_nothing_more_when_nothing_is_pending() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "meter-x").await;
    let events = |n: usize, tag: usize| -> Value {
        Value::Array(
            (0..n)
                .map(|i| {
                    // The newest readings of the device, as a meter sends them.
                    let at = shared::model::timestamp::Timestamp::now().plus_millis(i as i64 - n as i64);
                    json!({"id": format!("c{tag}-{i}"), "type": "power", "value": i, "at": at.to_string()})
                })
                .collect(),
        )
    };
    // A first batch so the state exists in its usual shape.
    batch(&table, "meter-x", &token, json!({"events": events(10, 9)})).await;
    let budget = PatternId::IngestEvents.definition();
    let mut figures = Vec::new();
    for (case, (label, n, pending)) in [
        ("batch of 100, nothing pending", 100, false),
        ("single event, nothing pending", 1, false),
        ("batch of 100, desired change + command pending", 100, true),
        ("single event, desired change + command pending", 1, true),
    ]
    .into_iter()
    .enumerate()
    {
        // Every reading newer than the last batch's (an older one is recomputed from the raw
        // readings: a Query, issue 32).
        tokio::time::sleep(std::time::Duration::from_millis(n as u64 + 10)).await;
        if pending {
            let version = get_device(&table, OWNER, "meter-x").await.body["device"]["twin"]
                ["desiredVersion"]
                .as_u64()
                .unwrap_or(0);
            assert_eq!(
                put_desired(&table, OWNER, "meter-x", version, json!({"interval": n}))
                    .await
                    .status,
                200
            );
            assert_eq!(
                post_command(&table, OWNER, "meter-x", json!({"name": "reboot"}))
                    .await
                    .status,
                201
            );
        }
        let a = batch(
            &table,
            "meter-x",
            &token,
            json!({"events": events(n, case)}),
        )
        .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_eq!(
            a.body.get("desired").is_some(),
            pending,
            "{label}: {:?}",
            a.body
        );
        let twin = if pending { 3 } else { 0 }; // desired GetItem, commands Query, delivered mark
        budget
            .check(
                &a.used,
                &BudgetScale {
                    batch_items: n as u32,
                    twin,
                    ..BudgetScale::one()
                },
            )
            .unwrap_or_else(|v| panic!("{label}: {v}"));
        if !pending {
            assert_eq!(a.used.operations.get("Query"), None, "{label}");
            assert_eq!(
                a.used.requests(),
                (n as u32).div_ceil(25) + 3,
                "{label}: the registration, the live state, the event writes and the state's update, nothing more: {:?}",
                a.used.operations
            );
            let per_event = a.used.write_units / n as f64;
            assert!(
                per_event <= if n == 1 { 3.0 } else { 1.5 },
                "{label}: {per_event}"
            );
        }
        figures.push(format!(
            "{label}: {} requests {:?}, {:.1} WCU ({:.3} per event), {:.1} RCU",
            a.used.requests(),
            a.used.operations,
            a.used.write_units,
            a.used.write_units / n as f64,
            a.used.read_units
        ));
        if pending {
            // Reported and acknowledged, so the next case starts with nothing pending.
            let version = a.body["desired"]["version"].as_u64().unwrap();
            let acks: Vec<Value> = a.body["commands"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| json!({"commandId": c["commandId"], "status": "succeeded"}))
                .collect();
            let done = sync(
                &table,
                "meter-x",
                &token,
                json!({"reported": {"version": version, "state": {}}, "acks": acks}),
            )
            .await;
            assert_eq!(done.status, 200, "{:?}", done.body);
        }
    }
    // A device with nothing to send and nothing pending: one cheap request.
    let s = sync(&table, "meter-x", &token, json!({})).await;
    assert_eq!(s.body, json!({}));
    figures.push(format!(
        "sync, nothing pending: {} requests {:?}, {:.1} RCU",
        s.used.requests(),
        s.used.operations,
        s.used.read_units
    ));
    assert_eq!(
        s.used.requests(),
        2,
        "registration and live state: {:?}",
        s.used.operations
    );
    for line in figures {
        println!("twin cost: {line}");
    }
}

#[tokio::test]
async fn another_users_device_is_a_404_on_every_new_route_and_changes_nothing() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "mine-1").await;
    register_device(&table, OTHER, "theirs-1").await;
    post_command(&table, OTHER, "theirs-1", json!({"name": "reboot"})).await;
    let before = table_contents(&table).await;
    let answers = [
        put_desired(&table, OWNER, "theirs-1", 0, json!({"a": 1})).await,
        post_command(&table, OWNER, "theirs-1", json!({"name": "reboot"})).await,
        commands(&table, OWNER, "theirs-1").await,
        put_desired(&table, OWNER, "nobody", 0, json!({"a": 1})).await,
        commands(&table, OWNER, "nobody").await,
    ];
    for a in answers {
        assert_eq!(a.status, 404, "{:?}", a.body);
    }
    let rollout = dashboard(
        &table,
        ApiRequest::get("/me/rollouts/r-nothing").caller(OWNER),
    )
    .await;
    assert_eq!(rollout.status, 404);
    assert_eq!(table_contents(&table).await, before);
    // A device token acknowledges only its own device's commands: `cmd-1` of another device
    // is not its own (its own partition has none).
    let s = sync(
        &table,
        "mine-1",
        &token,
        json!({"acks": [{"commandId": "cmd-1", "status": "succeeded"}]}),
    )
    .await;
    assert_eq!(s.status, 200);
    assert!(s.body.get("acknowledged").is_none(), "{:?}", s.body);
    assert_eq!(table_contents(&table).await, before);
    // And its token is nobody else's.
    let s = sync(&table, "theirs-1", &token, json!({})).await;
    assert_eq!(s.status, 401);
    let listed = commands(&table, OTHER, "theirs-1").await;
    assert_eq!(listed.body["commands"][0]["status"], "queued");
}

#[tokio::test]
async fn malformed_or_oversized_documents_are_a_400_naming_the_field_and_change_nothing() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "d-1").await;
    let before = table_contents(&table).await;
    let deep = json!({"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}});
    let cases = [
        (put_desired(&table, OWNER, "d-1", 0, json!([1, 2])).await, "desired"),
        (put_desired(&table, OWNER, "d-1", 0, deep.clone()).await, "desired.a.b.c.d.e"),
        (put_desired(&table, OWNER, "d-1", 0, json!({"blob": "x".repeat(5000)})).await, "desired"),
        (
            device_updates(
                &table,
                ApiRequest::put("/me/devices/d-1/desired")
                    .caller(OWNER)
                    .header("If-Match", "v1")
                    .json(json!({"desired": {}})),
            )
            .await,
            "If-Match",
        ),
        (post_command(&table, OWNER, "d-1", json!({"name": "re#boot"})).await, "name"),
        (post_command(&table, OWNER, "d-1", json!({"name": "x", "parameters": 3})).await, "parameters"),
        (post_command(&table, OWNER, "d-1", json!({"name": "x", "expiresInSeconds": 0})).await, "expiresInSeconds"),
        (
            post_command(&table, OWNER, "d-1", json!({"name": "x", "parameters": {"p": "y".repeat(2000)}})).await,
            "parameters",
        ),
        (
            device_updates(
                &table,
                ApiRequest::post("/me/rollouts").caller(OWNER).json(json!({"desired": {"a": 1}})),
            )
            .await,
            "tag",
        ),
        (
            batch(&table, "d-1", &token, json!({"events": reading("e"), "reported": {"version": 1, "state": deep}})).await,
            "reported.state.a.b.c.d.e",
        ),
        (
            batch(&table, "d-1", &token, json!({"events": reading("e"), "acks": [{"commandId": "7", "status": "succeeded"}]})).await,
            "acks[0].commandId",
        ),
        (
            sync(&table, "d-1", &token, json!({"acks": [{"commandId": "cmd-1", "status": "done"}]})).await,
            "acks[0].status",
        ),
    ];
    for (a, field) in cases {
        assert_eq!(a.status, 400, "{field}: {:?}", a.body);
        assert_eq!(a.error_field(), field, "{:?}", a.body);
    }
    assert_eq!(table_contents(&table).await, before);
}

/// Issue 30 item 5: a device registered again under the id of a deleted one starts with an
/// empty twin: the owner never sees the old device's desired or reported document, its
/// commands or a delta against them, and the new device's first report (version 1) is stored
/// although the old one had reported version 2, even when a report of the old device that was
/// in flight at its deletion lands after it.
#[tokio::test]
async fn a_device_registered_again_under_a_deleted_ones_id_starts_with_an_empty_twin() {
    let table = fresh_table().await;
    let token = register_device(&table, OWNER, "thermo-9").await;
    assert_eq!(
        put_desired(&table, OWNER, "thermo-9", 0, json!({"interval": 60}))
            .await
            .status,
        200
    );
    assert_eq!(
        put_desired(&table, OWNER, "thermo-9", 1, json!({"interval": 300}))
            .await
            .status,
        200
    );
    let queued = post_command(
        &table,
        OWNER,
        "thermo-9",
        json!({"name": "reboot", "parameters": {}, "expiresInSeconds": 600}),
    )
    .await;
    assert_eq!(queued.status, 201, "{:?}", queued.body);
    let s = sync(
        &table,
        "thermo-9",
        &token,
        json!({"reported": {"version": 2, "state": {"interval": 300}}}),
    )
    .await;
    assert_eq!(s.status, 200, "{:?}", s.body);
    let old = get_device(&table, OWNER, "thermo-9").await;
    assert_eq!(
        old.body["device"]["twin"]["reported"],
        json!({"interval": 300})
    );

    let deleted = device_updates(
        &table,
        ApiRequest::delete("/me/devices/thermo-9").caller(OWNER),
    )
    .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    let documents = |items: &[shared::model::schema::Item]| {
        items
            .iter()
            .filter(|i| {
                matches!(
                    entity_type(i),
                    Some(EntityType::DesiredState | EntityType::ReportedState)
                )
            })
            .count()
    };
    assert_eq!(
        documents(&table_contents(&table).await),
        0,
        "the deletion removed the twin's documents"
    );

    let token = register_device(&table, OWNER, "thermo-9").await;
    // A report of the old device in flight at its deletion lands now (a warm ingest container
    // still held its registration): version 5, from before the new registration.
    put_entity(
        &table,
        &ReportedStateItem {
            user_id: key::user(OWNER),
            device_id: shared::model::ids::DeviceId::parse("thermo-9").unwrap(),
            document: r#"{"interval":999}"#.to_string(),
            version: 5,
            reported_at: Timestamp::now().plus_seconds(-2),
        },
    )
    .await;
    let fresh = get_device(&table, OWNER, "thermo-9").await;
    assert_eq!(fresh.status, 200, "{:?}", fresh.body);
    assert!(
        fresh.body["device"].get("twin").is_none(),
        "nothing of the old twin: {}",
        fresh.body
    );
    let listed = commands(&table, OWNER, "thermo-9").await;
    assert_eq!(listed.body["commands"], json!([]), "{:?}", listed.body);

    // The new device's own desired state: the delta is against nothing it reported.
    let set = put_desired(&table, OWNER, "thermo-9", 0, json!({"mode": "eco"})).await;
    assert_eq!(set.status, 200, "{:?}", set.body);
    let d = get_device(&table, OWNER, "thermo-9").await;
    let twin = &d.body["device"]["twin"];
    assert_eq!(twin["desired"], json!({"mode": "eco"}));
    assert!(twin.get("reported").is_none(), "{twin}");
    assert_eq!(twin["delta"], json!({"mode": "eco"}));
    assert_eq!(twin["openCommands"], 0);

    // Its first report, version 1, is stored and shown.
    let s = sync(
        &table,
        "thermo-9",
        &token,
        json!({"reported": {"version": 1, "state": {"mode": "eco"}}}),
    )
    .await;
    assert_eq!(s.status, 200, "{:?}", s.body);
    let d = get_device(&table, OWNER, "thermo-9").await;
    let twin = &d.body["device"]["twin"];
    assert_eq!(twin["reported"], json!({"mode": "eco"}), "{twin}");
    assert_eq!(twin["reportedVersion"], 1);
    assert_eq!(twin["inSync"], true);
    assert_eq!(twin["delta"], json!({}));
}
