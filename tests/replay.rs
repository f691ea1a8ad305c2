//! Replays every sample event in `events/` through its function on a table seeded with the
//! demo data, in the order of `events/manifest.json` (what `sam local invoke -e` would do),
//! and checks each answer's status.

use std::collections::BTreeSet;

use fleet_local::functions::invoke;
use fleet_tests::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Manifest {
    events: Vec<Sample>,
}

#[derive(Deserialize)]
struct Sample {
    file: String,
    function: String,
    status: u16,
}

/// Retention for replaying the samples, whose timestamps are fixed.
const SAMPLE_RETENTION_DAYS: u32 = 3650;

fn events_dir() -> std::path::PathBuf {
    fleet_local::repo_root().join("events")
}

fn manifest() -> Manifest {
    let text = std::fs::read_to_string(events_dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).expect("events/manifest.json")
}

#[test]
fn every_sample_event_is_in_the_manifest_and_targets_a_template_route() {
    let listed: BTreeSet<String> = manifest().events.into_iter().map(|s| s.file).collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(events_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".json") && f != "manifest.json")
        .collect();
    assert_eq!(listed, on_disk, "events/ and events/manifest.json disagree");
    for sample in manifest().events {
        let text = std::fs::read_to_string(events_dir().join(&sample.file)).unwrap();
        let event: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(
            template().functions.contains_key(&sample.function),
            "{}: no function {} in template.yaml",
            sample.file,
            sample.function
        );
        if event["source"] == "aws.events" {
            continue;
        }
        let route_key = event["routeKey"].as_str().unwrap_or_default();
        assert!(
            template()
                .routes
                .iter()
                .any(|r| r.route_key() == route_key && r.function == sample.function),
            "{}: {route_key} is not a route of {} in template.yaml",
            sample.file,
            sample.function
        );
        assert_eq!(
            event["version"], "2.0",
            "{}: payload format 2.0",
            sample.file
        );
    }
}

#[tokio::test]
async fn every_sample_event_gets_its_expected_status() {
    let (mut table, _) = demo_table().await;
    // The samples carry fixed timestamps (see events/manifest.json).
    table.config.retention_days = SAMPLE_RETENTION_DAYS;
    let mut failures = Vec::new();
    for sample in manifest().events {
        let text = std::fs::read_to_string(events_dir().join(&sample.file)).unwrap();
        let response = invoke(template(), &table, &sample.function, &text)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", sample.file));
        let status = response["statusCode"].as_u64().unwrap_or(0) as u16;
        if status != sample.status {
            failures.push(format!(
                "{}: expected {}, got {status} {response}",
                sample.file, sample.status
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
