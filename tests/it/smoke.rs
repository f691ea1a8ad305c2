//! The shipped binaries work: every function's release `bootstrap` runs as its own process
//! under a local Lambda Runtime API, with the environment template.yaml gives it, against
//! DynamoDB Local (table created from the template, demo data), and every sample event in
//! `events/` is replayed through the matching bootstrap with its expected status. The
//! Docker-free stand-in for `sam local invoke`. `make test` builds the bootstraps first
//! (`make smoke-build`: release profile, host architecture).

use std::collections::BTreeMap;
use std::time::Duration;

use fleet_testkit::bootstrap::{
    function_environment, host_bootstrap, retention_override, RunningBootstrap,
};
use fleet_tests::*;
use serde_json::Value;

#[tokio::test]
async fn every_sample_event_gets_its_expected_status_from_the_release_bootstraps() {
    let (table, _) = demo_table().await;
    // The samples carry fixed timestamps: keep them inside retention, as the in-process replay
    // does (a parameter override, like `sam local invoke --parameter-overrides`).
    let overrides = retention_override(SAMPLE_RETENTION_DAYS);
    let logs = fleet_testkit::repo_root().join("target/smoke");
    let mut running = BTreeMap::new();
    for (function, definition) in &template().function_definitions {
        let env = function_environment(template(), function, endpoint(), table.name(), &overrides)
            .expect("function environment");
        let bootstrap = RunningBootstrap::start(
            &host_bootstrap(&definition.binary),
            function,
            &env,
            &logs.join(format!("{function}.log")),
        )
        .await
        .unwrap_or_else(|e| panic!("{function}: {e}"));
        running.insert(function.clone(), bootstrap);
    }

    let mut failures = Vec::new();
    let mut http_requests: BTreeMap<String, Vec<u16>> = BTreeMap::new();
    for sample in sample_events() {
        let bootstrap = running.get_mut(&sample.function).expect("a bootstrap");
        let invocation = bootstrap
            .invoke(sample.text.as_bytes(), Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", sample.file));
        let status = invocation.outcome.status();
        if status != sample.status {
            failures.push(format!(
                "{}: expected {}, got {status}: {:?}",
                sample.file, sample.status, invocation.outcome
            ));
        }
        if sample.function != "DailyAnalyticsFunction" {
            http_requests
                .entry(sample.function.clone())
                .or_default()
                .push(status);
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");

    // Each HTTP function wrote one JSON request line per event, with the status it answered,
    // and nothing on its output is anything but JSON.
    for (function, bootstrap) in running {
        let log = bootstrap.log_path().to_path_buf();
        bootstrap.stop().await;
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|_| panic!("{function}: a log line is not JSON: {l}"))
            })
            .collect();
        if let Some(statuses) = http_requests.get(&function) {
            let logged: Vec<u16> = lines
                .iter()
                .filter(|l| l.get("route").is_some())
                .filter_map(|l| l["status"].as_u64().map(|s| s as u16))
                .collect();
            assert_eq!(&logged, statuses, "{function}: request log lines");
        }
    }
}
