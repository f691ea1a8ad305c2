//! Notifications (docs/design.md, "Notifications"): the table's stream records of alarm items
//! become EventBridge events on the bus `AlarmBus`, at least once and in order per device.
//!
//! An alarm item is written only on a transition, and DynamoDB writes no stream record for a
//! write that changes nothing, so a replayed batch publishes nothing. What a record means comes
//! from its old and new images ([`transitions`]): a new alarm was raised (and, written
//! already cleared, cleared); a change of `state` is an acknowledgement or a clear; more
//! `reminders` is a reminder. Entries are sent in record order, at most one per device in a
//! PutEvents call (EventBridge does not order the entries of one call), calls one after the
//! other; the first call with a failed entry stops the batch, and the record of the earliest
//! failed entry is reported as the batch item failure, so Lambda retries from there: the
//! device's later transitions wait behind it and nothing is lost. A retried record may
//! publish an entry again (at least once); `notificationId` tells a consumer it saw it.
//!
//! A record that cannot be read (its event, its images or its alarm fail to decode: schema
//! drift, a hand-made item) would fail the same way on every retry, so it is not retried: it
//! goes to the dead-letter queue ([`DeadLetters`]) with the reason and its images, in its
//! place in the batch, and the records after it are published (docs/reliability.md, "Hardening:
//! stream poison records"). Only what may succeed on retry (a refused PutEvents entry, a
//! failed SendMessage) becomes a batch item failure.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use aws_lambda_events::event::dynamodb::EventRecord;

use serde::Serialize;
use serde_json::{json, Value};

use crate::model::alarm::ids::AlarmKind;

use crate::model::alarm::status::AlarmState;
use crate::model::entities::alarm::{alarm_pk, AlarmItem};
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::schema::Item;
use crate::ops::alarms::lifecycle::AlarmView;

/// The events' `Source`.
pub const SOURCE: &str = "device-fleet";
/// Most entries in one PutEvents call (EventBridge's limit).
pub const PUT_EVENTS_SIZE: usize = 10;

/// What happened to an alarm: an event's `DetailType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DetailType {
    /// Raised (or reminded: `reminder` is set).
    #[serde(rename = "Device Fleet Alarm Raised")]
    Raised,
    /// Acknowledged by its owner.
    #[serde(rename = "Device Fleet Alarm Acknowledged")]
    Acknowledged,
    /// Cleared.
    #[serde(rename = "Device Fleet Alarm Cleared")]
    Cleared,
}

impl DetailType {
    /// The `DetailType` text.
    pub fn as_str(&self) -> &'static str {
        match self {
            DetailType::Raised => "Device Fleet Alarm Raised",
            DetailType::Acknowledged => "Device Fleet Alarm Acknowledged",
            DetailType::Cleared => "Device Fleet Alarm Cleared",
        }
    }

    fn transition(&self, reminder: Option<u32>) -> &'static str {
        match (self, reminder) {
            (DetailType::Raised, Some(_)) => "reminder",
            (DetailType::Raised, None) => "raised",
            (DetailType::Acknowledged, _) => "acknowledged",
            (DetailType::Cleared, _) => "cleared",
        }
    }
}

/// One transition of one alarm, as a record's images show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// What happened.
    pub detail_type: DetailType,
    /// For a reminder: which one (1, 2, ...).
    pub reminder: Option<u32>,
}

/// The transitions a stream record of an alarm item stands for, in order: `old` and `new`
/// are its images (`None`: absent, as for an INSERT's old image or an expiry's new one).
pub fn transitions(old: Option<&AlarmItem>, new: Option<&AlarmItem>) -> Vec<Notice> {
    let notice = |detail_type| Notice {
        detail_type,
        reminder: None,
    };
    let Some(new) = new else {
        // Deleted (its TTL expired): not a transition.
        return Vec::new();
    };
    let mut out = Vec::new();
    let (was_acknowledged, was_cleared) = match old {
        None => {
            out.push(notice(DetailType::Raised));
            (false, false)
        }
        Some(old) => (
            old.acknowledged_at.is_some() || old.state == AlarmState::Acknowledged,
            old.state == AlarmState::Cleared,
        ),
    };
    let acknowledged = new.acknowledged_at.is_some() || new.state == AlarmState::Acknowledged;
    if acknowledged && !was_acknowledged {
        out.push(notice(DetailType::Acknowledged));
    }
    if new.state == AlarmState::Cleared && !was_cleared {
        out.push(notice(DetailType::Cleared));
    }
    if let Some(old) = old {
        if new.reminders > old.reminders && new.state == AlarmState::Active {
            out.push(Notice {
                detail_type: DetailType::Raised,
                reminder: Some(new.reminders),
            });
        }
    }
    out
}

