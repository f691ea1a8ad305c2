//! The `device-updates` Lambda bootstrap: logging, the Router built once, the runtime loop.

use lambda_http::Error;
use shared::http::gateway;
use shared::ops::limits::RegistrationLimit;
use shared::store::firmware_images::FirmwareImages;
use shared::FleetTable;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let router = device_updates::router(
        FleetTable::from_env().await?,
        RegistrationLimit::from_env()?,
        FirmwareImages::from_env().await?,
    );
    lambda_http::run(gateway::app(router)).await
}
