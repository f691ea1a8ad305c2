//! `fleet-perf bench-webhooks` (`make bench-webhooks`): webhook deliveries a second through the
//! local queue (issue 41). An endpoint at a local receiver that answers 200 at once, confirmed
//! by its `webhook.confirm` delivery; `webhook.test` deliveries queued on moto's SQS; then
//! the delivery worker drains them as Lambda's SQS event source runs it (batches of 10, by
//! `consumers` concurrent pollers, as Lambda's poller scales), each delivery read, signed, sent,
//! and its attempt recorded on DynamoDB Local. Deliveries a second = deliveries / the time from
//! the first receive to the last delivery.
//!
//! The worker runs in this process (this release build), not as its bootstrap: the bench's
//! Runtime API serves API Gateway events, and the SQS batch is the same code either way. The
//! endpoint's rate limit is set to its maximum so that pacing, which is by design
//! (docs/design.md section 16), does not stand in for throughput. Nothing here asserts a speed.

use std::time::{Duration, Instant};

use serde_json::json;
use shared::model::ids::UserId;
use shared::model::webhook::target::TargetPolicy;
use shared::ops::webhooks::deliveries::RetrySchedule;
use shared::ops::webhooks::endpoints::{create_webhook, send_test, WebhookChanges};
use shared::ops::webhooks::DeliveryQueue;
use webhooks::worker::DeliveryWorker;

use super::common::BenchError;
use fleet_testkit::dynamodb_local::{default_install_dir, DynamoDbLocal};
use fleet_testkit::moto_server::MotoServer;
use fleet_testkit::stack::{create_table, local_table};
use fleet_testkit::template::{default_template_path, Template};
use fleet_testkit::webhook_queue::{create_queue, pump, sqs_client};
use fleet_testkit::webhook_receiver::WebhookReceiver;

/// One measurement.
#[derive(Clone, Debug)]
pub struct DeliveryThroughput {
    /// Concurrent pollers.
    pub consumers: usize,
    /// Deliveries sent.
    pub deliveries: usize,
    /// Seconds from the first receive to the last delivery.
    pub seconds: f64,
    /// Seconds to queue them (the API's `send_test`: a log item and a SendMessage each).
    pub queue_seconds: f64,
}

impl DeliveryThroughput {
    /// Deliveries a second.
    pub fn per_second(&self) -> f64 {
        self.deliveries as f64 / self.seconds
    }
}

/// Queues `deliveries` test deliveries and drains them with `consumers` pollers, on a fresh
/// table, queue and receiver.
async fn measure_once(
    template: &Template,
    dynamodb: &DynamoDbLocal,
    moto: &MotoServer,
    consumers: usize,
    deliveries: usize,
    round: usize,
) -> Result<DeliveryThroughput, BenchError> {
    // A table and a queue of their own a round.
    let name = format!("bench-webhooks-{consumers}-{round}-{}", std::process::id());
    let table = local_table(dynamodb.endpoint(), &name).await;
    create_table(&table.client, &template.table.without_stream(), &name)
        .await
        .map_err(BenchError::setup)?;
    let queue: DeliveryQueue = create_queue(&sqs_client(moto.endpoint()), &name)
        .await
        .map_err(BenchError::setup)?;
    let receiver = WebhookReceiver::start(&[], true)
        .await
        .map_err(BenchError::setup)?;
    let policy = TargetPolicy::local(&receiver.target());
    let worker = DeliveryWorker::new(
        table.clone(),
        queue.clone(),
        policy.clone(),
        RetrySchedule::default(),
    )
    .map_err(BenchError::setup)?;
    let owner = UserId::parse("bench-webhooks").map_err(BenchError::setup)?;
    let changes = WebhookChanges::parse(
        &json!({"url": receiver.url("/hook"), "events": ["alarm.raised"], "rateLimit": 1000}),
        &policy,
        true,
    )
    .map_err(BenchError::setup)?;
    let created = create_webhook(&table, &queue, &owner, changes)
        .await
        .map_err(BenchError::setup)?;
    // The confirmation: the receiver echoes the body, which carries the token.
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.received().is_empty() && Instant::now() < deadline {
        pump(&worker, &queue, 1).await.map_err(BenchError::setup)?;
    }
    let webhook = created.webhook.webhook_id.clone();
    let queued = Instant::now();
    for _ in 0..deliveries {
        send_test(&table, &queue, &owner, &webhook)
            .await
            .map_err(BenchError::setup)?;
    }
    let queue_seconds = queued.elapsed().as_secs_f64();
    let expected = deliveries + 1;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    let pollers = (0..consumers).map(|_| async {
        while receiver.received().len() < expected && Instant::now() < deadline {
            pump(&worker, &queue, 1).await.map_err(BenchError::setup)?;
        }
        Ok::<(), BenchError>(())
    });
    for result in futures::future::join_all(pollers).await {
        result?;
    }
    let received = receiver.received().len();
    if received < expected {
        return Err(BenchError::setup(format!(
            "{received} of {expected} deliveries arrived within 600 s"
        )));
    }
    Ok(DeliveryThroughput {
        consumers,
        deliveries,
        seconds: started.elapsed().as_secs_f64(),
        queue_seconds,
    })
}

/// The command: each consumer count in turn, `rounds` times, printed as a Markdown table with
/// the median.
pub async fn command(
    deliveries: usize,
    consumers: &[usize],
    rounds: usize,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let template = Template::load(&default_template_path())?;
    let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
    let moto = MotoServer::start_default()?;
    println!(
        "| pollers | deliveries | deliveries a second (median of {rounds}) | each round | queueing them, a second |\n|---|---|---|---|---|"
    );
    for &n in consumers {
        let mut runs = Vec::new();
        for round in 0..rounds.max(1) {
            runs.push(measure_once(&template, &dynamodb, &moto, n, deliveries, round).await?);
        }
        let mut rates: Vec<f64> = runs.iter().map(DeliveryThroughput::per_second).collect();
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        let queueing: Vec<f64> = runs
            .iter()
            .map(|r| r.deliveries as f64 / r.queue_seconds)
            .collect();
        println!(
            "| {n} | {deliveries} | {median:.1} | {} | {} |",
            rates
                .iter()
                .map(|r| format!("{r:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            queueing
                .iter()
                .map(|r| format!("{r:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    Ok(())
}
