//! device-updates: every owner write of the HTTP API (the JWT-authorized `/me...` routes
//! that change something). Besides what its name says (registering, changing and deleting a
//! device, AP-07/06/08, and its token, AP-17/18) it serves the owner's profile (`PUT /me`,
//! AP-16), a device's twin (`PUT .../desired` AP-T1, `POST .../commands` AP-T2), fleet-wide
//! changes (`POST /me/rollouts`, AP-T5), alarm rules (`POST /me/rules`, `PATCH|DELETE
//! /me/rules/{ruleId}`), alarm acknowledgement (`POST /me/alarms/{alarmId}/ack`) and the
//! owner's retention per device type (`PUT /me/retention`, AP-R1, and its read `GET
//! /me/retention`, AP-R2, served beside the write it shows, as a settings page reads it). The
//! functions split by caller and kind of request, not by entity: owners' reads are
//! `dashboard`'s, what devices send is `ingest`'s, owners' writes are this one's. The name is
//! kept because the template, Makefile, samples and docs all use it.
//!
//! A thin adapter: each route validates its input into the `shared` types, calls one
//! access-pattern operation, and maps the result to a response. The routes live in
//! [`routes`], one module per resource; this file only names them.

mod adapters;
mod routes;

use std::sync::Arc;

use axum::extract::FromRef;
use axum::routing::{delete, get, patch, post, put};
use axum::Router;

use shared::http::fleet::FleetRoutes;
use shared::model::ids::UserId;
use shared::ops::limits::{KeyedLimiter, RegistrationLimit};
use shared::store::firmware_images::FirmwareImages;
use shared::FleetTable;

use routes::{
    alarms, devices, invitations, members, moves, organizations, profile, retention, rules, twin,
};

/// What the routes share in one execution environment: the table, the per-user
/// registration buckets and the firmware image bucket (an organization's deletion deletes its
/// images).
#[derive(Clone)]
struct DeviceUpdates {
    table: FleetTable,
    registrations: Arc<KeyedLimiter<UserId>>,
    images: FirmwareImages,
}

impl FromRef<DeviceUpdates> for FleetTable {
    fn from_ref(state: &DeviceUpdates) -> Self {
        state.table.clone()
    }
}

impl FromRef<DeviceUpdates> for FirmwareImages {
    fn from_ref(state: &DeviceUpdates) -> Self {
        state.images.clone()
    }
}

impl FromRef<DeviceUpdates> for Arc<KeyedLimiter<UserId>> {
    fn from_ref(state: &DeviceUpdates) -> Self {
        state.registrations.clone()
    }
}

/// The function's routes: the caller's profile and devices, registrations limited per user
/// by `limit` (in this execution environment), a deleted organization's firmware images
/// deleted from `images`.
pub fn router(table: FleetTable, limit: RegistrationLimit, images: FirmwareImages) -> Router {
    Router::new()
        .route("/me", put(profile::put_profile))
        .fleet_route("/devices", post(devices::register_device))
        .fleet_route(
            "/devices/{deviceId}",
            patch(devices::update_device).delete(devices::delete_device),
        )
        .fleet_route(
            "/devices/{deviceId}/token",
            post(devices::rotate_token).delete(devices::revoke_token),
        )
        .fleet_route("/devices/{deviceId}/desired", put(twin::set_desired))
        .fleet_route("/devices/{deviceId}/commands", post(twin::queue_command))
        .fleet_route("/rollouts", post(twin::start_rollout))
        .fleet_route("/rules", post(rules::create_rule))
        .fleet_route(
            "/rules/{ruleId}",
            patch(rules::update_rule).delete(rules::delete_rule),
        )
        .fleet_route("/alarms/{alarmId}/ack", post(alarms::acknowledge_alarm))
        .fleet_route(
            "/retention",
            get(retention::get_retention).put(retention::put_retention),
        )
        .route("/orgs", post(organizations::create_org))
        .route(
            "/orgs/{orgId}",
            patch(organizations::rename_org).delete(organizations::delete_org),
        )
        .route(
            "/orgs/{orgId}/members/{userId}",
            patch(members::change_member_role).delete(members::remove_member),
        )
        .route("/orgs/{orgId}/invitations", post(invitations::invite))
        .route(
            "/orgs/{orgId}/invitations/{invitationId}",
            delete(invitations::revoke_invitation),
        )
        .route(
            "/invitations/{code}/accept",
            post(invitations::accept_invitation),
        )
        .fleet_route("/devices/{deviceId}/move", post(moves::move_device))
        .with_state(DeviceUpdates {
            table,
            registrations: Arc::new(limit.limiter()),
            images,
        })
}
