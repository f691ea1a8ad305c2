//! The device summary (`lastSeen`, `latest`, `recent`, the `SEEN#` index key) kept on the
//! device item, and its conditional update.

use std::collections::BTreeMap;
use std::time::Instant;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use serde::{Deserialize, Serialize};

use super::{Ingestor, NewEvent, CACHE_CAPACITY, RECENT_EVENTS};
use crate::error::FleetError;
use crate::ids::DeviceId;
use crate::items::{Reading, RecentEvent, RegistrationItem};
use crate::keys::{device_seen_key, ItemKey};
use crate::ops::{n, s, RawItem};
use crate::retry::Retry;
use crate::schema::DELETING_AT;
use crate::table::{is_transient, sdk_error};
use crate::timestamp::Timestamp;

/// Conditional-update attempts on the device summary before giving up (each conflict means
/// another batch for the same device committed, so N concurrent batches need up to N).
const SUMMARY_ATTEMPTS: u32 = 16;

/// What the dashboard shows of a device's events, kept on the device item.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSummary {
    /// Optimistic-concurrency counter of summary updates (not the owner's `version`).
    #[serde(default)]
    pub ingest_seq: Option<u64>,
    /// Newest event time.
    #[serde(default)]
    pub last_seen: Option<Timestamp>,
    /// Latest reading per event type.
    #[serde(default)]
    pub latest: BTreeMap<String, Reading>,
    /// Newest events, newest first.
    #[serde(default)]
    pub recent: Vec<RecentEvent>,
    /// The device's current GSI1 sort key (`SEEN#...`), if it has one.
    #[serde(rename = "GSI1SK", default)]
    pub seen_key: Option<String>,
}

impl DeviceSummary {
    /// This summary with `events` merged in: `lastSeen` never moves backwards, a late event
    /// never replaces a newer reading, `recent` keeps the newest [`RECENT_EVENTS`] without
    /// duplicates.
    pub fn merged(&self, events: &[NewEvent]) -> DeviceSummary {
        let mut next = self.clone();
        for e in events {
            if next.last_seen.is_none_or(|seen| e.at > seen) {
                next.last_seen = Some(e.at);
            }
            let newer = next
                .latest
                .get(e.event_type.as_str())
                .is_none_or(|r| e.at > r.at);
            if newer {
                next.latest.insert(
                    e.event_type.to_string(),
                    Reading {
                        at: e.at,
                        value: e.value.clone(),
                    },
                );
            }
            if !next.recent.iter().any(|r| r.at == e.at && r.id == e.id) {
                next.recent.push(RecentEvent {
                    id: e.id.clone(),
                    event_type: e.event_type.clone(),
                    value: e.value.clone(),
                    at: e.at,
                });
            }
        }
        next.recent
            .sort_by(|a, b| (b.at, b.id.as_str()).cmp(&(a.at, a.id.as_str())));
        next.recent.truncate(RECENT_EVENTS);
        next
    }
}

/// The summary condition when the item has been updated before (`:seq` is the count read).
const UPDATED_BEFORE: &str =
    "attribute_exists(PK) AND attribute_not_exists(deletingAt) AND ingestSeq = :seq";
/// The summary condition for a device that has never had a batch.
const NEVER_UPDATED: &str =
    "attribute_exists(PK) AND attribute_not_exists(deletingAt) AND attribute_not_exists(ingestSeq)";

