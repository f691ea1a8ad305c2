//! Least privilege, proven: every sample event is replayed through its function with a client
//! that records what IAM would be asked to allow (actions, including a transaction's inner
//! actions, on the table or its indexes). Each function's policy in `template.yaml` must
//! grant exactly that: a missing grant would be an AccessDenied in production, an extra one
//! a privilege no code path uses.

use std::collections::{BTreeMap, BTreeSet};

use fleet_testkit::functions::invoke;
use fleet_testkit::iam::{Grant, GrantRecorder, INDEXES, TABLE};
use fleet_tests::*;

/// The grants a function's policy statements give on the table and its indexes, in the
/// recorder's terms. Grants on other resources (the table's stream, the alarm bus) are not
/// DynamoDB calls the code makes: [`alarm_watch_alone_reads_the_stream_and_publishes_on_the_bus_only`]
/// checks them.
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
            } else if outside_the_table(table, resource) {
                continue;
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

/// The table's stream and the alarm bus: resources no DynamoDB call of the code names.
fn outside_the_table(table: &str, resource: &str) -> bool {
    resource == format!("{table}.StreamArn")
        || resource == format!("{table}/stream/*")
        || resource == "AlarmBus"
}

#[test]
fn alarm_watch_alone_reads_the_stream_and_publishes_on_the_bus_only() {
    let table = &template().table.logical_id;
    let mut stream_readers = BTreeSet::new();
    let mut publishers = BTreeSet::new();
    for (function, definition) in &template().function_definitions {
        for statement in &definition.policy {
            for resource in &statement.resources {
                for action in &statement.actions {
                    if action.starts_with("events:") {
                        assert_eq!(action, "events:PutEvents", "{function}");
                        assert_eq!(
                            resource, "AlarmBus",
                            "{function}: PutEvents on the bus only"
                        );
                        publishers.insert(function.clone());
                    }
                    if resource == &format!("{table}.StreamArn") {
                        assert!(
                            [
                                "dynamodb:DescribeStream",
                                "dynamodb:GetRecords",
                                "dynamodb:GetShardIterator"
                            ]
                            .contains(&action.as_str()),
                            "{function}: {action} on the stream"
                        );
                        stream_readers.insert(function.clone());
                    }
                    if resource == &format!("{table}/stream/*") {
                        assert_eq!(action, "dynamodb:ListStreams", "{function}");
                    }
                }
            }
        }
    }
    let only = BTreeSet::from(["AlarmWatchFunction".to_string()]);
    assert_eq!(publishers, only);
    assert_eq!(stream_readers, only);
}
