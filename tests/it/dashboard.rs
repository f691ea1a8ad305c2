//! Every read route end to end on the reference dataset: answers, paging with opaque cursors,
//! 400/401/403/404 paths, expired events, and cross-user isolation.

use std::collections::BTreeSet;

use base64::Engine as _;
use fleet_testkit::reference::{ALICE, BOB};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::event::EventItem;
use shared::model::entities::{Entity, ItemKey};
use shared::model::ids::EventId;
use shared::model::timestamp::Timestamp;
use shared::FleetTable;

const FROM: &str = "2026-11-20T00:00:00Z";
const TO: &str = "2026-11-20T23:59:59Z";
const DEV0: &str = "ref-alice-dev-0";

/// A reference dataset of the test's own, for tests that write to it.
async fn reference() -> FleetTable {
    reference_table().await.0
}

/// The reference dataset shared by the tests that only read it.
async fn read_only_reference() -> FleetTable {
    read_only_reference_table().await
}

fn device_events(device: &str) -> ApiRequest {
    ApiRequest::get(&format!("/me/devices/{device}/events"))
        .query("from", FROM)
        .query("to", TO)
}

/// Follows cursors from `first` to the end; returns every item of `field` and the pages' costs.
async fn all_pages(
    table: &FleetTable,
    first: impl Fn(Option<&str>) -> ApiRequest,
    field: &str,
) -> (Vec<Value>, Vec<Answer>) {
    let mut items = Vec::new();
    let mut answers = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let a = dashboard(table, first(cursor.as_deref())).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        items.extend(a.body[field].as_array().unwrap().iter().cloned());
        cursor = a.body["cursor"].as_str().map(str::to_string);
        answers.push(a);
        if cursor.is_none() {
            break;
        }
        assert!(answers.len() < 50, "paging does not end");
    }
    (items, answers)
}

#[tokio::test]
async fn profile_and_dashboard_show_the_callers_own_data() {
    let table = read_only_reference().await;
    let a = dashboard(&table, ApiRequest::get("/me").caller(ALICE)).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["profile"]["name"], "Alice");
    let a = dashboard(&table, ApiRequest::get("/me").caller("nobody-yet")).await;
    assert_eq!((a.status, a.error_code()), (404, "not_found"));

    let a = dashboard(&table, ApiRequest::get("/me/dashboard").caller(ALICE)).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.used.requests(), 1);
    assert_eq!(a.body["profile"]["userId"], ALICE);
    assert_eq!(a.body["cursor"], Value::Null);
    let devices = a.body["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 10);
    for d in devices {
        assert!(d["deviceId"].as_str().unwrap().starts_with("ref-alice-"));
        assert_eq!(d["recent"].as_array().unwrap().len(), 10);
        assert!(d["latest"]["temperature"]["value"].is_number());
        assert!(d["latest"]["humidity"]["at"].is_string());
    }
    let b = dashboard(&table, ApiRequest::get("/me/dashboard").caller(BOB)).await;
    assert_eq!(b.body["devices"].as_array().unwrap().len(), 2);
    assert!(
        !b.body.to_string().contains("ref-alice"),
        "no other user's data"
    );
}

/// The console polls the dashboard: an unchanged fleet answers 304 without a body for the same
/// single read, and any change (here a new device) answers 200 with a new tag.
#[tokio::test]
async fn an_unchanged_dashboard_answers_304_to_its_etag() {
    let table = reference().await;
    let first = dashboard(&table, ApiRequest::get("/me/dashboard").caller(ALICE)).await;
    assert_eq!(first.status, 200);
    let tag = first.headers["etag"].to_str().unwrap().to_string();
    assert!(
        tag.starts_with('"') && tag.ends_with('"'),
        "a strong tag: {tag}"
    );

    let again = dashboard(
        &table,
        ApiRequest::get("/me/dashboard")
            .caller(ALICE)
            .header("If-None-Match", &tag),
    )
    .await;
    assert_eq!(again.status, 304);
    assert_eq!(again.body, Value::Null, "no body on 304");
    assert_eq!(again.headers["etag"].to_str().unwrap(), tag);
    assert_eq!(again.used.requests(), 1, "no read beyond AP-DASH's own");

    let bob = dashboard(
        &table,
        ApiRequest::get("/me/dashboard")
            .caller(BOB)
            .header("If-None-Match", &tag),
    )
    .await;
    assert_eq!(bob.status, 200, "another fleet never matches Alice's tag");

    register_device(&table, ALICE, "etag-new-device").await;
    let changed = dashboard(
        &table,
        ApiRequest::get("/me/dashboard")
            .caller(ALICE)
            .header("If-None-Match", &format!("W/{tag}")),
    )
    .await;
    assert_eq!(changed.status, 200);
    assert_ne!(changed.headers["etag"].to_str().unwrap(), tag);
    assert!(changed.body.to_string().contains("etag-new-device"));
}

