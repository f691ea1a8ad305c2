//! A fault-injecting loopback HTTP proxy in front of DynamoDB Local: the "real path" for fault
//! tests. The functions' SDK client talks to the proxy exactly as it would to DynamoDB; the
//! proxy forwards every request unchanged except those it picks, per request and per operation
//! (the `X-Amz-Target` header), with a seeded random draw, to:
//!
//! - answer `400 ProvisionedThroughputExceededException` or `400 ThrottlingException`, with
//!   the bodies DynamoDB sends (nothing forwarded);
//! - answer `500 InternalServerError` (nothing forwarded);
//! - close the connection without forwarding (the client sees a reset, nothing was applied);
//! - forward, let DynamoDB Local apply the request, then close the connection (applied, answer
//!   lost);
//! - hold the request for [`ProxyConfig::delay`] before forwarding (past the client's attempt
//!   timeout: the client gives up and retries, and the original lands late);
//! - for `BatchWriteItem`, forward only a subset of the items and return the rest as real
//!   `UnprocessedItems`, merged into DynamoDB Local's own answer.
//!
//! Rates are per kind, with overrides per operation, and the draws come from one generator
//! seeded with [`ProxyConfig::seed`]: the same seed gives the same sequence of decisions
//! (which request gets which decision still depends on how concurrent requests interleave).
//!
//! [`Aimed`] faults break chosen requests instead, before any draw: hold back the
//! `BatchWriteItem` items a filter picks (answered as `UnprocessedItems`), or let DynamoDB Local
//! apply the next requests of an operation and answer them with a throttling error (the
//! answer is lost). This proxy is the test kit's one fault mechanism: the client never knows.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use shared::FleetTable;

use crate::http_server;
use crate::stack::local_client;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;

/// One kind of injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// 400 `ProvisionedThroughputExceededException`, not forwarded.
    ThroughputExceeded,
    /// 400 `ThrottlingException` (on-demand tables), not forwarded.
    Throttling,
    /// 500 `InternalServerError`, not forwarded.
    InternalError,
    /// Connection closed before forwarding: nothing applied, no answer.
    DropBeforeForward,
    /// Forwarded and applied, then the connection is closed: the answer is lost.
    DropAfterForward,
    /// Held for [`ProxyConfig::delay`], then forwarded: applied late, after the client gave up.
    Delay,
    /// `BatchWriteItem` only: a subset forwarded, the rest answered as `UnprocessedItems`.
    Unprocessed,
}

impl Fault {
    /// Every kind, in the order the draw walks them.
    pub const ALL: [Fault; 7] = [
        Fault::ThroughputExceeded,
        Fault::Throttling,
        Fault::InternalError,
        Fault::DropBeforeForward,
        Fault::DropAfterForward,
        Fault::Delay,
        Fault::Unprocessed,
    ];

    /// A stable name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Fault::ThroughputExceeded => "throughput-exceeded-400",
            Fault::Throttling => "throttling-400",
            Fault::InternalError => "internal-error-500",
            Fault::DropBeforeForward => "dropped-before-forwarding",
            Fault::DropAfterForward => "dropped-after-forwarding",
            Fault::Delay => "delayed-past-timeout",
            Fault::Unprocessed => "unprocessed-items",
        }
    }
}

/// The probability of each fault kind for one request (their sum at most 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultRates {
    /// See [`Fault::ThroughputExceeded`].
    pub throughput_exceeded: f64,
    /// See [`Fault::Throttling`].
    pub throttling: f64,
    /// See [`Fault::InternalError`].
    pub internal_error: f64,
    /// See [`Fault::DropBeforeForward`].
    pub drop_before_forward: f64,
    /// See [`Fault::DropAfterForward`].
    pub drop_after_forward: f64,
    /// See [`Fault::Delay`].
    pub delay: f64,
    /// See [`Fault::Unprocessed`]; applies to `BatchWriteItem` only.
    pub unprocessed: f64,
}

impl FaultRates {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// `total` spread evenly over every kind (a request that is not a `BatchWriteItem` cannot
    /// get [`Fault::Unprocessed`], so it sees 6/7 of `total`).
    pub fn uniform(total: f64) -> Self {
        let each = total / Fault::ALL.len() as f64;
        Self {
            throughput_exceeded: each,
            throttling: each,
            internal_error: each,
            drop_before_forward: each,
            drop_after_forward: each,
            delay: each,
            unprocessed: each,
        }
    }

