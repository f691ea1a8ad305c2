//! ingest: `POST /devices/{deviceId}/events` (AP-14) and `POST /devices/{deviceId}/sync`
//! (AP-T4).
//!
//! A thin adapter: authenticate the device's bearer token, validate the batch, hand it to
//! `shared::ops::ingest`, and answer 200 only when every event is stored; otherwise 503 with
//! exactly which ids to resend. The device's twin rides along (`shared::ops::twin::device`):
//! its report and acknowledgements are applied with the batch, and its pending work (a
//! desired state, commands) comes back in the answer, read only when something is pending;
//! so does a staged firmware rollout's offer (its `firmware` report moves it on), read only
//! for a device a rollout marks.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::{Extension, Router};
use lambda_http::http::{header, HeaderMap, StatusCode};
use lambda_http::Context;
use serde::{Deserialize, Serialize};

use shared::http::api::{json_response, parse_json_body, ApiError};
use shared::http::gateway::DeviceIdPath;
use shared::model::ids::EventId;
use shared::model::optional::not_null;
use shared::model::rollout_progress::SubmittedFirmwareReport;
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{
    batch_deadline, validate_batch, BatchReceipt, IncompleteBatch, Ingestor, NewEvent,
    SubmittedEvent,
};
use shared::ops::twin::device::{DeviceReport, SubmittedAck, SubmittedReport, TwinReply};
use shared::FleetError;

/// Largest request body: 100 events with ids, types and long text values fit well within it.
pub const MAX_INGEST_BODY_BYTES: usize = 64 * 1024;

/// The function's `Timeout` in `template.yaml` (`Globals`): the time an invocation gets when
/// the runtime sends no usable deadline (see [`batch_deadline`]).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What every request of this execution environment shares: the table client and the warm
/// registration and live-state caches, built once.
pub async fn ingestor_from_env() -> Result<Arc<Ingestor>, FleetError> {
    Ok(Arc::new(Ingestor::from_env().await?))
}

/// The function's routes: a batch of events, and a sync for a device with nothing to send.
pub fn router(ingestor: Arc<Ingestor>) -> Router {
    Router::new()
        .route("/devices/{deviceId}/events", post(ingest_events))
        .route("/devices/{deviceId}/sync", post(sync))
        .with_state(ingestor)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestBody {
    events: Vec<SubmittedEvent>,
    #[serde(default, deserialize_with = "not_null")]
    reported: Option<SubmittedReport>,
    #[serde(default)]
    acks: Vec<SubmittedAck>,
    #[serde(default, deserialize_with = "not_null")]
    firmware: Option<SubmittedFirmwareReport>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SyncBody {
    #[serde(default, deserialize_with = "not_null")]
    reported: Option<SubmittedReport>,
    #[serde(default)]
    acks: Vec<SubmittedAck>,
    #[serde(default, deserialize_with = "not_null")]
    firmware: Option<SubmittedFirmwareReport>,
}

/// Largest sync body: a report of at most 4 KB and 32 acknowledgements with results.
pub const MAX_SYNC_BODY_BYTES: usize = 64 * 1024;

/// `POST /devices/{deviceId}/sync` (AP-T4): report, acknowledge, and get the pending work,
/// without events. An empty body (or `{}`) only asks.
async fn sync(
    State(ingestor): State<Arc<Ingestor>>,
    DeviceIdPath(device): DeviceIdPath,
    headers: HeaderMap,
    body: Bytes,
) -> Result<axum::response::Response, ApiError> {
    let token = bearer_token(&headers).ok_or(FleetError::Unauthorized)?;
    let registration = ingestor.authenticate(&device, token).await?;
    let body: SyncBody = if body.iter().all(u8::is_ascii_whitespace) {
        SyncBody::default()
    } else {
        parse_json_body(&headers, &body, MAX_SYNC_BODY_BYTES)?
    };
    let report = DeviceReport::parse(body.reported, body.acks)?.with_firmware(body.firmware)?;
    let reply: TwinReply = ingestor.sync(&registration, &report).await?;
    Ok(json_response(StatusCode::OK, &reply))
}

/// `POST /devices/{deviceId}/events` (AP-14): 200 with the stored ids and the twin's reply,
/// or 503 with `Retry-After` naming the ids to resend.
async fn ingest_events(
    State(ingestor): State<Arc<Ingestor>>,
    DeviceIdPath(device): DeviceIdPath,
    lambda: Option<Extension<Context>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<axum::response::Response, ApiError> {
    let token = bearer_token(&headers).ok_or(FleetError::Unauthorized)?;
    let registration = ingestor.authenticate(&device, token).await?;
    let (events, report) = parse_request(
        &headers,
        &body,
        Timestamp::now(),
        ingestor.table().config.retention_days,
        ingestor.config().max_clock_skew,
    )?;
    let deadline = batch_deadline(lambda.map(|Extension(ctx)| ctx.deadline()), TIMEOUT);
    let receipt = ingestor
        .receive(&registration, events, &report, deadline)
        .await?;
    let incomplete = match receipt {
        BatchReceipt::Stored(stored) => return Ok(json_response(StatusCode::OK, &stored)),
        BatchReceipt::Incomplete(incomplete) => incomplete,
    };
    let mut response = json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &PartiallyStored {
            accepted: &incomplete.accepted,
            error: ErrorText {
                code: "partially_stored",
                message: "some events were not stored: resend the failed ids",
            },
            failed: &incomplete.failed,
        },
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        IncompleteBatch::RETRY_AFTER_SECONDS.into(),
    );
    Ok(response)
}

/// The 503 answer: the error contract's `error` beside the ids (keys in the order the answer
/// always had).
#[derive(Serialize)]
struct PartiallyStored<'a> {
    accepted: &'a [EventId],
    error: ErrorText,
    failed: &'a [EventId],
}

/// The error contract's `{"code", "message"}`.
#[derive(Serialize)]
struct ErrorText {
    code: &'static str,
    message: &'static str,
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
    parse_request(headers, body, now, retention_days, max_clock_skew).map(|(events, _)| events)
}

/// [`parse_batch`] with the twin part of the request: the device's report and
/// acknowledgements, validated the same way (a 400 naming the field).
pub fn parse_request(
    headers: &HeaderMap,
    body: &[u8],
    now: Timestamp,
    retention_days: u32,
    max_clock_skew: Duration,
) -> Result<(Vec<NewEvent>, DeviceReport), ApiError> {
    let body: IngestBody = parse_json_body(headers, body, MAX_INGEST_BODY_BYTES)?;
    let events = validate_batch(body.events, now, retention_days, max_clock_skew)?;
    let report = DeviceReport::parse(body.reported, body.acks)?.with_firmware(body.firmware)?;
    Ok((events, report))
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
