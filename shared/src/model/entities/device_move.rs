//! A device move whose history is still being copied: `MOVES#RUNNING` / `{deviceId}`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;

/// Which part of a moved device's history is being copied, in the order they are copied:
/// what can change under a copy first (alarms, commands, summaries, twin), the immutable
/// events last (docs/design.md, "Moving a device").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MovePhase {
    /// The alarm partition `ALARM#{owner}#{deviceId}`: history and open pointers.
    Alarms,
    /// The device's commands (`COMMAND#...`).
    Commands,
    /// Summary items, twin documents and type marks (sort keys from `SERIES#` on).
    Summaries,
    /// The events (`EVENT#...`).
    Events,
}

impl MovePhase {
    /// The phase after this one (`None` after the events: the move is done).
    pub fn next(self) -> Option<MovePhase> {
        match self {
            MovePhase::Alarms => Some(MovePhase::Commands),
            MovePhase::Commands => Some(MovePhase::Summaries),
            MovePhase::Summaries => Some(MovePhase::Events),
            MovePhase::Events => None,
        }
    }
}

/// A device moved to another owner whose history is not all copied yet: `MOVES#RUNNING` /
/// `{deviceId}`, what the scheduled rollout worker lists to continue it. Written by the move's
/// transaction (so a device has at most one move running), rewritten with the progress when a
/// run stops, deleted when the last item is copied: a few writes per move.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceMoveItem {
    /// The device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// The owner key it left.
    pub from_user_id: UserId,
    /// The owner key it moved to.
    pub to_user_id: UserId,
    /// Its live-state partition at the new owner (alarms carry it in their owner-list key).
    #[serde(rename = "shard")]
    pub partition: u32,
    /// When the move was made.
    pub started_at: Timestamp,
    /// The part of the history being copied.
    pub phase: MovePhase,
    /// The source sort key the phase has copied up to (a Query's start key), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_after: Option<String>,
    /// Items copied so far.
    pub items_moved: u64,
    /// Until when a run holds the move (another run leaves it alone until then).
    pub lease_until: Timestamp,
    /// The moved registration's `createdAt`: a run copies only while the id's registration
    /// is still this one at the new owner (a move made before this was kept has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_at: Option<Timestamp>,
    /// Set when a run found the device deleted (or its id registered again) at the new
    /// owner: the copy stops and what is left at the old owner is deleted, not copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_at: Option<Timestamp>,
}

attributes!(DeviceMoveItem {
    /// `fromUserId`.
    FROM_USER_ID = "fromUserId",
    /// `toUserId`.
    TO_USER_ID = "toUserId",
    /// `shard`.
    PARTITION = "shard",
    /// `startedAt`.
    STARTED_AT = "startedAt",
    /// `phase`.
    PHASE = "phase",
    /// `resumeAfter`.
    RESUME_AFTER = "resumeAfter",
    /// `itemsMoved`.
    ITEMS_MOVED = "itemsMoved",
    /// `leaseUntil`.
    LEASE_UNTIL = "leaseUntil",
    /// `registeredAt`.
    REGISTERED_AT = "registeredAt",
    /// `cancelledAt`.
    CANCELLED_AT = "cancelledAt",
});

impl Entity for DeviceMoveItem {
    const ENTITY_TYPE: EntityType = EntityType::DeviceMove;
    fn item_key(&self) -> ItemKey {
        ItemKey::DeviceMove {
            device: self.device_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Partition of the running moves, which the scheduled worker lists (a few writes per move,
/// read once a minute).
pub const RUNNING_MOVES_PK: &str = "MOVES#RUNNING";

/// `MOVES#RUNNING` / `{deviceId}`.
pub fn primary_key(device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: RUNNING_MOVES_PK.to_string(),
        sk: device.to_string(),
    }
}

/// A running move's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["MOVES", "RUNNING"], [device]) => key.matched(|| {
            Ok(ItemKey::DeviceMove {
                device: DeviceId::parse(*device)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "deviceMove",
    pk: "MOVES#RUNNING",
    sk: "${deviceId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