    /// The rate of `fault`.
    pub fn rate(&self, fault: Fault) -> f64 {
        match fault {
            Fault::ThroughputExceeded => self.throughput_exceeded,
            Fault::Throttling => self.throttling,
            Fault::InternalError => self.internal_error,
            Fault::DropBeforeForward => self.drop_before_forward,
            Fault::DropAfterForward => self.drop_after_forward,
            Fault::Delay => self.delay,
            Fault::Unprocessed => self.unprocessed,
        }
    }

    fn total(&self) -> f64 {
        Fault::ALL.iter().map(|f| self.rate(*f)).sum()
    }

    /// The fault a draw in `0..1` selects for `operation`, if any.
    fn pick(&self, draw: f64, operation: &str) -> Option<Fault> {
        let mut edge = 0.0;
        for fault in Fault::ALL {
            edge += self.rate(fault);
            if draw < edge {
                let applies = fault != Fault::Unprocessed || operation == "BatchWriteItem";
                return applies.then_some(fault);
            }
        }
        None
    }
}

/// Picks `BatchWriteItem` items (a `PutRequest`'s `Item`, in DynamoDB JSON) to hold back.
pub type ItemFilter = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// A fault aimed at chosen requests, applied before any random draw; `times` counts the
/// requests it may still break (`u32::MAX`: all of them).
#[derive(Clone)]
pub enum Aimed {
    /// The next `times` `BatchWriteItem` requests holding items that `hold` picks: those items
    /// are not forwarded and come back as `UnprocessedItems` (a batch held back whole is
    /// answered without forwarding, as DynamoDB rejects an empty batch).
    HoldBack {
        /// The items to hold back.
        hold: ItemFilter,
        /// Requests left to break.
        times: Arc<AtomicU32>,
    },
    /// The next `times` requests of `operation` are applied by DynamoDB Local, then answered
    /// `400 ProvisionedThroughputExceededException`.
    ThrottleAfterApplying {
        /// `BatchWriteItem`, `UpdateItem`, ...
        operation: &'static str,
        /// Requests left to break.
        times: Arc<AtomicU32>,
    },
    /// The next `times` requests of `operation` are refused, not forwarded, with
    /// `400 ValidationException`: DynamoDB refusing the request itself (no retry changes it).
    Refuse {
        /// `TransactWriteItems`, ...
        operation: &'static str,
        /// Requests left to break.
        times: Arc<AtomicU32>,
    },
}

impl Aimed {
    /// Holds back the items `hold` picks in the next `times` `BatchWriteItem` requests that
    /// hold any.
    pub fn hold_back(hold: impl Fn(&Value) -> bool + Send + Sync + 'static, times: u32) -> Self {
        Aimed::HoldBack {
            hold: Arc::new(hold),
            times: Arc::new(AtomicU32::new(times)),
        }
    }

    /// Refuses the next `times` requests of `operation` with a ValidationException.
    pub fn refuse(operation: &'static str, times: u32) -> Self {
        Aimed::Refuse {
            operation,
            times: Arc::new(AtomicU32::new(times)),
        }
    }

    /// Applies and then throttles the next `times` requests of `operation`.
    pub fn throttle_after_applying(operation: &'static str, times: u32) -> Self {
        Aimed::ThrottleAfterApplying {
            operation,
            times: Arc::new(AtomicU32::new(times)),
        }
    }
}

impl std::fmt::Debug for Aimed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Aimed::HoldBack { times, .. } => write!(f, "HoldBack({times:?})"),
            Aimed::ThrottleAfterApplying { operation, times } => {
                write!(f, "ThrottleAfterApplying({operation}, {times:?})")
            }
            Aimed::Refuse { operation, times } => write!(f, "Refuse({operation}, {times:?})"),
        }
    }
}

/// The stats name of a throttling answer to a request DynamoDB Local applied.
pub const THROTTLED_AFTER_APPLYING: &str = "throttled-after-applying";

/// Decrements `counter` unless it is 0; `u32::MAX` never runs out.
fn take(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            0 => None,
            u32::MAX => Some(u32::MAX),
            n => Some(n - 1),
        })
        .is_ok()
}

/// What the proxy breaks, how often, and with which seed.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Faults aimed at chosen requests, before any draw.
    pub aimed: Vec<Aimed>,
    /// Seed of the decision generator.
    pub seed: u64,
    /// Rates for every operation without its own entry in `operations`.
    pub rates: FaultRates,
    /// Rates by operation name (`BatchWriteItem`, `UpdateItem`, ...).
    pub operations: BTreeMap<String, FaultRates>,
    /// How long a [`Fault::Delay`] holds a request; set it past the client's attempt timeout.
    pub delay: Duration,
}

