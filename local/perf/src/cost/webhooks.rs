//! Webhooks (issue 41) in the cost model: what one alarm delivery costs when its first attempt
//! succeeds and when its endpoint fails for the whole 24-hour retry window, and the load an
//! outage storm puts on the busiest owner's partition (docs/design.md section 16).
//!
//! The request counts are the code's (`shared::ops::webhooks`): the stream consumer's Query of
//! the fleet's endpoints, its conditional PutItem and (a share of) a SendMessageBatch per delivery; the worker's two
//! consistent GetItems, its PutItem of the attempt and the breaker's UpdateItems. The items are
//! the real ones, sized with DynamoDB's rules (`fleet_testkit::capacity`).

use std::fmt::Write as _;

use shared::model::alarm::status::AlarmState;
use shared::model::entities::alarm::AlarmItem;
use shared::model::entities::webhook::WebhookItem;
use shared::model::entities::webhook_delivery::{WebhookDeliveryItem, DELIVERY_LOG_SHARDS};
use shared::model::entities::Entity;
use shared::model::offline::OFFLINE_SEVERITY;
use shared::model::shard::ShardCounts;
use shared::model::timestamp::Day;
use shared::model::webhook::{DeliveryId, WebhookEvent, WebhookId};
use shared::ops::alarms::notify::{alarm_detail, DetailType, Notice};
use shared::ops::webhooks::deliveries::{
    new_delivery, RetrySchedule, BREAKER_OPEN_SECONDS, BREAKER_THRESHOLD, RETRY_FOR_SECONDS,
};

use super::prices::{
    DAYS_PER_MONTH, LAMBDA_ARM_GB_SECOND_USD, LAMBDA_REQUEST_USD, RRU_USD, WRU_USD,
};
use crate::simulate::{
    device_id, group, num, user_id, Simulation, DEFAULT_DAY, RCU_LIMIT, WCU_LIMIT,
};
use fleet_testkit::capacity::{item_size, query_read_units, strong_read_units, write_units};

/// SQS standard queue, per million requests (us-east-1, beyond the free tier; a request is
/// each 64 KB chunk of its payload, and a delivery's message is a few hundred bytes).
pub const SQS_REQUEST_USD: f64 = 0.40 / 1e6;
/// Messages per Lambda batch of the delivery queue (`template.yaml`: `BatchSize: 10`): one
/// ReceiveMessage, one DeleteMessageBatch and one invocation serve this many messages.
pub const QUEUE_BATCH: f64 = 10.0;
/// Records per Lambda batch of the table's stream (`template.yaml`: `BatchSize: 100`).
pub const STREAM_BATCH: f64 = 100.0;
/// The delivery worker's concurrency cap (`template.yaml`: `MaximumConcurrency: 20`).
pub const WORKER_CONCURRENCY: f64 = 20.0;
/// An attempt's HTTP timeout, seconds (docs/design.md section 16: "5 s timeout"): what a
/// batch to a receiver that never answers is billed.
pub const ATTEMPT_TIMEOUT_SECONDS: f64 = 5.0;
/// Billed duration of a batch whose receivers answer: an assumption (a receiver's answer in
/// about 100 ms, the DynamoDB requests around it), not a measurement.
pub const ANSWERED_BATCH_SECONDS: f64 = 0.2;
/// Billed duration of one stream batch's fan-out: an assumption, not a measurement.
pub const STREAM_BATCH_SECONDS: f64 = 0.2;
/// The delivery function's memory (`template.yaml`: `WebhookDeliveryFunction`, 256 MB), GB.
pub const DELIVERY_MEMORY_GB: f64 = 256.0 / 1024.0;
/// The storm of issue 41: alarms raised in one minute.
pub const STORM_ALARMS: f64 = 100_000.0;
/// The figures' unit: deliveries priced together.
pub const PRICED_DELIVERIES: f64 = 100_000.0;

