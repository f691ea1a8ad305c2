//! The cases of firmware (issue 40): an owner's packages and signing keys (AP-F1 to AP-F5), a
//! staged firmware rollout started, paused, resumed, listed and cancelled (AP-F6 to AP-F10), and
//! a device's firmware (AP-F11), on fixtures of their own owners (no other case reads them).
//! Images live in a real bucket of moto's S3 ([`seed_firmware_fixtures`] makes it and registers
//! it for the table, so the firmware and device-updates functions on the table use it too).
//!
//! The runs work on one owner in order: its package read and listed, a key set, a rollout of
//! the package started, paused, resumed, listed and cancelled; a package of another owner is
//! deleted (the bench's calls, after the runs, still read the first owner's). The
//! calls need a rollout of their own each: rollouts on the running list that the rollout
//! worker's case (AP-T7) would walk, so they are written by [`seed_rollout_fixtures`], which
//! the calls' harnesses run and the runs' never do.

use serde_json::json;
use shared::model::entities::firmware::FirmwareItem;
use shared::model::entities::rollout::RolloutItem;
use shared::model::entities::rollout_slots::RolloutSlotsItem;
use shared::model::entities::running_rollout::RunningRolloutItem;
use shared::model::entities::Entity;
use shared::model::firmware::{FirmwareId, FirmwareStatus, StagePlan};
use shared::model::ids::{DeviceType, RolloutId, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::schema::Item;
use shared::model::twin::{RolloutStatus, RolloutTarget};
use shared::ops::firmware::{self, keys, NewFirmware};
use shared::ops::twin::firmware_offer::device_firmware;
use shared::ops::twin::rollout;
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use super::common::{
    alice, alice_device, device_id, every_call, found, now, one, put_fixtures, route, Events,
    PatternCase, RouteCall, ALICE, DEVICE_UPDATES, FIXTURE_CALLS,
};
use crate::api_event::ApiEvent;
use crate::moto_server::{
    create_versioned_bucket, endpoint_or_process_server, firmware_images_for_table,
    local_firmware_images, register_bucket,
};

/// Template logical id of the function most calls go to.
const FIRMWARE: &str = "FirmwareFunction";
/// The owner whose package, key and rollout the runs and the reads work on.
const OWNER: &str = "ref-firmware";
/// The device type of every fixture package.
const DEVICE_TYPE: &str = "valve";
/// Each call of AP-F1 registers a package of this owner.
const UPLOADER: &str = "ref-firmware-uploader";
/// Each call of AP-F4 deletes one package of this owner (the `i`-th; the run's: the last).
const DELETING: &str = "ref-firmware-deleting";
/// Each call of AP-F6 starts a rollout of another such owner (`-{i}`): an owner runs at most
/// 10 rollouts at once.
const STARTER: &str = "ref-firmware-starter";
/// The owner of the rollout the calls pause and resume in turn, and list.
const ROLLOUTS: &str = "ref-firmware-rollouts";
/// Each call of AP-F9 cancels the one rollout of such an owner (`-{i}`).
const CANCELLER: &str = "ref-firmware-canceller";
/// A valid Ed25519 public key (RFC 8032's first test vector), base64.
const PUBLIC_KEY: &str = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
/// The declared SHA-256 of the fixture packages (their images are never read: they are ready).
const SHA256: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn owner() -> Result<UserId, FleetError> {
    Ok(UserId::parse(OWNER)?)
}

/// The `n`-th fixture id of the generated shape (ids are validated as generated ones).
fn package_id(n: u64) -> Result<FirmwareId, FleetError> {
    Ok(FirmwareId::parse(format!(
        "f-{:015}-{n:016x}",
        now().epoch_millis()
    ))?)
}

/// The fixture rollouts' id (each owner has one).
fn rollout_id() -> Result<RolloutId, FleetError> {
    RolloutId::parse_generated(&format!("r-{:015}-{:016x}", now().epoch_millis(), 1))
        .ok_or_else(|| FleetError::internal("a fixture rollout id of the generated shape"))
}

/// A ready package of `owner` with id `n`.
fn ready_package(owner: &str, n: u64) -> Result<FirmwareItem, FleetError> {
    Ok(FirmwareItem {
        user_id: UserId::parse(owner)?,
        firmware_id: package_id(n)?,
        device_type: DeviceType::parse(DEVICE_TYPE)?,
        version: "2.0.0".into(),
        sha256: SHA256.into(),
        size: 4_096,
        signature: None,
        public_key: None,
        status: FirmwareStatus::Ready,
        reason: None,
        created_at: now(),
        object_version: None,
        checked_at: Some(now()),
    })
}

/// The text of the `n`-th fixture package id, as a call's path names it.
fn package_text(n: u64) -> String {
    package_id(n).map(|id| id.to_string()).unwrap_or_default()
}

/// The text of the fixture rollouts' id, as a call's path names it.
fn rollout_text() -> String {
    rollout_id().map(|id| id.to_string()).unwrap_or_default()
}

/// The firmware cases' bucket and fixtures: the bucket (versioned, on moto's S3 or the server
/// `AWS_ENDPOINT_URL_S3` names, registered for `table`); the owner's ready package; a package
/// per deletion call; a package per starting owner.
pub(crate) async fn seed_firmware_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    let endpoint = endpoint_or_process_server("AWS_ENDPOINT_URL_S3")
        .map_err(|e| FleetError::internal(format!("moto's server for the firmware cases: {e}")))?;
    // Bucket names are lowercase and at most 63 characters.
    let bucket: String = format!("ref-{}", table.name().to_ascii_lowercase())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(63)
        .collect();
    create_versioned_bucket(&local_firmware_images(&endpoint, &bucket))
        .await
        .map_err(FleetError::internal)?;
    register_bucket(table.name(), &endpoint, &bucket);
    let shards = &table.config.shards;
    let mut items = vec![ready_package(OWNER, 0)?.to_item(shards)?];
    for n in 0..=FIXTURE_CALLS as u64 {
        items.push(ready_package(DELETING, n)?.to_item(shards)?);
    }
    for n in 0..FIXTURE_CALLS {
        items.push(ready_package(&format!("{STARTER}-{n}"), 0)?.to_item(shards)?);
    }
    put_fixtures(table, items).await
}

