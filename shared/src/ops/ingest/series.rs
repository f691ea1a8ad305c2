//! A batch's part in the device's summaries (issue 32, docs/design.md "13. Summaries"): which
//! readings are counted into the live state's open buckets, which 5-minute buckets are
//! recomputed from the stored raw readings, and the summary items (5-minute blocks, day and
//! month items) a batch writes, in the transaction of its live-state update.
//!
//! A reading newer than its type's latest reading in the state the attempt works from was
//! never counted: it is counted in. Any other reading (a replay, out of order, late) may or may
//! not have been: its bucket is recomputed from what is stored, which is right either way.
//! Every summary item is written in a transaction with the state update conditioned on
//! `ingestSeq`, so a device's summary writes are serialized by its state, and
//! read-modify-write of an item needs no version of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use super::validate::NewEvent;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::event::{registration_stamp, stored_by, EventItem, EVENT_PREFIX};
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::series::{series_sk, SeriesItem};
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::ids::{EventId, EventType};
use crate::model::keys::event_pk;
use crate::model::readings::{EventValue, StoredReading};
use crate::model::series::{
    block_start, five_minute_buckets, month_start, Bucket, Buckets, OpenSeries, Resolution,
    SeriesState, BLOCK_MS,
};
use crate::model::timestamp::Timestamp;
use crate::store::dynamo::{delete_action, key_range, query, ttl_now};
use crate::store::table::FleetTable;

/// How long the summary items of each resolution are kept: the 5-minute blocks as long as the
/// raw readings, hours and days longer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesRetention {
    /// Days after its block ends that a 5-minute block is kept (the raw retention).
    pub raw_days: u32,
    /// Days after its day ends that a day item (hourly buckets) is kept.
    pub hourly_days: u32,
    /// Days after its month ends that a month item (daily buckets) is kept.
    pub daily_days: u32,
}

impl SeriesRetention {
    /// The expiry (epoch seconds) of an item of `resolution` starting at `start_ms`.
    fn ttl(&self, resolution: Resolution, start_ms: i64) -> i64 {
        let (end_ms, days) = match resolution {
            Resolution::FiveMinutes => (start_ms + BLOCK_MS, self.raw_days),
            Resolution::Hour => (start_ms + Resolution::Day.millis(), self.hourly_days),
            Resolution::Day => (
                month_start(start_ms + 32 * Resolution::Day.millis()),
                self.daily_days,
            ),
        };
        end_ms.div_euclid(1000) + i64::from(days) * 86_400
    }
}

/// A batch's readings as the summaries see them, against the state an attempt works from.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Classified {
    /// Per type, the readings newer than the type's latest: counted in.
    pub(super) new: BTreeMap<String, Vec<(i64, EventValue)>>,
    /// `(type, 5-minute bucket start)` of every other reading: recomputed from raw.
    pub(super) recompute: BTreeSet<(String, i64)>,
    /// The key `(at, id)` and `(type, 5-minute bucket start)` of every reading.
    pub(super) keyed: Vec<((Timestamp, EventId), (String, i64))>,
}

/// What a recompute on the ingest path allows for: the open buckets' counts are all stored or
/// on their way, except this batch's own readings that failed to store (counted by this
/// attempt or by an earlier one whose answer was lost; the device resends them, and a repair
/// or their resend's recompute sets the bucket right).
pub(super) struct CountedCheck {
    /// Until when to wait for counted readings in flight.
    pub(super) deadline: Instant,
    /// Per `(type, 5-minute bucket start)`: this batch's readings not stored.
    pub(super) unstored: BTreeMap<(String, i64), u64>,
}

/// How long a recompute waits for readings the state counts but the table does not hold yet
/// (a concurrent batch's, whose state update landed before its event writes): well beyond a
/// write's round trip, well within a batch's deadline.
pub(super) const IN_FLIGHT_WAIT: Duration = Duration::from_secs(1);

/// Sorts `events` into readings to count and buckets to recompute, against `base`.
pub(super) fn classify(base: &DeviceStateItem, events: &[NewEvent]) -> Classified {
    let mut classified = Classified::default();
    for e in events {
        let at = e.at.epoch_millis();
        let kind = e.event_type.as_str();
        classified.keyed.push((
            (e.at, e.id.clone()),
            (kind.to_string(), Resolution::FiveMinutes.bucket_start(at)),
        ));
        if base.latest.get(kind).is_none_or(|latest| at > latest.0) {
            classified
                .new
                .entry(kind.to_string())
                .or_default()
                .push((at, e.value.clone()));
        } else {
            classified
                .recompute
                .insert((kind.to_string(), Resolution::FiveMinutes.bucket_start(at)));
        }
    }
    classified
}

