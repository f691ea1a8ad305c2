//! The handler code of each function in the template, called in-process (the same code the
//! Lambda bootstraps run), and `invoke`: one API Gateway event through one function.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use lambda_http::{Body, Request, Response};
use serde_json::{json, Value};
use shared::http::gateway;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::ops::limits::RegistrationLimit;
use shared::FleetTable;

use crate::template::Template;

/// A function's HTTP handler.
pub type Handler =
    Arc<dyn Fn(Request) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> + Send + Sync>;

/// The Router of the function whose `CodeUri` is `code_uri`, on `table`, or `None` for a
/// function that has no HTTP handler yet. The one place a new function crate is wired in.
pub fn router_for(code_uri: &str, table: &FleetTable) -> Option<Router> {
    Some(match code_uri {
        // Settings and the image bucket (a deleted organization's firmware) from the
        // environment, like the Lambda (defaults when unset); on a table whose harness made a
        // bucket of its own (the reference dataset's), that one.
        "functions/device-updates" => device_updates::router(
            table.clone(),
            RegistrationLimit::from_env().unwrap_or_default(),
            crate::moto_server::firmware_images_for_table(table),
        ),
        "functions/dashboard" => dashboard::router(table.clone()),
        // The image bucket from the environment, like the Lambda (see
        // `moto_server::firmware_images_from_env`), or the table's own.
        "functions/firmware" => firmware::router(firmware::FirmwareState {
            table: table.clone(),
            images: crate::moto_server::firmware_images_for_table(table),
        }),
        // Settings from the environment, like the Lambda (defaults when unset).
        "functions/ingest" => ingest::router(Arc::new(Ingestor::new(
            table.clone(),
            IngestConfig::from_env().unwrap_or_default(),
        ))),
        // The queue and the target policy from the environment, like the Lambda
        // (`WEBHOOK_QUEUE_URL`, `AWS_ENDPOINT_URL_SQS`, `WEBHOOK_ALLOWED_LOCAL_TARGETS`); on a
        // table whose harness made a queue of its own (the reference dataset's), that one.
        "functions/webhooks" => webhooks::router(webhooks::WebhooksState {
            table: table.clone(),
            queue: crate::webhook_queue::queue_for_table(table),
            policy: shared::model::webhook::target::TargetPolicy::from_env(),
        }),
        _ => return None,
    })
}

/// The handler for the function whose `CodeUri` is `code_uri`: its Router (see
/// [`router_for`]), built once and served through the same [`gateway::app`] as its Lambda
/// bootstrap.
pub fn handler_for(code_uri: &str, table: &FleetTable) -> Option<Handler> {
    Some(handler_of(router_for(code_uri, table)?))
}

/// The handler serving `router` through the same [`gateway::app`] as a Lambda bootstrap: for a
/// test that builds a function's Router itself (on its own moto S3 bucket or SQS queue).
pub fn handler_of(router: Router) -> Handler {
    let gateway = gateway::app(router);
    Arc::new(move |req| Box::pin(gateway.handle(req)))
}

/// Why an event could not be invoked.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The template has no such function.
    #[error("template.yaml has no function {0}")]
    UnknownFunction(String),
    /// The function has no local handler.
    #[error("{0} has no local handler (see local/testkit/src/functions.rs)")]
    NoHandler(String),
    /// The event is not an API Gateway event.
    #[error("not an API Gateway HTTP API event: {0}")]
    BadEvent(String),
}

