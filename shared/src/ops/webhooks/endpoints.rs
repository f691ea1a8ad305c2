//! An owner's webhook endpoints: create (with its confirmation delivery), list, read, change,
//! delete, rotate the secret, confirm, and send a test. Each endpoint is one item in the
//! owner's partition (`USER#{owner}` / `WEBHOOK#{webhookId}`); a change reads it consistently
//! and writes it back conditioned on the version it read.

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use serde::Serialize;
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::model::entities::deleted_webhook_log::DeletedWebhookLogItem;
use crate::model::entities::webhook::{WebhookItem, WEBHOOK_PREFIX};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions};
use crate::model::ids::UserId;
use crate::model::keys::user_pk;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{PK, SK};
use crate::model::timestamp::Timestamp;
use crate::model::webhook::target::TargetPolicy;
use crate::model::webhook::{
    confirmation_token, WebhookEvent, WebhookFormat, WebhookId, WebhookSecret, DEFAULT_RATE_LIMIT,
    MAX_DESCRIPTION_CHARS, MAX_RATE_LIMIT, MAX_WEBHOOKS_PER_OWNER, ROTATION_OVERLAP_SECONDS,
};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::ops::webhooks::deliveries::send_new;
/// The owner's endpoint items (defined beside the queue, so the delivery worker's disable in
/// [`super::deliveries`] can read them without the two modules using each other).
pub use crate::ops::webhooks::webhook_items;
use crate::ops::webhooks::DeliveryQueue;
use crate::store::dynamo::{key_prefix, number_value, read_consistent, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// The endpoint item's key, as the definitions below name it.
const ENDPOINT_KEY: &str = "PK = USER#{userId}, SK = WEBHOOK#{webhookId}";

/// AP-W1, implemented by [`create_webhook`].
pub const CREATE_WEBHOOK: AccessPattern = AccessPattern {
    id: PatternId::CreateWebhook,
    description: "add a webhook endpoint (its secret shown once) and queue its webhook.confirm delivery",
    frequency: Frequency::Important,
    operations: &[Operation::Query, Operation::PutItem, Operation::UpdateItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK begins_with WEBHOOK# (the count, keys only); the endpoint; its send slot; the delivery's log item USER#{userId}#WHLOG#{webhookId}#{shard} / WHDELIVERY#{deliveryId}",
    // The count, the endpoint, its first send slot (a second UpdateItem only when a racing
    // reservation beat the first), the confirmation's log item: 4 (and an SQS SendMessage,
    // not DynamoDB).
    budget: RequestBudget::Fixed(5),
    max_read_units: None,
    route: Some("POST /me/webhooks"),
    implemented_by: implemented_by!(create_webhook),
};

/// AP-W2, implemented by [`list_webhooks`].
pub const LIST_WEBHOOKS: AccessPattern = AccessPattern {
    id: PatternId::ListWebhooks,
    description: "the owner's webhook endpoints (at most 16: one page), never their secrets",
    frequency: Frequency::Important,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId}, SK begins_with WEBHOOK#",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("GET /me/webhooks"),
    implemented_by: implemented_by!(list_webhooks),
};

/// AP-W3, implemented by [`get_webhook`].
pub const GET_WEBHOOK: AccessPattern = AccessPattern {
    id: PatternId::GetWebhook,
    description: "one webhook endpoint (a 404 for another owner's)",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: ENDPOINT_KEY,
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("GET /me/webhooks/{webhookId}"),
    implemented_by: implemented_by!(get_webhook),
};

/// AP-W4, implemented by [`update_webhook`].
pub const UPDATE_WEBHOOK: AccessPattern = AccessPattern {
    id: PatternId::UpdateWebhook,
    description: "change a webhook endpoint: enable, disable, events, description, format, rate, URL (a new URL confirms again)",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::PutItem, Operation::UpdateItem],
    index: None,
    key_condition: ENDPOINT_KEY,
    // Read and conditional write: 2 (again on a concurrent change); a new URL adds its
    // confirmation's send slot (one UpdateItem, two when a racing reservation beat it) and log
    // item.
    budget: RequestBudget::Fixed(5),
    max_read_units: None,
    route: Some("PATCH /me/webhooks/{webhookId}"),
    implemented_by: implemented_by!(update_webhook),
};