impl Ingestor {
    /// Folds `events` into the device summary with one conditional UpdateItem; on a conflict the
    /// failed write returns the current item, which is merged again (no separate read).
    pub(super) async fn update_summary(
        &self,
        registration: &RegistrationItem,
        events: &[NewEvent],
        deadline: Instant,
    ) -> Result<(), FleetError> {
        let device = &registration.device_id;
        let mut base = self.cached_summary(device);
        let mut retry = Retry::until(deadline).at_most(SUMMARY_ATTEMPTS);
        while retry.next_attempt().await {
            let next = base.merged(events);
            let (request, stored) = self.summary_update(registration, &base, next)?;
            let err = match request.send().await {
                Ok(_) => {
                    self.remember_summary(device, stored);
                    return Ok(());
                }
                Err(err) => err,
            };
            match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    match self.after_conflict(device, failed.item(), events)? {
                        Some(current) => base = current,
                        None => return Ok(()),
                    }
                }
                _ if is_transient(&err) => {}
                _ => return Err(sdk_error(err)),
            }
        }
        Err(crate::dynamo::throttled())
    }

    /// The summary this warm Lambda last wrote or read for `device` (empty if none).
    fn cached_summary(&self, device: &DeviceId) -> DeviceSummary {
        self.summaries
            .lock()
            .expect("cache lock")
            .get(device)
            .cloned()
            .unwrap_or_default()
    }

    fn remember_summary(&self, device: &DeviceId, summary: DeviceSummary) {
        let mut cache = self.summaries.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(device.clone(), summary);
    }

    /// The conditional UpdateItem that turns `base` (what this Lambda believes is stored) into
    /// `next`, and the summary stored once it succeeds.
    fn summary_update(
        &self,
        registration: &RegistrationItem,
        base: &DeviceSummary,
        mut next: DeviceSummary,
    ) -> Result<(UpdateItemFluentBuilder, DeviceSummary), FleetError> {
        let device = &registration.device_id;
        let next_seq = base.ingest_seq.unwrap_or(0) + 1;
        let seen_key = next.last_seen.map(|t| device_seen_key(&t, device));
        let mut sets = vec![
            "lastSeen = :lastSeen",
            "latest = :latest",
            "recent = :recent",
            "ingestSeq = :nextSeq",
        ];
        let mut request = self
            .table
            .client
            .update_item()
            .table_name(self.table.name())
            .set_key(Some(
                ItemKey::Device {
                    user: registration.user_id.clone(),
                    device: device.clone(),
                }
                .attributes(),
            ))
            .expression_attribute_values(
                ":lastSeen",
                serde_dynamo::to_attribute_value(next.last_seen)?,
            )
            .expression_attribute_values(":latest", serde_dynamo::to_attribute_value(&next.latest)?)
            .expression_attribute_values(":recent", serde_dynamo::to_attribute_value(&next.recent)?)
            .expression_attribute_values(":nextSeq", n(next_seq));
        // The index entry moves only when the coarse SEEN bucket does.
        if let Some(key) = seen_key.as_ref().filter(|_| seen_key != base.seen_key) {
            sets.push("GSI1SK = :seenKey");
            request = request.expression_attribute_values(":seenKey", s(key.clone()));
        }
        let condition = match base.ingest_seq {
            Some(seq) => {
                request = request.expression_attribute_values(":seq", n(seq));
                UPDATED_BEFORE
            }
            None => NEVER_UPDATED,
        };
        let request = request
            .update_expression(format!("SET {}", sets.join(", ")))
            .condition_expression(condition)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        next.ingest_seq = Some(next_seq);
        if seen_key.is_some() {
            next.seen_key = seen_key;
        }
        Ok((request, next))
    }

    /// After a failed condition, with the item as it is now: the summary to merge into next
    /// (`Some`), `None` when it already holds `events` (a replay), or
    /// [`FleetError::Unauthorized`] when the device is gone or being deleted.
    fn after_conflict(
        &self,
        device: &DeviceId,
        current: Option<&RawItem>,
        events: &[NewEvent],
    ) -> Result<Option<DeviceSummary>, FleetError> {
        let Some(current) = current.filter(|item| !item.contains_key(DELETING_AT)) else {
            self.forget(device);
            return Err(FleetError::Unauthorized);
        };
        let current: DeviceSummary = serde_dynamo::from_item(current.clone())?;
        if current.merged(events) == current {
            // Another batch already folded these events in (a replay).
            self.summaries
                .lock()
                .expect("cache lock")
                .insert(device.clone(), current);
            return Ok(None);
        }
        Ok(Some(current))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{EventId, EventType};
    use crate::items::EventValue;

    fn event(id: &str, t: &str, v: f64, at: &str) -> NewEvent {
        NewEvent {
            id: EventId::parse(id).unwrap(),
            event_type: EventType::parse(t).unwrap(),
            value: EventValue::Number(v),
            at: Timestamp::parse_field("at", at).unwrap(),
        }
    }

    #[test]
    fn merging_keeps_newest_readings_and_ten_recent_without_duplicates() {
        let first: Vec<NewEvent> = (0..12)
            .map(|i| {
                event(
                    &format!("e{i:02}"),
                    "temp",
                    f64::from(i),
                    &format!("2024-04-10T10:{i:02}:00Z"),
                )
            })
            .collect();
        let s1 = DeviceSummary::default().merged(&first);
        assert_eq!(s1.recent.len(), RECENT_EVENTS);
        assert_eq!(s1.recent[0].id.as_str(), "e11", "newest first");
        assert_eq!(
            s1.last_seen.unwrap().to_string(),
            "2024-04-10T10:11:00.000Z"
        );
        assert_eq!(s1.latest["temp"].value, EventValue::Number(11.0));
        // A late event changes neither lastSeen nor the newer reading, and falls off recent.
        let late = [event("late", "temp", -1.0, "2024-04-10T09:00:00Z")];
        let s2 = s1.merged(&late);
        assert_eq!(s2, s1);
        // A replay changes nothing.
        assert_eq!(s1.merged(&first), s1);
        // A late reading of a new type is still that type's latest.
        let s3 = s1.merged(&[event("h", "humidity", 40.0, "2024-04-10T09:00:00Z")]);
        assert_eq!(s3.latest["humidity"].value, EventValue::Number(40.0));
        assert_eq!(s3.last_seen, s1.last_seen);
    }
}
