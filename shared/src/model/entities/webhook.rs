//! A webhook endpoint of an owner: `USER#{userId}` / `WEBHOOK#{webhookId}`. The owner's
//! endpoints are one partition (a Query lists them); the signing secret is kept in the item
//! (encrypted at rest by DynamoDB, never logged, returned only by the create and rotate
//! answers; see design.md section 16).

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::ids::UserId;
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;
use crate::model::webhook::{
    confirmation_token, WebhookEvent, WebhookFormat, WebhookId, WebhookSecret, DEFAULT_RATE_LIMIT,
};

/// A webhook endpoint: `USER#{userId}` / `WEBHOOK#{webhookId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookItem {
    /// The owner (a person, or an organization's fleet).
    pub user_id: UserId,
    /// The endpoint's id.
    pub webhook_id: WebhookId,
    /// Where deliveries go (checked by `model::webhook::target`).
    pub url: String,
    /// The events it subscribes to.
    pub events: Vec<WebhookEvent>,
    /// The owner's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The body's shape.
    #[serde(default)]
    pub format: WebhookFormat,
    /// Whether deliveries are sent (the owner's switch).
    pub enabled: bool,
    /// Whether the endpoint confirmed it wants the traffic; until then it receives nothing
    /// but its `webhook.confirm` delivery.
    pub confirmed: bool,
    /// The token the confirmation delivery carries.
    pub confirmation_token: String,
    /// The secret that signs.
    pub secret: WebhookSecret,
    /// The secret a rotation replaced, still signing beside it until `previousSecretUntil`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret: Option<WebhookSecret>,
    /// When the previous secret stops signing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret_until: Option<Timestamp>,
    /// When created.
    pub created_at: Timestamp,
    /// When last changed.
    pub updated_at: Timestamp,
    /// Every change adds one (the condition of the next change).
    pub version: u64,
    /// Attempts that failed in a row (the delivery worker's circuit breaker; reset by a 2xx).
    #[serde(default)]
    pub consecutive_failures: u32,
    /// While in the future, the breaker is open: no attempt is made, messages wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_open_until: Option<Timestamp>,
    /// When the current run of failed attempts began (set by the first failure after a
    /// success, removed by a 2xx): [`FAILING_DAYS_TO_DISABLE`] after it, the worker disables
    /// the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<Timestamp>,
    /// When the worker disabled it (absent when the owner did, or it is enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<Timestamp>,
    /// Why the worker disabled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Deliveries it is sent per second at most (its send slots' spacing).
    #[serde(default = "default_rate_limit")]
    pub rate_limit: u32,
    /// The end of the last send slot reserved (epoch milliseconds): a new delivery's slot
    /// follows it, or starts now when it is past (`ops::webhooks::deliveries::reserve_send_slots`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_until: Option<i64>,
}

fn default_rate_limit() -> u32 {
    crate::model::webhook::DEFAULT_RATE_LIMIT
}

/// Days of nothing but failed attempts after which the worker disables an endpoint (the
/// issue's "an endpoint failing for 3 days is disabled").
pub const FAILING_DAYS_TO_DISABLE: i64 = 3;

attributes!(WebhookItem {
    /// `url`.
    URL = "url",
    /// `events`.
    EVENTS = "events",
    /// `description`.
    DESCRIPTION = "description",
    /// `format`.
    FORMAT = "format",
    /// `enabled`.
    ENABLED = "enabled",
    /// `confirmed`.
    CONFIRMED = "confirmed",
    /// `confirmationToken`.
    CONFIRMATION_TOKEN = "confirmationToken",
    /// `secret`.
    SECRET = "secret",
    /// `previousSecret`.
    PREVIOUS_SECRET = "previousSecret",
    /// `previousSecretUntil`.
    PREVIOUS_SECRET_UNTIL = "previousSecretUntil",
    /// `updatedAt`.
    UPDATED_AT = "updatedAt",
    /// `version`.
    VERSION = "version",
    /// `consecutiveFailures`.
    CONSECUTIVE_FAILURES = "consecutiveFailures",
    /// `breakerOpenUntil`.
    BREAKER_OPEN_UNTIL = "breakerOpenUntil",
    /// `failingSince`.
    FAILING_SINCE = "failingSince",
    /// `disabledAt`.
    DISABLED_AT = "disabledAt",
    /// `disabledReason`.
    DISABLED_REASON = "disabledReason",
    /// `rateLimit`.
    RATE_LIMIT = "rateLimit",
    /// `pacedUntil`.
    PACED_UNTIL = "pacedUntil",
});

