//! dashboard: every read route. A thin adapter: validate path and query parameters into the
//! `shared` types, call one access-pattern operation, shape the JSON. The routes live
//! in [`routes`], one module per resource; this file only names them.

mod adapters;
mod routes;

use axum::routing::get;
use axum::Router;

use shared::http::fleet::FleetRoutes;
use shared::FleetTable;

use routes::{
    admin, alarms, dashboard, devices, events, invitations, members, organizations, profile, rules,
    series, twin,
};

/// The function's routes: the caller's own data (`GET /me...`) and operator reads across
/// users (`GET /admin/...`, admin group only).
pub fn router(table: FleetTable) -> Router {
    Router::new()
        .route("/me", get(profile::get_profile))
        .fleet_route("/dashboard", get(dashboard::get_dashboard))
        .fleet_route("/devices", get(devices::device_listing))
        .fleet_route("/devices/{deviceId}", get(devices::get_device))
        .fleet_route("/devices/{deviceId}/events", get(events::device_events))
        .fleet_route("/devices/{deviceId}/series", get(series::device_series))
        .fleet_route("/devices/{deviceId}/commands", get(twin::device_commands))
        .fleet_route("/rollouts/{rolloutId}", get(twin::get_rollout))
        .fleet_route("/events", get(events::user_events))
        .route("/admin/events", get(admin::events_by_type))
        .route("/admin/devices", get(admin::devices_by_status))
        .route("/admin/reports/{date}", get(admin::get_report))
        .fleet_route("/rules", get(rules::list_rules))
        .fleet_route("/alarms", get(alarms::owner_alarms))
        .fleet_route("/devices/{deviceId}/alarms", get(alarms::device_alarms))
        .route("/admin/alarms", get(admin::open_alarms))
        .route("/orgs", get(organizations::my_orgs))
        .route("/orgs/{orgId}", get(organizations::get_org))
        .route("/orgs/{orgId}/members", get(members::org_members))
        .route(
            "/orgs/{orgId}/invitations",
            get(invitations::org_invitations),
        )
        .with_state(table)
}
