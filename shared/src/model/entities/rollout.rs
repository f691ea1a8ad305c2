//! A fleet-wide desired-state change: `USER#{userId}` / `ROLLOUT#{rolloutId}`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::firmware::FirmwarePlan;
use crate::model::ids::{DeviceId, RolloutId, UserId};
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::rollout_stages::StageGate;
use crate::model::timestamp::Timestamp;
use crate::model::twin::{
    is_zero, RolloutFailure, RolloutStatus, RolloutTarget, MAX_RECORDED_FAILURES,
};

/// A fleet-wide change: `USER#{userId}` / `ROLLOUT#{rolloutId}`. Either a JSON merge patch
/// applied to the desired state of every device of a tag or type, by the scheduled worker, a
/// page at a time, from `position` on; or a staged firmware rollout (`firmware`), which the
/// worker leaves alone until the firmware engine is built (docs/design.md section 15).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Its id (read back from the key).
    #[serde(skip_serializing)]
    pub rollout_id: RolloutId,
    /// Which devices.
    pub target: RolloutTarget,
    /// The merge patch, as compact JSON text (empty for a firmware rollout, which changes no
    /// desired state).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub patch: String,
    /// A staged firmware rollout's plan (issue 40): its package and stages. None for a
    /// desired-state change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwarePlan>,
    /// A firmware rollout's image as devices download it (from the package checked at the
    /// start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<crate::model::firmware::OfferedImage>,
    /// Where it is.
    pub status: RolloutStatus,
    /// The last device done, in the order the worker walks them (none before the first page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<DeviceId>,
    /// Devices whose desired state it changed so far.
    pub devices_updated: u64,
    /// Devices it could not change (the merge would break the document contract, or the write
    /// failed): counted, and the first [`MAX_RECORDED_FAILURES`] kept in `failures`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub devices_failed: u64,
    /// The first per-device failures, in the order the worker met them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<RolloutFailure>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When the last device got it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// When its owner cancelled it (`status` `cancelled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_at: Option<Timestamp>,
    /// A firmware rollout's open stages (none for a desired-state change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<StageGate>,
    /// Why it paused itself (`status` `paused`), with the counts, or that its owner paused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
}

impl RolloutItem {
    /// A rollout of `user` just started at `created_at`: `running`, nothing done yet; a
    /// firmware rollout (`firmware`: its plan and image, `patch` empty) with its first stage
    /// open.
    pub fn started(
        user_id: UserId,
        rollout_id: RolloutId,
        target: RolloutTarget,
        patch: String,
        firmware: Option<(FirmwarePlan, crate::model::firmware::OfferedImage)>,
        created_at: Timestamp,
    ) -> Self {
        let (firmware, image) = firmware.unzip();
        let gate = firmware.as_ref().map(|_| StageGate {
            open: 0,
            opened_at: vec![created_at],
            ..StageGate::default()
        });
        Self {
            user_id,
            rollout_id,
            target,
            patch,
            firmware,
            image,
            status: RolloutStatus::Running,
            position: None,
            devices_updated: 0,
            devices_failed: 0,
            failures: Vec::new(),
            created_at,
            finished_at: None,
            cancelled_at: None,
            gate,
            paused_reason: None,
        }
    }

    /// Counts a page's failures, keeping the first [`MAX_RECORDED_FAILURES`].
    pub fn record_failures(&mut self, failures: Vec<RolloutFailure>) {
        self.devices_failed += failures.len() as u64;
        let room = MAX_RECORDED_FAILURES.saturating_sub(self.failures.len());
        self.failures.extend(failures.into_iter().take(room));
    }
}

attributes!(RolloutItem {
    /// `target`.
    TARGET = "target",
    /// `patch`.
    PATCH = "patch",
    /// `firmware`.
    FIRMWARE = "firmware",
    /// `image`: a firmware rollout's image as devices download it.
    IMAGE = "image",
    /// `status`.
    STATUS = "status",
    /// `position`.
    POSITION = "position",
    /// `devicesUpdated`.
    DEVICES_UPDATED = "devicesUpdated",
    /// `devicesFailed`.
    DEVICES_FAILED = "devicesFailed",
    /// `failures`.
    FAILURES = "failures",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `finishedAt`.
    FINISHED_AT = "finishedAt",
    /// `cancelledAt`.
    CANCELLED_AT = "cancelledAt",
    /// `gate`: a firmware rollout's open stages.
    GATE = "gate",
    /// `pausedReason`.
    PAUSED_REASON = "pausedReason",
});

impl Entity for RolloutItem {
    const ENTITY_TYPE: EntityType = EntityType::Rollout;
    fn item_key(&self) -> ItemKey {
        ItemKey::Rollout {
            user: self.user_id.clone(),
            rollout: self.rollout_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort-key prefix of an owner's rollouts in the user partition (after `PROFILE`, so no
/// dashboard range reads one).
pub const ROLLOUT_PREFIX: &str = "ROLLOUT#";
/// `ROLLOUT#{rolloutId}`.
pub fn rollout_sk(rollout: &RolloutId) -> String {
    format!("{ROLLOUT_PREFIX}{rollout}")
}

/// `USER#{userId}` / `ROLLOUT#{rolloutId}`.
pub fn primary_key(user: &UserId, rollout: &RolloutId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: rollout_sk(rollout),
    }
}

/// A rollout's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["ROLLOUT", rollout]) => key.matched(|| {
            Ok(ItemKey::Rollout {
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
    entity_type: "rollout",
    pk: "USER#${userId}",
    sk: "ROLLOUT#${rolloutId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