impl ProxyConfig {
    /// `rates` for every operation, with `seed`; delays of 1.5 s.
    pub fn new(seed: u64, rates: FaultRates) -> Self {
        Self {
            aimed: Vec::new(),
            seed,
            rates,
            operations: BTreeMap::new(),
            delay: Duration::from_millis(1500),
        }
    }

    fn rates_for(&self, operation: &str) -> &FaultRates {
        self.operations.get(operation).unwrap_or(&self.rates)
    }
}

/// What the proxy saw and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Requests received, by operation.
    pub requests: BTreeMap<String, u64>,
    /// Faults injected, by kind name ([`Fault::name`]).
    pub faults: BTreeMap<&'static str, u64>,
    /// Faults injected, by operation and kind name.
    pub faults_by_operation: BTreeMap<(String, &'static str), u64>,
    /// BatchWriteItem items answered as unprocessed instead of being forwarded.
    pub items_held_back: u64,
    /// Statuses of the answers the client received (dropped connections have none).
    pub answers: BTreeMap<u16, u64>,
}

impl ProxyStats {
    /// Faults injected in all.
    pub fn total_faults(&self) -> u64 {
        self.faults.values().sum()
    }

    /// Requests received in all.
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }
}

/// What the proxy does with one request.
#[derive(Clone, Copy, Debug)]
struct Decision {
    fault: Option<Fault>,
    request_id: u64,
    /// For [`Fault::Unprocessed`]: the share of the batch held back.
    split: f64,
}

struct Shared {
    upstream: String,
    config: ProxyConfig,
    http: reqwest::Client,
    rng: Mutex<StdRng>,
    enabled: AtomicBool,
    stats: Mutex<ProxyStats>,
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    endpoint: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// Why the proxy closes a connection instead of answering.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by the fault proxy")
    }
}

impl std::error::Error for Dropped {}

type ProxyResponse = Result<Response<Full<Bytes>>, Dropped>;

impl FaultProxy {
    /// Starts a proxy for `upstream` (a DynamoDB Local endpoint) on a free loopback port.
    pub async fn start(upstream: &str, config: ProxyConfig) -> std::io::Result<Self> {
        if config.rates.total() > 1.0 || config.operations.values().any(|r| r.total() > 1.0) {
            return Err(std::io::Error::other("fault rates add up to more than 1"));
        }
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            rng: Mutex::new(StdRng::seed_from_u64(config.seed)),
            config,
            http,
            enabled: AtomicBool::new(true),
            stats: Mutex::new(ProxyStats::default()),
        });
        let served = Arc::clone(&shared);
        // A handler's `Dropped` closes the connection unanswered: that is the point.
        let (listener, addr) = http_server::bind_loopback().await?;
        let task = tokio::spawn(http_server::serve(
            listener,
            move |req, _| handle(Arc::clone(&served), req),
            std::future::pending(),
        ));
        Ok(Self {
            endpoint: format!("http://{addr}"),
            shared,
            task,
        })
    }

    /// The URL to point the SDK at.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Turns fault injection on or off (off: a plain pass-through, e.g. for test setup).
    pub fn set_enabled(&self, enabled: bool) {
        self.shared.enabled.store(enabled, Ordering::SeqCst);
    }

    /// The figures so far.
    pub fn stats(&self) -> ProxyStats {
        self.shared.stats.lock().expect("stats lock").clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The operation a request names (`DynamoDB_20120810.PutItem` -> `PutItem`).
fn operation_of(req: &Request<Incoming>) -> String {
    req.headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("unknown")
        .to_string()
}

const THROUGHPUT_EXCEEDED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."}"#;
const THROTTLING: &str = r#"{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"}"#;
const VALIDATION: &str = r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"Refused by the fault proxy (an aimed fault)"}"#;
/// The stats name of an aimed refusal.
const REFUSED: &str = "refused-validation-400";
const INTERNAL_ERROR: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}"#;

/// An error answer shaped like DynamoDB's.
fn dynamodb_error(
    status: StatusCode,
    body: &'static str,
    request_id: u64,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    if let Ok(id) = hyper::header::HeaderValue::from_str(&format!("FAULTPROXY{request_id:020}")) {
        headers.insert("x-amzn-requestid", id);
    }
    response
}

