//! AP-14: device-authenticated, idempotent batch ingestion.
//!
//! A batch costs at most ceil(n/25) + 3 requests: the registration GetItem (skipped while the
//! warm Lambda's cache holds it), one BatchWriteItem per 25 events (sent concurrently), and
//! one conditional UpdateItem of the device summary (a second one only when another batch for
//! the same device got in between). Events are keyed by their id and time, so a replayed batch
//! overwrites identical items and stores nothing twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{PutRequest, ReturnValuesOnConditionCheckFailure, WriteRequest};
use serde::{Deserialize, Serialize};

use super::{n, s};
use crate::catalog::{
    implemented_by, AccessPattern, Frequency, Operation, PatternId, RequestBudget,
};
use crate::dynamo::write_all;
use crate::error::{FleetError, ValidationError};
use crate::ids::{DeviceId, EventId, EventType};
use crate::items::{EntityType, EventItem, EventValue, Reading, RecentEvent, RegistrationItem};
use crate::keys::{
    device_sk, event_index_sk, event_pk, event_sk, owner_gsi2pk, registration_pk, seen_gsi1sk,
    type_gsi1pk, user_pk, REGISTRATION_SK,
};
use crate::retry::Retry;
use crate::schema::{PK, SK};
use crate::shard::shard_of;
use crate::table::{is_transient, sdk_error, FleetTable};
use crate::timestamp::Timestamp;
use crate::token::token_matches;

/// Most events in one request.
pub const MAX_EVENTS_PER_BATCH: usize = 100;
/// Events per BatchWriteItem (DynamoDB's limit).
pub use crate::dynamo::BATCH_WRITE_SIZE;
/// Longest text value of an event, in characters.
pub const MAX_TEXT_VALUE: usize = 256;
/// Events kept in a device's `recent` list (the dashboard shows the last 10).
pub const RECENT_EVENTS: usize = 10;
/// Granularity of the `SEEN#` index key: the device's GSI1 entry is rewritten at most once per
/// this many seconds of device time, not on every batch.
pub const SEEN_GRANULARITY_SECONDS: i64 = 15 * 60;
/// Conditional-update attempts on the device summary before giving up (each conflict means
/// another batch for the same device committed, so N concurrent batches need up to N).
const SUMMARY_ATTEMPTS: u32 = 16;

/// Ingestion settings, from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestConfig {
    /// `REGISTRATION_CACHE_SECONDS` (default 30): how long a warm Lambda trusts a registration
    /// it read. A deleted or re-registered device stops working within this window.
    pub registration_cache: Duration,
    /// `MAX_CLOCK_SKEW_SECONDS` (default 300): how far in the future an event may be.
    pub max_clock_skew: Duration,
    /// `INGEST_RETRY_MS` (default 5000): how long to keep retrying unprocessed or throttled
    /// writes, further bounded by the Lambda's remaining time.
    pub retry_window: Duration,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            registration_cache: Duration::from_secs(30),
            max_clock_skew: Duration::from_secs(300),
            retry_window: Duration::from_secs(5),
        }
    }
}

impl IngestConfig {
    /// Reads the settings from the process environment (defaults for what is unset).
    pub fn from_env() -> Result<Self, FleetError> {
        let d = Self::default();
        let secs = |name: &str, default: Duration, unit_ms: bool| -> Result<Duration, FleetError> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(raw) => raw
                    .trim()
                    .parse::<u64>()
                    .map(|v| {
                        if unit_ms {
                            Duration::from_millis(v)
                        } else {
                            Duration::from_secs(v)
                        }
                    })
                    .map_err(|_| FleetError::Internal(format!("{name}={raw:?} is not a number"))),
            }
        };
        Ok(Self {
            registration_cache: secs("REGISTRATION_CACHE_SECONDS", d.registration_cache, false)?,
            max_clock_skew: secs("MAX_CLOCK_SKEW_SECONDS", d.max_clock_skew, false)?,
            retry_window: secs("INGEST_RETRY_MS", d.retry_window, true)?,
        })
    }
}

