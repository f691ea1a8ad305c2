//! The `alarm-watch` Lambda bootstrap: logging, the state built once, the runtime loop.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let state = &alarm_watch::State::from_env().await?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        state.handle(event).await.map_err(Error::from)
    }))
    .await
}
