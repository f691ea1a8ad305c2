//! The daily analytics run (DESIGN §5): a parallel Scan, checkpointed per segment, that writes
//! `REPORT#{day}` and purges the events of deleted devices.
//!
//! Every segment keeps a [`SegmentTally`]; after each page the tally and the page's
//! `LastEvaluatedKey` are written to the segment's checkpoint (`ANALYTICS#{day}` /
//! `SEGMENT#{n}`), so a run cut off by the Lambda timeout resumes where it stopped. When every
//! segment is done the tallies are merged into the report; running the day again reuses the
//! finished checkpoints and writes the same report.
//!
//! Counting relies on DynamoDB returning all items of one partition key together, in one
//! segment (a Scan segment is a range of partition-key hashes): a device's events and a user's
//! devices are therefore counted exactly, carrying only the partition in progress.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, KeysAndAttributes, WriteRequest};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{query, s, RawItem};
use crate::catalog::{implemented_by, AccessPattern, Frequency, PatternId, RequestBudget};
use crate::cursor::{exclusive_start_key, start_key, StartKey};
use crate::dynamo::{get_all, throttled, write_all, BATCH_GET_SIZE, BATCH_WRITE_SIZE};
use crate::error::{FleetError, ValidationError};
use crate::keys::{analytics_pk, is_day, registration_pk, segment_sk, REGISTRATION_SK};
use crate::metrics::RequestMeter;
use crate::retry::Retry;
use crate::schema::{ENTITY_TYPE, PK, SK};
use crate::table::{sdk_error, FleetTable};
use crate::timestamp::Timestamp;

/// Devices listed in `topDevices`.
pub const TOP_DEVICES: usize = 10;
/// Partition keys listed in `partitionHeat`.
pub const HEAT_KEYS: usize = 10;
/// Share of the day's writes above which a key is flagged hot (seed 003's distribution target).
pub const HOT_SHARE: f64 = 0.10;
/// Checkpoints are removed by TTL this long after the run.
const CHECKPOINT_TTL_SECONDS: i64 = 14 * 86_400;
/// How long past the run's deadline the purge of a page already read may keep retrying: the
/// page is checkpointed only once its purge is done.
const PURGE_GRACE: Duration = Duration::from_secs(30);

/// How one invocation runs.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// The report day, `YYYY-MM-DD`.
    pub day: String,
    /// Total scan segments (`SCAN_SEGMENTS`, default 4); fixed for a day once started.
    pub segments: u32,
    /// The segments this invocation works on (all when `None`): several invocations can share
    /// a day when one 15-minute Lambda cannot scan the table.
    pub only: Option<Vec<u32>>,
    /// Scan page size (`None`: DynamoDB's 1 MB pages).
    pub page_limit: Option<i32>,
    /// Stop scanning (after checkpointing) at this instant.
    pub deadline: Instant,
    /// Forget earlier checkpoints of the day and scan again.
    pub fresh: bool,
    /// Pages per segment in this invocation at most (`None`: until done or the deadline); a
    /// bound on one invocation's work, like the deadline.
    pub max_pages: Option<u32>,
}

impl RunPlan {
    /// A plan for `day` with every segment and no page limit.
    pub fn new(day: &str, segments: u32, deadline: Instant) -> Result<Self, ValidationError> {
        if !is_day(day) {
            return Err(ValidationError::new(
                "date",
                "must be a date such as 2024-04-10",
            ));
        }
        if !(1..=1000).contains(&segments) {
            return Err(ValidationError::new("segments", "must be 1..1000"));
        }
        Ok(Self {
            day: day.to_string(),
            segments,
            only: None,
            page_limit: None,
            deadline,
            fresh: false,
            max_pages: None,
        })
    }
}

/// The UTC day before `at` (the scheduled run at 00:15 reports the day that just ended).
pub fn previous_day(at: &Timestamp) -> String {
    at.plus_seconds(-86_400).day()
}

/// One partition's count of the day's events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionCount {
    /// Partition key (`USER#u#DEVICE#d`).
    pub key: String,
    /// Events of the day in it.
    pub writes: u64,
}

