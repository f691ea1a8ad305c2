//! Rollouts that one owner, one device or one run cannot wedge (issue 30, item 3), on
//! DynamoDB Local: a merge that would break the document contract is a per-device failure,
//! not a write; a failing device or rollout is recorded and every other owner's rollout goes
//! on; the whole running list is read and owners take turns a page at a time; an owner's
//! running rollouts are capped; an owner's rollouts are applied in creation order; a stale
//! run's checkpoint never moves a rollout's position back; a rollout cancelled mid-way keeps
//! what it changed and changes no more.

use std::time::{Duration, Instant};

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::desired_state::DesiredStateItem;
use shared::model::entities::rollout::RolloutItem;
use shared::model::entities::{Entity, ItemKey};
use shared::model::ids::RolloutId;
use shared::model::timestamp::Timestamp;
use shared::model::twin::{RolloutStatus, MAX_DOCUMENT_BYTES, MAX_RUNNING_ROLLOUTS};
use shared::ops::twin::rollout::{self, RolloutRun};
use shared::FleetTable;

/// Registers `device` of `kind` with `tags` for `owner`.
async fn register(table: &FleetTable, owner: &str, device: &str, kind: &str, tags: &[&str]) {
    let a = device_updates(
        table,
        ApiRequest::post("/me/devices")
            .caller(owner)
            .json(json!({"deviceId": device, "name": "Meter", "type": kind, "tags": tags})),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
}

async fn start(table: &FleetTable, owner: &str, body: Value) -> Answer {
    device_updates(
        table,
        ApiRequest::post("/me/rollouts").caller(owner).json(body),
    )
    .await
}

/// Starts a rollout that must be accepted; returns its id.
async fn started(table: &FleetTable, owner: &str, body: Value) -> String {
    let a = start(table, owner, body).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    a.body["rollout"]["rolloutId"].as_str().unwrap().to_string()
}

async fn progress(table: &FleetTable, owner: &str, rollout_id: &str) -> Value {
    let a = dashboard(
        table,
        ApiRequest::get(&format!("/me/rollouts/{rollout_id}")).caller(owner),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    a.body["rollout"].clone()
}

async fn desired(table: &FleetTable, owner: &str, device: &str) -> Value {
    let a = dashboard(
        table,
        ApiRequest::get(&format!("/me/devices/{device}")).caller(owner),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    a.body["device"]["twin"].clone()
}

/// `POST /me/rollouts/{rolloutId}/cancel`, served by the firmware function.
async fn cancel(table: &FleetTable, owner: &str, rollout_id: &str) -> Answer {
    let state = firmware::FirmwareState {
        table: table.clone(),
        images: fleet_testkit::moto_server::firmware_images_from_env(),
    };
    let (response, used) = metered(Box::pin(
        gateway(firmware::router(state)).handle(
            ApiRequest::post(&format!("/me/rollouts/{rollout_id}/cancel"))
                .caller(owner)
                .build(),
        ),
    ))
    .await;
    answer(response, used)
}

/// One worker run with time to spare.
async fn run(table: &FleetTable) -> RolloutRun {
    Box::pin(rollout::advance_rollouts(
        table,
        Instant::now() + Duration::from_secs(120),
    ))
    .await
    .expect("a worker run never fails for a device's or an owner's sake")
}

#[tokio::test]
async fn a_merge_that_would_break_the_document_contract_is_a_device_failure_and_not_written() {
    let table = fresh_table().await;
    for id in ["big-1", "small-1", "small-2"] {
        register(&table, "grow-owner", id, "meter", &[]).await;
    }
    // big-1 already holds a document of 3,000 bytes of its own, within the contract.
    let own = json!({"blob": "x".repeat(3000)});
    let a = device_updates(
        &table,
        ApiRequest::put("/me/devices/big-1/desired")
            .caller("grow-owner")
            .header("If-Match", "0")
            .json(json!({ "desired": own })),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    // The rollout's patch is within the contract too; merged into big-1's it is not.
    let id = started(
        &table,
        "grow-owner",
        json!({"type": "meter", "desired": {"notes": "y".repeat(2000)}}),
    )
    .await;
    let done = run(&table).await;
    assert_eq!(
        (done.devices, done.devices_failed, done.finished),
        (2, 1, 1),
        "{done:?}"
    );

    // big-1 is left as it was (version 1, its own document): never past the contract.
    let twin = desired(&table, "grow-owner", "big-1").await;
    assert_eq!(twin["desiredVersion"], 1, "{twin}");
    assert_eq!(twin["desired"], own);
    let stored = item(
        &table,
        &ItemKey::Desired {
            user: key::user("grow-owner"),
            device: key::device_id("big-1"),
        },
    )
    .await
    .unwrap();
    let stored = DesiredStateItem::from_item(stored).unwrap();
    assert!(stored.document.len() <= MAX_DOCUMENT_BYTES);
    // The others got it.
    for small in ["small-1", "small-2"] {
        let twin = desired(&table, "grow-owner", small).await;
        assert_eq!(twin["desired"]["notes"].as_str().unwrap().len(), 2000);
    }
    // The owner sees which device and why on the rollout.
    let shown = progress(&table, "grow-owner", &id).await;
    api_doc::api_doc()
        .check_response(
            "GET /me/rollouts/{rolloutId}",
            200,
            &json!({ "rollout": shown }),
        )
        .unwrap();
    assert_eq!(shown["status"], "done", "{shown}");
    assert_eq!(shown["devicesUpdated"], 2);
    assert_eq!(shown["devicesFailed"], 1);
    assert_eq!(shown["failures"][0]["deviceId"], "big-1", "{shown}");
    let reason = shown["failures"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("at most 4096 bytes"), "{reason}");
}

#[tokio::test]
async fn a_failing_device_is_recorded_and_no_owners_rollout_stops_another_owners() {
    let table = fresh_table().await;
    // The first owner on the running list has a device whose desired document cannot be read
    // (stored by an older release, or damaged): merging into it fails.
    register(&table, "aa-broken", "broken-1", "meter", &[]).await;
    register(&table, "aa-broken", "fine-1", "meter", &[]).await;
    register(&table, "zz-after", "after-1", "meter", &[]).await;
    let a = device_updates(
        &table,
        ApiRequest::put("/me/devices/broken-1/desired")
            .caller("aa-broken")
            .header("If-Match", "0")
            .json(json!({"desired": {"a": 1}})),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    put_entity(
        &table,
        &DesiredStateItem {
            user_id: key::user("aa-broken"),
            device_id: key::device_id("broken-1"),
            document: "{not json".into(),
            version: 1,
            updated_at: Timestamp::now(),
        },
    )
    .await;
    let broken = started(
        &table,
        "aa-broken",
        json!({"type": "meter", "desired": {"mode": "eco"}}),
    )
    .await;
    let after = started(
        &table,
        "zz-after",
        json!({"type": "meter", "desired": {"mode": "eco"}}),
    )
    .await;

    let done = run(&table).await;
    assert_eq!((done.finished, done.errors), (2, 0), "{done:?}");
    let twin = desired(&table, "zz-after", "after-1").await;
    assert_eq!(twin["desired"], json!({"mode": "eco"}));
    let twin = desired(&table, "aa-broken", "fine-1").await;
    assert_eq!(twin["desired"], json!({"mode": "eco"}));
    let shown = progress(&table, "aa-broken", &broken).await;
    assert_eq!(
        (
            &shown["status"],
            &shown["devicesUpdated"],
            &shown["devicesFailed"]
        ),
        (&json!("done"), &json!(1), &json!(1)),
        "{shown}"
    );
    assert_eq!(shown["failures"][0]["deviceId"], "broken-1");
    assert_eq!(progress(&table, "zz-after", &after).await["status"], "done");
}

#[tokio::test]
async fn every_running_rollout_is_read_and_owners_take_turns_a_page_at_a_time() {
    let table = fresh_table().await;
    // 30 owners with a rollout each: more than the 25 the worker used to list.
    for i in 0..30 {
        let owner = format!("turns-{i:02}");
        register(&table, &owner, &format!("t{i:02}-meter"), "meter", &[]).await;
        started(
            &table,
            &owner,
            json!({"type": "meter", "desired": {"interval": 60}}),
        )
        .await;
    }
    // The first owner on the list also has a rollout of 51 devices: two pages.
    for d in 0..51 {
        register(
            &table,
            "a-large",
            &format!("large-{d:03}"),
            "meter",
            &["feeder"],
        )
        .await;
    }
    let large = started(
        &table,
        "a-large",
        json!({"tag": "feeder", "desired": {"interval": 900}}),
    )
    .await;
    let last = started(
        &table,
        "turns-29",
        json!({"type": "meter", "desired": {"tariff": "night"}}),
    )
    .await;

    let done = run(&table).await;
    assert_eq!(done.owners, 31, "{done:?}");
    assert_eq!((done.finished, done.pages), (32, 33), "{done:?}");
    for i in 0..30 {
        let twin = desired(&table, &format!("turns-{i:02}"), &format!("t{i:02}-meter")).await;
        assert_eq!(twin["desired"]["interval"], 60, "turns-{i:02}: {twin}");
    }
    // The large rollout's second page came in a second turn, after every other owner's
    // first page: the 30 small owners all finished before it did.
    let large_done = progress(&table, "a-large", &large).await;
    let large_done =
        Timestamp::parse_field("at", large_done["finishedAt"].as_str().unwrap()).unwrap();
    assert_eq!(progress(&table, "turns-29", &last).await["status"], "done");
    for i in 0..29 {
        let owner = format!("turns-{i:02}");
        let twin = desired(&table, &owner, &format!("t{i:02}-meter")).await;
        let changed =
            Timestamp::parse_field("at", twin["desiredUpdatedAt"].as_str().unwrap()).unwrap();
        assert!(
            changed < large_done,
            "{owner} waited for another owner's second page"
        );
    }
}

#[tokio::test]
async fn an_owners_running_rollouts_are_capped_with_a_409_naming_the_limit() {
    let table = fresh_table().await;
    register(&table, "capped", "c-1", "meter", &[]).await;
    for i in 0..MAX_RUNNING_ROLLOUTS {
        started(
            &table,
            "capped",
            json!({"type": "meter", "desired": {"step": i}}),
        )
        .await;
    }
    let before = table_contents(&table).await;
    let refused = start(
        &table,
        "capped",
        json!({"type": "meter", "desired": {"step": 99}}),
    )
    .await;
    assert_eq!(refused.status, 409, "{:?}", refused.body);
    assert_eq!(refused.body["error"]["code"], "rollout_limit");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&MAX_RUNNING_ROLLOUTS.to_string()),
        "{message}"
    );
    assert_eq!(table_contents(&table).await, before, "nothing written");
    api_doc::api_doc()
        .check_response("POST /me/rollouts", 409, &refused.body)
        .unwrap();
    // Another owner is not affected by this one's count.
    register(&table, "uncapped", "u-1", "meter", &[]).await;
    started(
        &table,
        "uncapped",
        json!({"type": "meter", "desired": {"a": 1}}),
    )
    .await;
    // Once they finish, the owner may start again.
    run(&table).await;
    started(
        &table,
        "capped",
        json!({"type": "meter", "desired": {"step": 99}}),
    )
    .await;
}

/// Issue 39 item 8: the cap is a conditional write, not a count read before the start, so
/// racing starts cannot all pass it: of `MAX_RUNNING_ROLLOUTS + 6` concurrent starts exactly
/// `MAX_RUNNING_ROLLOUTS` run and the rest are the 409 with its body; once the worker ends
/// them the owner starts again, and the slots the ends gave back are exactly the cap.
#[tokio::test]
async fn racing_starts_never_run_more_than_the_cap() {
    let table = fresh_table().await;
    register(&table, "racing", "r-1", "meter", &[]).await;
    let starts = (0..MAX_RUNNING_ROLLOUTS + 6).map(|i| {
        let table = table.clone();
        tokio::spawn(async move {
            start(
                &table,
                "racing",
                json!({"type": "meter", "desired": {"step": i}}),
            )
            .await
        })
    });
    let answers: Vec<Answer> = futures::future::join_all(starts)
        .await
        .into_iter()
        .map(|joined| joined.unwrap())
        .collect();
    let accepted = answers.iter().filter(|a| a.status == 202).count();
    for refused in answers.iter().filter(|a| a.status != 202) {
        assert_eq!(refused.status, 409, "{:?}", refused.body);
        assert_eq!(refused.body["error"]["code"], "rollout_limit");
        api_doc::api_doc()
            .check_response("POST /me/rollouts", 409, &refused.body)
            .unwrap();
    }
    let running = rollout_items(&table)
        .await
        .into_iter()
        .filter(|r| r.status == RolloutStatus::Running)
        .count();
    assert_eq!(
        (accepted, running),
        (MAX_RUNNING_ROLLOUTS, MAX_RUNNING_ROLLOUTS),
        "accepted and running rollouts of {} racing starts",
        MAX_RUNNING_ROLLOUTS + 6
    );
    // Every end gives its slot back: after the worker, the cap is free again, whole.
    run(&table).await;
    for i in 0..MAX_RUNNING_ROLLOUTS {
        started(
            &table,
            "racing",
            json!({"type": "meter", "desired": {"again": i}}),
        )
        .await;
    }
    let over = start(
        &table,
        "racing",
        json!({"type": "meter", "desired": {"x": 1}}),
    )
    .await;
    assert_eq!(over.status, 409, "{:?}", over.body);
}

/// Every rollout item in the table.
async fn rollout_items(table: &FleetTable) -> Vec<RolloutItem> {
    table_contents(table)
        .await
        .into_iter()
        .filter(|item| {
            item.get("entityType")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|t| t == "rollout")
        })
        .map(|item| RolloutItem::from_item(item).unwrap())
        .collect()
}

#[tokio::test]
async fn an_owners_rollouts_are_applied_in_creation_order_so_the_newest_value_wins() {
    let table = fresh_table().await;
    register(&table, "ordered", "o-1", "meter", &["site"]).await;
    let mut ids = Vec::new();
    for i in 0..MAX_RUNNING_ROLLOUTS {
        // Alternating targets that both reach the device.
        let target = if i % 2 == 0 {
            json!({"type": "meter", "desired": {"mode": i}})
        } else {
            json!({"tag": "site", "desired": {"mode": i}})
        };
        ids.push(started(&table, "ordered", target).await);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ids, "rollout ids sort by creation");
    let done = run(&table).await;
    assert_eq!(done.finished, MAX_RUNNING_ROLLOUTS as u32, "{done:?}");
    let twin = desired(&table, "ordered", "o-1").await;
    assert_eq!(
        twin["desired"]["mode"],
        MAX_RUNNING_ROLLOUTS - 1,
        "the newest rollout's value: {twin}"
    );
}

#[tokio::test]
async fn a_stale_runs_checkpoint_is_a_no_op_and_never_moves_the_position_back() {
    let table = fresh_table().await;
    for id in ["p-1", "p-2", "p-3"] {
        register(&table, "overlap", id, "meter", &["row"]).await;
    }
    let id = started(
        &table,
        "overlap",
        json!({"tag": "row", "desired": {"on": true}}),
    )
    .await;
    let key = ItemKey::Rollout {
        user: key::user("overlap"),
        rollout: RolloutId::parse(id.clone()).unwrap(),
    };
    let read = || async { RolloutItem::from_item(item(&table, &key).await.unwrap()).unwrap() };
    // Two runs read the rollout before its first page.
    let first_run = read().await;
    let second_run = first_run.clone();
    // The second run is faster: two devices done, its position moves to p-2.
    let mut ahead = second_run.clone();
    ahead.position = Some(key::device_id("p-2"));
    ahead.devices_updated = 2;
    assert!(rollout::checkpoint(&table, &ahead, None).await.unwrap());
    // The first run's checkpoint of p-1, from the same start, comes late: nothing changes.
    let mut behind = first_run;
    behind.position = Some(key::device_id("p-1"));
    behind.devices_updated = 1;
    assert!(!rollout::checkpoint(&table, &behind, None).await.unwrap());
    let now = read().await;
    assert_eq!(now.position, Some(key::device_id("p-2")));
    assert_eq!(now.devices_updated, 2);
    assert_eq!(now.status, RolloutStatus::Running);
    // The next run resumes after p-2.
    let done = run(&table).await;
    assert_eq!((done.devices, done.finished), (1, 1), "{done:?}");
    let twin = desired(&table, "overlap", "p-3").await;
    assert_eq!(twin["desired"], json!({"on": true}));
}

/// A desired-state rollout cancelled after the worker's first page: the devices it changed
/// keep their value, the rest are never changed, a late checkpoint of a run that read it
/// before the cancel changes nothing, and its slot is back.
#[tokio::test]
async fn a_rollout_cancelled_mid_way_keeps_what_it_changed_and_changes_no_more() {
    let table = fresh_table().await;
    for id in ["m-1", "m-2", "m-3"] {
        register(&table, "midway", id, "meter", &["row"]).await;
    }
    let id = started(
        &table,
        "midway",
        json!({"tag": "row", "desired": {"on": true}}),
    )
    .await;
    let key = ItemKey::Rollout {
        user: key::user("midway"),
        rollout: RolloutId::parse(id.clone()).unwrap(),
    };
    let read = || async { RolloutItem::from_item(item(&table, &key).await.unwrap()).unwrap() };
    // The worker's first page reached m-1: its value written, its position checkpointed.
    let a = device_updates(
        &table,
        ApiRequest::put("/me/devices/m-1/desired")
            .caller("midway")
            .header("if-match", "0")
            .json(json!({"desired": {"on": true}})),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let mut page = read().await;
    page.position = Some(key::device_id("m-1"));
    page.devices_updated = 1;
    assert!(rollout::checkpoint(&table, &page, None).await.unwrap());
    let in_flight = read().await;

    let a = cancel(&table, "midway", &id).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.used.requests(), 3, "{:?}", a.used.operations);
    assert_eq!(a.body["rollout"]["status"], "cancelled");
    assert_eq!(a.body["rollout"]["devicesUpdated"], 1);

    // A run that read it before the cancel cannot move it on.
    let mut late = in_flight.clone();
    late.position = Some(key::device_id("m-2"));
    late.devices_updated = 2;
    assert!(
        !rollout::checkpoint(&table, &late, in_flight.position.as_ref())
            .await
            .unwrap()
    );
    // The next run has nothing of it to do.
    let done = run(&table).await;
    assert_eq!((done.devices, done.finished), (0, 0), "{done:?}");
    assert_eq!(
        desired(&table, "midway", "m-1").await["desired"],
        json!({"on": true})
    );
    for device in ["m-2", "m-3"] {
        let twin = desired(&table, "midway", device).await;
        assert!(
            twin["desired"].get("on").is_none(),
            "{device} was changed after the cancel: {twin}"
        );
    }
    let now = read().await;
    assert_eq!(now.status, RolloutStatus::Cancelled);
    assert_eq!(now.devices_updated, 1);
    // Its slot is back: the owner may run the cap again.
    for i in 0..MAX_RUNNING_ROLLOUTS {
        started(
            &table,
            "midway",
            json!({"type": "meter", "desired": {"step": i}}),
        )
        .await;
    }
}

/// Issue 30, item 9: the rollouts run in a function of their own, so the daily report's role
/// never writes a device's desired state or live state (its policy has no transaction, no
/// update, no single-item read), and the one-minute rollout schedule invokes the worker.
#[test]
fn the_daily_reports_role_writes_no_device_and_the_rollout_schedule_is_the_workers_own() {
    let actions = |function: &str| -> std::collections::BTreeSet<String> {
        template().function_definitions[function]
            .policy
            .iter()
            .flat_map(|s| s.actions.iter().cloned())
            .collect()
    };
    let report = actions("DailyAnalyticsFunction");
    for write in [
        "dynamodb:TransactWriteItems",
        "dynamodb:UpdateItem",
        "dynamodb:GetItem",
    ] {
        assert!(!report.contains(write), "the daily report may {write}");
    }
    assert!(actions("RolloutWorkerFunction").contains("dynamodb:TransactWriteItems"));
    let text = std::fs::read_to_string(fleet_testkit::template::default_template_path()).unwrap();
    let doc: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    let schedules = |function: &str| -> Vec<String> {
        doc["Resources"][function]["Properties"]["Events"]
            .as_mapping()
            .map(|events| {
                events
                    .values()
                    .filter_map(|e| e["Properties"]["Schedule"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(schedules("RolloutWorkerFunction"), ["rate(1 minute)"]);
    assert_eq!(schedules("DailyAnalyticsFunction"), ["cron(15 0 * * ? *)"]);
}