/// One event as a device sends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmittedEvent {
    /// Optional id; derived from the content when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// A JSON number, string or boolean.
    pub value: serde_json::Value,
    /// RFC 3339 time.
    pub at: String,
}

/// A validated event, ready to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// Given or derived id.
    pub id: EventId,
    /// Type.
    pub event_type: EventType,
    /// Value.
    pub value: EventValue,
    /// Time, UTC milliseconds.
    pub at: Timestamp,
}

/// Validates a batch: 1..=100 events, each field checked, `at` normalized and within
/// [now - retention, now + skew]. Errors name the offending index and field
/// (`events[3].at`). Events with the same time and id collapse to the first.
pub fn validate_batch(
    events: Vec<SubmittedEvent>,
    now: Timestamp,
    retention_days: u32,
    max_clock_skew: Duration,
) -> Result<Vec<NewEvent>, ValidationError> {
    if events.is_empty() || events.len() > MAX_EVENTS_PER_BATCH {
        return Err(ValidationError::new(
            "events",
            format!("send 1 to {MAX_EVENTS_PER_BATCH} events per request"),
        ));
    }
    let oldest = now.plus_seconds(-i64::from(retention_days) * 86_400);
    let newest = now.plus_seconds(max_clock_skew.as_secs() as i64);
    let mut seen = HashSet::new();
    let mut valid = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        let field = |name: &str| format!("events[{i}].{name}");
        let event_type = EventType::parse_field(&field("type"), event.event_type)?;
        let value = event_value(&field("value"), event.value)?;
        let at = Timestamp::parse_field(&field("at"), &event.at)?;
        if at > newest {
            return Err(ValidationError::new(
                field("at"),
                format!("is more than {}s in the future", max_clock_skew.as_secs()),
            ));
        }
        if at < oldest {
            return Err(ValidationError::new(
                field("at"),
                format!("is older than the {retention_days}-day retention window"),
            ));
        }
        let id = match event.id {
            Some(id) => EventId::parse_field(&field("id"), id)?,
            None => derive_event_id(&event_type, &value, &at),
        };
        if seen.insert((at, id.clone())) {
            valid.push(NewEvent {
                id,
                event_type,
                value,
                at,
            });
        }
    }
    Ok(valid)
}

fn event_value(field: &str, value: serde_json::Value) -> Result<EventValue, ValidationError> {
    match value {
        serde_json::Value::Bool(b) => Ok(EventValue::Flag(b)),
        serde_json::Value::Number(n) => n
            .as_f64()
            .filter(|f| f.is_finite())
            .map(EventValue::Number)
            .ok_or_else(|| ValidationError::new(field, "must be a finite number")),
        serde_json::Value::String(t) if t.chars().count() > MAX_TEXT_VALUE => Err(
            ValidationError::new(field, format!("text is over {MAX_TEXT_VALUE} characters")),
        ),
        serde_json::Value::String(t) if t.chars().any(char::is_control) => Err(
            ValidationError::new(field, "text must not contain control characters"),
        ),
        serde_json::Value::String(t) => Ok(EventValue::Text(t)),
        _ => Err(ValidationError::new(
            field,
            "must be a JSON number, string or boolean",
        )),
    }
}

/// The id of an event sent without one: a digest of its type, time and value, so a retried
/// batch derives the same ids and overwrites instead of duplicating.
pub fn derive_event_id(event_type: &EventType, value: &EventValue, at: &Timestamp) -> EventId {
    let canonical = serde_json::to_string(value).unwrap_or_default();
    let digest = crate::token::sha256_hex(&format!("{event_type}\n{at}\n{canonical}"));
    EventId::parse(format!("d-{}", &digest[..24])).expect("hex digits form a valid id")
}

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

/// `lastSeen` rounded down to [`SEEN_GRANULARITY_SECONDS`]: what the `SEEN#` index key holds.
pub fn seen_bucket(last_seen: &Timestamp) -> Timestamp {
    let secs = last_seen.epoch_seconds();
    let floored = secs - secs.rem_euclid(SEEN_GRANULARITY_SECONDS);
    Timestamp::from_epoch_millis(floored * 1000).unwrap_or(*last_seen)
}

