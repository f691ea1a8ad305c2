//! Alarm transitions to webhook deliveries (issue 41): the table's stream of alarm items, the
//! same records alarm-watch publishes to EventBridge, read by the delivery function through an
//! event source mapping of its own, so webhooks neither wait for nor hold up the EventBridge
//! notifications. Each transition of a record becomes one delivery per endpoint of the
//! alarm's fleet that is enabled, confirmed and subscribed to its event.
//!
//! Exactly one delivery per transition and endpoint: its id is derived from the transition's
//! `notificationId` and the endpoint ([`DeliveryId::of_notice`]), and its log item is written
//! only if new, so a retried or replayed record makes the same delivery again (one
//! `webhook-id`, delivered once) instead of a second one. Records are handled in stream order;
//! the first that fails (a DynamoDB or SQS error) is answered as the batch item failure, so
//! Lambda retries from it and a device's later transitions wait behind it.

use std::collections::HashMap;

use crate::model::alarm::ids::{AlarmKind, AlarmSource};
use crate::model::entities::alarm::AlarmItem;
use crate::model::entities::webhook::WebhookItem;
use crate::model::error::FleetError;
use crate::model::ids::UserId;
use crate::model::pattern_id::PatternId;
use crate::model::timestamp::Timestamp;
use crate::model::webhook::{DeliveryId, WebhookEvent, WebhookId};
use crate::ops::alarms::notify::{
    alarm_detail, record_transitions, DetailType, Notice, StreamRecord,
};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::ops::webhooks::deliveries::{create_once_at, reserve_send_slots, CreatedDelivery};
use crate::ops::webhooks::endpoints::webhook_items;
use crate::ops::webhooks::{DeliveryMessage, DeliveryQueue};
use crate::store::table::FleetTable;

/// AP-W12, implemented by [`deliver_alarm_transitions`].
pub const ALARM_WEBHOOKS: AccessPattern = AccessPattern {
    id: PatternId::AlarmWebhooks,
    description: "an alarm stream batch's transitions as deliveries to their fleets' subscribed endpoints, paced to each endpoint's rate",
    frequency: Frequency::Important,
    operations: &[Operation::Query, Operation::UpdateItem, Operation::PutItem],
    index: None,
    key_condition: "per fleet PK = USER#{owner}, SK begins_with WEBHOOK#; per endpoint its send slots; per delivery its log item (conditioned on its absence)",
    budget: RequestBudget::FleetsEndpointsDeliveries,
    max_read_units: None,
    route: None,
    implemented_by: implemented_by!(deliver_alarm_transitions),
};

/// What a batch of stream records made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlarmDeliveries {
    /// Transitions read.
    pub transitions: u64,
    /// Deliveries queued (new or made again).
    pub queued: u64,
    /// Of those, deliveries whose log item already existed (a retried or replayed record).
    pub repeated: u64,
    /// Records that could not be read (alarm-watch sends them to the dead-letter queue).
    pub unreadable: u64,
    /// The sequence number of the first record not fully handled: the batch item failure
    /// Lambda retries from.
    pub failed_from: Option<String>,
}

/// The webhook events a transition of `alarm` is: every alarm's `alarm.raised` (reminders
/// too, with `reminder` in the data), `alarm.acknowledged` and `alarm.cleared`; an offline
/// alarm's raise is also `device.offline` and its clear `device.online`.
pub fn webhook_events(kind: AlarmKind, notice: &Notice) -> Vec<WebhookEvent> {
    let offline = kind == AlarmKind::Offline;
    match notice.detail_type {
        DetailType::Raised if offline && notice.reminder.is_none() => {
            vec![WebhookEvent::AlarmRaised, WebhookEvent::DeviceOffline]
        }
        DetailType::Raised => vec![WebhookEvent::AlarmRaised],
        DetailType::Acknowledged => vec![WebhookEvent::AlarmAcknowledged],
        DetailType::Cleared if offline => {
            vec![WebhookEvent::AlarmCleared, WebhookEvent::DeviceOnline]
        }
        DetailType::Cleared => vec![WebhookEvent::AlarmCleared],
    }
}

/// When `notice`'s transition of `alarm` happened, read from the alarm item itself (so every
/// run over the record derives the same time, and the same delivery id): its raise, its n-th
/// reminder (due `n` intervals after the raise), its acknowledgement or its clear.
pub fn transition_time(alarm: &AlarmItem, notice: &Notice) -> Timestamp {
    match notice.detail_type {
        DetailType::Raised => {
            let every = alarm.remind_every_seconds.unwrap_or(0) as i64;
            let n = i64::from(notice.reminder.unwrap_or(0));
            alarm.raised_at.plus_seconds(every.saturating_mul(n))
        }
        DetailType::Acknowledged => alarm.acknowledged_at.unwrap_or(alarm.raised_at),
        DetailType::Cleared => alarm.cleared_at.unwrap_or(alarm.raised_at),
    }
}