/// The real items of one alarm delivery, bytes (DynamoDB's size rules).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WebhookSizes {
    /// The endpoint item (`USER#{owner}` / `WEBHOOK#{webhookId}`), confirmed, one secret.
    pub endpoint: u64,
    /// A pending `alarm.raised` delivery as the stream consumer puts it.
    pub delivery_pending: u64,
    /// The same delivery after a failed attempt (status, error, latency, next retry).
    pub delivery_failed: u64,
}

impl WebhookSizes {
    /// The items of an offline alarm's `alarm.raised` delivery to a standard endpoint of the
    /// simulator's first owner, built and serialized by the project's own code.
    pub fn of_real_items() -> Self {
        let shards = ShardCounts::default();
        let day = Day::parse_field("day", DEFAULT_DAY).expect("a valid default day");
        let at = day.start().plus_seconds(12 * 3600);
        let owner = user_id(0);
        let device = device_id(0, 0);
        let alarm = AlarmItem {
            user_id: owner.clone(),
            device_id: device.clone(),
            partition: 0,
            device_name: "Kitchen thermostat".into(),
            source: "offline".into(),
            rule_name: None,
            severity: OFFLINE_SEVERITY,
            state: AlarmState::Active,
            raised_at: at,
            cleared_at: None,
            acknowledged_at: None,
            reading: None,
            clear_reading: None,
            last_seen: Some(at),
            remind_every_seconds: None,
            remind_at: None,
            reminders: 0,
            ttl: None,
        };
        let notice = Notice {
            detail_type: DetailType::Raised,
            reminder: None,
        };
        let data = alarm_detail(&alarm, &notice).expect("an alarm's detail");
        let endpoint = WebhookItem {
            description: Some("on-call pager".into()),
            confirmed: true,
            confirmation_token: "0".repeat(43),
            ..WebhookItem::new(
                owner,
                // Fixed ids (of generated ones' length): the sizes, and so the reports, are
                // the same on every run (a delivery's log partition number is 1 or 2 digits).
                WebhookId::parse("wh_PsxxBbH0qaTYzYhvP52C4Q").expect("an id"),
                "https://hooks.example.com/device-fleet/alarms".into(),
                vec![
                    WebhookEvent::AlarmRaised,
                    WebhookEvent::AlarmCleared,
                    WebhookEvent::AlarmAcknowledged,
                ],
                at,
            )
            .expect("an endpoint")
        };
        // The delivery exactly as the fan-out makes it.
        let pending = new_delivery(
            &endpoint,
            WebhookEvent::AlarmRaised,
            data,
            &DeliveryId::of_notice(&endpoint.webhook_id, "sizing", at),
            at,
        );
        let failed = WebhookDeliveryItem {
            attempts: 1,
            last_status: Some(503),
            last_error: Some("operation timed out".into()),
            latency_ms: Some(5000),
            next_retry_at: Some(at.plus_seconds(3600)),
            send_at: None,
            ..pending.clone()
        };
        Self {
            endpoint: sized(&endpoint, &shards),
            delivery_pending: sized(&pending, &shards),
            delivery_failed: sized(&failed, &shards),
        }
    }
}

/// An entity's stored size, bytes, serialized as the table stores it.
fn sized(entity: &impl Entity, shards: &ShardCounts) -> u64 {
    item_size(&entity.to_item(shards).expect("items serialize"))
}

/// One delivery's requests, over its whole life (fractions are its share of a batch).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeliveryRequests {
    /// HTTP attempts made.
    pub attempts: f64,
    /// DynamoDB write request units (the delivery's puts, the breaker's updates).
    pub write_units: f64,
    /// DynamoDB read request units (the endpoint Query, the worker's consistent GetItems).
    pub read_units: f64,
    /// DynamoDB requests, for the reader (writes and reads together).
    pub dynamodb_requests: f64,
    /// SQS requests (SendMessageBatch, its share of ReceiveMessage and DeleteMessageBatch, one
    /// ChangeMessageVisibility per retry).
    pub sqs_requests: f64,
    /// Lambda invocations (its share of a stream batch and of each queue batch).
    pub lambda_invocations: f64,
    /// Lambda GB-seconds (its share of the batches' billed time).
    pub lambda_gb_seconds: f64,
}

