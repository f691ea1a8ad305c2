//! Logging set-up shared by every binary: JSON lines on stdout (CloudWatch keeps one event
//! per line), level from `RUST_LOG` (default `info`).

/// Installs the JSON log subscriber. Safe to call more than once (later calls are no-ops).
pub fn init_json_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
}
