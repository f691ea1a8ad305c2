//! Deliveries: a message to one endpoint, its log item (`USER#{owner}#WHLOG#{webhookId}#{shard}` /
//! `WHDELIVERY#{deliveryId}`) and its queue message. The worker asks
//! [`prepare_attempt`] what to send (the stored body, signed now by every secret that signs),
//! sends it itself (HTTP is the function's, not the table's), then [`record_attempt`] records
//! the answer and says whether and when to retry.

use serde_json::{json, Value};

use crate::model::entities::webhook::{WebhookItem, FAILING_DAYS_TO_DISABLE};
use crate::model::entities::webhook_delivery::{
    DeliveryState, WebhookDeliveryItem, DELIVERY_LOG_DAYS,
};
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Update};
use crate::model::pattern_id::PatternId;
use crate::model::timestamp::Timestamp;
use crate::model::webhook::signature::signature_header;
use crate::model::webhook::slack::slack_message;
use crate::model::webhook::{DeliveryId, WebhookEvent, WebhookFormat};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::ops::webhooks::{DeliveryMessage, DeliveryQueue};
use crate::store::dynamo::{number_value, put_item, put_new, read_consistent, string_value};
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// How long deliveries are retried before they are abandoned (the issue's "at least 24
/// hours").
pub const RETRY_FOR_SECONDS: i64 = 24 * 3600;
/// The longest pause between two attempts (SQS allows a visibility timeout of 12 hours).
pub const MAX_BACKOFF_SECONDS: u32 = 3600;
/// The first retry's pause, by default (`WEBHOOK_RETRY_BASE_SECONDS` overrides it, so the
/// tests need not wait).
pub const DEFAULT_BACKOFF_BASE_SECONDS: u32 = 5;
/// How much of a response body is kept (to find a confirmation token in it), never stored.
pub const RESPONSE_PREFIX_BYTES: usize = 4096;

/// AP-W11, implemented by [`record_attempt`] after [`prepare_attempt`]: the delivery worker's
/// DynamoDB work around one HTTP attempt.
pub const DELIVERY_ATTEMPT: AccessPattern = AccessPattern {
    id: PatternId::DeliveryAttempt,
    description: "the delivery worker's attempt: the delivery and its endpoint read, the attempt recorded, the endpoint's breaker moved",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::PutItem, Operation::UpdateItem],
    index: None,
    key_condition: "the delivery's log item and the endpoint (consistent); the log item; the endpoint's failure count",
    // Two reads and the record: 3 for a success; a success after failures, or a failure,
    // one UpdateItem of the endpoint more, the failure that opens the breaker a second, a
    // confirmation answered with its token one. (The disable after 3 days of failures, once
    // an endpoint, is beyond it: section 16.)
    budget: RequestBudget::Fixed(5),
    max_read_units: None,
    route: None,
    implemented_by: implemented_by!(record_attempt),
};

/// Creates a delivery of `event` with `data` to `endpoint`: its log item, then its queue
/// message (a PutItem and an SQS SendMessage). Returns its id (the `webhook-id`).
pub async fn send_new(
    table: &FleetTable,
    queue: &DeliveryQueue,
    endpoint: &WebhookItem,
    event: WebhookEvent,
    data: Value,
) -> Result<DeliveryId, FleetError> {
    let delivery_id = DeliveryId::generate_at(Timestamp::now())?;
    send_once(table, queue, endpoint, event, data, &delivery_id).await?;
    Ok(delivery_id)
}

/// [`send_once_at`] in the endpoint's next send slot ([`reserve_send_slots`], one UpdateItem
/// of the endpoint more).
pub async fn send_once(
    table: &FleetTable,
    queue: &DeliveryQueue,
    endpoint: &WebhookItem,
    event: WebhookEvent,
    data: Value,
    delivery_id: &DeliveryId,
) -> Result<bool, FleetError> {
    let now = Timestamp::now();
    let slot = reserve_send_slots(table, endpoint, 1, now).await?[0];
    send_once_at(table, queue, endpoint, event, data, delivery_id, slot).await
}

