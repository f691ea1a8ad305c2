//! A device's part in a staged firmware rollout (issue 40): `USER#{userId}#DEVICE#{deviceId}` /
//! `FIRMWARE#OFFER`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::firmware::FirmwareId;
use crate::model::ids::{DeviceId, RolloutId, UserId};
use crate::model::keys::{event_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::rollout_progress::{FailureClass, OfferPhase};
use crate::model::timestamp::Timestamp;

/// What a firmware rollout offered one device and how far the device got:
/// `USER#{userId}#DEVICE#{deviceId}` / `FIRMWARE#OFFER`. Written by the rollout worker when the
/// device's stage is open (with the live state's marker, `firmwareRollout`, and the stage's
/// `offered` count, in one transaction), then moved on by the device's own check-ins. In the
/// device's partition, beside its twin documents: a million devices are a million keys, and a
/// deleted device's purge takes it. It carries everything the offer needs (the checked
/// package's digest, size, signature, object and version), so a check-in presigns the download
/// without reading the package. One per device: a later rollout replaces a finished one's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareOfferItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// The rollout that offers it.
    pub rollout_id: RolloutId,
    /// The package.
    pub firmware_id: FirmwareId,
    /// The package's version: the one the device must report running.
    pub version: String,
    /// The package's SHA-256 (as the service computed it).
    pub sha256: String,
    /// The image's size in bytes.
    pub size: u64,
    /// The package's Ed25519 signature of its digest, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Where the image is in the bucket.
    pub object_key: String,
    /// The object version the service checked (a download is presigned for exactly it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_version: Option<String>,
    /// The device's stage (index into the plan's stages).
    pub stage: u32,
    /// How far the device got.
    pub phase: OfferPhase,
    /// The version the device said it ran before it started on the offer (a rollback is
    /// reporting it again after installing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// Check-ins since it first reported the new version (`phase` `updated`).
    #[serde(default)]
    pub healthy_check_ins: u32,
    /// Why it failed (`phase` `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    /// The device's own reason, bounded ([`crate::model::rollout_progress::MAX_REASON_LEN`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Offers of this rollout made to the device: 1, and one more for each retry after a
    /// failure ([`crate::model::rollout_progress::FailureClass::retries`]).
    #[serde(default = "first_attempt")]
    pub attempts: u32,
    /// When the worker offered it (the last time, after a retry).
    pub offered_at: Timestamp,
    /// The device's last check-in that moved it (the offer's time before any).
    pub updated_at: Timestamp,
}

attributes!(FirmwareOfferItem {
    /// `rolloutId`.
    ROLLOUT_ID = "rolloutId",
    /// `firmwareId`.
    FIRMWARE_ID = "firmwareId",
    /// `version`: the target version.
    VERSION = "version",
    /// `sha256`.
    SHA256 = "sha256",
    /// `size`.
    SIZE = "size",
    /// `signature`.
    SIGNATURE = "signature",
    /// `objectKey`.
    OBJECT_KEY = "objectKey",
    /// `objectVersion`.
    OBJECT_VERSION = "objectVersion",
    /// `stage`.
    STAGE = "stage",
    /// `offeredAt`.
    OFFERED_AT = "offeredAt",
    /// `phase`.
    PHASE = "phase",
    /// `fromVersion`.
    FROM_VERSION = "fromVersion",
    /// `healthyCheckIns`.
    HEALTHY_CHECK_INS = "healthyCheckIns",
    /// `failure`.
    FAILURE = "failure",
    /// `reason`.
    REASON = "reason",
    /// `updatedAt`.
    UPDATED_AT = "updatedAt",
    /// `attempts`.
    ATTEMPTS = "attempts",
});

/// An offer stored before retries existed was its device's first.
fn first_attempt() -> u32 {
    1
}

impl Entity for FirmwareOfferItem {
    const ENTITY_TYPE: EntityType = EntityType::FirmwareOffer;
    fn item_key(&self) -> ItemKey {
        ItemKey::FirmwareOffer {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort key of a device's firmware offer (not under `TWIN#`, so the twin documents' Query
/// never meets it).
pub const FIRMWARE_OFFER_SK: &str = "FIRMWARE#OFFER";

/// `USER#{userId}#DEVICE#{deviceId}` / `FIRMWARE#OFFER`.
pub fn primary_key(user: &UserId, device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: event_pk(user, device),
        sk: FIRMWARE_OFFER_SK.to_string(),
    }
}

/// A firmware offer's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "DEVICE", device], ["FIRMWARE", "OFFER"]) => key.matched(|| {
            Ok(ItemKey::FirmwareOffer {
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
    entity_type: "firmwareOffer",
    pk: "USER#${userId}#DEVICE#${deviceId}",
    sk: "FIRMWARE#OFFER",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
