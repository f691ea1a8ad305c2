//! One webhook message to one endpoint and its attempts (the delivery log):
//! `USER#{userId}#WHLOG#{webhookId}#{shard}` / `WHDELIVERY#{deliveryId}`. The body is stored as
//! signed, so every retry sends the same bytes under the same `webhook-id`; kept 30 days
//! (`ttl`). A delivery id starts with its creation time (`DeliveryId::generate_at`), so each
//! of an endpoint's [`DELIVERY_LOG_SHARDS`] partitions sorts oldest to newest, and its log is
//! read newest first by merging them. The shard is a stable hash of the delivery id: an
//! outage storm's deliveries to one endpoint spread over 16 partitions instead of loading the
//! owner's (docs/design.md section 16, "Cost and scale").

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::UserId;
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;
use crate::model::webhook::{DeliveryId, WebhookEvent, WebhookId};

/// How long a delivery's log entry is kept.
pub const DELIVERY_LOG_DAYS: i64 = 30;

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeliveryState {
    /// Not yet answered with a 2xx; retried.
    Pending,
    /// Answered with a 2xx.
    Delivered,
    /// Given up (the endpoint was deleted, disabled, or its URL refused at send time).
    Abandoned,
}

/// A delivery: `USER#{userId}#WHLOG#{webhookId}#{shard}` / `WHDELIVERY#{deliveryId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDeliveryItem {
    /// The owner.
    pub user_id: UserId,
    /// The endpoint.
    pub webhook_id: WebhookId,
    /// The message id (`webhook-id`).
    pub delivery_id: DeliveryId,
    /// The event.
    pub event: WebhookEvent,
    /// The body, exactly as sent and signed.
    pub payload: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// Attempts made.
    pub attempts: u32,
    /// The last attempt's HTTP status, if it got an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// Why the last attempt failed without an answer (timeout, refused address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The last attempt's latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// When the next attempt is due, while pending after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<Timestamp>,
    /// Its send slot, when it is paced to later than its creation (the endpoint's
    /// `rateLimit`): no attempt before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_at: Option<Timestamp>,
    /// When created.
    pub created_at: Timestamp,
    /// When the owner last asked for a redelivery: its 24-hour retry window starts here
    /// instead of at `createdAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redelivered_at: Option<Timestamp>,
    /// DynamoDB TTL (epoch seconds): [`DELIVERY_LOG_DAYS`] after creation.
    pub ttl: i64,
}

attributes!(WebhookDeliveryItem {
    /// `state`.
    STATE = "state",
    /// `attempts`.
    ATTEMPTS = "attempts",
    /// `lastStatus`.
    LAST_STATUS = "lastStatus",
    /// `lastError`.
    LAST_ERROR = "lastError",
    /// `latencyMs`.
    LATENCY_MS = "latencyMs",
    /// `nextRetryAt`.
    NEXT_RETRY_AT = "nextRetryAt",
    /// `redeliveredAt`.
    REDELIVERED_AT = "redeliveredAt",
    /// `sendAt`.
    SEND_AT = "sendAt",
});

impl WebhookDeliveryItem {
    /// When its retry window began: the last redelivery the owner asked for, else creation.
    pub fn retry_window_start(&self) -> Timestamp {
        self.redelivered_at.unwrap_or(self.created_at)
    }
}

impl Entity for WebhookDeliveryItem {
    const ENTITY_TYPE: EntityType = EntityType::WebhookDelivery;
    fn item_key(&self) -> ItemKey {
        ItemKey::WebhookDelivery {
            user: self.user_id.clone(),
            webhook: self.webhook_id.clone(),
            delivery: self.delivery_id.clone(),
        }
    }
}

/// Sort-key prefix of a delivery.
pub const DELIVERY_PREFIX: &str = "WHDELIVERY#";

/// Partitions one endpoint's deliveries are spread over. An outage storm of 100,000 alarms in
/// a minute puts about 1,110 WCU/s of delivery items on the largest fleet's endpoint
/// (docs/key-distribution.md, "Webhook outage storm"); 16 partitions keep each near 70, and a
/// fleet ten times larger still under the 1,000 WCU/s of one key. A log page reads them all.
pub const DELIVERY_LOG_SHARDS: u16 = 16;

/// The log partition (`0..DELIVERY_LOG_SHARDS`) of `delivery`: a stable hash of its id.
pub fn log_shard(delivery: &DeliveryId) -> u16 {
    crate::model::shard::shard_of(delivery.as_str(), DELIVERY_LOG_SHARDS)
}

/// `USER#{userId}#WHLOG#{webhookId}#{shard}`: one of an endpoint's log partitions.
pub fn log_partition(user: &UserId, webhook: &WebhookId, shard: u16) -> String {
    format!("{}#WHLOG#{webhook}#{shard}", user_pk(user))
}

/// `USER#{userId}#WHLOG#{webhookId}#{shard}` / `WHDELIVERY#{deliveryId}`.
pub fn primary_key(user: &UserId, webhook: &WebhookId, delivery: &DeliveryId) -> PrimaryKey {
    PrimaryKey {
        pk: log_partition(user, webhook, log_shard(delivery)),
        sk: format!("{DELIVERY_PREFIX}{delivery}"),
    }
}

/// A delivery's key, if `key` has its shape (its shard the one its id hashes to).
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "WHLOG", webhook, shard], ["WHDELIVERY", delivery]) => Some((|| {
            let delivery = DeliveryId::parse(delivery)?;
            if shard.parse::<u16>().ok() != Some(log_shard(&delivery)) {
                return Err(ValidationError::new(
                    "key",
                    "a delivery in another log partition than its id's",
                ));
            }
            Ok(ItemKey::WebhookDelivery {
                user: UserId::parse(*user)?,
                webhook: WebhookId::parse(webhook)?,
                delivery,
            })
        })()),
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "webhookDelivery",
    pk: "USER#${userId}#WHLOG#${webhookId}#${shard}",
    sk: "WHDELIVERY#${deliveryId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