impl DeliveryRequests {
    /// USD of one delivery.
    pub fn usd(&self) -> f64 {
        self.write_units * WRU_USD
            + self.read_units * RRU_USD
            + self.sqs_requests * SQS_REQUEST_USD
            + self.lambda_invocations * LAMBDA_REQUEST_USD
            + self.lambda_gb_seconds * LAMBDA_ARM_GB_SECOND_USD
    }
}

/// The stream consumer's share of one delivery (`alarm_notices::deliver_alarm_transitions`):
/// a Query of the fleet's endpoints (at most 16, one page, eventually consistent) and the
/// UpdateItem reserving the endpoint's send slots, both counted once per delivery (a storm
/// spread over many fleets has one alarm per fleet and batch), the PutItem conditioned on
/// absence and a SendMessageBatch (counted whole, as for a batch of one delivery: a full
/// stream batch sends 10 messages a request), and its share of a stream batch.
fn fan_out(sizes: &WebhookSizes) -> DeliveryRequests {
    DeliveryRequests {
        attempts: 0.0,
        write_units: (write_units(sizes.delivery_pending) + write_units(sizes.endpoint)) as f64,
        read_units: query_read_units(sizes.endpoint),
        dynamodb_requests: 3.0,
        sqs_requests: 1.0,
        lambda_invocations: 1.0 / STREAM_BATCH,
        lambda_gb_seconds: STREAM_BATCH_SECONDS * DELIVERY_MEMORY_GB / STREAM_BATCH,
    }
}

/// The worker's reads of one attempt (`deliveries::prepare_attempt`): the delivery and the
/// endpoint, consistent GetItems.
fn attempt_read_units(sizes: &WebhookSizes, delivery: u64) -> f64 {
    strong_read_units(delivery) + strong_read_units(sizes.endpoint)
}

/// A delivery whose first attempt succeeds: the fan-out; then one receive (its share of the
/// batch's ReceiveMessage and DeleteMessageBatch), two consistent GetItems, the attempt's
/// PutItem, and no breaker write (a success after a success writes nothing).
pub fn first_attempt_success(sizes: &WebhookSizes) -> DeliveryRequests {
    let mut d = fan_out(sizes);
    d.attempts = 1.0;
    d.read_units += attempt_read_units(sizes, sizes.delivery_pending);
    d.write_units += write_units(sizes.delivery_failed) as f64;
    d.dynamodb_requests += 3.0;
    d.sqs_requests += 2.0 / QUEUE_BATCH;
    d.lambda_invocations += 1.0 / QUEUE_BATCH;
    d.lambda_gb_seconds += ANSWERED_BATCH_SECONDS * DELIVERY_MEMORY_GB / QUEUE_BATCH;
    d
}

/// Attempts a delivery to an endpoint that never answers gets from `schedule` before it is
/// abandoned: attempts at 0 and after each pause (jitter at its mean, 0.5) until one is made
/// [`RETRY_FOR_SECONDS`] or more after the first, which is recorded abandoned
/// (`deliveries::record_attempt`).
pub fn attempts_in_retry_window(schedule: &RetrySchedule) -> u32 {
    let (mut attempts, mut elapsed) = (1_u32, 0_i64);
    while elapsed < RETRY_FOR_SECONDS {
        elapsed += i64::from(schedule.pause(attempts, 0.5));
        attempts += 1;
    }
    attempts
}