/// What one scan segment has counted so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentTally {
    /// Profiles.
    pub users: u64,
    /// Users with a device seen in the 30 days before the day's end.
    pub active_users: u64,
    /// Live devices.
    pub devices: u64,
    /// Devices per status.
    pub devices_by_status: BTreeMap<String, u64>,
    /// Devices per type.
    pub devices_by_type: BTreeMap<String, u64>,
    /// Devices seen in the 24 hours before the day's end (or later).
    pub online_24h: u64,
    /// The day's events (excluding purged ones).
    pub events: u64,
    /// The day's events per type.
    pub events_by_type: BTreeMap<String, u64>,
    /// The day's events per GSI1 partition (`TYPE#{type}#{day}#{shard}`): the index's heat.
    pub index_writes: BTreeMap<String, u64>,
    /// The busiest device partitions (closed ones), most writes first.
    pub top_partitions: Vec<PartitionCount>,
    /// The device partition being counted when the page ended.
    pub open_partition: Option<PartitionCount>,
    /// The user partition last counted as active.
    pub last_active_user: Option<String>,
    /// Events of deleted devices removed.
    pub purged: u64,
    /// Fleet items scanned. The run's own checkpoints and reports are not counted: whether a
    /// segment meets them depends on how far the other segments have got, and a run's
    /// figures must not depend on timing.
    pub scanned: u64,
    /// Scan pages read (each followed by one checkpoint write).
    #[serde(default)]
    pub pages: u64,
    /// Read capacity this segment consumed.
    pub read_units: f64,
    /// Write capacity of the purge (checkpoint writes are counted in `pages`).
    pub write_units: f64,
    /// DynamoDB requests issued.
    pub requests: u64,
    /// Time spent, milliseconds.
    pub duration_ms: u64,
}

impl SegmentTally {
    fn close_partition(&mut self) {
        if let Some(done) = self.open_partition.take() {
            if done.writes > 0 {
                self.top_partitions.push(done);
                self.top_partitions
                    .sort_by(|a, b| b.writes.cmp(&a.writes).then(a.key.cmp(&b.key)));
                self.top_partitions.truncate(TOP_DEVICES.max(HEAT_KEYS));
            }
        }
    }

    fn count_event(&mut self, partition: &str, event_type: &str, index_key: Option<&str>) {
        if self.open_partition.as_ref().map(|p| p.key.as_str()) != Some(partition) {
            self.close_partition();
            self.open_partition = Some(PartitionCount {
                key: partition.to_string(),
                writes: 0,
            });
        }
        if let Some(open) = self.open_partition.as_mut() {
            open.writes += 1;
        }
        self.events += 1;
        *self
            .events_by_type
            .entry(event_type.to_string())
            .or_default() += 1;
        if let Some(key) = index_key {
            *self.index_writes.entry(key.to_string()).or_default() += 1;
        }
    }
}

/// A segment's checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    entity_type: crate::items::EntityType,
    day: String,
    segment: u32,
    segments: u32,
    done: bool,
    #[serde(default)]
    last_key: Option<StartKey>,
    tally: SegmentTally,
    ttl: i64,
}

/// The outcome of one invocation.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// Every segment is done and the report is written.
    pub complete: bool,
    /// Segments done so far.
    pub segments_done: u32,
    /// Every segment this invocation was asked to scan is done (the report may still wait for
    /// segments other invocations scan).
    pub requested_done: bool,
    /// The report, when complete.
    pub report: Option<Value>,
}

/// The fields the scan projects (everything the report and the purge need, nothing more).
const PROJECTION: &str =
    "PK, SK, #entityType, userId, deviceId, #status, #type, lastSeen, #at, #ttl, deletingAt, GSI1PK";

/// A figure [`run_daily_report`] computes into the daily report: no request of its own at read
/// time (it is read with AP-15).
const fn daily_report_figure(id: PatternId, description: &'static str) -> AccessPattern {
    AccessPattern {
        id,
        description,
        frequency: Frequency::Analytics,
        operations: &[],
        index: None,
        key_condition: "daily report",
        budget: RequestBudget::ZeroAtReadTime,
        max_read_units: None,
        route: None,
        implemented_by: implemented_by!(run_daily_report),
    }
}

/// AP-10, the report's `devices.byStatus`.
pub const DEVICE_COUNT_BY_STATUS: AccessPattern =
    daily_report_figure(PatternId::Ap10, "device count by status");

/// AP-11, the report's `users.active30d`.
pub const ACTIVE_USERS: AccessPattern =
    daily_report_figure(PatternId::Ap11, "active users in the last 30 days");

