//! A device's firmware: `GET /me/devices/{deviceId}/firmware`.

use axum::extract::State;
use lambda_http::http::StatusCode;
use serde::Serialize;
use shared::http::api::json_response;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::DeviceIdPath;
use shared::ops::twin::firmware_offer::{self, DeviceFirmwareView};

use super::Answer;
use crate::FirmwareState;

/// `{"firmware": ...}`: the device's last firmware offer, or `null`.
#[derive(Serialize)]
struct DeviceFirmwareAnswer {
    firmware: Option<DeviceFirmwareView>,
}

/// `GET /me/devices/{deviceId}/firmware`: what the last firmware rollout offered the device and
/// how far it got, or `{"firmware": null}` when none offered it anything; 404 for a device that
/// is not the caller's (one BatchGetItem either way).
pub(crate) async fn device_firmware(
    fleet: Fleet<ViewerRole>,
    State(state): State<FirmwareState>,
    DeviceIdPath(id): DeviceIdPath,
) -> Answer {
    let firmware = firmware_offer::device_firmware(&state.table, &fleet.owner, &id).await?;
    Ok(json_response(
        StatusCode::OK,
        &DeviceFirmwareAnswer { firmware },
    ))
}