/// A delivery whose endpoint never answers, retried for the whole window: the fan-out, then
/// per attempt two consistent GetItems, the attempt's PutItem and the breaker's two
/// UpdateItems (the count, and the breaker opened again: in a long outage every failure is
/// past [`BREAKER_THRESHOLD`]), a receive and a ChangeMessageVisibility (the last one
/// deleted instead), and the batch's 5 s timeout shared by its 10 messages.
pub fn retried_for_the_window(sizes: &WebhookSizes, schedule: &RetrySchedule) -> DeliveryRequests {
    let attempts = f64::from(attempts_in_retry_window(schedule));
    let endpoint_update = write_units(sizes.endpoint) as f64;
    let mut d = fan_out(sizes);
    d.attempts = attempts;
    d.read_units += attempts * attempt_read_units(sizes, sizes.delivery_failed);
    d.write_units += attempts * (write_units(sizes.delivery_failed) as f64 + 2.0 * endpoint_update);
    d.dynamodb_requests += attempts * 5.0;
    d.sqs_requests += attempts * (1.0 / QUEUE_BATCH + 1.0) - 1.0 + 1.0 / QUEUE_BATCH;
    d.lambda_invocations += attempts / QUEUE_BATCH;
    d.lambda_gb_seconds += attempts * ATTEMPT_TIMEOUT_SECONDS * DELIVERY_MEMORY_GB / QUEUE_BATCH;
    d
}

/// The owner's partition `USER#{owner}`: its endpoint item (and its profile, devices...).
pub const OWNER_KEY: &str = "USER#{owner}";
/// One of the endpoint's log partitions, where its delivery items are spread.
pub const LOG_KEY: &str = "USER#{owner}#WHLOG#{webhookId}#{shard}";

/// The outage storm's load on the two keys it touches, the owner's partition (the endpoint
/// item) and one of the endpoint's [`DELIVERY_LOG_SHARDS`] log partitions (the deliveries,
/// spread by a hash of their ids): (phase, key, WCU/s, RCU/s).
pub fn storm_phases(
    sizes: &WebhookSizes,
    owner_alarms: f64,
) -> Vec<(&'static str, &'static str, f64, f64)> {
    let shards = f64::from(DELIVERY_LOG_SHARDS);
    let fan_out_rate = owner_alarms / 60.0;
    // A batch to a receiver that never answers holds its worker for the timeout: at most the
    // whole worker, and at most every queued message of the owner once per timeout.
    let attempt_rate = (WORKER_CONCURRENCY * QUEUE_BATCH / ATTEMPT_TIMEOUT_SECONDS)
        .min(owner_alarms / ATTEMPT_TIMEOUT_SECONDS);
    let endpoint_update = write_units(sizes.endpoint) as f64;
    // When the breaker opens every queued message comes back about every
    // BREAKER_OPEN_SECONDS (plus 2.5 s of jitter on average) and is read, not sent: the peak
    // (later holds are paced by each message's receives, so they thin out).
    let hold_rate = owner_alarms / (BREAKER_OPEN_SECONDS as f64 + 2.5);
    let fan_out = "fan-out (the storm's minute, as fast as the stream is read)";
    let attempts = "attempts (at most the whole worker: 20 x 10 per 5 s timeout)";
    let held = "breaker open (every queued message read back about once a minute, at first)";
    vec![
        (
            fan_out,
            OWNER_KEY,
            // One slot reservation per stream batch (all its deliveries to the endpoint).
            fan_out_rate / STREAM_BATCH * write_units(sizes.endpoint) as f64,
            fan_out_rate / STREAM_BATCH * query_read_units(sizes.endpoint),
        ),
        (
            fan_out,
            LOG_KEY,
            fan_out_rate * write_units(sizes.delivery_pending) as f64 / shards,
            0.0,
        ),
        (
            attempts,
            OWNER_KEY,
            attempt_rate * 2.0 * endpoint_update,
            attempt_rate * strong_read_units(sizes.endpoint),
        ),
        (
            attempts,
            LOG_KEY,
            attempt_rate * write_units(sizes.delivery_failed) as f64 / shards,
            attempt_rate * strong_read_units(sizes.delivery_failed) / shards,
        ),
        (
            held,
            OWNER_KEY,
            0.0,
            hold_rate * strong_read_units(sizes.endpoint),
        ),
        (
            held,
            LOG_KEY,
            0.0,
            hold_rate * strong_read_units(sizes.delivery_failed) / shards,
        ),
    ]
}