/// Runs (or resumes) the daily analytics for `plan.day`.
pub async fn run_daily_report(
    table: &FleetTable,
    plan: &RunPlan,
) -> Result<RunOutcome, FleetError> {
    if plan.fresh {
        forget_checkpoints(table, &plan.day).await?;
    }
    let mut checkpoints = load_checkpoints(table, &plan.day).await?;
    if let Some(other) = checkpoints.values().find(|c| c.segments != plan.segments) {
        return Err(ValidationError::new(
            "segments",
            format!(
                "the run for {} started with {} segments",
                plan.day, other.segments
            ),
        )
        .into());
    }
    let wanted: Vec<u32> = plan
        .only
        .clone()
        .unwrap_or_else(|| (0..plan.segments).collect());
    let work = wanted
        .into_iter()
        .filter(|s| *s < plan.segments)
        .filter(|s| !checkpoints.get(s).is_some_and(|c| c.done))
        .map(|segment| {
            let resume = checkpoints.get(&segment).cloned();
            // Boxed: the scan's future is deep, and boxing keeps every caller's type small.
            Box::pin(scan_segment(table, plan, segment, resume))
        });
    for result in futures::future::join_all(work).await {
        let checkpoint = result?;
        checkpoints.insert(checkpoint.segment, checkpoint);
    }
    let done = checkpoints.values().filter(|c| c.done).count() as u32;
    let requested_done = plan
        .only
        .clone()
        .unwrap_or_else(|| (0..plan.segments).collect())
        .iter()
        .all(|s| checkpoints.get(s).is_some_and(|c| c.done));
    if done < plan.segments {
        return Ok(RunOutcome {
            complete: false,
            segments_done: done,
            requested_done,
            report: None,
        });
    }
    let tallies: Vec<&SegmentTally> = checkpoints.values().map(|c| &c.tally).collect();
    let report = build_report(&plan.day, &tallies, plan.segments);
    super::reports::put_report(table, &plan.day, report.clone()).await?;
    Ok(RunOutcome {
        complete: true,
        segments_done: done,
        requested_done,
        report: Some(report),
    })
}

async fn load_checkpoints(
    table: &FleetTable,
    day: &str,
) -> Result<BTreeMap<u32, Checkpoint>, FleetError> {
    let (items, _) = query(
        table
            .client
            .query()
            .table_name(table.name())
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(analytics_pk(day)))
            .consistent_read(true),
    )
    .await?;
    items
        .into_iter()
        .map(|item| {
            let c: Checkpoint = serde_dynamo::from_item(item)?;
            Ok((c.segment, c))
        })
        .collect()
}

async fn forget_checkpoints(table: &FleetTable, day: &str) -> Result<(), FleetError> {
    for segment in load_checkpoints(table, day).await?.keys() {
        table
            .client
            .delete_item()
            .table_name(table.name())
            .key(PK, s(analytics_pk(day)))
            .key(SK, s(segment_sk(*segment)))
            .send()
            .await
            .map_err(sdk_error)?;
    }
    Ok(())
}

fn text<'a>(item: &'a RawItem, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

