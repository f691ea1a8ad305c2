//! A deleted device's registration, kept a day as a fence: the registration's key
//! (`DEVICE#{deviceId}` / `REGISTRATION`, [`super::registration`]), no template of its own.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::ids::DeviceId;
use crate::model::timestamp::Timestamp;

/// A deleted device's registration: `DEVICE#{deviceId}` / `REGISTRATION`, the id free to
/// register again. It fences off requests that are older than the deletion: a registration
/// attempt delayed in the network past its client's retries (whose request was answered
/// meanwhile) must not land after the device was deleted and bring it back. Registration
/// replaces it only when the request began after `releasedAt`; TTL removes it a day later.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasedRegistrationItem {
    /// The device id (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// When the device was deleted.
    pub released_at: Timestamp,
    /// Expiry, epoch seconds (`released_at` + [`ReleasedRegistrationItem::KEPT_SECONDS`]).
    pub ttl: i64,
}

impl ReleasedRegistrationItem {
    /// How long the fence is kept: far longer than any request can be delayed (DynamoDB
    /// refuses requests signed more than 15 minutes ago).
    pub const KEPT_SECONDS: i64 = 86_400;

    /// The fence left by deleting `device` at `now`.
    pub fn new(device: DeviceId, now: Timestamp) -> Self {
        Self {
            device_id: device,
            released_at: now,
            ttl: now.epoch_seconds() + Self::KEPT_SECONDS,
        }
    }
}

impl Entity for ReleasedRegistrationItem {
    const ENTITY_TYPE: EntityType = EntityType::ReleasedRegistration;
    fn item_key(&self) -> ItemKey {
        ItemKey::Registration {
            device: self.device_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

attributes!(ReleasedRegistrationItem {
    /// `releasedAt`.
    RELEASED_AT = "releasedAt",
    /// `ttl`.
    TTL = "ttl",
});
