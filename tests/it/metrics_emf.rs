//! The metrics documents (CloudWatch Embedded Metric Format) the functions write: each is
//! checked against the specification's structure and against what the request really did.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fleet_tests::*;
use serde_json::{json, Value};
use shared::observe::emf;
use shared::ops::ingest::{IngestConfig, Ingestor};

/// The units the EMF specification allows (CloudWatch's StandardUnit values).
const UNITS: [&str; 27] = [
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// Checks `doc` against the EMF specification's structure: `_aws.Timestamp` (epoch
/// milliseconds), `_aws.CloudWatchMetrics[]` with a `Namespace`, `Dimensions` (arrays of at
/// most 30 names) and `Metrics` (at most 100, each a `Name` and an allowed `Unit`), and every
/// referenced dimension (a string) and metric (a number) present as a top-level member.
/// Returns the dimension sets and metric names.
pub(crate) fn validate_emf(doc: &Value) -> Result<(Vec<Vec<String>>, BTreeSet<String>), String> {
    let aws = doc.get("_aws").ok_or("no _aws")?;
    let timestamp = aws["Timestamp"]
        .as_u64()
        .ok_or("_aws.Timestamp is not an integer")?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    if timestamp > now || now - timestamp > 60_000 {
        return Err(format!(
            "_aws.Timestamp {timestamp} is not epoch milliseconds of now"
        ));
    }
    let directives = aws["CloudWatchMetrics"]
        .as_array()
        .ok_or("no CloudWatchMetrics array")?;
    if directives.is_empty() {
        return Err("CloudWatchMetrics is empty".into());
    }
    let mut sets = Vec::new();
    let mut metrics = BTreeSet::new();
    for directive in directives {
        let namespace = directive["Namespace"].as_str().ok_or("no Namespace")?;
        if namespace.is_empty() || namespace.len() > 1024 {
            return Err(format!("bad Namespace {namespace:?}"));
        }
        for set in directive["Dimensions"]
            .as_array()
            .ok_or("no Dimensions array")?
        {
            let names: Vec<String> = set
                .as_array()
                .ok_or("a DimensionSet is not an array")?
                .iter()
                .map(|n| {
                    n.as_str()
                        .map(String::from)
                        .ok_or("a dimension name is not a string")
                })
                .collect::<Result<_, _>>()?;
            if names.len() > 30 {
                return Err(format!("{} dimensions in one set", names.len()));
            }
            for name in &names {
                if !doc[name].is_string() {
                    return Err(format!("dimension {name} has no string member"));
                }
            }
            sets.push(names);
        }
        let defined = directive["Metrics"].as_array().ok_or("no Metrics array")?;
        if defined.len() > 100 {
            return Err(format!("{} metrics in one directive", defined.len()));
        }
        for metric in defined {
            let name = metric["Name"].as_str().ok_or("a metric without Name")?;
            if let Some(unit) = metric.get("Unit") {
                if !unit.as_str().is_some_and(|u| UNITS.contains(&u)) {
                    return Err(format!("{name}: unit {unit} is not an EMF unit"));
                }
            }
            if !doc[name].is_number() {
                return Err(format!("metric {name} has no numeric member"));
            }
            metrics.insert(name.to_string());
        }
    }
    Ok((sets, metrics))
}

#[test]
fn the_validator_refuses_what_cloudwatch_would_drop() {
    let used = shared::store::metrics::MeterSnapshot::default();
    let figures = emf::RequestFigures {
        route: "PUT /me",
        status: 200,
        latency_ms: 1.0,
        used: &used,
        request_id: None,
        device_id: None,
        trace_id: None,
    };
    let good = emf::request_document(&figures, true);
    assert!(validate_emf(&good).is_ok());
    assert_eq!(good["ColdStart"], 1.0);
    let mut no_member = good.clone();
    no_member.as_object_mut().unwrap().remove("Latency");
    assert!(validate_emf(&no_member).is_err());
    let mut no_dimension = good.clone();
    no_dimension.as_object_mut().unwrap().remove("Route");
    assert!(validate_emf(&no_dimension).is_err());
    let mut seconds = good.clone();
    seconds["_aws"]["Timestamp"] = json!(good["_aws"]["Timestamp"].as_u64().unwrap() / 1000);
    assert!(validate_emf(&seconds).is_err());
    let mut bad_unit = good;
    bad_unit["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"] = json!("Requests");
    assert!(validate_emf(&bad_unit).is_err());
}

#[tokio::test]
async fn an_ingest_request_writes_one_document_with_its_real_figures() {
    let table = fresh_table().await;
    let token = register_device(&table, "user-emf", "emf-1").await;
    let ingestor = std::sync::Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let events = json!([
        {"id": "e-1", "type": "temperature", "at": ago(5), "value": 21.5},
        {"id": "e-2", "type": "temperature", "at": ago(4), "value": 21.7},
    ]);
    let request = ingest_request("emf-1", &token, events).build();
    let ((response, used), docs) = emf::capture(metered(
        gateway(ingest::router(std::sync::Arc::clone(&ingestor))).handle(request),
    ))
    .await;
    let a = answer(response, used);
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(docs.len(), 1, "{docs:#?}");
    let doc = &docs[0];
    let (sets, metrics) = validate_emf(doc).unwrap_or_else(|e| panic!("{e}: {doc}"));
    assert_eq!(
        doc["_aws"]["CloudWatchMetrics"][0]["Namespace"],
        emf::NAMESPACE
    );
    // Low-cardinality dimensions only; the device id is a property.
    assert_eq!(sets, [vec!["Function", "Route"], vec!["Function"]]);
    assert_eq!(doc["Route"], "POST /devices/{deviceId}/events");
    assert_eq!(doc["deviceId"], "emf-1");
    for (name, _) in emf::REQUEST_METRICS.iter().chain(&emf::FIGURE_METRICS) {
        assert!(metrics.contains(*name), "{name} missing: {doc}");
    }
    assert_eq!(doc["Requests"], 1.0);
    assert_eq!(doc["EventsAccepted"], 2.0);
    assert_eq!(doc["EventsFailed"], 0.0);
    assert_eq!(doc["Status4xx"], 0.0);
    assert_eq!(doc["Status5xx"], 0.0);
    assert_eq!(doc["DynamoDBRequests"], f64::from(a.used.requests()));
    assert_eq!(doc["WriteUnits"], a.used.write_units);
    assert!(doc["WriteUnits"].as_f64().unwrap() > 0.0);
    assert_eq!(doc["status"], 200);
    assert!(
        !doc.to_string().contains(&token),
        "the device token must never reach a metrics document"
    );
}

#[tokio::test]
async fn a_refused_request_counts_as_4xx_without_dynamodb_work() {
    let table = fresh_table().await;
    let (a, docs) = emf::capture(device_updates(
        &table,
        ApiRequest::put("/me")
            .caller("user-emf")
            .json(json!({"name": "x".repeat(200)})),
    ))
    .await;
    assert_eq!(a.status, 400);
    assert_eq!(docs.len(), 1);
    validate_emf(&docs[0]).unwrap();
    assert_eq!(docs[0]["Route"], "PUT /me");
    assert_eq!(docs[0]["StatusClass"], "4xx");
    assert_eq!(docs[0]["Status4xx"], 1.0);
    assert_eq!(docs[0]["Status5xx"], 0.0);
    assert_eq!(docs[0]["DynamoDBRequests"], 0.0);
    assert!(docs[0].get("deviceId").is_none());
}

#[tokio::test]
async fn the_daily_run_writes_its_duration_and_read_units() {
    let table = fresh_table().await;
    // Something for the scan to read.
    register_device(&table, "user-emf", "emf-2").await;
    let config = daily_analytics::AnalyticsConfig {
        segments: 2,
        page_limit: None,
    };
    let far = Instant::now() + Duration::from_secs(60);
    let (out, docs) = emf::capture(daily_analytics::handle(
        &table,
        &config,
        json!({"date": "2026-11-21"}),
        far,
    ))
    .await;
    assert!(out.is_ok(), "{out:?}");
    assert_eq!(docs.len(), 1);
    let (sets, metrics) = validate_emf(&docs[0]).unwrap();
    assert_eq!(sets, [vec!["Function"]]);
    let expected: BTreeSet<String> = emf::RUN_METRICS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(metrics, expected);
    assert_eq!(docs[0]["RunFailures"], 0.0);
    assert!(docs[0]["ReadUnits"].as_f64().unwrap() > 0.0, "{}", docs[0]);

    let (out, docs) = emf::capture(daily_analytics::handle(
        &table,
        &config,
        json!({"date": "yesterday"}),
        far,
    ))
    .await;
    assert!(out.is_err());
    assert_eq!(docs[0]["RunFailures"], 1.0);
}
