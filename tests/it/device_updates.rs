//! Every device-updates route end to end on DynamoDB Local: happy paths, 409, 412, 404 for
//! another user's device, and each kind of bad input answered with a 4xx that changes nothing.

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::device::DeviceItem;
use shared::model::entities::{EntityType, ItemKey};
use shared::model::expression::{Expressions, Update};
use shared::model::keys::{user_pk, IndexKeys};
use shared::model::status::DeviceStatus;
use shared::model::token::sha256_hex;
use shared::store::with_expressions::WithExpressions;

const ALICE: &str = "user-alice";
const BOB: &str = "user-bob";

fn register(body: Value) -> ApiRequest {
    ApiRequest::post("/me/devices").json(body)
}

fn patch(device: &str, if_match: &str, body: Value) -> ApiRequest {
    ApiRequest::patch(&format!("/me/devices/{device}"))
        .header("If-Match", if_match)
        .json(body)
}

fn delete(device: &str) -> ApiRequest {
    ApiRequest::delete(&format!("/me/devices/{device}"))
}

fn thermo(id: &str, tags: &[&str]) -> Value {
    json!({"deviceId": id, "name": "Kitchen", "type": "thermostat", "tags": tags})
}

async fn registered(table: &shared::FleetTable, user: &str, id: &str, tags: &[&str]) -> Answer {
    let a = device_updates(table, register(thermo(id, tags)).caller(user)).await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a
}

fn s(item: &Item, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_else(|| panic!("no string {name} in {item:?}"))
}

/// The keys of `user`'s tag links among `items`, in key order.
fn tag_links(items: &[Item], user: &str) -> Vec<ItemKey> {
    items
        .iter()
        .map(key_of)
        .filter(|k| matches!(k, ItemKey::TagLink { user: owner, .. } if *owner == key::user(user)))
        .collect()
}

/// The GSI1 partition key a device with `status` must have (on its live state).
fn status_index_key(table: &shared::FleetTable, device: &str, status: DeviceStatus) -> String {
    IndexKeys::device_state(status, &key::device_id(device), None, &table.config.shards)
        .gsi1pk
        .expect("devices are on GSI1")
}

#[tokio::test]
async fn put_me_creates_then_updates_the_profile_keeping_created_at() {
    let table = fresh_table().await;
    let first = device_updates(
        &table,
        ApiRequest::put("/me")
            .caller(ALICE)
            .json(json!({"name": "Ada"})),
    )
    .await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let profile = &first.body["profile"];
    assert_eq!(profile["userId"], ALICE);
    assert_eq!(profile["name"], "Ada");
    assert_eq!(profile["email"], format!("{ALICE}@example.com"));
    let created = profile["createdAt"].as_str().unwrap().to_string();

    let second = device_updates(
        &table,
        ApiRequest::put("/me")
            .caller(ALICE)
            .json(json!({"name": "  Ada Lovelace "})),
    )
    .await;
    assert_eq!(second.status, 200);
    assert_eq!(second.body["profile"]["name"], "Ada Lovelace");
    assert_eq!(second.body["profile"]["createdAt"], created.as_str());
    let stored = item(&table, &key::profile(ALICE)).await.unwrap();
    assert_eq!(s(&stored, "entityType"), "profile");
    assert_eq!(s(&stored, "name"), "Ada Lovelace");
    assert_eq!(second.used.requests(), 1);
}

