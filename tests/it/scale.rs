//! Key design at scale (issue 13) on DynamoDB Local: what an event costs in write units by
//! DynamoDB's rules (from the real items, every index entry counted), and an owner's fleet
//! growing past its partitions while its devices ingest and its reader pages.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use fleet_testkit::pricing::{self, WriteKind};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::device_state::DeviceStateItem;
use shared::model::entities::fleet::FleetItem;
use shared::model::entities::registration::RegistrationItem;
use shared::model::entities::{Entity, EntityType, ItemKey};
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

/// Every item of the table, by key.
async fn snapshot(table: &FleetTable) -> pricing::Snapshot {
    pricing::snapshot(table).await.expect("snapshot")
}

/// Write units DynamoDB bills for turning `before` into `after` with single-item writes.
fn billed(before: &pricing::Snapshot, after: &pricing::Snapshot) -> u64 {
    pricing::write_units(&pricing::changes(before, after), WriteKind::Single)
}

/// `n` events a second apart, ending `minutes_ago`; one in ten is a `fault` (a searchable type:
/// the write-unit goals are counted with one at 10% of events), the rest telemetry.
/// How far this run's readings are moved back, in seconds: they span the 210 minutes before
/// now, and a span that crosses UTC midnight makes one batch of the measured window pay the
/// device's daily roll (a day's blocks read and rolled once a day), which is not the per-event
/// cost these tests measure. So within 210 minutes after midnight they move to before it (a
/// clock-dependent failure, seen between 01:00 and 03:20 UTC on stop 51's main and on this
/// change alike); fixed for the whole run.
fn midnight_shift() -> i64 {
    static SHIFT: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *SHIFT.get_or_init(|| {
        let since_midnight = shared::model::timestamp::Timestamp::now()
            .epoch_seconds()
            .rem_euclid(86_400);
        if since_midnight < 210 * 60 {
            since_midnight + 300
        } else {
            0
        }
    })
}

/// `seconds` before now, moved back by [`midnight_shift`].
fn reading_ago(seconds: i64) -> String {
    ago(seconds + midnight_shift())
}

fn telemetry(n: usize, minutes_ago: i64) -> Value {
    let kinds = ["temperature", "humidity", "battery"];
    Value::Array(
        (0..n)
            .map(|i| {
                let kind = if i % 10 == 9 {
                    "fault"
                } else {
                    kinds[i % kinds.len()]
                };
                json!({
                    "type": kind,
                    "value": 20.0 + i as f64 / 10.0,
                    "at": reading_ago(minutes_ago * 60 - i as i64),
                })
            })
            .collect(),
    )
}

/// Type marks in `snapshot`.
fn marks(snapshot: &pricing::Snapshot) -> u64 {
    snapshot
        .values()
        .filter(|item| EntityType::of(item) == Some(EntityType::TypeMark))
        .count() as u64
}

/// Write units of one ingest request: what changed between the snapshots, by DynamoDB's
/// rules, plus one unit for every type mark the request put again unchanged. A snapshot
/// cannot see an identical put, but DynamoDB bills it (its index entry does not change, so
/// only the table write). `marks_put` is the number of (searchable type, hour) groups of the
/// request's events.
fn billed_request(before: &pricing::Snapshot, after: &pricing::Snapshot, marks_put: u64) -> u64 {
    let new_marks = marks(after) - marks(before);
    billed(before, after) + (marks_put - new_marks)
}

/// Write units of the live states' offline-check due entries (GSI3 `DUE#`, under 1 KB each)
/// between two snapshots: a moved entry is a delete and a put, a new or removed one one write.
/// What the due index costs ingestion, measured on the same requests.
fn due_entry_units(before: &pricing::Snapshot, after: &pricing::Snapshot) -> u64 {
    let due = |item: Option<&shared::model::schema::Item>| {
        item.filter(|i| EntityType::of(i) == Some(EntityType::DeviceState))
            .and_then(|i| i.get("GSI3SK"))
            .and_then(|v| v.as_s().ok())
            .cloned()
    };
    let keys: BTreeSet<_> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .map(|k| match (due(before.get(k)), due(after.get(k))) {
            (Some(a), Some(b)) if a != b => 2,
            (None, Some(_)) | (Some(_), None) => 1,
            _ => 0,
        })
        .sum()
}