impl Shared {
    /// Draws the decision for the next request. Everything random about a request is drawn
    /// here, at once, so the n-th request to arrive always gets the n-th decision of the seed.
    fn decide(&self, operation: &str) -> Decision {
        let mut rng = self.rng.lock().expect("rng lock");
        let draw: f64 = rng.random();
        let decision = Decision {
            fault: None,
            request_id: rng.random(),
            split: rng.random(),
        };
        if !self.enabled.load(Ordering::SeqCst) {
            return decision;
        }
        Decision {
            fault: self.config.rates_for(operation).pick(draw, operation),
            ..decision
        }
    }

    fn record(&self, update: impl FnOnce(&mut ProxyStats)) {
        update(&mut self.stats.lock().expect("stats lock"));
    }

    fn count_fault(&self, operation: &str, fault: Fault) {
        self.record(|s| {
            *s.faults.entry(fault.name()).or_default() += 1;
            *s.faults_by_operation
                .entry((operation.to_string(), fault.name()))
                .or_default() += 1;
        });
    }

    /// Sends the request to DynamoDB Local and returns its answer as is.
    async fn forward(
        &self,
        parts: &hyper::http::request::Parts,
        body: Bytes,
    ) -> Result<Response<Full<Bytes>>, Dropped> {
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let mut request = self
            .http
            .request(parts.method.clone(), format!("{}{path}", self.upstream))
            .body(body);
        for (name, value) in &parts.headers {
            if name != hyper::header::HOST && name != hyper::header::CONTENT_LENGTH {
                request = request.header(name, value);
            }
        }
        let upstream = request.send().await.map_err(|_| Dropped)?;
        let status = upstream.status();
        let headers = upstream.headers().clone();
        let bytes = upstream.bytes().await.map_err(|_| Dropped)?;
        let mut response = Response::new(Full::new(bytes));
        *response.status_mut() = status;
        for (name, value) in &headers {
            if name != hyper::header::CONTENT_LENGTH && name != hyper::header::TRANSFER_ENCODING {
                response.headers_mut().insert(name, value.clone());
            }
        }
        Ok(response)
    }

    /// Carries out the [`Aimed`] faults that apply to this request; `None` when none does.
    /// A throttle goes first, and a throttled request uses up no hold-back: the answer that
    /// would have carried the held-back items is lost anyway.
    async fn aimed(
        &self,
        operation: &str,
        parts: &hyper::http::request::Parts,
        body: &Bytes,
    ) -> Option<ProxyResponse> {
        let refused = self.config.aimed.iter().any(|aimed| {
            matches!(aimed, Aimed::Refuse { operation: op, times }
                if *op == operation && take(times))
        });
        if refused {
            self.record(|s| {
                *s.faults.entry(REFUSED).or_default() += 1;
                *s.faults_by_operation
                    .entry((operation.to_string(), REFUSED))
                    .or_default() += 1;
            });
            return Some(Ok(dynamodb_error(StatusCode::BAD_REQUEST, VALIDATION, 0)));
        }
        let throttled = self.config.aimed.iter().any(|aimed| {
            matches!(aimed, Aimed::ThrottleAfterApplying { operation: op, times }
                if *op == operation && take(times))
        });
        if throttled {
            // Whatever DynamoDB Local answered, the client gets a throttle.
            let _ = self.forward(parts, body.clone()).await;
            self.record(|s| {
                *s.faults.entry(THROTTLED_AFTER_APPLYING).or_default() += 1;
                *s.faults_by_operation
                    .entry((operation.to_string(), THROTTLED_AFTER_APPLYING))
                    .or_default() += 1;
            });
            return Some(Ok(dynamodb_error(
                StatusCode::BAD_REQUEST,
                THROUGHPUT_EXCEEDED,
                0,
            )));
        }
        if operation != "BatchWriteItem" {
            return None;
        }
        let mut forwarded = body.clone();
        let mut held: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut applies = false;
        for aimed in &self.config.aimed {
            let Aimed::HoldBack { hold, times } = aimed else {
                continue;
            };
            let (rest, picked) = hold_back(&forwarded, hold.as_ref())?;
            let count: usize = picked.values().map(Vec::len).sum();
            if count == 0 || !take(times) {
                continue;
            }
            applies = true;
            self.record(|s| s.items_held_back += count as u64);
            self.count_fault(operation, Fault::Unprocessed);
            forwarded = rest;
            for (table, items) in picked {
                held.entry(table).or_default().extend(items);
            }
        }
        if !applies {
            return None;
        }
        if is_empty_batch(&forwarded) {
            let output = serde_json::json!({ "UnprocessedItems": held });
            let mut response = Response::new(Full::new(Bytes::from(output.to_string())));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/x-amz-json-1.0"),
            );
            return Some(Ok(response));
        }
        Some(match self.forward(parts, forwarded).await {
            Ok(response) => Ok(with_unprocessed(response, held).await),
            Err(dropped) => Err(dropped),
        })
    }

    /// Forwards part of a BatchWriteItem and reports the rest as unprocessed. `None` when the
    /// batch is too small to split (it is then forwarded whole).
    async fn forward_part(
        &self,
        parts: &hyper::http::request::Parts,
        body: &Bytes,
        split: f64,
    ) -> Option<Result<Response<Full<Bytes>>, Dropped>> {
        let mut input: Value = serde_json::from_slice(body).ok()?;
        let tables = input.get_mut("RequestItems")?.as_object_mut()?;
        let total: usize = tables
            .values()
            .map(|r| r.as_array().map_or(0, Vec::len))
            .sum();
        if total < 2 {
            return None;
        }
        // At least one item goes through and at least one is held back: DynamoDB answers a
        // batch it can process none of with an error, not with everything unprocessed.
        let held_count = ((split * (total - 1) as f64) as usize + 1).min(total - 1);
        let mut held: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut left = held_count;
        for (table, requests) in tables.iter_mut() {
            let Some(requests) = requests.as_array_mut() else {
                continue;
            };
            let take = left.min(requests.len());
            if take == 0 {
                continue;
            }
            let split = requests.len() - take;
            held.insert(table.clone(), requests.split_off(split));
            left -= take;
        }
        tables.retain(|_, r| r.as_array().is_some_and(|a| !a.is_empty()));
        let forwarded = Bytes::from(serde_json::to_vec(&input).ok()?);
        self.record(|s| s.items_held_back += held_count as u64);
        let response = match self.forward(parts, forwarded).await {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(with_unprocessed(response, held).await))
    }
}