/// An event's `Detail` (docs/alarm-events.md): the alarm exactly as the API's routes show it
/// (`lifecycle::AlarmView`, so the two cannot drift), with its owner, `ruleName` always present
/// (`null` for offline), an offline alarm's reading as the device's last report, and the
/// transition that the event announces.
pub fn alarm_detail(alarm: &AlarmItem, notice: &Notice) -> Result<Value, FleetError> {
    let mut view = AlarmView::of(alarm)?;
    view.user_id = Some(alarm.user_id.clone());
    let offline = view.kind == AlarmKind::Offline;
    let mut detail = serde_json::to_value(&view).map_err(FleetError::internal)?;
    detail["ruleName"] = json!(alarm.rule_name);
    // An organization's alarm names it, so a subscriber routes it to the team (its `userId`
    // is the fleet's owner key `org:{orgId}`).
    if let Some(org) = alarm.user_id.fleet_org() {
        detail["orgId"] = json!(org);
    }
    if offline {
        detail["reading"] = json!({ "lastSeen": alarm.last_seen.map(|t| t.to_string()) });
    }
    let transition = notice.detail_type.transition(notice.reminder);
    detail["transition"] = json!(transition);
    if let Some(n) = notice.reminder {
        detail["reminder"] = json!(n);
    }
    detail["notificationId"] = json!(format!(
        "{}:{transition}{}",
        view.alarm_id,
        notice.reminder.map(|n| format!(":{n}")).unwrap_or_default()
    ));
    Ok(detail)
}

/// One PutEvents entry, as it is sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EventEntry {
    /// `Source`: [`SOURCE`].
    pub source: String,
    /// `DetailType`.
    pub detail_type: String,
    /// `Detail`: the JSON text.
    pub detail: String,
    /// `EventBusName`.
    pub event_bus_name: String,
}

/// The body of a PutEvents request (AWS JSON 1.1, `AWSEvents.PutEvents`) with `entries`: what
/// a stand-in records where EventBridge has no local twin.
pub fn put_events_request(entries: &[EventEntry]) -> Value {
    json!({ "Entries": entries })
}

/// Sends PutEvents calls: EventBridge on AWS, a recorder locally.
pub trait Publisher {
    /// Sends one PutEvents call of at most [`PUT_EVENTS_SIZE`] entries; per entry, `None` when
    /// it was accepted, or its error code. An `Err` fails the whole call.
    fn put_events(
        &self,
        entries: Vec<EventEntry>,
    ) -> impl Future<Output = Result<Vec<Option<String>>, FleetError>> + Send;
}

/// Keeps the stream records that cannot be read: SQS SendMessage to the dead-letter queue on
/// AWS, a recorder locally.
pub trait DeadLetters {
    /// Sends one message (a [`DeadLetter`] as JSON text); an `Err` means it was not kept.
    fn send_message(&self, body: String) -> impl Future<Output = Result<(), FleetError>> + Send;
}

/// The body of an SQS SendMessage request (AWS JSON 1.0, `AmazonSQS.SendMessage`) of `body` to
/// `queue_url`: what a stand-in records where SQS has no local twin.
pub fn send_message_request(queue_url: &str, body: &str) -> Value {
    json!({ "QueueUrl": queue_url, "MessageBody": body })
}

/// A dead-letter message: a stream record that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter {
    /// The record's sequence number (empty when even that could not be read).
    pub sequence_number: String,
    /// What failed to decode.
    pub reason: String,
    /// The record as Lambda delivered it: `{"Records": [record]}` is a stream event
    /// alarm-watch can be invoked with again once it reads it (docs/operations.md, redrive).
    pub record: Value,
}

/// One record of a stream batch, as the handler read it.
#[derive(Clone, Debug)]
pub enum StreamRecord {
    /// Read: a change of an item, and the record as Lambda delivered it (what a dead letter
    /// keeps if its alarm cannot be decoded).
    Alarm(AlarmRecord, Value),
    /// Not readable as a stream record at all (the event's shape changed).
    Unreadable(DeadLetter),
}

/// One stream record as the handler needs it: its id for a batch item failure, its images.
#[derive(Clone, Debug)]
pub struct AlarmRecord {
    /// The record's sequence number (`itemIdentifier` of a batch item failure).
    pub sequence_number: String,
    /// Its old image (empty: none).
    pub old_image: Item,
    /// Its new image (empty: none).
    pub new_image: Item,
}

