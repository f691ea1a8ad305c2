//! An owner's fleet: `USER#{userId}` / `FLEET`, and in the directory (GSI2).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceType, UserId};
use crate::model::keys::{user_pk, DirectoryEntry, IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::shard::ShardCounts;

/// An owner's fleet: `USER#{userId}` / `FLEET`, and in the directory (GSI2). Registration
/// and deletion keep `devices`; `shards` is how many live-state partitions the owner's
/// devices are placed on, and only ever grows (see `ops::devices::register::register_device`).
/// It also holds the owner's shortened raw retentions per device type (`PUT /me/retention`),
/// because registration reads this item anyway: a new device copies its type's setting with
/// no extra read. An owner who set a retention before registering anything has a fleet item
/// with neither `shards` nor `devices` (and no directory entry) until the first registration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Live-state partitions (1, 2, 4, ...), stored as `shards`; 0 before the first
    /// registration.
    #[serde(default, rename = "shards")]
    pub partitions: u32,
    /// Registered devices.
    #[serde(default)]
    pub devices: u64,
    /// Raw retention in days per device type the owner shortened (absent: the template's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_retention: BTreeMap<DeviceType, u32>,
    /// Bumped by every retention change; copied onto registrations with the setting, so the
    /// newest change wins on each of them whatever order concurrent changes land in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_version: Option<u64>,
}

attributes!(FleetItem {
    /// `shards`: the owner's live-state partitions.
    PARTITIONS = "shards",
    /// `devices`.
    DEVICES = "devices",
    /// `rawRetention`: days per device type.
    RAW_RETENTION = "rawRetention",
    /// `retentionVersion`.
    RETENTION_VERSION = "retentionVersion",
});

impl Entity for FleetItem {
    const ENTITY_TYPE: EntityType = EntityType::Fleet;
    fn item_key(&self) -> ItemKey {
        ItemKey::Fleet {
            user: self.user_id.clone(),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        IndexKeys::directory(&self.user_id, DirectoryEntry::Fleet)
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort key of an owner's fleet item.
pub const FLEET_SK: &str = "FLEET";

impl ItemKey {
    /// An owner's fleet item key.
    pub fn fleet(user: &UserId) -> Self {
        ItemKey::Fleet { user: user.clone() }
    }
}

/// `USER#{userId}` / `FLEET`.
pub fn primary_key(user: &UserId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: FLEET_SK.to_string(),
    }
}

/// A fleet's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["FLEET"]) => {
            Some(UserId::parse(*user).map(|user| ItemKey::Fleet { user }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "fleet",
    pk: "USER#${userId}",
    sk: "FLEET",
    gsi1: None,
    gsi2: Some(("DIRECTORY#${directoryShard}", "FLEET#${userId}")),
    gsi3: None,
};