fn number(item: &RawItem, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

/// Scans one segment from its checkpoint until it is done or the deadline comes, saving a
/// checkpoint after every page.
async fn scan_segment(
    table: &FleetTable,
    plan: &RunPlan,
    segment: u32,
    resume: Option<Checkpoint>,
) -> Result<Checkpoint, FleetError> {
    let day_start = Timestamp::parse_field("date", &format!("{}T00:00:00Z", plan.day))?;
    let day_end = day_start.plus_seconds(86_400);
    let online_since = day_end.plus_seconds(-86_400).to_string();
    let active_since = day_end.plus_seconds(-30 * 86_400).to_string();
    let (from, to) = (day_start.to_string(), day_end.to_string());
    let now = Timestamp::now();
    let mut checkpoint = resume.unwrap_or_else(|| Checkpoint {
        pk: analytics_pk(&plan.day),
        sk: segment_sk(segment),
        entity_type: crate::items::EntityType::Checkpoint,
        day: plan.day.clone(),
        segment,
        segments: plan.segments,
        done: false,
        last_key: None,
        tally: SegmentTally::default(),
        ttl: now.epoch_seconds() + CHECKPOINT_TTL_SECONDS,
    });
    // Registration checks made in this invocation: partition -> owner still registered.
    let mut live: HashMap<String, bool> = HashMap::new();
    let mut pages = 0;
    loop {
        if Instant::now() >= plan.deadline || plan.max_pages.is_some_and(|max| pages >= max) {
            return Ok(checkpoint);
        }
        pages += 1;
        let started = Instant::now();
        let meter = RequestMeter::new();
        let page = meter
            .clone()
            .scope(scan_page(
                table,
                plan,
                segment,
                &mut checkpoint,
                &mut live,
                PageBounds {
                    from: &from,
                    to: &to,
                    online_since: &online_since,
                    active_since: &active_since,
                    now: now.epoch_seconds(),
                },
            ))
            .await;
        let last_key = page?;
        let used = meter.snapshot();
        let tally = &mut checkpoint.tally;
        tally.read_units += used.read_units;
        tally.write_units += used.write_units;
        tally.requests += u64::from(used.requests());
        tally.duration_ms += started.elapsed().as_millis() as u64;
        match last_key {
            Some(key) => checkpoint.last_key = Some(key),
            None => {
                checkpoint.tally.close_partition();
                checkpoint.last_key = None;
                checkpoint.done = true;
            }
        }
        // One checkpoint write per page, counted as `pages` rather than in `write_units`
        // (its cost is only known after it is written into itself).
        checkpoint.tally.pages += 1;
        super::put_item(table, &checkpoint).await?;
        if checkpoint.done {
            return Ok(checkpoint);
        }
    }
}

struct PageBounds<'a> {
    from: &'a str,
    to: &'a str,
    online_since: &'a str,
    active_since: &'a str,
    now: i64,
}

/// Reads one page of the segment into the tally and purges the page's events of deleted
/// devices; returns the page's `LastEvaluatedKey`.
async fn scan_page(
    table: &FleetTable,
    plan: &RunPlan,
    segment: u32,
    checkpoint: &mut Checkpoint,
    live: &mut HashMap<String, bool>,
    bounds: PageBounds<'_>,
) -> Result<Option<StartKey>, FleetError> {
    let out = table
        .client
        .scan()
        .table_name(table.name())
        .segment(segment as i32)
        .total_segments(plan.segments as i32)
        .projection_expression(PROJECTION)
        .expression_attribute_names("#entityType", ENTITY_TYPE)
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#type", "type")
        .expression_attribute_names("#at", "at")
        .expression_attribute_names("#ttl", "ttl")
        .set_limit(plan.page_limit)
        .set_exclusive_start_key(checkpoint.last_key.as_ref().map(exclusive_start_key))
        .send()
        .await
        .map_err(sdk_error)?;
    let items = out.items.unwrap_or_default();
    let next = out.last_evaluated_key.as_ref().and_then(start_key);

    // Which event partitions of this page belong to devices still registered to their owner.
    let unknown: Vec<String> = items
        .iter()
        .filter(|i| text(i, ENTITY_TYPE) == Some("event"))
        .filter_map(|i| text(i, PK))
        .filter(|pk| !live.contains_key(*pk))
        .map(str::to_string)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for (pk, registered) in check_registrations(table, &unknown, plan.deadline).await? {
        live.insert(pk, registered);
    }

    let tally = &mut checkpoint.tally;
    let mut purge = Vec::new();
    for item in items {
        let entity = text(&item, ENTITY_TYPE);
        if !matches!(entity, Some("checkpoint" | "report")) {
            tally.scanned += 1;
        }
        let pk = text(&item, PK).unwrap_or_default().to_string();
        match entity {
            Some("profile") => tally.users += 1,
            Some("device") if !item.contains_key("deletingAt") => {
                tally.devices += 1;
                let status = text(&item, "status").unwrap_or("unknown").to_string();
                *tally.devices_by_status.entry(status).or_default() += 1;
                let kind = text(&item, "type").unwrap_or("unknown").to_string();
                *tally.devices_by_type.entry(kind).or_default() += 1;
                let seen = text(&item, "lastSeen").unwrap_or("");
                if !seen.is_empty() && seen >= bounds.online_since {
                    tally.online_24h += 1;
                }
                if !seen.is_empty()
                    && seen >= bounds.active_since
                    && tally.last_active_user.as_deref() != Some(pk.as_str())
                {
                    tally.active_users += 1;
                    tally.last_active_user = Some(pk.clone());
                }
            }
            Some("event") => {
                if live.get(&pk) == Some(&false) {
                    purge.push(item);
                    continue;
                }
                let expired = number(&item, "ttl").is_some_and(|t| t <= bounds.now);
                let at = text(&item, "at").unwrap_or("");
                if !expired && at >= bounds.from && at < bounds.to {
                    let event_type = text(&item, "type").unwrap_or("unknown").to_string();
                    let index_key = text(&item, "GSI1PK").map(str::to_string);
                    tally.count_event(&pk, &event_type, index_key.as_deref());
                }
            }
            _ => {}
        }
    }
    tally.purged += purge.len() as u64;
    delete_items(table, purge, plan.deadline).await?;
    Ok(next)
}