#[tokio::test]
async fn register_returns_the_token_once_and_stores_only_its_digest() {
    let table = fresh_table().await;
    let a = registered(&table, ALICE, "thermo-1", &["home", "kitchen", "home"]).await;
    let device = &a.body["device"];
    assert_eq!(device["deviceId"], "thermo-1");
    assert_eq!(device["status"], "active");
    assert_eq!(device["version"], 1);
    assert_eq!(device["tags"], json!(["home", "kitchen"]));
    assert_eq!(a.headers["etag"], "\"1\"");
    assert_eq!(a.headers["location"], "/me/devices/thermo-1");
    let token = a.body["token"].as_str().unwrap();
    assert!(token.starts_with("dft_"));

    let items = table_contents(&table).await;
    let registration = item(&table, &key::registration("thermo-1")).await.unwrap();
    assert_eq!(s(&registration, "userId"), ALICE);
    assert_eq!(s(&registration, "tokenSha256"), sha256_hex(token));
    assert_eq!(s(&registration, "entityType"), "registration");
    let everything = format!("{items:?}");
    assert!(
        !everything.contains(token),
        "the token itself is never stored"
    );

    let stored = item(&table, &key::device(ALICE, "thermo-1")).await.unwrap();
    assert_eq!(s(&stored, "entityType"), "device");
    assert!(
        !stored.contains_key("GSI1PK"),
        "the status index is on the live state"
    );
    let state = item(&table, &key::state(ALICE, 0, "thermo-1"))
        .await
        .unwrap();
    assert_eq!(s(&state, "entityType"), "deviceState");
    assert_eq!(
        s(&state, "GSI1PK"),
        status_index_key(&table, "thermo-1", DeviceStatus::Active)
    );
    assert!(
        !state.contains_key("GSI1SK"),
        "not in 'seen since' until it sends events"
    );
    let fleet = item(&table, &key::fleet(ALICE)).await.unwrap();
    assert_eq!(
        (
            fleet["shards"].as_n().unwrap().as_str(),
            fleet["devices"].as_n().unwrap().as_str()
        ),
        ("1", "1"),
        "an ordinary owner's fleet: one partition"
    );
    assert_eq!(
        tag_links(&items, ALICE),
        [
            key::tag_link(ALICE, "home", "thermo-1"),
            key::tag_link(ALICE, "kitchen", "thermo-1")
        ]
    );
    // Registration, device, its live state, the fleet item and two tag links: nothing else.
    assert_eq!(items.len(), 6);
    assert_eq!(a.used.requests(), 2);
    assert_eq!(
        a.used.count("GetItem"),
        1,
        "the fleet item, to place the device"
    );
    assert_eq!(a.used.count("TransactWriteItems"), 1);
}

#[tokio::test]
async fn a_device_id_taken_by_anyone_is_409_and_changes_nothing() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home"]).await;
    let before = table_contents(&table).await;
    for user in [BOB, ALICE] {
        let a = device_updates(&table, register(thermo("thermo-1", &["x"])).caller(user)).await;
        assert_eq!(a.status, 409, "{user}: {:?}", a.body);
        assert_eq!(a.error_code(), "device_id_taken");
        assert_eq!(table_contents(&table).await, before);
    }
}

