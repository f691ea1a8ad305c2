//! `template.yaml` is the one source of truth for the table: these tests fail when it and the
//! key-design crate disagree on any attribute or index name, and when a route in the template
//! is not served by its function's code.

use std::collections::BTreeSet;

use fleet_local::functions::handler_for;
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
