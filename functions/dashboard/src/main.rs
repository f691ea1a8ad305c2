//! The `dashboard` Lambda bootstrap: logging, the state built once, the runtime loop.

use std::convert::Infallible;

use lambda_http::{service_fn, Error, Request};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_json_logs();
    let state = &dashboard::State::from_env().await?;
    lambda_http::run(service_fn(move |req: Request| async move {
        Ok::<_, Infallible>(state.handle(req).await)
    }))
    .await
}
