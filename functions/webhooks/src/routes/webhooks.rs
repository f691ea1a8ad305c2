//! Webhook endpoints: `GET|POST /me/webhooks`, `GET|PATCH|DELETE /me/webhooks/{webhookId}`,
//! `POST /me/webhooks/{webhookId}/rotate-secret|confirm|test` (and the `/orgs/{orgId}` twins:
//! admin to manage, viewer to read).

use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use shared::http::api::{self, json_response, parse_json_body, ApiError, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet, ViewerRole};
use shared::http::gateway::PathParams;
use shared::model::webhook::WebhookId;
use shared::ops::webhooks::endpoints::{self, WebhookChanges};

use crate::WebhooksState;

/// What a route answers.
type Answer = Result<axum::response::Response, ApiError>;

#[derive(Deserialize)]
pub(crate) struct WebhookPath {
    #[serde(rename = "webhookId")]
    webhook_id: String,
}

/// A webhook id from the path: one that cannot be one is no webhook of the caller's (404).
fn webhook_id(path: &WebhookPath) -> Result<WebhookId, ApiError> {
    WebhookId::parse(&path.webhook_id).map_err(|_| ApiError::not_found("webhook"))
}

/// `POST /me/webhooks`: 201 `{"webhookId", "secret", "webhook"}`, the secret shown this once.
pub(crate) async fn create_webhook(
    fleet: Fleet<AdminRole>,
    State(state): State<WebhooksState>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: Value = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let changes = WebhookChanges::parse(&body, &state.policy, true)?;
    let created =
        endpoints::create_webhook(&state.table, &state.queue, &fleet.owner, changes).await?;
    let mut response = json_response(
        StatusCode::CREATED,
        &json!({
            "webhookId": created.webhook.webhook_id,
            "secret": created.secret.reveal(),
            "webhook": created.webhook,
        }),
    );
    if let Ok(value) = HeaderValue::from_str(&format!(
        "{}/webhooks/{}",
        fleet.base_path(),
        created.webhook.webhook_id
    )) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// `GET /me/webhooks`: `{"items": [...], "cursor": null}` (an owner keeps at most 16, one
/// page).
pub(crate) async fn list_webhooks(
    fleet: Fleet<ViewerRole>,
    State(state): State<WebhooksState>,
) -> Answer {
    let items = endpoints::list_webhooks(&state.table, &fleet.owner).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"items": items, "cursor": null}),
    ))
}

/// `GET /me/webhooks/{webhookId}`.
pub(crate) async fn get_webhook(
    fleet: Fleet<ViewerRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<WebhookPath>,
) -> Answer {
    let webhook = endpoints::get_webhook(&state.table, &fleet.owner, &webhook_id(&path)?).await?;
    Ok(json_response(StatusCode::OK, &json!({"webhook": webhook})))
}

/// `PATCH /me/webhooks/{webhookId}`: `url`, `events`, `description`, `format`, `enabled`.
pub(crate) async fn update_webhook(
    fleet: Fleet<AdminRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<WebhookPath>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let id = webhook_id(&path)?;
    let body: Value = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let changes = WebhookChanges::parse(&body, &state.policy, false)?;
    let webhook =
        endpoints::update_webhook(&state.table, &state.queue, &fleet.owner, &id, changes).await?;
    Ok(json_response(StatusCode::OK, &json!({"webhook": webhook})))
}

/// `DELETE /me/webhooks/{webhookId}`.
pub(crate) async fn delete_webhook(
    fleet: Fleet<AdminRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<WebhookPath>,
) -> Answer {
    endpoints::delete_webhook(&state.table, &fleet.owner, &webhook_id(&path)?).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

/// `POST /me/webhooks/{webhookId}/rotate-secret`: `{"secret", "previousSecretUntil"}`.
pub(crate) async fn rotate_secret(
    fleet: Fleet<AdminRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<WebhookPath>,
) -> Answer {
    let rotated = endpoints::rotate_secret(&state.table, &fleet.owner, &webhook_id(&path)?).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "secret": rotated.secret.reveal(),
            "previousSecretUntil": rotated.previous_secret_until,
        }),
    ))
}

/// `POST /me/webhooks/{webhookId}/confirm` `{"token"}`.
pub(crate) async fn confirm(
    fleet: Fleet<AdminRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<WebhookPath>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let id = webhook_id(&path)?;
    let body: Value = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let token = body
        .get("token")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid("token", "is required"))?;
    let webhook = endpoints::confirm_webhook(&state.table, &fleet.owner, &id, token).await?;
    Ok(json_response(StatusCode::OK, &json!({"webhook": webhook})))
}

/// `POST /me/webhooks/{webhookId}/test`: 202 `{"deliveryId"}`.
pub(crate) async fn send_test(
    fleet: Fleet<AdminRole>,
    State(state): State<WebhooksState>,
    PathParams(path): PathParams<WebhookPath>,
) -> Answer {
    let delivery = endpoints::send_test(
        &state.table,
        &state.queue,
        &fleet.owner,
        &webhook_id(&path)?,
    )
    .await?;
    Ok(json_response(
        StatusCode::ACCEPTED,
        &json!({"deliveryId": delivery}),
    ))
}
