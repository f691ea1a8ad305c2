//! Moving a device between a person's fleet and an organization's (issue 33 item 3, AP-M1) on
//! DynamoDB Local: a month of one-minute readings with its summaries, twin, commands and
//! alarms arrives at the new owner and leaves nothing at the old one, the token keeps working
//! (a warm ingest Lambda's cached registration too), the fleet counts follow, deletion still
//! answers 401, and the work stays within its request budget. Prints the measured cost.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use fleet_testkit::pricing::{self, WriteKind};
use fleet_tests::*;
use serde_json::json;
use shared::model::entities::alarm::alarm_pk;
use shared::model::entities::event::EventItem;
use shared::model::entities::fleet::FleetItem;
use shared::model::entities::registration::RegistrationItem;
use shared::model::entities::series::SeriesItem;
use shared::model::entities::{Entity, EntityType, ItemKey};
use shared::model::ids::{DeviceId, DeviceType, EventId, EventType, UserId};
use shared::model::keys::event_pk;
use shared::model::readings::EventValue;
use shared::model::series::{five_minute_buckets, Buckets, Resolution};
use shared::model::timestamp::Timestamp;
use shared::ops::devices::r#move::{
    continue_moves, move_device, move_device_until, running_move, HistoryStatus,
    MOVE_REQUEST_BUDGET,
};
use shared::ops::devices::register::{register_device as register, DeviceRegistration};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::store::metrics::{MeterSnapshot, RequestMeter};
use shared::{FleetError, FleetTable};

const PERSON: &str = "move-alice";
const ORG_ID: &str = "o0123456789abcdef0123";
const ORG: &str = "org:o0123456789abcdef0123";
const MINUTES: i64 = 30 * 24 * 60;

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn device(id: &str) -> DeviceId {
    DeviceId::parse(id).unwrap()
}

/// A fresh table in which organization [`ORG_ID`] exists, [`PERSON`] its owner (a move into
/// an organization checks it exists and is not being deleted).
async fn table_with_org() -> FleetTable {
    use shared::model::entities::membership::MembershipItem;
    use shared::model::entities::org_member::OrgMemberItem;
    use shared::model::entities::organization::OrganizationItem;
    use shared::model::ids::OrgId;
    use shared::model::org::Role;
    let table = fresh_table().await;
    let org = OrgId::parse(ORG_ID).unwrap();
    let now = Timestamp::now();
    let shards = &table.config.shards;
    put_item(
        &table,
        OrganizationItem {
            org_id: org.clone(),
            name: "Move Labs".into(),
            owner: user(PERSON),
            created_by: user(PERSON),
            created_at: now,
            member_count: 1,
            deleting_at: None,
        }
        .to_item(shards)
        .unwrap(),
    )
    .await;
    put_item(
        &table,
        OrgMemberItem {
            org_id: org.clone(),
            user_id: user(PERSON),
            role: Role::Owner,
            joined_at: now,
            email: None,
        }
        .to_item(shards)
        .unwrap(),
    )
    .await;
    put_item(
        &table,
        MembershipItem {
            user_id: user(PERSON),
            org_id: org,
            role: Role::Owner,
            joined_at: now,
        }
        .to_item(shards)
        .unwrap(),
    )
    .await;
    table
}

/// The device-updates function's timeout in template.yaml (its own, else the Globals').
fn function_timeout() -> Duration {
    let text = std::fs::read_to_string(fleet_testkit::template::default_template_path()).unwrap();
    let doc: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    let own = &doc["Resources"]["DeviceUpdatesFunction"]["Properties"]["Timeout"];
    let seconds = own
        .as_u64()
        .or_else(|| doc["Globals"]["Function"]["Timeout"].as_u64())
        .expect("a timeout for DeviceUpdatesFunction");
    Duration::from_secs(seconds)
}

#[test]
fn a_move_request_copies_for_at_most_half_the_function_timeout() {
    let timeout = function_timeout();
    assert!(
        MOVE_REQUEST_BUDGET * 2 <= timeout,
        "MOVE_REQUEST_BUDGET {MOVE_REQUEST_BUDGET:?} is more than half the device-updates timeout {timeout:?} (template.yaml)"
    );
}

/// A device registered to an owner key that no route reaches yet (an organization's).
async fn register_for(table: &FleetTable, owner: &str, id: &str) {
    register(
        table,
        &user(owner),
        DeviceRegistration {
            device_id: device(id),
            name: "Org meter".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            tags: vec![],
            report_every_seconds: None,
            offline_detection: Default::default(),
        },
    )
    .await
    .unwrap();
}

/// Every item of a partition, read consistently.
async fn partition(table: &FleetTable, pk: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = table
            .client
            .query()
            .table_name(table.name())
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(
                ":pk",
                aws_sdk_dynamodb::types::AttributeValue::S(pk.into()),
            )
            .consistent_read(true)
            .limit(2_000)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(key) => start = Some(key),
            None => return items,
        }
    }
}

