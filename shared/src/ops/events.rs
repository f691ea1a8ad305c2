//! Event reads: a device's events (AP-04), a user's events across devices (AP-05) and events
//! of a type across all users (AP-09). Newest first; expired events (`ttl` passed) are never
//! returned, even before DynamoDB deletes them.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use serde::Serialize;

use super::{query, s, ttl_now, Page, RawItem};
use crate::catalog::{
    implemented_by, AccessPattern, Frequency, Operation, PatternId, RequestBudget,
};
use crate::cursor::{self, check_key, StartKey};
use crate::dynamo::{newest_first, scatter_gather};
use crate::entity::Entity;
use crate::error::{FleetError, ValidationError};
use crate::ids::{DeviceId, EventType, UserId};
use crate::items::{EventItem, EventValue};
use crate::keys::{
    event_pk, event_pk_prefix, owner_gsi2pk, parse_event_index_sk, type_gsi1pk, EVENT_PREFIX,
};
use crate::schema::{GSI1, GSI1PK, GSI1SK, GSI2, GSI2PK, GSI2SK, PK, SK};
use crate::table::FleetTable;
use crate::timestamp::{Day, Timestamp};

/// Longest range of AP-09, in days (one Query per day and shard).
pub const MAX_TYPE_RANGE_DAYS: i64 = 7;

/// An inclusive time range, `from <= to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    /// Start (inclusive).
    pub from: Timestamp,
    /// End (inclusive).
    pub to: Timestamp,
}

impl TimeRange {
    /// A validated range; `from` after `to` is a 400 on `from`.
    pub fn new(from: Timestamp, to: Timestamp) -> Result<Self, ValidationError> {
        if from > to {
            return Err(ValidationError::new("from", "must not be after to"));
        }
        Ok(Self { from, to })
    }

    /// How many UTC days the range touches.
    pub fn day_count(&self) -> i64 {
        self.from.days_until(&self.to) + 1
    }

    /// Every UTC day the range touches (`YYYY-MM-DD`). Callers bound [`TimeRange::day_count`]
    /// first: a range may span ten thousand years.
    pub fn days(&self) -> Vec<Day> {
        let last = self.to.day();
        std::iter::successors(Some(self.from.day()), Day::next)
            .take_while(|d| *d <= last)
            .collect()
    }
}

/// An event as the API returns it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// Event id.
    pub id: String,
    /// Type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Value.
    pub value: EventValue,
    /// Time.
    pub at: String,
    /// Device (listings across devices).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// Device name at ingest time (listings across devices).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// Owner (operator listings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// The fields an index projects for events (`shared::schema::INDEXES`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexedEvent {
    device_id: DeviceId,
    #[serde(rename = "type")]
    event_type: EventType,
    value: EventValue,
    at: Timestamp,
    device_name: String,
    #[serde(default)]
    user_id: Option<UserId>,
}

fn indexed_event(item: RawItem, sort_key: &str) -> Result<(String, EventView), FleetError> {
    let key = item
        .get(sort_key)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .ok_or_else(|| FleetError::internal("index item without its sort key"))?;
    let id = parse_event_index_sk(&key)?.to_string();
    let e: IndexedEvent = serde_dynamo::from_item(item)?;
    Ok((
        key,
        EventView {
            id,
            event_type: e.event_type.to_string(),
            value: e.value,
            at: e.at.to_string(),
            device_id: Some(e.device_id.to_string()),
            device_name: Some(e.device_name),
            user_id: e.user_id.map(|u| u.to_string()),
        },
    ))
}

/// Upper bound of a sort-key range ending at `to`: ids use only characters below `~`.
fn through(prefix: &str, to: &Timestamp) -> String {
    format!("{prefix}{to}#~")
}

/// A newest-first Query of one index partition of events over `range`, expired events
/// filtered out (both event indexes use `{at}#{deviceId}#{eventId}` sort keys).
fn index_range(
    table: &FleetTable,
    index: &str,
    partition: &str,
    range: TimeRange,
    limit: u32,
) -> QueryFluentBuilder {
    let (pk, sk) = if index == GSI1 {
        (GSI1PK, GSI1SK)
    } else {
        (GSI2PK, GSI2SK)
    };
    table
        .client
        .query()
        .table_name(table.name())
        .index_name(index)
        .key_condition_expression(format!("{pk} = :pk AND {sk} BETWEEN :from AND :to"))
        .filter_expression("#ttl > :now")
        .expression_attribute_names("#ttl", "ttl")
        .expression_attribute_values(":pk", s(partition))
        .expression_attribute_values(":from", s(range.from.to_string()))
        .expression_attribute_values(":to", s(through("", &range.to)))
        .expression_attribute_values(":now", ttl_now())
        .scan_index_forward(false)
        .limit(limit as i32)
}

