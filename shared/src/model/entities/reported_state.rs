//! A device's reported state (its twin's reported half): `USER#{userId}#DEVICE#{deviceId}` /
//! `TWIN#REPORTED`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::{event_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;

/// A device's reported state: `USER#{userId}#DEVICE#{deviceId}` / `TWIN#REPORTED`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportedStateItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// The document, as compact JSON text.
    pub document: String,
    /// The desired version the device says it applied.
    pub version: u64,
    /// When it reported.
    pub reported_at: Timestamp,
}

attributes!(ReportedStateItem {
    /// `document`.
    DOCUMENT = "document",
    /// `version`.
    VERSION = "version",
    /// `reportedAt`.
    REPORTED_AT = "reportedAt",
});

impl Entity for ReportedStateItem {
    const ENTITY_TYPE: EntityType = EntityType::ReportedState;
    fn item_key(&self) -> ItemKey {
        ItemKey::Reported {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort key of a device's reported state.
pub const REPORTED_SK: &str = "TWIN#REPORTED";

/// `USER#{userId}#DEVICE#{deviceId}` / `TWIN#REPORTED`.
pub fn primary_key(user: &UserId, device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: event_pk(user, device),
        sk: REPORTED_SK.to_string(),
    }
}

/// A reported state's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "DEVICE", device], ["TWIN", "REPORTED"]) => key.matched(|| {
            Ok(ItemKey::Reported {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "reportedState",
    pk: "USER#${userId}#DEVICE#${deviceId}",
    sk: "TWIN#REPORTED",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