/// Turns the transitions of `records` (in stream order) into deliveries to their fleets'
/// endpoints. Per owner, one Query of its endpoints per batch; per endpoint, one UpdateItem
/// reserving the send slots of all its deliveries of the batch ([`reserve_send_slots`]: a
/// storm is paced to each endpoint's `rateLimit` with one write per batch, not one per
/// delivery); per delivery, a conditional PutItem; then the deliveries' messages, each delayed
/// to its slot, 10 to an SQS SendMessageBatch.
pub async fn deliver_alarm_transitions(
    table: &FleetTable,
    queue: &DeliveryQueue,
    records: &[StreamRecord],
) -> Result<AlarmDeliveries, FleetError> {
    let mut made = AlarmDeliveries::default();
    let mut endpoints: HashMap<UserId, Vec<WebhookItem>> = HashMap::new();
    // The batch's deliveries first, in stream order, so each endpoint's slots are reserved
    // at once; a record that could not be planned ends the batch there (Lambda retries it).
    let mut planned = Vec::new();
    let mut failed_at = None;
    for (index, record) in records.iter().enumerate() {
        if let Err(err) = plan_record(
            table,
            record,
            index,
            &mut endpoints,
            &mut made,
            &mut planned,
        )
        .await
        {
            tracing::warn!(
                error = %err,
                sequence_number = record.sequence_number(),
                "alarm deliveries failed: retried from this record"
            );
            failed_at = Some(index);
            break;
        }
    }
    let fail_from = |index: usize, made: &mut AlarmDeliveries| {
        made.failed_from = Some(records[index].sequence_number().to_string());
    };
    let mut slots: HashMap<(UserId, WebhookId), std::collections::VecDeque<Timestamp>> =
        HashMap::new();
    let mut per_endpoint: Vec<(&WebhookItem, u32, usize)> = Vec::new();
    for delivery in &planned {
        match per_endpoint.iter_mut().find(|(e, _, _)| {
            e.user_id == delivery.endpoint.user_id && e.webhook_id == delivery.endpoint.webhook_id
        }) {
            Some((_, count, _)) => *count += 1,
            None => per_endpoint.push((&delivery.endpoint, 1, delivery.record)),
        }
    }
    let now = Timestamp::now();
    for (endpoint, count, first_record) in per_endpoint {
        match reserve_send_slots(table, endpoint, count, now).await {
            Ok(reserved) => {
                slots.insert(
                    (endpoint.user_id.clone(), endpoint.webhook_id.clone()),
                    reserved.into(),
                );
            }
            Err(err) => {
                tracing::warn!(error = %err, "send slots not reserved: retried from this record");
                fail_from(first_record, &mut made);
                return Ok(made);
            }
        }
    }
    // Every item first, in stream order, stopping at the first that cannot be written; then
    // their messages together, 10 a request.
    let mut created: Vec<(usize, CreatedDelivery)> = Vec::new();
    for delivery in planned {
        let slot = slots
            .get_mut(&(
                delivery.endpoint.user_id.clone(),
                delivery.endpoint.webhook_id.clone(),
            ))
            .and_then(|s| s.pop_front())
            .unwrap_or(now);
        match create_once_at(
            table,
            &delivery.endpoint,
            delivery.event,
            delivery.detail,
            &delivery.id,
            slot,
        )
        .await
        {
            Ok(delivery_made) => created.push((delivery.record, delivery_made)),
            Err(err) => {
                tracing::warn!(error = %err, "alarm deliveries failed: retried from this record");
                failed_at = Some(failed_at.map_or(delivery.record, |f| f.min(delivery.record)));
                break;
            }
        }
    }
    let messages: Vec<(DeliveryMessage, u32)> = created
        .iter()
        .map(|(_, c)| (c.message.clone(), c.delay_seconds))
        .collect();
    let refused = queue.enqueue_all(&messages).await?;
    for (index, (record, delivery_made)) in created.iter().enumerate() {
        if refused.binary_search(&index).is_ok() {
            failed_at = Some(failed_at.map_or(*record, |f| f.min(*record)));
            continue;
        }
        if !delivery_made.new {
            made.repeated += 1;
        }
        made.queued += 1;
    }
    if let Some(index) = failed_at {
        fail_from(index, &mut made);
    }
    Ok(made)
}

/// One delivery a batch will make: to `endpoint`, of `event` with `detail`, for the record at
/// `record`.
struct PlannedDelivery {
    record: usize,
    endpoint: WebhookItem,
    event: WebhookEvent,
    detail: serde_json::Value,
    id: DeliveryId,
}

