//! The delivery worker. Fed by the table's stream of alarm items, it turns their transitions
//! into deliveries on the queue ([`shared::ops::webhooks::alarm_notices`]). Triggered by the
//! delivery queue (SQS, batches with
//! `ReportBatchItemFailures`), it plans each message's attempt from the table, checks the
//! target again (every address its host resolves to, through the client's own resolver, so a
//! name that rebinds to a private address between the check and the connection is still
//! refused), sends it (5 s timeout, redirects not followed), records the answer, and either
//! lets the message go (delivered, abandoned) or makes it visible again after the backoff.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::{json, Value};
use shared::model::timestamp::Timestamp;
use shared::model::webhook::target::TargetPolicy;
use shared::observe::emf;
use shared::ops::alarms::notify::{stream_record, StreamRecord};
use shared::ops::webhooks::alarm_notices::deliver_alarm_transitions;
use shared::ops::webhooks::deliveries::{
    prepare_attempt, record_attempt, Attempt, AttemptOutcome, Plan, RetrySchedule, Verdict,
    RESPONSE_PREFIX_BYTES,
};
use shared::ops::webhooks::{DeliveryMessage, DeliveryQueue};
use shared::{FleetError, FleetTable};

/// A delivery attempt's limit: an answer later than this is a failure (the 5 s).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Resolves a target's host and refuses the whole answer if any address is forbidden.
struct CheckedResolver {
    policy: TargetPolicy,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if addresses.is_empty() {
                return Err("the host resolved to no address".into());
            }
            for address in &addresses {
                if let Some(reason) = policy.refusal_any_port(address.ip()) {
                    return Err(format!("{} resolved to a {reason} address", name.as_str()).into());
                }
            }
            let addrs: Addrs = Box::new(addresses.into_iter());
            Ok(addrs)
        })
    }
}

/// The answer naming the records Lambda retries (`{"batchItemFailures": [...]}`).
fn batch_item_failures(ids: impl IntoIterator<Item = String>) -> Value {
    let failures: Vec<Value> = ids
        .into_iter()
        .map(|id| json!({"itemIdentifier": id}))
        .collect();
    json!({"batchItemFailures": failures})
}

