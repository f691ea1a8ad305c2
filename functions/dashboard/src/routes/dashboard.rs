//! The dashboard: `GET /me/dashboard`, with an `ETag` for polling.

use crate::adapters::{json_value, Answer, ReadQuery};
use axum::extract::State;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::Serialize;
use shared::http::api::{empty_response, json_response};
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::QueryParams;
use shared::ops::dashboard;
use shared::FleetTable;

/// `GET /me/dashboard`, with an `ETag` of the answer: a console polling with
/// `If-None-Match` gets a bodiless 304 while nothing changed. The read is the same one
/// (AP-DASH's budget), so the tag is a hash of what it read, not a further request.
pub(crate) async fn get_dashboard(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let d = dashboard::dashboard(&table, &fleet.owner, q.cursor.as_deref()).await?;
    Ok(with_etag(&headers, &d))
}

/// The JSON answer with a strong `ETag` over its bytes, or `304 Not Modified` (no body) when
/// `If-None-Match` names that tag (or `*`).
fn with_etag(request: &HeaderMap, body: &impl Serialize) -> axum::response::Response {
    let body = json_value(body);
    let text = body.to_string();
    // xxh3 is stable across builds and machines, so every Lambda gives the same tag.
    let tag = format!("\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(text.as_bytes()));
    let matches = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*");
    let mut response = if matches {
        empty_response(StatusCode::NOT_MODIFIED)
    } else {
        json_response(StatusCode::OK, &body)
    };
    if let Ok(value) = HeaderValue::from_str(&tag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}
