//! The key-distribution simulator and the cost model: their size rules against the consumed
//! capacity DynamoDB Local reports for the same items, and the generated reports kept current.

use shared::model::expression::{Condition, Expressions};
use shared::model::schema::{PK, SK};
use shared::store::with_expressions::WithExpressions;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use fleet_testkit::capacity::{index_entry, item_size, query_read_units, write_units};
use fleet_tests::*;
use shared::model::entities::device::DEVICE_PREFIX;
use shared::model::entities::profile::PROFILE_SK;
use shared::model::ids::UserId;
use shared::model::keys::user_pk;
use shared::model::schema::INDEXES;
use shared::ops::dashboard;

#[tokio::test]
async fn the_size_rules_give_the_dashboards_measured_read_units() {
    let (table, _) = reference_table().await;
    let user = UserId::parse(fleet_testkit::reference::ALICE).unwrap();
    let (dash, used) = metered(dashboard::dashboard(&table, &user, None)).await;
    assert_eq!(dash.unwrap().devices.len(), 10);
    // The same range, read raw: the model's units for exactly those items.
    let items = table
        .client
        .query()
        .table_name(table.name())
        .expressions(
            Expressions::builder()
                .key_condition(
                    Condition::equals(PK, AttributeValue::S(user_pk(&user))).and(
                        Condition::between(
                            SK,
                            AttributeValue::S(DEVICE_PREFIX.into()),
                            AttributeValue::S(PROFILE_SK.into()),
                        ),
                    ),
                )
                .build(),
        )
        .send()
        .await
        .unwrap()
        .items
        .unwrap();
    assert_eq!(
        items.len(),
        22,
        "10 devices, their 10 live states, the fleet item and the profile"
    );
    let bytes: u64 = items.iter().map(item_size).sum();
    assert_eq!(query_read_units(bytes), used.read_units, "{bytes} bytes");
}

#[tokio::test]
async fn the_size_rules_give_an_events_measured_write_units_on_the_table_and_each_index() {
    let (table, _) = reference_table().await;
    let stored = table_contents(&table).await;
    // An alarm: a searchable type, so on GSI1 (telemetry is on no index).
    let event = stored
        .iter()
        .find(|i| {
            i.get("entityType") == Some(&AttributeValue::S("event".into()))
                && i.contains_key("GSI1PK")
        })
        .expect("the reference dataset has alarms");
    // The same event under a new id (a new item, so no index entry is replaced).
    let mut item: HashMap<String, AttributeValue> = event.clone().into_iter().collect();
    for key in ["SK", "GSI1SK"] {
        let text = item[key].as_s().unwrap().clone();
        item.insert(key.into(), AttributeValue::S(format!("{text}-copy")));
    }
    let out = table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item.clone()))
        .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
        .send()
        .await
        .unwrap();
    let consumed = out.consumed_capacity.expect("capacity");
    let table_units = consumed.table.and_then(|c| c.capacity_units).unwrap();
    assert_eq!(table_units, write_units(item_size(&item)) as f64);
    let indexes = consumed.global_secondary_indexes.expect("index capacity");
    for index in &INDEXES {
        match index_entry(&item, index) {
            Some(entry) => assert_eq!(
                indexes[index.name].capacity_units.unwrap(),
                write_units(item_size(&entry)) as f64,
                "{}",
                index.name
            ),
            None => assert!(
                indexes
                    .get(index.name)
                    .is_none_or(|c| c.capacity_units == Some(0.0)),
                "an event is in no directory entry: {indexes:?}"
            ),
        }
    }
    // Byte-exact: padded to exactly 1,024 bytes by the model it is 1 unit; one byte more, 2.
    for (extra, expected) in [(0, 1.0), (1, 2.0)] {
        let mut padded = item.clone();
        padded.insert(
            "SK".into(),
            AttributeValue::S(format!("{}-{extra}", item["SK"].as_s().unwrap())),
        );
        let room = 1024 - item_size(&padded) - "pad".len() as u64;
        let pad = "x".repeat(room as usize + extra);
        padded.insert("pad".into(), AttributeValue::S(pad));
        assert_eq!(item_size(&padded), 1024 + extra as u64);
        let out = table
            .client
            .put_item()
            .table_name(table.name())
            .set_item(Some(padded))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .unwrap();
        let units = out
            .consumed_capacity
            .and_then(|c| c.capacity_units)
            .unwrap();
        // Total = table + the GSI1 entry (1 unit, the pad is not projected).
        assert_eq!(units, expected + 1.0, "{} bytes", 1024 + extra);
    }
}

#[test]
fn the_generated_reports_are_current() {
    fleet_perf::key_distribution::command(&[], true)
        .unwrap_or_else(|e| panic!("{e} (docs/key-distribution.md)"));
    fleet_perf::cost::command(&[], true).unwrap_or_else(|e| panic!("{e} (docs/cost-model.md)"));
    // The report is current, so what it says holds for every checked-in profile (including
    // utility-10m-devices: about 1M events/s over 10M devices): no key over a per-partition limit.
    let report =
        std::fs::read_to_string(fleet_testkit::repo_root().join(fleet_perf::simulate::REPORT_PATH))
            .unwrap();
    assert!(
        report.contains("utility-10m-devices"),
        "the 1M events/s profile is simulated"
    );
    assert!(
        !report.contains("over DynamoDB's per-partition limits")
            && !report.contains("keys over the per-partition limits"),
        "a checked-in profile has a key over 1,000 WCU/s or 3,000 RCU/s: see {}",
        fleet_perf::simulate::REPORT_PATH
    );
}
