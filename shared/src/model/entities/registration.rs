//! A device id's table-wide registration: `DEVICE#{deviceId}` / `REGISTRATION`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, DeviceType, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;
use crate::model::token::token_matches;

/// The table-wide registration of a device id: `DEVICE#{deviceId}` / `REGISTRATION`.
/// Its existence makes the id unique; ingestion authenticates devices against it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationItem {
    /// Device id.
    pub device_id: DeviceId,
    /// Owner.
    pub user_id: UserId,
    /// Hex SHA-256 of the device token; the token itself is never stored.
    pub token_sha256: String,
    /// The digest a rotation replaced, accepted until `previous_token_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_token_sha256: Option<String>,
    /// End of the replaced token's overlap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_token_until: Option<Timestamp>,
    /// Set when the owner revoked the device's tokens: none is accepted until a rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// Copy of the device's name (copied onto events at ingest).
    pub device_name: String,
    /// Copy of the device's type (copied onto events at ingest).
    pub device_type: DeviceType,
    /// The owner's live-state partition the device is placed on (ingestion reads it here),
    /// stored as `shard`.
    #[serde(default, rename = "shard")]
    pub partition: u32,
    /// Registration time.
    pub created_at: Timestamp,
    /// The owner's raw retention for the device's type, when shortened (`PUT /me/retention`,
    /// copied from the fleet item); absent: the template's `RETENTION_DAYS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_retention_days: Option<u32>,
    /// The fleet item's `retentionVersion` the copy above came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_version: Option<u64>,
}

attributes!(RegistrationItem {
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `userId`.
    USER_ID = "userId",
    /// `tokenSha256`.
    TOKEN_SHA256 = "tokenSha256",
    /// `previousTokenSha256`.
    PREVIOUS_TOKEN_SHA256 = "previousTokenSha256",
    /// `previousTokenUntil`.
    PREVIOUS_TOKEN_UNTIL = "previousTokenUntil",
    /// `revokedAt`.
    REVOKED_AT = "revokedAt",
    /// `deviceName`.
    DEVICE_NAME = "deviceName",
    /// `deviceType`.
    DEVICE_TYPE = "deviceType",
    /// `shard`: the owner's live-state partition.
    PARTITION = "shard",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `rawRetentionDays`.
    RAW_RETENTION_DAYS = "rawRetentionDays",
    /// `retentionVersion`.
    RETENTION_VERSION = "retentionVersion",
});

impl RegistrationItem {
    /// Days this device's events are kept: its owner's setting for its type, never past
    /// `template_days` (`RETENTION_DAYS`; a setting made under a longer template retention is
    /// capped by a shorter one).
    pub fn raw_retention_days(&self, template_days: u32) -> u32 {
        self.raw_retention_days
            .map_or(template_days, |days| days.clamp(1, template_days))
    }

    /// Whether `token` authenticates the device at `now`: its current token, or the one a
    /// rotation replaced while its overlap lasts; never after a revocation. Both digests are
    /// always compared, in constant time, so timing tells nothing about which matched.
    pub fn accepts(&self, token: &str, now: Timestamp) -> bool {
        let current = token_matches(token, &self.token_sha256);
        let previous = match (&self.previous_token_sha256, self.previous_token_until) {
            (Some(digest), Some(until)) => token_matches(token, digest) & (now < until),
            _ => false,
        };
        (current | previous) & self.revoked_at.is_none()
    }
}

impl Entity for RegistrationItem {
    const ENTITY_TYPE: EntityType = EntityType::Registration;
    fn item_key(&self) -> ItemKey {
        ItemKey::Registration {
            device: self.device_id.clone(),
        }
    }
}

/// Sort key of the registration item.
pub const REGISTRATION_SK: &str = "REGISTRATION";

/// `DEVICE#{deviceId}`: the registration partition.
pub fn registration_pk(device: &DeviceId) -> String {
    format!("DEVICE#{device}")
}

impl ItemKey {
    /// A device id's table-wide registration key.
    pub fn registration(device: &DeviceId) -> Self {
        ItemKey::Registration {
            device: device.clone(),
        }
    }
}

/// `DEVICE#{deviceId}` / `REGISTRATION` (a released registration keeps the same key).
pub fn primary_key(device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: registration_pk(device),
        sk: REGISTRATION_SK.to_string(),
    }
}

/// A registration's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["DEVICE", device], ["REGISTRATION"]) => {
            Some(DeviceId::parse(*device).map(|device| ItemKey::Registration { device }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "registration",
    pk: "DEVICE#${deviceId}",
    sk: "REGISTRATION",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
