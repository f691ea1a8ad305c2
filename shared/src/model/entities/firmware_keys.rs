//! An owner's firmware signing keys: `FIRMWARE#{userId}` / `KEYS`, all in one item.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::entities::firmware::firmware_pk;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::UserId;
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};

/// An owner's Ed25519 public keys by device type (base64), all in one item: creating a
/// package reads its type's key in one GetItem, and device types are few.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareKeysItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Public key (base64) by device type.
    #[serde(default)]
    pub keys: BTreeMap<String, String>,
    /// Every change adds one (the condition of the next change).
    #[serde(default)]
    pub version: u64,
}

attributes!(FirmwareKeysItem {
    /// `keys`: public key by device type.
    KEYS = "keys",
    /// `version`.
    VERSION = "version",
});

impl Entity for FirmwareKeysItem {
    const ENTITY_TYPE: EntityType = EntityType::FirmwareKeys;
    fn item_key(&self) -> ItemKey {
        ItemKey::FirmwareKeys {
            user: self.user_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort key of an owner's signing keys.
pub const KEYS_SK: &str = "KEYS";

/// `FIRMWARE#{userId}` / `KEYS`.
pub fn primary_key(user: &UserId) -> PrimaryKey {
    PrimaryKey {
        pk: firmware_pk(user),
        sk: KEYS_SK.to_string(),
    }
}

/// A signing-key set's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["FIRMWARE", user], ["KEYS"]) => {
            Some(UserId::parse(*user).map(|user| ItemKey::FirmwareKeys { user }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "firmwareKeys",
    pk: "FIRMWARE#${userId}",
    sk: "KEYS",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
