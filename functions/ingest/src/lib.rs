//! ingest: `POST /devices/{deviceId}/events` (AP-14).
//!
//! A thin adapter: authenticate the device's bearer token, validate the batch, hand it to
//! `shared::ops::ingest`, and answer 200 only when every event is stored; otherwise 503 with
//! exactly which ids to resend.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::{Extension, Router};
use lambda_http::http::{header, HeaderMap, StatusCode};
use lambda_http::Context;
use serde::Deserialize;
use serde_json::json;

use shared::http::api::{json_bytes, json_response, ApiError};
use shared::http::gateway::DeviceIdPath;
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, NewEvent, SubmittedEvent};
use shared::store::deadline::Deadline;
use shared::store::table::RETRY_AFTER_SECONDS;
use shared::{FleetError, FleetTable};

/// Largest request body: 100 events with ids, types and long text values fit well within it.
pub const MAX_INGEST_BODY_BYTES: usize = 64 * 1024;

/// Time kept in reserve before the Lambda's deadline to answer the device.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// The function's `Timeout` in `template.yaml` (`Globals`): the time an invocation gets when
/// the runtime sends no usable deadline (see [`shared::store::deadline`]).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What every request of this execution environment shares: the table client and the warm
/// registration and live-state caches, built once.
pub async fn ingestor_from_env() -> Result<Arc<Ingestor>, FleetError> {
    let table = FleetTable::from_env().await?;
    Ok(Arc::new(Ingestor::new(table, IngestConfig::from_env()?)))
}

/// The function's one route.
pub fn router(ingestor: Arc<Ingestor>) -> Router {
    Router::new()
        .route("/devices/{deviceId}/events", post(ingest_events))
        .with_state(ingestor)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestBody {
    events: Vec<SubmittedEvent>,
}

/// `POST /devices/{deviceId}/events` (AP-14).
async fn ingest_events(
    State(ingestor): State<Arc<Ingestor>>,
    DeviceIdPath(device): DeviceIdPath,
    lambda: Option<Extension<Context>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<axum::response::Response, ApiError> {
    let token = bearer_token(&headers).ok_or(FleetError::Unauthorized)?;
    let registration = ingestor.authenticate(&device, token).await?;
    let events = parse_batch(
        &headers,
        &body,
        Timestamp::now(),
        ingestor.table().config.retention_days,
        ingestor.config().max_clock_skew,
    )?;
    let outcome = ingestor
        .ingest(
            &registration,
            events,
            deadline(lambda.map(|Extension(ctx)| ctx)),
        )
        .await?;
    shared::store::metrics::RequestMeter::add_figure(
        "EventsAccepted",
        outcome.accepted.len() as f64,
    );
    shared::store::metrics::RequestMeter::add_figure("EventsFailed", outcome.failed.len() as f64);
    if outcome.failed.is_empty() {
        return Ok(json_response(
            StatusCode::OK,
            &json!({ "accepted": outcome.accepted.len(), "eventIds": outcome.accepted }),
        ));
    }
    let mut response = json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({
            "error": {
                "code": "partially_stored",
                "message": "some events were not stored: resend the failed ids",
            },
            "accepted": outcome.accepted,
            "failed": outcome.failed,
        }),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, RETRY_AFTER_SECONDS.into());
    Ok(response)
}

/// The request's batch, validated: a JSON body (with its headers) of at most [`MAX_INGEST_BODY_BYTES`] holding
/// 1 to 100 events, each checked against `now`, the retention window and the allowed clock
/// skew. Everything wrong is a 4xx naming the field. (Also the entry point of the
/// `ingest_batch` fuzz target in `fuzz/`.)
pub fn parse_batch(
    headers: &HeaderMap,
    body: &[u8],
    now: Timestamp,
    retention_days: u32,
    max_clock_skew: Duration,
) -> Result<Vec<NewEvent>, ApiError> {
    let body: IngestBody = json_bytes(headers, body, MAX_INGEST_BODY_BYTES)?;
    Ok(validate_batch(
        body.events,
        now,
        retention_days,
        max_clock_skew,
    )?)
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// When retrying must stop: the Lambda's deadline (one rule for every function,
/// [`Deadline::from_lambda`]) less a margin to answer; outside Lambda (no context), the
/// ingestor's own retry window applies.
fn deadline(lambda: Option<Context>) -> Instant {
    lambda
        .map(|ctx| Deadline::from_lambda(ctx.deadline(), TIMEOUT).less(ANSWER_MARGIN))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600))
}
