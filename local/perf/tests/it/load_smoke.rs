//! A short smoke run of the load test (`make load` runs the long one): the dev server on
//! loopback under concurrent ingest and dashboard traffic answers every request with a 2xx,
//! and every event an ingest answer acknowledged is stored, once.

use std::time::Duration;

use fleet_perf::load::{run, Kind, LoadConfig};
use fleet_tests::*;
use shared::model::entities::ItemKey;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_load_run_has_no_errors_and_stores_every_acknowledged_event() {
    let (table, _) = demo_table().await;
    let config = LoadConfig {
        duration: Duration::from_secs(3),
        concurrency: 4,
        devices: 4,
        batch: 5,
        ingest_per_10: 5,
    };
    let report = run(template(), &table, config).await.unwrap();
    println!("{}", report.render());
    assert!(report.errors().is_empty(), "{}", report.render());
    for kind in [
        Kind::Ingest,
        Kind::Dashboard,
        Kind::Devices,
        Kind::DeviceEvents,
        Kind::MyEvents,
    ] {
        assert!(
            report
                .kinds
                .get(&kind)
                .is_some_and(|k| !k.latencies.is_empty()),
            "no {kind:?} requests: {}",
            report.render()
        );
    }
    let stored = table_contents(&table)
        .await
        .iter()
        .filter(
            |i| matches!(key_of(i), ItemKey::Event { user, .. } if user == key::user("load-user")),
        )
        .count();
    assert!(report.events_acknowledged > 0);
    assert_eq!(stored, report.events_acknowledged);
}