/// The result of storing a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    /// Stored (and reflected in the device summary).
    pub accepted: Vec<EventId>,
    /// Not acknowledged: the device should resend these.
    pub failed: Vec<EventId>,
}

#[derive(Clone)]
struct CachedRegistration {
    registration: RegistrationItem,
    fetched: Instant,
}

/// Ingestion with the warm-Lambda caches: registrations (authentication) and device
/// summaries (so a busy device's summary update needs no read).
pub struct Ingestor {
    table: FleetTable,
    config: IngestConfig,
    registrations: Mutex<HashMap<DeviceId, CachedRegistration>>,
    summaries: Mutex<HashMap<DeviceId, DeviceSummary>>,
}

/// Bound on cached entries, so a Lambda serving many devices keeps a small footprint.
const CACHE_CAPACITY: usize = 10_000;

impl Ingestor {
    /// An ingestor for `table`.
    pub fn new(table: FleetTable, config: IngestConfig) -> Self {
        Self {
            table,
            config,
            registrations: Mutex::new(HashMap::new()),
            summaries: Mutex::new(HashMap::new()),
        }
    }

    /// The table.
    pub fn table(&self) -> &FleetTable {
        &self.table
    }

    /// The settings.
    pub fn config(&self) -> &IngestConfig {
        &self.config
    }

    /// The registration of `device` if `token` is its token; otherwise
    /// [`FleetError::Unauthorized`], the same for an unknown device and a wrong token.
    pub async fn authenticate(
        &self,
        device: &DeviceId,
        token: &str,
    ) -> Result<RegistrationItem, FleetError> {
        let cached = self
            .registrations
            .lock()
            .expect("cache lock")
            .get(device)
            .filter(|c| c.fetched.elapsed() < self.config.registration_cache)
            .cloned();
        if let Some(cached) = &cached {
            if token_matches(token, &cached.registration.token_sha256) {
                return Ok(cached.registration.clone());
            }
        }
        // Not cached, expired, or the token changed (re-registration): read it.
        let registration = self.read_registration(device).await?;
        match registration {
            Some(r) if token_matches(token, &r.token_sha256) => {
                let mut cache = self.registrations.lock().expect("cache lock");
                if cache.len() >= CACHE_CAPACITY {
                    cache.clear();
                }
                cache.insert(
                    device.clone(),
                    CachedRegistration {
                        registration: r.clone(),
                        fetched: Instant::now(),
                    },
                );
                Ok(r)
            }
            _ => {
                self.forget(device);
                Err(FleetError::Unauthorized)
            }
        }
    }

    async fn read_registration(
        &self,
        device: &DeviceId,
    ) -> Result<Option<RegistrationItem>, FleetError> {
        let out = self
            .table
            .client
            .get_item()
            .table_name(self.table.name())
            .key(PK, s(registration_pk(device)))
            .key(SK, s(REGISTRATION_SK))
            // A device may send its first batch right after registration.
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        out.item
            .map(serde_dynamo::from_item)
            .transpose()
            .map_err(Into::into)
    }

    fn forget(&self, device: &DeviceId) {
        self.registrations
            .lock()
            .expect("cache lock")
            .remove(device);
        self.summaries.lock().expect("cache lock").remove(device);
    }

    /// AP-14, implemented by [`Ingestor::ingest`].
    pub const INGEST_BATCH: AccessPattern = AccessPattern {
        id: PatternId::Ap14,
        description: "ingest a batch of up to 100 events for one device",
        frequency: Frequency::Critical,
        operations: &[
            Operation::GetItem,
            Operation::BatchWriteItem,
            Operation::UpdateItem,
        ],
        index: None,
        key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION; events; device item",
        budget: RequestBudget::BatchOf25Plus(3),
        max_read_units: None,
        route: Some("POST /devices/{deviceId}/events"),
        implemented_by: implemented_by!(Ingestor::ingest),
    };