/// The items of the partitions a move of `id` from `from` to `to` touches (pricing's
/// snapshot, without scanning the whole table).
async fn move_snapshot(
    table: &FleetTable,
    id: &DeviceId,
    from: &UserId,
    to: &UserId,
) -> pricing::Snapshot {
    use shared::model::keys::user_pk;
    let registration = ItemKey::Registration { device: id.clone() }
        .primary_key()
        .pk;
    let mut snapshot = pricing::Snapshot::new();
    for pk in [
        event_pk(from, id),
        event_pk(to, id),
        alarm_pk(from, id),
        alarm_pk(to, id),
        user_pk(from),
        user_pk(to),
        registration,
    ] {
        for item in partition(table, &pk).await {
            let key = (
                item["PK"].as_s().unwrap().clone(),
                item["SK"].as_s().unwrap().clone(),
            );
            snapshot.insert(key, item);
        }
    }
    snapshot
}

fn by_type(items: &[Item]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for item in items {
        let kind = entity_type(item).map(|t| t.as_str()).unwrap_or("none");
        *counts.entry(kind).or_default() += 1;
    }
    counts
}

async fn fleet_devices(table: &FleetTable, owner: &str) -> u64 {
    let item = item(table, &key::fleet(owner)).await.unwrap();
    FleetItem::from_item(item).unwrap().devices
}

/// Writes `items` with BatchWriteItem, 8 calls at a time (seeding, outside any meter).
async fn seed(table: &FleetTable, items: Vec<Item>) {
    let batches: Vec<Vec<WriteRequest>> = items
        .chunks(25)
        .map(|chunk| {
            chunk
                .iter()
                .map(|item| {
                    WriteRequest::builder()
                        .put_request(
                            PutRequest::builder()
                                .set_item(Some(item.clone()))
                                .build()
                                .unwrap(),
                        )
                        .build()
                })
                .collect()
        })
        .collect();
    for group in batches.chunks(8) {
        futures::future::join_all(group.iter().map(|batch| async {
            let mut pending = batch.clone();
            while !pending.is_empty() {
                // DynamoDB Local under other tests' load may time an attempt out: send again.
                let Ok(out) = table
                    .client
                    .batch_write_item()
                    .request_items(table.name(), pending.clone())
                    .send()
                    .await
                else {
                    continue;
                };
                pending = out
                    .unprocessed_items
                    .and_then(|mut u| u.remove(table.name()))
                    .unwrap_or_default();
            }
        }))
        .await;
    }
}

/// 30 days of one-minute `power` readings ending an hour ago, and their summary items (the
/// 5-minute blocks, the days' hours, the months' days), as ingestion would have left them.
fn month_of_readings(table: &FleetTable, owner: &UserId, id: &DeviceId) -> (Vec<Item>, usize) {
    let now = Timestamp::now().epoch_millis();
    let end = now - now % 60_000 - 3_600_000;
    let first = end - MINUTES * 60_000;
    let kind = EventType::parse("power").unwrap();
    let ttl = now / 1000 + 90 * 86_400;
    let mut items = Vec::new();
    let mut values = Vec::new();
    for i in 0..MINUTES {
        let at = first + i * 60_000;
        let value = EventValue::Number((i % 500) as f64 / 10.0);
        values.push((at, value.clone()));
        let event = EventItem {
            user_id: owner.clone(),
            device_id: id.clone(),
            id: EventId::parse(format!("p-{i}")).unwrap(),
            event_type: kind.clone(),
            value,
            at: Timestamp::from_epoch_millis(at).unwrap(),
            device_name: "Boiler room".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            ttl,
            registered_at: None,
        };
        items.push(event.to_item(&table.config.shards).unwrap());
    }
    let buckets = five_minute_buckets(values.iter().map(|(at, v)| (*at, v)));
    let mut summaries = Vec::new();
    let mut grouped: BTreeMap<(Resolution, i64), Buckets> = BTreeMap::new();
    for (start, bucket) in &buckets.0 {
        let block = shared::model::series::resolution::block_start(*start);
        grouped
            .entry((Resolution::FiveMinutes, block))
            .or_default()
            .add(*start, bucket);
    }
    for (start, bucket) in &buckets.coarsen(Resolution::Hour).0 {
        let day = Resolution::Day.bucket_start(*start);
        grouped
            .entry((Resolution::Hour, day))
            .or_default()
            .add(*start, bucket);
    }
    for (start, bucket) in &buckets.coarsen(Resolution::Day).0 {
        let month = shared::model::series::resolution::month_start(*start);
        grouped
            .entry((Resolution::Day, month))
            .or_default()
            .add(*start, bucket);
    }
    for ((resolution, start), buckets) in grouped {
        let item = SeriesItem {
            user_id: owner.clone(),
            device_id: id.clone(),
            event_type: kind.clone(),
            resolution,
            start: Timestamp::from_epoch_millis(start).unwrap(),
            buckets,
            ids: Default::default(),
            ttl,
            registered_at: None,
        };
        summaries.push(item.to_item(&table.config.shards).unwrap());
    }
    let count = summaries.len();
    items.extend(summaries);
    (items, count)
}

