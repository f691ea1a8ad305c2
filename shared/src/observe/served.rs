//! One shape for measuring served work, an API request or a daily run alike: its DynamoDB
//! work metered, its X-Ray subsegments sent when the invocation is sampled, its latency
//! taken. The caller then writes its own EMF document and log line from the figures.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use crate::observe::trace::{self, HandledRequest, TraceHeader};
use crate::store::deadline::Deadline;
use crate::store::metrics::{MeterSnapshot, RequestMeter};

/// What served work did: its outcome and what it cost.
#[derive(Debug)]
pub struct Served<T> {
    /// The work's result.
    pub outcome: T,
    /// Its status as the segment and the log report it (HTTP status; 200/500 for a run).
    pub status: u16,
    /// The DynamoDB requests, attempts and capacity it consumed.
    pub used: MeterSnapshot,
    /// Wall time, in milliseconds.
    pub latency_ms: f64,
}

/// Runs `work` under `meter`, reads its status with `status_of`, and, when `trace` is a
/// sampled invocation, sends one subsegment named `segment` with one per DynamoDB call under
/// it.
pub async fn serve_observed<T>(
    meter: RequestMeter,
    trace: Option<&TraceHeader>,
    segment: &str,
    work: impl Future<Output = T>,
    status_of: impl FnOnce(&T) -> u16,
) -> Served<T> {
    let started = Instant::now();
    let started_at = SystemTime::now();
    let outcome = meter.clone().scope(work).await;
    let status = status_of(&outcome);
    let used = meter.snapshot();
    if let Some(header) = trace {
        trace::send(trace::request_documents(
            header,
            &HandledRequest {
                route: segment,
                status,
                start: started_at,
                end: SystemTime::now(),
                calls: &used.calls,
            },
        ));
    }
    Served {
        outcome,
        status,
        used,
        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
    }
}

/// A scheduled or stream-triggered run (not an API request): `work` served as in
/// [`serve_observed`] with status 200 or 500, then its one EMF document and its one
/// `invocation` log line, naming `function`.
pub async fn serve_run<T, E>(
    function: &'static str,
    trace: Option<&TraceHeader>,
    segment: &str,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let Served {
        outcome,
        used,
        latency_ms,
        ..
    } = serve_observed(RequestMeter::new(), trace, segment, work, |result| {
        if result.is_ok() {
            200
        } else {
            500
        }
    })
    .await;
    crate::observe::emf::emit(&crate::observe::emf::run_document(
        latency_ms,
        outcome.is_err(),
        &used,
    ));
    tracing::info!(
        function,
        ok = outcome.is_ok(),
        latency_ms,
        ddb_requests = used.requests(),
        rcu = used.read_units,
        wcu = used.write_units,
        "invocation"
    );
    outcome
}

/// One Lambda invocation of a scheduled or stream-triggered function, its handler one call:
/// `work` runs until the deadline Lambda gave (`lambda_deadline`, or the function's `timeout`
/// from now when that one is not usable, [`Deadline::from_lambda`]), served as in [`serve_run`]
/// in the trace of `xray_trace_id` (the invocation's `Lambda-Runtime-Trace-Id`).
pub async fn serve_invocation<T, E, F>(
    function: &'static str,
    segment: &str,
    lambda_deadline: SystemTime,
    timeout: Duration,
    xray_trace_id: Option<&str>,
    work: impl FnOnce(Instant) -> F,
) -> Result<T, E>
where
    F: Future<Output = Result<T, E>>,
{
    let deadline = Deadline::from_lambda(lambda_deadline, timeout);
    // Boxed: a run's future is large, and the runtime's own future holds this one.
    let work = Box::pin(work(deadline.instant()));
    serve_traced_run(function, xray_trace_id, segment, work).await
}

/// [`serve_run`] in the trace of `trace_header` (a `Lambda-Runtime-Trace-Id`; none, or one
/// that does not parse, sends no segment). Box a large `work` (`Box::pin`) before passing it.
pub async fn serve_traced_run<T, E>(
    function: &'static str,
    trace_header: Option<&str>,
    segment: &str,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let trace = trace_header.and_then(TraceHeader::parse);
    serve_run(function, trace.as_ref(), segment, work).await
}
