//! Staged firmware rollouts (issue 40 item 2), on DynamoDB Local and moto's S3: `POST
//! /me/rollouts` with a `firmwareId` takes only a `ready` package of the caller's own whose
//! device type fits the target, records its plan (stages, soak, success and abort rules) and
//! lists it on the running list naming its package, so the package cannot be deleted while
//! it runs (409 `firmware_in_use`); the worker changes no desired state for it and it never
//! delays the owner's later desired-state changes; another owner's package is a 404 and bad
//! input a 400 naming the field, with the table unchanged; the requests are within
//! their access patterns (AP-F4, AP-F6, AP-F9). `POST /me/rollouts/{rolloutId}/cancel` ends one: it is
//! `cancelled`, gives its running slot back exactly once (however many cancels race) and no
//! longer holds its package; another owner's is a 404 with the table unchanged.

use std::time::{Duration, Instant};

use firmware::FirmwareState;
use fleet_testkit::moto_server::{create_versioned_bucket, local_firmware_images, MotoServer};
use fleet_tests::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use shared::model::pattern_id::PatternId;
use shared::model::twin::MAX_RUNNING_ROLLOUTS;
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

/// Starts Alice's desired-state change of the devices tagged `north`; returns its id.
async fn start_north_change(state: &FirmwareState) -> String {
    let a = start(
        state,
        ALICE,
        json!({"tag": "north", "desired": {"interval": 60}}),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    a.body["rollout"]["rolloutId"].as_str().unwrap().to_string()
}

async fn cancel(state: &FirmwareState, owner: &str, rollout_id: &str) -> Answer {
    firmware_route(
        state,
        ApiRequest::post(&format!("/me/rollouts/{rollout_id}/cancel")).caller(owner),
    )
    .await
}

/// Registers ALICE's `devices` (id and type), eight at a time; those whose ids sort before
/// `north_below` are tagged `north` (the desired-state change's target).
async fn register_alices(state: &FirmwareState, devices: &[(String, &str)], north_below: &str) {
    use futures::StreamExt;
    let registered: Vec<u16> = futures::stream::iter(devices.iter())
        .map(|(device, device_type)| async move {
            rollouts(
                state,
                ApiRequest::post("/me/devices").caller(ALICE).json(json!({
                    "deviceId": device,
                    "name": "M",
                    "type": device_type,
                    "tags": if device.as_str() < north_below { vec!["north"] } else { vec![] },
                })),
            )
            .await
            .status
        })
        .buffer_unordered(8)
        .collect()
        .await;
    assert!(registered.iter().all(|s| *s == 201), "{registered:?}");
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
    spent(PatternId::StartFirmwareRollout, &a.used, 3);
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
    spent(PatternId::DeleteFirmware, &a.used, 2);
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
    spent(PatternId::DeleteFirmware, &a.used, 3);
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
    let change = start_north_change(&state).await;

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

/// More devices than the walk used to pass in a run (20 pages of 50): a firmware rollout's
/// walk now takes a page a turn in a lane of its own for the whole run, so one run offers
/// every device of an open stage, while the owner's desired-state change, started after it,
/// is applied in the same run. The next run's walk moves no device, and writes the rollout
/// item once for its 22 pages or more (its checkpoint at the walk's end; every page wrote it
/// before).
#[tokio::test]
async fn one_run_walks_a_target_of_more_than_a_thousand_devices_whole_beside_a_later_change() {
    let (state, _moto) = setup().await;
    let devices: Vec<(String, &str)> = (0..1_100)
        .map(|i| (format!("m-{i:04}"), "thermostat"))
        .collect();
    // The desired-state change's target: two of them.
    register_alices(&state, &devices, "m-0002").await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let mut plan = staged(&id);
    plan["stages"] = json!([100]);
    let a = start(&state, ALICE, plan).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let firmware_rollout = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let change = start_north_change(&state).await;

    let done = run(&state).await;
    assert_eq!(done.offered, 1_100, "{done:?}");
    assert_eq!(done.devices, 2, "the desired-state change too: {done:?}");
    let a = dashboard(
        &state.table,
        ApiRequest::get(&format!("/me/rollouts/{change}")).caller(ALICE),
    )
    .await;
    assert_eq!(a.body["rollout"]["status"], "done", "{:?}", a.body);

    let (again, used) = metered(run(&state)).await;
    assert!(again.pages >= 22 && again.offered == 0, "{again:?}");
    assert_eq!(
        used.operations.get("UpdateItem").copied().unwrap_or(0),
        1,
        "one checkpoint for a whole walk: {:?}",
        used.operations
    );
    let shown = show(&state, ALICE, &firmware_rollout).await;
    assert_eq!(stage_counts(&shown, 0).0, 1_100, "{:?}", shown.body);
}

/// A run stopped by its deadline in the middle of a firmware walk checkpoints where it got
/// (the walk writes the rollout item only every few seconds): the next run goes on from there,
/// walking only the pages left, and no device is offered twice.
#[tokio::test]
async fn a_walk_stopped_by_the_runs_deadline_goes_on_where_it_stopped() {
    let (state, _moto) = setup().await;
    let devices: Vec<(String, &str)> = (0..600)
        .map(|i| (format!("d-{i:04}"), "thermostat"))
        .collect();
    register_alices(&state, &devices, "d-0000").await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let mut plan = staged(&id);
    plan["stages"] = json!([100]);
    let a = start(&state, ALICE, plan).await;
    assert_eq!(a.status, 202, "{:?}", a.body);

    // A page takes at least 50 ms (the worker's pace): half a second walks part of the target.
    let first = Box::pin(rollout::advance_rollouts(
        &state.table,
        Instant::now() + Duration::from_millis(500),
    ))
    .await
    .unwrap();
    let rest = run(&state).await;
    assert!(first.pages >= 1 && rest.pages >= 1, "{first:?} {rest:?}");
    assert_eq!(first.offered + rest.offered, 600, "{first:?} {rest:?}");
    // A whole walk, for its number of pages.
    let whole = run(&state).await;
    assert_eq!(whole.offered, 0, "{whole:?}");
    assert_eq!(
        first.pages + rest.pages,
        whole.pages,
        "the second run walked only what the first left: {first:?} {rest:?} {whole:?}"
    );
}

/// An owner's lanes share the owner's pace: two firmware rollouts and a desired-state change of
/// one owner get one page a turn between them, not one each, so however many rollouts an owner
/// runs, the worker reads its partition at the pace of one.
#[tokio::test]
async fn an_owners_firmware_walks_and_desired_change_share_one_page_a_turn() {
    let (state, _moto) = setup().await;
    let devices: Vec<(String, &str)> = (0..120)
        .flat_map(|i| {
            [
                (format!("t-{i:04}"), "thermostat"),
                (format!("w-{i:04}"), "meter"),
            ]
        })
        .collect();
    register_alices(&state, &devices, "t-0002").await;
    for device_type in ["thermostat", "meter"] {
        let id = package(&state, ALICE, device_type, true).await;
        let mut plan = staged(&id);
        plan["target"] = json!({"type": device_type});
        plan["stages"] = json!([100]);
        let a = start(&state, ALICE, plan).await;
        assert_eq!(a.status, 202, "{:?}", a.body);
    }
    start_north_change(&state).await;

    let done = run(&state).await;
    eprintln!(
        "one owner's three lanes: {} pages in {} turns",
        done.pages, done.turns
    );
    assert_eq!(done.offered, 240, "{done:?}");
    assert_eq!(done.devices, 2, "{done:?}");
    assert_eq!(done.owners, 1, "{done:?}");
    // At least 3 pages of each type's 120 and the change's one; never two in one turn.
    assert!(done.pages >= 7, "{done:?}");
    assert!(
        done.pages <= done.turns,
        "more than a page a turn: {done:?}"
    );
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
        (
            with("maintenanceWindow", json!([22, 4])),
            "maintenanceWindow",
        ),
        (
            with("maintenanceWindow", json!({"startHour": 22})),
            "maintenanceWindow.endHour",
        ),
        (
            with("maintenanceWindow", json!({"startHour": 24, "endHour": 4})),
            "maintenanceWindow.startHour",
        ),
        (
            with("maintenanceWindow", json!({"startHour": 3, "endHour": 3})),
            "maintenanceWindow.endHour",
        ),
        (
            with(
                "maintenanceWindow",
                json!({"startHour": 1, "endHour": 3, "zone": "CET"}),
            ),
            "maintenanceWindow.zone",
        ),
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
        (
            json!({"tag": "north", "desired": {"a": 1},
                   "maintenanceWindow": {"startHour": 1, "endHour": 3}}),
            "maintenanceWindow",
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
    spent(PatternId::CancelRollout, &a.used, 3);
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
    spent(PatternId::CancelRollout, &a.used, 1);
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

// ---- The engine (issue 40 items 3 to 5): offers, device reports, healthy success, counts.

/// Device ids of `stage` of `stages`, by the stable hash.
fn ids_in(stages: &[u8], stage: usize, prefix: &str, n: usize) -> Vec<String> {
    (0..100_000)
        .map(|i| format!("{prefix}-{i:05}"))
        .filter(|id| {
            shared::model::firmware::stage_of(
                stages,
                &shared::model::ids::DeviceId::parse(id.as_str()).unwrap(),
            ) == Some(stage)
        })
        .take(n)
        .collect()
}

/// Device ids of `stage` of the default stages (1/5/25/100).
fn ids_of_stage(stage: usize, prefix: &str, n: usize) -> Vec<String> {
    ids_in(&[1, 5, 25, 100], stage, prefix, n)
}

/// A fresh ingestor (a new container) presigning on `state`'s bucket.
fn device_side(state: &FirmwareState) -> std::sync::Arc<shared::ops::ingest::Ingestor> {
    std::sync::Arc::new(
        shared::ops::ingest::Ingestor::new(
            state.table.clone(),
            shared::ops::ingest::IngestConfig::default(),
        )
        .with_firmware_images(state.images.clone()),
    )
}

static EVENT_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A batch of one new reading from `device`, with `firmware` (its report) when given.
async fn check_in(
    state: &FirmwareState,
    device: &str,
    token: &str,
    firmware: Option<Value>,
) -> Answer {
    check_in_reading(state, device, token, 21.5, firmware).await
}

/// A batch of one new temperature `value` from `device`, with `firmware` when given.
async fn check_in_reading(
    state: &FirmwareState,
    device: &str,
    token: &str,
    value: f64,
    firmware: Option<Value>,
) -> Answer {
    let seq = EVENT_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut body = json!({"events": [
        {"id": format!("ev-{seq}"), "type": "temperature", "value": value, "at": ago(1)}
    ]});
    if let Some(firmware) = firmware {
        body["firmware"] = firmware;
    }
    ingest(
        &device_side(state),
        ApiRequest::post(&format!("/devices/{device}/events"))
            .header("Authorization", &format!("Bearer {token}"))
            .json(body),
    )
    .await
}

/// `device` reports its update failed (still on 1.0.0, a flash write error).
async fn report_failed(state: &FirmwareState, device: &str, token: &str) -> Answer {
    let failed = json!({"version": "1.0.0", "state": "failed", "reason": "flash write error"});
    check_in(state, device, token, Some(failed)).await
}

/// A sync of `device` with `body`.
async fn sync_in(state: &FirmwareState, device: &str, token: &str, body: Value) -> Answer {
    ingest(
        &device_side(state),
        ApiRequest::post(&format!("/devices/{device}/sync"))
            .header("Authorization", &format!("Bearer {token}"))
            .json(body),
    )
    .await
}

async fn show(state: &FirmwareState, owner: &str, rollout_id: &str) -> Answer {
    let a = dashboard(
        &state.table,
        ApiRequest::get(&format!("/me/rollouts/{rollout_id}")).caller(owner),
    )
    .await;
    api_doc::api_doc()
        .check_response("GET /me/rollouts/{rolloutId}", 200, &a.body)
        .unwrap();
    a
}

fn stage_counts(a: &Answer, stage: usize) -> (i64, i64, i64, i64, i64) {
    let s = &a.body["rollout"]["stages"][stage];
    let n = |k: &str| s[k].as_i64().unwrap_or_else(|| panic!("{k} in {s}"));
    (
        n("offered"),
        n("inProgress"),
        n("succeeded"),
        n("failed"),
        n("timedOut"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_stage_is_offered_the_image_and_success_means_healthy_after_the_reboot() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let first = ids_of_stage(0, "th", 5);
    let later = ids_of_stage(1, "th", 1);
    let tokens = register_all(&state, first.iter().chain(&later)).await;
    let token = |d: &String| tokens[d].clone();
    // Before the rollout: what a batch of a device costs (the baseline of "no extra request").
    let unmarked = &later[0];
    let before = check_in(&state, unmarked, &token(unmarked), None).await;
    assert_eq!(before.status, 200, "{:?}", before.body);

    let mut body = staged(&id);
    body["healthyCheckIns"] = json!(2);
    let a = start(&state, ALICE, body).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let worked = run(&state).await;
    assert_eq!(worked.offered, 5, "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(
        a.used.requests(),
        1,
        "one GetItem: the counts the walk tallied are on the rollout"
    );
    assert!(a.body["rollout"]["countedAt"].is_string(), "{:?}", a.body);
    assert_eq!(stage_counts(&a, 0), (5, 0, 0, 0, 0), "{:?}", a.body);
    assert_eq!(stage_counts(&a, 1), (0, 0, 0, 0, 0));
    assert_eq!(a.body["rollout"]["stages"][0]["status"], "open");
    assert_eq!(a.body["rollout"]["stages"][1]["status"], "waiting");

    // A device of a stage not open yet: no offer, and not one request more than before.
    let after = check_in(&state, unmarked, &token(unmarked), None).await;
    assert_eq!(after.status, 200);
    assert!(after.body.get("firmware").is_none(), "{:?}", after.body);
    assert_eq!(
        after.used.requests(),
        before.used.requests(),
        "{:?}",
        after.used.operations
    );

    // The offer: a presigned GET of exactly the checked image, Range included.
    let healthy = &first[0];
    let a = check_in(&state, healthy, &token(healthy), None).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    api_doc::api_doc()
        .check_response("POST /devices/{deviceId}/events", 200, &a.body)
        .unwrap();
    let offer = a.body["firmware"].clone();
    assert_eq!(offer["firmwareId"], id.as_str());
    assert_eq!(offer["version"], "2.0.0");
    assert_eq!(offer["size"], 3000);
    assert!(offer.get("signature").is_none());
    // One GetItem (the rollout) more than a batch of a device with nothing open.
    assert_eq!(
        a.used.requests(),
        before.used.requests() + 1,
        "{:?}",
        a.used.operations
    );
    let url = offer["url"].as_str().unwrap();
    let image = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    let digest: String = Sha256::digest(&image)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(digest, offer["sha256"].as_str().unwrap());
    let part = reqwest::Client::new()
        .get(url)
        .header("Range", "bytes=1000-")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(&part.bytes().await.unwrap()[..], &image[1000..]);

    // Downloading, installing: in progress, still offered (a URL renewed each time).
    let a = check_in(
        &state,
        healthy,
        &token(healthy),
        Some(json!({"version": "1.0.0", "state": "downloading"})),
    )
    .await;
    assert_eq!(a.body["firmware"]["version"], "2.0.0", "{:?}", a.body);
    let a = sync_in(
        &state,
        healthy,
        &token(healthy),
        json!({"firmware": {"version": "1.0.0", "state": "installing"}}),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["firmware"]["version"], "2.0.0", "{:?}", a.body);
    api_doc::api_doc()
        .check_response("POST /devices/{deviceId}/sync", 200, &a.body)
        .unwrap();
    // The counts are the worker's walk's: after a run.
    run(&state).await;
    assert_eq!(
        stage_counts(&show(&state, ALICE, &rollout_id).await, 0),
        (5, 1, 0, 0, 0)
    );
    // After its reboot it runs 2.0.0: updated, not succeeded until 2 healthy check-ins.
    let a = check_in(
        &state,
        healthy,
        &token(healthy),
        Some(json!({"version": "2.0.0"})),
    )
    .await;
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
    let a = sync_in(&state, healthy, &token(healthy), json!({})).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    run(&state).await;
    assert_eq!(
        stage_counts(&show(&state, ALICE, &rollout_id).await, 0),
        (5, 1, 0, 0, 0)
    );
    check_in(
        &state,
        healthy,
        &token(healthy),
        Some(json!({"version": "2.0.0"})),
    )
    .await;
    run(&state).await;
    assert_eq!(
        stage_counts(&show(&state, ALICE, &rollout_id).await, 0),
        (5, 0, 1, 0, 0)
    );
    // Done: its batches cost nothing more again (its part is finished: no rollout read).
    let a = check_in(&state, healthy, &token(healthy), None).await;
    assert_eq!(
        a.used.requests(),
        before.used.requests(),
        "{:?}",
        a.used.operations
    );

    // Already on the version: succeeds at once.
    let current = &first[1];
    let a = check_in(
        &state,
        current,
        &token(current),
        Some(json!({"version": "2.0.0"})),
    )
    .await;
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
    // Installs, then reports the old version again: a rollback.
    let rolled = &first[2];
    for report in [
        json!({"version": "1.0.0", "state": "downloading"}),
        json!({"version": "1.0.0", "state": "installing"}),
        json!({"version": "1.0.0"}),
    ] {
        check_in(&state, rolled, &token(rolled), Some(report)).await;
    }
    // Says it failed to verify the image, with its reason.
    let unverified = &first[3];
    check_in(&state, unverified, &token(unverified), Some(json!({"version": "1.0.0", "state": "failed", "class": "verify", "reason": "digest mismatch"}))).await;
    run(&state).await;
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(stage_counts(&a, 0), (5, 0, 2, 2, 0), "{:?}", a.body);
    let rolled_back = part_of(&state, ALICE, rolled).await;
    assert_eq!(rolled_back["failure"], "rollback");
    let failed = part_of(&state, ALICE, unverified).await;
    assert_eq!(failed["failure"], "verify");
    assert_eq!(failed["reason"], "digest mismatch");

    // A bad report is a 400 naming the field, and changes nothing.
    let waiting = &first[4];
    let before_bad = table_contents(&state.table).await;
    let a = sync_in(
        &state,
        waiting,
        &token(waiting),
        json!({"firmware": {"version": "1.0.0", "state": "rebooting"}}),
    )
    .await;
    assert_eq!(a.status, 400, "{:?}", a.body);
    assert_eq!(a.error_field(), "firmware.state", "{:?}", a.body);
    assert_eq!(table_contents(&state.table).await, before_bad);
}

/// `stages` and rules for a small fleet: half, then all; success 60 %, soak 1 s, no healthy
/// check-ins needed; pause at 50 % failures of at least 2 finished.
fn halves(firmware_id: &str) -> Value {
    json!({
        "target": {"type": "thermostat"},
        "firmwareId": firmware_id,
        "stages": [50, 100],
        "soakSeconds": 1,
        "healthyCheckIns": 0,
        "successPercent": 60,
        "abort": {"failurePercent": 50, "minFinished": 2}
    })
}

/// Registers `devices` to Alice: each device's token by its id.
async fn register_all<'d>(
    state: &FirmwareState,
    devices: impl IntoIterator<Item = &'d String>,
) -> std::collections::HashMap<String, String> {
    let mut tokens = std::collections::HashMap::new();
    for device in devices {
        tokens.insert(
            device.clone(),
            register_device(&state.table, ALICE, device).await,
        );
    }
    tokens
}

/// Device ids of `stage` of stages 50/100.
fn half_ids(stage: usize, prefix: &str, n: usize) -> Vec<String> {
    ids_in(&[50, 100], stage, prefix, n)
}

async fn rollout_action(
    state: &FirmwareState,
    owner: &str,
    rollout_id: &str,
    action: &str,
) -> Answer {
    let a = firmware_route(
        state,
        ApiRequest::post(&format!("/me/rollouts/{rollout_id}/{action}")).caller(owner),
    )
    .await;
    if a.status == 200 {
        api_doc::api_doc()
            .check_response(
                &format!("POST /me/rollouts/{{rolloutId}}/{action}"),
                200,
                &a.body,
            )
            .unwrap();
    }
    a
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stage_opens_after_success_and_soak_and_failures_pause_it_until_resumed() {
    use shared::model::pattern_id::PatternId;
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let first = half_ids(0, "hv", 3);
    let second = half_ids(1, "hv", 4);
    let tokens = register_all(&state, first.iter().chain(&second)).await;
    let token = |d: &String| tokens[d].clone();
    let a = start(&state, ALICE, halves(&id)).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();

    assert_eq!(run(&state).await.offered, 3);
    for device in &first {
        let a = check_in(&state, device, &token(device), None).await;
        assert!(a.body.get("firmware").is_some(), "{device}: {:?}", a.body);
    }
    // The next stage is not offered before the first succeeded and soaked.
    let a = check_in(&state, &second[0], &token(&second[0]), None).await;
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
    for device in &first {
        check_in(
            &state,
            device,
            &token(device),
            Some(json!({"version": "2.0.0"})),
        )
        .await;
    }
    // Met: the soak starts (one run), and the next run after it opens stage 1 and offers it.
    let worked = run(&state).await;
    assert_eq!((worked.stages_opened, worked.offered), (0, 0), "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(
        a.body["rollout"]["stages"][0]["status"], "soaking",
        "{:?}",
        a.body
    );
    assert_eq!(a.body["rollout"]["stages"][1]["status"], "waiting");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let worked = run(&state).await;
    assert_eq!((worked.stages_opened, worked.offered), (1, 4), "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(stage_counts(&a, 0), (3, 0, 3, 0, 0));
    assert_eq!(a.body["rollout"]["stages"][0]["status"], "passed");
    assert_eq!(stage_counts(&a, 1), (4, 0, 0, 0, 0));

    // Two of stage 1 fail: 2 of 2 finished, at least 50 % of at least 2: it pauses itself.
    for device in &second[..2] {
        report_failed(&state, device, &token(device)).await;
    }
    let worked = run(&state).await;
    assert_eq!(worked.paused, 1, "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(a.body["rollout"]["status"], "paused", "{:?}", a.body);
    let reason = a.body["rollout"]["pausedReason"].as_str().unwrap();
    assert!(reason.contains("2 of 2 finished"), "{reason}");
    // Paused: nothing is offered, and the worker leaves it (no offer, no end).
    let a = check_in(&state, &second[2], &token(&second[2]), None).await;
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
    let worked = run(&state).await;
    assert_eq!(
        (worked.offered, worked.finished, worked.paused),
        (0, 0, 0),
        "{worked:?}"
    );

    // Wrong states are a 409 with the table unchanged; another owner's is a 404.
    let before = table_contents(&state.table).await;
    let a = rollout_action(&state, ALICE, &rollout_id, "pause").await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (409, Some("rollout_paused"))
    );
    spent(PatternId::PauseRollout, &a.used, 1);
    let a = rollout_action(&state, BOB, &rollout_id, "resume").await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    let a = rollout_action(&state, BOB, &rollout_id, "pause").await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    assert_eq!(table_contents(&state.table).await, before);

    // Resumed: offered again, not re-paused by the failures that paused it, and the devices
    // that succeeded are not offered again.
    let a = rollout_action(&state, ALICE, &rollout_id, "resume").await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    spent(PatternId::ResumeRollout, &a.used, 2);
    assert_eq!(a.body["rollout"]["status"], "running");
    assert!(a.body["rollout"].get("pausedReason").is_none());
    let a = rollout_action(&state, ALICE, &rollout_id, "resume").await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (409, Some("rollout_not_paused"))
    );
    let a = check_in(&state, &second[2], &token(&second[2]), None).await;
    assert_eq!(a.body["firmware"]["version"], "2.0.0", "{:?}", a.body);
    let a = check_in(&state, &first[0], &token(&first[0]), None).await;
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
    assert_eq!(run(&state).await.paused, 0);

    // A device silent past its interval and grace (none known: 24 h) times out.
    let silent = &second[3];
    offer_moved_ago(&state, ALICE, silent, 2 * 24 * 3600).await;
    let worked = run(&state).await;
    assert_eq!(worked.timed_out, 1, "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(stage_counts(&a, 1), (4, 0, 0, 3, 1), "{:?}", a.body);
    assert_eq!(part_of(&state, ALICE, silent).await["failure"], "timeout");

    // The owner pauses (200) and cancels a paused rollout.
    let a = rollout_action(&state, ALICE, &rollout_id, "pause").await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    spent(PatternId::PauseRollout, &a.used, 2);
    assert_eq!(a.body["rollout"]["pausedReason"], "paused by its owner");
    let a = cancel(&state, ALICE, &rollout_id).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let a = rollout_action(&state, ALICE, &rollout_id, "resume").await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (409, Some("rollout_ended"))
    );

    // A desired-state rollout neither pauses nor resumes.
    let a = start(
        &state,
        ALICE,
        json!({"type": "thermostat", "desired": {"on": true}}),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let desired = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let a = rollout_action(&state, ALICE, &desired, "pause").await;
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (409, Some("rollout_not_firmware"))
    );
}

/// Issue 40's "done when", at its own scale: 400 devices, stages 1/5/25/100.
#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_over_400_devices_opens_each_stage_after_its_soak_and_success_and_pauses_itself_on_failures_and_on_silence(
) {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let stages = [1u8, 5, 25, 100];
    let devices: Vec<String> = (0..400).map(|i| format!("fleet400-{i:03}")).collect();
    let tokens = register_all(&state, &devices).await;
    let token = |d: &String| tokens[d].clone();
    let members: Vec<Vec<String>> = (0..stages.len())
        .map(|stage| {
            devices
                .iter()
                .filter(|d| {
                    shared::model::firmware::stage_of(
                        &stages,
                        &shared::model::ids::DeviceId::parse(d.as_str()).unwrap(),
                    ) == Some(stage)
                })
                .cloned()
                .collect()
        })
        .collect();
    assert_eq!(members.iter().map(Vec::len).sum::<usize>(), 400);
    assert!(members.iter().all(|m| !m.is_empty()), "{members:?}");
    let a = start(
        &state,
        ALICE,
        json!({
            "target": {"type": "thermostat"},
            "firmwareId": id,
            "stages": stages,
            "soakSeconds": 1,
            "healthyCheckIns": 1,
            "successPercent": 95,
            "abort": {"failurePercent": 10, "minFinished": 10}
        }),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    // Whether `device`'s check-in is offered the image.
    let offered = |device: String| {
        let state = state.clone();
        let token = token(&device);
        async move {
            let a = check_in(&state, &device, &token, None).await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            a.body.get("firmware").is_some()
        }
    };
    // A healthy update: offered, back from its reboot on 2.0.0, one healthy check-in.
    let updated = |device: String| {
        let state = state.clone();
        let token = token(&device);
        async move {
            let a = check_in(&state, &device, &token, None).await;
            assert_eq!(
                a.body["firmware"]["version"], "2.0.0",
                "{device}: {:?}",
                a.body
            );
            check_in(&state, &device, &token, Some(json!({"version": "2.0.0"}))).await;
            check_in(&state, &device, &token, None).await;
        }
    };

    // The start opens stage 0 (1 %): the first run offers exactly its devices.
    let worked = run(&state).await;
    assert_eq!(worked.offered as usize, members[0].len(), "{worked:?}");
    for stage in 0..2 {
        for device in &members[stage] {
            updated(device.clone()).await;
        }
        // The next stage's devices are offered nothing until this one has succeeded and soaked.
        assert!(!offered(members[stage + 1][0].clone()).await);
        let worked = run(&state).await;
        assert_eq!((worked.stages_opened, worked.offered), (0, 0), "{worked:?}");
        let a = show(&state, ALICE, &rollout_id).await;
        let n = members[stage].len() as i64;
        assert_eq!(stage_counts(&a, stage), (n, 0, n, 0, 0), "{:?}", a.body);
        assert_eq!(a.body["rollout"]["stages"][stage]["status"], "soaking");
        assert!(!offered(members[stage + 1][0].clone()).await);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let worked = run(&state).await;
        assert_eq!(
            (worked.stages_opened, worked.offered as usize),
            (1, members[stage + 1].len()),
            "{worked:?}"
        );
        let a = show(&state, ALICE, &rollout_id).await;
        assert_eq!(a.body["rollout"]["stages"][stage]["status"], "passed");
    }

    // Stage 2 (25 %): 18 succeed and 2 fail, 10 % of 20 finished (at least 10): it pauses
    // itself, and no device of stage 3 is offered anything.
    let third = &members[2];
    assert!(third.len() >= 40, "{}", third.len());
    for device in &third[..18] {
        updated(device.clone()).await;
    }
    for device in &third[18..20] {
        assert!(offered(device.clone()).await);
        report_failed(&state, device, &token(device)).await;
    }
    let worked = run(&state).await;
    assert_eq!((worked.paused, worked.stages_opened), (1, 0), "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(a.body["rollout"]["status"], "paused", "{:?}", a.body);
    let reason = a.body["rollout"]["pausedReason"].as_str().unwrap();
    assert!(reason.contains("2 of 20 finished"), "{reason}");
    for device in members[3].iter().take(20) {
        assert!(!offered(device.clone()).await, "{device}");
    }
    // Nor a device of the paused stage that has not taken its offer yet.
    assert!(!offered(third[20].clone()).await);
    assert_eq!(run(&state).await.offered, 0);

    // Resumed: the devices that succeeded are not offered again; then 10 devices the stage
    // offered the image go silent (never back since the offer, two days ago): their timeouts
    // pause it again.
    let a = rollout_action(&state, ALICE, &rollout_id, "resume").await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    for device in [&members[0][0], &members[1][0], &third[0]] {
        assert!(!offered(device.clone()).await, "{device}");
    }
    for device in &third[21..31] {
        offer_moved_ago(&state, ALICE, device, 2 * 24 * 3600).await;
    }
    let worked = run(&state).await;
    assert_eq!((worked.timed_out, worked.paused), (10, 1), "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(a.body["rollout"]["status"], "paused", "{:?}", a.body);
    let reason = a.body["rollout"]["pausedReason"].as_str().unwrap();
    assert!(reason.contains("10 timed out"), "{reason}");
    assert_eq!(a.body["rollout"]["stages"][3]["offered"], 0, "{:?}", a.body);
    for device in members[3].iter().take(20) {
        assert!(!offered(device.clone()).await, "{device}");
    }
}

/// A maintenance window from `hours_from_now` UTC hours after the current hour, `length` long.
fn window_from_now(hours_from_now: i64, length: i64) -> Value {
    let hour = shared::model::timestamp::Timestamp::now()
        .epoch_seconds()
        .rem_euclid(86_400)
        / 3_600;
    json!({
        "startHour": (hour + hours_from_now).rem_euclid(24),
        "endHour": (hour + hours_from_now + length).rem_euclid(24),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_its_maintenance_window_a_rollout_offers_nothing_and_inside_it_offers() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let first = ids_of_stage(0, "mw", 3);
    let tokens = register_all(&state, &first).await;
    // Closed: it opens two hours after this one (so it stays closed if the hour turns).
    let mut body = staged(&id);
    body["maintenanceWindow"] = window_from_now(2, 1);
    let a = start(&state, ALICE, body.clone()).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    assert_eq!(
        a.body["rollout"]["firmware"]["maintenanceWindow"], body["maintenanceWindow"],
        "{:?}",
        a.body
    );
    let closed = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let worked = run(&state).await;
    assert_eq!(worked.offered, 0, "{worked:?}");
    let a = show(&state, ALICE, &closed).await;
    assert_eq!(stage_counts(&a, 0), (0, 0, 0, 0, 0), "{:?}", a.body);
    assert_eq!(a.body["rollout"]["status"], "running");
    let device = &first[0];
    let a = check_in(&state, device, &tokens[device], None).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
    let a = cancel(&state, ALICE, &closed).await;
    assert_eq!(a.status, 200, "{:?}", a.body);

    // Open: this hour and the next.
    body["maintenanceWindow"] = window_from_now(0, 2);
    let a = start(&state, ALICE, body).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let open = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let worked = run(&state).await;
    assert_eq!(worked.offered, 3, "{worked:?}");
    let a = show(&state, ALICE, &open).await;
    assert_eq!(stage_counts(&a, 0), (3, 0, 0, 0, 0), "{:?}", a.body);
    let a = check_in(&state, device, &tokens[device], None).await;
    assert_eq!(
        a.body["firmware"]["firmwareId"],
        id.as_str(),
        "{:?}",
        a.body
    );
}

// ---- Issue 40 item 4: the health rule, and retries by class with backoff.

/// The key of `owner`'s `device`'s live state (on the partition its device item names).
async fn state_key(
    state: &FirmwareState,
    owner: &str,
    device: &str,
) -> shared::model::entities::ItemKey {
    use shared::model::entities::{device::DeviceItem, Entity, ItemKey};
    let user = shared::model::ids::UserId::parse(owner).unwrap();
    let device = shared::model::ids::DeviceId::parse(device).unwrap();
    let known = item(
        &state.table,
        &ItemKey::Device {
            user: user.clone(),
            device: device.clone(),
        },
    )
    .await
    .expect("a device");
    ItemKey::DeviceState {
        user,
        partition: DeviceItem::from_item(known).unwrap().partition,
        device,
    }
}

/// `owner`'s `device`'s part in its last firmware rollout, as its owner reads it.
async fn part_of(state: &FirmwareState, owner: &str, device: &str) -> Value {
    let view = shared::ops::twin::firmware_offer::device_firmware(
        &state.table,
        &shared::model::ids::UserId::parse(owner).unwrap(),
        &shared::model::ids::DeviceId::parse(device).unwrap(),
    )
    .await
    .unwrap()
    .expect("a part in a rollout");
    serde_json::to_value(view).unwrap()
}

/// Sets `device`'s part's `updatedAt` to `seconds` ago (the time its failure or last move is
/// dated from), as if that long had passed.
async fn offer_moved_ago(state: &FirmwareState, owner: &str, device: &str, seconds: i64) {
    let key = state_key(state, owner, device).await;
    state
        .table
        .client
        .update_item()
        .table_name(state.table.name())
        .set_key(Some(key.attributes()))
        .update_expression("SET #f.updatedAt = :t")
        .expression_attribute_names("#f", "firmware")
        .expression_attribute_values(
            ":t",
            aws_sdk_dynamodb::types::AttributeValue::S(ago(seconds)),
        )
        .send()
        .await
        .unwrap();
}

fn retried(a: &Answer, stage: usize) -> i64 {
    a.body["rollout"]["stages"][stage]["retried"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn updated_devices_alarmed_clearly_more_often_than_the_rest_pause_it_and_a_chance_excess_does_not(
) {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let stages = [25, 100];
    let updated = ids_in(&stages, 0, "hr", 6);
    let rest = ids_in(&stages, 1, "hr", 12);
    let tokens = register_all(&state, updated.iter().chain(&rest)).await;
    let token = |d: &String| tokens[d].clone();
    let rule = device_updates(
        &state.table,
        ApiRequest::post("/me/rules").caller(ALICE).json(json!({
            "name": "too hot", "eventType": "temperature",
            "scope": {"deviceType": "thermostat"}, "condition": {"outside": [5, 80]},
            "severity": "critical"
        })),
    )
    .await;
    assert_eq!(rule.status, 201, "{:?}", rule.body);
    // The failure rule can never fire here, and the second stage never opens: only the health
    // rule can pause it.
    let a = start(
        &state,
        ALICE,
        json!({
            "target": {"type": "thermostat"}, "firmwareId": id, "stages": stages,
            "soakSeconds": 86_400, "healthyCheckIns": 0, "successPercent": 100,
            "abort": {"failurePercent": 100, "minFinished": 1_000_000}
        }),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let worked = run(&state).await;
    assert_eq!((worked.offered, worked.paused), (6, 0), "{worked:?}");
    for device in &updated {
        check_in(
            &state,
            device,
            &token(device),
            Some(json!({"version": "2.0.0"})),
        )
        .await;
    }
    // 2 of 6 updated alarmed against 1 of 12 not updated: p = 0.25, chance explains it.
    for device in [&updated[0], &updated[1], &rest[0]] {
        check_in_reading(&state, device, &token(device), 95.0, None).await;
    }
    let worked = run(&state).await;
    assert_eq!(worked.paused, 0, "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(a.body["rollout"]["status"], "running");
    assert_eq!(
        a.body["rollout"]["health"],
        json!({"updated": [{"devices": 6, "unhealthy": 2}], "notUpdated": {"devices": 12, "unhealthy": 1}}),
        "{:?}",
        a.body
    );
    // All 6 updated alarmed against 1 of 12: p = 7/18564, below 0.001: it pauses itself.
    for device in &updated[2..] {
        check_in_reading(&state, device, &token(device), 95.0, None).await;
    }
    let worked = run(&state).await;
    assert_eq!(worked.paused, 1, "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(a.body["rollout"]["status"], "paused", "{:?}", a.body);
    let reason = a.body["rollout"]["pausedReason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "stage 0 (25%): 6 of 6 updated devices are offline or alarmed (100.0%) against 1 of \
             12 devices not yet updated (8.3%)"
        ),
        "{reason}"
    );
    assert!(reason.contains("p = 3.8e-4"), "{reason}");
    // Paused: offers nothing.
    let a = check_in(&state, &rest[1], &token(&rest[1]), None).await;
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
    // The owner resumes: the stage open now is accepted as it is, not paused again at once.
    let a = rollout_action(&state, ALICE, &rollout_id, "resume").await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let worked = run(&state).await;
    assert_eq!(worked.paused, 0, "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(a.body["rollout"]["status"], "running", "{:?}", a.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_device_is_offered_again_by_its_class_after_its_backoff_and_a_rollback_never() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let devices = half_ids(0, "rt", 2);
    let (flaky, bad) = (&devices[0], &devices[1]);
    let tokens = register_all(&state, &devices).await;
    let token = |d: &String| tokens[d].clone();
    let mut plan = halves(&id);
    plan["abort"] = json!({"failurePercent": 100, "minFinished": 1_000});
    let a = start(&state, ALICE, plan).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    assert_eq!(run(&state).await.offered, 2);
    let download_failure = json!({"version": "1.0.0", "state": "failed", "reason": "TLS reset"});

    // A download failure: not retried within its hour, retried after it.
    check_in(&state, flaky, &token(flaky), Some(download_failure.clone())).await;
    assert_eq!(run(&state).await.retried, 0);
    offer_moved_ago(&state, ALICE, flaky, 3_700).await;
    let worked = run(&state).await;
    assert_eq!(worked.retried, 1, "{worked:?}");
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(stage_counts(&a, 0), (2, 0, 0, 0, 0), "{:?}", a.body);
    assert_eq!(retried(&a, 0), 1);
    let a = check_in(&state, flaky, &token(flaky), None).await;
    assert_eq!(a.body["firmware"]["version"], "2.0.0", "{:?}", a.body);

    // Its second failure waits 4 hours, not 1; its 4th is final.
    check_in(&state, flaky, &token(flaky), Some(download_failure.clone())).await;
    offer_moved_ago(&state, ALICE, flaky, 3_700).await;
    assert_eq!(run(&state).await.retried, 0);
    offer_moved_ago(&state, ALICE, flaky, 4 * 3_600 + 100).await;
    assert_eq!(run(&state).await.retried, 1);
    check_in(&state, flaky, &token(flaky), Some(download_failure.clone())).await;
    offer_moved_ago(&state, ALICE, flaky, 16 * 3_600 + 100).await;
    assert_eq!(run(&state).await.retried, 1);
    check_in(&state, flaky, &token(flaky), Some(download_failure.clone())).await;
    offer_moved_ago(&state, ALICE, flaky, 30 * 24 * 3_600).await;
    assert_eq!(run(&state).await.retried, 0);
    let offer = part_of(&state, ALICE, flaky).await;
    assert_eq!(offer["attempts"], 4);
    assert_eq!(offer["failure"], "download");

    // A rollback says the image is bad for the device: never offered again.
    for report in [
        json!({"version": "1.0.0", "state": "downloading"}),
        json!({"version": "1.0.0", "state": "installing"}),
        json!({"version": "1.0.0"}),
    ] {
        check_in(&state, bad, &token(bad), Some(report)).await;
    }
    offer_moved_ago(&state, ALICE, bad, 30 * 24 * 3_600).await;
    assert_eq!(run(&state).await.retried, 0);
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(stage_counts(&a, 0), (2, 0, 0, 2, 0), "{:?}", a.body);
    assert_eq!(retried(&a, 0), 3);
    let a = check_in(&state, bad, &token(bad), None).await;
    assert!(a.body.get("firmware").is_none(), "{:?}", a.body);
}

/// Write units the rollout's own writes of one check-in or run cost, from the items that
/// changed between `before` and `after` (`fleet_testkit::pricing`): the live state's single
/// UpdateItem where its `firmware` part changed. A check-in's move rides on ingestion's own
/// update of the live state (`on_ingestion`), which the batch writes anyway: it costs only what
/// the part adds to that write (the units with the part less the units without it). Nothing
/// else of the rollout's is written per device (the walk's checkpoint is one write a page).
fn rollout_write_units(
    before: &fleet_testkit::pricing::Snapshot,
    after: &fleet_testkit::pricing::Snapshot,
    on_ingestion: bool,
) -> u64 {
    use fleet_testkit::pricing::{changes, ItemChange, WriteKind};
    use shared::model::entities::device_state::DeviceStateItem;
    use shared::model::entities::ItemKey;
    let part = |i: &Option<fleet_testkit::capacity::Item>| {
        i.as_ref()
            .and_then(|i| i.get(DeviceStateItem::FIRMWARE.name()).cloned())
    };
    let without_part = |i: &Option<fleet_testkit::capacity::Item>| {
        i.clone().map(|mut i| {
            i.remove(DeviceStateItem::FIRMWARE.name());
            i.remove(DeviceStateItem::FIRMWARE_SEQ.name());
            i
        })
    };
    changes(before, after)
        .iter()
        .filter(|c| {
            let item = c.after.as_ref().or(c.before.as_ref()).expect("an item");
            matches!(ItemKey::of(item), Ok(ItemKey::DeviceState { .. }))
                && part(&c.before) != part(&c.after)
        })
        .map(|c| {
            let whole = c.write_units(WriteKind::Single);
            if !on_ingestion {
                return whole;
            }
            let bare = ItemChange {
                key: c.key.clone(),
                before: without_part(&c.before),
                after: without_part(&c.after),
            };
            whole - bare.write_units(WriteKind::Single)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_device_costs_its_rollout_these_write_units_measured_on_the_real_items() {
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let device = &half_ids(0, "wu", 1)[0];
    let token = register_device(&state.table, ALICE, device).await;
    check_in(&state, device, &token, None).await;
    let mut plan = halves(&id);
    plan["healthyCheckIns"] = json!(2);
    let a = start(&state, ALICE, plan).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout_id = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let snapshot = || async {
        fleet_testkit::pricing::snapshot(&state.table)
            .await
            .unwrap()
    };
    let mut steps = Vec::new();
    let before = snapshot().await;
    assert_eq!(run(&state).await.offered, 1);
    let after = snapshot().await;
    steps.push((
        "offered (the worker)",
        rollout_write_units(&before, &after, false),
    ));
    for (step, report) in [
        (
            "downloading",
            Some(json!({"version": "1.0.0", "state": "downloading"})),
        ),
        (
            "installing",
            Some(json!({"version": "1.0.0", "state": "installing"})),
        ),
        (
            "updated (after the reboot)",
            Some(json!({"version": "2.0.0"})),
        ),
        ("healthy check-in 1", None),
        ("healthy check-in 2: succeeded", None),
    ] {
        let before = snapshot().await;
        let a = check_in(&state, device, &token, report).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let after = snapshot().await;
        steps.push((step, rollout_write_units(&before, &after, true)));
    }
    run(&state).await;
    let a = show(&state, ALICE, &rollout_id).await;
    assert_eq!(stage_counts(&a, 0), (1, 0, 1, 0, 0), "{:?}", a.body);
    let total: u64 = steps.iter().map(|(_, u)| u).sum();
    let live_state = snapshot()
        .await
        .into_values()
        .find(|item| {
            matches!(
                shared::model::entities::ItemKey::of(item),
                Ok(shared::model::entities::ItemKey::DeviceState { .. })
            )
        })
        .expect("the live state");
    let bytes = fleet_testkit::capacity::item_size(&live_state);
    eprintln!(
        "write units of one healthy device's rollout (live state {bytes} B): {steps:?}, total {total}"
    );
    // The offer: one UpdateItem of the live state (a unit a KB); every move after it rides on
    // ingestion's own update, and the part adds no kilobyte to a state this small.
    assert!(bytes < 1024, "{bytes}");
    assert_eq!(steps[0].1, bytes.div_ceil(1024), "{steps:?}");
    assert!(steps[1..].iter().all(|(_, u)| *u == 0), "{steps:?}");
    assert_eq!(total, 1, "{steps:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn rollouts_are_listed_newest_first_and_a_devices_firmware_shows_its_offer() {
    use shared::model::pattern_id::PatternId;
    let (state, _moto) = setup().await;
    let id = package(&state, ALICE, "thermostat", true).await;
    let device = ids_of_stage(0, "lf", 1).remove(0);
    let token = register_device(&state.table, ALICE, &device).await;
    let a = start(&state, ALICE, staged(&id)).await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let firmware_rollout = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let a = start(
        &state,
        ALICE,
        json!({"type": "thermostat", "desired": {"mode": "eco"}}),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let desired_rollout = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();

    // Newest first, a page at a time, one Query each; a firmware rollout without its counts.
    let list = |who: &'static str, query: String| {
        let state = state.clone();
        async move {
            let a = firmware_route(
                &state,
                query
                    .split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .fold(ApiRequest::get("/me/rollouts").caller(who), |r, (k, v)| {
                        r.query(k, v)
                    }),
            )
            .await;
            if a.status == 200 {
                api_doc::api_doc()
                    .check_response("GET /me/rollouts", 200, &a.body)
                    .unwrap();
            }
            a
        }
    };
    let a = list(ALICE, "limit=1".into()).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    spent(PatternId::ListRollouts, &a.used, 1);
    assert_eq!(a.body["rollouts"][0]["rolloutId"], desired_rollout.as_str());
    assert_eq!(a.body["rollouts"][0]["desired"], json!({"mode": "eco"}));
    let cursor = a.body["cursor"].as_str().unwrap().to_string();
    let a = list(ALICE, format!("limit=1&cursor={cursor}")).await;
    spent(PatternId::ListRollouts, &a.used, 1);
    let listed = &a.body["rollouts"][0];
    assert_eq!(listed["rolloutId"], firmware_rollout.as_str());
    assert_eq!(listed["firmware"]["firmwareId"], id.as_str());
    assert!(listed.get("stages").is_none(), "{listed}");
    let a = list(ALICE, format!("limit=1&cursor={firmware_rollout}")).await;
    assert_eq!(a.body, json!({"rollouts": []}));
    let a = list(ALICE, String::new()).await;
    assert_eq!(a.body["rollouts"].as_array().unwrap().len(), 2);
    assert!(a.body.get("cursor").is_none());
    // Another owner sees none of them; bad paging is a 400 naming it, nothing read.
    let a = list(BOB, String::new()).await;
    assert_eq!(a.body, json!({"rollouts": []}));
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("cursor=not-a-rollout", "cursor"),
        ("cursor=USER#x", "cursor"),
    ] {
        let a = list(ALICE, query.into()).await;
        assert_eq!(a.status, 400, "{query}: {:?}", a.body);
        assert_eq!(a.body["error"]["field"], field, "{query}: {:?}", a.body);
        assert_eq!(a.used.requests(), 0, "{query}");
    }

    // A device's firmware: null before any offer, then the offer and how far it got.
    let firmware_of = |who: &'static str, device: String| {
        let state = state.clone();
        async move {
            let a = firmware_route(
                &state,
                ApiRequest::get(&format!("/me/devices/{device}/firmware")).caller(who),
            )
            .await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            api_doc::api_doc()
                .check_response("GET /me/devices/{deviceId}/firmware", 200, &a.body)
                .unwrap();
            spent(PatternId::DeviceFirmware, &a.used, 2);
            a.body["firmware"].clone()
        }
    };
    assert_eq!(firmware_of(ALICE, device.clone()).await, Value::Null);
    assert_eq!(run(&state).await.offered, 1);
    let offer = firmware_of(ALICE, device.clone()).await;
    assert_eq!(offer["phase"], "offered", "{offer}");
    assert_eq!(offer["version"], "2.0.0");
    assert_eq!(offer["rolloutId"], firmware_rollout.as_str());
    assert!(offer.get("runningVersion").is_none(), "{offer}");
    check_in(
        &state,
        &device,
        &token,
        Some(json!({"version": "1.0.0", "state": "downloading"})),
    )
    .await;
    let offer = firmware_of(ALICE, device.clone()).await;
    assert_eq!(
        (
            &offer["phase"],
            &offer["runningVersion"],
            &offer["fromVersion"]
        ),
        (&json!("downloading"), &json!("1.0.0"), &json!("1.0.0")),
        "{offer}"
    );
    check_in(&state, &device, &token, Some(json!({"version": "2.0.0"}))).await;
    let offer = firmware_of(ALICE, device.clone()).await;
    assert_eq!(
        (&offer["phase"], &offer["runningVersion"]),
        (&json!("updated"), &json!("2.0.0")),
        "{offer}"
    );
    // Another owner's device, or an unknown one, is a 404 (the device's read alone).
    for (who, device) in [(BOB, device.clone()), (ALICE, "no-such-device".to_string())] {
        let a = firmware_route(
            &state,
            ApiRequest::get(&format!("/me/devices/{device}/firmware")).caller(who),
        )
        .await;
        assert_eq!(a.status, 404, "{who} {device}: {:?}", a.body);
        spent(PatternId::DeviceFirmware, &a.used, 1);
    }
}
