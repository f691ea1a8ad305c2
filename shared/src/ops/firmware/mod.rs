//! Firmware packages (issue 40): created with a presigned upload URL, checked by the service
//! from the stored bytes (never the uploader's word), listed, deleted; and the owner's
//! Ed25519 signing keys per device type ([`keys`]). A staged firmware rollout
//! (`ops::twin::rollout::start_firmware_rollout`) takes `ready` packages only.
//!
//! Each route is an access pattern of the catalog (AP-F1 to AP-F5), defined beside its function.

pub mod check;
pub mod keys;

use std::time::Duration;

use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use serde::Serialize;

use crate::model::entities::firmware::{firmware_pk, FirmwareItem, PACKAGE_PREFIX};
use crate::model::entities::firmware_keys::FirmwareKeysItem;
use crate::model::entities::running_rollout::{
    running_rollout_prefix, RunningRolloutItem, RUNNING_ROLLOUTS_PK,
};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions};
use crate::model::firmware::{
    check_size, check_version, parse_sha256, parse_signature, FirmwareId, FirmwareStatus,
    UPLOAD_URL_SECONDS,
};
use crate::model::ids::{DeviceType, UserId};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{PK, SK};
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{key_prefix, query, read_consistent};
use crate::store::firmware_images::FirmwareImages;
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// Packages per page of `GET /me/firmware`, at most.
pub const MAX_PAGE: u32 = 100;

/// A package as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareView {
    /// Its id.
    pub firmware_id: FirmwareId,
    /// The device type.
    pub device_type: DeviceType,
    /// The version.
    pub version: String,
    /// The declared SHA-256.
    pub sha256: String,
    /// The declared size.
    pub size: u64,
    /// The signature, if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Whether its ready state needs the signature to verify (its type had a key).
    pub signed: bool,
    /// `pending`, `ready` or `rejected`.
    pub status: FirmwareStatus,
    /// Why it was rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When the service checked its image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Timestamp>,
}

impl From<&FirmwareItem> for FirmwareView {
    fn from(item: &FirmwareItem) -> Self {
        Self {
            firmware_id: item.firmware_id.clone(),
            device_type: item.device_type.clone(),
            version: item.version.clone(),
            sha256: item.sha256.clone(),
            size: item.size,
            signature: item.signature.clone(),
            signed: item.public_key.is_some(),
            status: item.status,
            reason: item.reason.clone(),
            created_at: item.created_at,
            checked_at: item.checked_at,
        }
    }
}

/// A package's declared metadata, validated: what `POST /me/firmware` takes.
#[derive(Clone, Debug, PartialEq)]
pub struct NewFirmware {
    device_type: DeviceType,
    version: String,
    sha256: String,
    size: u64,
    signature: Option<String>,
}

impl NewFirmware {
    /// Validates each field, naming the first bad one.
    pub fn new(
        device_type: &str,
        version: &str,
        sha256: &str,
        size: u64,
        signature: Option<&str>,
    ) -> Result<Self, ValidationError> {
        let device_type = DeviceType::parse_field("deviceType", device_type)?;
        check_version(version)?;
        let sha256 = parse_sha256(sha256)?;
        check_size(size)?;
        if let Some(signature) = signature {
            parse_signature(signature)?;
        }
        Ok(Self {
            device_type,
            version: version.to_string(),
            sha256,
            size,
            signature: signature.map(str::to_string),
        })
    }
}

/// What `POST /me/firmware` answers: the pending package and where to upload its image.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedFirmware {
    /// The package.
    #[serde(flatten)]
    pub firmware: FirmwareView,
    /// A presigned S3 PUT of its image, valid [`UPLOAD_URL_SECONDS`].
    pub upload_url: String,
}

/// A package's key, as the definitions below name it.
const PACKAGE_KEY: &str = "PK = FIRMWARE#{userId}, SK = PACKAGE#{firmwareId}";

/// AP-F1, implemented by [`create_firmware`].
pub const CREATE_FIRMWARE: AccessPattern = AccessPattern {
    id: PatternId::CreateFirmware,
    description: "register a pending firmware package and presign its image's upload (no S3 request: presigning is local)",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem, Operation::PutItem],
    index: None,
    key_condition: "PK = FIRMWARE#{userId}, SK = KEYS (the owner's signing keys); the package, conditioned on its absence",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /me/firmware"),
    implemented_by: implemented_by!(create_firmware),
};

