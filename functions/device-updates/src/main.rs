//! The `device-updates` Lambda bootstrap: logging, the Router built once, the runtime loop.

use lambda_http::Error;
use shared::http::gateway::{ApiState, Gateway};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let router = device_updates::router(ApiState::from_env().await?);
    lambda_http::run(Gateway::new(router)).await
}
