//! A firmware package (issue 40): `FIRMWARE#{userId}` / `PACKAGE#{firmwareId}`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::firmware::{FirmwareId, FirmwarePlan, FirmwareStatus, OfferedImage, StagePlan};
use crate::model::ids::{DeviceType, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;

/// A firmware package: what the owner declared about an image (device type, version, SHA-256,
/// size, signature) and what the service found when it read the stored image. In a partition
/// of its own per owner (`FIRMWARE#{userId}`), so no range read of the user partition (the
/// dashboard's) ever meets one, and the owner's list is one Query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Its id (read back from the key).
    #[serde(skip_serializing)]
    pub firmware_id: FirmwareId,
    /// The device type it is for.
    pub device_type: DeviceType,
    /// Its version (semver-ish).
    pub version: String,
    /// The declared SHA-256, 64 lowercase hex digits.
    pub sha256: String,
    /// The declared size in bytes.
    pub size: u64,
    /// The owner's Ed25519 signature of the image's SHA-256 digest (base64), if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The device type's public key when the package was created (base64): the key its
    /// signature must verify under. Copied so a later key change cannot turn a package ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// Pending, ready or rejected.
    pub status: FirmwareStatus,
    /// Why it was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// The S3 version of the object the service checked (a versioned bucket): downloads are
    /// presigned for that version, so an upload after the check cannot change what devices get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_version: Option<String>,
    /// When the service checked the stored image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Timestamp>,
}

attributes!(FirmwareItem {
    /// `deviceType`.
    DEVICE_TYPE = "deviceType",
    /// `version`.
    VERSION = "version",
    /// `sha256`.
    SHA256 = "sha256",
    /// `size`.
    SIZE = "size",
    /// `signature`.
    SIGNATURE = "signature",
    /// `publicKey`.
    PUBLIC_KEY = "publicKey",
    /// `status`.
    STATUS = "status",
    /// `reason`.
    REASON = "reason",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `objectVersion`.
    OBJECT_VERSION = "objectVersion",
    /// `checkedAt`.
    CHECKED_AT = "checkedAt",
});

impl Entity for FirmwareItem {
    const ENTITY_TYPE: EntityType = EntityType::Firmware;
    fn item_key(&self) -> ItemKey {
        ItemKey::Firmware {
            user: self.user_id.clone(),
            firmware: self.firmware_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

impl FirmwareItem {
    /// A staged rollout of this package as `plan` asks: the plan with the package's version and
    /// type copied, and the image as devices download it.
    pub fn rollout_terms(self, plan: StagePlan) -> (FirmwarePlan, OfferedImage) {
        let image = OfferedImage {
            object_key: self.object_key(),
            sha256: self.sha256,
            size: self.size,
            signature: self.signature,
            object_version: self.object_version,
        };
        let plan = FirmwarePlan {
            firmware_id: self.firmware_id,
            version: self.version,
            device_type: self.device_type,
            stages: plan.stages,
            soak_seconds: plan.soak_seconds,
            healthy_check_ins: plan.healthy_check_ins,
            success_percent: plan.success_percent,
            abort: plan.abort,
            maintenance_window: plan.maintenance_window,
        };
        (plan, image)
    }

    /// Where its image is stored in the bucket: under the owner, so no presigned URL of one
    /// owner's package can name another's object.
    pub fn object_key(&self) -> String {
        object_key(&self.user_id, &self.firmware_id)
    }
}

/// Where the image of `user`'s package `firmware` is stored in the bucket.
pub fn object_key(user: &UserId, firmware: &FirmwareId) -> String {
    format!("firmware/{user}/{firmware}")
}

/// Sort-key prefix of an owner's packages in their firmware partition.
pub const PACKAGE_PREFIX: &str = "PACKAGE#";

/// `FIRMWARE#{userId}`: an owner's firmware partition (packages and signing keys).
pub fn firmware_pk(user: &UserId) -> String {
    format!("FIRMWARE#{user}")
}

/// `PACKAGE#{firmwareId}`.
pub fn package_sk(firmware: &FirmwareId) -> String {
    format!("{PACKAGE_PREFIX}{firmware}")
}

/// The package a sort key of the firmware partition names, if it is a package's (the
/// partition also holds the signing keys).
pub fn package_of_sk(sk: &str) -> Option<FirmwareId> {
    FirmwareId::parse(sk.strip_prefix(PACKAGE_PREFIX)?).ok()
}

/// `FIRMWARE#{userId}` / `PACKAGE#{firmwareId}`.
pub fn primary_key(user: &UserId, firmware: &FirmwareId) -> PrimaryKey {
    PrimaryKey {
        pk: firmware_pk(user),
        sk: package_sk(firmware),
    }
}

/// A package's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["FIRMWARE", user], ["PACKAGE", firmware]) => key.matched(|| {
            Ok(ItemKey::Firmware {
                user: UserId::parse(*user)?,
                firmware: FirmwareId::parse(*firmware)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "firmware",
    pk: "FIRMWARE#${userId}",
    sk: "PACKAGE#${firmwareId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