/// Splits a BatchWriteItem body into the requests to forward and those `hold` picks, by
/// table. `None` when the body is not a BatchWriteItem.
fn hold_back(
    body: &Bytes,
    hold: &(dyn Fn(&Value) -> bool + Send + Sync),
) -> Option<(Bytes, BTreeMap<String, Vec<Value>>)> {
    let mut input: Value = serde_json::from_slice(body).ok()?;
    let tables = input.get_mut("RequestItems")?.as_object_mut()?;
    let mut held = BTreeMap::new();
    for (table, requests) in tables.iter_mut() {
        let Some(requests) = requests.as_array_mut() else {
            continue;
        };
        let (picked, kept): (Vec<Value>, Vec<Value>) = requests
            .drain(..)
            .partition(|r| r.pointer("/PutRequest/Item").is_some_and(hold));
        *requests = kept;
        if !picked.is_empty() {
            held.insert(table.clone(), picked);
        }
    }
    tables.retain(|_, r| r.as_array().is_some_and(|a| !a.is_empty()));
    Some((Bytes::from(serde_json::to_vec(&input).ok()?), held))
}

/// Whether a BatchWriteItem body has nothing left to write.
fn is_empty_batch(body: &Bytes) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("RequestItems")
                .and_then(Value::as_object)
                .map(|t| t.is_empty())
        })
        .unwrap_or(false)
}