/// The `(type, bucket)` of `events`: what a repair recomputes.
pub(super) fn buckets_of(events: &[NewEvent]) -> BTreeSet<(String, i64)> {
    events
        .iter()
        .map(|e| {
            (
                e.event_type.to_string(),
                Resolution::FiveMinutes.bucket_start(e.at.epoch_millis()),
            )
        })
        .collect()
}

/// Counts the new readings into `series` (a type's first counted reading opens its summaries).
/// Returns the buckets of new readings before the open part (a state whose latest reading went
/// back in a repair): those are recomputed instead.
pub(super) fn count_new(
    series: &mut SeriesState,
    new: &BTreeMap<String, Vec<(i64, EventValue)>>,
) -> BTreeSet<(String, i64)> {
    let mut flushed = BTreeSet::new();
    for (kind, readings) in new {
        let first = readings.iter().map(|(at, _)| *at).min().unwrap_or_default();
        let open = series
            .0
            .entry(kind.clone())
            .or_insert_with(|| OpenSeries::starting_at(first));
        for (at, value) in readings {
            if open.is_open(*at) {
                open.record(*at, value);
            } else {
                flushed.insert((kind.clone(), Resolution::FiveMinutes.bucket_start(*at)));
            }
        }
    }
    flushed
}

/// The summary items one attempt reads and rewrites, loaded at most once each.
#[derive(Clone, Default)]
pub(super) struct SeriesItems {
    /// By (type, resolution, start): the buckets as loaded (`None`: no item) and as they will be.
    items: BTreeMap<(String, Resolution, i64), (Option<Buckets>, Buckets)>,
}

impl SeriesItems {
    /// The items that change, as transaction actions: a put, or a delete of an item left
    /// with no bucket.
    pub(super) fn actions(
        &self,
        table: &FleetTable,
        registration: &RegistrationItem,
        retention: SeriesRetention,
    ) -> Result<Vec<TransactWriteItem>, FleetError> {
        let mut actions = Vec::new();
        for ((kind, resolution, start), (loaded, now)) in &self.items {
            if loaded.as_ref() == Some(now) || (loaded.is_none() && now.0.is_empty()) {
                continue;
            }
            let item = SeriesItem {
                user_id: registration.user_id.clone(),
                device_id: registration.device_id.clone(),
                event_type: EventType::parse(kind).map_err(|e| FleetError::internal(e.reason))?,
                resolution: *resolution,
                start: timestamp(*start)?,
                buckets: now.clone(),
                ttl: retention.ttl(*resolution, *start),
                registered_at: Some(registration_stamp(&registration.created_at)),
            };
            if now.0.is_empty() {
                actions.push(delete_action(table, &item.item_key())?);
                continue;
            }
            let put = Put::builder()
                .table_name(table.name())
                .set_item(Some(item.to_item(&table.config.shards)?))
                .build()
                .map_err(FleetError::internal)?;
            actions.push(TransactWriteItem::builder().put(put).build());
        }
        Ok(actions)
    }

    /// How many items change.
    pub(super) fn changed(&self) -> usize {
        self.items
            .values()
            .filter(|(loaded, now)| {
                loaded.as_ref() != Some(now) && !(loaded.is_none() && now.0.is_empty())
            })
            .count()
    }
}

/// Reads and recomputes summaries for one device: the event partition and its summary items.
pub(super) struct SeriesStore<'a> {
    pub(super) table: &'a FleetTable,
    pub(super) registration: &'a RegistrationItem,
}

