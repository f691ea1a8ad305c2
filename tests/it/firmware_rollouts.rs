//! Staged firmware rollouts (issue 40 item 2), on DynamoDB Local and moto's S3: `POST
//! /me/rollouts` with a `firmwareId` takes only a `ready` package of the caller's own whose
//! device type fits the target, records its plan (stages, soak, success and abort rules) and
//! lists it on the running list naming its package, so the package cannot be deleted while
//! it runs (409 `firmware_in_use`); the worker changes no desired state for it and it never
//! delays the owner's later desired-state changes; another owner's package is a 404 and bad
//! input a 400 naming the field, with the table unchanged; the requests are within
//! `shared::ops::firmware::budgets`. `POST /me/rollouts/{rolloutId}/cancel` ends one: it is
//! `cancelled`, gives its running slot back exactly once (however many cancels race) and no
//! longer holds its package; another owner's is a 404 with the table unchanged.

use std::time::{Duration, Instant};

use firmware::FirmwareState;
use fleet_testkit::moto_server::{create_versioned_bucket, local_firmware_images, MotoServer};
use fleet_tests::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use shared::model::twin::MAX_RUNNING_ROLLOUTS;
use shared::ops::firmware::budgets::{
    FirmwareBudget, CANCEL_ROLLOUT, DELETE_FIRMWARE, START_FIRMWARE_ROLLOUT,
};
use shared::ops::twin::rollout::{self, RolloutRun};

const ALICE: &str = "user-alice";
const BOB: &str = "user-bob";

async fn setup() -> (FirmwareState, MotoServer) {
    let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
    let images = local_firmware_images(moto.endpoint(), "firmware-images");
    create_versioned_bucket(&images).await.unwrap();
    let state = FirmwareState {
        table: fresh_table().await,
        images,
    };
    (state, moto)
}

async fn firmware_route(state: &FirmwareState, request: ApiRequest) -> Answer {
    let (response, used) = metered(Box::pin(
        gateway(firmware::router(state.clone())).handle(request.build()),
    ))
    .await;
    answer(response, used)
}

async fn rollouts(state: &FirmwareState, request: ApiRequest) -> Answer {
    device_updates_on(&state.table, &state.images, request).await
}

/// The answer used exactly `requests` DynamoDB requests, each of an operation its budget
/// allows, within the budget.
fn spent(budget: &FirmwareBudget, a: &Answer, requests: u32) {
    for name in a.used.operations.keys() {
        assert!(
            budget.operations.iter().any(|op| op.name() == name),
            "{}: issued {name}, allowed {:?}",
            budget.route,
            budget.operations
        );
    }
    assert!(a.used.requests() <= budget.max_requests, "{}", budget.route);
    assert_eq!(
        a.used.requests(),
        requests,
        "{}: {:?}",
        budget.route,
        a.used.operations
    );
}

/// A package of `owner` for `device_type`; uploaded and checked (so `ready`) when `upload`.
async fn package(state: &FirmwareState, owner: &str, device_type: &str, upload: bool) -> String {
    let bytes: Vec<u8> = (0..3_000u32).map(|i| (i % 251) as u8).collect();
    let sha256: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let a = firmware_route(
        state,
        ApiRequest::post("/me/firmware").caller(owner).json(json!({
            "deviceType": device_type, "version": "2.0.0", "sha256": sha256, "size": bytes.len()
        })),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let id = a.body["firmwareId"].as_str().unwrap().to_string();
    if upload {
        let put = reqwest::Client::new()
            .put(a.body["uploadUrl"].as_str().unwrap())
            .body(bytes)
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 200);
        let a = firmware_route(
            state,
            ApiRequest::get(&format!("/me/firmware/{id}")).caller(owner),
        )
        .await;
        assert_eq!(a.body["status"], "ready", "{:?}", a.body);
    }
    id
}

fn staged(firmware_id: &str) -> Value {
    json!({
        "target": {"type": "thermostat"},
        "firmwareId": firmware_id,
        "stages": [1, 5, 25, 100],
        "soakSeconds": 600,
        "healthyCheckIns": 3,
        "successPercent": 90,
        "abort": {"failurePercent": 10, "minFinished": 20}
    })
}

async fn start(state: &FirmwareState, owner: &str, body: Value) -> Answer {
    rollouts(
        state,
        ApiRequest::post("/me/rollouts").caller(owner).json(body),
    )
    .await
}

