//! An endpoint's delivery log (issue 41, item 5): `GET .../webhooks/{webhookId}/deliveries`,
//! newest first, and `POST .../deliveries/{deliveryId}/retry`, the owner's redeliver button.
//!
//! The log is the endpoint's delivery items, `USER#{owner}#WHLOG#{webhookId}#{shard}` /
//! `WHDELIVERY#{deliveryId}`, spread over 16 partitions by a hash of the id: a delivery id
//! starts with its creation time ([`DeliveryId::generate_at`], [`DeliveryId::of_notice`]), so
//! each partition sorts oldest to newest, and a page merges them read backwards, newest first.
//! Items expire 30 days after creation (TTL).

use serde::Serialize;

use crate::model::entities::webhook::WebhookItem;
use crate::model::entities::webhook_delivery::{
    log_partition, DeliveryState, WebhookDeliveryItem, DELIVERY_LOG_SHARDS, DELIVERY_PREFIX,
};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::UserId;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, PK, SK};
use crate::model::timestamp::Timestamp;
use crate::model::webhook::{DeliveryId, WebhookEvent, WebhookId};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::ops::webhooks::deliveries::{reserve_send_slots, seconds_until};
use crate::ops::webhooks::endpoints::read_webhook;
use crate::ops::webhooks::{DeliveryMessage, DeliveryQueue};
use crate::ops::MAX_LIMIT;
use crate::store::dynamo::{key_prefix, query, read_consistent, string_value};
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// AP-W9, implemented by [`list_deliveries`].
pub const WEBHOOK_DELIVERIES: AccessPattern = AccessPattern {
    id: PatternId::WebhookDeliveries,
    description: "an endpoint's delivery log, newest first (event, attempts, last status, latency, next retry), kept 30 days",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::Query],
    index: None,
    key_condition: "the endpoint; per log partition PK = USER#{userId}#WHLOG#{webhookId}#{shard}, SK begins_with WHDELIVERY#, backwards",
    budget: RequestBudget::PartitionedLogPages,
    max_read_units: None,
    route: Some("GET /me/webhooks/{webhookId}/deliveries"),
    implemented_by: implemented_by!(list_deliveries),
};

/// AP-W10, implemented by [`redeliver`].
pub const REDELIVER_WEBHOOK: AccessPattern = AccessPattern {
    id: PatternId::RedeliverWebhook,
    description: "redeliver one delivery under its webhook-id, in the endpoint's next send slot",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::UpdateItem],
    index: None,
    key_condition: "the endpoint and the delivery's log item (read at once); the endpoint's send slot; the delivery, conditioned on not being pending",
    // Two reads, the slot (two UpdateItems when a racing reservation beat the first), the
    // delivery (and an SQS SendMessage).
    budget: RequestBudget::Fixed(5),
    max_read_units: None,
    route: Some("POST /me/webhooks/{webhookId}/deliveries/{deliveryId}/retry"),
    implemented_by: implemented_by!(redeliver),
};

/// One delivery as the log shows it: never its body (the receiver has it; the log says what
/// happened to it).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    /// The message id, the `webhook-id` header of every attempt.
    pub delivery_id: DeliveryId,
    /// The event.
    pub event: WebhookEvent,
    /// `pending` (retried), `delivered` (a 2xx) or `abandoned` (given up).
    pub status: DeliveryState,
    /// Attempts made, redeliveries included.
    pub attempts: u32,
    /// The last attempt's HTTP status; `null` before the first attempt or when it got no
    /// answer (then `lastError` says why).
    pub last_status: Option<u16>,
    /// Why the last attempt got no answer, or why the delivery was abandoned.
    pub last_error: Option<String>,
    /// The last attempt's latency.
    pub last_latency_ms: Option<u64>,
    /// When the next attempt is due, while pending after a failure.
    pub next_retry_at: Option<Timestamp>,
    /// When created.
    pub created_at: Timestamp,
    /// When the owner last asked for a redelivery.
    pub redelivered_at: Option<Timestamp>,
    /// While it waits for its send slot (the endpoint's `rateLimit`): when it will be sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_at: Option<Timestamp>,
}

impl From<&WebhookDeliveryItem> for DeliveryView {
    fn from(item: &WebhookDeliveryItem) -> Self {
        Self {
            delivery_id: item.delivery_id.clone(),
            event: item.event,
            status: item.state,
            attempts: item.attempts,
            last_status: item.last_status,
            last_error: item.last_error.clone(),
            last_latency_ms: item.latency_ms,
            next_retry_at: item.next_retry_at,
            created_at: item.created_at,
            redelivered_at: item.redelivered_at,
            send_at: item
                .send_at
                .filter(|at| item.state == DeliveryState::Pending && *at > Timestamp::now()),
        }
    }
}