impl SeriesStore<'_> {
    /// The stamp of the registration this store writes for (its items' `reg`).
    fn stamp(&self) -> i64 {
        registration_stamp(&self.registration.created_at)
    }

    /// The items of `kind` at `resolution` starting in `[from, to]` that are not loaded yet,
    /// read consistently (the state's condition serializes writers; a consistent read sees the
    /// last committed transaction).
    async fn load_range(
        &self,
        items: &mut SeriesItems,
        kind: &str,
        resolution: Resolution,
        from: i64,
        to: i64,
    ) -> Result<(), FleetError> {
        let event_type = EventType::parse(kind).map_err(|e| FleetError::internal(e.reason))?;
        let pk = event_pk(&self.registration.user_id, &self.registration.device_id);
        let first = series_sk(&event_type, resolution, &timestamp(from)?);
        let last = series_sk(&event_type, resolution, &timestamp(to)?);
        let mut found = BTreeMap::new();
        let mut start_key = None;
        loop {
            let request = key_range(
                self.table,
                pk.clone(),
                first.clone(),
                last.clone(),
                crate::model::expression::Expressions::builder(),
            )
            .consistent_read(true)
            .set_exclusive_start_key(start_key);
            let (page, next) = query(request).await?;
            for item in page {
                if EntityType::of(&item) == Some(EntityType::Series) {
                    let item = SeriesItem::from_item(item)?;
                    // Another registration's item under the same id (a deleted device's,
                    // left for the purge) is absent to this one: replaced, never merged.
                    if stored_by(item.registered_at, self.stamp()) {
                        found.insert(item.start.epoch_millis(), item.buckets);
                    }
                }
            }
            match next {
                Some(key) => start_key = Some(key),
                None => break,
            }
        }
        let step = match resolution {
            Resolution::FiveMinutes => BLOCK_MS,
            Resolution::Hour => Resolution::Day.millis(),
            Resolution::Day => 0,
        };
        let mut starts: BTreeSet<i64> = found.keys().copied().collect();
        if step > 0 {
            starts.extend((from..=to).step_by(step as usize));
        } else {
            starts.insert(from);
        }
        for start in starts {
            items
                .items
                .entry((kind.to_string(), resolution, start))
                .or_insert_with(|| {
                    let loaded = found.remove(&start);
                    let now = loaded.clone().unwrap_or_default();
                    (loaded, now)
                });
        }
        Ok(())
    }

    /// One item, loaded (consistently) when not loaded yet.
    async fn item<'i>(
        &self,
        items: &'i mut SeriesItems,
        kind: &str,
        resolution: Resolution,
        start: i64,
    ) -> Result<&'i mut Buckets, FleetError> {
        let key = (kind.to_string(), resolution, start);
        if !items.items.contains_key(&key) {
            self.load_range(items, kind, resolution, start, start)
                .await?;
        }
        Ok(&mut items.items.get_mut(&key).expect("loaded").1)
    }

    /// The stored raw readings' 5-minute buckets of `wanted` (`(type, start)`), read with one
    /// consistent Query of the event partition per run of nearby buckets, expired events left
    /// out as readers leave them out.
    async fn raw_buckets(
        &self,
        wanted: &BTreeSet<(String, i64)>,
    ) -> Result<BTreeMap<String, Buckets>, FleetError> {
        let starts: BTreeSet<i64> = wanted.iter().map(|(_, s)| *s).collect();
        let types: BTreeSet<&str> = wanted.iter().map(|(t, _)| t.as_str()).collect();
        // Runs of buckets less than an hour apart are read together: a Query's page holds
        // hundreds of events, fewer requests than one per bucket.
        let mut runs: Vec<(i64, i64)> = Vec::new();
        let five = Resolution::FiveMinutes.millis();
        for start in starts {
            match runs.last_mut() {
                Some((_, end)) if start <= *end + Resolution::Hour.millis() => *end = start + five,
                _ => runs.push((start, start + five)),
            }
        }
        let pk = event_pk(&self.registration.user_id, &self.registration.device_id);
        let mut readings: BTreeMap<String, Vec<(i64, EventValue)>> = BTreeMap::new();
        for (from, to) in runs {
            let first = format!("{EVENT_PREFIX}{}", timestamp(from)?);
            let last = format!("{EVENT_PREFIX}{}#~", timestamp(to - 1)?);
            let mut start_key = None;
            loop {
                let read = crate::model::expression::Expressions::builder().condition(
                    crate::model::expression::Condition::above(EventItem::TTL, ttl_now()),
                );
                let request = key_range(self.table, pk.clone(), first.clone(), last.clone(), read)
                    .consistent_read(true)
                    .set_exclusive_start_key(start_key);
                let (page, next) = query(request).await?;
                for item in page {
                    if EntityType::of(&item) != Some(EntityType::Event) {
                        continue;
                    }
                    let event = EventItem::from_item(item)?;
                    if types.contains(event.event_type.as_str())
                        && stored_by(event.registered_at, self.stamp())
                    {
                        readings
                            .entry(event.event_type.to_string())
                            .or_default()
                            .push((event.at.epoch_millis(), event.value));
                    }
                }
                match next {
                    Some(key) => start_key = Some(key),
                    None => break,
                }
            }
        }
        Ok(readings
            .into_iter()
            .map(|(kind, values)| {
                let buckets = five_minute_buckets(values.iter().map(|(at, v)| (*at, v)));
                (kind, buckets)
            })
            .collect())
    }

    /// Recomputes the buckets `wanted` from the stored raw readings: an open bucket is
    /// replaced in `series`; a flushed one (late) in its block, and where its day is rolled, in
    /// the day's hour and the month's day.
    ///
    /// `counted`: what the state's open buckets count is stored or on its way (the ingest
    /// path; this batch's own readings that failed to store aside), so an open bucket is never
    /// replaced by one of fewer readings. A concurrent batch
    /// sends its events and its state update together: its state, counting its new readings,
    /// can commit before those events are stored. Fewer raw readings than counted means some
    /// are still in flight: the raw readings are read again after a pause (50 ms, doubling)
    /// for up to [`IN_FLIGHT_WAIT`] (within `counted`'s deadline). Readings still missing then
    /// were not stored (their batch was answered 503 and its repair did not land): the stored
    /// readings are the truth, as for a repair. Refusing the batch instead kept devices under
    /// heavy faults from ever getting their resends through (`faults::` tests).
    /// `None` (a repair of events that failed to store): the raw readings are the truth.
    pub(super) async fn recompute(
        &self,
        series: &mut SeriesState,
        latest: &BTreeMap<String, StoredReading>,
        wanted: &BTreeSet<(String, i64)>,
        items: &mut SeriesItems,
        counted: Option<&CountedCheck>,
    ) -> Result<(), FleetError> {
        if wanted.is_empty() {
            return Ok(());
        }
        let mut raw = self.raw_buckets(wanted).await?;
        if let Some(check) = counted {
            let give_up = check.deadline.min(Instant::now() + IN_FLIGHT_WAIT);
            let mut pause = Duration::from_millis(50);
            loop {
                let short = in_flight(series, wanted, &raw, &check.unstored);
                if short.is_empty() {
                    break;
                }
                if Instant::now() + pause > give_up {
                    // Still short: those readings' batch failed to store them (and its repair
                    // did not land), so the stored readings are the truth; the device resends
                    // what it was not answered 200 for, and that resend's recompute counts it.
                    tracing::warn!(
                        buckets = short.len(),
                        "summaries: counted readings not stored; recomputed from what is stored"
                    );
                    break;
                }
                tokio::time::sleep(pause).await;
                pause *= 2;
                raw = self.raw_buckets(wanted).await?;
            }
        }
        for (kind, start) in wanted {
            let exact = raw
                .get(kind)
                .and_then(|b| b.0.get(start))
                .cloned()
                .unwrap_or_default();
            // A type whose summaries started before this state had them (or whose state was
            // written before summaries) opens at its latest reading.
            let since = latest.get(kind).map_or(*start, |r| r.0.max(*start));
            let open = series
                .0
                .entry(kind.clone())
                .or_insert_with(|| OpenSeries::starting_at(since));
            if open.is_open(*start) {
                replace(&mut open.open, *start, exact);
                continue;
            }
            let rolled_before = open.rolled_before;
            let block = self
                .item(items, kind, Resolution::FiveMinutes, block_start(*start))
                .await?;
            replace(block, *start, exact);
            let hour = Resolution::Hour.bucket_start(*start);
            let hour_bucket = Buckets(
                block
                    .within(hour, hour + Resolution::Hour.millis())
                    .map(|(s, b)| (*s, b.clone()))
                    .collect(),
            )
            .coarsen(Resolution::Hour);
            let day = Resolution::Day.bucket_start(*start);
            if day < rolled_before {
                let hours = self.item(items, kind, Resolution::Hour, day).await?;
                replace(
                    hours,
                    hour,
                    hour_bucket.0.get(&hour).cloned().unwrap_or_default(),
                );
                let hours = hours.clone();
                self.set_day_total(items, kind, day, &hours).await?;
            }
        }
        Ok(())
    }

    /// Sets day `day`'s bucket in its month item to the total of its `hours` (the day item's).
    async fn set_day_total(
        &self,
        items: &mut SeriesItems,
        kind: &str,
        day: i64,
        hours: &Buckets,
    ) -> Result<(), FleetError> {
        let total = hours
            .coarsen(Resolution::Day)
            .0
            .remove(&day)
            .unwrap_or_default();
        let days = self
            .item(items, kind, Resolution::Day, month_start(day))
            .await?;
        replace(days, day, total);
        Ok(())
    }

    /// Writes the closed 5-minute buckets of every type out of `series` (those before the
    /// bucket of the type's newest reading, into their blocks) and rolls the days now wholly
    /// flushed into day and month items; the trail's hours follow from the merged blocks and
    /// the open buckets together.
    pub(super) async fn flush(
        &self,
        series: &mut SeriesState,
        latest: &BTreeMap<String, StoredReading>,
        items: &mut SeriesItems,
    ) -> Result<(), FleetError> {
        for (kind, open) in series.0.iter_mut() {
            let Some(newest) = latest.get(kind).map(|r| r.0) else {
                continue;
            };
            let current = Resolution::FiveMinutes.bucket_start(newest);
            if open.open.0.range(..current).next().is_none() {
                continue;
            }
            let closed = open.take_closed(current);
            let mut hours = BTreeSet::new();
            for (start, bucket) in &closed.0 {
                let block = self
                    .item(items, kind, Resolution::FiveMinutes, block_start(*start))
                    .await?;
                block.0.insert(*start, bucket.clone());
                hours.insert(Resolution::Hour.bucket_start(*start));
            }
            // An hour's buckets all lie in one block (blocks are two whole hours).
            let mut stored = Buckets::default();
            for hour in hours {
                let block = self
                    .item(items, kind, Resolution::FiveMinutes, block_start(hour))
                    .await?;
                for (start, bucket) in block.within(hour, hour + Resolution::Hour.millis()) {
                    stored.add(*start, bucket);
                }
            }
            open.update_trail(&stored);
            let days = open.take_days_to_roll();
            let (Some(first), Some(last)) = (days.first(), days.last()) else {
                continue;
            };
            let day_ms = Resolution::Day.millis();
            self.load_range(
                items,
                kind,
                Resolution::FiveMinutes,
                *first,
                last + day_ms - BLOCK_MS,
            )
            .await?;
            self.load_range(items, kind, Resolution::Hour, *first, *last)
                .await?;
            for day in days {
                let mut hours = Buckets::default();
                for ((k, resolution, start), (_, blocks)) in items.items.range(
                    (kind.clone(), Resolution::FiveMinutes, day)
                        ..(kind.clone(), Resolution::FiveMinutes, day + day_ms),
                ) {
                    debug_assert!(
                        k == kind && *resolution == Resolution::FiveMinutes && *start >= day
                    );
                    for (s, b) in &blocks.0 {
                        hours.add(Resolution::Hour.bucket_start(*s), b);
                    }
                }
                if hours.0.is_empty() {
                    continue;
                }
                self.set_day_total(items, kind, day, &hours).await?;
                *self.item(items, kind, Resolution::Hour, day).await? = hours;
            }
        }
        Ok(())
    }
}