#[tokio::test]
async fn devices_page_with_cursors_and_filter_by_tag() {
    let table = read_only_reference().await;
    let (devices, pages) = all_pages(
        &table,
        |cursor| {
            let r = ApiRequest::get("/me/devices")
                .caller(ALICE)
                .query("limit", "3");
            match cursor {
                Some(c) => r.query("cursor", c),
                None => r,
            }
        },
        "devices",
    )
    .await;
    let ids: BTreeSet<&str> = devices
        .iter()
        .map(|d| d["deviceId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 10, "every device exactly once");
    assert!(
        pages.iter().all(|p| p.used.requests() == 1),
        "one Query per page"
    );
    let a = dashboard(
        &table,
        ApiRequest::get("/me/devices")
            .caller(ALICE)
            .query("tag", "kitchen"),
    )
    .await;
    assert_eq!(a.status, 200);
    let tagged: Vec<&str> = a.body["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["deviceId"].as_str().unwrap())
        .collect();
    assert_eq!(tagged.len(), 5);
    assert!(tagged
        .iter()
        .all(|id| id.ends_with(['0', '2', '4', '6', '8'])));
    assert_eq!(a.body["devices"][0]["name"], "Sensor 0");
    let a = dashboard(
        &table,
        ApiRequest::get("/me/devices")
            .caller(BOB)
            .query("tag", "kitchen"),
    )
    .await;
    assert_eq!(
        a.body["devices"].as_array().unwrap().len(),
        1,
        "only Bob's own tagged device"
    );
}

#[tokio::test]
async fn a_device_and_its_events_newest_first_in_pages() {
    let table = read_only_reference().await;
    let a = dashboard(
        &table,
        ApiRequest::get(&format!("/me/devices/{DEV0}")).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["device"]["deviceId"], DEV0);
    let (events, pages) = all_pages(
        &table,
        |cursor| {
            let r = device_events(DEV0).caller(ALICE).query("limit", "4");
            match cursor {
                Some(c) => r.query("cursor", c),
                None => r,
            }
        },
        "events",
    )
    .await;
    assert_eq!(events.len(), 10);
    assert_eq!(pages.len(), 3);
    let times: Vec<&str> = events.iter().map(|e| e["at"].as_str().unwrap()).collect();
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "newest first across pages");
    assert_eq!(events[0]["id"], "e-09");
    assert!(events[0]["value"].is_number() && events[0]["type"].is_string());
    // A range outside the data is an empty page, not a 404.
    let a = dashboard(
        &table,
        device_events(DEV0)
            .caller(ALICE)
            .query("from", "2026-11-19T00:00:00Z")
            .query("to", "2026-11-19T23:00:00Z"),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["events"], json!([]));
}

#[tokio::test]
async fn another_users_device_is_404_and_shows_nothing() {
    let table = read_only_reference().await;
    let bob_device = "ref-bob-dev-0";
    let a = dashboard(
        &table,
        ApiRequest::get(&format!("/me/devices/{bob_device}")).caller(ALICE),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (404, "not_found"));
    let a = dashboard(&table, device_events(bob_device).caller(ALICE)).await;
    assert_eq!((a.status, a.error_code()), (404, "not_found"));
    assert!(!a.body.to_string().contains("e-0"));
    let a = dashboard(
        &table,
        ApiRequest::get("/me/events")
            .caller(BOB)
            .query("from", FROM)
            .query("to", TO)
            .query("limit", "100"),
    )
    .await;
    assert_eq!(a.body["events"].as_array().unwrap().len(), 10);
    assert!(a.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["deviceId"].as_str().unwrap().starts_with("ref-bob-")));
}

#[tokio::test]
async fn a_users_events_across_devices_page_through_every_device_exactly_once() {
    let table = read_only_reference().await;
    let (events, pages) = all_pages(
        &table,
        |cursor| {
            let r = ApiRequest::get("/me/events")
                .caller(ALICE)
                .query("from", FROM)
                .query("to", TO)
                .query("limit", "7");
            match cursor {
                Some(c) => r.query("cursor", c),
                None => r,
            }
        },
        "events",
    )
    .await;
    assert_eq!(events.len(), 100);
    let keys: BTreeSet<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["deviceId"].as_str().unwrap().into(),
                e["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(keys.len(), 100, "no event twice");
    let times: Vec<&str> = events.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first across pages"
    );
    // Alice's 10 devices are one group: the group is listed once, then each page reads at
    // most one Query per device.
    let group = shared::ops::events::DEVICE_GROUP as u32;
    assert!(
        pages.iter().all(|p| p.used.requests() <= group + 1),
        "the device list plus one Query per device, per page: {:?}",
        pages.iter().map(|p| p.used.requests()).collect::<Vec<_>>()
    );
    assert!(
        pages[1..].iter().all(|p| p.used.requests() <= group),
        "later pages resume the group without listing it again"
    );
}

#[tokio::test]
async fn expired_events_are_never_returned() {
    let table = reference().await;
    // An event whose ttl has passed but which DynamoDB has not deleted yet.
    let at = |t: &str| Timestamp::parse_field("at", t).unwrap();
    let reference_event = item(
        &table,
        &ItemKey::Event {
            user: key::user(ALICE),
            device: key::device_id(DEV0),
            at: at("2026-11-20T11:00:00Z"),
            event: EventId::parse("e-00").unwrap(),
        },
    )
    .await
    .expect("reference event");
    let mut expired = EventItem::from_item(reference_event.into_iter().collect()).unwrap();
    expired.id = EventId::parse("expired").unwrap();
    expired.at = at("2026-11-20T11:30:00Z");
    // A searchable type, so it is on GSI1 too (AP-09 must filter it as well).
    expired.event_type = shared::model::ids::EventType::parse("alarm").unwrap();
    expired.ttl = 1000;
    put_entity(&table, &expired).await;
    let a = dashboard(&table, device_events(DEV0).caller(ALICE)).await;
    assert_eq!(a.body["events"].as_array().unwrap().len(), 10);
    assert!(!a.body.to_string().contains("expired"));
    let a = dashboard(
        &table,
        ApiRequest::get("/me/events")
            .caller(ALICE)
            .query("from", FROM)
            .query("to", TO)
            .query("limit", "100"),
    )
    .await;
    assert!(!a.body.to_string().contains("expired"));
    let a = dashboard(
        &table,
        ApiRequest::get("/admin/events")
            .admin("ops")
            .query("type", "alarm")
            .query("from", FROM)
            .query("to", TO)
            .query("limit", "100"),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(!a.body.to_string().contains("expired"));
}

fn tamper(cursor: &str, from: &str, to: &str) -> String {
    tamper_each(cursor, &[(from.to_string(), to.to_string())])
}

/// `cursor` with every `from` in it replaced by its `to` (at least one must be there).
fn tamper_each(cursor: &str, replacements: &[(String, String)]) -> String {
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut text = String::from_utf8(engine.decode(cursor).unwrap()).unwrap();
    assert!(
        replacements.iter().any(|(from, _)| text.contains(from)),
        "{text}"
    );
    for (from, to) in replacements {
        text = text.replace(from, to);
    }
    engine.encode(text)
}

#[tokio::test]
async fn cursors_cannot_be_edited_or_reused_to_reach_other_data() {
    let table = read_only_reference().await;
    let first = dashboard(
        &table,
        device_events(DEV0).caller(ALICE).query("limit", "2"),
    )
    .await;
    let cursor = first.body["cursor"].as_str().unwrap().to_string();
    // Aimed at Bob's device partition.
    let forged = tamper(
        &cursor,
        &key::event_partition(ALICE, DEV0),
        &key::event_partition(BOB, "ref-bob-dev-0"),
    );
    let a = dashboard(
        &table,
        device_events("ref-bob-dev-0")
            .caller(ALICE)
            .query("cursor", &forged),
    )
    .await;
    assert_eq!((a.status, a.error_field()), (400, "cursor"), "{:?}", a.body);
    assert_eq!(a.used.requests(), 0, "rejected before any read");
    let a = dashboard(
        &table,
        device_events(DEV0).caller(ALICE).query("cursor", &forged),
    )
    .await;
    assert_eq!((a.status, a.error_field()), (400, "cursor"), "{:?}", a.body);
    // Bob replaying Alice's cursor on his own device.
    let a = dashboard(
        &table,
        device_events("ref-bob-dev-0")
            .caller(BOB)
            .query("cursor", &cursor),
    )
    .await;
    assert_eq!((a.status, a.error_field()), (400, "cursor"));
    // A cursor of another listing, and garbage.
    let devices = dashboard(
        &table,
        ApiRequest::get("/me/devices")
            .caller(ALICE)
            .query("limit", "2"),
    )
    .await;
    let device_cursor = devices.body["cursor"].as_str().unwrap();
    for bad in [device_cursor, "garbage", "eyJwIjoiQVAtMDQiLCJrIjpbXX0"] {
        let a = dashboard(
            &table,
            device_events(DEV0).caller(ALICE).query("cursor", bad),
        )
        .await;
        assert_eq!((a.status, a.error_field()), (400, "cursor"), "{bad}");
        assert_eq!(a.used.requests(), 0);
    }
    let events = dashboard(
        &table,
        ApiRequest::get("/me/events")
            .caller(ALICE)
            .query("from", FROM)
            .query("to", TO)
            .query("limit", "5"),
    )
    .await;
    let events_cursor = events.body["cursor"].as_str().unwrap();
    // Each device partition in the cursor aimed at Bob's.
    let device_partitions: Vec<(String, String)> = (0..10)
        .map(|d| {
            (
                key::event_partition(ALICE, &format!("{ALICE}-dev-{d}")),
                key::event_partition(BOB, &format!("{ALICE}-dev-{d}")),
            )
        })
        .collect();
    let forged = tamper_each(events_cursor, &device_partitions);
    let a = dashboard(
        &table,
        ApiRequest::get("/me/events")
            .caller(ALICE)
            .query("from", FROM)
            .query("to", TO)
            .query("cursor", &forged),
    )
    .await;
    assert_eq!((a.status, a.error_field()), (400, "cursor"));
    let a = dashboard(
        &table,
        ApiRequest::get("/me/events")
            .caller(BOB)
            .query("from", FROM)
            .query("to", TO)
            .query("cursor", events_cursor),
    )
    .await;
    assert_eq!((a.status, a.error_field()), (400, "cursor"));
}

#[tokio::test]
async fn bad_parameters_are_400_naming_the_parameter() {
    let table = read_only_reference().await;
    let cases = [
        (
            device_events(DEV0).caller(ALICE).query("limit", "0"),
            "limit",
        ),
        (
            device_events(DEV0).caller(ALICE).query("limit", "101"),
            "limit",
        ),
        (
            device_events(DEV0).caller(ALICE).query("limit", "ten"),
            "limit",
        ),
        (
            device_events(DEV0).caller(ALICE).query("from", "yesterday"),
            "from",
        ),
        (
            device_events(DEV0)
                .caller(ALICE)
                .query("from", TO)
                .query("to", FROM),
            "from",
        ),
        (device_events("a#b").caller(ALICE), "deviceId"),
        (
            ApiRequest::get("/me/devices")
                .caller(ALICE)
                .query("tag", "a#b"),
            "tag",
        ),
        (ApiRequest::get("/admin/events").admin("ops"), "type"),
        (
            ApiRequest::get("/admin/events")
                .admin("ops")
                .query("type", "temperature")
                .query("from", "2026-11-01T00:00:00Z")
                .query("to", TO),
            "from",
        ),
        (
            ApiRequest::get("/admin/devices")
                .admin("ops")
                .query("status", "bogus"),
            "status",
        ),
        (
            ApiRequest::get("/admin/devices")
                .admin("ops")
                .query("status", "active")
                .query("seenSince", "soon"),
            "seenSince",
        ),
        (
            ApiRequest::get("/admin/reports/2026-13-01").admin("ops"),
            "date",
        ),
    ];
    for (request, field) in cases {
        let a = dashboard(&table, request).await;
        assert_eq!((a.status, a.error_field()), (400, field), "{:?}", a.body);
        assert_eq!(a.used.requests(), 0, "{field}: rejected before any read");
    }
}

#[tokio::test]
async fn operator_routes_need_the_admin_group() {
    let table = read_only_reference().await;
    let routes = [
        ApiRequest::get("/admin/events")
            .query("type", "temperature")
            .query("from", FROM)
            .query("to", TO),
        ApiRequest::get("/admin/devices")
            .query("status", "active")
            .query("seenSince", FROM),
        ApiRequest::get("/admin/reports/2026-11-20"),
    ];
    for request in routes {
        let a = dashboard(&table, request.caller(ALICE)).await;
        assert_eq!(
            (a.status, a.error_code()),
            (403, "forbidden"),
            "{:?}",
            a.body
        );
        assert_eq!(a.used.requests(), 0);
    }
    let a = dashboard(
        &table,
        ApiRequest::get("/admin/events")
            .admin("ops")
            .query("type", "alarm")
            .query("from", FROM)
            .query("to", TO)
            .query("limit", "100"),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let events = a.body["events"].as_array().unwrap();
    assert_eq!(
        events.len(),
        12,
        "one alarm on each of Alice's 10 devices and Bob's 2"
    );
    assert!(events.iter().all(|e| e["type"] == "alarm"));
    let users: BTreeSet<&str> = events
        .iter()
        .map(|e| e["userId"].as_str().unwrap())
        .collect();
    assert_eq!(users, BTreeSet::from([ALICE, BOB]));
    assert!(events
        .windows(2)
        .all(|w| w[0]["at"].as_str() >= w[1]["at"].as_str()));
    assert_eq!(a.body["devices"], 12);
    assert_eq!(a.body["complete"], true, "12 devices: every one is read");
    let alarm = shared::model::ids::EventType::parse("alarm").unwrap();
    assert_eq!(
        a.used.requests(),
        u32::from(table.config.shards.type_shards(&alarm).unwrap()) + 12,
        "one Query per (day, shard) of the type marks, then one per device with an alarm"
    );
    // Telemetry types are in no index (one write unit per event): asking for one is a 400
    // naming the searchable types, before any read.
    let a = dashboard(
        &table,
        ApiRequest::get("/admin/events")
            .admin("ops")
            .query("type", "temperature")
            .query("from", FROM)
            .query("to", TO),
    )
    .await;
    assert_eq!((a.status, a.error_field()), (400, "type"), "{:?}", a.body);
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("alarm"),
        "{:?}",
        a.body
    );
    assert_eq!(a.used.requests(), 0);

    let a = dashboard(
        &table,
        ApiRequest::get("/admin/devices")
            .admin("ops")
            .query("status", "active")
            .query("seenSince", FROM),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["devices"].as_array().unwrap().len(), 12);
    let a = dashboard(
        &table,
        ApiRequest::get("/admin/devices")
            .admin("ops")
            .query("status", "maintenance")
            .query("seenSince", FROM),
    )
    .await;
    assert_eq!(a.body["devices"], json!([]));

    let a = dashboard(
        &table,
        ApiRequest::get("/admin/reports/2026-11-20").admin("ops"),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["date"], "2026-11-20");
    let a = dashboard(
        &table,
        ApiRequest::get("/admin/reports/2026-11-21").admin("ops"),
    )
    .await;
    assert_eq!((a.status, a.error_code()), (404, "not_found"));
}

#[tokio::test]
async fn every_read_route_needs_claims() {
    let table = read_only_reference().await;
    for route in template()
        .routes
        .iter()
        .filter(|r| r.code_uri == "functions/dashboard")
    {
        let a = dashboard(&table, ApiRequest::new(&route.route_key(), &route.path)).await;
        assert_eq!(a.status, 401, "{}", route.route_key());
        assert_eq!(a.used.requests(), 0);
    }
}
