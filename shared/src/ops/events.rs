//! Event reads: a device's events (AP-04), a user's events across devices (AP-05) and events
//! of a searchable type across all users (AP-09, through the type marks). Newest first; expired events (`ttl` passed) are never
//! returned, even before DynamoDB deletes them.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use serde::Serialize;

use crate::model::cursor::{self, check_key, Page, StartKey};
use crate::model::entities::device::{DeviceItem, DEVICE_PREFIX};
use crate::model::entities::event::{
    device_type_gsi1pk, parse_event_index_sk, registration_stamp, stored_by, EventItem,
    EVENT_PREFIX,
};
use crate::model::entities::type_mark::{parse_type_mark_gsi1sk, type_gsi1pk, type_window};
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, ExpressionsBuilder};
use crate::model::ids::{DeviceId, EventType, UserId};
use crate::model::keys::{event_pk, event_pk_prefix, parse_event_pk, user_pk};
use crate::model::pattern_id::PatternId;
use crate::model::readings::EventValue;
use crate::model::schema::{Item, ENTITY_TYPE, GSI1, GSI1PK, GSI1SK, PK, SK};
use crate::model::timestamp::{Day, Timestamp};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    key_prefix, key_range, newest_first, query, read_consistent, scatter_gather, string_value,
    ttl_now,
};
use crate::store::table::FleetTable;
use crate::store::with_expressions::WithExpressions;

/// Longest range of AP-09, in days (one Query per day and shard).
pub const MAX_TYPE_RANGE_DAYS: i64 = 7;
/// Devices whose events one page of AP-05 merges (one Query each).
pub const DEVICE_GROUP: usize = 10;

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

/// The fields an index projects for events (`shared::model::schema::INDEXES`).
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