async fn cancel(state: &FirmwareState, owner: &str, rollout_id: &str) -> Answer {
    firmware_route(
        state,
        ApiRequest::post(&format!("/me/rollouts/{rollout_id}/cancel")).caller(owner),
    )
    .await
}

async fn run(state: &FirmwareState) -> RolloutRun {
    Box::pin(rollout::advance_rollouts(
        &state.table,
        Instant::now() + Duration::from_secs(120),
    ))
    .await
    .expect("a worker run")
}

#[tokio::test]
async fn a_ready_package_is_rolled_out_by_plan_and_cannot_be_deleted_while_it_runs() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;

    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    spent(&START_FIRMWARE_ROLLOUT, &a, 3);
    let rollout = &a.body["rollout"];
    assert_eq!(rollout["status"], "running");
    assert_eq!(rollout["target"], json!({"type": "thermostat"}));
    assert!(rollout.get("desired").is_none(), "{rollout}");
    assert_eq!(
        rollout["firmware"],
        json!({
            "firmwareId": id, "version": "2.0.0", "deviceType": "thermostat",
            "stages": [1, 5, 25, 100], "soakSeconds": 600, "healthyCheckIns": 3,
            "successPercent": 90, "abort": {"failurePercent": 10, "minFinished": 20}
        })
    );
    let rollout_id = rollout["rolloutId"].as_str().unwrap();
    let shown = dashboard(
        &state.table,
        ApiRequest::get(&format!("/me/rollouts/{rollout_id}")).caller(ALICE),
    )
    .await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.body["rollout"], *rollout);

    // Defaults fill what is not given; a tag target takes any tag.
    let a = start(
        &state,
        ALICE,
        json!({"target": {"tag": "north"}, "firmwareId": id}),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    assert_eq!(
        a.body["rollout"]["firmware"]["stages"],
        json!([1, 5, 25, 100])
    );
    assert_eq!(a.body["rollout"]["firmware"]["successPercent"], 95);

    // In use: a 409, nothing deleted (the package, its running-list lookup: 2 requests).
    let delete = || {
        firmware_route(
            &state,
            ApiRequest::delete(&format!("/me/firmware/{id}")).caller(ALICE),
        )
    };
    let a = delete().await;
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert_eq!(a.body["error"]["code"], "firmware_in_use");
    spent(&DELETE_FIRMWARE, &a, 2);
    let a = firmware_route(
        &state,
        ApiRequest::get(&format!("/me/firmware/{id}")).caller(ALICE),
    )
    .await;
    assert_eq!(a.body["status"], "ready");

    // Another package of the owner's is not held by it.
    let other = package(&state, ALICE, "thermostat", false).await;
    let a = firmware_route(
        &state,
        ApiRequest::delete(&format!("/me/firmware/{other}")).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    spent(&DELETE_FIRMWARE, &a, 3);
}

#[tokio::test]
async fn the_worker_changes_no_desired_state_for_it_and_later_changes_are_not_delayed() {
    let (state, _moto) = setup().await;
    for device in ["t-1", "t-2"] {
        let a = rollouts(
            &state,
            ApiRequest::post("/me/devices").caller(ALICE).json(
                json!({"deviceId": device, "name": "T", "type": "thermostat", "tags": ["north"]}),
            ),
        )
        .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
    }
    let id = package(&state, ALICE, "thermostat", true).await;
    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let firmware_rollout = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    // A desired-state change started after it.
    let a = start(
        &state,
        ALICE,
        json!({"tag": "north", "desired": {"interval": 60}}),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let change = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();

    let done = run(&state).await;
    assert_eq!(done.devices, 2, "{done:?}");
    let progress = |rollout: String| {
        let table = state.table.clone();
        async move {
            dashboard(
                &table,
                ApiRequest::get(&format!("/me/rollouts/{rollout}")).caller(ALICE),
            )
            .await
            .body["rollout"]
                .clone()
        }
    };
    assert_eq!(progress(change).await["status"], "done");
    let firmware = progress(firmware_rollout).await;
    assert_eq!(firmware["status"], "running");
    assert_eq!(firmware["devicesUpdated"], 0);
    for device in ["t-1", "t-2"] {
        let a = dashboard(
            &state.table,
            ApiRequest::get(&format!("/me/devices/{device}")).caller(ALICE),
        )
        .await;
        assert_eq!(
            a.body["device"]["twin"]["desired"],
            json!({"interval": 60}),
            "only the desired-state change wrote: {:?}",
            a.body
        );
    }
}

#[tokio::test]
async fn only_a_ready_package_of_the_callers_own_and_of_the_targets_type_starts() {
    let (state, _moto) = setup().await;
    let ready = package(&state, ALICE, "thermostat", true).await;
    let pending = package(&state, ALICE, "thermostat", false).await;
    let before = table_contents(&state.table).await;

    // Another owner's package names nothing for BOB, and neither does an unknown one.
    let a = start(&state, BOB, staged(&ready)).await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    let a = start(&state, ALICE, staged("f-000000000000001-0000000000000000")).await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    // Not checked yet.
    let a = start(&state, ALICE, staged(&pending)).await;
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert_eq!(a.body["error"]["code"], "firmware_not_ready");
    // Another device type.
    let mut body = staged(&ready);
    body["target"] = json!({"type": "meter"});
    let a = start(&state, ALICE, body).await;
    assert_eq!(a.status, 400, "{:?}", a.body);
    assert_eq!(a.error_field(), "target.type");
    assert_eq!(
        table_contents(&state.table).await,
        before,
        "nothing written"
    );
    // BOB still has nothing of ALICE's to delete, and her package is not in use.
    let a = firmware_route(
        &state,
        ApiRequest::delete(&format!("/me/firmware/{ready}")).caller(BOB),
    )
    .await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    assert_eq!(
        table_contents(&state.table).await,
        before,
        "nothing written"
    );
}

#[tokio::test]
async fn bad_firmware_rollout_input_is_a_400_naming_the_field_and_the_table_is_unchanged() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let good = staged(&id);
    let with = |field: &str, value: Value| {
        let mut body = good.clone();
        body[field] = value;
        body
    };
    let without = |field: &str| {
        let mut body = good.clone();
        body.as_object_mut().unwrap().remove(field);
        body
    };
    let cases = [
        (with("stages", json!([])), "stages"),
        (with("stages", json!([1, 5, 25])), "stages"),
        (with("stages", json!([5, 1, 100])), "stages"),
        (with("stages", json!([5, 5, 100])), "stages"),
        (with("stages", json!([0, 100])), "stages"),
        (with("stages", json!([50.5, 100])), "stages"),
        (with("stages", json!([1, 120])), "stages"),
        (with("stages", json!("1,100")), "stages"),
        (
            with("stages", json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100])),
            "stages",
        ),
        (with("soakSeconds", json!(-1)), "soakSeconds"),
        (
            with("soakSeconds", json!(30 * 24 * 3600 + 1)),
            "soakSeconds",
        ),
        (with("soakSeconds", json!("60")), "soakSeconds"),
        (with("healthyCheckIns", json!(101)), "healthyCheckIns"),
        (with("healthyCheckIns", json!(1.5)), "healthyCheckIns"),
        (with("successPercent", json!(0)), "successPercent"),
        (with("successPercent", json!(101)), "successPercent"),
        (
            with("abort", json!({"failurePercent": 0})),
            "abort.failurePercent",
        ),
        (
            with("abort", json!({"failurePercent": 101})),
            "abort.failurePercent",
        ),
        (
            with("abort", json!({"minFinished": 0})),
            "abort.minFinished",
        ),
        (
            with("abort", json!({"minFinished": 1_000_001})),
            "abort.minFinished",
        ),
        (with("abort", json!({"other": 1})), "abort.other"),
        (with("abort", json!([10, 20])), "abort"),
        (with("firmwareId", json!("f-1")), "firmwareId"),
        (with("firmwareId", json!(7)), "firmwareId"),
        (with("desired", json!({"a": 1})), "desired"),
        (with("target", json!({"tag": "a", "type": "b"})), "target"),
        (with("target", json!({})), "target"),
        (with("target", json!("thermostat")), "target"),
        (with("target", json!({"type": "a#b"})), "target.type"),
        (with("target", json!({"tag": ""})), "target.tag"),
        (with("tag", json!("north")), "target"),
        (without("target"), "tag"),
        // The stage plan belongs to a firmware rollout only.
        (
            json!({"tag": "north", "desired": {"a": 1}, "stages": [100]}),
            "stages",
        ),
        (json!({"tag": "north"}), "desired"),
    ];
    let before = table_contents(&state.table).await;
    for (body, field) in cases {
        let a = start(&state, ALICE, body.clone()).await;
        assert_eq!(a.status, 400, "{body}: {:?}", a.body);
        assert_eq!(a.error_field(), field, "{body}: {:?}", a.body);
        assert!(a.body["error"]["message"].is_string());
    }
    let a = start(&state, ALICE, with("unknown", json!(1))).await;
    assert_eq!(a.status, 400, "{:?}", a.body);
    assert_eq!(table_contents(&state.table).await, before, "nothing stored");
}

