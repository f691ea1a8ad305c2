//! A device's side of a staged firmware rollout (issue 40 item 5): at each check-in (a batch,
//! AP-14, or a sync, AP-T4) of a device its live state marks (`firmwareRollout`), its report
//! moves its offer on ([`step`]) and, while its rollout runs and it still needs the image, the
//! answer carries the offer with a download URL presigned afresh.
//!
//! Nothing is read for a device without the mark: ingestion's own live-state update returns
//! the item as written (`ReturnValues=ALL_NEW`), and a sync reads the live state anyway.

use std::time::Duration;

use aws_sdk_dynamodb::types::{KeysAndAttributes, TransactWriteItem};
use serde::Serialize;

use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::firmware_offer::FirmwareOfferItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::rollout::RolloutItem;
use crate::model::entities::rollout_counts::{counts_shard, RolloutCountsItem};
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::firmware::FirmwareId;
use crate::model::ids::{DeviceId, RolloutId, UserId};
use crate::model::rollout_progress::{
    step, FailureClass, FirmwareReport, OfferPhase, OfferProgress, StageCounter,
};
use crate::model::schema::Item;
use crate::model::timestamp::Timestamp;
use crate::model::twin::RolloutStatus;
use crate::store::dynamo::{get_all, number_value, string_value, transact, Transaction};
use crate::store::firmware_images::FirmwareImages;
use crate::store::retry::Retry;
use crate::store::table::{done_unless_failed, sdk_error, FleetTable};
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

/// What a check-in needs of the live state: the rollout that marks the device, and whether an
/// alarm is raised on it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirmwareMark {
    /// The rollout offering the device something.
    pub rollout: RolloutId,
    /// An alarm is open on the device.
    pub alarmed: bool,
}

