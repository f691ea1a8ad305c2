//! X-Ray traces without an SDK: one subsegment per API request's handler and one per
//! DynamoDB call in it, joined to the invocation's trace (the `Lambda-Runtime-Trace-Id` the
//! runtime received, `Root=...;Parent=...;Sampled=...`) and sent as segment documents to the
//! X-Ray daemon Lambda runs beside every function with `Tracing: Active`
//! (`AWS_XRAY_DAEMON_ADDRESS`, UDP). Nothing is sent when the invocation is not sampled.
//!
//! Why not OpenTelemetry: from Lambda, OTLP spans reach X-Ray through a collector (the ADOT
//! layer), a second process started with every cold start; the daemon protocol (a JSON header
//! line and a segment document per datagram) is the one the X-Ray SDKs use, is stable, and
//! costs one UDP socket here. docs/operations.md, "Traces".
//!
//! The DynamoDB calls are timed by [`crate::store::metrics::MeteringInterceptor`] into the request's
//! [`crate::store::metrics::MeterSnapshot::calls`].

use std::cell::RefCell;
use std::net::UdpSocket;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::store::metrics::DynamoCall;

/// The X-Ray daemon's datagram header.
const DAEMON_HEADER: &str = "{\"format\": \"json\", \"version\": 1}\n";

/// The invocation's trace header, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceHeader {
    /// `Root`: the trace id (`1-<8 hex time>-<24 hex>`).
    pub root: String,
    /// `Parent`: the id of Lambda's function segment.
    pub parent: Option<String>,
    /// `Sampled=1`.
    pub sampled: bool,
}

impl TraceHeader {
    /// Parses `Root=1-...;Parent=...;Sampled=1` (any order; unknown keys ignored).
    pub fn parse(header: &str) -> Option<Self> {
        let mut root = None;
        let mut parent = None;
        let mut sampled = false;
        for part in header.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", v)) => root = Some(v.to_string()),
                Some(("Parent", v)) => parent = Some(v.to_string()),
                Some(("Sampled", v)) => sampled = v == "1",
                _ => {}
            }
        }
        Some(Self {
            root: root.filter(|r| r.starts_with("1-"))?,
            parent,
            sampled,
        })
    }
}

/// One handled API request, as its trace shows it.
#[derive(Debug)]
pub struct HandledRequest<'a> {
    /// The route key.
    pub route: &'a str,
    /// The answer's status.
    pub status: u16,
    /// When the handler started and ended.
    pub start: SystemTime,
    /// When the answer was ready.
    pub end: SystemTime,
    /// The DynamoDB calls it made.
    pub calls: &'a [DynamoCall],
}

/// The segment documents of one request: its handler's subsegment (a child of Lambda's
/// function segment) and one per DynamoDB call (children of the handler's). Empty when the
/// invocation is not sampled or has no parent to join.
pub fn request_documents(header: &TraceHeader, request: &HandledRequest<'_>) -> Vec<Value> {
    let Some(parent) = header.parent.as_deref().filter(|_| header.sampled) else {
        return Vec::new();
    };
    let handler_id = segment_id();
    let mut docs = vec![json!({
        "type": "subsegment",
        "name": request.route,
        "id": handler_id,
        "trace_id": header.root,
        "parent_id": parent,
        "start_time": seconds(request.start),
        "end_time": seconds(request.end),
        "http": {"response": {"status": request.status}},
        "error": (400..500).contains(&request.status),
        "fault": request.status >= 500,
        "annotations": {"route": request.route, "status": request.status},
    })];
    for call in request.calls {
        docs.push(json!({
            "type": "subsegment",
            "name": "DynamoDB",
            "namespace": "aws",
            "id": segment_id(),
            "trace_id": header.root,
            "parent_id": handler_id,
            "start_time": seconds(call.start),
            "end_time": seconds(call.end),
            "fault": !call.ok,
            "aws": {"operation": call.operation, "retries": call.attempts.saturating_sub(1)},
        }));
    }
    docs
}

/// Sends `docs`: to the capture of [`capture`] if one is active on this thread, else to the
/// X-Ray daemon when `AWS_XRAY_DAEMON_ADDRESS` is set (in Lambda), else nowhere.
pub fn send(docs: Vec<Value>) {
    if docs.is_empty() {
        return;
    }
    if crate::observe::telemetry::captured(&CAPTURE, &docs) {
        return;
    }
    let Some((socket, daemon)) = daemon() else {
        return;
    };
    for doc in docs {
        // Best effort, like the X-Ray SDKs: a lost datagram loses a subsegment, never a request.
        let _ = socket.send_to(format!("{DAEMON_HEADER}{doc}").as_bytes(), daemon);
    }
}

/// Runs `fut` with the documents [`send`] would send on this thread collected instead.
/// For tests on a current-thread runtime.
pub async fn capture<F: std::future::Future>(fut: F) -> (F::Output, Vec<Value>) {
    crate::observe::telemetry::capture_documents(&CAPTURE, fut).await
}

thread_local! {
    static CAPTURE: RefCell<Option<Vec<Value>>> = const { RefCell::new(None) };
}

/// The UDP socket and the daemon's address, made on first use (not at cold start).
fn daemon() -> Option<&'static (UdpSocket, std::net::SocketAddr)> {
    static DAEMON: OnceLock<Option<(UdpSocket, std::net::SocketAddr)>> = OnceLock::new();
    DAEMON
        .get_or_init(|| {
            let address = daemon_address(&std::env::var("AWS_XRAY_DAEMON_ADDRESS").ok()?)?;
            let socket = UdpSocket::bind(("0.0.0.0", 0)).ok()?;
            Some((socket, address))
        })
        .as_ref()
}

/// The UDP address in `AWS_XRAY_DAEMON_ADDRESS`: `host:port`, or `tcp:host:port udp:host:port`.
pub fn daemon_address(value: &str) -> Option<std::net::SocketAddr> {
    let udp = value
        .split_whitespace()
        .find_map(|part| part.strip_prefix("udp:"))
        .unwrap_or(value.trim());
    use std::net::ToSocketAddrs;
    udp.to_socket_addrs().ok()?.next()
}

/// A new 16-hex-digit segment id.
fn segment_id() -> String {
    let mut bytes = [0u8; 8];
    // An id that cannot be random is still unique enough for one trace.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        bytes = nanos.to_be_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Epoch seconds with microseconds, as X-Ray wants them.
fn seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_headers_and_daemon_addresses() {
        let h = TraceHeader::parse(
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        )
        .unwrap();
        assert_eq!(h.root, "1-5759e988-bd862e3fe1be46a994272793");
        assert_eq!(h.parent.as_deref(), Some("53995c3f42cd8ad8"));
        assert!(h.sampled);
        let unsampled = TraceHeader::parse("Sampled=0;Root=1-a-b").unwrap();
        assert!(!unsampled.sampled && unsampled.parent.is_none());
        assert!(TraceHeader::parse("Parent=1;Sampled=1").is_none());
        assert_eq!(
            daemon_address("169.254.79.129:2000").unwrap().to_string(),
            "169.254.79.129:2000"
        );
        assert_eq!(
            daemon_address("tcp:127.0.0.1:2000 udp:127.0.0.1:2001")
                .unwrap()
                .port(),
            2001
        );
        assert_eq!(segment_id().len(), 16);
        assert_ne!(segment_id(), segment_id());
    }
}