/// AP-W5, implemented by [`delete_webhook`].
pub const DELETE_WEBHOOK: AccessPattern = AccessPattern {
    id: PatternId::DeleteWebhook,
    description: "delete a webhook endpoint, leaving a marker that finds its log when its owner is deleted",
    frequency: Frequency::Important,
    operations: &[Operation::TransactWriteItems],
    index: None,
    key_condition: "the endpoint (deleted, conditioned on existing) and USER#{userId} / WHLOG#{webhookId}, in one transaction",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("DELETE /me/webhooks/{webhookId}"),
    implemented_by: implemented_by!(delete_webhook),
};

/// AP-W6, implemented by [`rotate_secret`].
pub const ROTATE_WEBHOOK_SECRET: AccessPattern = AccessPattern {
    id: PatternId::RotateWebhookSecret,
    description: "rotate an endpoint's signing secret (the old one signs beside it for 24 hours)",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::PutItem],
    index: None,
    key_condition: ENDPOINT_KEY,
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /me/webhooks/{webhookId}/rotate-secret"),
    implemented_by: implemented_by!(rotate_secret),
};

/// AP-W7, implemented by [`confirm_webhook`].
pub const CONFIRM_WEBHOOK: AccessPattern = AccessPattern {
    id: PatternId::ConfirmWebhook,
    description: "confirm an endpoint with the token its webhook.confirm delivery carried",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::PutItem],
    index: None,
    key_condition: ENDPOINT_KEY,
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /me/webhooks/{webhookId}/confirm"),
    implemented_by: implemented_by!(confirm_webhook),
};

/// AP-W8, implemented by [`send_test`].
pub const TEST_WEBHOOK: AccessPattern = AccessPattern {
    id: PatternId::TestWebhook,
    description: "send a confirmed, enabled endpoint a webhook.test delivery",
    frequency: Frequency::Important,
    operations: &[
        Operation::GetItem,
        Operation::UpdateItem,
        Operation::PutItem,
    ],
    index: None,
    key_condition: "the endpoint; its send slot; the delivery's log item",
    // The endpoint, its send slot (two UpdateItems when its last slot is past), the log item
    // (and an SQS SendMessage).
    budget: RequestBudget::Fixed(4),
    max_read_units: None,
    route: Some("POST /me/webhooks/{webhookId}/test"),
    implemented_by: implemented_by!(send_test),
};

/// Attempts of a change against concurrent changes of the same endpoint.
const CHANGE_ATTEMPTS: u32 = 5;

/// An endpoint as the API shows it: never its secret.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    /// The id.
    pub webhook_id: WebhookId,
    /// Where deliveries go.
    pub url: String,
    /// The events subscribed to.
    pub events: Vec<WebhookEvent>,
    /// The owner's note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The body's shape.
    pub format: WebhookFormat,
    /// Whether deliveries are sent.
    pub enabled: bool,
    /// Whether the endpoint confirmed it wants the traffic.
    pub confirmed: bool,
    /// Until when the previous secret still signs, during a rotation's overlap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_until: Option<Timestamp>,
    /// When created.
    pub created_at: Timestamp,
    /// When last changed.
    pub updated_at: Timestamp,
    /// Since when every attempt has failed, while they do (after
    /// [`crate::model::entities::webhook::FAILING_DAYS_TO_DISABLE`] days the endpoint is
    /// disabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<Timestamp>,
    /// When the delivery worker disabled it (absent when the owner did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<Timestamp>,
    /// Why the delivery worker disabled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Deliveries it is sent per second at most: a storm's deliveries are paced to it.
    pub rate_limit: u32,
}

impl WebhookView {
    fn of(item: &WebhookItem, now: Timestamp) -> Self {
        Self {
            webhook_id: item.webhook_id.clone(),
            url: item.url.clone(),
            events: item.events.clone(),
            description: item.description.clone(),
            format: item.format,
            enabled: item.enabled,
            confirmed: item.confirmed,
            previous_secret_until: item.previous_secret_until.filter(|until| now < *until),
            created_at: item.created_at,
            updated_at: item.updated_at,
            failing_since: item.failing_since,
            disabled_at: item.disabled_at,
            disabled_reason: item.disabled_reason.clone(),
            rate_limit: item.rate_limit,
        }
    }
}

/// A new endpoint and its secret (shown this once).
#[derive(Debug)]
pub struct CreatedWebhook {
    /// The endpoint.
    pub webhook: WebhookView,
    /// Its signing secret.
    pub secret: WebhookSecret,
}

/// What a request may set on an endpoint; every field optional on a change.
#[derive(Debug, Default)]
pub struct WebhookChanges {
    url: Option<String>,
    events: Option<Vec<WebhookEvent>>,
    description: Option<Option<String>>,
    format: Option<WebhookFormat>,
    enabled: Option<bool>,
    rate_limit: Option<u32>,
}