#[tokio::test]
async fn patch_updates_status_with_no_read_first() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home"]).await;
    let a = device_updates(
        &table,
        patch("thermo-1", "1", json!({"status": "maintenance"})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["device"]["status"], "maintenance");
    assert_eq!(a.body["device"]["version"], 2);
    assert_eq!(a.headers["etag"], "\"2\"");
    assert_eq!(a.used.requests(), 2, "{:?}", a.used);
    assert_eq!(
        a.used.count("UpdateItem"),
        2,
        "no read first: the device, then its live state's status copy"
    );
    let stored = item(&table, &key::state(ALICE, 0, "thermo-1"))
        .await
        .unwrap();
    assert_eq!(
        s(&stored, "GSI1PK"),
        status_index_key(&table, "thermo-1", DeviceStatus::Maintenance)
    );
    // Quoted and weak ETags are accepted too.
    let a = device_updates(
        &table,
        patch("thermo-1", "W/\"2\"", json!({"status": "active"})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["device"]["version"], 3);
}

#[tokio::test]
async fn a_stale_if_match_is_412_and_changes_nothing() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home"]).await;
    let ok = device_updates(
        &table,
        patch("thermo-1", "1", json!({"status": "error"})).caller(ALICE),
    )
    .await;
    assert_eq!(ok.status, 200);
    let before = table_contents(&table).await;
    let a = device_updates(
        &table,
        patch("thermo-1", "1", json!({"name": "Late", "tags": ["x"]})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 412, "{:?}", a.body);
    assert_eq!(a.error_code(), "version_mismatch");
    assert_eq!(table_contents(&table).await, before);
}

#[tokio::test]
async fn concurrent_updates_with_the_same_version_let_exactly_one_win() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home"]).await;
    let statuses = [
        "inactive",
        "maintenance",
        "error",
        "inactive",
        "maintenance",
    ];
    // Polled together, so the writes really race on DynamoDB Local.
    let answers = futures::future::join_all(statuses.iter().map(|status| {
        device_updates(
            &table,
            patch("thermo-1", "1", json!({"status": status})).caller(ALICE),
        )
    }))
    .await;
    let wins = answers.iter().filter(|a| a.status == 200).count();
    let stale = answers.iter().filter(|a| a.status == 412).count();
    assert_eq!((wins, stale), (1, statuses.len() - 1));
}

#[tokio::test]
async fn tag_and_name_changes_keep_links_and_registration_in_step() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home", "kitchen"]).await;
    let a = device_updates(
        &table,
        patch(
            "thermo-1",
            "1",
            json!({"name": "Upstairs", "tags": ["home", "upstairs"]}),
        )
        .caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["device"]["tags"], json!(["home", "upstairs"]));
    assert_eq!(
        a.used.count("UpdateItem"),
        2,
        "the device, then its live state's name copy"
    );
    assert_eq!(a.used.count("TransactWriteItems"), 1);
    let state = item(&table, &key::state(ALICE, 0, "thermo-1"))
        .await
        .unwrap();
    assert_eq!(s(&state, "name"), "Upstairs", "AP-13 shows the new name");
    let items = table_contents(&table).await;
    assert_eq!(
        tag_links(&items, ALICE),
        [
            key::tag_link(ALICE, "home", "thermo-1"),
            key::tag_link(ALICE, "upstairs", "thermo-1")
        ]
    );
    for link in items
        .iter()
        .filter(|i| matches!(key_of(i), ItemKey::TagLink { .. }))
    {
        assert_eq!(s(link, "name"), "Upstairs");
    }
    let registration = item(&table, &key::registration("thermo-1")).await.unwrap();
    assert_eq!(s(&registration, "deviceName"), "Upstairs");
    // A status-only change after that leaves the links alone, and an empty tag list removes
    // every link.
    let a = device_updates(
        &table,
        patch("thermo-1", "2", json!({"tags": []})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert!(tag_links(&table_contents(&table).await, ALICE).is_empty());
}

#[tokio::test]
async fn another_users_device_is_404_for_every_write_and_changes_nothing() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home"]).await;
    let before = table_contents(&table).await;
    let a = device_updates(
        &table,
        patch("thermo-1", "1", json!({"status": "inactive"})).caller(BOB),
    )
    .await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    assert_eq!(a.error_code(), "not_found");
    let a = device_updates(&table, delete("thermo-1").caller(BOB)).await;
    assert_eq!(a.status, 404);
    assert_eq!(table_contents(&table).await, before);
}

