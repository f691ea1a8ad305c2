//! The `webhooks` Lambda bootstrap (API routes): logging, the Router built once, the runtime
//! loop.

use lambda_http::Error;
use shared::http::gateway;
use shared::model::webhook::target::TargetPolicy;
use shared::ops::webhooks::DeliveryQueue;
use shared::FleetTable;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let state = webhooks::WebhooksState {
        table: FleetTable::from_env().await?,
        queue: DeliveryQueue::from_env().await?,
        policy: TargetPolicy::from_env(),
    };
    lambda_http::run(gateway::app(webhooks::router(state))).await
}