/// A running staged rollout of `owner`'s package 0 to its `valve` devices (none), on the
/// running list with the owner's slot taken: what a start writes.
fn running_rollout(
    owner: &str,
    shards: &shared::model::shard::ShardCounts,
) -> Result<[Item; 4], FleetError> {
    let package = ready_package(owner, 0)?;
    let plan = StagePlan::parse(None, None, None, None, None, None)?;
    let rollout = RolloutItem::started(
        package.user_id.clone(),
        rollout_id()?,
        RolloutTarget::Type(package.device_type.clone()),
        String::new(),
        Some(package.clone().rollout_terms(plan)),
        now(),
    );
    let slots = RolloutSlotsItem {
        user_id: package.user_id.clone(),
        running: 1,
    };
    Ok([
        package.to_item(shards)?,
        RunningRolloutItem::of(&rollout).to_item(shards)?,
        rollout.to_item(shards)?,
        slots.to_item(shards)?,
    ])
}

/// The rollouts the firmware calls work on (AP-F7 to AP-F10): one that is paused and resumed in
/// turn, and one per cancel. Running, so on the running list: run it after the cases' runs
/// (AP-T7's would walk them) and before their calls.
pub async fn seed_rollout_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    let shards = &table.config.shards;
    let mut items = running_rollout(ROLLOUTS, shards)?.to_vec();
    for n in 0..FIXTURE_CALLS {
        items.extend(running_rollout(&format!("{CANCELLER}-{n}"), shards)?);
    }
    put_fixtures(table, items).await
}

/// A call to the firmware function answering `expected`.
const fn call(request: &'static str, expected: u16, events: Events) -> Option<RouteCall> {
    Some(RouteCall {
        request,
        function: FIRMWARE,
        expected,
        events,
    })
}

/// What AP-F1 declares.
fn new_firmware_body() -> serde_json::Value {
    json!({"deviceType": DEVICE_TYPE, "version": "2.1.0", "sha256": SHA256, "size": 4096})
}

/// CreateFirmware: a pending package and its upload URL.
pub(super) const CREATE_FIRMWARE: PatternCase = PatternCase {
    id: PatternId::CreateFirmware,
    workload: "a pending package registered, its upload presigned",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let new = NewFirmware::new(DEVICE_TYPE, "2.1.0", SHA256, 4_096, None)?;
            let created = firmware::create_firmware(
                table,
                &firmware_images_for_table(table),
                &UserId::parse(UPLOADER)?,
                new,
            )
            .await?;
            found(
                created.firmware.status == FirmwareStatus::Pending
                    && created.upload_url.contains("X-Amz-Signature"),
                PatternId::CreateFirmware,
            )
        })
    },
    call: call("POST /me/firmware", 201, |_, _| {
        every_call(
            ApiEvent::new(route(PatternId::CreateFirmware), "/me/firmware")
                .caller(UPLOADER)
                .json(&new_firmware_body()),
        )
    }),
};