impl WebhookChanges {
    /// Parses a request body: `url` checked by `policy`, `events`, `description`, `format`,
    /// `rateLimit` (deliveries a second, 1 to [`MAX_RATE_LIMIT`]), `enabled`. Unknown fields are a 400 naming them; `required` fields must be present.
    pub fn parse(
        body: &Value,
        policy: &TargetPolicy,
        creating: bool,
    ) -> Result<Self, ValidationError> {
        let object = body
            .as_object()
            .ok_or_else(|| ValidationError::new("body", "must be a JSON object"))?;
        let mut changes = Self::default();
        for (name, value) in object {
            match name.as_str() {
                "url" => {
                    let raw = value
                        .as_str()
                        .ok_or_else(|| ValidationError::new("url", "must be a string"))?;
                    changes.url = Some(policy.check_url(raw)?.to_string());
                }
                "events" => changes.events = Some(WebhookEvent::parse_list(value)?),
                "description" => {
                    changes.description = Some(match value {
                        Value::Null => None,
                        Value::String(text) if text.chars().count() <= MAX_DESCRIPTION_CHARS => {
                            Some(text.clone())
                        }
                        _ => {
                            return Err(ValidationError::new(
                                "description",
                                format!(
                                "must be a string of at most {MAX_DESCRIPTION_CHARS} characters"
                            ),
                            ))
                        }
                    })
                }
                "format" => changes.format = Some(WebhookFormat::parse(value)?),
                "rateLimit" => {
                    changes.rate_limit = Some(
                        value
                            .as_u64()
                            .filter(|n| (1..=u64::from(MAX_RATE_LIMIT)).contains(n))
                            .ok_or_else(|| {
                                ValidationError::new(
                                    "rateLimit",
                                    format!("must be a whole number of deliveries a second, 1 to {MAX_RATE_LIMIT}"),
                                )
                            })? as u32,
                    )
                }
                "enabled" if !creating => {
                    changes.enabled =
                        Some(value.as_bool().ok_or_else(|| {
                            ValidationError::new("enabled", "must be true or false")
                        })?)
                }
                other => return Err(ValidationError::new(other, "is not a field of a webhook")),
            }
        }
        if creating {
            if changes.url.is_none() {
                return Err(ValidationError::new("url", "is required"));
            }
            if changes.events.is_none() {
                return Err(ValidationError::new("events", "is required"));
            }
        } else if object.is_empty() {
            return Err(ValidationError::new("body", "names nothing to change"));
        }
        Ok(changes)
    }
}

/// Creates an endpoint (at most [`MAX_WEBHOOKS_PER_OWNER`] per owner) and queues its
/// `webhook.confirm` delivery. Requests: a Query of the owner's endpoints (keys only), a
/// PutItem of the endpoint, an UpdateItem of its send slot, a PutItem of the delivery's log item, an SQS SendMessage.
pub async fn create_webhook(
    table: &FleetTable,
    queue: &DeliveryQueue,
    owner: &UserId,
    changes: WebhookChanges,
) -> Result<CreatedWebhook, FleetError> {
    if count_webhooks(table, owner).await? >= MAX_WEBHOOKS_PER_OWNER {
        return Err(FleetError::Conflict {
            code: "webhook_limit",
            message: format!(
                "an owner keeps at most {MAX_WEBHOOKS_PER_OWNER} webhooks: delete one first"
            ),
        });
    }
    let now = Timestamp::now();
    let url = changes
        .url
        .ok_or_else(|| ValidationError::new("url", "is required"))?;
    let events = changes.events.unwrap_or_default();
    let item = WebhookItem {
        description: changes.description.flatten(),
        format: changes.format.unwrap_or_default(),
        rate_limit: changes.rate_limit.unwrap_or(DEFAULT_RATE_LIMIT),
        ..WebhookItem::new(owner.clone(), WebhookId::generate()?, url, events, now)?
    };
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .expressions(Expressions::condition(Condition::absent(PK)))
        .send()
        .await
        .map_err(sdk_error)?;
    send_confirmation(table, queue, &item).await?;
    Ok(CreatedWebhook {
        webhook: WebhookView::of(&item, now),
        secret: item.secret,
    })
}

/// How many endpoints the owner has (one Query of keys; at most a page).
async fn count_webhooks(table: &FleetTable, owner: &UserId) -> Result<usize, FleetError> {
    let out = key_prefix(
        table,
        user_pk(owner),
        WEBHOOK_PREFIX,
        Expressions::builder().projection(&[PK, SK]),
    )
    .send()
    .await
    .map_err(sdk_error)?;
    Ok(out.items().len())
}

