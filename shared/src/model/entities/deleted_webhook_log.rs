//! The delivery log of a deleted webhook endpoint, while it lasts: `USER#{userId}` /
//! `WHLOG#{webhookId}`. The log's items live in partitions of their own
//! ([`super::webhook_delivery`]) and expire by TTL; this item, left in the owner's partition by
//! the endpoint's deletion, is how the owner's deletion (an organization's) still finds them.

use serde::{Deserialize, Serialize};

use crate::model::entities::webhook_delivery::DELIVERY_LOG_DAYS;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::UserId;
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;
use crate::model::webhook::WebhookId;

/// A deleted endpoint's log: `USER#{userId}` / `WHLOG#{webhookId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletedWebhookLogItem {
    /// The owner.
    pub user_id: UserId,
    /// The deleted endpoint.
    pub webhook_id: WebhookId,
    /// When the endpoint was deleted.
    pub deleted_at: Timestamp,
    /// Expiry, epoch seconds: after the last of the log's items (see [`Self::KEPT_SECONDS`]).
    pub ttl: i64,
}

impl DeletedWebhookLogItem {
    /// How long it is kept after the deletion: the log's own [`DELIVERY_LOG_DAYS`], and a day
    /// for a delivery the alarm stream created while the endpoint was being deleted.
    pub const KEPT_SECONDS: i64 = (DELIVERY_LOG_DAYS + 1) * 86_400;

    /// What deleting `webhook` of `user` at `now` leaves.
    pub fn new(user: UserId, webhook: WebhookId, now: Timestamp) -> Self {
        Self {
            user_id: user,
            webhook_id: webhook,
            deleted_at: now,
            ttl: now.epoch_seconds() + Self::KEPT_SECONDS,
        }
    }
}

impl Entity for DeletedWebhookLogItem {
    const ENTITY_TYPE: EntityType = EntityType::DeletedWebhookLog;
    fn item_key(&self) -> ItemKey {
        ItemKey::DeletedWebhookLog {
            user: self.user_id.clone(),
            webhook: self.webhook_id.clone(),
        }
    }
}

attributes!(DeletedWebhookLogItem {
    /// `userId`.
    USER_ID = "userId",
    /// `webhookId`.
    WEBHOOK_ID = "webhookId",
    /// `deletedAt`.
    DELETED_AT = "deletedAt",
    /// `ttl`.
    TTL = "ttl",
});

/// Sort-key prefix of an owner's deleted endpoints' logs.
pub const DELETED_LOG_PREFIX: &str = "WHLOG#";

/// `USER#{userId}` / `WHLOG#{webhookId}`.
pub fn primary_key(user: &UserId, webhook: &WebhookId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: format!("{DELETED_LOG_PREFIX}{webhook}"),
    }
}

/// Its key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["WHLOG", webhook]) => Some((|| {
            Ok(ItemKey::DeletedWebhookLog {
                user: UserId::parse(*user)?,
                webhook: WebhookId::parse(webhook)?,
            })
        })()),
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "deletedWebhookLog",
    pk: "USER#${userId}",
    sk: "WHLOG#${webhookId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