/// Creates a pending package of `owner` (a GetItem of the owner's signing keys, a PutItem) and
/// presigns its upload. When the device type has a key, a signature is required and the key
/// is copied onto the package: it must verify under that key to become ready.
pub async fn create_firmware(
    table: &FleetTable,
    images: &FirmwareImages,
    owner: &UserId,
    new: NewFirmware,
) -> Result<CreatedFirmware, FleetError> {
    let keys: Option<FirmwareKeysItem> = read_consistent(
        table,
        &ItemKey::FirmwareKeys {
            user: owner.clone(),
        },
    )
    .await?;
    let public_key = keys.and_then(|k| k.keys.get(new.device_type.as_str()).cloned());
    if public_key.is_some() && new.signature.is_none() {
        return Err(ValidationError::new(
            "signature",
            "is required: this device type has a signing key",
        )
        .into());
    }
    let now = Timestamp::now();
    let item = FirmwareItem {
        user_id: owner.clone(),
        firmware_id: FirmwareId::generate(now),
        device_type: new.device_type,
        version: new.version,
        sha256: new.sha256,
        size: new.size,
        signature: new.signature,
        public_key,
        status: FirmwareStatus::Pending,
        reason: None,
        created_at: now,
        object_version: None,
        checked_at: None,
    };
    // Presign first: a package is stored only with an upload URL to give.
    let upload_url = images
        .upload_url(&item.object_key(), Duration::from_secs(UPLOAD_URL_SECONDS))
        .await?;
    let result = table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .expressions(Expressions::condition(Condition::absent(PK)))
        .send()
        .await;
    match result {
        Ok(_) => {}
        Err(err) => match err.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(_)) => {
                return Err(FleetError::internal("a firmware id was generated twice"))
            }
            _ => return Err(sdk_error(err)),
        },
    }
    Ok(CreatedFirmware {
        firmware: FirmwareView::from(&item),
        upload_url,
    })
}

/// The package `id` of `owner`, or 404.
pub async fn read_firmware(
    table: &FleetTable,
    owner: &UserId,
    id: &FirmwareId,
) -> Result<FirmwareItem, FleetError> {
    read_consistent(
        table,
        &ItemKey::Firmware {
            user: owner.clone(),
            firmware: id.clone(),
        },
    )
    .await?
    .ok_or(FleetError::NotFound("firmware"))
}

/// AP-F2, implemented by [`get_firmware`].
pub const GET_FIRMWARE: AccessPattern = AccessPattern {
    id: PatternId::GetFirmware,
    description: "one firmware package; a pending one is checked first (an S3 HEAD and GET of its image, then its verdict)",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem, Operation::UpdateItem],
    index: None,
    key_condition: PACKAGE_KEY,
    // The package; a pending one whose image is there, its verdict (UpdateItem), and on
    // losing that race to another check the stored verdict (GetItem).
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("GET /me/firmware/{firmwareId}"),
    implemented_by: implemented_by!(get_firmware),
};

/// `GET /me/firmware/{firmwareId}`: the package; a pending one is checked first
/// ([`check::check_pending`]), so its status moves as soon as its image is there.
pub async fn get_firmware(
    table: &FleetTable,
    images: &FirmwareImages,
    owner: &UserId,
    id: &FirmwareId,
) -> Result<FirmwareView, FleetError> {
    let item = read_firmware(table, owner, id).await?;
    let item = check::check_pending(table, images, item).await?;
    Ok(FirmwareView::from(&item))
}

/// AP-F3, implemented by [`list_firmware`].
pub const LIST_FIRMWARE: AccessPattern = AccessPattern {
    id: PatternId::ListFirmware,
    description: "an owner's firmware packages, newest first, a page at a time",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = FIRMWARE#{userId}, SK begins_with PACKAGE# (backwards)",
    budget: RequestBudget::PerPage(1),
    max_read_units: None,
    route: Some("GET /me/firmware"),
    implemented_by: implemented_by!(list_firmware),
};

/// One page of an owner's packages, newest first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FirmwarePage {
    /// The packages.
    pub firmware: Vec<FirmwareView>,
    /// Where the next page starts (the last package's id); absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `GET /me/firmware`: one Query of the owner's firmware partition, newest first, `limit`
