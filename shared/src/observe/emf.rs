//! CloudWatch Embedded Metric Format (EMF): one document per API request and per daily run,
//! written as its own stdout line. CloudWatch Logs turns the members named under
//! `_aws.CloudWatchMetrics` into metrics (no metric filter, no PutMetricData call); everything
//! else in the document (request id, trace id, device id) stays a searchable property.
//!
//! Why a small module and not `metrics_cloudwatch_embedded`: that crate is a recorder for the
//! global `metrics` facade whose Lambda integration wraps the runtime's `run` and follows
//! `lambda_http`'s releases (0.5.x required `lambda_http` 0.13, we are on 1.x); every figure we
//! publish is already collected per request by [`crate::store::metrics::RequestMeter`], so what is
//! left is one JSON document, written here (docs/operations.md, "Metrics").
//!
//! Dimensions stay low-cardinality: the function and the route key (a template route such as
//! `POST /devices/{deviceId}/events`, never a concrete path). Ids are properties.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use crate::store::metrics::{MeterSnapshot, DEPENDENCY_UNREACHABLE};

/// The CloudWatch namespace every Device Fleet metric is published in.
pub const NAMESPACE: &str = "DeviceFleet";

/// Dimension: the Lambda function's name (`AWS_LAMBDA_FUNCTION_NAME`, `local` elsewhere).
pub const DIM_FUNCTION: &str = "Function";
/// Dimension: the API Gateway route key.
pub const DIM_ROUTE: &str = "Route";

/// Metrics of every API request, with their CloudWatch units.
pub const REQUEST_METRICS: [(&str, &str); 10] = [
    ("Requests", "Count"),
    ("Latency", "Milliseconds"),
    ("DynamoDBRequests", "Count"),
    ("DynamoDBAttempts", "Count"),
    ("ReadUnits", "Count"),
    ("WriteUnits", "Count"),
    ("Status4xx", "Count"),
    ("Status5xx", "Count"),
    ("ColdStart", "Count"),
    (DEPENDENCY_UNREACHABLE, "Count"),
];

/// Metrics of a daily analytics invocation.
pub const RUN_METRICS: [(&str, &str); 5] = [
    ("RunDuration", "Milliseconds"),
    ("RunFailures", "Count"),
    ("DynamoDBRequests", "Count"),
    ("ReadUnits", "Count"),
    ("WriteUnits", "Count"),
];

/// Figures a handler adds to its request's document (through
/// [`crate::store::metrics::RequestMeter::add_figure`]); each is published as a metric with this unit.
pub const FIGURE_METRICS: [(&str, &str); 2] =
    [("EventsAccepted", "Count"), ("EventsFailed", "Count")];

/// Metrics of one webhook delivery attempt (the delivery worker), dimension `Function` only:
/// the endpoint, its owner and the delivery are properties, so the operations dashboard
/// breaks them down per endpoint with a Logs Insights query over the worker's log group
/// instead of paying a custom metric per endpoint (docs/operations.md, "Webhook endpoints").
pub const DELIVERY_METRICS: [(&str, &str); 4] = [
    ("WebhookAttempts", "Count"),
    ("WebhookDelivered", "Count"),
    ("WebhookLatency", "Milliseconds"),
    ("WebhookLag", "Milliseconds"),
];

/// Metric of a delivery the worker held back because its endpoint's circuit breaker was open:
/// the endpoint's backlog growing without attempts.
pub const DEFERRED_METRIC: (&str, &str) = ("WebhookDeferred", "Count");

/// The properties naming the endpoint of a delivery document (never dimensions).
pub const DELIVERY_PROPERTIES: [&str; 4] = ["webhookId", "ownerId", "deliveryId", "event"];

/// One webhook delivery attempt, as the metrics see it.
#[derive(Debug)]
pub struct DeliveryFigures<'a> {
    /// The endpoint.
    pub webhook_id: &'a str,
    /// The fleet's owner (a person's or an organization's id).
    pub owner_id: &'a str,
    /// The delivery (its `webhook-id`).
    pub delivery_id: &'a str,
    /// The event name (`alarm.raised`).
    pub event: &'a str,
    /// The answer's status; None when no answer came.
    pub status: Option<u16>,
    /// Whether the attempt succeeded (a 2xx).
    pub delivered: bool,
    /// How long the attempt took.
    pub latency_ms: f64,
    /// How long the delivery had waited when it was attempted (since it was created, or
    /// redelivered): how far behind its endpoint is, its backlog in time.
    pub lag_ms: f64,
}

/// The EMF document of one webhook delivery attempt.
pub fn delivery_document(figures: &DeliveryFigures<'_>) -> Value {
    // In DELIVERY_METRICS' order.
    let values = [
        1.0,
        f64::from(u8::from(figures.delivered)),
        figures.latency_ms,
        figures.lag_ms,
    ];
    let metrics: Vec<(&str, &str, f64)> = DELIVERY_METRICS
        .iter()
        .zip(values)
        .map(|((name, unit), value)| (*name, *unit, value))
        .collect();
    let mut doc = document(&[&[DIM_FUNCTION]], &[], &metrics);
    let properties = doc.as_object_mut().expect("an object");
    delivery_properties(
        properties,
        [
            figures.webhook_id,
            figures.owner_id,
            figures.delivery_id,
            figures.event,
        ],
    );
    if let Some(status) = figures.status {
        properties.insert("status".into(), status.into());
    }
    doc
}

