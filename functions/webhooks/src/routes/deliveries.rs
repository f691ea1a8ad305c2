//! An endpoint's delivery log: `GET /me/webhooks/{webhookId}/deliveries` (newest first,
//! paged) and `POST /me/webhooks/{webhookId}/deliveries/{deliveryId}/retry` (and the
//! `/orgs/{orgId}` twins: viewer to read the log, admin to redeliver).

use axum::extract::State;
use lambda_http::http::StatusCode;
use serde::Deserialize;
use serde_json::json;
use shared::http::api::{json_response, ApiError};
use shared::http::fleet::{AdminRole, Fleet, ViewerRole};
use shared::http::gateway::{PathParams, QueryParams};
use shared::model::webhook::{DeliveryId, WebhookId};
use shared::ops::page_limit;
use shared::ops::webhooks::delivery_log;

use crate::WebhooksState;

/// What a route answers.
type Answer = Result<axum::response::Response, ApiError>;

#[derive(Deserialize)]
pub(crate) struct LogPath {
    #[serde(rename = "webhookId")]
    webhook_id: String,
}

#[derive(Deserialize)]
pub(crate) struct DeliveryPath {
    #[serde(rename = "webhookId")]
    webhook_id: String,
    #[serde(rename = "deliveryId")]
    delivery_id: String,
}

/// The log's query parameters.
#[derive(Deserialize)]
pub(crate) struct LogQuery {
    limit: Option<String>,
    cursor: Option<String>,
}

/// A webhook id from the path: one that cannot be one is no webhook of the caller's (404).
fn webhook_id(raw: &str) -> Result<WebhookId, ApiError> {
    WebhookId::parse(raw).map_err(|_| ApiError::not_found("webhook"))
}

/// `GET /me/webhooks/{webhookId}/deliveries`: `{"items": [...], "cursor"}`, newest first.
pub(crate) async fn list_deliveries(
    fleet: Fleet<ViewerRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<LogPath>,
    QueryParams(q): QueryParams<LogQuery>,
) -> Answer {
    let id = webhook_id(&path.webhook_id)?;
    let page = delivery_log::list_deliveries(
        &state.table,
        &fleet.owner,
        &id,
        page_limit(q.limit.as_deref())?,
        q.cursor.as_deref(),
    )
    .await?;
    Ok(json_response(StatusCode::OK, &json!(page)))
}

/// `POST /me/webhooks/{webhookId}/deliveries/{deliveryId}/retry`: 202 `{"delivery"}`, the
/// same message queued again.
pub(crate) async fn retry_delivery(
    fleet: Fleet<AdminRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<DeliveryPath>,
) -> Answer {
    let webhook = webhook_id(&path.webhook_id)?;
    let delivery =
        DeliveryId::parse(&path.delivery_id).map_err(|_| ApiError::not_found("delivery"))?;
    let view = delivery_log::redeliver(
        &state.table,
        &state.queue,
        &fleet.owner,
        &webhook,
        &delivery,
    )
    .await?;
    Ok(json_response(
        StatusCode::ACCEPTED,
        &json!({"delivery": view}),
    ))
}
