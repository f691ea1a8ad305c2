//! The `rollout-worker` Lambda bootstrap: logging, the table client built once, the runtime loop.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let state = &rollout_worker::State::from_env().await?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        state.handle(event).await.map_err(Error::from)
    }))
    .await
}