#[tokio::test]
async fn a_cancelled_firmware_rollout_ends_and_no_longer_holds_its_package() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();

    let a = cancel(&state, ALICE, &rollout_id).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    // The rollout (GetItem), its status (UpdateItem), its entry and slot (one transaction).
    spent(&CANCEL_ROLLOUT, &a, 3);
    api_doc::api_doc()
        .check_response("POST /me/rollouts/{rolloutId}/cancel", 200, &a.body)
        .unwrap();
    let cancelled = &a.body["rollout"];
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["rolloutId"], rollout_id);
    assert_eq!(cancelled["firmware"]["firmwareId"], id);
    assert!(cancelled["cancelledAt"].is_string(), "{cancelled}");
    let shown = dashboard(
        &state.table,
        ApiRequest::get(&format!("/me/rollouts/{rollout_id}")).caller(ALICE),
    )
    .await;
    assert_eq!(
        shown.body["rollout"], *cancelled,
        "the stored rollout is the answer"
    );

    // The worker has nothing of it left to pass over.
    let done = run(&state).await;
    assert_eq!((done.owners, done.rollouts), (0, 0), "{done:?}");
    // Its package is no longer in use.
    let a = firmware_route(
        &state,
        ApiRequest::delete(&format!("/me/firmware/{id}")).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 204, "{:?}", a.body);
}

