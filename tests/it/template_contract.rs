//! `template.yaml` is the one source of truth for the table: these tests fail when it and the
//! key-design crate disagree on any attribute or index name, and when a route in the template
//! is not served by its function's code.

use std::collections::BTreeSet;

use fleet_testkit::functions::handler_for;
use fleet_tests::*;
use shared::schema::{self, INDEXES, KEY_ATTRIBUTES};

#[test]
fn table_keys_attributes_and_ttl_match_the_key_design() {
    let table = &template().table;
    let declared: BTreeSet<&str> = table.attributes.iter().map(|(n, _)| n.as_str()).collect();
    let expected: BTreeSet<&str> = KEY_ATTRIBUTES.into_iter().collect();
    assert_eq!(declared, expected, "AttributeDefinitions");
    assert!(
        table.attributes.iter().all(|(_, t)| t == "S"),
        "all key attributes are strings"
    );
    let base: Vec<(&str, &str)> = table
        .key_schema
        .iter()
        .map(|k| (k.attribute.as_str(), k.key_type.as_str()))
        .collect();
    assert_eq!(base, [(schema::PK, "HASH"), (schema::SK, "RANGE")]);
    assert_eq!(table.ttl_attribute.as_deref(), Some(schema::TTL));
    assert_eq!(table.billing_mode, "PAY_PER_REQUEST");
}

#[test]
fn indexes_match_the_key_design_including_projections() {
    let table = &template().table;
    assert_eq!(table.indexes.len(), INDEXES.len(), "number of GSIs");
    for spec in INDEXES {
        let index = table
            .indexes
            .iter()
            .find(|i| i.name == spec.name)
            .unwrap_or_else(|| panic!("template has no index {}", spec.name));
        let keys: Vec<(&str, &str)> = index
            .key_schema
            .iter()
            .map(|k| (k.attribute.as_str(), k.key_type.as_str()))
            .collect();
        assert_eq!(
            keys,
            [(spec.partition_key, "HASH"), (spec.sort_key, "RANGE")],
            "{}",
            spec.name
        );
        assert_eq!(index.projection_type, "INCLUDE", "{}", spec.name);
        let projected: BTreeSet<&str> = index
            .non_key_attributes
            .iter()
            .map(String::as_str)
            .collect();
        let expected: BTreeSet<&str> = spec.projected.iter().copied().collect();
        assert_eq!(projected, expected, "{} projection", spec.name);
    }
}

#[tokio::test]
async fn every_template_route_is_served_by_its_function() {
    let table = fresh_table().await;
    for route in &template().routes {
        let Some(handler) = handler_for(&route.code_uri, &table) else {
            panic!("{} ({}) has no handler", route.route_key(), route.function);
        };
        // An unauthenticated request reaches the route's code (401 for JWT routes), never the
        // function's "no route" answer.
        let request = ApiRequest::new(&route.route_key(), &route.path).build();
        let response = handler(request).await;
        let body = String::from_utf8_lossy(response.body().as_ref()).into_owned();
        assert!(!body.contains("no_route"), "{}: {body}", route.route_key());
        if route.authorized {
            assert_eq!(response.status(), 401, "{}", route.route_key());
        }
    }
}

#[tokio::test]
async fn the_table_created_from_the_template_has_the_declared_schema() {
    let table = fresh_table().await;
    let described = table
        .client
        .describe_table()
        .table_name(table.name())
        .send()
        .await
        .unwrap();
    let t = described.table().unwrap();
    let mut names: Vec<&str> = t
        .global_secondary_indexes()
        .iter()
        .filter_map(|g| g.index_name())
        .collect();
    names.sort();
    assert_eq!(names, [schema::GSI1, schema::GSI2]);
    let ttl = table
        .client
        .describe_time_to_live()
        .table_name(table.name())
        .send()
        .await
        .unwrap();
    let ttl = ttl.time_to_live_description().unwrap();
    assert_eq!(ttl.attribute_name(), Some(schema::TTL));
}

/// The template as plain YAML, for the operational resources the local stack ignores.
fn raw_template() -> yaml_serde::Value {
    let text = std::fs::read_to_string(fleet_testkit::template::default_template_path()).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

/// An alarm's namespace, metric, and dimension names and values as text.
type Alarm = (String, String, Vec<(String, String)>);

/// Every `AWS::CloudWatch::Alarm`.
fn alarms() -> Vec<Alarm> {
    let doc = raw_template();
    let resources = doc["Resources"].as_mapping().unwrap();
    resources
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        .map(|r| {
            let p = &r["Properties"];
            let dims = p["Dimensions"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|d| {
                    let value = match &d["Value"] {
                        yaml_serde::Value::Tagged(t) => t.value.as_str().unwrap_or("").to_string(),
                        other => other.as_str().unwrap_or("").to_string(),
                    };
                    (d["Name"].as_str().unwrap().to_string(), value)
                })
                .collect();
            (
                p["Namespace"].as_str().unwrap().to_string(),
                p["MetricName"].as_str().unwrap().to_string(),
                dims,
            )
        })
        .collect()
}

#[test]
fn the_table_and_every_index_alarm_on_read_and_write_throttling() {
    let alarms = alarms();
    let table = &template().table.logical_id;
    for metric in ["ReadThrottleEvents", "WriteThrottleEvents"] {
        let on = |index: Option<&str>| {
            alarms.iter().any(|(ns, m, dims)| {
                ns == "AWS/DynamoDB"
                    && m == metric
                    && dims.contains(&("TableName".into(), table.clone()))
                    && match index {
                        Some(i) => dims.contains(&("GlobalSecondaryIndexName".into(), i.into())),
                        None => dims.len() == 1,
                    }
            })
        };
        assert!(on(None), "no {metric} alarm on the table");
        for index in INDEXES {
            assert!(on(Some(index.name)), "no {metric} alarm on {}", index.name);
        }
    }
}

#[test]
fn every_function_alarms_on_errors_and_p99_duration_and_keeps_bounded_logs() {
    let alarms = alarms();
    let doc = raw_template();
    assert_eq!(
        doc["Globals"]["Function"]["Tracing"].as_str(),
        Some("Active"),
        "X-Ray tracing for every function"
    );
    let resources = doc["Resources"].as_mapping().unwrap();
    for function in template().function_definitions.keys() {
        for metric in ["Errors", "Duration"] {
            assert!(
                alarms.iter().any(|(ns, m, dims)| ns == "AWS/Lambda"
                    && m == metric
                    && dims == &[("FunctionName".to_string(), function.clone())]),
                "{function}: no {metric} alarm"
            );
        }
        let log_group = resources.values().find(|r| {
            r["Type"].as_str() == Some("AWS::Logs::LogGroup")
                && matches!(&r["Properties"]["LogGroupName"], yaml_serde::Value::Tagged(t)
                    if t.value.as_str() == Some(&format!("/aws/lambda/${{{function}}}")))
        });
        let log_group = log_group.unwrap_or_else(|| panic!("{function}: no log group"));
        assert!(
            !log_group["Properties"]["RetentionInDays"].is_null(),
            "{function}: log retention"
        );
    }
}