/// A registration attempt that lost the race for an id and was delayed in the network past
/// its client's retries (the request was answered 409 meanwhile) lands after the winner
/// deleted the device: it must not take the id for its sender, who was told it is taken.
/// A registration that begins after the deletion gets the id.
#[tokio::test]
async fn a_registration_attempt_older_than_the_deletion_cannot_land_after_it() {
    use shared::model::ids::{DeviceId, DeviceType, UserId};
    use shared::ops::devices::fleet::FleetSize;
    use shared::ops::devices::register::{DeviceRegistration, RegistrationAttempt};
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &[]).await;
    let late = RegistrationAttempt::new(
        &table,
        &UserId::parse(BOB).unwrap(),
        &DeviceRegistration {
            report_every_seconds: None,
            offline_detection: Default::default(),
            device_id: DeviceId::parse("thermo-1").unwrap(),
            name: "Hall".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            tags: Vec::new(),
        },
        &shared::model::token::DeviceToken::generate().unwrap(),
        FleetSize::default(),
        shared::model::timestamp::Timestamp::now(),
    )
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let deleted = device_updates(&table, delete("thermo-1").caller(ALICE)).await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    let before = table_contents(&table).await;
    let landed = table
        .client
        .transact_write_items()
        .set_transact_items(Some(late.actions))
        .send()
        .await;
    let err = landed.expect_err("the late attempt is refused");
    let reasons = match err.as_service_error() {
        Some(aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c)) => c.cancellation_reasons().to_vec(),
        other => panic!("not a cancellation: {other:?}"),
    };
    assert_eq!(
        reasons[0].code(),
        Some("ConditionalCheckFailed"),
        "{reasons:?}"
    );
    assert_eq!(table_contents(&table).await, before, "nothing changed");
    let bob = device_updates(&table, register(thermo("thermo-1", &[])).caller(BOB)).await;
    assert_eq!(bob.status, 201, "{:?}", bob.body);
    let registration = item(&table, &key::registration("thermo-1")).await.unwrap();
    assert_eq!(s(&registration, "userId"), BOB);
}

/// A deletion by a Lambda whose clock runs ahead leaves a release "in the future": a
/// registration right after it is still a live request and gets the id (timed after the
/// release), not a 409 or a 503.
#[tokio::test]
async fn a_registration_right_after_a_release_timed_ahead_gets_the_id() {
    use shared::model::entities::released_registration::ReleasedRegistrationItem;
    use shared::model::timestamp::Timestamp;
    let table = fresh_table().await;
    let released_at = Timestamp::now().plus_seconds(2);
    let released = ReleasedRegistrationItem::new(
        shared::model::ids::DeviceId::parse("thermo-1").unwrap(),
        released_at,
    );
    put_entity(&table, &released).await;
    let a = device_updates(&table, register(thermo("thermo-1", &[])).caller(BOB)).await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let registration = item(&table, &key::registration("thermo-1")).await.unwrap();
    assert_eq!(s(&registration, "userId"), BOB);
    assert!(
        s(&registration, "createdAt") > released_at.to_string(),
        "timed after the release: {registration:?}"
    );
}

#[tokio::test]
async fn delete_removes_device_links_and_registration_and_frees_the_id() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home", "kitchen"]).await;
    registered(&table, ALICE, "thermo-2", &["home"]).await;
    let a = device_updates(&table, delete("thermo-1").caller(ALICE)).await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    assert_eq!(a.body, Value::Null);
    // Mark, the live state's read (its open alarms), one transaction.
    assert_eq!(a.used.requests(), 3);
    let items = table_contents(&table).await;
    // Only its purge marker (the daily run finds the device's events from it) and the
    // released registration (a fence against late requests, with a TTL).
    let (markers, rest): (Vec<_>, Vec<_>) = items
        .iter()
        .partition(|i| entity_type(i) == Some(EntityType::PurgeMarker));
    assert_eq!(
        markers.iter().map(|m| key_of(m)).collect::<Vec<_>>(),
        [key::purge_marker(ALICE, "thermo-1")]
    );
    assert!(markers[0].contains_key("deletedAt"));
    let (released, rest): (Vec<_>, Vec<_>) = rest
        .into_iter()
        .partition(|i| entity_type(i) == Some(EntityType::ReleasedRegistration));
    assert_eq!(
        released.iter().map(|r| key_of(r)).collect::<Vec<_>>(),
        [key::registration("thermo-1")]
    );
    let expires = released[0]["ttl"].as_n().unwrap().parse::<i64>().unwrap();
    let now = shared::model::timestamp::Timestamp::now().epoch_seconds();
    assert!(
        (now..=now + 86_400).contains(&expires) && !released[0].contains_key("userId"),
        "the fence names no owner or token and expires within a day: {:?}",
        released[0]
    );
    assert!(
        !format!("{rest:?}").contains("thermo-1"),
        "nothing else of thermo-1 is left: {rest:?}"
    );
    assert_eq!(
        tag_links(&items, ALICE),
        [key::tag_link(ALICE, "home", "thermo-2")]
    );
    let again = device_updates(&table, delete("thermo-1").caller(ALICE)).await;
    assert_eq!(again.status, 404);
    // The id is free for anyone now.
    registered(&table, BOB, "thermo-1", &[]).await;
}