/// Creates the delivery `delivery_id` of `event` with `data` to `endpoint` unless it exists
/// (a PutItem conditioned on its absence), then puts its message on the queue either way,
/// invisible until its send slot `slot` (up to SQS's 15 minutes; the worker waits out the
/// rest): a run that wrote the item but failed to send the message is made good by the next
/// one, and a second message for a delivery already delivered is let go by the worker
/// ([`prepare_attempt`]). True when the item was new.
pub async fn send_once_at(
    table: &FleetTable,
    queue: &DeliveryQueue,
    endpoint: &WebhookItem,
    event: WebhookEvent,
    data: Value,
    delivery_id: &DeliveryId,
    slot: Timestamp,
) -> Result<bool, FleetError> {
    let created = create_once_at(table, endpoint, event, data, delivery_id, slot).await?;
    queue
        .enqueue_after(&created.message, created.delay_seconds)
        .await?;
    Ok(created.new)
}

/// A delivery's item written (or found), and the message to queue for it.
#[derive(Clone, Debug)]
pub struct CreatedDelivery {
    /// The item was new (not a run over the same record again).
    pub new: bool,
    /// Its queue message.
    pub message: DeliveryMessage,
    /// Seconds until its send slot, for the message's delay.
    pub delay_seconds: u32,
}

/// [`send_once_at`]'s first half: the delivery's item created unless it exists (a PutItem
/// conditioned on its absence), and its message, not sent: a fan-out sends its messages
/// together ([`DeliveryQueue::enqueue_all`]).
pub async fn create_once_at(
    table: &FleetTable,
    endpoint: &WebhookItem,
    event: WebhookEvent,
    data: Value,
    delivery_id: &DeliveryId,
    slot: Timestamp,
) -> Result<CreatedDelivery, FleetError> {
    let now = Timestamp::now();
    let mut item = new_delivery(endpoint, event, data, delivery_id, now);
    let delay_seconds = seconds_until(now, slot);
    if delay_seconds > 0 {
        item.send_at = Some(slot);
    }
    let new = put_new(table, &item).await?;
    Ok(CreatedDelivery {
        new,
        message: DeliveryMessage {
            owner: endpoint.user_id.clone(),
            webhook_id: endpoint.webhook_id.clone(),
            delivery_id: delivery_id.clone(),
        },
        delay_seconds,
    })
}

/// Whole seconds from `now` until `at` (0 when it is past), rounded up: SQS delays by the
/// second.
pub fn seconds_until(now: Timestamp, at: Timestamp) -> u32 {
    let millis = at.epoch_millis() - now.epoch_millis();
    if millis <= 0 {
        0
    } else {
        (millis as u64).div_ceil(1000).min(u64::from(u32::MAX)) as u32
    }
}

/// Reserves `count` consecutive send slots of `endpoint` from `now` on, its `rateLimit` a
/// second apart: they follow the last slot reserved (`pacedUntil`) while that is still ahead,
/// else start now. One UpdateItem, `ADD pacedUntil` on the condition it is not past or `SET`
/// it from now on the condition it is, the likelier first by the endpoint as read (a second
/// when that guess was stale): no read, no retry loop, and one write for a whole stream
/// batch's deliveries to the endpoint, so a storm does not make its item a hot key. Pacing is
/// best effort: when both conditions fail (a race between them, or the endpoint is gone), the
/// slots start now.
pub async fn reserve_send_slots(
    table: &FleetTable,
    endpoint: &WebhookItem,
    count: u32,
    now: Timestamp,
) -> Result<Vec<Timestamp>, FleetError> {
    let spacing = 1000.0 / f64::from(endpoint.rate_limit.max(1));
    let span = (f64::from(count) * spacing).ceil() as i64;
    let now_ms = now.epoch_millis();
    let key = ItemKey::Webhook {
        user: endpoint.user_id.clone(),
        webhook: endpoint.webhook_id.clone(),
    };
    let exists = || Condition::exists(crate::model::schema::PK);
    let after_the_last = (
        Update::new().add(WebhookItem::PACED_UNTIL, number_value(span)),
        exists().and(Condition::at_least(
            WebhookItem::PACED_UNTIL,
            number_value(now_ms),
        )),
    );
    let from_now = (
        Update::new().set(WebhookItem::PACED_UNTIL, number_value(now_ms + span)),
        exists().and(
            Condition::absent(WebhookItem::PACED_UNTIL).or(Condition::below(
                WebhookItem::PACED_UNTIL,
                number_value(now_ms),
            )),
        ),
    );
    let last_is_past = endpoint.paced_until.is_none_or(|until| until < now_ms);
    let tries = if last_is_past {
        [from_now, after_the_last]
    } else {
        [after_the_last, from_now]
    };
    let mut start = now_ms;
    let mut reserved = false;
    for (update, condition) in tries {
        if let Some(new) = update_endpoint_key(table, &key, update, condition).await? {
            let until = new
                .get(WebhookItem::PACED_UNTIL.name())
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(now_ms + span);
            start = until - span;
            reserved = true;
            break;
        }
    }
    if !reserved {
        tracing::info!(webhook_id = %endpoint.webhook_id, "send slots not reserved: starting now");
    }
    (0..count)
        .map(|i| {
            Timestamp::from_epoch_millis(start + (f64::from(i) * spacing).round() as i64)
                .ok_or_else(|| FleetError::internal("a send slot out of range"))
        })
        .collect()
}