/// The deliveries of one record's transitions, added to `planned` (the owner's endpoints
/// read once a batch into `endpoints`).
async fn plan_record(
    table: &FleetTable,
    record: &StreamRecord,
    index: usize,
    endpoints: &mut HashMap<UserId, Vec<WebhookItem>>,
    made: &mut AlarmDeliveries,
    planned: &mut Vec<PlannedDelivery>,
) -> Result<(), FleetError> {
    let read = match record {
        StreamRecord::Alarm(record, _) => record_transitions(record),
        StreamRecord::Unreadable(letter) => Err(FleetError::internal(letter.reason.clone())),
    };
    let (alarm, notices) = match read {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(()),
        Err(err) => {
            tracing::warn!(error = %err, "an unreadable alarm record: no webhook delivery");
            made.unreadable += 1;
            return Ok(());
        }
    };
    if notices.is_empty() {
        return Ok(());
    }
    if !endpoints.contains_key(&alarm.user_id) {
        let found = webhook_items(table, &alarm.user_id).await?;
        endpoints.insert(alarm.user_id.clone(), found);
    }
    let fleet_endpoints = &endpoints[&alarm.user_id];
    let kind = AlarmSource::parse(&alarm.source)?.kind();
    for notice in &notices {
        made.transitions += 1;
        let detail = alarm_detail(&alarm, notice)?;
        let notification = detail["notificationId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for event in webhook_events(kind, notice) {
            for endpoint in fleet_endpoints
                .iter()
                .filter(|e| e.enabled && e.confirmed && e.events.contains(&event))
            {
                planned.push(PlannedDelivery {
                    record: index,
                    endpoint: endpoint.clone(),
                    event,
                    detail: detail.clone(),
                    id: DeliveryId::of_notice(
                        &endpoint.webhook_id,
                        &format!("{notification}:{event}"),
                        transition_time(&alarm, notice),
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::webhook::WebhookId;

    fn notice(detail_type: DetailType, reminder: Option<u32>) -> Notice {
        Notice {
            detail_type,
            reminder,
        }
    }

    #[test]
    fn an_offline_alarm_is_also_the_devices_offline_and_online_events() {
        use WebhookEvent::*;
        let threshold = AlarmKind::Threshold;
        let offline = AlarmKind::Offline;
        assert_eq!(
            webhook_events(threshold, &notice(DetailType::Raised, None)),
            [AlarmRaised]
        );
        assert_eq!(
            webhook_events(offline, &notice(DetailType::Raised, None)),
            [AlarmRaised, DeviceOffline]
        );
        // A reminder is the alarm's again, not the device going offline again.
        assert_eq!(
            webhook_events(offline, &notice(DetailType::Raised, Some(2))),
            [AlarmRaised]
        );
        assert_eq!(
            webhook_events(offline, &notice(DetailType::Cleared, None)),
            [AlarmCleared, DeviceOnline]
        );
        assert_eq!(
            webhook_events(threshold, &notice(DetailType::Acknowledged, None)),
            [AlarmAcknowledged]
        );
    }

    #[test]
    fn a_notices_delivery_id_is_the_same_every_time_and_differs_by_endpoint_and_notice() {
        let a = WebhookId::parse("wh_a").unwrap();
        let b = WebhookId::parse("wh_b").unwrap();
        let at = Timestamp::parse_field("at", "2026-11-29T03:00:00Z").unwrap();
        let id = DeliveryId::of_notice(&a, "1.r1.d:raised:alarm.raised", at);
        assert_eq!(
            id,
            DeliveryId::of_notice(&a, "1.r1.d:raised:alarm.raised", at)
        );
        assert_ne!(
            id,
            DeliveryId::of_notice(&b, "1.r1.d:raised:alarm.raised", at)
        );
        assert_ne!(
            id,
            DeliveryId::of_notice(&a, "1.r1.d:cleared:alarm.cleared", at)
        );
        // It has the shape the routes and the worker accept.
        let text = serde_json::to_value(&id).unwrap();
        assert_eq!(DeliveryId::parse(text.as_str().unwrap()).unwrap(), id);
    }

    #[test]
    fn delivery_ids_sort_as_their_times_do_so_the_log_reads_newest_first() {
        let a = WebhookId::parse("wh_a").unwrap();
        let t0 = Timestamp::parse_field("at", "2026-11-29T03:00:00Z").unwrap();
        let mut ids = Vec::new();
        for (i, later) in [0i64, 1, 999, 1_000, 86_400_000, 30 * 86_400_000]
            .iter()
            .enumerate()
        {
            let at = t0.plus_millis(*later);
            // Derived and random ids interleave by time alone.
            ids.push(if i % 2 == 0 {
                DeliveryId::of_notice(&a, &format!("n{i}"), at)
            } else {
                DeliveryId::generate_at(at).unwrap()
            });
        }
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
        for id in &ids {
            assert!(id.as_str().len() <= "msg_".len() + 43, "{id}");
        }
    }
}