/// The EMF document of a delivery held back by its endpoint's open circuit breaker.
pub fn deferred_document(webhook_id: &str, owner_id: &str, delivery_id: &str) -> Value {
    let (name, unit) = DEFERRED_METRIC;
    let mut doc = document(&[&[DIM_FUNCTION]], &[], &[(name, unit, 1.0)]);
    let properties = doc.as_object_mut().expect("an object");
    properties.insert(DELIVERY_PROPERTIES[0].into(), webhook_id.into());
    properties.insert(DELIVERY_PROPERTIES[1].into(), owner_id.into());
    properties.insert(DELIVERY_PROPERTIES[2].into(), delivery_id.into());
    doc
}

fn delivery_properties(properties: &mut Map<String, Value>, values: [&str; 4]) {
    for (name, value) in DELIVERY_PROPERTIES.iter().zip(values) {
        properties.insert((*name).into(), value.into());
    }
}

/// True until the first document of this execution environment is written.
static COLD: AtomicBool = AtomicBool::new(true);

/// One finished API request, as the metrics see it.
#[derive(Debug)]
pub struct RequestFigures<'a> {
    /// The route key (`POST /me/devices`).
    pub route: &'a str,
    /// The answer's status.
    pub status: u16,
    /// Time from the request to the answer.
    pub latency_ms: f64,
    /// The DynamoDB work it did.
    pub used: &'a MeterSnapshot,
    /// API Gateway's request id.
    pub request_id: Option<&'a str>,
    /// The `deviceId` path parameter, if the route has one.
    pub device_id: Option<&'a str>,
    /// The invocation's X-Ray trace id (`Root`), so a metric's log line leads to its trace.
    pub trace_id: Option<&'a str>,
}

/// The EMF document of one API request.
pub fn request_document(figures: &RequestFigures<'_>, cold_start: bool) -> Value {
    let class = figures.status / 100;
    // In REQUEST_METRICS' order.
    let values = [
        1.0,
        figures.latency_ms,
        f64::from(figures.used.requests()),
        f64::from(figures.used.attempts),
        figures.used.read_units,
        figures.used.write_units,
        f64::from(u8::from(class == 4)),
        f64::from(u8::from(class == 5)),
        f64::from(u8::from(cold_start)),
        figures
            .used
            .figures
            .get(DEPENDENCY_UNREACHABLE)
            .copied()
            .unwrap_or(0.0),
    ];
    let mut metrics: Vec<(&str, &str, f64)> = REQUEST_METRICS
        .iter()
        .zip(values)
        .map(|((name, unit), value)| (*name, *unit, value))
        .collect();
    for (name, unit) in FIGURE_METRICS {
        if let Some(value) = figures.used.figures.get(name) {
            metrics.push((name, unit, *value));
        }
    }
    let mut doc = document(
        &[&[DIM_FUNCTION, DIM_ROUTE], &[DIM_FUNCTION]],
        &[(DIM_ROUTE, figures.route)],
        &metrics,
    );
    let properties = doc.as_object_mut().expect("an object");
    properties.insert("status".into(), figures.status.into());
    properties.insert("StatusClass".into(), format!("{class}xx").into());
    insert_some(properties, "requestId", figures.request_id);
    insert_some(properties, "deviceId", figures.device_id);
    insert_some(properties, "traceId", figures.trace_id);
    doc
}

/// The EMF document of one daily analytics invocation.
pub fn run_document(duration_ms: f64, failed: bool, used: &MeterSnapshot) -> Value {
    // In RUN_METRICS' order.
    let values = [
        duration_ms,
        f64::from(u8::from(failed)),
        f64::from(used.requests()),
        used.read_units,
        used.write_units,
    ];
    let metrics: Vec<(&str, &str, f64)> = RUN_METRICS
        .iter()
        .zip(values)
        .map(|((name, unit), value)| (*name, *unit, value))
        .collect();
    document(&[&[DIM_FUNCTION]], &[], &metrics)
}

/// Writes `doc` as one line: to the capture of [`capture`] if one is active on this thread,
/// else to stdout inside Lambda (or when `FLEET_EMF=stdout`), else nowhere (tests and local
/// tools would only print noise).
pub fn emit(doc: &Value) {
    let captured = crate::observe::telemetry::captured(&CAPTURE, std::slice::from_ref(doc));
    if !captured && to_stdout() {
        use std::io::Write;
        let line = format!("{doc}\n");
        // One write per line: CloudWatch keeps one log event per line.
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
    }
}

/// Whether this is the first document of the execution environment (then never again).
pub fn take_cold_start() -> bool {
    COLD.swap(false, Ordering::Relaxed)
}

