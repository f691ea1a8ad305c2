//! A device's side of a staged firmware rollout (issue 40 item 5): at each check-in (a batch,
//! AP-14, or a sync, AP-T4) of a device whose live state has an open part in a rollout
//! (`firmware`, [`FirmwareProgress`]), its report moves that part on
//! ([`FirmwareProgress::checked_in`]) and, while its rollout runs and it still needs the image,
//! the answer carries the offer with a download URL presigned afresh.
//!
//! Nothing is read for a device without an open part: ingestion reads or returns the live
//! state anyway, and a sync reads it. With one, the check-in reads the rollout (its status,
//! its plan and its image). Ingestion folds the move into its own update of the live state
//! (`ops::ingest`, no write of its own); a sync, or a batch whose state was read before the
//! offer, writes it with one UpdateItem ([`firmware_check_in`]).

use std::time::Duration;

use serde::Serialize;

use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::rollout::RolloutItem;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::firmware::FirmwareId;
use crate::model::ids::{DeviceId, RolloutId, UserId};
use crate::model::pattern_id::PatternId;
use crate::model::rollout_progress::{FailureClass, FirmwareProgress, FirmwareReport, OfferPhase};
use crate::model::schema::PK;
use crate::model::timestamp::Timestamp;
use crate::model::twin::RolloutStatus;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{number_value, read_consistent};
use crate::store::firmware_images::FirmwareImages;
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// How long an offer's download URL stays valid: an hour, enough for a large image over a slow
/// link; a device that sleeps longer gets a new one at its next check-in and resumes with
/// `Range` where it stopped.
pub const DOWNLOAD_URL_SECONDS: u64 = 3600;

/// The offer as the device gets it: `"firmware": {...}` in the answer to `/events` and `/sync`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareDelivery {
    /// The package.
    pub firmware_id: FirmwareId,
    /// The version to install (and to report once running).
    pub version: String,
    /// A presigned GET of the checked image (Range works on it), renewed on each check-in.
    pub url: String,
    /// The image's SHA-256, as the service computed it.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// The Ed25519 signature of the digest, when the package has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A live state's open part in a firmware rollout, as a check-in needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenFirmware {
    /// The device's part.
    pub progress: FirmwareProgress,
    /// The state's `firmwareSeq`, which a write of the part is conditioned on.
    pub seq: u64,
    /// An alarm is open on the device.
    pub alarmed: bool,
}

impl OpenFirmware {
    /// The open part of a live state, if it has one.
    pub fn of(state: &DeviceStateItem) -> Option<Self> {
        state
            .firmware
            .as_ref()
            .filter(|p| p.open())
            .map(|progress| Self {
                progress: progress.clone(),
                seq: state.firmware_seq,
                alarmed: state.has_open_alarm(),
            })
    }
}

/// What a check-in did with the device's firmware: the offer to answer with, and the DynamoDB
/// requests it took (its part of the pattern's twin work).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FirmwareCheckIn {
    /// The offer, while the device's rollout runs and the device still needs the image.
    pub offer: Option<FirmwareDelivery>,
    /// Requests issued.
    pub requests: u32,
}

/// What ingestion's update of the live state did with the device's firmware part.
#[derive(Clone, Debug, PartialEq)]
pub enum FirmwareFold {
    /// The state it read had an open part: the rollout was read, the check-in's move (if any)
    /// written with the update. The part as written, its rollout, and the requests (the read).
    CheckedIn {
        /// The device's part after the update.
        progress: FirmwareProgress,
        /// Its rollout as read (`None`: gone).
        rollout: Option<Box<RolloutItem>>,
        /// Requests issued for it (the rollout's read).
        requests: u32,
    },
    /// The update found an open part the state it read did not have (a warm container's copy
    /// older than the offer): it is checked in on its own ([`firmware_check_in`]).
    Found(OpenFirmware),
}

impl FirmwareFold {
    /// The answer's offer and the requests, checking in on its own what the update found.
    pub async fn check_in(
        self,
        table: &FleetTable,
        images: Option<&FirmwareImages>,
        registration: &RegistrationItem,
        report: Option<&FirmwareReport>,
    ) -> Result<FirmwareCheckIn, FleetError> {
        match self {
            FirmwareFold::CheckedIn {
                progress,
                rollout,
                requests,
            } => Ok(FirmwareCheckIn {
                offer: delivery(
                    images,
                    &registration.device_id,
                    &progress,
                    rollout.as_deref(),
                )
                .await?,
                requests,
            }),
            FirmwareFold::Found(open) => {
                firmware_check_in(table, images, registration, Some(&open), report).await
            }
        }
    }
}

