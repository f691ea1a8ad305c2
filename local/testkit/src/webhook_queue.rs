//! The webhook delivery queue locally: an SQS client for moto's server (or whatever
//! `AWS_ENDPOINT_URL_SQS` names), and [`pump`], the stand-in for Lambda's SQS event source:
//! it receives a batch, hands it to the delivery worker as the SQS event Lambda would, and
//! deletes the messages the worker did not report failed (as the event source does with
//! `ReportBatchItemFailures`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use aws_sdk_sqs::config::{Credentials, Region};
use serde_json::{json, Value};
use shared::ops::webhooks::{DeliveryQueue, QUEUE_URL_ENV};
use webhooks::worker::DeliveryWorker;

/// An SQS client for `endpoint` (moto's server), with static local credentials.
pub fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "local"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

/// The delivery queues made for tables (the reference dataset's), by table name: the SQS
/// endpoint and the queue's URL.
static TABLE_QUEUES: Mutex<BTreeMap<String, (String, String)>> = Mutex::new(BTreeMap::new());

/// Records that deliveries made on the table named `table` go to the queue at `queue_url` on
/// the SQS server at `endpoint` ([`queue_for_table`]).
pub fn register_queue(table: &str, endpoint: &str, queue_url: &str) {
    if let Ok(mut queues) = TABLE_QUEUES.lock() {
        queues.insert(
            table.to_string(),
            (endpoint.to_string(), queue_url.to_string()),
        );
    }
}

/// The SQS endpoint and queue URL registered for the table named `table`, if any (the bench
/// gives them to the webhooks function's bootstrap).
pub fn registered_queue(table: &str) -> Option<(String, String)> {
    TABLE_QUEUES.lock().ok()?.get(table).cloned()
}

/// The queue registered for `table` ([`register_queue`]), else the one the environment names
/// ([`queue_from_env`]). A client is built per call, never kept: a client's connections belong to
/// the runtime that made them, and each test has its own.
pub fn queue_for_table(table: &shared::FleetTable) -> DeliveryQueue {
    match registered_queue(table.name()) {
        Some((endpoint, url)) => DeliveryQueue::new(sqs_client(&endpoint), url),
        None => queue_from_env(),
    }
}

/// The queue the environment names (`WEBHOOK_QUEUE_URL`, through `AWS_ENDPOINT_URL_SQS`);
/// without them, a queue no request reaches (sends fail, as they would on AWS without it).
pub fn queue_from_env() -> DeliveryQueue {
    let endpoint =
        std::env::var("AWS_ENDPOINT_URL_SQS").unwrap_or_else(|_| "http://127.0.0.1:9".into());
    let url = std::env::var(QUEUE_URL_ENV).unwrap_or_default();
    DeliveryQueue::new(sqs_client(&endpoint), url)
}

/// Creates a queue named `name` and returns it.
pub async fn create_queue(
    client: &aws_sdk_sqs::Client,
    name: &str,
) -> Result<DeliveryQueue, aws_sdk_sqs::Error> {
    let created = client.create_queue().queue_name(name).send().await?;
    Ok(DeliveryQueue::new(
        client.clone(),
        created.queue_url().unwrap_or_default(),
    ))
}

/// Receives one batch (waiting up to `wait_seconds`), runs it through `worker` as Lambda's
/// event source would, and deletes the messages it did not report failed. Returns how many
/// messages the batch had.
pub async fn pump(
    worker: &DeliveryWorker,
    queue: &DeliveryQueue,
    wait_seconds: i32,
) -> Result<usize, String> {
    let received = queue
        .client()
        .receive_message()
        .queue_url(queue.url())
        .max_number_of_messages(10)
        .wait_time_seconds(wait_seconds)
        .message_system_attribute_names(
            aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
        )
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let messages = received.messages();
    if messages.is_empty() {
        return Ok(0);
    }
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({
                "messageId": m.message_id(),
                "receiptHandle": m.receipt_handle(),
                "body": m.body(),
                "attributes": {
                    "ApproximateReceiveCount": m
                        .attributes()
                        .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount))
                        .cloned()
                        .unwrap_or_else(|| "1".to_string()),
                },
                "eventSource": "aws:sqs",
            })
        })
        .collect();
    let answer = worker
        .handle(json!({ "Records": records }))
        .await
        .map_err(|e| e.to_string())?;
    let failed: Vec<&str> = answer["batchItemFailures"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|i| i["itemIdentifier"].as_str())
                .collect()
        })
        .unwrap_or_default();
    for m in messages {
        if !failed.contains(&m.message_id().unwrap_or_default()) {
            if let Some(receipt) = m.receipt_handle() {
                queue.delete(receipt).await.map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(messages.len())
}