/// The version of the standard body, whose events' JSON Schemas are docs/webhook-events.json:
/// within it fields are only added; a change that would break a receiver is a new version.
pub const BODY_VERSION: u32 = 1;

/// A new pending delivery of `event` with `data` to `endpoint`, made at `now`: the standard
/// body (`{"type", "version", "timestamp", "data", "ownerId" | "orgId"}`) as it will be signed.
pub fn new_delivery(
    endpoint: &WebhookItem,
    event: WebhookEvent,
    data: Value,
    delivery_id: &DeliveryId,
    now: Timestamp,
) -> WebhookDeliveryItem {
    let mut body = json!({
        "type": event.as_str(),
        "version": BODY_VERSION,
        "timestamp": now,
        "data": data,
    });
    match endpoint.user_id.fleet_org() {
        Some(org) => body["orgId"] = json!(org),
        None => body["ownerId"] = json!(endpoint.user_id),
    }
    WebhookDeliveryItem {
        user_id: endpoint.user_id.clone(),
        webhook_id: endpoint.webhook_id.clone(),
        delivery_id: delivery_id.clone(),
        event,
        payload: body.to_string(),
        state: DeliveryState::Pending,
        attempts: 0,
        last_status: None,
        last_error: None,
        latency_ms: None,
        next_retry_at: None,
        send_at: None,
        created_at: now,
        redelivered_at: None,
        ttl: now.plus_seconds(DELIVERY_LOG_DAYS * 86_400).epoch_seconds(),
    }
}

/// One HTTP request to make.
#[derive(Debug)]
pub struct Attempt {
    /// The target URL (checked again, resolved, by the sender).
    pub url: String,
    /// `content-type`, `webhook-id`, `webhook-timestamp`, `webhook-signature`.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: String,
    /// The delivery as read before the attempt.
    pub delivery: WebhookDeliveryItem,
    /// For a `webhook.confirm` delivery, the token a 2xx answer must echo to confirm.
    pub confirmation_token: Option<String>,
    /// The endpoint's failed attempts in a row, as read before the attempt.
    pub endpoint_failures: u32,
    /// When the endpoint's run of failures began, as read before the attempt.
    pub endpoint_failing_since: Option<Timestamp>,
}

