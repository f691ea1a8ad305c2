//! Webhooks (issue 41): an owner's HTTPS endpoints, the events they subscribe to, their
//! signing secrets, and the rules a target URL must meet ([`target`]) and a delivery's
//! signature ([`signature`], the Standard Webhooks scheme).

pub mod signature;
pub mod slack;
pub mod target;

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::model::error::{FleetError, ValidationError};
use crate::model::timestamp::Timestamp;

/// The most event names one endpoint subscribes to (every name there is, with room).
pub const MAX_EVENTS: usize = 16;
/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 256;
/// The longest URL.
pub const MAX_URL_CHARS: usize = 2048;
/// The most endpoints an owner keeps.
pub const MAX_WEBHOOKS_PER_OWNER: usize = 16;
/// Deliveries an endpoint is sent per second when its owner set no `rateLimit`.
pub const DEFAULT_RATE_LIMIT: u32 = 50;
/// The most an owner may set an endpoint's `rateLimit` to (per second).
pub const MAX_RATE_LIMIT: u32 = 1000;
/// How long the previous secret keeps signing after a rotation (Standard Webhooks: both
/// signatures in `webhook-signature` meanwhile).
pub const ROTATION_OVERLAP_SECONDS: i64 = 24 * 3600;
/// Random bytes in a secret (the specification asks for 24 to 64).
pub const SECRET_BYTES: usize = 32;
/// The prefix of a secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// The event names an endpoint may subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WebhookEvent {
    /// An alarm was raised.
    #[serde(rename = "alarm.raised")]
    AlarmRaised,
    /// An alarm cleared.
    #[serde(rename = "alarm.cleared")]
    AlarmCleared,
    /// An alarm was acknowledged.
    #[serde(rename = "alarm.acknowledged")]
    AlarmAcknowledged,
    /// A device went silent past its interval.
    #[serde(rename = "device.offline")]
    DeviceOffline,
    /// A silent device was heard again.
    #[serde(rename = "device.online")]
    DeviceOnline,
    /// The owner's test delivery.
    #[serde(rename = "webhook.test")]
    WebhookTest,
    /// The confirmation every endpoint gets first.
    #[serde(rename = "webhook.confirm")]
    WebhookConfirm,
    /// An endpoint of the owner's was disabled after failing for days (sent to the owner's
    /// other endpoints that subscribe to it, and kept in the disabled one's log).
    #[serde(rename = "webhook.disabled")]
    WebhookDisabled,
}

impl WebhookEvent {
    /// Every name, as the API spells it.
    pub const ALL: [WebhookEvent; 8] = [
        WebhookEvent::AlarmRaised,
        WebhookEvent::AlarmCleared,
        WebhookEvent::AlarmAcknowledged,
        WebhookEvent::DeviceOffline,
        WebhookEvent::DeviceOnline,
        WebhookEvent::WebhookTest,
        WebhookEvent::WebhookConfirm,
        WebhookEvent::WebhookDisabled,
    ];

    /// The API's name (`alarm.raised`).
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::AlarmRaised => "alarm.raised",
            WebhookEvent::AlarmCleared => "alarm.cleared",
            WebhookEvent::AlarmAcknowledged => "alarm.acknowledged",
            WebhookEvent::DeviceOffline => "device.offline",
            WebhookEvent::DeviceOnline => "device.online",
            WebhookEvent::WebhookTest => "webhook.test",
            WebhookEvent::WebhookConfirm => "webhook.confirm",
            WebhookEvent::WebhookDisabled => "webhook.disabled",
        }
    }

    /// The event named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// `events` of a request: a non-empty list of known names, at most [`MAX_EVENTS`], each
    /// once (a repeat is dropped). Anything else is a 400 naming `events`.
    pub fn parse_list(value: &serde_json::Value) -> Result<Vec<Self>, ValidationError> {
        let list = value
            .as_array()
            .ok_or_else(|| ValidationError::new("events", "must be a list of event names"))?;
        if list.is_empty() || list.len() > MAX_EVENTS {
            return Err(ValidationError::new(
                "events",
                format!("must name 1 to {MAX_EVENTS} events"),
            ));
        }
        let mut events = Vec::with_capacity(list.len());
        for (i, name) in list.iter().enumerate() {
            let event = name.as_str().and_then(Self::parse).ok_or_else(|| {
                ValidationError::new(
                    "events",
                    format!(
                        "item {i} is not an event name (one of {})",
                        Self::ALL.map(Self::as_str).join(", ")
                    ),
                )
            })?;
            if !events.contains(&event) {
                events.push(event);
            }
        }
        Ok(events)
    }
}

impl fmt::Display for WebhookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The shape of a delivery's body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WebhookFormat {
    /// The event as JSON (`{"type", "timestamp", "data"}`).
    #[default]
    Standard,
    /// Slack's incoming-webhook shape (`{"text"}`, [`slack::slack_message`]), signed like the
    /// standard one.
    Slack,
}

impl WebhookFormat {
    /// `format` of a request: `standard` or `slack`; a 400 naming `format` otherwise.
    pub fn parse(value: &serde_json::Value) -> Result<Self, ValidationError> {
        serde_json::from_value(value.clone())
            .map_err(|_| ValidationError::new("format", "must be standard or slack"))
    }
}

