//! The shipped binaries work: every function's release `bootstrap` runs as its own process
//! under a local Lambda Runtime API, with the environment template.yaml gives it, against
//! DynamoDB Local (table created from the template, demo data), and every sample event in
//! `events/` is replayed through the matching bootstrap with its expected status. The
//! Docker-free stand-in for `sam local invoke`. `make test` builds the bootstraps first
//! (`make smoke-build`: release profile, host architecture).

use std::collections::BTreeMap;
use std::time::Duration;

use fleet_perf::bench::bootstrap::RunningBootstrap;
use fleet_testkit::bootstrap::{function_environment, host_bootstrap, retention_override};
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
        // Scheduled and stream functions (daily-analytics, alarm-watch) write no request line.
        if template()
            .routes
            .iter()
            .any(|r| r.function == sample.function)
        {
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

/// The release bootstrap under the local Runtime API, with an X-Ray daemon address pointing at
/// a socket of this test: the request's subsegments arrive in the invocation's trace (the
/// `Lambda-Runtime-Trace-Id` the runtime API gave), under its parent, and the metric document
/// in the function's log carries the same trace id.
#[tokio::test]
async fn the_release_bootstrap_sends_its_spans_in_the_invocations_trace() {
    let (table, _) = demo_table().await;
    let daemon = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let function = "DeviceUpdatesFunction";
    let mut env = function_environment(
        template(),
        function,
        endpoint(),
        table.name(),
        &BTreeMap::new(),
    )
    .unwrap();
    env.insert(
        "AWS_XRAY_DAEMON_ADDRESS".into(),
        daemon.local_addr().unwrap().to_string(),
    );
    let log = fleet_testkit::repo_root().join("target/smoke/traced.log");
    let mut bootstrap = RunningBootstrap::start(
        &host_bootstrap(&template().function_definitions[function].binary),
        function,
        &env,
        &log,
    )
    .await
    .unwrap();
    let sample = std::fs::read(events_dir().join("put-me.json")).unwrap();
    let invocation = bootstrap
        .invoke(&sample, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(invocation.outcome.status(), 200);
    // The first invocation of a fresh runtime API.
    let header =
        fleet_perf::bench::runtime_api::trace_header("00000000-0000-4000-8000-000000000001");
    let expected = shared::observe::trace::TraceHeader::parse(&header).unwrap();

    let mut docs = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), daemon.recv(&mut buf)).await
    {
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        let (head, doc) = text
            .split_once('\n')
            .expect("header line, then the document");
        assert_eq!(head, "{\"format\": \"json\", \"version\": 1}");
        docs.push(serde_json::from_str::<Value>(doc).unwrap());
    }
    bootstrap.stop().await;
    assert!(
        docs.len() >= 2,
        "a handler and its DynamoDB call: {docs:#?}"
    );
    let handler = docs
        .iter()
        .find(|d| d["name"] == "PUT /me")
        .expect("handler");
    assert_eq!(handler["trace_id"], expected.root.as_str());
    assert_eq!(handler["parent_id"], expected.parent.as_deref().unwrap());
    for call in docs.iter().filter(|d| d["name"] == "DynamoDB") {
        assert_eq!(call["trace_id"], expected.root.as_str());
        assert_eq!(call["parent_id"], handler["id"]);
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let metrics: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l.get("_aws").is_some())
        .expect("a metric document in the function's log");
    assert_eq!(metrics["traceId"], expected.root.as_str());
    assert_eq!(metrics["Route"], "PUT /me");
    println!(
        "{}\n{}",
        serde_json::to_string_pretty(&metrics).unwrap(),
        serde_json::to_string_pretty(&docs).unwrap()
    );
}

/// The per-user registration limit of the deployed function (`RegistrationsPerUserPerHour`,
/// per execution environment): the release bootstrap with a limit of 2 answers the third
/// registration of one user 429 with `Retry-After`, stores nothing for it, and still serves
/// another user.
#[tokio::test]
async fn the_release_bootstrap_limits_registrations_per_user() {
    let table = fresh_table().await;
    let function = "DeviceUpdatesFunction";
    let overrides = BTreeMap::from([("RegistrationsPerUserPerHour".to_string(), "2".to_string())]);
    let env =
        function_environment(template(), function, endpoint(), table.name(), &overrides).unwrap();
    assert_eq!(env["REGISTRATIONS_PER_USER_PER_HOUR"], "2");
    let mut bootstrap = RunningBootstrap::start(
        &host_bootstrap(&template().function_definitions[function].binary),
        function,
        &env,
        &fleet_testkit::repo_root().join("target/smoke/registrations.log"),
    )
    .await
    .unwrap();
    let mut answers = Vec::new();
    for (user, device) in [
        ("user-many", "many-1"),
        ("user-many", "many-2"),
        ("user-many", "many-3"),
        ("user-other", "other-1"),
    ] {
        let request = ApiRequest::post("/me/devices")
            .caller(user)
            .json(serde_json::json!({"deviceId": device, "name": "D", "type": "thermostat"}));
        let invocation = bootstrap
            .invoke(
                request.event().to_string().as_bytes(),
                Duration::from_secs(30),
            )
            .await
            .unwrap();
        answers.push(invocation.outcome);
    }
    bootstrap.stop().await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status()).collect();
    assert_eq!(statuses, [201, 201, 429, 201], "{answers:#?}");
    let refused = format!("{:?}", answers[2]);
    assert!(refused.contains("rate_limited"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after"),
        "{refused}"
    );
    let stored = table_contents(&table).await;
    assert!(
        !format!("{stored:?}").contains("many-3"),
        "the refused registration stored nothing"
    );
}
