//! `docs/access-patterns.md` and `docs/model.json` are generated from the catalog and a
//! measured run on the reference dataset; this fails when the checked-in files are stale
//! (`make docs` regenerates them).

use fleet_perf::model_docs::{render, MARKDOWN_PATH, MODEL_PATH};
use fleet_testkit::pricing::measure_priced;
use fleet_tests::*;

#[tokio::test]
async fn generated_docs_are_current() {
    let (table, tokens) = reference_table().await;
    let measurements = measure_priced(&table, &tokens).await.expect("patterns run");
    let (markdown, model) = render(&measurements);
    let root = fleet_testkit::repo_root();
    for (path, generated) in [(MARKDOWN_PATH, markdown), (MODEL_PATH, model)] {
        let current = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        assert!(
            current == generated,
            "{path} is stale: run `make docs`\n--- generated ---\n{generated}"
        );
    }
}

/// `docs/benchmarks.json` (with `docs/benchmarks.md`, written by the same `make bench` run), as
/// checked in.
fn checked_in_benchmarks() -> serde_json::Value {
    let root = fleet_testkit::repo_root();
    let json = std::fs::read_to_string(root.join(fleet_perf::bench::report::JSON_PATH))
        .expect("docs/benchmarks.json is checked in");
    let markdown = std::fs::read_to_string(root.join(fleet_perf::bench::report::MARKDOWN_PATH))
        .expect("docs/benchmarks.md is checked in");
    let report: serde_json::Value = serde_json::from_str(&json).expect("benchmarks.json parses");
    let commit = report["machine"]["commit"].as_str().unwrap_or_default();
    assert!(
        !commit.is_empty() && markdown.contains(&format!("at commit `{commit}`")),
        "docs/benchmarks.md and docs/benchmarks.json are not from one `make bench` run"
    );
    report
}

/// The text id of a pattern, as the report writes it.
fn pattern_text(id: shared::model::pattern_id::PatternId) -> String {
    serde_json::to_value(id)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Fails when a pattern case was added, removed or renamed since the last `make bench`: every
/// case of the catalog (and the organization's dashboard) has its row, and no row is of a
/// case that is gone.
#[test]
fn the_benchmark_measured_every_pattern_case_and_no_other() {
    use fleet_perf::bench::orgs::{ORG_DASHBOARD_REQUEST, ORG_DASHBOARD_WORKLOAD};
    use fleet_testkit::reference::cases::CASES;
    use shared::model::pattern_id::PatternId;
    let report = checked_in_benchmarks();
    let rows = report["patterns"].as_array().cloned().unwrap_or_default();
    let mut measured: Vec<(String, String)> = rows
        .iter()
        .map(|row| {
            let text = |k: &str| row[k].as_str().unwrap_or_default().to_string();
            (text("id"), text("workload"))
        })
        .collect();
    let mut expected: Vec<(String, String)> = CASES
        .iter()
        .map(|case| (pattern_text(case.id), case.workload.to_string()))
        .chain([(
            pattern_text(PatternId::Dashboard),
            ORG_DASHBOARD_WORKLOAD.to_string(),
        )])
        .collect();
    let mut timed: Vec<String> = rows
        .iter()
        .filter_map(|row| row["latency"]["request"].as_str().map(str::to_string))
        .collect();
    let mut calls: Vec<String> = CASES
        .iter()
        .filter_map(|case| case.call.as_ref().map(|call| call.request.to_string()))
        .chain([ORG_DASHBOARD_REQUEST.to_string()])
        .collect();
    for list in [&mut measured, &mut expected] {
        list.sort();
    }
    timed.sort();
    calls.sort();
    let missing: Vec<_> = expected.iter().filter(|c| !measured.contains(c)).collect();
    let gone: Vec<_> = measured.iter().filter(|c| !expected.contains(c)).collect();
    assert!(
        missing.is_empty() && gone.is_empty() && measured.len() == expected.len(),
        "docs/benchmarks.md is stale (run `make bench`): cases not measured {missing:?}; rows of \
         no current case {gone:?}"
    );
    assert_eq!(
        timed, calls,
        "docs/benchmarks.md is stale (run `make bench`): the requests it timed are not the cases' \
         route calls"
    );
}

/// Fails when a route the benchmark timed is no longer in the template (renamed or moved).
#[test]
fn every_route_the_benchmark_timed_is_in_the_template() {
    use fleet_testkit::template::{default_template_path, Template};
    let template = Template::load(&default_template_path()).expect("template.yaml loads");
    let routes: Vec<String> = template.routes.iter().map(|r| r.route_key()).collect();
    let report = checked_in_benchmarks();
    let rows = report["patterns"].as_array().cloned().unwrap_or_default();
    let unknown: Vec<String> = rows
        .iter()
        .filter_map(|row| row["latency"]["request"].as_str())
        .filter(|request| {
            // "GET /me/events?limit=50 (a day: 100 events)": the method and path before the
            // query and the workload.
            let route = request
                .split([' ', '?'])
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            !routes.contains(&route)
        })
        .map(str::to_string)
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/benchmarks.md times routes the template does not have (run `make bench`): {unknown:?}"
    );
}

/// Fails when the benchmark's ingest by arrival order is missing a case: every order, at 100
/// events a request and at one, without a CPU limit and under the ingest function's memory size.
#[test]
fn the_benchmark_measured_ingest_in_every_arrival_order() {
    use fleet_perf::bench::orders::Order;
    use fleet_testkit::template::{default_template_path, Template};
    let template = Template::load(&default_template_path()).expect("template.yaml loads");
    let memory_mb = template.function_definitions["IngestFunction"].memory_mb;
    let report = checked_in_benchmarks();
    let runs: Vec<(String, u64, Option<u64>)> = report["orders"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|run| {
            (
                run["workload"]["order"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                run["workload"]["events_per_request"]
                    .as_u64()
                    .unwrap_or_default(),
                run["memory_mb"].as_u64(),
            )
        })
        .collect();
    let mut missing = Vec::new();
    for memory in [None, Some(u64::from(memory_mb))] {
        for events in [100, 1] {
            for order in Order::ALL {
                let name = serde_json::to_value(order)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                if !runs.contains(&(name.clone(), events, memory)) {
                    missing.push(format!("{name}, {events} events a request, {memory:?} MB"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/benchmarks.md has no ingest run for (run `make bench`): {missing:?}"
    );
}