impl FirmwareMark {
    /// The mark of a live state, if it has one.
    pub fn of(state: &DeviceStateItem) -> Option<Self> {
        state.firmware_rollout.as_ref().map(|rollout| Self {
            rollout: rollout.clone(),
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

/// A check-in of the device of `registration` whose live state has `mark`, with its firmware
/// `report`: nothing at all without a mark (a report then has no offer to move, and is
/// ignored). With one: one consistent BatchGetItem of the device's offer and its rollout;
/// when the check-in moves the offer ([`step`]), one write: an UpdateItem of the offer, or,
/// when a stage counter changes or the device's part ends, a TransactWriteItems of it, the
/// counts shard's `ADD` and the mark's removal; when the rollout is over (cancelled, done,
/// gone), one UpdateItem removing the mark. The answer carries the offer while the rollout is
/// `running` and the device still needs the image (`offered`, `downloading`, `installing`): a
/// paused rollout offers nothing. A write that loses a race with a concurrent check-in of the
/// same device changes nothing: the next check-in sees where that one left it.
pub async fn firmware_check_in(
    table: &FleetTable,
    images: Option<&FirmwareImages>,
    registration: &RegistrationItem,
    mark: Option<&FirmwareMark>,
    report: Option<&FirmwareReport>,
) -> Result<FirmwareCheckIn, FleetError> {
    let Some(mark) = mark else {
        return Ok(FirmwareCheckIn::default());
    };
    let user = &registration.user_id;
    let device = &registration.device_id;
    let mut check_in = FirmwareCheckIn {
        offer: None,
        requests: 1,
    };
    let (offer, rollout) = read_offer(table, user, device, &mark.rollout).await?;
    let (Some(offer), Some(rollout)) = (offer, rollout) else {
        check_in.requests += 1;
        clear_mark(table, registration, &mark.rollout).await?;
        return Ok(check_in);
    };
    let Some(plan) = rollout
        .firmware
        .as_ref()
        .filter(|_| offer.rollout_id == mark.rollout)
    else {
        check_in.requests += 1;
        clear_mark(table, registration, &mark.rollout).await?;
        return Ok(check_in);
    };
    if matches!(
        rollout.status,
        RolloutStatus::Cancelled | RolloutStatus::Done
    ) {
        check_in.requests += 1;
        clear_mark(table, registration, &mark.rollout).await?;
        return Ok(check_in);
    }
    let before = OfferProgress {
        phase: offer.phase,
        target: offer.version.clone(),
        from_version: offer.from_version.clone(),
        healthy_check_ins: offer.healthy_check_ins,
    };
    let next = step(
        &before,
        report,
        mark.alarmed,
        u32::from(plan.healthy_check_ins),
    );
    let mut phase = offer.phase;
    if !next.unchanged(&before) {
        check_in.requests += 1;
        let reason = match next.failure {
            Some(FailureClass::Unhealthy) if report.and_then(|r| r.reason.as_ref()).is_none() => {
                Some("an alarm was raised on the device after it updated".to_string())
            }
            Some(FailureClass::Rollback) => Some(format!(
                "the device reported {} again after installing {}",
                report
                    .map(|r| r.version.as_str())
                    .unwrap_or("its old version"),
                offer.version
            )),
            Some(_) => report.and_then(|r| r.reason.clone()),
            None => None,
        };
        let moved = record_step(
            table,
            registration,
            &offer,
            &before,
            &next,
            reason,
            Timestamp::now(),
        )
        .await?;
        if moved {
            phase = next.phase;
        }
    }
    if rollout.status == RolloutStatus::Running && phase.wants_offer() {
        if let Some(images) = images {
            let url = images
                .download_url(
                    &offer.object_key,
                    offer.object_version.as_deref(),
                    Duration::from_secs(DOWNLOAD_URL_SECONDS),
                )
                .await?;
            check_in.offer = Some(FirmwareDelivery {
                firmware_id: offer.firmware_id.clone(),
                version: offer.version.clone(),
                url,
                sha256: offer.sha256.clone(),
                size: offer.size,
                signature: offer.signature.clone(),
            });
        } else {
            tracing::warn!(device = %device, "a firmware offer cannot be presigned: no image bucket is configured");
        }
    }
    Ok(check_in)
}

/// The device's offer and the rollout of `rollout`, in one consistent BatchGetItem.
async fn read_offer(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    rollout: &RolloutId,
) -> Result<(Option<FirmwareOfferItem>, Option<RolloutItem>), FleetError> {
    let keys = vec![
        ItemKey::FirmwareOffer {
            user: user.clone(),
            device: device.clone(),
        }
        .attributes(),
        ItemKey::Rollout {
            user: user.clone(),
            rollout: rollout.clone(),
        }
        .attributes(),
    ];
    let (mut offer, mut found) = (None, None);
    for item in read_together(table, keys).await? {
        match EntityType::of(&item) {
            Some(EntityType::FirmwareOffer) => offer = Some(FirmwareOfferItem::from_item(item)?),
            Some(EntityType::Rollout) => found = Some(RolloutItem::from_item(item)?),
            _ => {}
        }
    }
    Ok((offer, found))
}

/// The live state's mark removed, if it is still `rollout`'s.
async fn clear_mark(
    table: &FleetTable,
    registration: &RegistrationItem,
    rollout: &RolloutId,
) -> Result<(), FleetError> {
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(state_key(registration).attributes()))
        .expressions(unmark(rollout))
        .send()
        .await;
    done_unless_failed(sent)
}

fn unmark(rollout: &RolloutId) -> Expressions {
    Expressions::write(
        Update::new().remove(DeviceStateItem::FIRMWARE_ROLLOUT),
        Some(Condition::equals(
            DeviceStateItem::FIRMWARE_ROLLOUT,
            string_value(rollout.as_str()),
        )),
    )
}

fn state_key(registration: &RegistrationItem) -> ItemKey {
    ItemKey::DeviceState {
        user: registration.user_id.clone(),
        partition: registration.partition,
        device: registration.device_id.clone(),
    }
}

/// The offer moved from `before` to `next`, conditioned on it being where the check-in read
/// it; with the stage's counts and the mark's removal when they change. `Ok(false)` when a
/// concurrent check-in moved it first.
async fn record_step(
    table: &FleetTable,
    registration: &RegistrationItem,
    offer: &FirmwareOfferItem,
    before: &OfferProgress,
    next: &crate::model::rollout_progress::Step,
    reason: Option<String>,
    now: Timestamp,
) -> Result<bool, FleetError> {
    let mut changes = Update::new()
        .set(
            FirmwareOfferItem::PHASE,
            serde_dynamo::to_attribute_value(next.phase)?,
        )
        .set(
            FirmwareOfferItem::HEALTHY_CHECK_INS,
            number_value(next.healthy_check_ins),
        )
        .set(FirmwareOfferItem::UPDATED_AT, string_value(now.to_string()));
    if let Some(from) = &next.from_version {
        changes = changes.set(FirmwareOfferItem::FROM_VERSION, string_value(from.as_str()));
    }
    if let Some(failure) = next.failure {
        changes = changes.set(
            FirmwareOfferItem::FAILURE,
            serde_dynamo::to_attribute_value(failure)?,
        );
    }
    if let Some(reason) = reason {
        changes = changes.set(FirmwareOfferItem::REASON, string_value(reason));
    }
    let where_read = Condition::equals(
        FirmwareOfferItem::ROLLOUT_ID,
        string_value(offer.rollout_id.as_str()),
    )
    .and(Condition::equals(
        FirmwareOfferItem::PHASE,
        serde_dynamo::to_attribute_value(before.phase)?,
    ))
    .and(Condition::equals(
        FirmwareOfferItem::HEALTHY_CHECK_INS,
        number_value(before.healthy_check_ins),
    ));
    let offer_write = Expressions::write(changes, Some(where_read));
    let finished = next.phase.finished();
    if next.counters.is_empty() && !finished {
        let sent = table
            .client
            .update_item()
            .table_name(table.name())
            .set_key(Some(offer.item_key().attributes()))
            .expressions(offer_write)
            .send()
            .await;
        return match sent {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(sdk_error(err)),
        };
    }
    let mut actions = vec![update_action(
        table,
        offer.item_key().attributes(),
        offer_write,
    )?];
    if let Some(counted) = count_changes(
        table,
        &registration.user_id,
        &offer.rollout_id,
        &registration.device_id,
        offer.stage,
        &next.counters,
    )? {
        actions.push(counted);
    }
    if finished {
        actions.push(update_action(
            table,
            state_key(registration).attributes(),
            unmark(&offer.rollout_id),
        )?);
    }
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(true),
        // The offer moved meanwhile, or the mark went (the device was moved or deleted).
        Transaction::Cancelled(_) => Ok(false),
    }
}

/// One UpdateItem of a transaction.
pub(crate) fn update_action(
    table: &FleetTable,
    key: Item,
    expressions: Expressions,
) -> Result<TransactWriteItem, FleetError> {
    let update = aws_sdk_dynamodb::types::Update::builder()
        .table_name(table.name())
        .set_key(Some(key))
        .expressions(expressions)
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// The `ADD` of `counters` to `device`'s counts shard of `rollout`, as a transaction action
/// (none when there is nothing to add).
pub(crate) fn count_changes(
    table: &FleetTable,
    user: &UserId,
    rollout: &RolloutId,
    device: &DeviceId,
    stage: u32,
    counters: &[(StageCounter, i64)],
) -> Result<Option<TransactWriteItem>, FleetError> {
    if counters.is_empty() {
        return Ok(None);
    }
    // A shard is created by its first ADD: its type is set with it, as every item has one.
    let (type_attribute, type_value) = EntityType::RolloutCounts.assignment();
    let mut changes = Update::new().set(type_attribute, type_value);
    for (counter, n) in counters {
        let attribute = RolloutCountsItem::attribute(stage, *counter)
            .ok_or_else(|| FleetError::internal(format!("no stage {stage}")))?;
        changes = changes.add(attribute, number_value(*n));
    }
    let key = ItemKey::RolloutCounts {
        user: user.clone(),
        rollout: rollout.clone(),
        shard: counts_shard(device),
    };
    Ok(Some(update_action(
        table,
        key.attributes(),
        Expressions::write(changes, None),
    )?))
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
}

impl From<FirmwareOfferItem> for DeviceFirmwareView {
    fn from(offer: FirmwareOfferItem) -> Self {
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
        }
    }
}

/// `GET /me/devices/{deviceId}/firmware`: one consistent BatchGetItem of the device's item and
/// its firmware offer, both keyed from the caller's own fleet: `NotFound("device")` for another
/// owner's device or an unknown one (as every device route answers), `None` for a device no
/// firmware rollout has offered anything.
pub async fn device_firmware(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<DeviceFirmwareView>, FleetError> {
    let keys = vec![
        ItemKey::Device {
            user: user.clone(),
            device: device.clone(),
        }
        .attributes(),
        ItemKey::FirmwareOffer {
            user: user.clone(),
            device: device.clone(),
        }
        .attributes(),
    ];
    let (mut known, mut offer) = (false, None);
    for item in read_together(table, keys).await? {
        match EntityType::of(&item) {
            Some(EntityType::Device) => known = true,
            Some(EntityType::FirmwareOffer) => offer = Some(FirmwareOfferItem::from_item(item)?),
            _ => {}
        }
    }
    if !known {
        return Err(FleetError::NotFound("device"));
    }
    Ok(offer.map(DeviceFirmwareView::from))
}

/// The items at `keys` (a device's few), in one consistent BatchGetItem (retried for the keys
/// it leaves unprocessed).
async fn read_together(table: &FleetTable, keys: Vec<Item>) -> Result<Vec<Item>, FleetError> {
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    get_all(table, request, &mut Retry::attempts(4)).await
}
