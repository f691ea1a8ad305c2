//! Logging set-up shared by every binary: JSON lines (CloudWatch keeps one event per line),
//! level from `RUST_LOG` (default `info`).

use std::cell::RefCell;
use std::thread::LocalKey;

use serde_json::Value;
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

/// Where a test collects the documents a function would write out (metric documents, trace
/// segments): one per kind, per thread.
pub(crate) type Capture = LocalKey<RefCell<Option<Vec<Value>>>>;

/// Runs `fut` with `capture` collecting on this thread; returns what it collected.
pub(crate) async fn capture_documents<F: std::future::Future>(
    capture: &'static Capture,
    fut: F,
) -> (F::Output, Vec<Value>) {
    let previous = capture.with(|c| c.borrow_mut().replace(Vec::new()));
    let out = fut.await;
    let docs = capture.with(|c| std::mem::replace(&mut *c.borrow_mut(), previous));
    (out, docs.unwrap_or_default())
}

/// Adds `docs` to `capture` if a test is collecting on this thread; `false` if none is.
pub(crate) fn captured(capture: &'static Capture, docs: &[Value]) -> bool {
    capture.with(|c| match c.borrow_mut().as_mut() {
        Some(collected) => {
            collected.extend_from_slice(docs);
            true
        }
        None => false,
    })
}