    /// Stores `events` for the device of `registration` and folds them into its summary, with
    /// retries until `deadline`. Returns what was stored and what the device must resend; a
    /// device deleted since it authenticated is [`FleetError::Unauthorized`].
    pub async fn ingest(
        &self,
        registration: &RegistrationItem,
        events: Vec<NewEvent>,
        deadline: Instant,
    ) -> Result<IngestOutcome, FleetError> {
        let deadline = deadline.min(Instant::now() + self.config.retry_window);
        let unstored = self.store_events(registration, &events, deadline).await?;
        let (stored, failed): (Vec<NewEvent>, Vec<NewEvent>) = events
            .into_iter()
            .partition(|e| !unstored.contains(&(e.at, e.id.clone())));
        if stored.is_empty() {
            return Ok(IngestOutcome {
                accepted: Vec::new(),
                failed: failed.into_iter().map(|e| e.id).collect(),
            });
        }
        match self.update_summary(registration, &stored, deadline).await {
            Ok(()) => Ok(IngestOutcome {
                accepted: stored.into_iter().map(|e| e.id).collect(),
                failed: failed.into_iter().map(|e| e.id).collect(),
            }),
            Err(FleetError::Unauthorized) => Err(FleetError::Unauthorized),
            // Stored but not on the dashboard yet: acknowledge nothing, so the device resends
            // the whole batch (idempotent) and the summary catches up.
            Err(err) => {
                tracing::warn!(device = %registration.device_id, error = %err, "device summary not updated");
                Ok(IngestOutcome {
                    accepted: Vec::new(),
                    failed: stored.into_iter().chain(failed).map(|e| e.id).collect(),
                })
            }
        }
    }

    /// Writes the events in concurrent BatchWriteItem calls of 25, retrying unprocessed items
    /// and throttled calls with full-jitter backoff until `deadline`. Returns the (at, id) of
    /// the events that could not be written.
    async fn store_events(
        &self,
        registration: &RegistrationItem,
        events: &[NewEvent],
        deadline: Instant,
    ) -> Result<HashSet<(Timestamp, EventId)>, FleetError> {
        let ttl_seconds = i64::from(self.table.config.retention_days) * 86_400;
        let mut items = Vec::with_capacity(events.len());
        for e in events {
            let spread = format!("{}#{}", registration.device_id, e.id);
            let item = EventItem {
                pk: event_pk(&registration.user_id, &registration.device_id),
                sk: event_sk(&e.at, &e.id),
                gsi1pk: type_gsi1pk(
                    &e.event_type,
                    &e.at.day(),
                    shard_of(&spread, self.table.config.shards.event_type),
                ),
                gsi1sk: event_index_sk(&e.at, &registration.device_id, &e.id),
                gsi2pk: owner_gsi2pk(
                    &registration.user_id,
                    shard_of(&spread, self.table.config.shards.owner),
                ),
                gsi2sk: event_index_sk(&e.at, &registration.device_id, &e.id),
                entity_type: EntityType::Event,
                user_id: registration.user_id.clone(),
                device_id: registration.device_id.clone(),
                id: e.id.clone(),
                event_type: e.event_type.clone(),
                value: e.value.clone(),
                at: e.at,
                device_name: registration.device_name.clone(),
                device_type: registration.device_type.clone(),
                ttl: e.at.epoch_seconds() + ttl_seconds,
            };
            let put = PutRequest::builder()
                .set_item(Some(serde_dynamo::to_item(item)?))
                .build()
                .map_err(FleetError::internal)?;
            items.push((
                (e.at, e.id.clone()),
                WriteRequest::builder().put_request(put).build(),
            ));
        }
        let chunks: Vec<Vec<_>> = items.chunks(BATCH_WRITE_SIZE).map(<[_]>::to_vec).collect();
        let results = futures_join(
            chunks
                .into_iter()
                .map(|chunk| self.write_chunk(chunk, deadline)),
        )
        .await;
        let mut unstored = HashSet::new();
        for result in results {
            unstored.extend(result?);
        }
        Ok(unstored)
    }