fn indexed_event(item: Item) -> Result<(String, EventView), FleetError> {
    let key = item
        .get(GSI1SK.name())
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

/// A read of events that leaves out the expired ones (DynamoDB deletes them up to days late).
fn unexpired() -> ExpressionsBuilder {
    Expressions::builder().condition(Condition::above(EventItem::TTL, ttl_now()))
}

/// A newest-first Query of one GSI1 partition between two sort keys, expired items filtered
/// out (type marks and device-type event entries both carry `ttl`).
fn index_query(table: &FleetTable, partition: &str, from: &str, to: &str) -> QueryFluentBuilder {
    let key = Condition::equals(GSI1PK, string_value(partition)).and(Condition::between(
        GSI1SK,
        string_value(from),
        string_value(to),
    ));
    table
        .client
        .query()
        .table_name(table.name())
        .index_name(GSI1)
        .expressions(unexpired().key_condition(key).build())
        .scan_index_forward(false)
}

/// A newest-first Query of one device's event partition over `range`, expired events
/// filtered out.
fn device_range(table: &FleetTable, pk: &str, range: TimeRange, limit: u32) -> QueryFluentBuilder {
    key_range(
        table,
        pk,
        format!("{EVENT_PREFIX}{}", range.from),
        through(EVENT_PREFIX, &range.to),
        unexpired(),
    )
    .scan_index_forward(false)
    .limit(limit as i32)
}

/// AP-04, implemented by [`device_events`].
pub const DEVICE_EVENTS: AccessPattern = AccessPattern {
    id: PatternId::DeviceEvents,
    description: "a device's events in a time range, newest first, paged",
    frequency: Frequency::Critical,
    operations: &[Operation::Query, Operation::GetItem],
    index: None,
    key_condition:
        "PK = USER#{userId}#DEVICE#{deviceId} AND SK BETWEEN EVENT#{from} AND EVENT#{to}~",
    budget: RequestBudget::PerPagePlusFirstPageCheck(1),
    max_read_units: None,
    route: Some("GET /me/devices/{deviceId}/events"),
    implemented_by: implemented_by!(device_events),
};

/// The attribute of a device-events cursor's second key: the registration stamp its first page
/// read from the device item, so later pages leave out another registration's events without
/// reading the device again.
const CURSOR_STAMP: &str = "reg";

/// Where a page of AP-04 resumes and the registration stamp its cursor carries (`None`: a
/// first page, or a cursor issued before stamps, whose page reads the device item).
fn resume_device_events(
    cursor: Option<&str>,
    pk: &str,
) -> Result<(Option<Item>, Option<i64>), ValidationError> {
    let Some(text) = cursor else {
        return Ok((None, None));
    };
    let mut keys = cursor::decode_up_to(DEVICE_EVENTS.id, text, 2)?.into_iter();
    let key = keys.next().flatten().ok_or_else(cursor::invalid)?;
    check_key(&key, &[(PK, pk)], &[(SK, EVENT_PREFIX)])?;
    let stamp = match keys.next() {
        None => None,
        Some(fence) => {
            let fence = fence.ok_or_else(cursor::invalid)?;
            if fence.len() != 1 {
                return Err(cursor::invalid());
            }
            let stamp = fence.get(CURSOR_STAMP).ok_or_else(cursor::invalid)?;
            Some(stamp.parse().map_err(|_| cursor::invalid())?)
        }
    };
    Ok((Some(cursor::exclusive_start_key(&key)), stamp))
}

/// AP-04: a page of one device's events in `range`, newest first. One Query per page; the
/// first page also reads the device item (a consistent GetItem, beside the Query): another
/// user's, an unknown, a deleting or a deleted device is a 404, though its events stay in
/// its partition until the daily purge (issue 38: right after `DELETE` this answered 200 with
/// the deleted device's events). Events another registration under the same id stored (a
/// deleted device's, until the purge) are left out by their stamp (`reg`), the device item's
/// on the first page and the cursor's after it: a page may hold fewer than `limit` events.
pub async fn device_events(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    range: TimeRange,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<EventView>, FleetError> {
    let pk = event_pk(user, device);
    let (start_key, stamp) = resume_device_events(cursor, &pk)?;
    let page = query(device_range(table, &pk, range, limit).set_exclusive_start_key(start_key));
    let ((items, last), stamp) = match stamp {
        Some(stamp) => (page.await?, stamp),
        None => {
            let key = ItemKey::device(user, device);
            let device_item = read_consistent::<DeviceItem>(table, &key);
            let (page, device_item) = futures::future::try_join(page, device_item).await?;
            let device_item = device_item
                .filter(|d| d.deleting_at.is_none())
                .ok_or(FleetError::NotFound("device"))?;
            (page, registration_stamp(&device_item.created_at))
        }
    };
    let mut events = Vec::with_capacity(items.len());
    for item in items {
        let e = EventItem::from_item(item)?;
        if !stored_by(e.registered_at, stamp) {
            continue;
        }
        events.push(EventView {
            id: e.id.to_string(),
            event_type: e.event_type.to_string(),
            value: e.value,
            at: e.at.to_string(),
            device_id: None,
            device_name: None,
            user_id: None,
        });
    }
    let fence = StartKey::from([(CURSOR_STAMP.to_string(), stamp.to_string())]);
    Ok(Page {
        items: events,
        cursor: last
            .as_ref()
            .and_then(cursor::start_key)
            .map(|key| cursor::encode(DEVICE_EVENTS.id, vec![Some(key), Some(fence)])),
    })
}

/// AP-05, implemented by [`user_events`].
pub const USER_EVENTS: AccessPattern = AccessPattern {
    id: PatternId::UserEvents,
    description: "a user's events across devices in a time range, newest first within each group of 10 devices",
    frequency: Frequency::Important,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId} AND begins_with(SK, DEVICE#) (the group); PK = USER#{userId}#DEVICE#{deviceId} AND SK BETWEEN EVENT#{from} AND EVENT#{to}~ (each device)",
    budget: RequestBudget::PerDeviceGroupPage,
    max_read_units: None,
    route: Some("GET /me/events"),
    implemented_by: implemented_by!(user_events),
};

/// AP-05: a page of the user's events across devices, newest first, from the devices' own
/// event partitions: no owner index copies every event (that copy would double the write
/// units of every event for a read that is rare). The devices are taken in groups of
/// [`DEVICE_GROUP`] by id: one Query lists a group, one Query per device of it (concurrently)
/// reads its events, merged newest first. An owner of up to [`DEVICE_GROUP`] devices gets
/// exact newest-first order across all of them; a larger fleet gets it group after group.
/// The cursor holds the next group's position and, per device of the group, the last event
/// returned from it.
pub async fn user_events(
    table: &FleetTable,
    user: &UserId,
    range: TimeRange,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<EventView>, FleetError> {
    let (next_group, starts) = match cursor {
        None => first_group(table, user, None).await?,
        Some(text) => {
            let (next_group, starts) = resume_group(user, text)?;
            if starts.iter().all(Option::is_none) {
                // The previous page finished its group: list the next one.
                first_group(table, user, next_group).await?
            } else {
                (next_group, starts)
            }
        }
    };
    let queries = starts.iter().map(|start| async move {
        // `None`: this device was exhausted on an earlier page.
        let Some(start) = start else {
            return Ok::<_, FleetError>((Vec::new(), false));
        };
        let pk = start.get(PK.name()).cloned().unwrap_or_default();
        let (items, last) = query(
            device_range(table, &pk, range, limit).set_exclusive_start_key(
                start
                    .contains_key(SK.name())
                    .then(|| cursor::exclusive_start_key(start)),
            ),
        )
        .await?;
        Ok((items, last.is_some()))
    });
    let results = scatter_gather(queries).await?;
    merge_devices(results, limit, next_group, starts)
}

/// Lists the group of devices after `after` (a device sort key; the first group when `None`):
/// the next group's position (`None` when this is the last) and a fresh start per device.
async fn first_group(
    table: &FleetTable,
    user: &UserId,
    after: Option<StartKey>,
) -> Result<(Option<StartKey>, Vec<Option<StartKey>>), FleetError> {
    let mut devices = Vec::new();
    let mut start = after.map(|k| {
        let mut key = k;
        key.insert(PK.to_string(), user_pk(user));
        cursor::exclusive_start_key(&key)
    });
    // Each device may have its live state beside it: read up to twice the group in items.
    loop {
        let (items, last) = query(
            key_prefix(
                table,
                user_pk(user),
                DEVICE_PREFIX,
                Expressions::builder().projection(&[PK, SK, ENTITY_TYPE, DeviceItem::DELETING_AT]),
            )
            .limit((2 * DEVICE_GROUP) as i32)
            .set_exclusive_start_key(start.take()),
        )
        .await?;
        for item in &items {
            if EntityType::of(item) == Some(EntityType::Device)
                && !item.contains_key(DeviceItem::DELETING_AT.name())
            {
                let sk = item
                    .get(SK.name())
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default();
                devices.push(sk);
            }
        }
        if devices.len() >= DEVICE_GROUP || last.is_none() {
            let more = devices.len() > DEVICE_GROUP || last.is_some();
            devices.truncate(DEVICE_GROUP);
            let next = more
                .then(|| {
                    devices
                        .last()
                        .map(|sk| StartKey::from([(SK.to_string(), sk.clone())]))
                })
                .flatten();
            let starts = devices
                .iter()
                .filter_map(|sk| sk.strip_prefix(DEVICE_PREFIX))
                .filter_map(|id| DeviceId::parse(id).ok())
                .map(|d| Some(StartKey::from([(PK.to_string(), event_pk(user, &d))])))
                .collect();
            return Ok((next, starts));
        }
        start = last;
    }
}

/// The next group's position and the per-device starts of a cursor, every key checked to be
/// the caller's own (a device sort key of their partition; their device's event partition).
fn resume_group(
    user: &UserId,
    text: &str,
) -> Result<(Option<StartKey>, Vec<Option<StartKey>>), FleetError> {
    let mut keys = cursor::decode_up_to(USER_EVENTS.id, text, DEVICE_GROUP + 1)?;
    let devices = keys.split_off(1);
    let next_group = keys.pop().flatten();
    if let Some(key) = &next_group {
        check_key(key, &[], &[(SK, DEVICE_PREFIX)])?;
    }
    let own = event_pk_prefix(user);
    for key in devices.iter().flatten() {
        let partition = key.get(PK.name()).ok_or_else(cursor::invalid)?;
        match parse_event_pk(partition) {
            Ok((owner, _)) if owner == *user && partition.starts_with(&own) => {}
            _ => return Err(cursor::invalid().into()),
        }
        if key.len() == 2 {
            check_key(key, &[(PK, partition)], &[(SK, EVENT_PREFIX)])?;
        } else {
            check_key(key, &[(PK, partition)], &[])?;
        }
    }
    Ok((next_group, devices))
}

/// Merges per-device pages newest first, keeps `limit`, and builds the cursor: for each
/// device the key of the last event returned from it, its old start when none was returned,
/// or `None` once everything it holds has been returned.
fn merge_devices(
    results: Vec<(Vec<Item>, bool)>,
    limit: u32,
    next_group: Option<StartKey>,
    starts: Vec<Option<StartKey>>,
) -> Result<Page<EventView>, FleetError> {
    let mut merged = Vec::new();
    let mut read = vec![0usize; starts.len()];
    let mut more = vec![false; starts.len()];
    for (device, (items, has_more)) in results.into_iter().enumerate() {
        more[device] = has_more;
        read[device] = items.len();
        for item in items {
            let key: StartKey = [PK, SK]
                .iter()
                .filter_map(|name| {
                    item.get(name.name())
                        .and_then(|v| v.as_s().ok())
                        .map(|v| (name.to_string(), v.clone()))
                })
                .collect();
            let e = EventItem::from_item(item)?;
            let sort = format!("{}#{}#{}", e.at, e.device_id, e.id);
            let view = EventView {
                id: e.id.to_string(),
                event_type: e.event_type.to_string(),
                value: e.value,
                at: e.at.to_string(),
                device_id: Some(e.device_id.to_string()),
                device_name: Some(e.device_name),
                user_id: None,
            };
            merged.push((sort, device, key, view));
        }
    }
    let merged = newest_first(merged, |m| &m.0, limit);
    let mut next = starts;
    let mut returned = vec![0usize; next.len()];
    for (_, device, key, _) in &merged {
        returned[*device] += 1;
        next[*device] = Some(key.clone());
    }
    for (device, start) in next.iter_mut().enumerate() {
        if !more[device] && returned[device] == read[device] {
            *start = None;
        }
    }
    let group_left = next.iter().any(Option::is_some);
    let cursor = (group_left || next_group.is_some()).then(|| {
        let mut keys = vec![next_group];
        if group_left {
            keys.extend(next);
        }
        cursor::encode(USER_EVENTS.id, keys)
    });
    Ok(Page {
        items: merged.into_iter().map(|(_, _, _, v)| v).collect(),
        cursor,
    })
}

/// AP-09, implemented by [`events_by_type`].
pub const EVENTS_BY_TYPE: AccessPattern = AccessPattern {
    id: PatternId::EventsByType,
    description: "events of a searchable type in a time range, all users (operators)",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: Some(GSI1),
    key_condition: "GSI1PK = TYPE#{type}#{day}#{shard} AND GSI1SK BETWEEN {window of from} AND {to}~ (the type marks); then GSI1PK = DEVICETYPE#{userId}#{deviceId}#{type} AND GSI1SK BETWEEN {from} AND {to}~ (each marked device, at most 25)",
    budget: RequestBudget::PerDayShardPlusDevices,
    max_read_units: None,
    route: Some("GET /admin/events"),
    implemented_by: implemented_by!(events_by_type),
};

/// Most devices one AP-09 request reads the events of (one Query each): what bounds its reads
/// in a storm, whatever the number of devices sending the type.
pub const MAX_TYPE_DEVICES: usize = 25;
/// Type marks one Query of a (day, shard) partition returns at most (newest windows first).
const MARKS_PER_QUERY: i32 = 4 * MAX_TYPE_DEVICES as i32;

/// AP-09's answer: the events, and how far they are the whole answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeEvents {
    /// Newest first, at most `limit`.
    pub events: Vec<EventView>,
    /// Devices that sent the type in the range, as the marks read show: exact when
    /// `complete`, at least this many otherwise.
    pub devices: usize,
    /// Whether `events` are exactly the newest `limit` events of the type in the range. False
    /// when more devices sent it than one request reads ([`MAX_TYPE_DEVICES`], or a page of
    /// marks per partition): the events are then the newest of the devices of the newest
    /// windows, an even share from each, a sample of the storm.
    pub complete: bool,
}

/// A device with events of the type in the range, from its type marks.
struct MarkedDevice {
    user: UserId,
    device: DeviceId,
    /// Its newest window in the range.
    newest: Timestamp,
}

/// AP-09 (operators): events of `event_type` in `range` across all users, newest first, at most
/// `limit`. Two steps, so no storm heats an index partition: one Query per (day, shard) lists
/// the type marks (which devices sent the type in which window: at most one mark per device
/// and window, however many events), then one Query per marked device reads that device's
/// events of the type, concurrently, at most [`MAX_TYPE_DEVICES`] devices. See [`TypeEvents`]
/// for what the answer says when more devices sent the type than that.
pub async fn events_by_type(
    table: &FleetTable,
    event_type: &EventType,
    range: TimeRange,
    limit: u32,
) -> Result<TypeEvents, FleetError> {
    // Checked before the days are listed: `from=0000-01-01` is 3.6 million of them.
    if range.day_count() > MAX_TYPE_RANGE_DAYS {
        return Err(ValidationError::new(
            "from",
            format!("the range may cover at most {MAX_TYPE_RANGE_DAYS} days"),
        )
        .into());
    }
    let Some(shards) = table.config.shards.type_shards(event_type) else {
        let searchable: Vec<String> = table
            .config
            .shards
            .searchable
            .iter()
            .map(|(t, _)| t.to_string())
            .collect();
        return Err(ValidationError::new(
            "type",
            format!(
                "events of this type are not indexed; searchable types: {} (SEARCHABLE_EVENT_TYPES)",
                searchable.join(", ")
            ),
        )
        .into());
    };
    let days = range.days();
    let partitions: Vec<String> = days
        .iter()
        .flat_map(|day| (0..shards).map(move |shard| type_gsi1pk(event_type, day, shard)))
        .collect();
    let first_window = type_window(&range.from).to_string();
    let last = through("", &range.to);
    let mark_queries = partitions.iter().map(|partition| {
        query(index_query(table, partition, &first_window, &last).limit(MARKS_PER_QUERY))
    });
    let mut marked: Vec<MarkedDevice> = Vec::new();
    let mut every_mark_read = true;
    for (items, more) in scatter_gather(mark_queries).await? {
        every_mark_read &= more.is_none();
        for item in items {
            let sk = item
                .get(GSI1SK.name())
                .and_then(|v| v.as_s().ok())
                .ok_or_else(|| FleetError::internal("type mark without its index sort key"))?;
            let (window, user, device) = parse_type_mark_gsi1sk(sk)?;
            match marked
                .iter_mut()
                .find(|m| m.user == user && m.device == device)
            {
                Some(seen) => seen.newest = seen.newest.max(window),
                None => marked.push(MarkedDevice {
                    user,
                    device,
                    newest: window,
                }),
            }
        }
    }
    // Newest windows first; the same order every time for the same marks.
    marked.sort_by(|a, b| (b.newest, &b.user, &b.device).cmp(&(a.newest, &a.user, &a.device)));
    let devices = marked.len();
    let complete = every_mark_read && devices <= MAX_TYPE_DEVICES;
    marked.truncate(MAX_TYPE_DEVICES);
    // Exact: every device's newest `limit`. A sample: an even share of `limit` from each.
    let per_device = if complete || marked.is_empty() {
        limit
    } else {
        limit.div_ceil(marked.len() as u32)
    };
    let from = range.from.to_string();
    let event_queries = marked.iter().map(|m| {
        let partition = device_type_gsi1pk(&m.user, &m.device, event_type);
        query(index_query(table, &partition, &from, &last).limit(per_device as i32))
    });
    let mut events = Vec::new();
    for (items, _) in scatter_gather(event_queries).await? {
        for item in items {
            events.push(indexed_event(item)?);
        }
    }
    let events = newest_first(events, |e| &e.0, limit);
    Ok(TypeEvents {
        events: events.into_iter().map(|(_, v)| v).collect(),
        devices,
        complete,
    })
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