/// How many times SQS has handed out `record`'s message, this time included (its
/// `ApproximateReceiveCount` attribute; 1 when absent).
fn receive_count(record: &Value) -> u32 {
    record["attributes"]["ApproximateReceiveCount"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// Sends deliveries: the table, the queue (to delay retries) and an HTTP client that never
/// follows a redirect and resolves through [`CheckedResolver`].
pub struct DeliveryWorker {
    table: FleetTable,
    queue: DeliveryQueue,
    policy: TargetPolicy,
    schedule: RetrySchedule,
    http: reqwest::Client,
    clock: Clock,
}

/// What the worker takes the time of an attempt from: the system's clock, or a test's (the
/// 3-day disable cannot wait 3 days).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

impl DeliveryWorker {
    /// A worker on `table` and `queue` under `policy`.
    pub fn new(
        table: FleetTable,
        queue: DeliveryQueue,
        policy: TargetPolicy,
        schedule: RetrySchedule,
    ) -> Result<Self, FleetError> {
        // The SDK's crypto (aws-lc) for TLS too; installing it twice is harmless.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(SEND_TIMEOUT)
            .connect_timeout(SEND_TIMEOUT)
            .no_proxy()
            .dns_resolver(Arc::new(CheckedResolver {
                policy: policy.clone(),
            }))
            .user_agent("DeviceFleet-Webhooks/1")
            .build()
            .map_err(FleetError::internal)?;
        Ok(Self {
            table,
            queue,
            policy,
            schedule,
            http,
            clock: Arc::new(Timestamp::now),
        })
    }

    /// The same worker, timing its attempts by `clock` (tests).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// From the environment: the table, the queue ([`shared::ops::webhooks::QUEUE_URL_ENV`]),
    /// the policy and the retry schedule.
    pub async fn from_env() -> Result<Self, FleetError> {
        Self::new(
            FleetTable::from_env().await?,
            DeliveryQueue::from_env().await?,
            TargetPolicy::from_env(),
            RetrySchedule::from_env(),
        )
    }

    /// Handles an SQS event: `{"batchItemFailures": [...]}` names the messages to receive
    /// again (those whose retry could not be scheduled, or that failed before an attempt);
    /// a message whose attempt failed has its visibility set to the backoff and is reported
    /// failed too, so SQS keeps it.
    pub async fn handle(&self, event: Value) -> Result<Value, FleetError> {
        let records = event["Records"].as_array().cloned().unwrap_or_default();
        if records
            .first()
            .is_some_and(|r| r["eventSource"] == "aws:dynamodb")
        {
            return self.handle_alarm_transitions(&records).await;
        }
        // A delivery named twice in one batch (a retried stream record queues its delivery
        // again) is sent once: the copies go with the first message's fate.
        let mut seen = std::collections::HashSet::new();
        let records: Vec<&Value> = records
            .iter()
            .filter(|r| seen.insert(r["body"].as_str().unwrap_or_default().to_string()))
            .collect();
        // The batch's messages at once: one endpoint that never answers costs the batch its
        // 5 s timeout once, not once per message behind it.
        let outcomes = futures::future::join_all(records.into_iter().map(|record| async move {
            let id = record["messageId"].as_str().unwrap_or_default().to_string();
            let receipt = record["receiptHandle"].as_str().unwrap_or_default();
            let body = record["body"].as_str().unwrap_or_default();
            match self.deliver_one(body, receive_count(record)).await {
                Ok(Verdict::Done) => None,
                Ok(Verdict::RetryIn(seconds)) => {
                    if let Err(err) = self.queue.retry_in(receipt, seconds).await {
                        tracing::warn!(error = %err, "could not delay a retry");
                    }
                    Some(id)
                }
                Err(err) => {
                    tracing::warn!(error = %err, "delivery failed before an attempt");
                    Some(id)
                }
            }
        }))
        .await;
        Ok(batch_item_failures(outcomes.into_iter().flatten()))
    }

    /// Handles a batch of the table's stream (alarm items, as the event source's filter lets
    /// through): each transition becomes deliveries to its fleet's endpoints
    /// ([`deliver_alarm_transitions`]); the first record not fully handled is the batch item
    /// failure Lambda retries from.
    async fn handle_alarm_transitions(&self, records: &[Value]) -> Result<Value, FleetError> {
        let records: Vec<StreamRecord> = records.iter().map(stream_record).collect();
        let made = deliver_alarm_transitions(&self.table, &self.queue, &records).await?;
        tracing::info!(
            records = records.len(),
            transitions = made.transitions,
            queued = made.queued,
            repeated = made.repeated,
            unreadable = made.unreadable,
            failed_from = made.failed_from.as_deref(),
            "alarm deliveries"
        );
        Ok(batch_item_failures(made.failed_from))
    }

    /// One message, received for the `receives`-th time (SQS's `ApproximateReceiveCount`):
    /// plan, send, record.
    pub async fn deliver_one(&self, body: &str, receives: u32) -> Result<Verdict, FleetError> {
        let message: DeliveryMessage = match serde_json::from_str(body) {
            Ok(message) => message,
            Err(err) => {
                // A message no retry can fix: let it go (and say so).
                tracing::warn!(error = %err, "an unreadable delivery message");
                return Ok(Verdict::Done);
            }
        };
        let attempt = match prepare_attempt(&self.table, &message, (self.clock)()).await? {
            Plan::Send(attempt) => attempt,
            Plan::Wait(seconds) => {
                // A hold counts as a receive too: paced by the receives like a retry.
                let seconds = self.schedule.paced(seconds, receives);
                tracing::info!(delivery = %message.delivery_id, seconds, receives, "the endpoint's breaker is open");
                emf::emit(&emf::deferred_document(
                    message.webhook_id.as_str(),
                    message.owner.as_str(),
                    message.delivery_id.as_str(),
                ));
                return Ok(Verdict::RetryIn(seconds));
            }
            Plan::NotYet(seconds) => {
                tracing::info!(delivery = %message.delivery_id, seconds, "paced to its send slot");
                return Ok(Verdict::RetryIn(self.schedule.paced(seconds, receives)));
            }
            Plan::Done(why) => {
                tracing::info!(delivery = %message.delivery_id, why, "nothing to send");
                return Ok(Verdict::Done);
            }
        };
        let outcome = self.send(&attempt).await;
        let now = (self.clock)();
        tracing::info!(
            delivery = %message.delivery_id,
            status = ?outcome.status,
            latency_ms = outcome.latency_ms,
            "webhook attempt"
        );
        // Its wait since it was created (or redelivered: its retry window starts there).
        let waiting_since = attempt.delivery.retry_window_start();
        emf::emit(&emf::delivery_document(&emf::DeliveryFigures {
            webhook_id: message.webhook_id.as_str(),
            owner_id: message.owner.as_str(),
            delivery_id: message.delivery_id.as_str(),
            event: attempt.delivery.event.as_str(),
            status: outcome.status,
            delivered: outcome.succeeded(),
            latency_ms: outcome.latency_ms as f64,
            lag_ms: (now.epoch_millis() - waiting_since.epoch_millis()).max(0) as f64,
        }));
        record_attempt(
            &self.table,
            &self.queue,
            &attempt,
            &outcome,
            &self.schedule,
            receives,
            now,
        )
        .await
    }

    /// Sends one attempt; never fails (a failure is an outcome).
    async fn send(&self, attempt: &Attempt) -> AttemptOutcome {
        let started = Instant::now();
        let failed = |error: String| AttemptOutcome {
            status: None,
            error: Some(error),
            latency_ms: started.elapsed().as_millis() as u64,
            body_prefix: String::new(),
        };
        // The URL again (the policy may have changed since it was saved); a literal address
        // never reaches the resolver, so this is its check. A name's addresses: the port is
        // known here, so they are checked with it, then again by the resolver at connection.
        let url = match self.policy.check_url(&attempt.url) {
            Ok(url) => url,
            Err(err) => return failed(format!("url {}", err.reason)),
        };
        if let (Some(url::Host::Domain(host)), Some(port)) =
            (url.host(), url.port_or_known_default())
        {
            match tokio::net::lookup_host((host, port)).await {
                Ok(found) => {
                    let found: Vec<SocketAddr> = found.collect();
                    if let Err(why) = self.policy.check_resolved(&found) {
                        return failed(why);
                    }
                }
                Err(err) => return failed(format!("resolving the host: {err}")),
            }
        }
        let mut request = self.http.post(url).body(attempt.body.clone());
        for (name, value) in &attempt.headers {
            request = request.header(*name, value);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                let why = if err.is_timeout() {
                    "no answer within 5 s".to_string()
                } else {
                    format!("{err}")
                };
                return failed(why);
            }
        };
        let status = response.status().as_u16();
        let mut prefix = Vec::new();
        let mut response = response;
        // Only a short prefix of the answer is read (a confirmation token is near the start).
        while prefix.len() < RESPONSE_PREFIX_BYTES {
            match tokio::time::timeout(SEND_TIMEOUT, response.chunk()).await {
                Ok(Ok(Some(chunk))) => prefix.extend_from_slice(&chunk),
                _ => break,
            }
        }
        prefix.truncate(RESPONSE_PREFIX_BYTES);
        AttemptOutcome {
            status: Some(status),
            error: None,
            latency_ms: started.elapsed().as_millis() as u64,
            body_prefix: String::from_utf8_lossy(&prefix).into_owned(),
        }
    }
}