/// The owner's endpoints, in id order: one Query of the owner's partition over
/// `WEBHOOK#` (at most [`MAX_WEBHOOKS_PER_OWNER`] items, so always one page).
pub async fn list_webhooks(
    table: &FleetTable,
    owner: &UserId,
) -> Result<Vec<WebhookView>, FleetError> {
    let now = Timestamp::now();
    Ok(webhook_items(table, owner)
        .await?
        .iter()
        .map(|w| WebhookView::of(w, now))
        .collect())
}

/// The endpoint, or a 404 (another owner's is one too).
pub async fn read_webhook(
    table: &FleetTable,
    owner: &UserId,
    webhook: &WebhookId,
) -> Result<WebhookItem, FleetError> {
    read_consistent::<WebhookItem>(
        table,
        &ItemKey::Webhook {
            user: owner.clone(),
            webhook: webhook.clone(),
        },
    )
    .await?
    .ok_or(FleetError::NotFound("webhook"))
}

/// One endpoint as the API shows it.
pub async fn get_webhook(
    table: &FleetTable,
    owner: &UserId,
    webhook: &WebhookId,
) -> Result<WebhookView, FleetError> {
    Ok(WebhookView::of(
        &read_webhook(table, owner, webhook).await?,
        Timestamp::now(),
    ))
}

/// Reads the endpoint, applies `edit`, writes it back if nobody changed it in between
/// (again on a conflict). Returns the item written.
async fn change(
    table: &FleetTable,
    owner: &UserId,
    webhook: &WebhookId,
    mut edit: impl FnMut(&mut WebhookItem, Timestamp) -> Result<(), FleetError>,
) -> Result<WebhookItem, FleetError> {
    for _ in 0..CHANGE_ATTEMPTS {
        let mut item = read_webhook(table, owner, webhook).await?;
        let read_version = item.version;
        let now = Timestamp::now();
        edit(&mut item, now)?;
        item.version = read_version + 1;
        item.updated_at = now;
        let result = table
            .client
            .put_item()
            .table_name(table.name())
            .set_item(Some(item.to_item(&table.config.shards)?))
            .expressions(Expressions::condition(Condition::equals(
                WebhookItem::VERSION,
                number_value(read_version),
            )))
            .send()
            .await;
        match result {
            Ok(_) => return Ok(item),
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(_)) => continue,
                _ => return Err(sdk_error(err)),
            },
        }
    }
    Err(FleetError::Conflict {
        code: "busy",
        message: "the webhook changed concurrently too often: retry".into(),
    })
}

/// Changes an endpoint. A new URL must confirm again: the endpoint is unconfirmed and a new
/// `webhook.confirm` delivery goes to the new URL.
pub async fn update_webhook(
    table: &FleetTable,
    queue: &DeliveryQueue,
    owner: &UserId,
    webhook: &WebhookId,
    changes: WebhookChanges,
) -> Result<WebhookView, FleetError> {
    let mut new_url = false;
    let item = change(table, owner, webhook, |item, _| {
        new_url = false;
        if let Some(url) = &changes.url {
            if *url != item.url {
                item.url = url.clone();
                item.confirmed = false;
                item.confirmation_token = confirmation_token()?;
                new_url = true;
            }
        }
        if let Some(events) = &changes.events {
            item.events = events.clone();
        }
        if let Some(description) = &changes.description {
            item.description = description.clone();
        }
        if let Some(format) = changes.format {
            item.format = format;
        }
        if let Some(rate_limit) = changes.rate_limit {
            item.rate_limit = rate_limit;
        }
        if let Some(enabled) = changes.enabled {
            if enabled && !item.enabled {
                // Enabled again: a fresh start, not a disable at the next failure.
                item.disabled_at = None;
                item.disabled_reason = None;
                item.failing_since = None;
                item.consecutive_failures = 0;
                item.breaker_open_until = None;
            }
            item.enabled = enabled;
        }
        Ok(())
    })
    .await?;
    if new_url {
        send_confirmation(table, queue, &item).await?;
    }
    Ok(WebhookView::of(&item, Timestamp::now()))
}