/// One page of an endpoint's log, newest first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeliveryPage {
    /// The deliveries.
    pub items: Vec<DeliveryView>,
    /// Where the next page starts (the page's last delivery id); `null` on the last page.
    pub cursor: Option<String>,
}

/// The 400 of a cursor that is no delivery id.
fn bad_cursor() -> ValidationError {
    ValidationError::new("cursor", "is not a cursor this request issued")
}

/// `GET .../webhooks/{webhookId}/deliveries`: `limit` (1 to [`MAX_LIMIT`]) of the endpoint's
/// deliveries, newest first, older than `cursor` (a delivery id: every start key is built in
/// the caller's own log partitions, so no cursor reaches another's). The log is spread over
/// [`DELIVERY_LOG_SHARDS`] partitions, each sorted by time; a page merges them exactly: a
/// consistent GetItem of the endpoint (a deleted or foreign endpoint is a 404, its log with
/// it) at once with one Query per partition for its share of the page (`limit / 16`, rounded
/// up, plus one), then one more Query for each partition whose share ran out while it could
/// still hold the page's next delivery: 17 requests a page, a few more when the newest
/// deliveries happen to crowd into some partitions.
pub async fn list_deliveries(
    table: &FleetTable,
    owner: &UserId,
    webhook: &WebhookId,
    limit: u32,
    cursor: Option<&str>,
) -> Result<DeliveryPage, FleetError> {
    let after = cursor
        .map(|c| DeliveryId::parse(c).map_err(|_| bad_cursor()))
        .transpose()?;
    let limit = limit.clamp(1, MAX_LIMIT) as usize;
    let share = limit.div_ceil(usize::from(DELIVERY_LOG_SHARDS)) + 1;
    let mut partitions: Vec<LogPartition> = (0..DELIVERY_LOG_SHARDS)
        .map(|shard| LogPartition {
            pk: log_partition(owner, webhook, shard),
            newest_first: std::collections::VecDeque::new(),
            // A cursor starts every partition just past it (the key need not exist).
            next: Some(after.as_ref().map(|delivery| {
                let key = ItemKey::WebhookDelivery {
                    user: owner.clone(),
                    webhook: webhook.clone(),
                    delivery: delivery.clone(),
                }
                .primary_key();
                let mut start = Item::new();
                start.insert(
                    PK.name().into(),
                    string_value(log_partition(owner, webhook, shard)),
                );
                start.insert(SK.name().into(), string_value(key.sk));
                start
            })),
        })
        .collect();
    let first_reads = read_log_partitions(table, &mut partitions, share);
    let (endpoint, first_reads) = tokio::join!(read_webhook(table, owner, webhook), first_reads);
    endpoint?;
    first_reads?;
    let mut items = Vec::with_capacity(limit);
    while items.len() < limit {
        // A partition whose read share ran out may hold the next delivery: read on first.
        if partitions
            .iter()
            .any(|p| p.newest_first.is_empty() && p.next.is_some())
        {
            read_log_partitions(table, &mut partitions, (limit - items.len()).max(1)).await?;
        }
        let newest = partitions
            .iter_mut()
            .filter(|p| !p.newest_first.is_empty())
            .max_by(|a, b| {
                a.newest_first[0]
                    .delivery_id
                    .cmp(&b.newest_first[0].delivery_id)
            });
        let Some(newest) = newest else {
            break;
        };
        items.push(
            newest
                .newest_first
                .pop_front()
                .expect("a partition with items"),
        );
    }
    let more = partitions
        .iter()
        .any(|p| !p.newest_first.is_empty() || p.next.is_some());
    let cursor = more
        .then(|| items.last().map(|d| d.delivery_id.to_string()))
        .flatten();
    Ok(DeliveryPage {
        items: items.iter().map(DeliveryView::from).collect(),
        cursor,
    })
}

/// One of an endpoint's log partitions, as a page reads it: the deliveries read and not yet
/// taken, and where its next Query starts (`Some(None)`: from its newest; `None`: read to its
/// end).
struct LogPartition {
    pk: String,
    newest_first: std::collections::VecDeque<WebhookDeliveryItem>,
    next: Option<Option<Item>>,
}

/// Reads the next `count` deliveries, newest first, of every partition that has none read
/// and more to read: one Query each, at once.
async fn read_log_partitions(
    table: &FleetTable,
    partitions: &mut [LogPartition],
    count: usize,
) -> Result<(), FleetError> {
    let reads = partitions
        .iter_mut()
        .filter(|p| p.newest_first.is_empty() && p.next.is_some())
        .map(|partition| async move {
            let start = partition.next.take().flatten();
            let request = key_prefix(
                table,
                partition.pk.clone(),
                DELIVERY_PREFIX,
                Expressions::builder(),
            )
            .scan_index_forward(false)
            .limit(count.min(MAX_LIMIT as usize) as i32)
            .set_exclusive_start_key(start);
            let (items, last) = query(request).await?;
            for item in items {
                partition
                    .newest_first
                    .push_back(WebhookDeliveryItem::from_item(item)?);
            }
            partition.next = last.map(Some);
            Ok::<_, FleetError>(())
        });
    futures::future::try_join_all(reads).await?;
    Ok(())
}

