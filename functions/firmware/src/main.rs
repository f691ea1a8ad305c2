//! The `firmware` Lambda bootstrap: logging, the table and the image bucket from the
//! environment, the Router built once, the runtime loop.

use lambda_http::Error;
use shared::http::gateway;
use shared::store::firmware_images::FirmwareImages;
use shared::FleetTable;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let state = firmware::FirmwareState {
        table: FleetTable::from_env().await?,
        images: FirmwareImages::from_env().await?,
    };
    lambda_http::run(gateway::app(firmware::router(state))).await
}