/// Deletes an endpoint (a 404 when there is none). Its queued deliveries find it gone and
/// are abandoned; its log items expire by TTL. In the same transaction it leaves a
/// [`DeletedWebhookLogItem`] in the owner's partition, kept as long as the log, so deleting the
/// owner (an organization) still finds the log's partitions and deletes them too.
pub async fn delete_webhook(
    table: &FleetTable,
    owner: &UserId,
    webhook: &WebhookId,
) -> Result<(), FleetError> {
    let key = ItemKey::Webhook {
        user: owner.clone(),
        webhook: webhook.clone(),
    };
    let endpoint = Delete::builder()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::condition(Condition::exists(PK)))
        .build()
        .map_err(FleetError::internal)?;
    let deleted_log = Put::builder()
        .table_name(table.name())
        .set_item(Some(
            DeletedWebhookLogItem::new(owner.clone(), webhook.clone(), Timestamp::now())
                .to_item(&table.config.shards)?,
        ))
        .build()
        .map_err(FleetError::internal)?;
    let actions = vec![
        TransactWriteItem::builder().delete(endpoint).build(),
        TransactWriteItem::builder().put(deleted_log).build(),
    ];
    match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
        Transaction::Committed => Ok(()),
        Transaction::Cancelled(_) => Err(FleetError::NotFound("webhook")),
    }
}

/// A rotated secret: the new one (shown this once) and until when the old one still signs.
#[derive(Debug)]
pub struct RotatedSecret {
    /// The new secret.
    pub secret: WebhookSecret,
    /// The end of the overlap.
    pub previous_secret_until: Timestamp,
}

/// Rotates the secret: the old one keeps signing beside the new one for
/// [`ROTATION_OVERLAP_SECONDS`] (a second rotation within the overlap drops the oldest).
pub async fn rotate_secret(
    table: &FleetTable,
    owner: &UserId,
    webhook: &WebhookId,
) -> Result<RotatedSecret, FleetError> {
    let item = change(table, owner, webhook, |item, now| {
        let fresh = WebhookSecret::generate()?;
        item.previous_secret = Some(std::mem::replace(&mut item.secret, fresh));
        item.previous_secret_until = Some(now.plus_seconds(ROTATION_OVERLAP_SECONDS));
        Ok(())
    })
    .await?;
    Ok(RotatedSecret {
        secret: item.secret,
        previous_secret_until: item
            .previous_secret_until
            .ok_or_else(|| FleetError::internal("rotation without an overlap"))?,
    })
}

/// Confirms an endpoint with the token its confirmation delivery carried (a 400 naming
/// `token` when it is not that token).
pub async fn confirm_webhook(
    table: &FleetTable,
    owner: &UserId,
    webhook: &WebhookId,
    token: &str,
) -> Result<WebhookView, FleetError> {
    let item = change(table, owner, webhook, |item, _| {
        if !bool::from(item.confirmation_token.as_bytes().ct_eq(token.as_bytes())) {
            return Err(
                ValidationError::new("token", "is not this webhook's confirmation token").into(),
            );
        }
        item.confirmed = true;
        Ok(())
    })
    .await?;
    Ok(WebhookView::of(&item, Timestamp::now()))
}

/// Sends a `webhook.test` delivery: only to an enabled, confirmed endpoint (a 409
/// otherwise: an unconfirmed endpoint receives nothing but its confirmation). Returns the
/// delivery's id.
pub async fn send_test(
    table: &FleetTable,
    queue: &DeliveryQueue,
    owner: &UserId,
    webhook: &WebhookId,
) -> Result<crate::model::webhook::DeliveryId, FleetError> {
    let item = read_webhook(table, owner, webhook).await?;
    if !item.confirmed {
        return Err(FleetError::Conflict {
            code: "webhook_unconfirmed",
            message: "the webhook is not confirmed yet: answer its webhook.confirm delivery or POST its token to /confirm".into(),
        });
    }
    if !item.enabled {
        return Err(FleetError::Conflict {
            code: "webhook_disabled",
            message: "the webhook is disabled".into(),
        });
    }
    let data = serde_json::json!({
        "webhookId": item.webhook_id,
        "message": "a test delivery from Device Fleet",
    });
    send_new(table, queue, &item, WebhookEvent::WebhookTest, data).await
}

/// Queues the endpoint's `webhook.confirm` delivery.
async fn send_confirmation(
    table: &FleetTable,
    queue: &DeliveryQueue,
    item: &WebhookItem,
) -> Result<(), FleetError> {
    let data = serde_json::json!({
        "webhookId": item.webhook_id,
        "confirmationToken": item.confirmation_token,
    });
    send_new(table, queue, item, WebhookEvent::WebhookConfirm, data).await?;
    Ok(())
}