    async fn write_chunk(
        &self,
        chunk: Vec<((Timestamp, EventId), WriteRequest)>,
        deadline: Instant,
    ) -> Result<Vec<(Timestamp, EventId)>, FleetError> {
        let requests = chunk.iter().map(|(_, r)| r.clone()).collect();
        let unprocessed = write_all(&self.table, requests, &mut Retry::until(deadline)).await?;
        let key = |request: &WriteRequest| {
            request
                .put_request
                .as_ref()
                .map(|p| (p.item[PK].clone(), p.item[SK].clone()))
        };
        let unprocessed: Vec<_> = unprocessed.iter().filter_map(key).collect();
        Ok(chunk
            .into_iter()
            .filter(|(_, request)| key(request).is_some_and(|k| unprocessed.contains(&k)))
            .map(|(event, _)| event)
            .collect())
    }

    /// Folds `events` into the device summary with one conditional UpdateItem; on a conflict the
    /// failed write returns the current item, which is merged again (no separate read).
    async fn update_summary(
        &self,
        registration: &RegistrationItem,
        events: &[NewEvent],
        deadline: Instant,
    ) -> Result<(), FleetError> {
        let device = &registration.device_id;
        let mut base = self
            .summaries
            .lock()
            .expect("cache lock")
            .get(device)
            .cloned()
            .unwrap_or_default();
        let mut retry = Retry::until(deadline).at_most(SUMMARY_ATTEMPTS);
        while retry.next_attempt().await {
            let next = base.merged(events);
            let next_seq = base.ingest_seq.unwrap_or(0) + 1;
            let seen_key = next
                .last_seen
                .map(|t| seen_gsi1sk(&seen_bucket(&t), device));
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
                .key(PK, s(user_pk(&registration.user_id)))
                .key(SK, s(device_sk(device)))
                .expression_attribute_values(
                    ":lastSeen",
                    serde_dynamo::to_attribute_value(next.last_seen)?,
                )
                .expression_attribute_values(
                    ":latest",
                    serde_dynamo::to_attribute_value(&next.latest)?,
                )
                .expression_attribute_values(
                    ":recent",
                    serde_dynamo::to_attribute_value(&next.recent)?,
                )
                .expression_attribute_values(":nextSeq", n(next_seq));
            // The index entry moves only when the coarse SEEN bucket does.
            if seen_key != base.seen_key {
                if let Some(key) = &seen_key {
                    sets.push("GSI1SK = :seenKey");
                    request = request.expression_attribute_values(":seenKey", s(key.clone()));
                }
            }
            let condition = match base.ingest_seq {
                Some(seq) => {
                    request = request.expression_attribute_values(":seq", n(seq));
                    "attribute_exists(PK) AND attribute_not_exists(deletingAt) AND ingestSeq = :seq"
                }
                None => {
                    "attribute_exists(PK) AND attribute_not_exists(deletingAt) AND attribute_not_exists(ingestSeq)"
                }
            };
            let result = request
                .update_expression(format!("SET {}", sets.join(", ")))
                .condition_expression(condition)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            match result {
                Ok(_) => {
                    let mut stored = next;
                    stored.ingest_seq = Some(next_seq);
                    if seen_key.is_some() {
                        stored.seen_key = seen_key;
                    }
                    let mut cache = self.summaries.lock().expect("cache lock");
                    if cache.len() >= CACHE_CAPACITY {
                        cache.clear();
                    }
                    cache.insert(device.clone(), stored);
                    return Ok(());
                }
                Err(err) => match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                        let current = failed.item().cloned();
                        let gone = current
                            .as_ref()
                            .is_none_or(|item| item.contains_key("deletingAt"));
                        if gone {
                            self.forget(device);
                            return Err(FleetError::Unauthorized);
                        }
                        base = serde_dynamo::from_item(current.unwrap_or_default())?;
                        if base.merged(events) == base {
                            // Another batch already folded these events in (a replay).
                            self.summaries
                                .lock()
                                .expect("cache lock")
                                .insert(device.clone(), base);
                            return Ok(());
                        }
                    }
                    _ => {
                        if !is_transient(&err) {
                            return Err(sdk_error(err));
                        }
                    }
                },
            }
        }
        Err(crate::dynamo::throttled())
    }
}

