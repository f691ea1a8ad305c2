//! Where the scheduled worker is in rolling the summaries of devices that stopped reporting:
//! `ROLLS#SILENT` / `CHECKPOINT` (docs/design.md section 13, "A device gone silent").

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;

/// The worker's place in the silent devices' rolls, one item for the table. The worker looks
/// at each device once its `SEEN#` bucket falls before the day being rolled to: the devices
/// whose bucket starts before `through` were looked at; a look under way goes through the
/// devices' `SEEN#` entries (GSI1) partition by partition up to `target`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SilentRollItem {
    /// Every device whose `SEEN#` bucket starts before this was looked at (`None`: none yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<Timestamp>,
    /// The day start the look under way rolls devices to (`None`: no look under way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Timestamp>,
    /// Which of the `SEEN#` partitions (statuses and their shards, in a fixed order) the look
    /// is in.
    #[serde(default)]
    pub partition: u32,
    /// The last device looked at in that partition (where its next page starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<SeenPosition>,
}

/// A device's `SEEN#` entry on GSI1, as a page of that partition starts after it: its index
/// sort key and its state's primary key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenPosition {
    /// `GSI1SK`: `SEEN#{bucket}#{deviceId}`.
    pub seen_key: String,
    /// The live state's `PK`.
    pub pk: String,
    /// The live state's `SK`.
    pub sk: String,
}

attributes!(SilentRollItem {
    /// `through`.
    THROUGH = "through",
    /// `target`.
    TARGET = "target",
    /// `partition`.
    PARTITION = "partition",
    /// `after`.
    AFTER = "after",
});

impl Entity for SilentRollItem {
    const ENTITY_TYPE: EntityType = EntityType::SilentRoll;
    fn item_key(&self) -> ItemKey {
        ItemKey::SilentRoll {}
    }
}

/// `ROLLS#SILENT` / `CHECKPOINT`: read and written by the worker alone, a few times a day.
pub fn primary_key() -> PrimaryKey {
    PrimaryKey {
        pk: "ROLLS#SILENT".to_string(),
        sk: "CHECKPOINT".to_string(),
    }
}

/// The checkpoint's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ROLLS", "SILENT"], ["CHECKPOINT"]) => key.matched(|| Ok(ItemKey::SilentRoll {})),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "silentRoll",
    pk: "ROLLS#SILENT",
    sk: "CHECKPOINT",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