/// For each event partition `USER#u#DEVICE#d`: whether `DEVICE#d` is still registered to `u`.
async fn check_registrations(
    table: &FleetTable,
    partitions: &[String],
    deadline: Instant,
) -> Result<Vec<(String, bool)>, FleetError> {
    let mut results = Vec::new();
    for chunk in partitions.chunks(BATCH_GET_SIZE) {
        let mut wanted: HashMap<String, (String, String)> = HashMap::new();
        let mut keys = Vec::new();
        for pk in chunk {
            // `USER#{u}#DEVICE#{d}`.
            let parts: Vec<&str> = pk.split('#').collect();
            let [_, user, _, device] = parts.as_slice() else {
                results.push((pk.clone(), true));
                continue;
            };
            let registration = registration_pk(&crate::ids::DeviceId::parse(*device)?);
            wanted.insert(registration.clone(), (pk.clone(), user.to_string()));
            keys.push(HashMap::from([
                (PK.to_string(), s(registration)),
                (SK.to_string(), s(REGISTRATION_SK)),
            ]));
        }
        let request = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .projection_expression("PK, userId")
            .consistent_read(true)
            .build()
            .map_err(FleetError::internal)?;
        let mut found: HashMap<String, String> = HashMap::new();
        for item in get_all(table, request, &mut Retry::until(deadline + PURGE_GRACE)).await? {
            if let (Some(pk), Some(user)) = (text(&item, PK), text(&item, "userId")) {
                found.insert(pk.to_string(), user.to_string());
            }
        }
        for (registration, (partition, user)) in wanted {
            let registered = found.get(&registration) == Some(&user);
            results.push((partition, registered));
        }
    }
    Ok(results)
}