/// Defines a prefixed random id: `{prefix}` + URL-safe base64 of 128 random bits.
macro_rules! webhook_id {
    ($(#[$doc:meta])* $name:ident, prefix = $prefix:literal, field = $field:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A new random id.
            pub fn generate() -> Result<Self, FleetError> {
                Ok(Self(format!("{}{}", $prefix, crate::model::token::random_id()?)))
            }

            /// `value`, if it has the shape of one (else a 400 naming the field).
            pub fn parse(value: &str) -> Result<Self, ValidationError> {
                let rest = value.strip_prefix($prefix).unwrap_or("");
                if rest.is_empty()
                    || rest.len() > 43
                    || !rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(ValidationError::new($field, "is not a valid id"));
                }
                Ok(Self(value.to_string()))
            }

            /// The id.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::parse(&raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

webhook_id!(
    /// An endpoint's id (`wh_...`).
    WebhookId, prefix = "wh_", field = "webhookId"
);
webhook_id!(
    /// One message's id (`msg_...`): the `webhook-id` header, the same on every retry.
    DeliveryId, prefix = "msg_", field = "deliveryId"
);

impl DeliveryId {
    /// A new id for a delivery made at `at`: `msg_` + [`time_prefix`] + 128 random bits, so
    /// an endpoint's log items (keyed by it) sort by creation time and the log reads newest
    /// first with one Query (design.md section 16, "The delivery log").
    pub fn generate_at(at: Timestamp) -> Result<Self, FleetError> {
        Ok(Self(format!(
            "msg_{}{}",
            time_prefix(at),
            crate::model::token::random_id()?
        )))
    }

    /// The id of `notice`'s delivery to `webhook`, the notice being of `at` (the
    /// transition's own time, read from the alarm item): the same for every run that makes it
    /// (a stream record retried, a batch replayed), so making it twice writes one log item
    /// and the receiver sees one `webhook-id`. [`time_prefix`] then the first 32 characters
    /// (192 bits) of URL-safe base64 of SHA-256 over both.
    pub fn of_notice(webhook: &WebhookId, notice: &str, at: Timestamp) -> Self {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use sha2::{Digest, Sha256};
        let digest = Sha256::new()
            .chain_update(webhook.0.as_bytes())
            .chain_update([0u8])
            .chain_update(notice.as_bytes())
            .finalize();
        let hash = URL_SAFE_NO_PAD.encode(digest);
        Self(format!("msg_{}{}", time_prefix(at), &hash[..32]))
    }
}

/// A delivery id's time part: the epoch milliseconds as 11 lower-case hex digits (fixed
/// width, so the text sorts as the time does, until the year 2527).
pub fn time_prefix(at: Timestamp) -> String {
    format!("{:011x}", at.epoch_millis().clamp(0, 0xfff_ffff_ffff))
}

/// A signing secret, `whsec_` + base64 of [`SECRET_BYTES`] random bytes. Its `Debug` never
/// shows it, so no log line carries one by accident.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// A new random secret.
    pub fn generate() -> Result<Self, FleetError> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(FleetError::internal)?;
        Ok(Self(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))))
    }

    /// The secret as the owner sees it once (`whsec_...`).
    pub fn reveal(&self) -> &str {
        &self.0
    }

    /// The HMAC key: the base64-decoded part after `whsec_`.
    pub fn key(&self) -> Result<Vec<u8>, FleetError> {
        let encoded = self
            .0
            .strip_prefix(SECRET_PREFIX)
            .ok_or_else(|| FleetError::internal("a stored webhook secret without whsec_"))?;
        STANDARD
            .decode(encoded)
            .map_err(|_| FleetError::internal("a stored webhook secret that is not base64"))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(redacted)")
    }
}

/// A confirmation token (`whconf_...`): what a `webhook.confirm` delivery carries and the
/// endpoint echoes (or the owner posts) to confirm it.
pub fn confirmation_token() -> Result<String, FleetError> {
    Ok(format!("whconf_{}", crate::model::token::random_id()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_lists_accept_known_names_and_name_events_otherwise() {
        let events = WebhookEvent::parse_list(&json!(["alarm.raised", "device.offline"])).unwrap();
        assert_eq!(
            events,
            [WebhookEvent::AlarmRaised, WebhookEvent::DeviceOffline]
        );
        for bad in [
            json!([]),
            json!("alarm.raised"),
            json!(["alarm.exploded"]),
            json!([1]),
            json!(vec!["alarm.raised"; MAX_EVENTS + 1]),
        ] {
            assert_eq!(WebhookEvent::parse_list(&bad).unwrap_err().field, "events");
        }
        assert_eq!(
            WebhookEvent::parse_list(&json!(["alarm.raised", "alarm.raised"])).unwrap(),
            [WebhookEvent::AlarmRaised]
        );
    }

    #[test]
    fn secrets_are_whsec_base64_of_32_random_bytes_and_never_debug_printed() {
        let a = WebhookSecret::generate().unwrap();
        let b = WebhookSecret::generate().unwrap();
        assert_ne!(a, b);
        assert!(a.reveal().starts_with("whsec_"));
        assert_eq!(a.key().unwrap().len(), SECRET_BYTES);
        assert!(!format!("{a:?}").contains(a.reveal()));
    }

    #[test]
    fn ids_round_trip_and_refuse_other_shapes() {
        let id = WebhookId::generate().unwrap();
        assert_eq!(WebhookId::parse(id.as_str()).unwrap(), id);
        for bad in [
            "",
            "wh_",
            "msg_abc",
            "wh_a#b",
            &format!("wh_{}", "a".repeat(44)),
        ] {
            assert!(WebhookId::parse(bad).is_err(), "{bad}");
        }
    }
}
