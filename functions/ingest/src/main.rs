//! The `ingest` Lambda bootstrap: logging, the Router built once, the runtime loop.

use lambda_http::Error;
use shared::http::gateway;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let router = ingest::router(ingest::ingestor_from_env().await?);
    lambda_http::run(gateway::app(router)).await
}