/// Runs `fut` with the documents [`emit`] writes on this thread collected instead of printed.
/// For tests on a current-thread runtime (`#[tokio::test]`'s default), where the handler runs
/// on the test's own thread.
pub async fn capture<F: std::future::Future>(fut: F) -> (F::Output, Vec<Value>) {
    crate::observe::telemetry::capture_documents(&CAPTURE, fut).await
}

thread_local! {
    static CAPTURE: RefCell<Option<Vec<Value>>> = const { RefCell::new(None) };
}

fn to_stdout() -> bool {
    static SINK: std::sync::OnceLock<EmfSink> = std::sync::OnceLock::new();
    SINK.get_or_init(EmfSink::from_env).stdout
}

/// Where [`emit`] writes outside a capture, read like every other setting: from the
/// environment once, or through a lookup in tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmfSink {
    /// Stdout, where CloudWatch reads the documents: inside Lambda (`AWS_LAMBDA_FUNCTION_NAME`
    /// set) or when `FLEET_EMF=stdout`; else nowhere.
    pub stdout: bool,
}

impl EmfSink {
    /// From the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            stdout: lookup("AWS_LAMBDA_FUNCTION_NAME").is_some()
                || lookup("FLEET_EMF").is_some_and(|v| v.trim() == "stdout"),
        }
    }
}

/// The function dimension's value.
pub fn function_name() -> String {
    std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".into())
}

fn insert_some(properties: &mut Map<String, Value>, name: &str, value: Option<&str>) {
    if let Some(value) = value {
        properties.insert(name.into(), value.into());
    }
}

/// An EMF document: `_aws` metadata naming `metrics` under `dimension_sets` in [`NAMESPACE`],
/// and every dimension and metric value as a top-level member (the specification's rule:
/// a name under `_aws` without a member of that name is not published).
fn document(
    dimension_sets: &[&[&str]],
    dimensions: &[(&str, &str)],
    metrics: &[(&str, &str, f64)],
) -> Value {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": dimension_sets,
                "Metrics": metrics
                    .iter()
                    .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
                    .collect::<Vec<_>>(),
            }],
        }),
    );
    doc.insert(DIM_FUNCTION.into(), function_name().into());
    for (name, value) in dimensions {
        doc.insert((*name).into(), (*value).into());
    }
    for (name, _, value) in metrics {
        doc.insert((*name).into(), json!(value));
    }
    Value::Object(doc)
}

#[cfg(test)]
mod delivery {
    use super::*;

    #[test]
    fn an_attempt_is_one_document_of_function_totals_naming_its_endpoint_as_properties() {
        let doc = delivery_document(&DeliveryFigures {
            webhook_id: "wh_1",
            owner_id: "u1",
            delivery_id: "msg_1",
            event: "alarm.raised",
            status: Some(500),
            delivered: false,
            latency_ms: 42.0,
            lag_ms: 1500.0,
        });
        let metrics = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(metrics["Dimensions"], json!([[DIM_FUNCTION]]));
        let names: Vec<&str> = metrics["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(names, DELIVERY_METRICS.map(|(n, _)| n));
        assert_eq!(
            (
                &doc["WebhookAttempts"],
                &doc["WebhookDelivered"],
                &doc["WebhookLatency"],
                &doc["WebhookLag"]
            ),
            (&json!(1.0), &json!(0.0), &json!(42.0), &json!(1500.0))
        );
        assert_eq!(
            (
                &doc["webhookId"],
                &doc["ownerId"],
                &doc["deliveryId"],
                &doc["event"],
                &doc["status"]
            ),
            (
                &json!("wh_1"),
                &json!("u1"),
                &json!("msg_1"),
                &json!("alarm.raised"),
                &json!(500)
            )
        );
        let none = delivery_document(&DeliveryFigures {
            webhook_id: "wh_1",
            owner_id: "u1",
            delivery_id: "msg_1",
            event: "webhook.test",
            status: None,
            delivered: false,
            latency_ms: 5000.0,
            lag_ms: 0.0,
        });
        assert!(none.get("status").is_none(), "no answer, no status");
    }

    #[test]
    fn a_deferred_delivery_counts_one_for_its_endpoint() {
        let doc = deferred_document("wh_2", "o1", "msg_2");
        assert_eq!(doc["WebhookDeferred"], json!(1.0));
        assert_eq!(doc["webhookId"], json!("wh_2"));
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([[DIM_FUNCTION]])
        );
    }
}

#[cfg(test)]
mod sink {
    use super::EmfSink;

    #[test]
    fn documents_go_to_stdout_inside_lambda_or_when_asked() {
        let of = |pairs: &'static [(&'static str, &'static str)]| {
            EmfSink::from_lookup(move |name| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            })
            .stdout
        };
        assert!(!of(&[]));
        assert!(of(&[("AWS_LAMBDA_FUNCTION_NAME", "ingest")]));
        assert!(of(&[("FLEET_EMF", "stdout")]));
        assert!(!of(&[("FLEET_EMF", "off")]));
    }
}
