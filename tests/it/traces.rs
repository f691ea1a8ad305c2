//! X-Ray traces: a sampled invocation's request sends its handler's subsegment under Lambda's
//! function segment and one DynamoDB subsegment per call under it, all in the invocation's
//! trace; an unsampled one sends nothing.

use fleet_tests::*;
use lambda_http::{Context, RequestExt};
use serde_json::{json, Value};
use shared::observe::trace;
use shared::ops::limits::RegistrationLimit;
use shared::FleetTable;

const ROOT: &str = "1-6741a2b3-0123456789abcdef01234567";
const PARENT: &str = "53995c3f42cd8ad8";

fn traced(request: ApiRequest, header: &str) -> lambda_http::Request {
    let mut context = Context::default();
    context.xray_trace_id = Some(header.to_string());
    request.build().with_lambda_context(context)
}

fn register(device: &str) -> ApiRequest {
    ApiRequest::post("/me/devices")
        .caller("user-trace")
        .json(json!({"deviceId": device, "name": "Boiler", "type": "thermostat", "tags": ["a"]}))
}

#[tokio::test]
async fn a_sampled_request_is_traced_under_the_invocations_segment() {
    let table = fresh_table().await;
    let header = format!("Root={ROOT};Parent={PARENT};Sampled=1");
    let ((response, used), docs) = trace::capture(metered(
        gateway(device_updates::router(
            FleetTable::clone(&table),
            RegistrationLimit::default(),
            fleet_testkit::moto_server::firmware_images_from_env(),
        ))
        .handle(traced(register("trace-1"), &header)),
    ))
    .await;
    assert_eq!(response.status(), 201);
    assert_eq!(docs.len(), 1 + used.requests() as usize, "{docs:#?}");
    let handler = &docs[0];
    assert_eq!(handler["type"], "subsegment");
    assert_eq!(handler["name"], "POST /me/devices");
    assert_eq!(handler["trace_id"], ROOT);
    assert_eq!(handler["parent_id"], PARENT);
    assert_eq!(handler["http"]["response"]["status"], 201);
    assert_eq!(handler["fault"], false);
    let id = handler["id"].as_str().unwrap();
    assert!(
        id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    let (start, end) = (
        handler["start_time"].as_f64().unwrap(),
        handler["end_time"].as_f64().unwrap(),
    );
    assert!(start <= end);
    let operations: Vec<&str> = docs[1..]
        .iter()
        .map(|call| {
            assert_eq!(call["trace_id"], ROOT);
            assert_eq!(
                call["parent_id"], id,
                "a DynamoDB call is a child of its handler"
            );
            assert_eq!(call["namespace"], "aws");
            assert_eq!(call["name"], "DynamoDB");
            let (s, e) = (
                call["start_time"].as_f64().unwrap(),
                call["end_time"].as_f64().unwrap(),
            );
            assert!(
                start <= s && s <= e && e <= end,
                "{call} outside its handler"
            );
            call["aws"]["operation"].as_str().unwrap()
        })
        .collect();
    assert_eq!(operations, ["GetItem", "TransactWriteItems"]);
    for doc in &docs {
        assert!(!doc.to_string().contains("dft_"), "no token in a trace");
    }
}

#[tokio::test]
async fn an_unsampled_or_untraced_request_sends_nothing_and_errors_are_marked() {
    let table = fresh_table().await;
    let unsampled = format!("Root={ROOT};Parent={PARENT};Sampled=0");
    let (response, docs) = trace::capture(
        gateway(device_updates::router(
            FleetTable::clone(&table),
            RegistrationLimit::default(),
            fleet_testkit::moto_server::firmware_images_from_env(),
        ))
        .handle(traced(register("trace-2"), &unsampled)),
    )
    .await;
    assert_eq!(response.status(), 201);
    assert!(docs.is_empty(), "{docs:?}");
    let (_, docs) = trace::capture(
        gateway(device_updates::router(
            FleetTable::clone(&table),
            RegistrationLimit::default(),
            fleet_testkit::moto_server::firmware_images_from_env(),
        ))
        .handle(register("trace-3").build()),
    )
    .await;
    assert!(docs.is_empty());

    // The same id again: a 409, an error (4xx) but not a fault.
    let sampled = format!("Root={ROOT};Parent={PARENT};Sampled=1");
    let (response, docs) = trace::capture(
        gateway(device_updates::router(
            FleetTable::clone(&table),
            RegistrationLimit::default(),
            fleet_testkit::moto_server::firmware_images_from_env(),
        ))
        .handle(traced(register("trace-2"), &sampled)),
    )
    .await;
    assert_eq!(response.status(), 409);
    let handler: &Value = &docs[0];
    assert_eq!(
        (handler["error"].as_bool(), handler["fault"].as_bool()),
        (Some(true), Some(false))
    );
}

#[tokio::test]
async fn a_sampled_daily_run_is_traced_with_each_dynamodb_call() {
    let table = fresh_table().await;
    let config = daily_analytics::AnalyticsConfig::default();
    let header = format!("Root={ROOT};Parent={PARENT};Sampled=1");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (result, docs) = trace::capture(daily_analytics::handle_traced(
        &table,
        &config,
        json!({"date": "2026-11-20"}),
        deadline,
        Some(&header),
    ))
    .await;
    let answer = result.unwrap();
    let run = &docs[0];
    assert_eq!(run["name"], daily_analytics::RUN_SEGMENT);
    assert_eq!(
        (&run["trace_id"], &run["parent_id"]),
        (&json!(ROOT), &json!(PARENT))
    );
    // Every DynamoDB call of the run is a child of it: the scan's requests (the report's
    // `run.requests`) plus its checkpoint and report writes.
    let operations: Vec<&str> = docs[1..]
        .iter()
        .map(|call| {
            assert_eq!(call["parent_id"], run["id"]);
            assert_eq!(call["name"], "DynamoDB");
            call["aws"]["operation"].as_str().unwrap()
        })
        .collect();
    let scans = answer["report"]["run"]["requests"].as_u64().unwrap();
    assert!(scans > 0);
    assert!(operations.len() as u64 >= scans, "{operations:?}");
    for expected in ["Scan", "PutItem"] {
        assert!(operations.contains(&expected), "{operations:?}");
    }
    // Not sampled: nothing.
    let unsampled = format!("Root={ROOT};Parent={PARENT};Sampled=0");
    let (_, docs) = trace::capture(daily_analytics::handle_traced(
        &table,
        &config,
        json!({"date": "2026-11-21"}),
        deadline,
        Some(&unsampled),
    ))
    .await;
    assert!(docs.is_empty(), "{docs:#?}");
}