/// `POST .../deliveries/{deliveryId}/retry`: sends a delivered or abandoned delivery again,
/// the same body under the same `webhook-id` (receivers deduplicate by it; a redelivery is
/// the same message, not a new one), with a new 24-hour retry window from now. A 404 for no
/// such endpoint or delivery; a 409 `delivery_pending` while it is still being retried (its
/// next attempt is already queued: a second message would only race it),
/// `webhook_disabled` / `webhook_unconfirmed` when the endpoint would not be sent it.
/// It goes in the endpoint's next send slot (its `rateLimit`). Requests: two consistent
/// GetItems, one UpdateItem of the endpoint's slots ([`reserve_send_slots`], two when its
/// last slot is past), one UpdateItem (conditioned on the delivery not being pending, so two
/// clicks queue one redelivery), one SQS SendMessage.
pub async fn redeliver(
    table: &FleetTable,
    queue: &DeliveryQueue,
    owner: &UserId,
    webhook: &WebhookId,
    delivery: &DeliveryId,
) -> Result<DeliveryView, FleetError> {
    let key = ItemKey::WebhookDelivery {
        user: owner.clone(),
        webhook: webhook.clone(),
        delivery: delivery.clone(),
    };
    let (endpoint, item) = tokio::join!(
        read_webhook(table, owner, webhook),
        read_consistent::<WebhookDeliveryItem>(table, &key)
    );
    let endpoint = endpoint?;
    let mut item = item?.ok_or(FleetError::NotFound("delivery"))?;
    refuse_redelivery(&endpoint, &item)?;
    let now = Timestamp::now();
    let slot = reserve_send_slots(table, &endpoint, 1, now).await?[0];
    let delay = seconds_until(now, slot);
    let mut reopened = Update::new()
        .set(
            WebhookDeliveryItem::STATE,
            string_value(state_name(DeliveryState::Pending)),
        )
        .set(
            WebhookDeliveryItem::REDELIVERED_AT,
            string_value(now.to_string()),
        )
        .remove(WebhookDeliveryItem::NEXT_RETRY_AT);
    reopened = if delay > 0 {
        reopened.set(WebhookDeliveryItem::SEND_AT, string_value(slot.to_string()))
    } else {
        reopened.remove(WebhookDeliveryItem::SEND_AT)
    };
    let not_pending = Condition::exists(PK).and(Condition::differs(
        WebhookDeliveryItem::STATE,
        string_value(state_name(DeliveryState::Pending)),
    ));
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .expressions(Expressions::write(reopened, Some(not_pending)))
        .send()
        .await;
    if let Err(err) = result {
        return match err.as_service_error() {
            Some(e) if e.is_conditional_check_failed_exception() => Err(pending()),
            _ => Err(sdk_error(err)),
        };
    }
    queue
        .enqueue_after(
            &DeliveryMessage {
                owner: owner.clone(),
                webhook_id: webhook.clone(),
                delivery_id: delivery.clone(),
            },
            delay,
        )
        .await?;
    item.state = DeliveryState::Pending;
    item.send_at = (delay > 0).then_some(slot);
    item.redelivered_at = Some(now);
    item.next_retry_at = None;
    Ok(DeliveryView::from(&item))
}

/// Why `item` cannot be redelivered to `endpoint` now, if it cannot.
fn refuse_redelivery(endpoint: &WebhookItem, item: &WebhookDeliveryItem) -> Result<(), FleetError> {
    if item.state == DeliveryState::Pending {
        return Err(pending());
    }
    if !endpoint.enabled {
        return Err(FleetError::Conflict {
            code: "webhook_disabled",
            message: "the webhook is disabled: enable it first".into(),
        });
    }
    if !endpoint.confirmed && item.event != WebhookEvent::WebhookConfirm {
        return Err(FleetError::Conflict {
            code: "webhook_unconfirmed",
            message: "the webhook is not confirmed yet: it receives nothing but its confirmation"
                .into(),
        });
    }
    Ok(())
}

fn pending() -> FleetError {
    FleetError::Conflict {
        code: "delivery_pending",
        message: "the delivery is still being retried: its next attempt is queued".into(),
    }
}

/// A state as stored (`pending`).
fn state_name(state: DeliveryState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
