//! What the read routes share: the answer type, JSON answers and the query parameters
//! with their validation.

use lambda_http::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::http::api::{json_response, ApiError};
use shared::model::timestamp::Timestamp;
use shared::ops::events::TimeRange;
use shared::ops::page_limit;
use shared::ValidationError;

/// Default time range of event listings, when `from` is not given.
pub(crate) const DEFAULT_RANGE_SECONDS: i64 = 24 * 3600;

/// What a route answers: its response, or an error in the contract.
pub(crate) type Answer = Result<axum::response::Response, ApiError>;

/// `200 OK` with `body`'s JSON: through a [`Value`], so the bytes (key order) are those of
/// the answer's JSON object, whatever the field order of its Rust type.
pub(crate) fn ok(body: &impl Serialize) -> Answer {
    Ok(json_response(StatusCode::OK, &json_value(body)))
}

/// `body` as a JSON value (see [`ok`]).
pub(crate) fn json_value(body: &impl Serialize) -> Value {
    serde_json::to_value(body).unwrap_or(Value::Null)
}

/// The query parameters of the read routes, each validated by the route that uses it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadQuery {
    pub(crate) cursor: Option<String>,
    pub(crate) limit: Option<String>,
    pub(crate) from: Option<String>,
    pub(crate) to: Option<String>,
    pub(crate) tag: Option<String>,
    #[serde(rename = "type")]
    pub(crate) event_type: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) seen_since: Option<String>,
    pub(crate) severity: Option<String>,
    pub(crate) resolution: Option<String>,
}

/// A query parameter the route cannot do without: 400 naming it when absent.
pub(crate) fn required(name: &str, value: Option<String>) -> Result<String, ValidationError> {
    value.ok_or_else(|| ValidationError::new(name, "is required"))
}

/// `limit`: see [`page_limit`].
pub(crate) fn limit(q: &ReadQuery) -> Result<u32, ValidationError> {
    page_limit(q.limit.as_deref())
}

/// `from`/`to` (RFC 3339); `to` defaults to now and `from` to a day before `to`.
pub(crate) fn time_range(q: &ReadQuery) -> Result<TimeRange, ValidationError> {
    let to = match &q.to {
        Some(t) => Timestamp::parse_field("to", t)?,
        None => Timestamp::now(),
    };
    let from = match &q.from {
        Some(f) => Timestamp::parse_field("from", f)?,
        None => to.plus_seconds(-DEFAULT_RANGE_SECONDS),
    };
    TimeRange::new(from, to)
}
