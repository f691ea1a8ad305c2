//! ingest: `POST /devices/{deviceId}/events` (AP-14).
//!
//! A thin adapter: authenticate the device's bearer token, validate the batch, hand it to
//! `shared::ops::ingest`, and answer 200 only when every event is stored; otherwise 503 with
//! exactly which ids to resend.

use std::time::{Duration, Instant};

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Deserialize;
use serde_json::json;

use shared::api::{self, json_body, json_response, path_param, ApiError};
use shared::deadline::Deadline;
use shared::ids::DeviceId;
use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, NewEvent, SubmittedEvent};
use shared::table::RETRY_AFTER_SECONDS;
use shared::timestamp::Timestamp;
use shared::{FleetError, FleetTable};

/// Largest request body: 100 events with ids, types and long text values fit well within it.
pub const MAX_INGEST_BODY_BYTES: usize = 64 * 1024;

/// Time kept in reserve before the Lambda's deadline to answer the device.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// The function's `Timeout` in `template.yaml` (`Globals`): the time an invocation gets when
/// the runtime sends no usable deadline (see [`shared::deadline`]).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What every request of this execution environment shares: the table client and the warm
/// registration and device summary caches, built once by [`State::from_env`].
pub struct State {
    /// The ingestor with its caches.
    pub ingestor: Ingestor,
}

impl State {
    /// The table and the ingest settings from the environment.
    pub async fn from_env() -> Result<Self, FleetError> {
        let table = FleetTable::from_env().await?;
        Ok(Self {
            ingestor: Ingestor::new(table, IngestConfig::from_env()?),
        })
    }

    /// One API Gateway request (the Lambda bootstrap calls this).
    pub async fn handle(&self, req: Request) -> Response<Body> {
        handle(&self.ingestor, req).await
    }
}

/// Serves one API Gateway request (the Lambda handler and the local dev server both call this).
pub async fn handle(ingestor: &Ingestor, req: Request) -> Response<Body> {
    api::serve(req, |req| route(ingestor, req)).await
}

async fn route(ingestor: &Ingestor, req: Request) -> Result<Response<Body>, ApiError> {
    match api::route_key(&req).as_str() {
        "POST /devices/{deviceId}/events" => ingest_events(ingestor, &req).await,
        other => Err(ApiError::no_route(other)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestBody {
    events: Vec<SubmittedEvent>,
}

async fn ingest_events(ingestor: &Ingestor, req: &Request) -> Result<Response<Body>, ApiError> {
    let device = path_param(req, "deviceId", |v| DeviceId::parse(v))?;
    let token = bearer_token(req).ok_or(FleetError::Unauthorized)?;
    let registration = ingestor.authenticate(&device, token).await?;
    let events = parse_batch(
        req,
        Timestamp::now(),
        ingestor.table().config.retention_days,
        ingestor.config().max_clock_skew,
    )?;
    let outcome = ingestor
        .ingest(&registration, events, deadline(req))
        .await?;
    shared::metrics::RequestMeter::add_figure("EventsAccepted", outcome.accepted.len() as f64);
    shared::metrics::RequestMeter::add_figure("EventsFailed", outcome.failed.len() as f64);
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

/// The request's batch, validated: a JSON body of at most [`MAX_INGEST_BODY_BYTES`] holding
/// 1 to 100 events, each checked against `now`, the retention window and the allowed clock
/// skew. Everything wrong is a 4xx naming the field. (Also the entry point of the
/// `ingest_batch` fuzz target in `fuzz/`.)
pub fn parse_batch(
    req: &Request,
    now: Timestamp,
    retention_days: u32,
    max_clock_skew: Duration,
) -> Result<Vec<NewEvent>, ApiError> {
    let body: IngestBody = json_body(req, MAX_INGEST_BODY_BYTES)?;
    Ok(validate_batch(
        body.events,
        now,
        retention_days,
        max_clock_skew,
    )?)
}

fn bearer_token(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// When retrying must stop: the Lambda's deadline (one rule for every function,
/// [`Deadline::from_lambda`]) less a margin to answer; outside Lambda (no context), the
/// ingestor's own retry window applies.
fn deadline(req: &Request) -> Instant {
    req.lambda_context_ref()
        .map(|ctx| Deadline::from_lambda(ctx.deadline(), TIMEOUT).less(ANSWER_MARGIN))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600))
}