/// What a batch of records published.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Published {
    /// Entries EventBridge accepted.
    pub entries: u64,
    /// PutEvents calls made.
    pub calls: u64,
    /// Records that could not be read, sent to the dead-letter queue.
    pub dead_lettered: u64,
    /// The sequence number of the first record not fully published, if any: the batch item
    /// failure Lambda retries from.
    pub failed_from: Option<String>,
}

/// What the batch does, in record order: publish an entry, or dead-letter a record.
enum Step {
    Publish {
        record: usize,
        device: String,
        entry: EventEntry,
    },
    DeadLetter {
        record: usize,
        letter: DeadLetter,
    },
}

fn alarm_of(image: &Item) -> Result<Option<AlarmItem>, FleetError> {
    if image.is_empty() || EntityType::of(image) != Some(EntityType::Alarm) {
        return Ok(None);
    }
    AlarmItem::from_item(image.clone()).map(Some)
}

/// The alarm a record is about (its new image, or its old one for a deletion) and the
/// transitions it stands for; `None` for a record of anything but an alarm. An error is a
/// record that cannot be read.
pub fn record_transitions(
    record: &AlarmRecord,
) -> Result<Option<(AlarmItem, Vec<Notice>)>, FleetError> {
    let old = alarm_of(&record.old_image)?;
    let new = alarm_of(&record.new_image)?;
    let notices = transitions(old.as_ref(), new.as_ref());
    Ok(new.or(old).map(|alarm| (alarm, notices)))
}