/// Runs `event` through `function` (a logical id from the template), like
/// `sam local invoke -e`: an API Gateway HTTP API (payload 2.0) event for an API function, a
/// scheduled event (or `{"date": ...}`) for daily-analytics, the schedule's event for
/// rollout-worker. Returns the function's answer: the payload-2.0 response for API functions;
/// for daily-analytics and rollout-worker `statusCode` 200 with the
/// result, or 500 with the error.
pub async fn invoke(
    template: &Template,
    table: &FleetTable,
    function: &str,
    event: &str,
) -> Result<Value, InvokeError> {
    let code_uri = template
        .functions
        .get(function)
        .ok_or_else(|| InvokeError::UnknownFunction(function.to_string()))?;
    if code_uri == "functions/alarm-watch" {
        let payload: Value =
            serde_json::from_str(event).map_err(|e| InvokeError::BadEvent(e.to_string()))?;
        // EventBridge and SQS have no local twin: the stand-ins record the calls.
        let state = alarm_watch::State {
            table: table.clone(),
            publisher: crate::alarm_events::RecordedPutEvents::default(),
            bus: alarm_watch::bus_from_env(),
            dead_letters: crate::alarm_events::RecordedDeadLetters::default(),
        };
        let deadline = std::time::Instant::now() + alarm_watch::TIMEOUT;
        return Ok(match alarm_watch::handle(&state, payload, deadline).await {
            Ok(result) => json!({"statusCode": 200, "body": result}),
            Err(err) => json!({"statusCode": 500, "errorMessage": err.to_string()}),
        });
    }
    if code_uri == "functions/rollout-worker" {
        let payload: Value =
            serde_json::from_str(event).map_err(|e| InvokeError::BadEvent(e.to_string()))?;
        let deadline = std::time::Instant::now() + rollout_worker::TIMEOUT;
        let images = crate::moto_server::firmware_images_from_env();
        return Ok(
            match rollout_worker::handle(table, &images, payload, deadline).await {
                Ok(result) => json!({"statusCode": 200, "body": result}),
                Err(err) => json!({"statusCode": 500, "errorMessage": err.to_string()}),
            },
        );
    }
    if template
        .function_definitions
        .get(function)
        .is_some_and(|f| f.binary == "webhook-delivery")
    {
        let payload: Value =
            serde_json::from_str(event).map_err(|e| InvokeError::BadEvent(e.to_string()))?;
        let worker = webhooks::worker::DeliveryWorker::new(
            table.clone(),
            crate::webhook_queue::queue_from_env(),
            shared::model::webhook::target::TargetPolicy::from_env(),
            shared::ops::webhooks::deliveries::RetrySchedule::from_env(),
        );
        return Ok(match worker {
            Ok(worker) => match worker.handle(payload).await {
                Ok(result) => json!({"statusCode": 200, "body": result}),
                Err(err) => json!({"statusCode": 500, "errorMessage": err.to_string()}),
            },
            Err(err) => json!({"statusCode": 500, "errorMessage": err.to_string()}),
        });
    }
    if code_uri == "functions/daily-analytics" {
        let payload: Value =
            serde_json::from_str(event).map_err(|e| InvokeError::BadEvent(e.to_string()))?;
        let config = daily_analytics::AnalyticsConfig::from_env().unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(900);
        return Ok(
            match daily_analytics::handle(table, &config, payload, deadline).await {
                Ok(result) => json!({"statusCode": 200, "body": result}),
                Err(err) => json!({"statusCode": 500, "errorMessage": err.to_string()}),
            },
        );
    }
    let handler =
        handler_for(code_uri, table).ok_or_else(|| InvokeError::NoHandler(function.to_string()))?;
    let request =
        lambda_http::request::from_str(event).map_err(|e| InvokeError::BadEvent(e.to_string()))?;
    Ok(response_json(&handler(request).await))
}

/// The response as API Gateway receives it from a Lambda (payload 2.0 response JSON).
pub fn response_json(response: &Response<Body>) -> Value {
    let headers: serde_json::Map<String, Value> = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                Value::String(v.to_str().unwrap_or("").to_string()),
            )
        })
        .collect();
    let bytes: &[u8] = response.body().as_ref();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        Value::String(String::from_utf8_lossy(bytes).into_owned())
    };
    json!({
        "statusCode": response.status().as_u16(),
        "headers": headers,
        "body": body,
        "isBase64Encoded": false,
    })
}
