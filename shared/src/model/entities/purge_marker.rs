//! A deleted device's purge marker: `PURGE#{userId}#{deviceId}` / `PURGE`, in the directory (GSI2).

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::{DirectoryEntry, IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;

/// A deleted device whose events the daily run still has to purge: `PURGE#{userId}#{deviceId}`
/// / `PURGE`, and in the directory (GSI2), which the daily run scans. Written by the deletion's
/// transaction; removed by the run once the device's events from before `deletedAt` are gone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PurgeMarkerItem {
    /// Owner of the deleted device (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// The deleted device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// When it was deleted: its events up to then are purged.
    pub deleted_at: Timestamp,
}

attributes!(PurgeMarkerItem {
    /// `deletedAt`.
    DELETED_AT = "deletedAt",
});

impl Entity for PurgeMarkerItem {
    const ENTITY_TYPE: EntityType = EntityType::PurgeMarker;
    fn item_key(&self) -> ItemKey {
        ItemKey::PurgeMarker {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        IndexKeys::directory_entry(
            &self.user_id,
            DirectoryEntry::Purge,
            Some(self.device_id.as_str()),
        )
    }
    const FIELDS_IN_KEY: bool = true;
}

/// `PURGE#{userId}#{deviceId}`: a deleted device's purge marker.
pub fn purge_pk(user: &UserId, device: &DeviceId) -> String {
    format!("PURGE#{user}#{device}")
}

/// Sort key of a purge marker.
pub const PURGE_SK: &str = "PURGE";

/// `PURGE#{userId}#{deviceId}` / `PURGE`.
pub fn primary_key(user: &UserId, device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: purge_pk(user, device),
        sk: PURGE_SK.to_string(),
    }
}

/// A purge marker's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["PURGE", user, device], ["PURGE"]) => key.matched(|| {
            Ok(ItemKey::PurgeMarker {
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
    entity_type: "purgeMarker",
    pk: "PURGE#${userId}#${deviceId}",
    sk: "PURGE",
    gsi1: None,
    gsi2: Some(("DIRECTORY#${directoryShard}", "PURGE#${userId}#${deviceId}")),
    gsi3: None,
};
