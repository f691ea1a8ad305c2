//! The `dashboard` Lambda bootstrap: logging, the SDK client, the runtime loop.

use std::convert::Infallible;

use lambda_http::{service_fn, Error, Request};
use shared::FleetTable;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_json_logs();
    // Built once per execution environment and reused by every invocation.
    let table: &'static FleetTable = Box::leak(Box::new(FleetTable::from_env().await?));
    lambda_http::run(service_fn(move |req: Request| async move {
        Ok::<_, Infallible>(dashboard::handle(table, req).await)
    }))
    .await
}