/// The path of the owner's fixture package.
fn package_path() -> String {
    format!("/me/firmware/{}", package_text(0))
}

/// GetFirmware: a ready package.
pub(super) const GET_FIRMWARE: PatternCase = PatternCase {
    id: PatternId::GetFirmware,
    workload: "a ready package",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let shown = firmware::get_firmware(
                table,
                &firmware_images_for_table(table),
                &owner()?,
                &package_id(0)?,
            )
            .await?;
            found(
                shown.status == FirmwareStatus::Ready,
                PatternId::GetFirmware,
            )
        })
    },
    call: call("GET /me/firmware/{firmwareId} (ready)", 200, |_, _| {
        let id = package_text(0);
        every_call(
            ApiEvent::new(route(PatternId::GetFirmware), package_path())
                .caller(OWNER)
                .param("firmwareId", &id),
        )
    }),
};

/// ListFirmware: the owner's one package.
pub(super) const LIST_FIRMWARE: PatternCase = PatternCase {
    id: PatternId::ListFirmware,
    workload: "an owner's packages (one)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let page = firmware::list_firmware(table, &owner()?, None, 50).await?;
            found(page.firmware.len() == 1, PatternId::ListFirmware)
        })
    },
    call: call("GET /me/firmware", 200, |_, _| {
        every_call(ApiEvent::new(route(PatternId::ListFirmware), "/me/firmware").caller(OWNER))
    }),
};

/// SetSigningKey: the owner's `valve` key set (again, on later calls).
pub(super) const SET_SIGNING_KEY: PatternCase = PatternCase {
    id: PatternId::SetSigningKey,
    workload: "a device type's signing key set",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let set = keys::set_signing_key(
                table,
                &owner()?,
                DeviceType::parse(DEVICE_TYPE)?,
                PUBLIC_KEY,
            )
            .await?;
            found(set.public_key == PUBLIC_KEY, PatternId::SetSigningKey)
        })
    },
    call: call("PUT /me/firmware-keys/{deviceType}", 200, |_, _| {
        every_call(
            ApiEvent::new(
                route(PatternId::SetSigningKey),
                format!("/me/firmware-keys/{DEVICE_TYPE}"),
            )
            .caller(OWNER)
            .param("deviceType", DEVICE_TYPE)
            .json(&json!({"publicKey": PUBLIC_KEY})),
        )
    }),
};

/// StartFirmwareRollout: the ready package to the owner's `valve` devices, in stages.
pub(super) const START_FIRMWARE_ROLLOUT: PatternCase = PatternCase {
    id: PatternId::StartFirmwareRollout,
    workload: "a staged rollout of a ready package started (1/5/25/100)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let plan =
                StagePlan::parse(Some(&json!([1, 5, 25, 100])), None, None, None, None, None)?;
            let started = rollout::start_firmware_rollout(
                table,
                &owner()?,
                RolloutTarget::Type(DeviceType::parse(DEVICE_TYPE)?),
                &package_id(0)?,
                plan,
            )
            .await?;
            found(
                started.status == RolloutStatus::Running,
                PatternId::StartFirmwareRollout,
            )
        })
    },
    call: Some(RouteCall {
        request: "POST /me/rollouts (firmwareId)",
        function: DEVICE_UPDATES,
        expected: 202,
        events: |_, _| {
            Box::new(|i| {
                let id = package_text(0);
                ApiEvent::new(route(PatternId::StartFirmwareRollout), "/me/rollouts")
                    .caller(&format!("{STARTER}-{i}"))
                    .json(&json!({"target": {"type": DEVICE_TYPE}, "firmwareId": id,
                        "stages": [1, 5, 25, 100]}))
                    .to_bytes()
            })
        },
    }),
};

/// The rollout the runs started (AP-F6), looked up outside the case's meter.
async fn started_rollout(table: &FleetTable) -> Result<RolloutId, FleetError> {
    let page = RequestMeter::new()
        .scope(rollout::list_rollouts(table, &owner()?, None, 1))
        .await?;
    let first = page
        .rollouts
        .first()
        .ok_or_else(|| FleetError::internal("AP-F6's run started no rollout"))?;
    Ok(RolloutId::parse(&first.rollout_id)?)
}

/// The path of the fixture rollout, with `rest` after it.
fn rollout_path(rest: &str) -> String {
    format!("/me/rollouts/{}{rest}", rollout_text())
}

/// An event of `caller` on its fixture rollout's `rest`.
fn on_rollout(id: PatternId, caller: &str, rest: &str) -> ApiEvent {
    ApiEvent::new(route(id), rollout_path(rest))
        .caller(caller)
        .param("rolloutId", &rollout_text())
}