/// What the worker should do with a message.
#[derive(Debug)]
pub enum Plan {
    /// Send this.
    Send(Box<Attempt>),
    /// Nothing to send: the message is done (delivered already, or given up, with why).
    Done(&'static str),
    /// The endpoint's circuit breaker is open: no attempt, the message waits this many seconds.
    Wait(u32),
    /// Its send slot (the endpoint's `rateLimit`) is this many seconds away: no attempt yet.
    NotYet(u32),
}

/// Failed attempts in a row that open an endpoint's circuit breaker.
pub const BREAKER_THRESHOLD: u32 = 5;
/// How long an open breaker holds an endpoint's messages before one attempt tries it again.
pub const BREAKER_OPEN_SECONDS: i64 = 60;

/// Reads the delivery and its endpoint (two consistent GetItems) and plans the attempt at
/// `now`: a delivered or abandoned delivery is done (SQS delivers at least once); a deleted or
/// disabled endpoint, or an unconfirmed one for anything but its confirmation, abandons it.
pub async fn prepare_attempt(
    table: &FleetTable,
    message: &DeliveryMessage,
    now: Timestamp,
) -> Result<Plan, FleetError> {
    let key = ItemKey::WebhookDelivery {
        user: message.owner.clone(),
        webhook: message.webhook_id.clone(),
        delivery: message.delivery_id.clone(),
    };
    let Some(delivery) = read_consistent::<WebhookDeliveryItem>(table, &key).await? else {
        return Ok(Plan::Done("no such delivery"));
    };
    if delivery.state != DeliveryState::Pending {
        return Ok(Plan::Done("delivered or abandoned already"));
    }
    // Paced to a later send slot than SQS could delay it to: wait, without reading the
    // endpoint (a storm's paced messages cost one read each time they come back).
    if let Some(slot) = delivery.send_at.filter(|slot| *slot > now) {
        return Ok(Plan::NotYet(seconds_until(now, slot).max(1)));
    }
    let endpoint_key = ItemKey::Webhook {
        user: message.owner.clone(),
        webhook: message.webhook_id.clone(),
    };
    let endpoint = read_consistent::<WebhookItem>(table, &endpoint_key).await?;
    let why_not = match &endpoint {
        None => Some("the webhook was deleted"),
        Some(e) if !e.enabled => Some("the webhook is disabled"),
        Some(e) if !e.confirmed && delivery.event != WebhookEvent::WebhookConfirm => {
            Some("the webhook is not confirmed")
        }
        _ => None,
    };
    let Some(endpoint) = endpoint.filter(|_| why_not.is_none()) else {
        let why = why_not.unwrap_or("the webhook was deleted");
        abandon(table, &delivery, why).await?;
        return Ok(Plan::Done(why));
    };
    if let Some(until) = endpoint.breaker_open_until.filter(|until| *until > now) {
        if retried_long_enough(&delivery, now) {
            // Held to the end of its retry window: it is given up as a failed attempt would be.
            let why = "retried for 24 hours; the endpoint's breaker was open";
            abandon(table, &delivery, why).await?;
            return Ok(Plan::Done(why));
        }
        // Spread over a few seconds, so the held messages do not all come back at once.
        let wait = until.epoch_seconds() - now.epoch_seconds() + (jitter() * 5.0).round() as i64;
        return Ok(Plan::Wait(
            wait.clamp(1, i64::from(MAX_BACKOFF_SECONDS)) as u32
        ));
    }
    // The receiver checks `webhook-timestamp` against its own clock: always the wall clock's
    // (`now` may be a test's simulated one).
    let timestamp = Timestamp::now().epoch_seconds();
    // The log keeps the standard body; a Slack endpoint is sent (and signed) its rendering.
    let body = match endpoint.format {
        WebhookFormat::Standard => delivery.payload.clone(),
        WebhookFormat::Slack => {
            let standard: Value =
                serde_json::from_str(&delivery.payload).map_err(FleetError::internal)?;
            slack_message(&standard).to_string()
        }
    };
    let signature = signature_header(
        &endpoint.signing_secrets(now),
        delivery.delivery_id.as_str(),
        timestamp,
        body.as_bytes(),
    )?;
    let confirmation_token = (delivery.event == WebhookEvent::WebhookConfirm)
        .then(|| endpoint.confirmation_token.clone());
    Ok(Plan::Send(Box::new(Attempt {
        url: endpoint.url,
        headers: vec![
            ("content-type", "application/json".to_string()),
            ("webhook-id", delivery.delivery_id.to_string()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ],
        body,
        delivery,
        confirmation_token,
        endpoint_failures: endpoint.consecutive_failures,
        endpoint_failing_since: endpoint.failing_since,
    })))
}

/// What one attempt got.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    /// The HTTP status, when an answer came.
    pub status: Option<u16>,
    /// Why there was no answer (timeout, connection refused, address refused).
    pub error: Option<String>,
    /// How long the attempt took.
    pub latency_ms: u64,
    /// The first [`RESPONSE_PREFIX_BYTES`] of the answer's body (never stored).
    pub body_prefix: String,
}

impl AttemptOutcome {
    /// A 2xx answer.
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// What to do with the message after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Delivered (or given up): delete the message.
    Done,
    /// Retry in this many seconds (the message's visibility timeout).
    RetryIn(u32),
}

/// The backoff between attempts: `base * 2^(attempts-1)`, capped, with equal jitter (a
/// random point in the upper half), so retries of a storm spread out instead of arriving
/// together.
#[derive(Debug, Clone, Copy)]
pub struct RetrySchedule {
    /// The first pause.
    pub base_seconds: u32,
    /// The longest pause.
    pub cap_seconds: u32,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self {
            base_seconds: DEFAULT_BACKOFF_BASE_SECONDS,
            cap_seconds: MAX_BACKOFF_SECONDS,
        }
    }
}

