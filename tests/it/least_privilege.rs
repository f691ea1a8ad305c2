//! Least privilege, proven: every sample event is replayed through its function with a client
//! that records what IAM would be asked to allow (actions, including a transaction's inner
//! actions, on the table or its indexes). Each function's policy in `template.yaml` must
//! grant exactly that: a missing grant would be an AccessDenied in production, an extra one
//! a privilege no code path uses.

use std::collections::{BTreeMap, BTreeSet};

use fleet_testkit::functions::invoke;
use fleet_testkit::iam::{Grant, GrantRecorder, INDEXES, TABLE};
use fleet_tests::*;

/// The grants a function's policy statements give, in the recorder's terms.
fn granted(function: &str) -> BTreeSet<Grant> {
    let table = &template().table.logical_id;
    let definition = &template().function_definitions[function];
    let mut grants = BTreeSet::new();
    for statement in &definition.policy {
        assert_eq!(
            statement.effect, "Allow",
            "{function}: only Allow statements"
        );
        for resource in &statement.resources {
            let resource = if resource == table {
                TABLE.to_string()
            } else if *resource == format!("{table}/index/*") {
                INDEXES.to_string()
            } else {
                panic!("{function}: unexpected resource {resource}");
            };
            for action in &statement.actions {
                grants.insert((action.clone(), resource.clone()));
            }
        }
    }
    grants
}

#[tokio::test]
async fn every_function_is_granted_exactly_the_dynamodb_actions_its_code_uses() {
    let (mut table, _) = demo_table().await;
    table.config.retention_days = SAMPLE_RETENTION_DAYS;
    let recorders: BTreeMap<&String, GrantRecorder> = template()
        .functions
        .keys()
        .map(|f| (f, GrantRecorder::default()))
        .collect();
    for sample in sample_events() {
        let mut recorded = table.clone();
        recorded.client = recorders[&sample.function].client(&table.client);
        let response = invoke(template(), &recorded, &sample.function, &sample.text)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", sample.file));
        assert_eq!(
            response["statusCode"], sample.status,
            "{}: {response}",
            sample.file
        );
    }
    for (function, recorder) in &recorders {
        let used = recorder.grants();
        let granted = granted(function);
        let missing: Vec<_> = used.difference(&granted).collect();
        let unused: Vec<_> = granted.difference(&used).collect();
        assert!(
            missing.is_empty() && unused.is_empty(),
            "{function}: used but not granted {missing:?}; granted but unused {unused:?}"
        );
    }
}