/// DynamoDB Local's answer to a BatchWriteItem with `held` added to its `UnprocessedItems`
/// (an error answer, or one that does not parse, is returned as it is).
async fn with_unprocessed(
    response: Response<Full<Bytes>>,
    held: BTreeMap<String, Vec<Value>>,
) -> Response<Full<Bytes>> {
    if response.status() != StatusCode::OK || held.is_empty() {
        return response;
    }
    let (mut head, body) = response.into_parts();
    let Ok(collected) = body.collect().await;
    let bytes = collected.to_bytes();
    let Ok(mut output) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(head, Full::new(bytes));
    };
    let Some(object) = output.as_object_mut() else {
        return Response::from_parts(head, Full::new(bytes));
    };
    let unprocessed = object
        .entry("UnprocessedItems")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(unprocessed) = unprocessed.as_object_mut() {
        for (table, requests) in held {
            let entry = unprocessed
                .entry(table)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(list) = entry.as_array_mut() {
                list.extend(requests);
            }
        }
    }
    // The body changed: its checksum header no longer applies.
    head.headers.remove("x-amz-crc32");
    let bytes = serde_json::to_vec(&output)
        .map(Bytes::from)
        .unwrap_or(bytes);
    Response::from_parts(head, Full::new(bytes))
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> ProxyResponse {
    let operation = operation_of(&req);
    shared.record(|s| *s.requests.entry(operation.clone()).or_default() += 1);
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map_err(|_| Dropped)?.to_bytes();
    if let Some(result) = shared.aimed(&operation, &parts, &body).await {
        if let Ok(response) = &result {
            let status = response.status().as_u16();
            shared.record(|s| *s.answers.entry(status).or_default() += 1);
        }
        return result;
    }
    let decision = shared.decide(&operation);
    let result = match decision.fault {
        None => shared.forward(&parts, body).await,
        Some(fault) => inject(&shared, fault, &operation, &parts, body, decision).await,
    };
    if let Ok(response) = &result {
        let status = response.status().as_u16();
        shared.record(|s| *s.answers.entry(status).or_default() += 1);
    }
    result
}

async fn inject(
    shared: &Arc<Shared>,
    fault: Fault,
    operation: &str,
    parts: &hyper::http::request::Parts,
    body: Bytes,
    decision: Decision,
) -> ProxyResponse {
    let request_id = decision.request_id;
    match fault {
        Fault::ThroughputExceeded => {
            shared.count_fault(operation, fault);
            Ok(dynamodb_error(
                StatusCode::BAD_REQUEST,
                THROUGHPUT_EXCEEDED,
                request_id,
            ))
        }
        Fault::Throttling => {
            shared.count_fault(operation, fault);
            Ok(dynamodb_error(
                StatusCode::BAD_REQUEST,
                THROTTLING,
                request_id,
            ))
        }
        Fault::InternalError => {
            shared.count_fault(operation, fault);
            Ok(dynamodb_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                INTERNAL_ERROR,
                request_id,
            ))
        }
        Fault::DropBeforeForward => {
            shared.count_fault(operation, fault);
            Err(Dropped)
        }
        Fault::DropAfterForward => {
            shared.count_fault(operation, fault);
            // Whatever DynamoDB Local answered, the client never sees it.
            let _ = shared.forward(parts, body).await;
            Err(Dropped)
        }
        Fault::Delay => {
            shared.count_fault(operation, fault);
            // Forwarded on its own task, so the request lands even when the client has given
            // up and closed the connection meanwhile.
            let late = Arc::clone(shared);
            let parts = parts.clone();
            let forwarded = tokio::spawn(async move {
                tokio::time::sleep(late.config.delay).await;
                late.forward(&parts, body).await
            });
            forwarded.await.unwrap_or(Err(Dropped))
        }
        Fault::Unprocessed => match shared.forward_part(parts, &body, decision.split).await {
            Some(result) => {
                shared.count_fault(operation, fault);
                result
            }
            None => shared.forward(parts, body).await,
        },
    }
}

/// Timeouts for a client behind the proxy: short, so a delayed request costs a test a second,
/// not the Lambda's 3 s attempt timeout. The proxy's delay must be longer than `attempt`.
#[derive(Clone, Copy, Debug)]
pub struct ClientTimeouts {
    /// Per HTTP attempt.
    pub attempt: Duration,
    /// Per operation, retries included.
    pub operation: Duration,
}

impl Default for ClientTimeouts {
    fn default() -> Self {
        Self {
            attempt: Duration::from_millis(1000),
            operation: Duration::from_millis(6000),
        }
    }
}

/// `table` as the functions would see it through the proxy at `endpoint`: the same metered
/// client with bounded retries (`shared::store::table::dynamodb_client`), with `timeouts`.
pub async fn through_proxy(
    table: &FleetTable,
    endpoint: &str,
    timeouts: ClientTimeouts,
) -> FleetTable {
    let client = local_client(endpoint).await;
    let conf = client
        .config()
        .to_builder()
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(timeouts.attempt)
                .operation_attempt_timeout(timeouts.attempt)
                .operation_timeout(timeouts.operation)
                .build(),
        )
        .build();
    FleetTable::new(
        aws_sdk_dynamodb::Client::from_conf(conf),
        table.config.clone(),
    )
}
