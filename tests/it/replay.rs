//! Replays every sample event in `events/` through its function on a table seeded with the
//! demo data, in the order of `events/manifest.json` (what `sam local invoke -e` would do),
//! and checks each answer's status.

use std::collections::BTreeSet;

use fleet_testkit::functions::invoke;
use fleet_tests::*;

#[test]
fn every_sample_event_is_in_the_manifest_and_targets_a_template_route() {
    let samples = sample_events();
    let listed: BTreeSet<String> = samples.iter().map(|s| s.file.clone()).collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(events_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".json") && f != "manifest.json")
        .collect();
    assert_eq!(listed, on_disk, "events/ and events/manifest.json disagree");
    for sample in samples {
        let event: serde_json::Value = serde_json::from_str(&sample.text).unwrap();
        assert!(
            template().functions.contains_key(&sample.function),
            "{}: no function {} in template.yaml",
            sample.file,
            sample.function
        );
        // Scheduled and hand-made invocations of daily-analytics are not HTTP events.
        if !template()
            .routes
            .iter()
            .any(|r| r.function == sample.function)
        {
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
    for sample in sample_events() {
        let response = invoke(template(), &table, &sample.function, &sample.text)
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