/// packages after `cursor` (a package id: the start key is built from the caller's own
/// partition, so no cursor reaches another's).
pub async fn list_firmware(
    table: &FleetTable,
    owner: &UserId,
    cursor: Option<&str>,
    limit: u32,
) -> Result<FirmwarePage, FleetError> {
    let start = cursor
        .map(|c| {
            FirmwareId::parse(c)
                .map_err(|_| ValidationError::new("cursor", "is not a cursor this request issued"))
        })
        .transpose()?
        .map(|id| {
            ItemKey::Firmware {
                user: owner.clone(),
                firmware: id,
            }
            .attributes()
        });
    let (items, next) = query(
        key_prefix(
            table,
            firmware_pk(owner),
            PACKAGE_PREFIX,
            Expressions::builder(),
        )
        .scan_index_forward(false)
        .limit(limit.clamp(1, MAX_PAGE) as i32)
        .set_exclusive_start_key(start),
    )
    .await?;
    let firmware = items
        .into_iter()
        .map(|item| FirmwareItem::from_item(item).map(|f| FirmwareView::from(&f)))
        .collect::<Result<Vec<_>, _>>()?;
    let cursor = next
        .and_then(|key| key.get(SK.name())?.as_s().ok().cloned())
        .and_then(|sk| sk.strip_prefix(PACKAGE_PREFIX).map(str::to_string));
    Ok(FirmwarePage { firmware, cursor })
}

/// Whether a running rollout of `owner` uses package `id`: one consistent Query of the
/// owner's entries on the running list (at most `MAX_RUNNING_ROLLOUTS`, each naming its
/// package; an entry leaves the list in the transaction that ends its rollout). A paused
/// rollout stays on the list, so its package stays in use.
pub async fn used_by_running_rollout(
    table: &FleetTable,
    owner: &UserId,
    id: &FirmwareId,
) -> Result<bool, FleetError> {
    let mut start = None;
    loop {
        let (items, last) = query(
            key_prefix(
                table,
                RUNNING_ROLLOUTS_PK,
                running_rollout_prefix(owner),
                Expressions::builder(),
            )
            .consistent_read(true)
            .set_exclusive_start_key(start.take()),
        )
        .await?;
        for item in items {
            if RunningRolloutItem::from_item(item)?.firmware_id.as_ref() == Some(id) {
                return Ok(true);
            }
        }
        match last {
            Some(key) => start = Some(key),
            None => return Ok(false),
        }
    }
}

/// AP-F4, implemented by [`delete_firmware`].
pub const DELETE_FIRMWARE: AccessPattern = AccessPattern {
    id: PatternId::DeleteFirmware,
    description: "delete a firmware package no running rollout uses, and its image (an S3 DeleteObject: the bucket's lifecycle expires the old version)",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem, Operation::Query, Operation::DeleteItem],
    index: None,
    key_condition: "the package; PK = ROLLOUTS#RUNNING, SK begins_with {userId}# (is it in use?); the package, deleted",
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("DELETE /me/firmware/{firmwareId}"),
    implemented_by: implemented_by!(delete_firmware),
};

/// `DELETE /me/firmware/{firmwareId}`: 404 for no such package of `owner`, 409 while a
/// running rollout uses it; otherwise its image (S3 first, so a retried DELETE finds the
/// package still there and finishes) and then the package.
pub async fn delete_firmware(
    table: &FleetTable,
    images: &FirmwareImages,
    owner: &UserId,
    id: &FirmwareId,
) -> Result<(), FleetError> {
    let item = read_firmware(table, owner, id).await?;
    if used_by_running_rollout(table, owner, id).await? {
        return Err(FleetError::Conflict {
            code: "firmware_in_use",
            message: "a running rollout uses this firmware: cancel it first".to_string(),
        });
    }
    images.delete(&item.object_key()).await?;
    let result = table
        .client
        .delete_item()
        .table_name(table.name())
        .set_key(Some(item.item_key().attributes()))
        .expressions(Expressions::condition(Condition::exists(PK)))
        .send()
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(err) => match err.as_service_error() {
            // Deleted by a concurrent DELETE: the same outcome.
            Some(DeleteItemError::ConditionalCheckFailedException(_)) => Ok(()),
            _ => Err(sdk_error(err)),
        },
    }
}
