//! The `daily-analytics` Lambda bootstrap: logging, the SDK client, the runtime loop.

use std::time::{Duration, Instant, SystemTime};

use daily_analytics::AnalyticsConfig;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;
use shared::FleetTable;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_json_logs();
    let table: &'static FleetTable = Box::leak(Box::new(FleetTable::from_env().await?));
    let config: &'static AnalyticsConfig = Box::leak(Box::new(AnalyticsConfig::from_env()?));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let left = event
            .context
            .deadline()
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        daily_analytics::handle(table, config, event.payload, Instant::now() + left)
            .await
            .map_err(Error::from)
    }))
    .await
}