/// The rollout of `user`'s device's open part: one consistent GetItem (`None`: gone).
pub async fn read_rollout(
    table: &FleetTable,
    user: &UserId,
    rollout: &RolloutId,
) -> Result<Option<RolloutItem>, FleetError> {
    read_consistent(
        table,
        &ItemKey::Rollout {
            user: user.clone(),
            rollout: rollout.clone(),
        },
    )
    .await
}

/// What a check-in needs of `rollout`: its status and the healthy check-ins its plan asks
/// (`None` for a rollout gone, or not a firmware rollout).
pub fn rollout_terms(rollout: Option<&RolloutItem>) -> Option<(RolloutStatus, u32)> {
    rollout.and_then(|r| {
        r.firmware
            .as_ref()
            .map(|plan| (r.status, u32::from(plan.healthy_check_ins)))
    })
}

/// The offer to answer with for the device's part `progress` of `rollout`, while the rollout
/// runs and the device still needs the image: its URL presigned on `images` (none configured:
/// no offer, and a warning).
pub async fn delivery(
    images: Option<&FirmwareImages>,
    device: &DeviceId,
    progress: &FirmwareProgress,
    rollout: Option<&RolloutItem>,
) -> Result<Option<FirmwareDelivery>, FleetError> {
    let Some((rollout, image)) = rollout.and_then(|r| Some((r, r.image.as_ref()?))) else {
        return Ok(None);
    };
    if rollout.rollout_id != progress.rollout_id || !progress.wants_offer(rollout.status) {
        return Ok(None);
    }
    let Some(images) = images else {
        tracing::warn!(device = %device, "a firmware offer cannot be presigned: no image bucket is configured");
        return Ok(None);
    };
    let url = images
        .download_url(
            &image.object_key,
            image.object_version.as_deref(),
            Duration::from_secs(DOWNLOAD_URL_SECONDS),
        )
        .await?;
    Ok(Some(FirmwareDelivery {
        firmware_id: progress.firmware_id.clone(),
        version: progress.version.clone(),
        url,
        sha256: image.sha256.clone(),
        size: image.size,
        signature: image.signature.clone(),
    }))
}

/// The update writing the device's part as `progress`, conditioned on the live state existing
/// (a deleted device's is gone) and its part being as read (`firmwareSeq` = `read_seq`): the
/// rollout worker's offers, time-outs and retries and a check-in's own move.
pub fn write_progress(
    progress: &FirmwareProgress,
    read_seq: u64,
) -> Result<Expressions, FleetError> {
    Ok(Expressions::write(
        Update::new()
            .set(
                DeviceStateItem::FIRMWARE,
                serde_dynamo::to_attribute_value(progress)?,
            )
            .set(DeviceStateItem::FIRMWARE_SEQ, number_value(read_seq + 1)),
        Some(Condition::exists(PK).and(DeviceStateItem::firmware_unchanged(read_seq))),
    ))
}

/// A check-in, on its own, of the device of `registration` whose live state has the open part
/// `open`, with its firmware `report`: nothing at all without one (a report then has nothing to
/// move, and is ignored). With one: the rollout read (one consistent GetItem); when the
/// check-in moves the part, one UpdateItem of the live state ([`write_progress`]); a write that
/// loses a race with a concurrent check-in or the worker changes nothing (the next check-in
/// sees where that one left it). The answer carries the offer while the rollout is `running`
/// and the device still needs the image. Ingestion does the same inside its own update of the
/// live state (no write of its own); this is for a sync, and for a batch whose update found a
/// part its read did not have.
pub async fn firmware_check_in(
    table: &FleetTable,
    images: Option<&FirmwareImages>,
    registration: &RegistrationItem,
    open: Option<&OpenFirmware>,
    report: Option<&FirmwareReport>,
) -> Result<FirmwareCheckIn, FleetError> {
    let Some(open) = open else {
        return Ok(FirmwareCheckIn::default());
    };
    let mut check_in = FirmwareCheckIn {
        offer: None,
        requests: 1,
    };
    let rollout = read_rollout(table, &registration.user_id, &open.progress.rollout_id).await?;
    let mut progress = open.progress.clone();
    if let Some(next) = open.progress.checked_in(
        rollout_terms(rollout.as_ref()),
        report,
        open.alarmed,
        Timestamp::now(),
    ) {
        check_in.requests += 1;
        let sent = table
            .client
            .update_item()
            .table_name(table.name())
            .set_key(Some(state_key(registration).attributes()))
            .expressions(write_progress(&next, open.seq)?)
            .send()
            .await;
        match sent {
            Ok(_) => progress = next,
            // Moved meanwhile (another check-in, the worker), or the device is gone.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) => {}
            Err(err) => return Err(sdk_error(err)),
        }
    }
    check_in.offer = delivery(images, &registration.device_id, &progress, rollout.as_ref()).await?;
    Ok(check_in)
}

