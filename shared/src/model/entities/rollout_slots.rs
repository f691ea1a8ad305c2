//! How many of an owner's rollouts are running: `USER#{userId}` / `ROLLOUTS`, the cap's
//! conditional write.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::UserId;
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};

/// How many of an owner's rollouts are running: `USER#{userId}` / `ROLLOUTS`. A start adds
/// one in its transaction, conditioned on the count being under
/// [`crate::model::twin::MAX_RUNNING_ROLLOUTS`]; an end takes one off in the transaction
/// that deletes the rollout's running-list entry (conditioned on the entry), so the count is
/// always the number of the owner's entries on the running list and racing starts cannot
/// both pass the cap (issue 39 item 8). In the owner's partition, so an organization's
/// deletion takes it with the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSlotsItem {
    /// The owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Rollouts of the owner on the running list.
    #[serde(default)]
    pub running: u64,
}

attributes!(RolloutSlotsItem {
    /// `running`: the owner's rollouts on the running list.
    RUNNING = "running",
});

impl Entity for RolloutSlotsItem {
    const ENTITY_TYPE: EntityType = EntityType::RolloutSlots;
    fn item_key(&self) -> ItemKey {
        ItemKey::RolloutSlots {
            user: self.user_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort key of an owner's running-rollout count.
pub const ROLLOUT_SLOTS_SK: &str = "ROLLOUTS";

/// `USER#{userId}` / `ROLLOUTS`.
pub fn primary_key(user: &UserId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: ROLLOUT_SLOTS_SK.to_string(),
    }
}

/// A running-rollout count's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["ROLLOUTS"]) => {
            Some(UserId::parse(*user).map(|user| ItemKey::RolloutSlots { user }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "rolloutSlots",
    pk: "USER#${userId}",
    sk: "ROLLOUTS",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
