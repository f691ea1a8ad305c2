//! webhooks (issue 41): the `/me/webhooks` routes (endpoints and their delivery logs) (and their `/orgs/{orgId}` twins), a thin
//! adapter from HTTP to `shared::ops::webhooks`, and the delivery [`worker`] that the
//! delivery queue triggers. The routes live in [`routes`]; this file only names them.

mod routes;
pub mod worker;

use axum::extract::FromRef;
use axum::routing::{get, post};
use axum::Router;

use shared::http::fleet::FleetRoutes;
use shared::model::webhook::target::TargetPolicy;
use shared::ops::webhooks::DeliveryQueue;
use shared::FleetTable;

use routes::{deliveries, webhooks};

/// What the routes need: the table, the delivery queue and the target policy.
#[derive(Clone)]
pub struct WebhooksState {
    /// The table.
    pub table: FleetTable,
    /// The delivery queue.
    pub queue: DeliveryQueue,
    /// Which URLs may be targets.
    pub policy: TargetPolicy,
}

impl FromRef<WebhooksState> for FleetTable {
    fn from_ref(state: &WebhooksState) -> Self {
        state.table.clone()
    }
}

/// The function's routes.
pub fn router(state: WebhooksState) -> Router {
    Router::new()
        .fleet_route(
            "/webhooks",
            get(webhooks::list_webhooks).post(webhooks::create_webhook),
        )
        .fleet_route(
            "/webhooks/{webhookId}",
            get(webhooks::get_webhook)
                .patch(webhooks::update_webhook)
                .delete(webhooks::delete_webhook),
        )
        .fleet_route(
            "/webhooks/{webhookId}/rotate-secret",
            post(webhooks::rotate_secret),
        )
        .fleet_route("/webhooks/{webhookId}/confirm", post(webhooks::confirm))
        .fleet_route("/webhooks/{webhookId}/test", post(webhooks::send_test))
        .fleet_route(
            "/webhooks/{webhookId}/deliveries",
            get(deliveries::list_deliveries),
        )
        .fleet_route(
            "/webhooks/{webhookId}/deliveries/{deliveryId}/retry",
            post(deliveries::retry_delivery),
        )
        .with_state(state)
}