fn state_key(registration: &RegistrationItem) -> ItemKey {
    ItemKey::DeviceState {
        user: registration.user_id.clone(),
        partition: registration.partition,
        device: registration.device_id.clone(),
    }
}

/// A device's firmware as its owner reads it (`GET /me/devices/{deviceId}/firmware`): the last
/// firmware rollout's offer to it and how far the device got. The service stores no running
/// version of its own: devices report theirs only in a firmware rollout's check-ins, so what is
/// known is what the offer recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceFirmwareView {
    /// The rollout that offered it.
    pub rollout_id: RolloutId,
    /// The package offered.
    pub firmware_id: FirmwareId,
    /// The offered (target) version.
    pub version: String,
    /// The version the device last ran as far as the offer knows: the target version once it
    /// reported running it (`updated`, `succeeded`, or failed `unhealthy` on it), otherwise the
    /// version it reported before it started (absent when it never said).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_version: Option<String>,
    /// The version it reported running when it started on the offer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// Its stage (index into the rollout's stages).
    pub stage: u32,
    /// `offered`, `downloading`, `installing`, `updated`, `succeeded` or `failed`.
    pub phase: OfferPhase,
    /// Healthy check-ins counted since it reported the new version.
    pub healthy_check_ins: u32,
    /// Offers of this rollout made to it: 1, and one more for each retry after a failure.
    pub attempts: u32,
    /// Why it failed (`phase` `failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    /// The device's own reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the rollout offered it.
    pub offered_at: Timestamp,
    /// The device's last check-in that moved it.
    pub updated_at: Timestamp,
    /// Its rollout ended (cancelled, done or deleted) before the device finished.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ended: bool,
}

impl From<FirmwareProgress> for DeviceFirmwareView {
    fn from(offer: FirmwareProgress) -> Self {
        let runs_target = matches!(offer.phase, OfferPhase::Updated | OfferPhase::Succeeded)
            || offer.failure == Some(FailureClass::Unhealthy);
        Self {
            running_version: if runs_target {
                Some(offer.version.clone())
            } else {
                offer.from_version.clone()
            },
            rollout_id: offer.rollout_id,
            firmware_id: offer.firmware_id,
            version: offer.version,
            from_version: offer.from_version,
            stage: offer.stage,
            phase: offer.phase,
            healthy_check_ins: offer.healthy_check_ins,
            attempts: offer.attempts,
            failure: offer.failure,
            reason: offer.reason,
            offered_at: offer.offered_at,
            updated_at: offer.updated_at,
            ended: offer.ended,
        }
    }
}

/// AP-F11, implemented by [`device_firmware`].
pub const DEVICE_FIRMWARE: AccessPattern = AccessPattern {
    id: PatternId::DeviceFirmware,
    description: "a device's running version and update state: its part in the last firmware rollout that offered it something",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}; then the device's live state, on the partition its item names",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("GET /me/devices/{deviceId}/firmware"),
    implemented_by: implemented_by!(device_firmware),
};

/// `GET /me/devices/{deviceId}/firmware`: one consistent GetItem of the device's item, keyed
/// from the caller's own fleet (`NotFound("device")` for another owner's device or an unknown
/// one, as every device route answers), then one of its live state (on the partition the
/// device item names), whose `firmware` is the device's part in the last firmware rollout that
/// offered it something (`None`: none has).
pub async fn device_firmware(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<DeviceFirmwareView>, FleetError> {
    let known: Option<DeviceItem> = read_consistent(
        table,
        &ItemKey::Device {
            user: user.clone(),
            device: device.clone(),
        },
    )
    .await?;
    let Some(known) = known else {
        return Err(FleetError::NotFound("device"));
    };
    let state: Option<DeviceStateItem> = read_consistent(
        table,
        &ItemKey::DeviceState {
            user: user.clone(),
            partition: known.partition,
            device: device.clone(),
        },
    )
    .await?;
    Ok(state.and_then(|s| s.firmware).map(DeviceFirmwareView::from))
}