impl Entity for WebhookItem {
    const ENTITY_TYPE: EntityType = EntityType::Webhook;
    fn item_key(&self) -> ItemKey {
        ItemKey::Webhook {
            user: self.user_id.clone(),
            webhook: self.webhook_id.clone(),
        }
    }
}

impl WebhookItem {
    /// A new endpoint of `owner` at `url` for `events`, made at `now`: enabled, not confirmed
    /// yet (with its confirmation token), a new secret, the standard format and the default
    /// rate, no failures.
    pub fn new(
        owner: UserId,
        webhook_id: WebhookId,
        url: String,
        events: Vec<WebhookEvent>,
        now: Timestamp,
    ) -> Result<Self, FleetError> {
        Ok(Self {
            user_id: owner,
            webhook_id,
            url,
            events,
            description: None,
            format: WebhookFormat::Standard,
            enabled: true,
            confirmed: false,
            confirmation_token: confirmation_token()?,
            secret: WebhookSecret::generate()?,
            previous_secret: None,
            previous_secret_until: None,
            created_at: now,
            updated_at: now,
            version: 1,
            consecutive_failures: 0,
            breaker_open_until: None,
            failing_since: None,
            disabled_at: None,
            disabled_reason: None,
            rate_limit: DEFAULT_RATE_LIMIT,
            paced_until: None,
        })
    }

    /// Whether a run of failures that began at `failing_since` has lasted long enough at
    /// `now` to disable the endpoint.
    pub fn failed_long_enough(failing_since: Timestamp, now: Timestamp) -> bool {
        now.epoch_seconds() - failing_since.epoch_seconds() >= FAILING_DAYS_TO_DISABLE * 86_400
    }

    /// The secrets that sign at `now`: the current one, and the previous one during a
    /// rotation's overlap.
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&WebhookSecret> {
        let mut secrets = vec![&self.secret];
        if let (Some(previous), Some(until)) = (&self.previous_secret, self.previous_secret_until) {
            if now < until {
                secrets.push(previous);
            }
        }
        secrets
    }
}

/// Sort-key prefix of an owner's webhook endpoints.
pub const WEBHOOK_PREFIX: &str = "WEBHOOK#";

/// `USER#{userId}` / `WEBHOOK#{webhookId}`.
pub fn primary_key(user: &UserId, webhook: &WebhookId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: format!("{WEBHOOK_PREFIX}{webhook}"),
    }
}

/// An endpoint's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["WEBHOOK", webhook]) => Some((|| {
            Ok(ItemKey::Webhook {
                user: UserId::parse(*user)?,
                webhook: WebhookId::parse(webhook)?,
            })
        })()),
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "webhook",
    pk: "USER#${userId}",
    sk: "WEBHOOK#${webhookId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_disabled_after_three_days_of_failures_not_before() {
        let since = Timestamp::parse_field("at", "2026-11-01T00:00:00Z").unwrap();
        let almost = since.plus_seconds(FAILING_DAYS_TO_DISABLE * 86_400 - 1);
        assert!(!WebhookItem::failed_long_enough(since, since));
        assert!(!WebhookItem::failed_long_enough(since, almost));
        assert!(WebhookItem::failed_long_enough(
            since,
            almost.plus_seconds(1)
        ));
    }
}