fn add(total: &mut MeterSnapshot, used: &MeterSnapshot) {
    for (op, n) in &used.operations {
        *total.operations.entry(op.clone()).or_default() += n;
    }
    total.attempts += used.attempts;
    total.read_units += used.read_units;
    total.write_units += used.write_units;
}

fn requests(used: &MeterSnapshot) -> u32 {
    used.operations.values().sum()
}

#[tokio::test]
async fn a_month_of_minute_readings_moves_to_an_organization_with_everything_and_the_token_still_ingests(
) {
    let table = table_with_org().await;
    let id = device("meter-1");
    let token = register_device(&table, PERSON, "meter-1").await;
    register_for(&table, ORG, "org-meter").await;

    // An alarm rule on the device and a reading that raises it; a desired state, a reported
    // one and a queued command: every kind of item the device's history holds.
    let rule = json!({"name": "Boiler too hot", "eventType": "temperature",
        "scope": {"deviceId": "meter-1"}, "condition": {"above": 80},
        "clear": {"below": 75}, "severity": "major"});
    let a = device_updates(
        &table,
        ApiRequest::post("/me/rules").caller(PERSON).json(rule),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    // A warm ingest Lambda: it caches the registration naming the person.
    let warm = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let hot = json!([{"id": "t-0", "type": "temperature", "value": 90.0, "at": ago(120)}]);
    let a = ingest(&warm, ingest_request("meter-1", &token, hot)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let a = device_updates(
        &table,
        ApiRequest::put("/me/devices/meter-1/desired")
            .caller(PERSON)
            .header("If-Match", "0")
            .json(json!({"desired": {"interval": 60}})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let a = device_updates(
        &table,
        ApiRequest::post("/me/devices/meter-1/commands")
            .caller(PERSON)
            .json(json!({"name": "reboot"})),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let fresh = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let a = ingest(
        &fresh,
        ApiRequest::post("/devices/meter-1/sync")
            .header("Authorization", &format!("Bearer {token}"))
            .json(json!({"reported": {"version": 1, "state": {"interval": 60}}})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);

    // A month of one-minute readings and their summaries, seeded in the table.
    let seeded = Instant::now();
    let (items, summaries) = month_of_readings(&table, &user(PERSON), &id);
    seed(&table, items).await;
    println!(
        "seeded {MINUTES} events and {summaries} summary items in {:.1} s",
        seeded.elapsed().as_secs_f64()
    );
    let source_pk = event_pk(&user(PERSON), &id);
    let target_pk = event_pk(&user(ORG), &id);
    let before_items = partition(&table, &source_pk).await;
    let before = by_type(&before_items);
    let alarms_before = partition(&table, &alarm_pk(&user(PERSON), &id)).await.len();
    assert_eq!(before["event"], MINUTES as usize + 1);
    assert!(before["series"] >= summaries, "{before:?}");
    assert_eq!(alarms_before, 2, "the alarm and its open pointer");
    let registration_before =
        RegistrationItem::from_item(item(&table, &key::registration("meter-1")).await.unwrap())
            .unwrap();
    let snapshot_before = move_snapshot(&table, &id, &user(PERSON), &user(ORG)).await;

    // The move: the request copies what fits in its budget, the scheduled worker the rest.
    // Through the handler: it answers within half the function's timeout (issue 39 item 4:
    // with the budget equal to the timeout, the function was killed after the live
    // transaction committed), 202 while the worker continues.
    let started = Instant::now();
    let moved = device_updates(
        &table,
        ApiRequest::post("/me/devices/meter-1/move")
            .caller(PERSON)
            .json(json!({ "toOrgId": ORG_ID })),
    )
    .await;
    let request_used = moved.used.clone();
    let request_time = started.elapsed();
    assert!(
        request_time <= function_timeout() / 2,
        "the move answered after {request_time:?}"
    );
    let answer = moved.body.clone();
    assert_eq!(moved.status, 202, "{answer}");
    assert_eq!(answer["history"]["status"], "moving", "{answer}");
    assert!(answer.get("token").is_none(), "no rotation asked: {answer}");
    assert_eq!(answer["device"]["deviceId"], "meter-1");
    assert!(
        answer["history"]["itemsMoved"].as_u64().is_some(),
        "{answer}"
    );
    println!(
        "move request: {:.1} s, history {} ({} items), {} requests {:?}",
        request_time.as_secs_f64(),
        answer["history"]["status"],
        answer["history"]["itemsMoved"],
        requests(&request_used),
        request_used.operations
    );

    // Right after the request: the device is the organization's, whatever the history's state.
    let registration =
        RegistrationItem::from_item(item(&table, &key::registration("meter-1")).await.unwrap())
            .unwrap();
    assert_eq!(registration.user_id, user(ORG));
    assert_eq!(
        registration.token_sha256, registration_before.token_sha256,
        "the token is unchanged"
    );
    assert!(item(&table, &key::device(PERSON, "meter-1"))
        .await
        .is_none());
    assert!(item(&table, &key::device(ORG, "meter-1")).await.is_some());
    assert_eq!(fleet_devices(&table, PERSON).await, 0);
    assert_eq!(fleet_devices(&table, ORG).await, 2);

    let mut total = request_used.clone();
    let mut runs = 0;
    let mut status = HistoryStatus::Moving;
    while status == HistoryStatus::Moving {
        runs += 1;
        assert!(runs <= 20, "the worker should finish within 20 runs");
        let meter = RequestMeter::new();
        let progress = meter
            .clone()
            .scope(continue_moves(
                &table,
                Instant::now() + Duration::from_secs(50),
            ))
            .await
            .unwrap();
        add(&mut total, &meter.snapshot());
        status = progress
            .iter()
            .find(|p| p.device_id == "meter-1")
            .map(|p| p.history.status)
            .unwrap_or(HistoryStatus::Moved);
    }
    let wall = started.elapsed();
    let snapshot_after = move_snapshot(&table, &id, &user(PERSON), &user(ORG)).await;

    // The warm Lambda still holds the old registration: the device notices nothing.
    let after = json!([{"id": "t-1", "type": "temperature", "value": 70.0, "at": ago(60)}]);
    let a = ingest(&warm, ingest_request("meter-1", &token, after)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(
        running_move(&table, &id).await.unwrap().is_none(),
        "the marker is gone"
    );

    // Everything at the organization, nothing left at the person.
    let target = partition(&table, &target_pk).await;
    let moved_types = by_type(&target);
    assert_eq!(
        moved_types["event"],
        MINUTES as usize + 2,
        "{moved_types:?}"
    );
    assert!(moved_types["series"] >= before["series"], "{moved_types:?}");
    assert_eq!(moved_types["desiredState"], 1);
    assert_eq!(moved_types["reportedState"], 1);
    assert_eq!(moved_types["command"], 1);
    assert!(
        partition(&table, &source_pk).await.is_empty(),
        "nothing at the old owner"
    );
    assert!(partition(&table, &alarm_pk(&user(PERSON), &id))
        .await
        .is_empty());
    let moved_alarms = alarm_pk(&user(ORG), &id);
    assert_eq!(
        snapshot_after
            .keys()
            .filter(|(pk, _)| *pk == moved_alarms)
            .count(),
        2,
        "the alarm and its open pointer, moved"
    );
    // The reading of 70 after the move cleared the alarm at the new owner: its open pointer
    // is gone, the alarm is kept as cleared.
    let alarms = partition(&table, &moved_alarms).await;
    assert_eq!(alarms.len(), 1, "{alarms:?}");
    assert_eq!(alarms[0]["userId"].as_s().unwrap(), ORG);
    assert_eq!(alarms[0]["state"].as_s().unwrap(), "cleared");
    // Every event as it was, under the new owner's keys (and owner attribute).
    let source_events: BTreeMap<String, &Item> = before_items
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::Event))
        .map(|i| (i["SK"].as_s().unwrap().clone(), i))
        .collect();
    for event in target
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::Event))
    {
        let sk = event["SK"].as_s().unwrap();
        if let Some(old) = source_events.get(sk) {
            assert_eq!(event["value"], old["value"]);
            assert_eq!(event["ttl"], old["ttl"]);
            assert_eq!(event["userId"].as_s().unwrap(), ORG);
        }
    }
    // Readers at the organization: the device, its month of summaries and its events.
    let shown = shared::ops::devices::read::get_device(&table, &user(ORG), &id)
        .await
        .unwrap()
        .expect("the organization's device");
    let shown = serde_json::to_value(&shown).unwrap();
    assert_eq!(shown["latest"]["temperature"]["value"], 70.0, "{shown}");
    assert!(
        shared::ops::devices::read::get_device(&table, &user(PERSON), &id)
            .await
            .unwrap()
            .is_none()
    );

    // The token still ingests, on a cold Lambda too, into the organization's partition.
    let later = json!([{"id": "t-2", "type": "temperature", "value": 71.0, "at": ago(30)}]);
    let a = ingest(&fresh, ingest_request("meter-1", &token, later)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let target = partition(&table, &target_pk).await;
    assert_eq!(by_type(&target)["event"], MINUTES as usize + 3);
    assert!(partition(&table, &source_pk).await.is_empty());
    assert_eq!(fleet_devices(&table, PERSON).await, 0);
    assert_eq!(fleet_devices(&table, ORG).await, 2);

    // Cost: write units priced by DynamoDB's rules from the items changed, reads as consumed.
    let changes = pricing::changes(&snapshot_before, &snapshot_after);
    let immutable = |c: &pricing::ItemChange| {
        let item = c.before.as_ref().or(c.after.as_ref()).unwrap();
        matches!(
            entity_type(item),
            Some(EntityType::Event) | Some(EntityType::TypeMark)
        )
    };
    let (events, others): (Vec<_>, Vec<_>) = changes.into_iter().partition(immutable);
    let event_units = pricing::write_units(&events, WriteKind::Single);
    let other_units = pricing::write_units(&others, WriteKind::Transaction);
    let events_moved = MINUTES as u64 + 1;
    println!(
        "moved {events_moved} events + {} other items: {:.1} s wall ({runs} worker runs), {} requests {:?}, {:.1} read units ({:.4} per event), write units: events {} ({:.2} per event), the rest {} (transactions, priced)",
        others.len(),
        wall.as_secs_f64(),
        requests(&total),
        total.operations,
        total.read_units,
        total.read_units / events_moved as f64,
        event_units,
        event_units as f64 / events_moved as f64,
        other_units,
    );
    // Two write units per telemetry event (its put at the new owner, its delete at the old).
    assert!(
        event_units as f64 / events_moved as f64 <= 2.0 + 1e-9,
        "{event_units}"
    );

    // The budget: per 25 events two BatchWriteItems, per page of 1,000 a Query (and the last
    // page's rounding), per 50 other items a transaction; a few fixed requests per run.
    let other_items = (summaries + 2 + 3 + 2) as u32;
    let pages = (events_moved as u32).div_ceil(1000);
    let batch_budget = 2 * (events_moved as u32).div_ceil(25) + 2 * pages;
    let runs = runs as u32 + 1;
    assert!(
        total.operations["BatchWriteItem"] <= batch_budget,
        "{:?}",
        total.operations
    );
    assert!(
        total.operations["Query"] <= pages + 4 * runs + 4 + (other_items).div_ceil(1000),
        "{:?}",
        total.operations
    );
    assert!(
        total.operations["TransactWriteItems"] <= 1 + other_items.div_ceil(50) + 4 * runs,
        "{:?}",
        total.operations
    );
    assert!(
        requests(&total) <= batch_budget + pages + other_items.div_ceil(50) + 12 * runs + 8,
        "{:?}",
        total.operations
    );
}

#[tokio::test]
async fn a_small_device_moves_back_and_forth_in_one_request_within_the_fixed_budget() {
    let table = table_with_org().await;
    let id = device("small-1");
    let token = register_device(&table, PERSON, "small-1").await;
    let events = json!([{"id": "s-0", "type": "temperature", "value": 20.0, "at": ago(90)},
                        {"id": "s-1", "type": "temperature", "value": 21.0, "at": ago(60)}]);
    let a = ingest(
        &Arc::new(Ingestor::new(table.clone(), IngestConfig::default())),
        ingest_request("small-1", &token, events),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);

    let there = RequestMeter::new();
    let moved = there
        .clone()
        .scope(move_device(&table, &id, &user(PERSON), &user(ORG)))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(moved.history).unwrap(),
        json!({"status": "moved", "itemsMoved": 2})
    );
    let used = there.snapshot();
    shared::ops::devices::r#move::MOVE_DEVICE
        .check(&used, &shared::ops::pattern::BudgetScale::one())
        .unwrap();
    // And back to the personal fleet, where it is shown with its readings.
    let back = move_device(&table, &id, &user(ORG), &user(PERSON))
        .await
        .unwrap();
    assert_eq!(back.history.status, HistoryStatus::Moved);
    let d = dashboard(
        &table,
        ApiRequest::get("/me/devices/small-1").caller(PERSON),
    )
    .await;
    assert_eq!(d.status, 200, "{}", d.body);
    assert_eq!(d.body["device"]["latest"]["temperature"]["value"], 21.0);
    let e = dashboard(
        &table,
        ApiRequest::get("/me/devices/small-1/events").caller(PERSON),
    )
    .await;
    assert_eq!(e.body["events"].as_array().unwrap().len(), 2, "{}", e.body);
    assert_eq!(fleet_devices(&table, PERSON).await, 1);
    assert_eq!(fleet_devices(&table, ORG).await, 0);
}

#[tokio::test]
async fn a_move_that_cannot_be_made_is_refused_and_changes_nothing() {
    let table = table_with_org().await;
    let id = device("refused-1");
    register_device(&table, PERSON, "refused-1").await;
    register_device(&table, "move-bob", "bobs-1").await;
    let before = table_contents(&table).await;

    // Not the caller's device (Bob's), an unknown one: 404 alike.
    for (owner, device_id) in [(PERSON, "bobs-1"), (PERSON, "nobody-1")] {
        let err = move_device(&table, &device(device_id), &user(owner), &user(ORG))
            .await
            .unwrap_err();
        assert!(matches!(err, FleetError::NotFound("device")), "{err:?}");
    }
    // Into the fleet it is in: 400 naming `toOrgId`.
    let err = move_device(&table, &id, &user(PERSON), &user(PERSON))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FleetError::Invalid(v) if v.field == "toOrgId"),
        "{err:?}"
    );
    assert_eq!(table_contents(&table).await, before);

    // A device whose earlier move is still copying: 409, nothing changed.
    let (items, _) = month_of_readings(&table, &user(PERSON), &id);
    seed(&table, items.into_iter().take(3_000).collect()).await;
    let first = move_device_until(&table, &id, &user(PERSON), &user(ORG), Instant::now())
        .await
        .unwrap();
    assert_eq!(first.history.status, HistoryStatus::Moving);
    let before = table_contents(&table).await;
    let err = move_device(&table, &id, &user(ORG), &user(PERSON))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            FleetError::Conflict {
                code: "move_in_progress",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(table_contents(&table).await, before);
    // Two moves of the same device at once: one wins, the other finds no device.
    let other = device("race-1");
    register_device(&table, PERSON, "race-1").await;
    let (person, org, bob) = (user(PERSON), user(ORG), user("move-bob"));
    let (a, b) = tokio::join!(
        move_device(&table, &other, &person, &org),
        move_device(&table, &other, &person, &bob),
    );
    assert!(a.is_ok() != b.is_ok(), "{a:?} {b:?}");
    assert_eq!(
        fleet_devices(&table, ORG).await + fleet_devices(&table, "move-bob").await,
        1 + 1 + 1,
        "the earlier move's device, Bob's own and exactly one of the two"
    );
}

#[tokio::test]
async fn a_deleted_device_is_still_refused_by_a_warm_lambda() {
    let table = table_with_org().await;
    let token = register_device(&table, PERSON, "gone-1").await;
    let warm = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let one = json!([{"id": "g-0", "type": "temperature", "value": 20.0, "at": ago(60)}]);
    assert_eq!(
        ingest(&warm, ingest_request("gone-1", &token, one))
            .await
            .status,
        200
    );
    let a = device_updates(
        &table,
        ApiRequest::delete("/me/devices/gone-1").caller(PERSON),
    )
    .await;
    assert_eq!(a.status, 204);
    let two = json!([{"id": "g-1", "type": "temperature", "value": 20.0, "at": ago(30)}]);
    let a = ingest(&warm, ingest_request("gone-1", &token, two)).await;
    assert_eq!(a.status, 401, "{}", a.body);
}

#[tokio::test]
async fn a_warm_lambda_syncs_a_moved_device_as_its_new_owners() {
    let table = table_with_org().await;
    let id = device("sync-1");
    let token = register_device(&table, PERSON, "sync-1").await;
    let warm = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let sync = |body: serde_json::Value| {
        ApiRequest::post("/devices/sync-1/sync")
            .header("Authorization", &format!("Bearer {token}"))
            .json(body)
    };
    let a = ingest(&warm, sync(json!({}))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    move_device(&table, &id, &user(PERSON), &user(ORG))
        .await
        .unwrap();
    // The cached registration names the person; the report lands at the organization.
    let a = ingest(
        &warm,
        sync(json!({"reported": {"version": 0, "state": {"led": true}}})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let reported = partition(&table, &event_pk(&user(ORG), &id)).await;
    assert_eq!(by_type(&reported)["reportedState"], 1, "{reported:?}");
    assert!(partition(&table, &event_pk(&user(PERSON), &id))
        .await
        .is_empty());
}

/// Issue 39 item 3: a device moved to the organization, deleted there while its history is
/// still copying, and its id registered again in the old (personal) fleet. Before the fix
/// each worker run copied the new device's events to the organization (which no longer has
/// the device) and deleted them from the fleet they belong to. Now a registration of an id
/// whose move is copying is refused (409 `move_in_progress`); the worker sees the moved
/// registration is gone, stops the copy and deletes what was left of the deleted device at
/// the old owner; the id registers again, and the new device's data stays its own.
#[tokio::test]
async fn a_device_deleted_and_registered_again_during_its_move_keeps_its_own_data() {
    let table = table_with_org().await;
    let id = device("again-1");
    register_device(&table, PERSON, "again-1").await;
    let (items, _) = month_of_readings(&table, &user(PERSON), &id);
    let old_events = 2_000;
    seed(&table, items.into_iter().take(old_events).collect()).await;
    let first = move_device_until(&table, &id, &user(PERSON), &user(ORG), Instant::now())
        .await
        .unwrap();
    assert_eq!(first.history.status, HistoryStatus::Moving);
    // The organization deletes the device while its history is still at the person.
    shared::ops::devices::delete::delete_device(&table, &user(ORG), &id)
        .await
        .unwrap();
    let registration = || DeviceRegistration {
        device_id: device("again-1"),
        name: "A new meter".into(),
        device_type: DeviceType::parse("thermostat").unwrap(),
        tags: vec![],
        report_every_seconds: None,
        offline_detection: Default::default(),
    };
    // Registered again in the old fleet while the copy runs.
    let during = register(&table, &user(PERSON), registration()).await;
    let token = match &during {
        Ok(registered) => registered.token.reveal().to_string(),
        Err(_) => {
            // Refused while the copy runs: a worker run ends the copy, then the id is free.
            continue_moves(&table, Instant::now() + Duration::from_secs(50))
                .await
                .unwrap();
            register(&table, &user(PERSON), registration())
                .await
                .unwrap()
                .token
                .reveal()
                .to_string()
        }
    };
    let warm = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let new_events = json!([
        {"id": "n-0", "type": "temperature", "value": 20.0, "at": ago(90)},
        {"id": "n-1", "type": "temperature", "value": 21.0, "at": ago(60)},
    ]);
    let a = ingest(&warm, ingest_request("again-1", &token, new_events)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    for _ in 0..20 {
        continue_moves(&table, Instant::now() + Duration::from_secs(50))
            .await
            .unwrap();
        if running_move(&table, &id).await.unwrap().is_none() {
            break;
        }
    }
    assert!(running_move(&table, &id).await.unwrap().is_none());

    let event_ids = |items: &[Item]| -> Vec<String> {
        items
            .iter()
            .filter(|i| entity_type(i) == Some(EntityType::Event))
            .map(|i| i["id"].as_s().unwrap().clone())
            .collect()
    };
    let at_org = partition(&table, &event_pk(&user(ORG), &id)).await;
    assert!(
        !event_ids(&at_org).iter().any(|e| e.starts_with("n-")),
        "the organization (which deleted the device) holds the new device's events: {:?}",
        event_ids(&at_org)
    );
    let at_person = partition(&table, &event_pk(&user(PERSON), &id)).await;
    assert_eq!(
        event_ids(&at_person),
        vec!["n-0".to_string(), "n-1".to_string()],
        "the new device's events, and nothing of the deleted one, in its own fleet"
    );
    assert!(partition(&table, &alarm_pk(&user(ORG), &id))
        .await
        .is_empty());
    // The new device reads its own events in its own fleet.
    let e = dashboard(
        &table,
        ApiRequest::get("/me/devices/again-1/events").caller(PERSON),
    )
    .await;
    assert_eq!(e.body["events"].as_array().unwrap().len(), 2, "{}", e.body);
    // The choice: a registration is refused while a move of its id copies.
    assert!(
        matches!(
            during,
            Err(FleetError::Conflict {
                code: "move_in_progress",
                ..
            })
        ),
        "{:?}",
        during.map(|r| r.device)
    );
}

/// Issue 39 item 5: `"rotateToken": true` on a move gives the device a new token in the
/// move's transaction; the previous one (which the previous owner knows) keeps working for
/// the overlap a rotation gives, as `POST .../token` does.
#[tokio::test]
async fn a_move_can_rotate_the_token_the_previous_owner_knows() {
    let table = table_with_org().await;
    let old = register_device(&table, PERSON, "rotate-1").await;
    let moved = device_updates(
        &table,
        ApiRequest::post("/me/devices/rotate-1/move")
            .caller(PERSON)
            .json(json!({ "toOrgId": ORG_ID, "rotateToken": true })),
    )
    .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    assert_eq!(moved.body["history"]["status"], "moved");
    let new = moved.body["token"]
        .as_str()
        .expect("the new token")
        .to_string();
    assert_ne!(new, old);
    assert!(
        moved.body["previousTokenValidUntil"].as_str().is_some(),
        "{}",
        moved.body
    );
    let registration =
        RegistrationItem::from_item(item(&table, &key::registration("rotate-1")).await.unwrap())
            .unwrap();
    assert_eq!(registration.user_id, user(ORG));
    let warm = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    for (token, id) in [(&new, "r-new"), (&old, "r-old")] {
        let one = json!([{"id": id, "type": "temperature", "value": 20.0, "at": ago(30)}]);
        let a = ingest(&warm, ingest_request("rotate-1", token, one)).await;
        assert_eq!(a.status, 200, "{id}: {}", a.body);
    }
    // Past the overlap the old token is refused: the same rule as a rotation's.
    table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Registration {
                device: device("rotate-1"),
            }
            .attributes(),
        ))
        .update_expression("SET #u = :u")
        .expression_attribute_names("#u", RegistrationItem::PREVIOUS_TOKEN_UNTIL.name())
        .expression_attribute_values(
            ":u",
            aws_sdk_dynamodb::types::AttributeValue::S("2000-01-01T00:00:00Z".into()),
        )
        .send()
        .await
        .unwrap();
    let cold = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let late = json!([{"id": "r-late", "type": "temperature", "value": 20.0, "at": ago(20)}]);
    let a = ingest(&cold, ingest_request("rotate-1", &old, late.clone())).await;
    assert_eq!(a.status, 401, "{}", a.body);
    let a = ingest(&cold, ingest_request("rotate-1", &new, late)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    // Without `rotateToken` the token is unchanged (no `token` in the answer).
    let back = move_device(&table, &device("rotate-1"), &user(ORG), &user(PERSON))
        .await
        .unwrap();
    let back = serde_json::to_value(&back).unwrap();
    assert!(back.get("token").is_none(), "{back}");
    let after =
        RegistrationItem::from_item(item(&table, &key::registration("rotate-1")).await.unwrap())
            .unwrap();
    assert_eq!(after.token_sha256, registration.token_sha256);
}

#[tokio::test]
// Issue 38 item 4: before the fix, a late reading sent while the history was still at the old
// owner started its block (and its rolled hour and day) over at the new owner, and the copy
// kept the new owner's bucket: the copied readings of that bucket were lost for good.
async fn a_late_reading_and_a_replay_during_the_copy_add_to_the_copied_summaries() {
    let table = table_with_org().await;
    let id = "late-1";
    let token = register_device(&table, PERSON, id).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let now = Timestamp::now().epoch_millis();
    let day = Resolution::Day.millis();
    let start = Resolution::Day.bucket_start(now) - 2 * day;
    // Readings every 10 minutes from two days ago: flushed into blocks, the first day rolled.
    let mut sent: BTreeMap<(i64, String), f64> = BTreeMap::new();
    let mut readings = Vec::new();
    let mut t = start + 7_000;
    let mut n = 0;
    while t < now - 10 * 60_000 {
        readings.push((t, format!("r{n}"), 20.0 + (n % 9) as f64 * 0.5));
        t += 10 * 60_000;
        n += 1;
    }
    let send = |batch: Vec<(i64, String, f64)>| {
        let (ingestor, token) = (ingestor.clone(), token.clone());
        async move {
            let body = serde_json::Value::Array(
                batch
                    .iter()
                    .map(|(at, id, v)| {
                        json!({"id": id, "type": "temperature", "value": v,
                               "at": Timestamp::from_epoch_millis(*at).unwrap().to_string()})
                    })
                    .collect(),
            );
            let a = ingest(&ingestor, ingest_request(id, &token, body)).await;
            assert_eq!(a.status, 200, "{}", a.body);
        }
    };
    for chunk in readings.chunks(100) {
        send(chunk.to_vec()).await;
    }
    for (at, id, v) in &readings {
        sent.insert((*at, id.clone()), *v);
    }
    // The move, given no time: its whole history is left to the worker.
    let moved = move_device_until(
        &table,
        &device(id),
        &user(PERSON),
        &user(ORG),
        Instant::now(),
    )
    .await
    .unwrap();
    assert_eq!(moved.history.status, HistoryStatus::Moving);
    // While the history is at the person: a late reading into a bucket of the rolled first
    // day that holds a reading already, and a replay of a reading counted before the move.
    let late = (start + 10 * 3_600_000 + 60_000, "late".to_string(), 99.5);
    let replayed = readings[100].clone();
    send(vec![late.clone(), replayed]).await;
    sent.insert((late.0, late.1.clone()), late.2);
    for _ in 0..20 {
        continue_moves(&table, Instant::now() + Duration::from_secs(50))
            .await
            .unwrap();
        if running_move(&table, &device(id)).await.unwrap().is_none() {
            break;
        }
    }
    assert!(running_move(&table, &device(id)).await.unwrap().is_none());
    // Every bucket at the organization equals a recompute from what was sent.
    for (resolution, name) in [
        (Resolution::FiveMinutes, "5m"),
        (Resolution::Hour, "1h"),
        (Resolution::Day, "1d"),
    ] {
        let a = dashboard(
            &table,
            ApiRequest::get(&format!("/orgs/{ORG_ID}/devices/{id}/series"))
                .caller(PERSON)
                .query("type", "temperature")
                .query(
                    "from",
                    &Timestamp::from_epoch_millis(start).unwrap().to_string(),
                )
                .query(
                    "to",
                    &Timestamp::from_epoch_millis(now).unwrap().to_string(),
                )
                .query("resolution", name),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.body);
        let mut want: BTreeMap<i64, u64> = BTreeMap::new();
        for (at, _) in sent.keys() {
            *want.entry(resolution.bucket_start(*at)).or_default() += 1;
        }
        let got: BTreeMap<i64, u64> = a.body["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let start = Timestamp::parse_field("start", b["start"].as_str().unwrap())
                    .unwrap()
                    .epoch_millis();
                (start, b["count"].as_u64().unwrap())
            })
            .collect();
        let wrong: Vec<_> = want
            .iter()
            .filter(|(s, w)| got.get(*s) != Some(*w))
            .map(|(s, w)| {
                (
                    Timestamp::from_epoch_millis(*s).unwrap().to_string(),
                    *w,
                    got.get(s),
                )
            })
            .collect();
        assert!(
            wrong.is_empty() && got.len() == want.len(),
            "{name}: buckets (start, want, got) that differ: {wrong:?}"
        );
    }
}