/// AP-04, implemented by [`device_events`].
pub const DEVICE_EVENTS: AccessPattern = AccessPattern {
    id: PatternId::Ap04,
    description: "a device's events in a time range, newest first, paged",
    frequency: Frequency::Critical,
    operations: &[Operation::Query, Operation::GetItem],
    index: None,
    key_condition:
        "PK = USER#{userId}#DEVICE#{deviceId} AND SK BETWEEN EVENT#{from} AND EVENT#{to}~",
    budget: RequestBudget::PerPagePlusEmptyCheck(1),
    max_read_units: None,
    route: Some("GET /me/devices/{deviceId}/events"),
    implemented_by: implemented_by!(device_events),
};

/// AP-04: a page of one device's events in `range`, newest first. One Query per page; when the
/// first page is empty, one GetItem tells "no events" from "no such device" (another user's
/// device is a 404, like a missing one).
pub async fn device_events(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    range: TimeRange,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<EventView>, FleetError> {
    let pk = event_pk(user, device);
    let start_key = cursor::resume(
        DEVICE_EVENTS.id,
        cursor,
        &[(PK, &pk)],
        &[(SK, EVENT_PREFIX)],
    )?;
    let (items, last) = query(
        table
            .client
            .query()
            .table_name(table.name())
            .key_condition_expression("PK = :pk AND SK BETWEEN :from AND :to")
            .filter_expression("#ttl > :now")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":from", s(format!("{EVENT_PREFIX}{}", range.from)))
            .expression_attribute_values(":to", s(through(EVENT_PREFIX, &range.to)))
            .expression_attribute_values(":now", ttl_now())
            .scan_index_forward(false)
            .limit(limit as i32)
            .set_exclusive_start_key(start_key.clone()),
    )
    .await?;
    if items.is_empty()
        && start_key.is_none()
        && last.is_none()
        && crate::ops::devices::get_device(table, user, device)
            .await?
            .is_none()
    {
        return Err(FleetError::NotFound("device"));
    }
    let events = items
        .into_iter()
        .map(|item| {
            let e = EventItem::from_item(item)?;
            Ok(EventView {
                id: e.id.to_string(),
                event_type: e.event_type.to_string(),
                value: e.value,
                at: e.at.to_string(),
                device_id: None,
                device_name: None,
                user_id: None,
            })
        })
        .collect::<Result<Vec<_>, FleetError>>()?;
    Ok(Page {
        items: events,
        cursor: cursor::after(DEVICE_EVENTS.id, last.as_ref()),
    })
}

/// AP-05, implemented by [`user_events`].
pub const USER_EVENTS: AccessPattern = AccessPattern {
    id: PatternId::Ap05,
    description: "a user's events across all devices in a time range",
    frequency: Frequency::Important,
    operations: &[Operation::Query],
    index: Some(GSI2),
    key_condition: "GSI2PK = OWNER#{userId}#{shard} AND GSI2SK BETWEEN {from} AND {to}~",
    budget: RequestBudget::PerShardPage,
    max_read_units: None,
    route: Some("GET /me/events"),
    implemented_by: implemented_by!(user_events),
};

