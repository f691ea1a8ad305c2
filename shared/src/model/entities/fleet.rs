//! An owner's fleet: `USER#{userId}` / `FLEET`, and in the directory (GSI2).

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::UserId;
use crate::model::keys::{user_pk, DirectoryEntry, IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::shard::ShardCounts;

/// An owner's fleet: `USER#{userId}` / `FLEET`, and in the directory (GSI2). Registration
/// and deletion keep `devices`; `shards` is how many live-state partitions the owner's
/// devices are placed on, and only ever grows (see `ops::devices::register::register_device`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Live-state partitions (1, 2, 4, ...), stored as `shards`.
    #[serde(rename = "shards")]
    pub partitions: u32,
    /// Registered devices.
    pub devices: u64,
}

attributes!(FleetItem {
    /// `shards`: the owner's live-state partitions.
    PARTITIONS = "shards",
    /// `devices`.
    DEVICES = "devices",
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