/// Polls all futures together (the chunks of one batch go out concurrently, on one task, so
/// the request meter sees them).
async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    futures::future::join_all(futures).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::parse_field("now", "2024-04-10T12:00:00Z").unwrap()
    }

    fn submitted(id: Option<&str>, t: &str, value: serde_json::Value, at: &str) -> SubmittedEvent {
        SubmittedEvent {
            id: id.map(str::to_string),
            event_type: t.into(),
            value,
            at: at.into(),
        }
    }

    fn validate(events: Vec<SubmittedEvent>) -> Result<Vec<NewEvent>, ValidationError> {
        validate_batch(events, now(), 90, Duration::from_secs(300))
    }

    #[test]
    fn validates_each_field_and_names_the_index() {
        let ok = validate(vec![submitted(
            Some("e-1"),
            "temperature",
            serde_json::json!(21.5),
            "2024-04-10T13:00:00+02:00",
        )])
        .unwrap();
        assert_eq!(ok[0].at.to_string(), "2024-04-10T11:00:00.000Z");
        let cases = [
            (
                submitted(None, "a#b", serde_json::json!(1), "2024-04-10T10:00:00Z"),
                "events[1].type",
            ),
            (
                submitted(None, "t", serde_json::json!([1]), "2024-04-10T10:00:00Z"),
                "events[1].value",
            ),
            (
                submitted(None, "t", serde_json::json!(null), "2024-04-10T10:00:00Z"),
                "events[1].value",
            ),
            (
                submitted(
                    None,
                    "t",
                    serde_json::json!({"a": 1}),
                    "2024-04-10T10:00:00Z",
                ),
                "events[1].value",
            ),
            (
                submitted(
                    None,
                    "t",
                    serde_json::json!("x".repeat(257)),
                    "2024-04-10T10:00:00Z",
                ),
                "events[1].value",
            ),
            (
                submitted(None, "t", serde_json::json!(1), "yesterday"),
                "events[1].at",
            ),
            (
                submitted(None, "t", serde_json::json!(1), "2024-04-10T12:05:01Z"),
                "events[1].at",
            ),
            (
                submitted(None, "t", serde_json::json!(1), "2024-01-10T11:59:59Z"),
                "events[1].at",
            ),
            (
                submitted(
                    Some("USER#x"),
                    "t",
                    serde_json::json!(1),
                    "2024-04-10T10:00:00Z",
                ),
                "events[1].id",
            ),
        ];
        for (bad, field) in cases {
            let good = submitted(None, "t", serde_json::json!(true), "2024-04-10T10:00:00Z");
            let err = validate(vec![good, bad]).unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
        assert_eq!(validate(vec![]).unwrap_err().field, "events");
        let many = (0..101)
            .map(|i| {
                submitted(
                    Some(&format!("e{i}")),
                    "t",
                    serde_json::json!(i),
                    "2024-04-10T10:00:00Z",
                )
            })
            .collect();
        assert_eq!(validate(many).unwrap_err().field, "events");
    }

    #[test]
    fn derived_ids_are_deterministic_and_duplicates_collapse() {
        let e = || {
            submitted(
                None,
                "door",
                serde_json::json!("open"),
                "2024-04-10T10:00:00Z",
            )
        };
        let a = validate(vec![e()]).unwrap();
        let b = validate(vec![e(), e()]).unwrap();
        assert_eq!(b.len(), 1, "same time and id: one event");
        assert_eq!(a[0].id, b[0].id);
        assert!(a[0].id.as_str().starts_with("d-"));
        let other = validate(vec![submitted(
            None,
            "door",
            serde_json::json!("closed"),
            "2024-04-10T10:00:00Z",
        )])
        .unwrap();
        assert_ne!(other[0].id, a[0].id);
    }

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

    #[test]
    fn seen_bucket_rounds_down_to_the_granularity() {
        let t = Timestamp::parse_field("at", "2024-04-10T10:29:59.999Z").unwrap();
        assert_eq!(seen_bucket(&t).to_string(), "2024-04-10T10:15:00.000Z");
        let t = Timestamp::parse_field("at", "2024-04-10T10:30:00Z").unwrap();
        assert_eq!(seen_bucket(&t).to_string(), "2024-04-10T10:30:00.000Z");
    }
}