/// Deletes `items` (by key) in BatchWriteItem calls of 25, retrying unprocessed ones.
async fn delete_items(
    table: &FleetTable,
    items: Vec<RawItem>,
    deadline: Instant,
) -> Result<(), FleetError> {
    for chunk in items.chunks(BATCH_WRITE_SIZE) {
        let requests: Vec<WriteRequest> = chunk
            .iter()
            .map(|item| {
                let key: HashMap<String, AttributeValue> = [PK, SK]
                    .iter()
                    .filter_map(|k| item.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect();
                DeleteRequest::builder()
                    .set_key(Some(key))
                    .build()
                    .map(|d| WriteRequest::builder().delete_request(d).build())
                    .map_err(FleetError::internal)
            })
            .collect::<Result<_, _>>()?;
        let unprocessed =
            write_all(table, requests, &mut Retry::until(deadline + PURGE_GRACE)).await?;
        if !unprocessed.is_empty() {
            return Err(throttled());
        }
    }
    Ok(())
}

/// Merges the segments' tallies into the report (DESIGN §4 shape, plus the run's figures).
pub fn build_report(day: &str, tallies: &[&SegmentTally], segments: u32) -> Value {
    let mut total = SegmentTally::default();
    let mut partitions = Vec::new();
    for t in tallies {
        total.users += t.users;
        total.active_users += t.active_users;
        total.devices += t.devices;
        total.online_24h += t.online_24h;
        total.events += t.events;
        total.purged += t.purged;
        total.scanned += t.scanned;
        total.pages += t.pages;
        total.read_units += t.read_units;
        total.write_units += t.write_units;
        total.requests += t.requests;
        total.duration_ms = total.duration_ms.max(t.duration_ms);
        for (k, v) in &t.devices_by_status {
            *total.devices_by_status.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &t.devices_by_type {
            *total.devices_by_type.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &t.events_by_type {
            *total.events_by_type.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &t.index_writes {
            *total.index_writes.entry(k.clone()).or_default() += v;
        }
        partitions.extend(t.top_partitions.iter().cloned());
    }
    partitions.sort_by(|a, b| b.writes.cmp(&a.writes).then(a.key.cmp(&b.key)));
    let share = |writes: u64| {
        if total.events == 0 {
            0.0
        } else {
            (writes as f64 / total.events as f64 * 10_000.0).round() / 10_000.0
        }
    };
    let top_devices: Vec<Value> = partitions
        .iter()
        .take(TOP_DEVICES)
        .map(|p| {
            let parts: Vec<&str> = p.key.split('#').collect();
            json!({"userId": parts.get(1), "deviceId": parts.get(3), "events": p.writes})
        })
        .collect();
    let heat: Vec<Value> = partitions
        .iter()
        .take(HEAT_KEYS)
        .map(|p| json!({"key": p.key, "writes": p.writes, "share": share(p.writes), "hot": share(p.writes) > HOT_SHARE}))
        .collect();
    let mut index_heat: Vec<(&String, &u64)> = total.index_writes.iter().collect();
    index_heat.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let index_heat: Vec<Value> = index_heat
        .into_iter()
        .take(HEAT_KEYS)
        .map(|(k, w)| json!({"key": k, "writes": w, "share": share(*w), "hot": share(*w) > HOT_SHARE}))
        .collect();
    json!({
        "date": day,
        "devices": {
            "total": total.devices,
            "byStatus": total.devices_by_status,
            "byType": total.devices_by_type,
            "online24h": total.online_24h,
        },
        "users": {"total": total.users, "active30d": total.active_users},
        "events": {"total": total.events, "byType": total.events_by_type},
        "topDevices": top_devices,
        "partitionHeat": heat,
        "indexHeat": index_heat,
        "hotKeyThreshold": HOT_SHARE,
        "purgedEvents": total.purged,
        "run": {
            "segments": segments,
            "itemsScanned": total.scanned,
            "pages": total.pages,
            "requests": total.requests,
            "rcu": total.read_units,
            "wcu": total.write_units,
            "durationMs": total.duration_ms,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_counted_whole_and_ranked() {
        let mut t = SegmentTally::default();
        for (pk, n) in [("A", 3), ("B", 5), ("C", 1)] {
            for _ in 0..n {
                t.count_event(pk, "temp", Some("TYPE#temp#d#0"));
            }
        }
        t.close_partition();
        let keys: Vec<(&str, u64)> = t
            .top_partitions
            .iter()
            .map(|p| (p.key.as_str(), p.writes))
            .collect();
        assert_eq!(keys, [("B", 5), ("A", 3), ("C", 1)]);
        assert_eq!(t.events, 9);
        assert_eq!(t.index_writes["TYPE#temp#d#0"], 9);
    }

    #[test]
    fn report_merges_segments_and_flags_hot_keys() {
        let mut a = SegmentTally::default();
        for _ in 0..8 {
            a.count_event("USER#u#DEVICE#hot", "t", None);
        }
        a.close_partition();
        let mut b = SegmentTally::default();
        for i in 0..20 {
            b.count_event(&format!("USER#v#DEVICE#d{i}"), "t", None);
        }
        b.close_partition();
        let report = build_report("2024-04-10", &[&a, &b], 2);
        assert_eq!(report["events"]["total"], 28);
        assert_eq!(report["topDevices"][0]["deviceId"], "hot");
        assert_eq!(report["topDevices"][0]["events"], 8);
        assert_eq!(report["partitionHeat"][0]["hot"], true);
        assert_eq!(report["partitionHeat"][1]["hot"], false);
        assert_eq!(report["partitionHeat"][0]["share"], 0.2857);
    }

    #[test]
    fn the_scheduled_run_reports_the_day_before() {
        let at = Timestamp::parse_field("time", "2024-04-11T00:15:00Z").unwrap();
        assert_eq!(previous_day(&at), "2024-04-10");
        assert!(RunPlan::new("2024-02-30", 4, Instant::now()).is_err());
        assert!(RunPlan::new("2024-02-29", 0, Instant::now()).is_err());
    }
}