/// The alarms of the storm that reach the owner of `sim`'s largest fleet: its share of the
/// devices (every device equally likely to raise).
pub fn busiest_owner_alarms(sim: &Simulation) -> f64 {
    let devices = sim.workload.devices.max(1) as f64;
    STORM_ALARMS * f64::from(sim.workload.fleet_max) / devices
}

/// The webhooks' section of `docs/cost-model.md`.
pub fn cost_section(sims: &[Simulation]) -> String {
    let sizes = WebhookSizes::of_real_items();
    let schedule = RetrySchedule::default();
    let success = first_attempt_success(&sizes);
    let retried = retried_for_the_window(&sizes, &schedule);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Webhooks (issue 41)\n\n\
         An alarm's delivery to one endpoint (docs/design.md section 16), priced from the code's \
         requests (`shared::ops::webhooks`) and the real items (`local/perf/src/cost/webhooks.rs`): \
         an endpoint item of {} B, an `alarm.raised` delivery of {} B ({} B after a failed \
         attempt). SQS ${:.2} per million requests (us-east-1 standard queue, a request per 64 KB: \
         a message here is a few hundred bytes). Lambda: the delivery function's {} MB; a batch \
         whose receivers answer billed {} s (assumed), one whose receiver never answers the {} s \
         timeout; a stream batch of {} records {} s (assumed).\n",
        sizes.endpoint,
        sizes.delivery_pending,
        sizes.delivery_failed,
        SQS_REQUEST_USD * 1e6,
        DELIVERY_MEMORY_GB * 1024.0,
        ANSWERED_BATCH_SECONDS,
        ATTEMPT_TIMEOUT_SECONDS,
        STREAM_BATCH,
        STREAM_BATCH_SECONDS,
    );
    let _ = writeln!(
        out,
        "- **First attempt succeeds**: the stream consumer's Query of the fleet's endpoints \
         (counted once per delivery: a storm over many fleets has one alarm per fleet and batch), \
         its UpdateItem reserving the endpoint's send slot (also counted once per delivery), its PutItem conditioned on absence and an SQS SendMessageBatch (counted whole, as for a lone delivery; a busy stream batch sends 10 messages a request); the worker's share of a \
         ReceiveMessage and a DeleteMessageBatch (batches of {QUEUE_BATCH}), two consistent \
         GetItems (delivery, endpoint), the attempt's PutItem, no breaker write.\n\
         - **Retried for 24 hours**: the endpoint never answers; attempts at `5 s x 2^(n-1)` capped \
         at 1 h with the jitter at its mean, until one is made {} h after the first: **{} \
         attempts**; each two consistent GetItems, the attempt's PutItem, the breaker's two \
         UpdateItems (the count, the breaker reopened: past {BREAKER_THRESHOLD} failures), a \
         receive and a ChangeMessageVisibility, and a tenth of a batch's 5 s timeout.\n",
        RETRY_FOR_SECONDS / 3600,
        attempts_in_retry_window(&schedule),
    );
    out.push_str(
        "| case | attempts | DynamoDB requests | WRU | RRU | SQS requests | Lambda invocations | Lambda GB-s | USD per delivery | **USD per 100,000 deliveries** |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (case, d) in [
        ("first attempt succeeds", &success),
        ("retried for 24 h, then abandoned", &retried),
    ] {
        let _ = writeln!(
            out,
            "| {case} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | ${:.7} | **${:.2}** |",
            d.attempts,
            d.dynamodb_requests,
            d.write_units,
            d.read_units,
            d.sqs_requests,
            d.lambda_invocations,
            d.lambda_gb_seconds,
            d.usd(),
            d.usd() * PRICED_DELIVERIES,
        );
    }
    let _ = writeln!(
        out,
        "\nNot in these figures: the breaker's holds (while an endpoint's breaker is open each of its \
         queued messages is received again after the breaker's minute or its receives' backoff, \
         whichever is longer, and costs two consistent GetItems, a receive and a \
         ChangeMessageVisibility without an attempt: ${:.7} per hold; a hold takes the place of an \
         attempt, so the retried figure, {} attempts, is the most a delivery costs), the queue's \
         empty polls, API Gateway and logs.\n",
        attempt_read_units(&sizes, sizes.delivery_failed) * RRU_USD
            + (1.0 / QUEUE_BATCH + 1.0) * SQS_REQUEST_USD,
        attempts_in_retry_window(&schedule),
    );
    out.push_str(
        "### A month of alarm deliveries per profile\n\n\
         Every owner has one endpoint subscribed to `alarm.raised` and `alarm.cleared`; the \
         profile's offline alarms (`offline.per_day`, each raised and cleared) are the deliveries, \
         every first attempt succeeds.\n\n\
         | profile | deliveries / month | USD / month | if every one were retried for 24 h |\n|---|---|---|---|\n",
    );
    for sim in sims {
        let deliveries = 2.0 * sim.workload.offline_alarms_per_day * DAYS_PER_MONTH;
        let _ = writeln!(
            out,
            "| {} | {} | ${:.2} | ${:.2} |",
            sim.profile.name,
            group(deliveries.round() as u64),
            deliveries * success.usd(),
            deliveries * retried.usd(),
        );
    }
    out.push('\n');
    out
}