/// One record of a stream event as Lambda delivers it, read on its own, so one that does
/// not decode is a dead letter, not a failed batch.
pub fn stream_record(raw: &Value) -> StreamRecord {
    match serde_json::from_value::<EventRecord>(raw.clone()) {
        Ok(r) => StreamRecord::Alarm(
            AlarmRecord {
                sequence_number: r.change.sequence_number.unwrap_or_default(),
                old_image: HashMap::from(r.change.old_image),
                new_image: HashMap::from(r.change.new_image),
            },
            raw.clone(),
        ),
        Err(err) => StreamRecord::Unreadable(DeadLetter {
            sequence_number: raw["dynamodb"]["SequenceNumber"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            reason: format!("not a DynamoDB stream record: {err}"),
            record: raw.clone(),
        }),
    }
}

impl StreamRecord {
    /// The record's sequence number (empty when even that could not be read): what a batch
    /// item failure names.
    pub fn sequence_number(&self) -> &str {
        match self {
            StreamRecord::Alarm(record, _) => &record.sequence_number,
            StreamRecord::Unreadable(letter) => &letter.sequence_number,
        }
    }
}

/// The entries `record` publishes, with its device's key (all or nothing: an error is a
/// record that cannot be read).
fn entries_of(record: &AlarmRecord, bus: &str) -> Result<Vec<(String, EventEntry)>, FleetError> {
    let Some((alarm, notices)) = record_transitions(record)? else {
        return Ok(Vec::new());
    };
    let alarm = &alarm;
    notices
        .into_iter()
        .map(|notice| {
            Ok((
                alarm_pk(&alarm.user_id, &alarm.device_id),
                EventEntry {
                    source: SOURCE.to_string(),
                    detail_type: notice.detail_type.as_str().to_string(),
                    detail: alarm_detail(alarm, &notice)?.to_string(),
                    event_bus_name: bus.to_string(),
                },
            ))
        })
        .collect()
}

/// Publishes the transitions of `records` (in stream order) to `bus` through `publisher`;
/// a record that cannot be read goes to `dead_letters` in its place and the batch goes on.
pub async fn publish(
    publisher: &impl Publisher,
    dead_letters: &impl DeadLetters,
    bus: &str,
    records: &[StreamRecord],
) -> Result<Published, FleetError> {
    let mut steps = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let read = match record {
            StreamRecord::Unreadable(letter) => Err(letter.clone()),
            StreamRecord::Alarm(record, raw) => entries_of(record, bus).map_err(|err| DeadLetter {
                sequence_number: record.sequence_number.clone(),
                reason: err.to_string(),
                record: raw.clone(),
            }),
        };
        match read {
            Ok(entries) => steps.extend(entries.into_iter().map(|(device, entry)| Step::Publish {
                record: i,
                device,
                entry,
            })),
            Err(letter) => steps.push(Step::DeadLetter { record: i, letter }),
        }
    }
    let sequence_number = |i: usize| records[i].sequence_number().to_string();
    let mut published = Published::default();
    let mut rest = steps.as_slice();
    while let Some(first) = rest.first() {
        if let Step::DeadLetter { record, letter } = first {
            tracing::error!(
                sequence_number = %letter.sequence_number,
                reason = %letter.reason,
                "unreadable stream record: sent to the dead-letter queue"
            );
            let body = serde_json::to_string(letter).map_err(FleetError::internal)?;
            if let Err(err) = dead_letters.send_message(body).await {
                // Not kept: retried from here like a refused entry (nothing after it is done).
                tracing::warn!(error = %err, "SendMessage to the dead-letter queue failed");
                published.failed_from = Some(sequence_number(*record));
                return Ok(published);
            }
            published.dead_lettered += 1;
            rest = &rest[1..];
            continue;
        }
        // The longest prefix of entries with at most one per device and PUT_EVENTS_SIZE in
        // all (a dead letter ends it: it is sent in its place).
        let mut devices = HashSet::new();
        let call: Vec<(usize, &EventEntry)> = rest
            .iter()
            .take(PUT_EVENTS_SIZE)
            .map_while(|step| match step {
                Step::Publish {
                    record,
                    device,
                    entry,
                } => devices.insert(device.as_str()).then_some((*record, entry)),
                Step::DeadLetter { .. } => None,
            })
            .collect();
        let take = call.len();
        let outcome = publisher
            .put_events(call.iter().map(|(_, entry)| (*entry).clone()).collect())
            .await;
        published.calls += 1;
        let failed_at = match outcome {
            Ok(codes) => codes.iter().position(Option::is_some),
            Err(err) => {
                tracing::warn!(error = %err, "PutEvents failed");
                Some(0)
            }
        };
        match failed_at {
            None => published.entries += take as u64,
            Some(i) => {
                published.entries += i as u64;
                published.failed_from = Some(sequence_number(call[i].0));
                return Ok(published);
            }
        }
        rest = &rest[take..];
    }
    Ok(published)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alarm::severity::Severity;
    use crate::model::ids::{DeviceId, UserId};
    use crate::model::timestamp::Timestamp;

    fn alarm(state: AlarmState) -> AlarmItem {
        let at = Timestamp::from_epoch_millis(1_700_000_000_000).unwrap();
        AlarmItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            partition: 0,
            device_name: "Door".into(),
            source: "offline".into(),
            rule_name: None,
            severity: Severity::Major,
            state,
            raised_at: at,
            cleared_at: (state == AlarmState::Cleared).then_some(at),
            acknowledged_at: None,
            reading: None,
            clear_reading: None,
            last_seen: Some(at),
            remind_every_seconds: None,
            remind_at: None,
            reminders: 0,
            ttl: None,
        }
    }

    fn kinds(n: Vec<Notice>) -> Vec<(DetailType, Option<u32>)> {
        n.into_iter().map(|n| (n.detail_type, n.reminder)).collect()
    }

    #[test]
    fn each_record_stands_for_its_transitions() {
        let active = alarm(AlarmState::Active);
        let cleared = alarm(AlarmState::Cleared);
        let mut acked = alarm(AlarmState::Acknowledged);
        acked.acknowledged_at = Some(active.raised_at);
        let mut reminded = active.clone();
        reminded.reminders = 2;
        use DetailType::*;
        assert_eq!(kinds(transitions(None, Some(&active))), [(Raised, None)]);
        assert_eq!(
            kinds(transitions(None, Some(&cleared))),
            [(Raised, None), (Cleared, None)]
        );
        assert_eq!(
            kinds(transitions(Some(&active), Some(&acked))),
            [(Acknowledged, None)]
        );
        assert_eq!(
            kinds(transitions(Some(&acked), Some(&cleared))),
            [(Cleared, None)]
        );
        assert_eq!(
            kinds(transitions(Some(&active), Some(&reminded))),
            [(Raised, Some(2))]
        );
        assert!(transitions(Some(&active), Some(&active)).is_empty());
        assert!(transitions(Some(&cleared), None).is_empty(), "an expiry");
        let detail = alarm_detail(
            &reminded,
            &Notice {
                detail_type: Raised,
                reminder: Some(2),
            },
        )
        .unwrap();
        assert_eq!(detail["kind"], "offline");
        assert_eq!(detail["reminder"], 2);
        assert_eq!(detail["userId"], "u");
        assert!(
            detail.get("orgId").is_none(),
            "a person's alarm names no organization"
        );
        assert!(detail.get("ruleId").is_none());
        let org = crate::model::ids::OrgId::parse("o1").unwrap();
        let team_alarm = AlarmItem {
            user_id: UserId::org_fleet(&org),
            ..reminded.clone()
        };
        let detail = alarm_detail(
            &team_alarm,
            &Notice {
                detail_type: Raised,
                reminder: None,
            },
        )
        .unwrap();
        assert_eq!(detail["orgId"], "o1");
        assert_eq!(detail["userId"], "org:o1");
        assert_eq!(detail["reading"]["lastSeen"], active.raised_at.to_string());
    }
}