#[tokio::test]
async fn a_half_done_delete_hides_the_device_and_a_retry_completes_it() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home"]).await;
    // The first step of a deletion, as if the function stopped right after it.
    table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key::device(ALICE, "thermo-1").attributes()))
        .expressions(Expressions::write(
            Update::new().set(
                DeviceItem::DELETING_AT,
                aws_sdk_dynamodb::types::AttributeValue::S("2024-04-10T10:00:00.000Z".into()),
            ),
            None,
        ))
        .send()
        .await
        .unwrap();
    let user = shared::model::ids::UserId::parse(ALICE).unwrap();
    let id = shared::model::ids::DeviceId::parse("thermo-1").unwrap();
    let seen = shared::ops::devices::read::get_device(&table, &user, &id)
        .await
        .unwrap();
    assert!(seen.is_none(), "a device being deleted is gone for readers");
    let a = device_updates(
        &table,
        patch("thermo-1", "1", json!({"status": "error"})).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 404, "a device being deleted cannot be updated");
    let a = device_updates(&table, delete("thermo-1").caller(ALICE)).await;
    assert_eq!(a.status, 204);
    let mut left: Vec<ItemKey> = table_contents(&table).await.iter().map(key_of).collect();
    left.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(
        left,
        [
            key::fleet(ALICE),
            key::purge_marker(ALICE, "thermo-1"),
            key::registration("thermo-1")
        ],
        "only the released registration, the owner's fleet item and the device's purge marker are left"
    );
    let released = item(&table, &key::registration("thermo-1")).await.unwrap();
    assert_eq!(
        entity_type(&released),
        Some(EntityType::ReleasedRegistration)
    );
    let fleet = item(&table, &key::fleet(ALICE)).await.unwrap();
    assert_eq!(fleet["devices"].as_n().unwrap(), "0");
}

#[tokio::test]
async fn requests_without_claims_are_401_and_change_nothing() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &[]).await;
    let before = table_contents(&table).await;
    for request in [
        ApiRequest::put("/me").json(json!({"name": "x"})),
        register(thermo("thermo-9", &[])),
        patch("thermo-1", "1", json!({"status": "error"})),
        delete("thermo-1"),
    ] {
        let a = device_updates(&table, request).await;
        assert_eq!(a.status, 401, "{:?}", a.body);
        assert_eq!(a.error_code(), "unauthorized");
        assert_eq!(a.used.requests(), 0);
    }
    assert_eq!(table_contents(&table).await, before);
}

