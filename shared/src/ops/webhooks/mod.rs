//! Webhooks (issue 41): an owner's endpoints ([`endpoints`]) and the deliveries to them
//! ([`deliveries`]), sent through an SQS queue ([`DeliveryQueue`]) by the `webhooks`
//! function's delivery worker, so a slow endpoint holds up a queue message, never an API
//! request or the alarm stream.

pub mod alarm_notices;
pub mod deliveries;
pub mod delivery_log;
pub mod endpoints;

use serde::{Deserialize, Serialize};

use crate::model::entities::webhook::{WebhookItem, WEBHOOK_PREFIX};
use crate::model::entities::Entity;
use crate::model::error::FleetError;
use crate::model::expression::Expressions;
use crate::model::ids::UserId;
use crate::model::keys::user_pk;
use crate::model::webhook::{DeliveryId, WebhookId};
use crate::store::dynamo::key_prefix;
use crate::store::table::{sdk_error, FleetTable};

/// The environment variable that names the delivery queue (set from its `Ref` in
/// `template.yaml`).
pub const QUEUE_URL_ENV: &str = "WEBHOOK_QUEUE_URL";

/// The longest a message can be delayed when it is sent (SQS's `DelaySeconds`).
pub const MAX_DELAY_SECONDS: u32 = 900;

/// Messages in one SendMessageBatch (SQS's most).
pub const SEND_BATCH: usize = 10;

/// What a queue message names: one delivery of one endpoint (the body and attempts are in
/// the delivery's log item, so a message is small and a retry re-reads the endpoint: a
/// disabled or deleted endpoint gets nothing more).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryMessage {
    /// The owner.
    pub owner: UserId,
    /// The endpoint.
    pub webhook_id: WebhookId,
    /// The delivery.
    pub delivery_id: DeliveryId,
}

/// The delivery queue: SQS (moto's server locally, through `AWS_ENDPOINT_URL_SQS`).
#[derive(Clone, Debug)]
pub struct DeliveryQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl DeliveryQueue {
    /// The queue at `url` through `client`.
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    /// The queue named by [`QUEUE_URL_ENV`], with a client from the standard AWS variables.
    pub async fn from_env() -> Result<Self, FleetError> {
        let url = std::env::var(QUEUE_URL_ENV)
            .map_err(|_| FleetError::internal(format!("{QUEUE_URL_ENV} is not set")))?;
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Ok(Self::new(aws_sdk_sqs::Client::new(&sdk), url))
    }

    /// The queue's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Puts `message` on the queue.
    pub async fn enqueue(&self, message: &DeliveryMessage) -> Result<(), FleetError> {
        self.enqueue_after(message, 0).await
    }

    /// Puts a message on the queue, invisible for `delay_seconds` (SQS allows 900 at most):
    /// a delivery paced to a later send slot.
    pub async fn enqueue_after(
        &self,
        message: &DeliveryMessage,
        delay_seconds: u32,
    ) -> Result<(), FleetError> {
        let body = serde_json::to_string(message).map_err(FleetError::internal)?;
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .delay_seconds(delay_seconds.min(MAX_DELAY_SECONDS) as i32)
            .send()
            .await
            .map_err(|e| FleetError::internal(format!("SQS SendMessage: {e:?}")))?;
        Ok(())
    }

    /// Puts `messages` on the queue, each invisible for its delay, with SendMessageBatch: 10 a
    /// call (SQS's most), so a stream batch's fan-out of up to 100 deliveries is 10 requests,
    /// not 100. Returns the indexes of the messages SQS did not take: the entries it refused,
    /// and every entry of a call that failed whole (the caller retries from the first of
    /// them; the others taken already are made good by the worker's dedup).
    pub async fn enqueue_all(
        &self,
        messages: &[(DeliveryMessage, u32)],
    ) -> Result<Vec<usize>, FleetError> {
        let mut refused = Vec::new();
        for (chunk_index, chunk) in messages.chunks(SEND_BATCH).enumerate() {
            let first = chunk_index * SEND_BATCH;
            let mut entries = Vec::with_capacity(chunk.len());
            for (offset, (message, delay_seconds)) in chunk.iter().enumerate() {
                let body = serde_json::to_string(message).map_err(FleetError::internal)?;
                entries.push(
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id((first + offset).to_string())
                        .message_body(body)
                        .delay_seconds((*delay_seconds).min(MAX_DELAY_SECONDS) as i32)
                        .build()
                        .map_err(FleetError::internal)?,
                );
            }
            let sent = self
                .client
                .send_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await;
            match sent {
                Ok(out) => {
                    for failed in out.failed() {
                        tracing::warn!(
                            code = failed.code(),
                            sender_fault = failed.sender_fault(),
                            "SQS refused a delivery message"
                        );
                        if let Ok(index) = failed.id().parse::<usize>() {
                            refused.push(index);
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(error = ?err, "SQS SendMessageBatch failed");
                    refused.extend(first..first + chunk.len());
                }
            }
        }
        refused.sort_unstable();
        Ok(refused)
    }

    /// Makes a received message visible again in `seconds` (its retry's backoff): the
    /// message is not deleted, so SQS redelivers it then (and moves it to the dead-letter
    /// queue after the redrive policy's receive count).
    pub async fn retry_in(&self, receipt_handle: &str, seconds: u32) -> Result<(), FleetError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(seconds as i32)
            .send()
            .await
            .map_err(|e| FleetError::internal(format!("SQS ChangeMessageVisibility: {e:?}")))?;
        Ok(())
    }

    /// Deletes a message that is done with.
    pub async fn delete(&self, receipt_handle: &str) -> Result<(), FleetError> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| FleetError::internal(format!("SQS DeleteMessage: {e:?}")))?;
        Ok(())
    }

    /// The SDK client (for the local poller that stands in for the Lambda event source).
    pub fn client(&self) -> &aws_sdk_sqs::Client {
        &self.client
    }
}

/// The owner's endpoint items, secrets included (for the senders): the Query of
/// [`endpoints::list_webhooks`], eventually consistent (an endpoint created a second ago may miss one
/// alarm; a deleted or disabled one is checked again before every attempt).
pub async fn webhook_items(
    table: &FleetTable,
    owner: &UserId,
) -> Result<Vec<WebhookItem>, FleetError> {
    let out = key_prefix(
        table,
        user_pk(owner),
        WEBHOOK_PREFIX,
        Expressions::builder(),
    )
    .send()
    .await
    .map_err(sdk_error)?;
    out.items
        .unwrap_or_default()
        .into_iter()
        .map(WebhookItem::from_item)
        .collect()
}
