//! Logging set-up shared by every binary: JSON lines (CloudWatch keeps one event per line),
//! level from `RUST_LOG` (default `info`).

use tracing_subscriber::fmt::MakeWriter;

/// The JSON log subscriber, writing to `writer` (stdout in the Lambdas; a buffer in tests).
pub fn json_subscriber<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

/// Installs the JSON log subscriber on stdout. Later calls are no-ops.
pub fn init_json_logs() {
    let _ = tracing::subscriber::set_global_default(json_subscriber(std::io::stdout));
}
