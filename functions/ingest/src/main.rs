//! The `ingest` Lambda bootstrap: logging, the SDK client, the warm caches, the runtime loop.

use std::convert::Infallible;

use lambda_http::{service_fn, Error, Request};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_json_logs();
    // Built once per execution environment: the client and the registration and device
    // summary caches are reused by every invocation.
    let table = FleetTable::from_env().await?;
    let ingestor: &'static Ingestor =
        Box::leak(Box::new(Ingestor::new(table, IngestConfig::from_env()?)));
    lambda_http::run(service_fn(move |req: Request| async move {
        Ok::<_, Infallible>(ingest::handle(ingestor, req).await)
    }))
    .await
}