#[tokio::test]
async fn racing_and_repeated_cancels_give_one_slot_back() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let mut running = Vec::new();
    for _ in 0..MAX_RUNNING_ROLLOUTS {
        let a = start(&state, ALICE, staged(&id)).await;
        assert_eq!(a.status, 202, "{:?}", a.body);
        running.push(a.body["rollout"]["rolloutId"].as_str().unwrap().to_string());
    }
    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.body["error"]["code"], "rollout_limit", "{:?}", a.body);

    // Two cancels of the same rollout at once: one ends it, the other finds it ended.
    let (first, second) = tokio::join!(
        cancel(&state, ALICE, &running[0]),
        cancel(&state, ALICE, &running[0])
    );
    let mut statuses = [first.status, second.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{:?} {:?}", first.body, second.body);
    let refused = if first.status == 409 { &first } else { &second };
    assert_eq!(refused.body["error"]["code"], "rollout_ended");
    // Once more, later: a 409 from one read, nothing written.
    let before = table_contents(&state.table).await;
    let a = cancel(&state, ALICE, &running[0]).await;
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert_eq!(a.body["error"]["code"], "rollout_ended");
    spent(&CANCEL_ROLLOUT, &a, 1);
    api_doc::api_doc()
        .check_response("POST /me/rollouts/{rolloutId}/cancel", 409, &a.body)
        .unwrap();
    assert_eq!(
        table_contents(&state.table).await,
        before,
        "nothing written"
    );

    // Exactly one slot came back: one start passes, the next is at the cap again.
    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.status, 409, "{:?}", a.body);
    assert_eq!(a.body["error"]["code"], "rollout_limit");
}

#[tokio::test]
async fn another_owners_or_an_unknown_rollout_is_a_404_and_nothing_changes() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let before = table_contents(&state.table).await;
    for (owner, rollout) in [
        (BOB, rollout_id.as_str()),
        (ALICE, "r-000000000000001-0000000000000000"),
        (ALICE, "not-a-rollout-id"),
    ] {
        let a = cancel(&state, owner, rollout).await;
        assert_eq!(a.status, 404, "{owner} {rollout}: {:?}", a.body);
        assert_eq!(a.body["error"]["code"], "not_found");
    }
    assert_eq!(
        table_contents(&state.table).await,
        before,
        "nothing changed"
    );
    let shown = dashboard(
        &state.table,
        ApiRequest::get(&format!("/me/rollouts/{rollout_id}")).caller(ALICE),
    )
    .await;
    assert_eq!(shown.body["rollout"]["status"], "running");
}