/// AP-05: a page of the user's events across all devices, newest first: one Query per owner
/// shard (concurrently), merged. The cursor remembers, per shard, the last event returned.
pub async fn user_events(
    table: &FleetTable,
    user: &UserId,
    range: TimeRange,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<EventView>, FleetError> {
    let shards = table.config.shards.owner;
    let partitions: Vec<String> = (0..shards).map(|i| owner_gsi2pk(user, i)).collect();
    let starts: Vec<Option<StartKey>> = match cursor {
        None => vec![Some(StartKey::new()); partitions.len()],
        Some(text) => {
            let keys = cursor::decode(USER_EVENTS.id, text, partitions.len())?;
            for (key, partition) in keys.iter().zip(&partitions) {
                if let Some(key) = key.as_ref().filter(|k| !k.is_empty()) {
                    check_key(
                        key,
                        &[(GSI2PK, partition)],
                        &[
                            (PK, &event_pk_prefix(user)),
                            (SK, EVENT_PREFIX),
                            (GSI2SK, ""),
                        ],
                    )?;
                }
            }
            keys
        }
    };
    let queries = partitions
        .iter()
        .zip(&starts)
        .map(|(partition, start)| async move {
            // `None`: this shard was exhausted on an earlier page.
            let Some(start) = start else {
                return Ok::<_, FleetError>((Vec::new(), false));
            };
            let (items, last) = query(
                index_range(table, GSI2, partition, range, limit).set_exclusive_start_key(
                    (!start.is_empty()).then(|| cursor::exclusive_start_key(start)),
                ),
            )
            .await?;
            Ok((items, last.is_some()))
        });
    let results = scatter_gather(queries).await?;
    merge_shards(results, GSI2SK, limit, USER_EVENTS.id, starts)
}

/// Merges per-shard pages newest first, keeps `limit`, and builds the cursor: for each shard
/// the key of the last item returned from it, its old start when none was returned, or `None`
/// once everything it holds has been returned.
fn merge_shards(
    results: Vec<(Vec<RawItem>, bool)>,
    sort_key: &str,
    limit: u32,
    pattern: PatternId,
    starts: Vec<Option<StartKey>>,
) -> Result<Page<EventView>, FleetError> {
    let mut merged = Vec::new();
    let mut read = vec![0usize; starts.len()];
    let mut more = vec![false; starts.len()];
    for (shard, (items, has_more)) in results.into_iter().enumerate() {
        more[shard] = has_more;
        read[shard] = items.len();
        for item in items {
            let keys = key_of(&item, sort_key);
            let (sort, view) = indexed_event(item, sort_key)?;
            merged.push((sort, shard, keys, view));
        }
    }
    let merged = newest_first(merged, |m| &m.0, limit);
    let mut next = starts;
    let mut returned = vec![0usize; next.len()];
    for (_, shard, keys, _) in &merged {
        returned[*shard] += 1;
        next[*shard] = Some(keys.clone());
    }
    for (shard, start) in next.iter_mut().enumerate() {
        if !more[shard] && returned[shard] == read[shard] {
            *start = None;
        }
    }
    let cursor = next
        .iter()
        .any(Option::is_some)
        .then(|| cursor::encode(pattern, next));
    Ok(Page {
        items: merged.into_iter().map(|(_, _, _, v)| v).collect(),
        cursor,
    })
}

fn key_of(item: &RawItem, sort_key: &str) -> StartKey {
    let index_pk = if sort_key == GSI1SK { GSI1PK } else { GSI2PK };
    [PK, SK, index_pk, sort_key]
        .iter()
        .filter_map(|name| {
            item.get(*name)
                .and_then(|v| v.as_s().ok())
                .map(|v| (name.to_string(), v.clone()))
        })
        .collect()
}

/// AP-09, implemented by [`events_by_type`].
pub const EVENTS_BY_TYPE: AccessPattern = AccessPattern {
    id: PatternId::Ap09,
    description: "events of a type in a time range, all users (operators)",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: Some(GSI1),
    key_condition: "GSI1PK = TYPE#{type}#{day}#{shard} AND GSI1SK BETWEEN {from} AND {to}~",
    budget: RequestBudget::PerDayShard,
    max_read_units: None,
    route: Some("GET /admin/events"),
    implemented_by: implemented_by!(events_by_type),
};

/// AP-09 (operators): events of `event_type` in `range` across all users, newest first, at most
/// `limit`: one Query per (day, shard), concurrently.
pub async fn events_by_type(
    table: &FleetTable,
    event_type: &EventType,
    range: TimeRange,
    limit: u32,
) -> Result<Vec<EventView>, FleetError> {
    // Checked before the days are listed: `from=0000-01-01` is 3.6 million of them.
    if range.day_count() > MAX_TYPE_RANGE_DAYS {
        return Err(ValidationError::new(
            "from",
            format!("the range may cover at most {MAX_TYPE_RANGE_DAYS} days"),
        )
        .into());
    }
    let days = range.days();
    let partitions: Vec<String> = days
        .iter()
        .flat_map(|day| {
            (0..table.config.shards.event_type)
                .map(move |shard| type_gsi1pk(event_type, day, shard))
        })
        .collect();
    let queries = partitions
        .iter()
        .map(|partition| query(index_range(table, GSI1, partition, range, limit)));
    let mut events = Vec::new();
    for (items, _) in scatter_gather(queries).await? {
        for item in items {
            events.push(indexed_event(item, GSI1SK)?);
        }
    }
    let events = newest_first(events, |e| &e.0, limit);
    Ok(events.into_iter().map(|(_, v)| v).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Timestamp {
        Timestamp::parse_field("t", text).unwrap()
    }

    #[test]
    fn days_of_a_range_including_the_last_representable_day() {
        let range = TimeRange::new(t("2024-04-09T23:00:00Z"), t("2024-04-11T00:00:00Z")).unwrap();
        assert_eq!(range.day_count(), 3);
        assert_eq!(range.days(), ["2024-04-09", "2024-04-10", "2024-04-11"]);
        // The last day of year 9999 has no next day: listing must stop, not overflow.
        let range = TimeRange::new(t("9999-12-30T00:00:00Z"), Timestamp::max()).unwrap();
        assert_eq!(range.days(), ["9999-12-30", "9999-12-31"]);
        let all = TimeRange::new(Timestamp::min(), Timestamp::max()).unwrap();
        assert_eq!(all.day_count(), 3_652_425);
    }
}