/// The `wanted` open buckets whose `raw` recompute holds fewer readings than `series` counted,
/// `unstored` (the batch's own counted readings that failed to store) aside.
pub(super) fn in_flight(
    series: &SeriesState,
    wanted: &BTreeSet<(String, i64)>,
    raw: &BTreeMap<String, Buckets>,
    unstored: &BTreeMap<(String, i64), u64>,
) -> Vec<(String, i64)> {
    wanted
        .iter()
        .filter(|(kind, start)| {
            let Some(open) = series.0.get(kind).filter(|o| o.is_open(*start)) else {
                return false;
            };
            let counted = open.open.0.get(start).map_or(0, |b| b.count);
            let stored = raw
                .get(kind)
                .and_then(|b| b.0.get(start))
                .map_or(0, |b| b.count);
            let own = unstored.get(&(kind.clone(), *start)).copied().unwrap_or(0);
            stored + own < counted
        })
        .cloned()
        .collect()
}

/// `buckets` with the bucket at `start` replaced by `exact` (removed when it counts nothing).
fn replace(buckets: &mut Buckets, start: i64, exact: Bucket) {
    if exact.count == 0 {
        buckets.0.remove(&start);
    } else {
        buckets.0.insert(start, exact);
    }
}

/// The timestamp of `ms` (every bucket start is a valid time).
fn timestamp(ms: i64) -> Result<Timestamp, FleetError> {
    Timestamp::from_epoch_millis(ms)
        .ok_or_else(|| FleetError::internal(format!("no timestamp for {ms} ms")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ids::{EventId, EventType};

    fn event(id: &str, at_ms: i64, value: f64) -> NewEvent {
        NewEvent {
            id: EventId::parse(id).unwrap(),
            event_type: EventType::parse("power").unwrap(),
            value: EventValue::Number(value),
            at: Timestamp::from_epoch_millis(at_ms).unwrap(),
        }
    }

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    #[test]
    fn readings_newer_than_the_latest_count_and_others_are_recomputed() {
        let mut state: DeviceStateItem = serde_json::from_value(serde_json::json!({
            "status": "active", "name": "n", "type": "meter", "userId": "u", "deviceId": "d"
        }))
        .unwrap_or_else(|_| panic!("a minimal state"));
        state.latest.insert(
            "power".into(),
            StoredReading(T0 + 600_000, EventValue::Number(1.0)),
        );
        let batch = [
            event("a", T0 + 660_000, 2.0),
            event("b", T0 + 600_000, 1.0),
            event("c", T0 + 30_000, 3.0),
        ];
        let classified = classify(&state, &batch);
        assert_eq!(
            classified.new["power"],
            vec![(T0 + 660_000, EventValue::Number(2.0))]
        );
        assert_eq!(
            classified.recompute,
            BTreeSet::from([
                ("power".to_string(), T0 + 600_000),
                ("power".to_string(), T0)
            ])
        );
        let mut series = SeriesState::default();
        assert!(count_new(&mut series, &classified.new).is_empty());
        // Opened at the 5-minute bucket of the type's first counted reading.
        assert_eq!(series.0["power"].flushed_before, T0 + 600_000);
        assert_eq!(series.0["power"].open.0[&(T0 + 600_000)].count, 1);
    }

    #[test]
    fn an_open_bucket_with_fewer_stored_readings_than_counted_waits_for_them() {
        let mut open = OpenSeries::starting_at(T0);
        for i in 0..3 {
            open.record(T0 + i * 1000, &EventValue::Number(1.0));
        }
        let series = SeriesState([("power".to_string(), open)].into());
        let wanted = BTreeSet::from([("power".to_string(), T0)]);
        let stored = |n: i64| {
            let values: Vec<(i64, EventValue)> =
                (0..n).map(|i| (T0 + i, EventValue::Number(1.0))).collect();
            BTreeMap::from([(
                "power".to_string(),
                five_minute_buckets(values.iter().map(|(at, v)| (*at, v))),
            )])
        };
        let none = BTreeMap::new();
        assert_eq!(
            in_flight(&series, &wanted, &stored(2), &none),
            wanted.iter().cloned().collect::<Vec<_>>()
        );
        assert!(in_flight(&series, &wanted, &stored(3), &none).is_empty());
        assert!(in_flight(&series, &wanted, &stored(4), &none).is_empty());
        // The batch's own reading that failed to store is no reading in flight.
        let own = BTreeMap::from([(("power".to_string(), T0), 1)]);
        assert!(in_flight(&series, &wanted, &stored(2), &own).is_empty());
        // A flushed bucket is recomputed from raw as it is (late readings).
        let mut flushed = series.clone();
        flushed
            .0
            .get_mut("power")
            .unwrap()
            .take_closed(T0 + 300_000);
        assert!(in_flight(&flushed, &wanted, &stored(0), &none).is_empty());
    }

    #[test]
    fn items_expire_after_their_span_and_their_resolutions_retention() {
        let keep = SeriesRetention {
            raw_days: 90,
            hourly_days: 400,
            daily_days: 1826,
        };
        let day = 86_400;
        assert_eq!(
            keep.ttl(Resolution::FiveMinutes, T0),
            T0 / 1000 + 7200 + 90 * day
        );
        assert_eq!(keep.ttl(Resolution::Hour, T0), T0 / 1000 + day + 400 * day);
        // January has 31 days.
        assert_eq!(
            keep.ttl(Resolution::Day, T0),
            T0 / 1000 + 31 * day + 1826 * day
        );
    }
}