/// PauseRollout: a running rollout paused by its owner.
pub(super) const PAUSE_ROLLOUT: PatternCase = PatternCase {
    id: PatternId::PauseRollout,
    workload: "a running firmware rollout paused by its owner",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let id = started_rollout(table).await?;
            let paused = rollout::pause_rollout(table, &owner()?, &id).await?;
            found(
                paused.status == RolloutStatus::Paused,
                PatternId::PauseRollout,
            )
        })
    },
    call: call("POST /me/rollouts/{rolloutId}/pause", 200, |_, _| {
        every_call(on_rollout(PatternId::PauseRollout, ROLLOUTS, "/pause"))
    }),
};

/// ResumeRollout: the paused rollout resumed.
pub(super) const RESUME_ROLLOUT: PatternCase = PatternCase {
    id: PatternId::ResumeRollout,
    workload: "a paused firmware rollout resumed",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let id = started_rollout(table).await?;
            let resumed = rollout::resume_rollout(table, &owner()?, &id).await?;
            found(
                resumed.status == RolloutStatus::Running,
                PatternId::ResumeRollout,
            )
        })
    },
    call: call("POST /me/rollouts/{rolloutId}/resume", 200, |_, _| {
        every_call(on_rollout(PatternId::ResumeRollout, ROLLOUTS, "/resume"))
    }),
};

/// ListRollouts: an owner's one rollout.
pub(super) const LIST_ROLLOUTS: PatternCase = PatternCase {
    id: PatternId::ListRollouts,
    workload: "an owner's rollouts (one)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let page = rollout::list_rollouts(table, &owner()?, None, 50).await?;
            found(page.rollouts.len() == 1, PatternId::ListRollouts)
        })
    },
    call: call("GET /me/rollouts", 200, |_, _| {
        every_call(ApiEvent::new(route(PatternId::ListRollouts), "/me/rollouts").caller(ROLLOUTS))
    }),
};

/// CancelRollout: a running rollout cancelled, its entry and slot given back.
pub(super) const CANCEL_ROLLOUT: PatternCase = PatternCase {
    id: PatternId::CancelRollout,
    workload: "a running firmware rollout cancelled (off the running list, its slot given back)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let id = started_rollout(table).await?;
            let cancelled = rollout::cancel_rollout(table, &owner()?, &id).await?;
            found(
                cancelled.status == RolloutStatus::Cancelled,
                PatternId::CancelRollout,
            )
        })
    },
    call: call("POST /me/rollouts/{rolloutId}/cancel", 200, |_, _| {
        Box::new(|i| {
            on_rollout(
                PatternId::CancelRollout,
                &format!("{CANCELLER}-{i}"),
                "/cancel",
            )
            .to_bytes()
        })
    }),
};

/// DeleteFirmware: a package no running rollout uses, and its image.
pub(super) const DELETE_FIRMWARE: PatternCase = PatternCase {
    id: PatternId::DeleteFirmware,
    workload: "a package no running rollout uses deleted, with its image",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            // The deleting owner's last package: the calls take the others in order, and the
            // owner's own package stays for the reads' calls (the bench runs them after).
            firmware::delete_firmware(
                table,
                &firmware_images_for_table(table),
                &UserId::parse(DELETING)?,
                &package_id(FIXTURE_CALLS as u64)?,
            )
            .await
        })
    },
    call: call("DELETE /me/firmware/{firmwareId}", 204, |_, _| {
        Box::new(|i| {
            let id = package_text(i as u64);
            ApiEvent::new(
                route(PatternId::DeleteFirmware),
                format!("/me/firmware/{id}"),
            )
            .caller(DELETING)
            .param("firmwareId", &id)
            .to_bytes()
        })
    }),
};

/// DeviceFirmware: a device no firmware rollout has offered anything.
pub(super) const DEVICE_FIRMWARE: PatternCase = PatternCase {
    id: PatternId::DeviceFirmware,
    workload: "a device's firmware (no rollout has offered it anything)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let shown = device_firmware(table, &alice()?, &alice_device(1)?).await?;
            found(shown.is_none(), PatternId::DeviceFirmware)
        })
    },
    call: call("GET /me/devices/{deviceId}/firmware", 200, |_, _| {
        let device = device_id(1);
        every_call(
            ApiEvent::new(
                route(PatternId::DeviceFirmware),
                format!("/me/devices/{device}/firmware"),
            )
            .caller(ALICE)
            .param("deviceId", &device),
        )
    }),
};
