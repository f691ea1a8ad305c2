//! A device's desired state (its twin's desired half): `USER#{userId}#DEVICE#{deviceId}` /
//! `TWIN#DESIRED`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::{event_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;

/// A device's desired state: `USER#{userId}#DEVICE#{deviceId}` / `TWIN#DESIRED`. In the
/// device's own partition, so a fleet-wide change writes a million different keys, never one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredStateItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// The document, as compact JSON text.
    pub document: String,
    /// 1 at the first write, +1 on each.
    pub version: u64,
    /// Last change.
    pub updated_at: Timestamp,
}

attributes!(DesiredStateItem {
    /// `document`.
    DOCUMENT = "document",
    /// `version`.
    VERSION = "version",
    /// `updatedAt`.
    UPDATED_AT = "updatedAt",
});

impl Entity for DesiredStateItem {
    const ENTITY_TYPE: EntityType = EntityType::DesiredState;
    fn item_key(&self) -> ItemKey {
        ItemKey::Desired {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort key of a device's desired state (in its event partition, beside its commands).
pub const DESIRED_SK: &str = "TWIN#DESIRED";
/// Sort-key prefix of the twin documents (desired and reported: one Query reads both).
pub const TWIN_PREFIX: &str = "TWIN#";

/// `USER#{userId}#DEVICE#{deviceId}` / `TWIN#DESIRED`.
pub fn primary_key(user: &UserId, device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: event_pk(user, device),
        sk: DESIRED_SK.to_string(),
    }
}

/// A desired state's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "DEVICE", device], ["TWIN", "DESIRED"]) => key.matched(|| {
            Ok(ItemKey::Desired {
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
    entity_type: "desiredState",
    pk: "USER#${userId}#DEVICE#${deviceId}",
    sk: "TWIN#DESIRED",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