/// The webhook outage storm's section of `docs/key-distribution.md`: per profile, the load on
/// the busiest owner's partition in each phase, against DynamoDB's per-partition limits.
pub fn storm_section(sims: &[Simulation]) -> String {
    let sizes = WebhookSizes::of_real_items();
    let mut out = format!(
        "## Webhook outage storm (issue 41)\n\n\
         {} alarms raised in one minute, spread over the devices (each equally likely); every \
         owner has one endpoint subscribed, and every endpoint fails. An owner's endpoint item \
         is in its own partition `USER#{{owner}}` (beside its profile, devices and live states); \
         the endpoint's delivery items are spread over {} log partitions `USER#{{owner}}#WHLOG#{{webhookId}}#{{shard}}` \
         by a hash of their ids, so the busiest keys are the largest fleet's owner partition \
         and each of its endpoint's log partitions. Items: endpoint {} B, delivery {} B ({} B after a failed attempt). Phases: the fan-out \
         (a delivery PutItem per alarm; its rate is the storm's, an upper bound: the stream is \
         read a batch per shard at a time); the attempts (the worker's `MaximumConcurrency` 20 x \
         batches of 10, each batch held for the 5 s timeout: at most {} attempts/s in all, here all \
         on one owner; per attempt two consistent GetItems, a PutItem, two breaker UpdateItems); \
         the breaker open (each queued message read back every {} s or so, two consistent \
         GetItems, one of them always the same endpoint item). Limits {} WCU/s and {} RCU/s per \
         partition. `local/perf/src/cost/webhooks.rs`, `storm_phases`.\n\n\
         | profile | largest fleet | its alarms in the minute | phase | key | WCU/s | RCU/s | verdict |\n\
         |---|---|---|---|---|---|---|---|\n",
        group(STORM_ALARMS as u64),
        DELIVERY_LOG_SHARDS,
        sizes.endpoint,
        sizes.delivery_pending,
        sizes.delivery_failed,
        WORKER_CONCURRENCY * QUEUE_BATCH / ATTEMPT_TIMEOUT_SECONDS,
        BREAKER_OPEN_SECONDS as f64 + 2.5,
        group(WCU_LIMIT as u64),
        group(RCU_LIMIT as u64),
    );
    for sim in sims {
        let alarms = busiest_owner_alarms(sim);
        for (phase, key, wcu, rcu) in storm_phases(&sizes, alarms) {
            let verdict = if wcu > WCU_LIMIT || rcu > RCU_LIMIT {
                "**over the key's limit**"
            } else {
                "ok"
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {phase} | `{key}` | {} | {} | {verdict} |",
                sim.profile.name,
                group(u64::from(sim.workload.fleet_max)),
                group(alarms.round() as u64),
                num(wcu),
                num(rcu),
            );
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_attempt_success_makes_the_codes_requests() {
        let sizes = WebhookSizes::of_real_items();
        let d = first_attempt_success(&sizes);
        // Stream side: the endpoint Query, the slot reservation and the conditional PutItem; worker: two consistent
        // GetItems and the attempt's PutItem; no breaker write after a success.
        assert_eq!(d.dynamodb_requests, 6.0);
        // A SendMessageBatch, and a tenth of a ReceiveMessage and of a DeleteMessageBatch.
        assert!((d.sqs_requests - 1.2).abs() < 1e-9, "{}", d.sqs_requests);
        assert!((d.lambda_invocations - 0.11).abs() < 1e-9);
        // The items are small: a delivery (the alarm's detail signed as the body) is one or
        // two write units, the endpoint one read unit.
        assert!(
            (1..=2).contains(&write_units(sizes.delivery_pending)),
            "{sizes:?}"
        );
        assert_eq!(strong_read_units(sizes.endpoint), 1.0, "{sizes:?}");
        assert_eq!(
            d.write_units,
            (write_units(sizes.delivery_pending)
                + write_units(sizes.endpoint)
                + write_units(sizes.delivery_failed)) as f64
        );
    }

    #[test]
    fn the_retry_window_follows_the_codes_schedule() {
        let schedule = RetrySchedule::default();
        // 5 s doubling to the 1 h cap, equal jitter at its mean (three quarters of each
        // pause): 10 pauses of about 3,836 s in all, then 2,700 s each until 24 h are past.
        let before_cap: i64 = (1..=10).map(|n| i64::from(schedule.pause(n, 0.5))).sum();
        assert!((3_800..3_900).contains(&before_cap), "{before_cap}");
        assert_eq!(schedule.pause(11, 0.5), 2_700);
        let attempts = attempts_in_retry_window(&schedule);
        let expected = 1 + 10 + ((RETRY_FOR_SECONDS - before_cap) as f64 / 2_700.0).ceil() as u32;
        assert_eq!(attempts, expected);
        let sizes = WebhookSizes::of_real_items();
        let d = retried_for_the_window(&sizes, &schedule);
        // The fan-out's 3 requests, then 5 per attempt.
        assert_eq!(d.dynamodb_requests, 3.0 + 5.0 * f64::from(attempts));
        assert!(d.usd() > 20.0 * first_attempt_success(&sizes).usd());
    }

    #[test]
    fn the_busiest_owner_gets_its_fleets_share_of_the_storm() {
        let sizes = WebhookSizes::of_real_items();
        let phases = storm_phases(&sizes, 6_000.0);
        let shards = f64::from(DELIVERY_LOG_SHARDS);
        // 6,000 alarms in a minute: 100 delivery puts a second, spread over the log's
        // partitions; the owner's partition only has the endpoint read by each stream batch.
        assert_eq!(phases[0].1, OWNER_KEY);
        assert_eq!(phases[0].2, 1.0 * write_units(sizes.endpoint) as f64);
        assert_eq!(phases[1].1, LOG_KEY);
        assert_eq!(
            phases[1].2,
            100.0 * write_units(sizes.delivery_pending) as f64 / shards
        );
        // The worker's bound: 20 x 10 / 5 s = 40 attempts a second, each with two breaker
        // updates of the endpoint and one put of its delivery.
        assert_eq!(phases[2].2, 40.0 * 2.0 * write_units(sizes.endpoint) as f64);
        assert_eq!(
            phases[3].2,
            40.0 * write_units(sizes.delivery_failed) as f64 / shards
        );
        // 6,000 held messages read back every 62.5 s: 96 endpoint reads a second on the
        // owner's key, 96 delivery reads spread over the log's.
        assert!((phases[4].3 - 96.0 * strong_read_units(sizes.endpoint)).abs() < 1e-9);
        assert!(
            (phases[5].3 - 96.0 * strong_read_units(sizes.delivery_failed) / shards).abs() < 1e-9
        );
    }
}
