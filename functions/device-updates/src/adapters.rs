//! What the routes share: the answer type, `If-Match`, JSON bodies and the `ETag` header.

use lambda_http::http::{header, HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use shared::http::api::ApiError;

/// What a route answers: its response, or an error in the contract.
pub(crate) type Answer = Result<axum::response::Response, ApiError>;

/// A field that may be sent as `null` (which clears it): `Some(Value::Null)`, told apart from
/// an absent field (`None`).
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

/// The version in `If-Match`: `2`, `"2"` or `W/"2"`. Missing is a 428, anything else a 400.
pub(crate) fn if_match_version(headers: &HeaderMap) -> Result<u64, ApiError> {
    if_match(headers, 1, "must be the version, e.g. 1")
}

/// The version in `If-Match`, at least `least`: missing is a 428, anything else a 400 saying
/// `hint`.
pub(crate) fn if_match(headers: &HeaderMap, least: u64, hint: &str) -> Result<u64, ApiError> {
    let raw = headers
        .get(header::IF_MATCH)
        .ok_or_else(ApiError::precondition_required)?;
    // Exactly `N`, `"N"` or `W/"N"` (docs/openapi.yaml's pattern), nothing looser.
    let text = raw.to_str().map(str::trim).unwrap_or("");
    let digits = if let Some(weak) = text.strip_prefix("W/") {
        weak.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
    } else if let Some(quoted) = text.strip_prefix('"') {
        quoted.strip_suffix('"')
    } else {
        Some(text)
    };
    digits
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|v| *v >= least)
        .ok_or_else(|| ApiError::invalid("If-Match", hint))
}

/// `body` as a JSON value: the answer's bytes (key order) are those of its JSON object,
/// whatever the field order of its Rust type.
pub(crate) fn json_value(body: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(body).unwrap_or(serde_json::Value::Null)
}

/// The `ETag` header: `version`, quoted.
pub(crate) fn insert_etag(response: &mut axum::response::Response, version: u64) {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
}