/// The (searchable type, hour) groups of a request's events: the type marks it puts.
fn marks_put(events: &Value) -> u64 {
    let groups: BTreeSet<(String, i64)> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "fault")
        .map(|e| {
            let at = Timestamp::parse_field("at", e["at"].as_str().unwrap()).unwrap();
            (e["type"].to_string(), at.epoch_seconds() / 3600)
        })
        .collect();
    groups.len() as u64
}

#[tokio::test]
async fn an_event_costs_about_one_write_unit_by_dynamodbs_rules_with_a_searchable_type_at_10_percent(
) {
    let table = fresh_table().await;
    let token = register_device(&table, "scale-owner", "meter-1").await;
    // Containers whose caches miss, as API Gateway spreads a device's batches: each batch
    // reads the live state instead of failing a conditional write.
    let cold = || Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));

    // 100-event batches, ten faults in each.
    let mut units = 0;
    let mut events = 0;
    let mut due_units = 0;
    for batch in 0..3 {
        let before = snapshot(&table).await;
        let body = telemetry(100, 200 - 30 * batch);
        let put = marks_put(&body);
        let a = ingest(&cold(), ingest_request("meter-1", &token, body)).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        // A batch whose state update went out in a transaction (it wrote summary items)
        // gets no item back, but its update is conditioned on the twin versions it read
        // (issue 38), so they need no read. A flush into a block an earlier batch wrote reads
        // that block (every type's at once): whether one does depends on where the 2-hour
        // blocks fall against the clock, so at most one such read.
        let reads = a.used.count("GetItem") + a.used.count("BatchGetItem");
        assert!(
            (2..=3).contains(&reads),
            "a cold container reads the registration, the state with the rules and at most one batch of blocks: batch {batch}, {:?}",
            a.used.operations
        );
        assert_eq!(
            a.used.count("TransactWriteItems") + a.used.count("UpdateItem"),
            1,
            "the state is written once, never refused: batch {batch}, {:?}",
            a.used.operations
        );
        let after = snapshot(&table).await;
        due_units += due_entry_units(&before, &after);
        units += billed_request(&before, &after, put);
        events += 100;
    }
    let per_event = units as f64 / events as f64;
    eprintln!(
        "100-event batches, 10% faults: {units} write units for {events} events = {per_event:.3} (of which the offline-check due entry: {due_units} = {:.3})",
        due_units as f64 / events as f64
    );
    assert!(per_event <= 1.5, "{per_event} write units per event");
    assert!(
        per_event >= 1.0,
        "every event is at least its own item: {per_event}"
    );

    // Single-event requests, one a minute of device time (a meter's pace), every tenth a fault.
    let (mut units, mut requests) = (0, 0);
    let mut worst = 0;
    let mut due_units = 0;
    for minute in 0..30 {
        let before = snapshot(&table).await;
        let body = if minute % 10 == 9 {
            json!([{"type": "fault", "value": minute, "at": reading_ago((90 - minute) * 60)}])
        } else {
            telemetry(1, 90 - minute)
        };
        let put = marks_put(&body);
        let a = ingest(&cold(), ingest_request("meter-1", &token, body)).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let after = snapshot(&table).await;
        due_units += due_entry_units(&before, &after);
        let these = billed_request(&before, &after, put);
        if std::env::var_os("SCALE_DEBUG").is_some() {
            let state: u64 = after
                .values()
                .filter(|i| EntityType::of(i) == Some(EntityType::DeviceState))
                .map(fleet_testkit::capacity::item_size)
                .sum();
            eprintln!(
                "minute {minute}: {these} units, {:?}, state {state} bytes",
                a.used.operations
            );
        }
        worst = worst.max(these);
        units += these;
        requests += 1;
    }
    let per_event = units as f64 / f64::from(requests);
    eprintln!(
        "single-event requests, 10% faults: {units} write units for {requests} = {per_event:.3}, worst {worst} (of which the offline-check due entry: {due_units} = {:.3})",
        due_units as f64 / f64::from(requests)
    );
    assert!(
        per_event <= 3.0,
        "{per_event} write units per single-event request"
    );
    // A request whose event crosses the device's SEEN bucket also moves its SEEN# and due
    // (offline detection) entries: 2 units each, once per bucket. The request whose state
    // passes one write unit flushes every type's closed buckets at once (issue 38: types gone
    // silent too, so later states stay under the unit): 2 units per block in its transaction.
    assert!(
        worst <= 12,
        "at worst the event and its index entry, a new type mark and its index entry, the state, its SEEN# and due entries moving, or a flush of four types' blocks: {worst}"
    );

    // A replayed single event changes nothing and writes nothing but the identical event.
    let body = json!([{"id": "again", "type": "temperature", "value": 1, "at": ago(30)}]);
    ingest(&cold(), ingest_request("meter-1", &token, body.clone())).await;
    let before = snapshot(&table).await;
    let a = ingest(&cold(), ingest_request("meter-1", &token, body)).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.used.count("UpdateItem"),
        0,
        "a no-op state update is skipped"
    );
    assert_eq!(
        billed(&before, &snapshot(&table).await),
        0,
        "nothing changed"
    );
}

