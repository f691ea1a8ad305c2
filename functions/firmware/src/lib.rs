//! firmware: firmware packages (issue 40) in a function of their own (device-updates' resource
//! policy is near its 20 KB limit). A thin adapter: validate the path, query and body into the
//! `shared` types, call one `shared::ops::firmware` operation, shape the JSON. The routes live
//! in [`routes`]; this file only names them.

mod routes;

use axum::extract::FromRef;
use axum::routing::{get, post, put};
use axum::Router;

use shared::http::fleet::FleetRoutes;
use shared::store::firmware_images::FirmwareImages;
use shared::FleetTable;

use routes::{devices, keys, packages, rollouts};

/// What the routes share: the table and the image bucket.
#[derive(Clone, Debug)]
pub struct FirmwareState {
    /// The table.
    pub table: FleetTable,
    /// The firmware image bucket.
    pub images: FirmwareImages,
}

impl FromRef<FirmwareState> for FleetTable {
    fn from_ref(state: &FirmwareState) -> Self {
        state.table.clone()
    }
}

/// The function's routes: a fleet's firmware packages and signing keys, its rollouts' list
/// and a rollout's cancel, pause and resume, and a device's firmware, at `/me...` and at
/// `/orgs/{orgId}...` (viewers read; operators cancel and pause; admins create, delete, set
/// keys and resume).
pub fn router(state: FirmwareState) -> Router {
    Router::new()
        .fleet_route(
            "/firmware",
            get(packages::list_firmware).post(packages::create_firmware),
        )
        .fleet_route(
            "/firmware/{firmwareId}",
            get(packages::get_firmware).delete(packages::delete_firmware),
        )
        .fleet_route("/firmware-keys/{deviceType}", put(keys::put_signing_key))
        .fleet_route("/rollouts", get(rollouts::list_rollouts))
        .fleet_route(
            "/devices/{deviceId}/firmware",
            get(devices::device_firmware),
        )
        .fleet_route(
            "/rollouts/{rolloutId}/cancel",
            post(rollouts::cancel_rollout),
        )
        .fleet_route("/rollouts/{rolloutId}/pause", post(rollouts::pause_rollout))
        .fleet_route(
            "/rollouts/{rolloutId}/resume",
            post(rollouts::resume_rollout),
        )
        .with_state(state)
}
