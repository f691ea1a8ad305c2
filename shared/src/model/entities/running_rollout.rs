//! A rollout the scheduled worker has not finished: `ROLLOUTS#RUNNING` / `{userId}#{rolloutId}`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::firmware::FirmwareId;
use crate::model::ids::{RolloutId, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};

/// A rollout not finished yet: `ROLLOUTS#RUNNING` / `{userId}#{rolloutId}`, what the
/// scheduled worker lists (one Query a minute). Written when the rollout is created, deleted
/// when it is done: a key written twice per rollout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningRolloutItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// The rollout (read back from the key).
    #[serde(skip_serializing)]
    pub rollout_id: RolloutId,
    /// The package of a firmware rollout: so whether a package is in use is one Query of the
    /// owner's entries (`ops::firmware::used_by_running_rollout`), never a read of each rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware_id: Option<FirmwareId>,
}

attributes!(RunningRolloutItem {
    /// `firmwareId`.
    FIRMWARE_ID = "firmwareId",
});

impl RunningRolloutItem {
    /// The entry of `rollout` on the running list.
    pub fn of(rollout: &crate::model::entities::rollout::RolloutItem) -> Self {
        Self {
            user_id: rollout.user_id.clone(),
            rollout_id: rollout.rollout_id.clone(),
            firmware_id: rollout.firmware.as_ref().map(|f| f.firmware_id.clone()),
        }
    }
}

impl Entity for RunningRolloutItem {
    const ENTITY_TYPE: EntityType = EntityType::RunningRollout;
    fn item_key(&self) -> ItemKey {
        ItemKey::RunningRollout {
            user: self.user_id.clone(),
            rollout: self.rollout_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Partition of the running rollouts, which the scheduled worker lists (written twice per
/// rollout, read once a minute).
pub const RUNNING_ROLLOUTS_PK: &str = "ROLLOUTS#RUNNING";
/// `{userId}#`: the start of every running-list key of `user`'s rollouts (they follow it in
/// creation order, the rollout ids being time-ordered).
pub fn running_rollout_prefix(user: &UserId) -> String {
    format!("{user}#")
}

/// `ROLLOUTS#RUNNING` / `{userId}#{rolloutId}`.
pub fn primary_key(user: &UserId, rollout: &RolloutId) -> PrimaryKey {
    PrimaryKey {
        pk: RUNNING_ROLLOUTS_PK.to_string(),
        sk: format!("{}{rollout}", running_rollout_prefix(user)),
    }
}

/// A running rollout's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ROLLOUTS", "RUNNING"], [user, rollout]) => key.matched(|| {
            Ok(ItemKey::RunningRollout {
                user: UserId::parse(*user)?,
                rollout: RolloutId::parse(*rollout)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "runningRollout",
    pk: "ROLLOUTS#RUNNING",
    sk: "${userId}#${rolloutId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
