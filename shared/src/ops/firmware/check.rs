//! The service's own check of a pending package: it reads the stored image, hashes it, and
//! compares size and SHA-256 (and, where the device type has a key, verifies the signature over
//! the digest it computed). Run on `GET /me/firmware/{firmwareId}` of a pending package: the
//! read is bounded ([`MAX_IMAGE_BYTES`]), the verdict idempotent, and a rejected package never
//! becomes ready (the write is conditional on `pending`).

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

use crate::model::entities::firmware::FirmwareItem;
use crate::model::entities::Entity;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::firmware::{signature_verifies, FirmwareStatus, MAX_IMAGE_BYTES};
use crate::model::timestamp::Timestamp;
use crate::store::dynamo::{read_consistent, string_value};
use crate::store::firmware_images::{FirmwareImages, StoredImage};
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// What a stored image says about a package: ready, rejected with why, or nothing yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No image yet.
    NotUploaded,
    /// Size, hash (and signature) match: the version read.
    Ready(Option<String>),
    /// Why not.
    Rejected(String),
}

/// The verdict on `item` from what the service read of its image.
pub fn verdict(item: &FirmwareItem, stored: StoredImage) -> Verdict {
    match stored {
        StoredImage::Missing => Verdict::NotUploaded,
        StoredImage::TooLarge { size } => Verdict::Rejected(format!(
            "the stored image is {size} bytes; {} were declared",
            item.size
        )),
        StoredImage::Read {
            size,
            sha256,
            version,
        } => {
            if size != item.size {
                return Verdict::Rejected(format!(
                    "the stored image is {size} bytes; {} were declared",
                    item.size
                ));
            }
            if sha256 != item.sha256 {
                return Verdict::Rejected(format!(
                    "the stored image's SHA-256 is {sha256}; {} was declared",
                    item.sha256
                ));
            }
            if let Some(key) = &item.public_key {
                let verifies = item
                    .signature
                    .as_deref()
                    .is_some_and(|signature| signature_verifies(key, signature, &sha256));
                if !verifies {
                    return Verdict::Rejected(
                        "the signature does not verify under the device type's public key"
                            .to_string(),
                    );
                }
            }
            Verdict::Ready(version)
        }
    }
}

/// Checks `item` if it is pending and its image is there: the new status is written with one
/// UpdateItem conditional on `pending` (a concurrent check that won is read back instead).
/// Anything but a pending package is returned as it is, with no S3 request.
pub async fn check_pending(
    table: &FleetTable,
    images: &FirmwareImages,
    mut item: FirmwareItem,
) -> Result<FirmwareItem, FleetError> {
    if item.status != FirmwareStatus::Pending {
        return Ok(item);
    }
    // At most one byte beyond the declared size is ever needed to tell it differs.
    let limit = item.size.min(MAX_IMAGE_BYTES);
    let stored = images.read_and_hash(&item.object_key(), limit).await?;
    let now = Timestamp::now();
    let mut update = Update::new().set(FirmwareItem::CHECKED_AT, string_value(now.to_string()));
    match verdict(&item, stored) {
        Verdict::NotUploaded => return Ok(item),
        Verdict::Ready(version) => {
            item.status = FirmwareStatus::Ready;
            update = update.set(FirmwareItem::STATUS, string_value("ready"));
            if let Some(version) = &version {
                update = update.set(FirmwareItem::OBJECT_VERSION, string_value(version.clone()));
            }
            item.object_version = version;
        }
        Verdict::Rejected(reason) => {
            item.status = FirmwareStatus::Rejected;
            update = update
                .set(FirmwareItem::STATUS, string_value("rejected"))
                .set(FirmwareItem::REASON, string_value(reason.clone()));
            item.reason = Some(reason);
        }
    }
    item.checked_at = Some(now);
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(item.item_key().attributes()))
        .expressions(Expressions::write(
            update,
            Some(Condition::equals(
                FirmwareItem::STATUS,
                string_value("pending"),
            )),
        ))
        .send()
        .await;
    match result {
        Ok(_) => Ok(item),
        Err(err) => match err.as_service_error() {
            // Checked (or deleted) meanwhile: what is stored now is the answer.
            Some(UpdateItemError::ConditionalCheckFailedException(_)) => {
                read_consistent(table, &item.item_key())
                    .await?
                    .ok_or(FleetError::NotFound("firmware"))
            }
            _ => Err(sdk_error(err)),
        },
    }
}
