//! A device in its owner's partition: `USER#{userId}` / `DEVICE#{deviceId}`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, DeviceType, Tag, UserId};
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::offline::OfflineDetection;
use crate::model::status::DeviceStatus;
use crate::model::timestamp::Timestamp;

/// A device: `USER#{userId}` / `DEVICE#{deviceId}`. What its owner set (name, type, status,
/// tags) and where its live state is placed; written only by its owner, so it never heats
/// the owner's partition. The readings are on its [`DeviceStateItem`](crate::model::entities::device_state::DeviceStateItem).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceItem {
    /// Owner (stored once, in the key; read back from there).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device id (stored once, in the key; read back from there).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// Display name.
    pub name: String,
    /// Device type (`thermostat`).
    #[serde(rename = "type")]
    pub device_type: DeviceType,
    /// Status.
    pub status: DeviceStatus,
    /// Tags, sorted.
    pub tags: Vec<Tag>,
    /// Optimistic-locking version; 1 at registration, +1 on every update.
    pub version: u64,
    /// +1 whenever name, type or tags change: the copies on tag links, the registration and
    /// the live state are brought in step under this number (see `ops::devices`).
    pub sync_version: u64,
    /// The tags that have a tag-link item right now.
    pub linked_tags: Vec<Tag>,
    /// The owner's live-state partition this device was placed on at registration (0: the
    /// user partition). Never changes. Stored as `shard` (its name before index shards and
    /// owner partitions were told apart).
    #[serde(default, rename = "shard")]
    pub partition: u32,
    /// Registration time.
    pub created_at: Timestamp,
    /// Last update by the owner.
    pub updated_at: Timestamp,
    /// Set while a deletion is in progress; such a device is gone for every reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting_at: Option<Timestamp>,
    /// How often the device promises to report (offline detection); `None`: learned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_every_seconds: Option<u64>,
    /// How closely its silence is watched; stored only when tight (a standard device's item
    /// is as it was).
    #[serde(default, skip_serializing_if = "OfflineDetection::is_standard")]
    pub offline_detection: OfflineDetection,
}

attributes!(DeviceItem {
    /// `name`.
    NAME = "name",
    /// `type`.
    DEVICE_TYPE = "type",
    /// `status`.
    STATUS = "status",
    /// `tags`.
    TAGS = "tags",
    /// `version`.
    VERSION = "version",
    /// `syncVersion`.
    SYNC_VERSION = "syncVersion",
    /// `linkedTags`.
    LINKED_TAGS = "linkedTags",
    /// `shard`: the owner's live-state partition.
    PARTITION = "shard",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `updatedAt`.
    UPDATED_AT = "updatedAt",
    /// `deletingAt`: set while a deletion is in progress (readers treat the device as gone).
    DELETING_AT = "deletingAt",
    /// `reportEverySeconds`: the declared reporting interval.
    REPORT_EVERY_SECONDS = "reportEverySeconds",
    /// `offlineDetection`: `tight` when the owner asked for it (absent: standard).
    OFFLINE_DETECTION = "offlineDetection",
});

impl Entity for DeviceItem {
    const ENTITY_TYPE: EntityType = EntityType::Device;
    fn item_key(&self) -> ItemKey {
        ItemKey::Device {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
        }
    }
    /// Owner and device come from the key (every dashboard reads device items: 66 bytes
    /// fewer each); items written with them as attributes read the same.
    const FIELDS_IN_KEY: bool = true;
}

/// Sort-key prefix of device items in the user partition.
pub const DEVICE_PREFIX: &str = "DEVICE#";

/// `DEVICE#{deviceId}`: the device's sort key in its owner's partition.
pub fn device_sk(device: &DeviceId) -> String {
    format!("{DEVICE_PREFIX}{device}")
}

impl ItemKey {
    /// A device's key in its owner's partition.
    pub fn device(user: &UserId, device: &DeviceId) -> Self {
        ItemKey::Device {
            user: user.clone(),
            device: device.clone(),
        }
    }
}

/// `USER#{userId}` / `DEVICE#{deviceId}`.
pub fn primary_key(user: &UserId, device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: device_sk(device),
    }
}

/// A device's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["DEVICE", device]) => key.matched(|| {
            Ok(ItemKey::Device {
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
    entity_type: "device",
    pk: "USER#${userId}",
    sk: "DEVICE#${deviceId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
