//! The benchmark's harness (`make bench`, `local/perf/src/bench/`) measures what it claims: every
//! benchmarked request answers its expected status through the release bootstraps and does
//! its work on the table, and the Python peer, launched under the same local Runtime API
//! as `python -m awslambdaric`, answers the dashboard exactly as the Rust bootstrap. Timing is
//! never asserted here.

use std::time::Duration;

use fleet_perf::bench::bootstrap::{Launch, RunningBootstrap};
use fleet_perf::bench::common::{function_binaries, function_environments, INGEST_FROM};
use fleet_perf::bench::peer::peer_launch;
use fleet_perf::bench::{orgs, patterns};
use fleet_testkit::bootstrap::host_bootstrap;
use fleet_testkit::outcome::Outcome;
use fleet_tests::*;
use serde_json::Value;
use shared::model::entities::{EntityType, ItemKey};
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;

fn logs() -> std::path::PathBuf {
    fleet_testkit::repo_root().join("target/bench-harness")
}

#[tokio::test]
async fn every_benchmarked_request_answers_as_expected_and_does_its_work() {
    let (table, tokens) = reference_table().await;
    fleet_testkit::reference::seed_rollout_fixtures(&table)
        .await
        .unwrap();
    let environments = function_environments(template(), endpoint(), table.name()).unwrap();
    let from = Timestamp::parse_field("from", INGEST_FROM).unwrap();
    // Beside the owner's dashboard, an organization's (issue 33): Alice's organization with a
    // copy of her fleet, read through `GET /orgs/{orgId}/dashboard`.
    let org = orgs::seed(&table).await.unwrap();
    let cases: Vec<patterns::Case> = patterns::cases(&tokens, from)
        .into_iter()
        .chain(orgs::cases(&org))
        .collect();
    let ids: Vec<PatternId> = cases.iter().map(|c| c.id).collect();
    let results = patterns::measure(
        cases,
        &environments,
        &function_binaries(template()),
        1,
        2,
        &logs(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // Every pattern with a route, each call matched to its own request log line.
    assert_eq!(results.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    // Every pattern with a route of its own; AP-10 and AP-11 are fields of the AP-15 report.
    for expected in PatternId::all() {
        let routed = expected.definition().route.is_some();
        assert_eq!(
            ids.contains(&expected),
            routed,
            "{expected} is benchmarked exactly when it has a route"
        );
    }
    assert_eq!(
        ids.len(),
        72,
        "AP-06 twice (a status and a tag change), AP-T4 three times (nothing pending, delivery, a report), AP-29, AP-R1 and AP-R2 once, the 12 organization routes (AP-O1 to AP-O12) and the device move (AP-M1) once, the 10 webhook routes (AP-W1 to AP-W10) once, the 11 firmware routes (AP-F1 to AP-F11) once, AP-DASH twice (the owner's and an organization's)"
    );
    let org_dashboard = results.last().unwrap();
    assert_eq!(
        (org_dashboard.id, org_dashboard.request),
        (
            PatternId::Dashboard,
            "GET /orgs/{orgId}/dashboard (10 devices x 10 events)"
        )
    );
    // The measurement beside it: one membership read (0.5 units) before the dashboard.
    let measured = orgs::measure(&table, &org).await.unwrap();
    assert_eq!(measured.used.operations.get("GetItem"), Some(&1));
    for r in &results {
        assert_eq!(
            (r.invocation_ms.n, r.handler_ms.n),
            (2, 2),
            "{} {}",
            r.id,
            r.request
        );
    }

    // The writes were real: 3 rounds of each (1 warm-up + 2 measured).
    let alice = fleet_testkit::reference::ALICE;
    let profile = item(&table, &key::profile(alice)).await.unwrap();
    assert_eq!(profile["name"].as_s().unwrap(), "Alice 2");
    let status_device = item(&table, &key::device(alice, "ref-alice-dev-9"))
        .await
        .unwrap();
    assert_eq!(status_device["version"].as_n().unwrap(), "4");
    assert_eq!(status_device["status"].as_s().unwrap(), "maintenance");
    let tag_device = item(&table, &key::device(alice, "ref-alice-dev-7"))
        .await
        .unwrap();
    assert_eq!(tag_device["version"].as_n().unwrap(), "4");
    // Each round rotated device 8's token (AP-17), then revoked it (AP-18).
    let token_device = item(&table, &key::registration("ref-alice-dev-8"))
        .await
        .unwrap();
    assert!(token_device.contains_key("revokedAt"), "{token_device:?}");
    for i in 0..3 {
        // Registered, then deleted, by the AP-07 and AP-08 calls of the same round.
        let bench_device = format!("bench-{i}");
        let registration = item(&table, &key::registration(&bench_device)).await;
        assert!(
            registration
                .as_ref()
                .is_some_and(|r| entity_type(r) == Some(EntityType::ReleasedRegistration)),
            "bench-{i} is still registered: {registration:?}"
        );
        let device = item(&table, &key::device(alice, &bench_device)).await;
        assert!(device.is_none(), "bench-{i} is still Alice's");
    }
    let events = table_contents(&table)
        .await
        .into_iter()
        .filter(|i| match key_of(i) {
            ItemKey::Event {
                user, device, at, ..
            } => {
                user == key::user(alice)
                    && device == key::device_id("ref-alice-dev-1")
                    && at.day() == "2026-11-21"
            }
            _ => false,
        })
        .count();
    assert_eq!(events, 300, "3 ingest batches of 100 new events");
}

async fn answer(process: &mut RunningBootstrap, event: &[u8]) -> (u64, Value) {
    let invocation = process
        .invoke(event, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Outcome::Response(response) = invocation.outcome else {
        panic!("not a response: {:?}", invocation.outcome);
    };
    let body = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
    (response["statusCode"].as_u64().unwrap(), body)
}

#[tokio::test]
async fn the_python_peer_under_the_runtime_api_answers_the_dashboard_as_the_rust_bootstrap() {
    let (table, _) = reference_table().await;
    let environments = function_environments(template(), endpoint(), table.name()).unwrap();
    let env = &environments["DashboardFunction"];
    let mut rust = RunningBootstrap::launch(
        &Launch::bootstrap(&host_bootstrap("dashboard")),
        "DashboardFunction",
        env,
        &logs().join("dashboard-rust.log"),
    )
    .await
    .unwrap();
    let mut python = RunningBootstrap::launch(
        &peer_launch("dashboard_handler"),
        "DashboardFunction",
        env,
        &logs().join("dashboard-python.log"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: run `make python-peer`"));
    let event = fleet_testkit::api_event::ApiEvent::new("GET /me/dashboard", "/me/dashboard")
        .caller(fleet_testkit::reference::ALICE)
        .to_bytes();
    for _ in 0..2 {
        let (rust_status, rust_body) = answer(&mut rust, &event).await;
        let (python_status, python_body) = answer(&mut python, &event).await;
        assert_eq!(rust_status, 200);
        assert_eq!(rust_body["devices"].as_array().unwrap().len(), 10);
        assert_eq!((python_status, &python_body), (rust_status, &rust_body));
    }
    // Both are measured the same way: a process of their own, with its peak memory and CPU.
    for process in [&rust, &python] {
        assert!(process.peak_rss_kib().unwrap() > 0);
        assert!(process.cpu_seconds().is_some());
    }
    rust.stop().await;
    python.stop().await;
}
