//! The `webhook-delivery` Lambda bootstrap (SQS-triggered): logging, the sender built once,
//! the runtime loop.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::observe::telemetry::init_json_logs();
    let worker = &webhooks::worker::DeliveryWorker::from_env().await?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        worker.handle(event.payload).await.map_err(Error::from)
    }))
    .await
}
