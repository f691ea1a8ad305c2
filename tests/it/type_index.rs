//! The event-type index in a storm (issue 23): searchable events are indexed under their own
//! device, and the type's shared partitions (`TYPE#{type}#{day}#{shard}`) take one type mark per
//! device, type and hour however many events arrive; AP-09 lists the marks, then reads the
//! marked devices, at most 25 of them, and says whether its answer is complete.

use std::sync::Arc;

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::type_mark::type_window;
use shared::model::entities::EntityType;
use shared::model::ids::EventType;
use shared::model::timestamp::Timestamp;
use shared::ops::events::MAX_TYPE_DEVICES;
use shared::ops::ingest::{IngestConfig, Ingestor};

/// `n` fault events a second apart from `start`, ids `{prefix}-{i}`.
fn faults(prefix: &str, start: &Timestamp, n: i64) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"id": format!("{prefix}-{i}"), "type": "fault", "value": i, "at": start.plus_seconds(i).to_string()})
            })
            .collect(),
    )
}

/// Items on the type's shared index partitions (`TYPE#fault#...`).
fn shared_index_entries(items: &[Item]) -> usize {
    items
        .iter()
        .filter(|i| {
            i.get("GSI1PK")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|pk| pk.starts_with("TYPE#fault#"))
        })
        .count()
}

#[tokio::test]
async fn a_fault_storm_writes_one_mark_per_device_and_hour_and_ap09_stays_bounded() {
    let table = fresh_table().await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    // An hour that started two hours ago: every event below falls in it.
    let hour = type_window(&Timestamp::now().plus_seconds(-2 * 3600));
    let devices = MAX_TYPE_DEVICES + 5;
    for d in 0..devices {
        let device = format!("gw-{d:02}");
        let token = register_device(&table, "storm-owner", &device).await;
        // Three batches of faults from each device within the hour.
        for batch in 0..3 {
            let start = hour.plus_seconds(100 * batch);
            let body = faults(&format!("f{batch}"), &start, 40);
            let a = ingest(&ingestor, ingest_request(&device, &token, body)).await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            // 40 events and the batch's one mark: ceil(41/25) BatchWriteItem calls.
            assert_eq!(a.used.count("BatchWriteItem"), 2);
        }
    }
    let items = table_contents(&table).await;
    let marks = items
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::TypeMark))
        .count();
    assert_eq!(
        marks, devices,
        "one mark per device and hour, not per batch"
    );
    assert_eq!(
        shared_index_entries(&items),
        devices,
        "{} fault events, {devices} entries on the type's shared partitions",
        devices * 120
    );

    // AP-09 over the storm: more devices than one request reads, so a sample, said so.
    let from = hour.to_string();
    let to = hour.plus_seconds(3599).to_string();
    let a = dashboard(
        &table,
        ApiRequest::get("/admin/events")
            .admin("ops")
            .query("type", "fault")
            .query("from", &from)
            .query("to", &to)
            .query("limit", "50"),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["complete"], false);
    assert_eq!(a.body["devices"], devices);
    let events = a.body["events"].as_array().unwrap();
    assert_eq!(events.len(), 50, "the limit, from the devices read");
    assert!(events.iter().all(|e| e["type"] == "fault"));
    assert!(events
        .windows(2)
        .all(|w| w[0]["at"].as_str() >= w[1]["at"].as_str()));
    let sampled: std::collections::BTreeSet<&str> = events
        .iter()
        .map(|e| e["deviceId"].as_str().unwrap())
        .collect();
    assert_eq!(
        sampled.len(),
        MAX_TYPE_DEVICES,
        "an even share from each device read"
    );
    let fault = EventType::parse("fault").unwrap();
    let shards = u32::from(table.config.shards.type_shards(&fault).unwrap());
    assert_eq!(
        a.used.requests(),
        shards + MAX_TYPE_DEVICES as u32,
        "one Query per shard of the day's marks, one per device read"
    );
    eprintln!(
        "AP-09 over a storm of {devices} devices x 120 faults: {} requests, {} RCU",
        a.used.requests(),
        a.used.read_units
    );

    // A quiet range of the same day (one device's faults only): exact, and cheap.
    let token = register_device(&table, "quiet-owner", "quiet-1").await;
    let quiet_hour = hour.plus_seconds(-3600);
    let a = ingest(
        &ingestor,
        ingest_request("quiet-1", &token, faults("q", &quiet_hour, 3)),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let a = dashboard(
        &table,
        ApiRequest::get("/admin/events")
            .admin("ops")
            .query("type", "fault")
            .query("from", &quiet_hour.to_string())
            .query("to", &quiet_hour.plus_seconds(3599).to_string()),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["complete"], true);
    assert_eq!(a.body["devices"], 1);
    let ids: Vec<&str> = a.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["q-2", "q-1", "q-0"],
        "exactly the hour's faults, newest first"
    );
    assert_eq!(a.used.requests(), shards + 1);
    eprintln!(
        "AP-09 over a quiet hour (1 device x 3 faults): {} requests, {} RCU",
        a.used.requests(),
        a.used.read_units
    );
}