/// Registers `device` for `owner` with `body`'s offline settings; returns its token.
async fn register_with(table: &FleetTable, owner: &str, device: &str, body: Value) -> String {
    let mut body = body;
    body["deviceId"] = json!(device);
    body["name"] = json!("Meter");
    body["type"] = json!("meter");
    let a = device_updates(
        table,
        ApiRequest::post("/me/devices").caller(owner).json(body),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["token"].as_str().unwrap().to_string()
}

/// `snapshot` without the summaries (issue 32: summary items and the state's `series`),
/// which two devices flush at different requests as their states differ in size.
fn without_summaries(snapshot: &pricing::Snapshot) -> pricing::Snapshot {
    snapshot
        .iter()
        .filter(|(_, item)| EntityType::of(item) != Some(EntityType::Series))
        .map(|(key, item)| {
            let mut item = item.clone();
            item.remove(DeviceStateItem::SERIES.name());
            (key.clone(), item)
        })
        .collect()
}

/// Write units of the same requests for a one-minute device with standard and with tight
/// offline detection: (100-event batches per event, single-event requests per request, the due
/// entry's share of each), by DynamoDB's rules.
#[tokio::test]
async fn tight_offline_detection_costs_its_due_entry_move_per_batch_and_standard_devices_pay_as_before(
) {
    let table = fresh_table().await;
    let owner = "scale-owner";
    let cold = || Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let mut figures = Vec::new();
    for (device, detection) in [("meter-std", "standard"), ("meter-tight", "tight")] {
        let token = register_with(
            &table,
            owner,
            device,
            json!({"reportEverySeconds": 60, "offlineDetection": detection}),
        )
        .await;
        let (mut units, mut due_units) = (0, 0);
        for batch in 0..3 {
            let before = without_summaries(&snapshot(&table).await);
            let body = telemetry(100, 200 - 30 * batch);
            let put = marks_put(&body);
            let a = ingest(&cold(), ingest_request(device, &token, body)).await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            let after = without_summaries(&snapshot(&table).await);
            due_units += due_entry_units(&before, &after);
            units += billed_request(&before, &after, put);
        }
        let batched = (units as f64 / 300.0, due_units as f64 / 300.0);
        let (mut units, mut due_units) = (0, 0);
        for minute in 0..30 {
            let before = without_summaries(&snapshot(&table).await);
            let body = if minute % 10 == 9 {
                json!([{"type": "fault", "value": minute, "at": reading_ago((90 - minute) * 60)}])
            } else {
                telemetry(1, 90 - minute)
            };
            let put = marks_put(&body);
            let a = ingest(&cold(), ingest_request(device, &token, body)).await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            let after = without_summaries(&snapshot(&table).await);
            due_units += due_entry_units(&before, &after);
            units += billed_request(&before, &after, put);
        }
        let single = (units as f64 / 30.0, due_units as f64 / 30.0);
        eprintln!(
            "{detection} offline detection, one-minute device: 100-event batches {:.3} write units per event (due entry {:.3}); single-event requests {:.3} per request (due entry {:.3})",
            batched.0, batched.1, single.0, single.1
        );
        figures.push((batched, single));
    }
    let [(std_batched, std_single), (tight_batched, tight_single)] = figures[..] else {
        unreachable!()
    };
    // Standard keeps today's goals: the due entry moves with the SEEN# bucket only.
    assert!(
        std_batched.0 <= 1.5 && std_single.0 <= 3.0,
        "{std_batched:?} {std_single:?}"
    );
    assert!(
        std_single.1 <= 0.25,
        "standard: a few moves in 30 minutes: {std_single:?}"
    );
    // Tight: the due entry moves with every request that moves lastSeen (a delete and a put
    // on GSI3, 2 units): 2 per single-event request; in the batches its first put (1) and two
    // moves (2 each; batches 30 minutes apart move a standard device's entry as well).
    assert_eq!(tight_single.1, 2.0, "{tight_single:?}");
    assert_eq!(tight_batched.1, 5.0 / 300.0, "{tight_batched:?}");
    // Only the due entry costs more. The summaries' flushes (issue 32) bill the live state as
    // a transaction item (2 units, not 1) at whichever requests fill its room, and the tight
    // state is the larger: the two devices flush at different requests, up to two flushes'
    // state units apart over a run.
    let extra_single = tight_single.0 - std_single.0;
    let extra_batched = tight_batched.0 - std_batched.0;
    assert!(
        (extra_single - (tight_single.1 - std_single.1)).abs() <= 4.0 / 30.0 + 1e-9,
        "only the due entry costs more: {extra_single}"
    );
    assert!(
        (extra_batched - (tight_batched.1 - std_batched.1)).abs() <= 4.0 / 300.0 + 1e-9,
        "only the due entry costs more: {extra_batched}"
    );
}

#[tokio::test]
async fn a_searchable_event_adds_its_index_entry_and_its_hours_type_mark() {
    let table = fresh_table().await;
    let token = register_device(&table, "scale-owner", "meter-1").await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let warm = json!([{"id": "w", "type": "temperature", "value": 1, "at": ago(120)}]);
    ingest(&ingestor, ingest_request("meter-1", &token, warm)).await;
    let measure = |kind: &'static str, id: &'static str| {
        let (table, token, ingestor) = (table.clone(), token.clone(), ingestor.clone());
        async move {
            let before = snapshot(&table).await;
            let body = json!([{"id": id, "type": kind, "value": 2, "at": ago(119)}]);
            let put = marks_put(&body);
            let a = ingest(&ingestor, ingest_request("meter-1", &token, body)).await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            billed_request(&before, &snapshot(&table).await, put)
        }
    };
    let telemetry = measure("temperature", "t").await;
    let first = measure("fault", "a").await;
    assert_eq!(
        first,
        telemetry + 3,
        "the first fault of the hour: its own GSI1 entry, and the hour's type mark with its entry"
    );
    let second = measure("fault", "b").await;
    assert_eq!(
        second,
        telemetry + 2,
        "a later fault of the hour: its own GSI1 entry, and the mark put again (no index change)"
    );
}

#[tokio::test]
async fn a_fleet_growing_past_its_partitions_while_ingesting_and_paging_loses_nothing() {
    let mut table = fresh_table().await;
    // A low threshold: the fourth device doubles the owner's partitions, and so on.
    table.config.devices_per_partition = 2;
    const OWNER: &str = "scale-utility";
    let mut tokens = BTreeMap::new();
    for i in 0..4 {
        let id = format!("meter-{i:02}");
        tokens.insert(id.clone(), register_device(&table, OWNER, &id).await);
    }
    let before_growth: BTreeSet<String> = tokens.keys().cloned().collect();

    // While 12 more meters register, the first four ingest and the owner pages its devices.
    let registrar = {
        let table = table.clone();
        tokio::spawn(async move {
            let mut more = BTreeMap::new();
            for i in 4..16 {
                let id = format!("meter-{i:02}");
                more.insert(id.clone(), register_device(&table, OWNER, &id).await);
            }
            more
        })
    };
    let senders: Vec<_> = tokens
        .iter()
        .map(|(id, token)| {
            let (table, id, token) = (table.clone(), id.clone(), token.clone());
            tokio::spawn(async move {
                let ingestor = Arc::new(Ingestor::new(table, IngestConfig::default()));
                let mut acked = Vec::new();
                for n in 0..5 {
                    let event_id = format!("{id}-e{n}");
                    let body =
                        json!([{"id": event_id, "type": "power", "value": n, "at": ago(60 - n)}]);
                    let a = ingest(&ingestor, ingest_request(&id, &token, body)).await;
                    assert_eq!(a.status, 200, "{:?}", a.body);
                    acked.push(event_id);
                }
                (id, acked)
            })
        })
        .collect();
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut request = ApiRequest::get("/me/devices")
            .caller(OWNER)
            .query("limit", "2");
        if let Some(c) = &cursor {
            request = request.query("cursor", c);
        }
        let page = dashboard(&table, request).await;
        assert_eq!(page.status, 200, "{:?}", page.body);
        for d in page.body["devices"].as_array().unwrap() {
            listed.push(d["deviceId"].as_str().unwrap().to_string());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        match page.body["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    tokens.extend(registrar.await.unwrap());
    let mut acked = BTreeMap::new();
    for sender in senders {
        let (id, ids) = sender.await.unwrap();
        acked.insert(id, ids);
    }

    // Paging returned nothing twice and every device that existed when it began.
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a device listed twice: {listed:?}"
    );
    assert!(
        before_growth.iter().all(|d| unique.contains(d)),
        "a device that existed before the growth was skipped: {listed:?}"
    );

    // The fleet grew (never shrinks), each device stayed where it was placed, and the states
    // spread over the owner's partitions.
    let contents = table_contents(&table).await;
    let fleet = FleetItem::from_item(
        item(&table, &key::fleet(OWNER))
            .await
            .unwrap()
            .into_iter()
            .collect(),
    )
    .unwrap();
    assert_eq!(fleet.devices, 16);
    assert_eq!(fleet.partitions, 8, "16 devices at 2 per partition");
    let mut placements = BTreeMap::new();
    for stored in &contents {
        let attrs: HashMap<_, _> = stored.clone().into_iter().collect();
        match entity_type(stored) {
            Some(EntityType::Registration) => {
                let r = RegistrationItem::from_item(attrs).unwrap();
                placements.insert(r.device_id.to_string(), r.partition);
            }
            Some(EntityType::DeviceState) => {
                let s = DeviceStateItem::from_item(attrs).unwrap();
                let ItemKey::DeviceState {
                    partition: shard, ..
                } = key_of(stored)
                else {
                    unreachable!()
                };
                assert_eq!(s.partition, shard);
            }
            _ => {}
        }
    }
    assert_eq!(placements.len(), 16);
    for (device, shard) in &placements {
        let state = item(&table, &key::state(OWNER, *shard, device)).await;
        assert!(
            state.is_some(),
            "{device}: its state is where its registration says"
        );
        let d = item(&table, &key::device(OWNER, device)).await.unwrap();
        assert_eq!(d["shard"].as_n().unwrap(), &shard.to_string(), "{device}");
    }
    let used: BTreeSet<u32> = placements.values().copied().collect();
    assert!(
        used.len() >= 4,
        "states spread over the partitions: {placements:?}"
    );
    assert!(placements.values().any(|s| *s > 0));

    // Every acknowledged event is stored and on its device's live state, and the dashboard
    // shows every device with it: one Query and one BatchGetItem for the placed states.
    let a = dashboard(&table, ApiRequest::get("/me/dashboard").caller(OWNER)).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.used.count("Query"), 1);
    assert_eq!(a.used.count("BatchGetItem"), 1, "{:?}", a.used);
    let shown: BTreeMap<String, &Value> = a.body["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["deviceId"].as_str().unwrap().to_string(), d))
        .collect();
    assert_eq!(shown.len(), 16);
    let events: BTreeSet<String> = contents
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::Event))
        .map(|i| i["id"].as_s().unwrap().clone())
        .collect();
    for (device, ids) in &acked {
        for id in ids {
            assert!(events.contains(id), "{id} acknowledged but not stored");
        }
        let recent: Vec<&str> = shown[device]["recent"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        let newest_first: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
        assert_eq!(recent, newest_first, "{device}");
    }
}

/// Write units of the registration and deletion by DynamoDB's rules, which DynamoDB Local
/// does not follow: it reports 2.0 for any TransactWriteItems, whatever it holds.
#[tokio::test]
async fn registering_and_deleting_a_device_bill_by_dynamodbs_rules_not_dynamodb_locals() {
    let table = fresh_table().await;
    // A first device, so the registration under test updates an existing fleet item.
    register_device(&table, "tx-owner", "meter-0").await;

    // AP-07 with two tags: one GetItem (the fleet), one transaction.
    let before = snapshot(&table).await;
    let a = device_updates(
        &table,
        ApiRequest::post("/me/devices")
            .caller("tx-owner")
            .json(json!({
                "deviceId": "meter-1", "name": "Boiler room", "type": "thermostat",
                "tags": ["basement", "heating"],
            })),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let registered = snapshot(&table).await;
    let changed = pricing::changes(&before, &registered);
    for c in &changed {
        eprintln!(
            "AP-07 {:?}: {} bytes, {} units in a transaction",
            c.key,
            c.after
                .as_ref()
                .map_or(0, fleet_testkit::capacity::item_size),
            c.write_units(WriteKind::Transaction)
        );
    }
    assert_eq!(a.used.count("TransactWriteItems"), 1);
    // DynamoDB Local reports 1 unit per item here: neither the transaction's doubling nor the
    // index entry.
    assert_eq!(a.used.write_units, 6.0, "DynamoDB Local's report");
    // Registration, device, live state, two tag links (new) and the fleet item (updated),
    // each under 1 KB: 2 units each in a transaction = 12; plus the index entries they write,
    // 1 each, not doubled: the fleet's directory entry (its device count is projected; the
    // state has no status entry until the device is first seen).
    assert_eq!(changed.len(), 6, "{changed:?}");
    let priced = pricing::write_units(&changed, WriteKind::Transaction);
    assert_eq!(priced, 13, "what DynamoDB bills");
    assert_ne!(priced as f64, a.used.write_units);

    // AP-08: an UpdateItem marks the device (a single write), then one transaction deletes
    // device, registration and links and updates the fleet.
    let a = device_updates(
        &table,
        ApiRequest::delete("/me/devices/meter-1").caller("tx-owner"),
    )
    .await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    let deleted = snapshot(&table).await;
    assert_eq!(a.used.count("UpdateItem"), 1);
    assert_eq!(a.used.count("TransactWriteItems"), 1);
    // The transaction also deletes the twin's two documents, absent here (issue 30 item 5).
    assert_eq!(
        a.used.write_units, 8.0,
        "DynamoDB Local's report for the mark and the transaction"
    );
    let device_key = key_of_text(&key::device("tx-owner", "meter-1"));
    let device = registered[&device_key].clone();
    let mut marked = device.clone();
    marked.insert(
        "deletingAt".into(),
        aws_sdk_dynamodb::types::AttributeValue::S(
            shared::model::timestamp::Timestamp::now().to_string(),
        ),
    );
    let mark = pricing::ItemChange {
        key: device_key.clone(),
        before: Some(device),
        after: Some(marked.clone()),
    };
    let mut removal = pricing::changes(&registered, &deleted);
    for c in &mut removal {
        if c.key == device_key {
            c.before = Some(marked.clone()); // the transaction deletes the marked item
        }
    }
    for c in &removal {
        eprintln!(
            "AP-08 {:?}: {} units in a transaction",
            c.key,
            c.write_units(WriteKind::Transaction)
        );
    }
    assert_eq!(removal.len(), 7, "{removal:?}");
    let priced = mark.write_units(WriteKind::Single)
        + pricing::write_units(&removal, WriteKind::Transaction);
    // The mark: 1 (the device is on no index). The transaction: device, registration, live
    // state and two links deleted, the fleet updated and a purge marker put, 2 each = 14,
    // plus the fleet's directory entry rewritten and the marker's directory entry, 1 each
    // (the state was never seen, so it had no status entry).
    assert_eq!(priced, 17, "what DynamoDB bills");
    assert_ne!(priced as f64, a.used.write_units);
}

fn key_of_text(key: &ItemKey) -> (String, String) {
    let key = key.primary_key();
    (key.pk, key.sk)
}