#[tokio::test]
async fn bad_input_is_a_4xx_naming_the_field_and_changes_nothing() {
    let table = fresh_table().await;
    registered(&table, ALICE, "thermo-1", &["home"]).await;
    let before = table_contents(&table).await;
    let long = "x".repeat(101);
    let eleven_tags: Vec<String> = (0..11).map(|i| format!("t{i}")).collect();
    let cases: Vec<(&str, ApiRequest, u16, &str)> = vec![
        (
            "not JSON",
            ApiRequest::put("/me").body("{name"),
            400,
            "body",
        ),
        ("empty body", ApiRequest::put("/me").body(""), 400, "body"),
        (
            "trailing data",
            ApiRequest::put("/me").body("{\"name\":\"a\"} x"),
            400,
            "body",
        ),
        (
            "unknown field",
            ApiRequest::put("/me").json(json!({"name": "a", "admin": true})),
            400,
            "admin",
        ),
        (
            "blank name",
            ApiRequest::put("/me").json(json!({"name": "   "})),
            400,
            "name",
        ),
        (
            "long name",
            ApiRequest::put("/me").json(json!({"name": long})),
            400,
            "name",
        ),
        (
            "control char in name",
            ApiRequest::put("/me").json(json!({"name": "a\u{1}b"})),
            400,
            "name",
        ),
        (
            "wrong type",
            ApiRequest::put("/me").json(json!({"name": 5})),
            400,
            "name",
        ),
        (
            "key injection",
            register(thermo(&user_pk(&key::user("user-bob")), &[])),
            400,
            "deviceId",
        ),
        (
            "encoded delimiter",
            register(thermo("a%23b", &[])),
            400,
            "deviceId",
        ),
        (
            "control char id",
            register(thermo("a\nb", &[])),
            400,
            "deviceId",
        ),
        ("empty id", register(thermo("", &[])), 400, "deviceId"),
        (
            "long id",
            register(thermo(&"d".repeat(65), &[])),
            400,
            "deviceId",
        ),
        (
            "missing type",
            register(json!({"deviceId": "d-1", "name": "n"})),
            400,
            "body",
        ),
        (
            "bad type",
            register(json!({"deviceId": "d-1", "name": "n", "type": "a#b"})),
            400,
            "type",
        ),
        (
            "bad tag",
            register(thermo("d-1", &["ok", "no#tag"])),
            400,
            "tags[1]",
        ),
        (
            "too many tags",
            register(json!({"deviceId": "d-1", "name": "n", "type": "t", "tags": eleven_tags})),
            400,
            "tags",
        ),
        (
            "bad status",
            patch("thermo-1", "1", json!({"status": "broken"})),
            400,
            "status",
        ),
        (
            "empty patch",
            patch("thermo-1", "1", json!({})),
            400,
            "body",
        ),
        (
            "version in body",
            patch("thermo-1", "1", json!({"version": 7})),
            400,
            "version",
        ),
        (
            "bad If-Match",
            patch("thermo-1", "one", json!({"status": "error"})),
            400,
            "If-Match",
        ),
        (
            "zero If-Match",
            patch("thermo-1", "0", json!({"status": "error"})),
            400,
            "If-Match",
        ),
        (
            "bad path id",
            ApiRequest::delete("/me/devices/a%23b"),
            400,
            "deviceId",
        ),
        (
            "missing If-Match",
            ApiRequest::patch("/me/devices/thermo-1").json(json!({"status": "error"})),
            428,
            "If-Match",
        ),
        (
            "too large",
            ApiRequest::put("/me").json(json!({"name": "x".repeat(20_000)})),
            413,
            "",
        ),
    ];
    for (what, request, status, field) in cases {
        let a = device_updates(&table, request.caller(ALICE)).await;
        assert_eq!(a.status, status, "{what}: {:?}", a.body);
        assert_eq!(a.error_field(), field, "{what}: {:?}", a.body);
        assert!(
            a.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}"
        );
        assert_eq!(
            a.used.requests(),
            0,
            "{what}: rejected before any DynamoDB call"
        );
    }
    assert_eq!(table_contents(&table).await, before);
}

#[tokio::test]
async fn a_route_this_function_does_not_serve_is_404() {
    let table = fresh_table().await;
    let a = device_updates(&table, ApiRequest::get("/me").caller(ALICE)).await;
    assert_eq!(a.status, 404);
    assert_eq!(a.error_code(), "no_route");
}