impl RetrySchedule {
    /// From `WEBHOOK_RETRY_BASE_SECONDS` (default [`DEFAULT_BACKOFF_BASE_SECONDS`]).
    pub fn from_env() -> Self {
        let base_seconds = std::env::var("WEBHOOK_RETRY_BASE_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|b| *b >= 1)
            .unwrap_or(DEFAULT_BACKOFF_BASE_SECONDS);
        Self {
            base_seconds,
            ..Self::default()
        }
    }

    /// The pause after the `attempts`-th failed attempt, with `jitter` in 0..=1.
    pub fn pause(&self, attempts: u32, jitter: f64) -> u32 {
        let exponent = attempts.saturating_sub(1).min(20);
        let full = (u64::from(self.base_seconds) << exponent).min(u64::from(self.cap_seconds));
        let half = full / 2;
        (half + ((full - half) as f64 * jitter.clamp(0.0, 1.0)).round() as u64).max(1) as u32
    }

    /// How long a message received for the `receives`-th time stays away when the worker
    /// wants it back in `wanted` seconds: never less than the backoff of its receive count.
    /// SQS counts every receive against the queue's `maxReceiveCount`, a breaker's hold as
    /// much as an attempt, so pacing every return by the receives (not only by the attempts)
    /// is what bounds a message's receives over the retry window, whatever mix of holds and
    /// attempts it meets ([`Self::most_receives_within`]).
    pub fn paced(&self, wanted: u32, receives: u32) -> u32 {
        wanted.max(self.pause(receives, jitter()))
    }

    /// The most receives a message can have while it is retried for `seconds`, the last (the
    /// one that abandons it) included: every pause at its shortest (no jitter). The delivery
    /// queue's `maxReceiveCount` must be above it, or SQS dead-letters a delivery the worker
    /// is still retrying.
    pub fn most_receives_within(&self, seconds: i64) -> u32 {
        let (mut receives, mut elapsed) = (1u32, 0i64);
        while elapsed < seconds {
            elapsed += i64::from(self.pause(receives, 0.0));
            receives += 1;
        }
        receives
    }
}

/// Whether `delivery` has been retried for [`RETRY_FOR_SECONDS`] at `now`.
fn retried_long_enough(delivery: &WebhookDeliveryItem, now: Timestamp) -> bool {
    now.epoch_seconds() - delivery.retry_window_start().epoch_seconds() >= RETRY_FOR_SECONDS
}

fn jitter() -> f64 {
    let mut bytes = [0u8; 2];
    let _ = getrandom::fill(&mut bytes);
    f64::from(u16::from_le_bytes(bytes)) / f64::from(u16::MAX)
}

/// Records an attempt made at `now` on the delivery's log item (one PutItem) and, for a
/// confirmation answered with its token, confirms the endpoint (one UpdateItem conditioned on
/// the token). Says whether to retry: a failure is retried with backoff until
/// [`RETRY_FOR_SECONDS`] after the delivery was created (or redelivered), then abandoned; the
/// pause is the backoff of its attempts or of its message's `receives`, whichever is longer
/// ([`RetrySchedule::paced`]).
/// An endpoint that has failed for [`FAILING_DAYS_TO_DISABLE`] days is disabled, and its
/// owner told ([`disable_failing_endpoint`], through `queue`).
pub async fn record_attempt(
    table: &FleetTable,
    queue: &DeliveryQueue,
    attempt: &Attempt,
    outcome: &AttemptOutcome,
    schedule: &RetrySchedule,
    receives: u32,
    now: Timestamp,
) -> Result<Verdict, FleetError> {
    let mut delivery = attempt.delivery.clone();
    delivery.attempts += 1;
    delivery.last_status = outcome.status;
    delivery.last_error = outcome.error.clone();
    delivery.latency_ms = Some(outcome.latency_ms);
    let verdict = if outcome.succeeded() {
        delivery.state = DeliveryState::Delivered;
        delivery.next_retry_at = None;
        Verdict::Done
    } else if retried_long_enough(&delivery, now) {
        delivery.state = DeliveryState::Abandoned;
        delivery.next_retry_at = None;
        Verdict::Done
    } else {
        let pause = schedule.paced(schedule.pause(delivery.attempts, jitter()), receives);
        delivery.next_retry_at = Some(now.plus_seconds(i64::from(pause)));
        Verdict::RetryIn(pause)
    };
    put_item(table, &delivery).await?;
    if let Some(failing_since) =
        record_endpoint_health(table, attempt, outcome.succeeded(), now).await?
    {
        if WebhookItem::failed_long_enough(failing_since, now) {
            disable_failing_endpoint(table, queue, &delivery, failing_since, now).await?;
        }
    }
    if let Some(token) = &attempt.confirmation_token {
        if outcome.succeeded() && outcome.body_prefix.contains(token.as_str()) {
            confirm_by_answer(table, &delivery, token).await?;
        }
    }
    Ok(verdict)
}

/// The endpoint's circuit breaker after an attempt: a failure counts one more in a row and
/// keeps when the run began (`failingSince`, set by its first failure; one UpdateItem
/// returning both), and from the [`BREAKER_THRESHOLD`]th on (the trial attempt after a pause
/// too) it opens the breaker for [`BREAKER_OPEN_SECONDS`] (a second UpdateItem); a success
/// after failures closes it and ends the run (one UpdateItem; none when there were no
/// failures). The count is DynamoDB's, so concurrent attempts of one batch count each.
/// Not versioned: an owner's change may overwrite it with what it read, which only makes the
/// breaker forget (it learns again in five attempts). Returns when the run of failures began,
/// after a failure.
async fn record_endpoint_health(
    table: &FleetTable,
    attempt: &Attempt,
    succeeded: bool,
    now: Timestamp,
) -> Result<Option<Timestamp>, FleetError> {
    if succeeded {
        if attempt.endpoint_failures == 0 && attempt.endpoint_failing_since.is_none() {
            return Ok(None);
        }
        let closed = Update::new()
            .set(WebhookItem::CONSECUTIVE_FAILURES, number_value(0))
            .remove(WebhookItem::BREAKER_OPEN_UNTIL)
            .remove(WebhookItem::FAILING_SINCE);
        update_endpoint(table, &attempt.delivery, closed, None).await?;
        return Ok(None);
    }
    let counted = Update::new()
        .add(WebhookItem::CONSECUTIVE_FAILURES, number_value(1))
        .set_if_absent(WebhookItem::FAILING_SINCE, string_value(now.to_string()));
    let updated = update_endpoint(table, &attempt.delivery, counted, None).await?;
    let Some(updated) = updated else {
        // The endpoint is gone: nothing to count.
        return Ok(None);
    };
    let failures = updated
        .get(WebhookItem::CONSECUTIVE_FAILURES.name())
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    let failing_since = updated
        .get(WebhookItem::FAILING_SINCE.name())
        .and_then(|v| v.as_s().ok())
        .and_then(|at| Timestamp::parse_field("failingSince", at).ok())
        .unwrap_or(now);
    if failures >= BREAKER_THRESHOLD {
        let open = Update::new().set(
            WebhookItem::BREAKER_OPEN_UNTIL,
            string_value(now.plus_seconds(BREAKER_OPEN_SECONDS).to_string()),
        );
        update_endpoint(table, &attempt.delivery, open, None).await?;
    }
    Ok(Some(failing_since))
}

/// Disables `delivery`'s endpoint, failing since `failing_since`, and tells its owner: one
/// UpdateItem conditioned on it being enabled (so concurrent attempts disable it once, and
/// only the one that did tells), recording `disabledAt` and `disabledReason`; then a
/// `webhook.disabled` entry in the endpoint's own log (a PutItem: never sent, the endpoint
/// being disabled; the console's log shows it on top) and a `webhook.disabled` delivery to
/// each of the owner's other endpoints that subscribe to it (one Query of the owner's
/// endpoints, then a PutItem and an SQS SendMessage each). Its queued deliveries are then
/// abandoned by the worker as for any disabled endpoint.
pub async fn disable_failing_endpoint(
    table: &FleetTable,
    queue: &DeliveryQueue,
    delivery: &WebhookDeliveryItem,
    failing_since: Timestamp,
    now: Timestamp,
) -> Result<bool, FleetError> {
    let reason = format!(
        "every delivery attempt has failed since {failing_since} ({FAILING_DAYS_TO_DISABLE} days or more)"
    );
    let disabled = Update::new()
        .set(
            WebhookItem::ENABLED,
            aws_sdk_dynamodb::types::AttributeValue::Bool(false),
        )
        .set(WebhookItem::DISABLED_AT, string_value(now.to_string()))
        .set(WebhookItem::DISABLED_REASON, string_value(reason.clone()))
        .set(WebhookItem::UPDATED_AT, string_value(now.to_string()))
        .add(WebhookItem::VERSION, number_value(1));
    let was_enabled = Condition::equals(
        WebhookItem::ENABLED,
        aws_sdk_dynamodb::types::AttributeValue::Bool(true),
    );
    if update_endpoint(table, delivery, disabled, Some(was_enabled))
        .await?
        .is_none()
    {
        return Ok(false);
    }
    tracing::warn!(
        webhook_id = %delivery.webhook_id,
        %failing_since,
        "a webhook failing for days was disabled"
    );
    let endpoints = crate::ops::webhooks::webhook_items(table, &delivery.user_id).await?;
    let url = endpoints
        .iter()
        .find(|e| e.webhook_id == delivery.webhook_id)
        .map(|e| e.url.clone());
    let data = json!({
        "webhookId": delivery.webhook_id,
        "url": url,
        "reason": reason,
        "failingSince": failing_since,
        "disabledAt": now,
    });
    // One disable per run of failures (the condition above), so its time names the notice.
    let notice = format!("disabled:{now}");
    for endpoint in &endpoints {
        let id = DeliveryId::of_notice(&endpoint.webhook_id, &notice, now);
        if endpoint.webhook_id == delivery.webhook_id {
            // The disabled endpoint's own log keeps the notice; nothing is sent to it.
            let mut entry = new_delivery(
                endpoint,
                WebhookEvent::WebhookDisabled,
                data.clone(),
                &id,
                now,
            );
            entry.state = DeliveryState::Abandoned;
            entry.last_error = Some("not sent: this endpoint is disabled".into());
            put_new(table, &entry).await?;
        } else if endpoint.enabled
            && endpoint.confirmed
            && endpoint.events.contains(&WebhookEvent::WebhookDisabled)
        {
            send_once(
                table,
                queue,
                endpoint,
                WebhookEvent::WebhookDisabled,
                data.clone(),
                &id,
            )
            .await?;
        }
    }
    Ok(true)
}

/// One UpdateItem of `delivery`'s endpoint on `condition` (by default that it exists: a
/// deleted endpoint is never recreated): the attributes it updated, or `None` when the
/// condition failed.
async fn update_endpoint(
    table: &FleetTable,
    delivery: &WebhookDeliveryItem,
    update: Update,
    condition: Option<Condition>,
) -> Result<Option<crate::model::schema::Item>, FleetError> {
    let key = ItemKey::Webhook {
        user: delivery.user_id.clone(),
        webhook: delivery.webhook_id.clone(),
    };
    let condition = condition.unwrap_or_else(|| Condition::exists(crate::model::schema::PK));
    update_endpoint_key(table, &key, update, condition).await
}

/// One UpdateItem of the endpoint at `key` on `condition`: the attributes it updated, or
/// `None` when the condition failed.
async fn update_endpoint_key(
    table: &FleetTable,
    key: &ItemKey,
    update: Update,
    condition: Condition,
) -> Result<Option<crate::model::schema::Item>, FleetError> {
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
        .expressions(crate::model::expression::Expressions::write(
            update,
            Some(condition),
        ))
        .send()
        .await;
    match result {
        Ok(out) => Ok(Some(out.attributes.unwrap_or_default())),
        Err(err) => match err.as_service_error() {
            Some(e) if e.is_conditional_check_failed_exception() => Ok(None),
            _ => Err(sdk_error(err)),
        },
    }
}

/// Marks the endpoint confirmed if its token is still the one the delivery carried (the URL
/// changed, a new token, or the endpoint is gone: nothing to confirm).
async fn confirm_by_answer(
    table: &FleetTable,
    delivery: &WebhookDeliveryItem,
    token: &str,
) -> Result<(), FleetError> {
    let confirmed = Update::new()
        .set(
            WebhookItem::CONFIRMED,
            aws_sdk_dynamodb::types::AttributeValue::Bool(true),
        )
        .add(WebhookItem::VERSION, number_value(1));
    let same_token = Condition::equals(WebhookItem::CONFIRMATION_TOKEN, string_value(token));
    update_endpoint(table, delivery, confirmed, Some(same_token)).await?;
    Ok(())
}

/// Marks a delivery abandoned (one PutItem).
async fn abandon(
    table: &FleetTable,
    delivery: &WebhookDeliveryItem,
    why: &str,
) -> Result<(), FleetError> {
    let mut delivery = delivery.clone();
    delivery.state = DeliveryState::Abandoned;
    delivery.last_error = Some(why.to_string());
    delivery.next_retry_at = None;
    put_item(table, &delivery).await
}

/// A delivery's log item (for the log route and the tests).
pub async fn read_delivery(
    table: &FleetTable,
    message: &DeliveryMessage,
) -> Result<Option<WebhookDeliveryItem>, FleetError> {
    read_consistent(
        table,
        &ItemKey::WebhookDelivery {
            user: message.owner.clone(),
            webhook: message.webhook_id.clone(),
            delivery: message.delivery_id.clone(),
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base_to_the_cap_with_jitter_in_the_upper_half() {
        let s = RetrySchedule {
            base_seconds: 5,
            cap_seconds: 3600,
        };
        assert_eq!(s.pause(1, 1.0), 5);
        assert_eq!(s.pause(2, 1.0), 10);
        assert_eq!(s.pause(3, 0.0), 10);
        assert_eq!(s.pause(30, 1.0), 3600);
        assert_eq!(s.pause(30, 0.0), 1800);
        for attempts in 1..12 {
            let low = s.pause(attempts, 0.0);
            let high = s.pause(attempts, 1.0);
            let mid = s.pause(attempts, 0.5);
            assert!(
                low <= mid && mid <= high && low * 2 >= high - 1,
                "{attempts}"
            );
        }
    }

    #[test]
    fn a_message_comes_back_no_sooner_than_its_receives_backoff_and_has_a_bounded_number_of_receives(
    ) {
        let s = RetrySchedule::default();
        // A breaker's 60 s hold of a message received 30 times waits its receives' backoff.
        assert!(s.paced(60, 30) >= 1800);
        // A long wanted pause is kept.
        assert_eq!(s.paced(3000, 1), 3000);
        // 24 hours at the shortest pauses: 10 doubling ones (2,557 s), then 1,800 s each.
        assert_eq!(s.most_receives_within(RETRY_FOR_SECONDS), 58);
        let fastest = RetrySchedule {
            base_seconds: 1,
            ..RetrySchedule::default()
        };
        assert_eq!(fastest.most_receives_within(RETRY_FOR_SECONDS), 60);
    }
}
