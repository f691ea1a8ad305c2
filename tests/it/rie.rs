//! `sam local invoke`'s own emulator, without Docker: every sample event in `events/` goes
//! through its function's release bootstrap under AWS's Runtime Interface Emulator
//! (`aws-lambda-rie`, shipped in the pinned SAM CLI in `.venv/`), one cold emulator per sample
//! as `sam local invoke` starts one container per invoke, with the environment template.yaml
//! gives the function (and what SAM adds), on DynamoDB Local with the demo data, and answers
//! the status `events/manifest.json` gives. Next to `replay.rs` (in-process) and
//! `emulator.rs` (cargo-lambda's). `make rie-replay` runs this module alone; `make test`
//! builds the bootstraps first (`make smoke-build`).

use std::time::{Duration, Instant};

use fleet_testkit::bootstrap::{function_environment, host_bootstrap, retention_override};
use fleet_testkit::rie::{invoke_cold, rie_binary, sam_environment};
use fleet_tests::*;
use serde_json::Value;

#[tokio::test]
async fn every_sample_event_gets_its_expected_status_under_aws_lambda_rie() {
    let rie = rie_binary().expect("the SAM CLI's aws-lambda-rie (make python-tools)");
    let (table, _) = demo_table().await;
    // The samples carry fixed timestamps: keep them inside retention, as replay.rs does (SAM's
    // `--parameter-overrides RetentionDays=...`).
    let overrides = retention_override(SAMPLE_RETENTION_DAYS);
    let logs = fleet_testkit::repo_root().join("target/rie");
    let started = Instant::now();
    let mut failures = Vec::new();
    let samples = sample_events();
    for sample in &samples {
        let definition = &template().function_definitions[&sample.function];
        let env = function_environment(
            template(),
            &sample.function,
            endpoint(),
            table.name(),
            &overrides,
        )
        .expect("function environment");
        let env = sam_environment(&env, definition.timeout_seconds);
        let log = logs.join(sample.file.replace(".json", ".log"));
        let outcome = invoke_cold(
            &host_bootstrap(&definition.binary),
            &env,
            sample.text.as_bytes(),
            Duration::from_secs(u64::from(definition.timeout_seconds) + 30),
            &log,
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", sample.file));
        let status = outcome.status();
        if status != sample.status {
            failures.push(format!(
                "{}: expected {}, got {status}: {outcome:?} (log: {})",
                sample.file,
                sample.status,
                log.display()
            ));
            continue;
        }
        // The function's own output came through the emulator: an HTTP function's one JSON
        // request line with the status it answered.
        if template()
            .routes
            .iter()
            .any(|r| r.function == sample.function)
        {
            let text = std::fs::read_to_string(&log).unwrap();
            let logged: Vec<u64> = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|l| l.get("route").is_some())
                .filter_map(|l| l["status"].as_u64())
                .collect();
            if logged != [u64::from(status)] {
                failures.push(format!("{}: request log lines {logged:?}", sample.file));
            }
        }
    }
    println!(
        "{} samples through {} (one cold emulator each) in {:.1} s",
        samples.len(),
        rie.display(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The `--env-vars` file `make sam-env` writes for `sam local` with Docker: for every function,
/// the table and DynamoDB Local's endpoint, and nothing the template does not declare (SAM
/// silently ignores such a name, so the endpoint override would be lost).
#[test]
fn the_sam_env_vars_file_points_every_function_at_the_local_table_with_declared_names_only() {
    let endpoint = "http://127.0.0.1:8765";
    let file = fleet_testkit::rie::sam_env_vars(template(), endpoint, "fleet-dev-table").unwrap();
    let functions = file.as_object().unwrap();
    assert_eq!(functions.len(), template().function_definitions.len());
    for (function, env) in functions {
        let declared = template()
            .function_environment(function, "x", &std::collections::BTreeMap::new())
            .unwrap();
        let env = env.as_object().unwrap();
        for name in env.keys() {
            assert!(
                declared.contains_key(name),
                "{function}: {name} is not declared"
            );
        }
        assert_eq!(env["TABLE_NAME"], "fleet-dev-table", "{function}");
        assert_eq!(env["AWS_ENDPOINT_URL_DYNAMODB"], endpoint, "{function}");
        assert_eq!(
            env["RETENTION_DAYS"],
            SAMPLE_RETENTION_DAYS.to_string(),
            "{function}: the samples' fixed timestamps stay in retention"
        );
    }
}
