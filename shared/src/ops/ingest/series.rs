//! A batch's part in the device's summaries (issue 32, docs/design.md "13. Summaries"): its
//! stored readings counted into the live state's open buckets or, for a flushed bucket, into
//! its block (and its day's hour and month's day once the day is rolled), and the summary
//! items (5-minute blocks, day and month items) a batch writes, in the transaction of its
//! live-state update.
//!
//! Every 5-minute bucket records which readings it holds ([`BucketIds`], issue 38), so a
//! reading is added once whatever order it arrives in, and nothing is ever recomputed from the
//! raw readings: no summary shrinks when raw readings expire, are in flight or are half-copied.
//! Every summary item is written in a transaction with the state update conditioned on
//! `ingestSeq`, so a device's summary writes are serialized by its state ("check the set, then
//! add" is race-free), and read-modify-write of an item needs no version of its own.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::{KeysAndAttributes, Put, TransactWriteItem};

use super::validate::NewEvent;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::event::{registration_stamp, stored_by};
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::series::SeriesItem;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::FleetError;
use crate::model::ids::{DeviceId, EventType, UserId};
use crate::model::readings::StoredReading;
use crate::model::series::{
    block_start, month_start, BucketIds, Buckets, OpenSeries, Resolution, SeriesState, BLOCK_MS,
};
use crate::model::timestamp::Timestamp;
use crate::store::dynamo::{delete_action, get_all};
use crate::store::retry::Retry;
use crate::store::table::FleetTable;

/// How long the summary items of each resolution are kept: the 5-minute blocks as long as the
/// raw readings, hours and days longer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesRetention {
    /// Days after its block ends that a 5-minute block is kept: the window readings are
    /// accepted in (`RETENTION_DAYS`), never a type's shorter `rawDays`, because a block's
    /// reading identities must outlive every reading that may still arrive for it (issue 38
    /// item 1: a late reading is added once, never recomputed from expired raw readings).
    pub block_days: u32,
    /// Days after its day ends that a day item (hourly buckets) is kept.
    pub hourly_days: u32,
    /// Days after its month ends that a month item (daily buckets) is kept.
    pub daily_days: u32,
}

/// How long after a day ends the scheduled worker rolls the devices silent since before it
/// (AP-30): longer than a `SEEN#` bucket (15 minutes) and a usual reporting interval, so a
/// device still reporting has moved its entry into the new day and is not read at all (the
/// walk never touches the whole fleet at midnight).
pub const ROLL_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Fewest days a 5-minute block is kept after it ends, whatever `RETENTION_DAYS` says (it may
/// be 1): a block must outlive the roll of its day, which for a device gone silent the worker
/// does [`ROLL_GRACE`] after the day ends, in a walk that may span runs (issue 38 item 6).
/// Three days leave two for the walk and for runs that fail.
pub const MIN_BLOCK_DAYS: u32 = 3;

impl SeriesRetention {
    /// The expiry (epoch seconds) of an item of `resolution` starting at `start_ms`.
    fn ttl(&self, resolution: Resolution, start_ms: i64) -> i64 {
        let (end_ms, days) = match resolution {
            Resolution::FiveMinutes => (start_ms + BLOCK_MS, self.block_days.max(MIN_BLOCK_DAYS)),
            Resolution::Hour => (start_ms + Resolution::Day.millis(), self.hourly_days),
            Resolution::Day => (
                month_start(start_ms + 32 * Resolution::Day.millis()),
                self.daily_days,
            ),
        };
        end_ms.div_euclid(1000) + i64::from(days) * 86_400
    }
}

/// Counts `events` (stored: their raw events are written) into `series`, opening a type's
/// summaries at its earliest reading of the batch when the state has none: a reading of an
/// open bucket into the state; see [`SeriesStore::count`] for the others.
pub(super) fn open_types(series: &mut SeriesState, events: &[NewEvent]) {
    let mut firsts: BTreeMap<&str, i64> = BTreeMap::new();
    for e in events {
        let at = e.at.epoch_millis();
        let first = firsts.entry(e.event_type.as_str()).or_insert(at);
        *first = (*first).min(at);
    }
    for (kind, first) in firsts {
        series
            .0
            .entry(kind.to_string())
            .or_insert_with(|| OpenSeries::starting_at(first));
    }
}

/// One summary item's content: its buckets and, for a block, which readings they hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Stored {
    pub(super) buckets: Buckets,
    pub(super) ids: BucketIds,
}

/// The summary items one attempt reads and rewrites, loaded at most once each.
#[derive(Clone, Default)]
pub(super) struct SeriesItems {
    /// By (type, resolution, start): the item as loaded (`None`: no item) and as it will be.
    items: BTreeMap<(String, Resolution, i64), (Option<Stored>, Stored)>,
}

impl SeriesItems {
    /// The items that change, as transaction actions: a put, or a delete of an item left
    /// with no bucket.
    pub(super) fn actions(
        &self,
        table: &FleetTable,
        owner: &SeriesOwner,
        retention: SeriesRetention,
    ) -> Result<Vec<TransactWriteItem>, FleetError> {
        let mut actions = Vec::new();
        for ((kind, resolution, start), (loaded, now)) in &self.items {
            if loaded.as_ref() == Some(now) || (loaded.is_none() && now.buckets.0.is_empty()) {
                continue;
            }
            let item = SeriesItem {
                user_id: owner.user_id.clone(),
                device_id: owner.device_id.clone(),
                event_type: EventType::parse(kind).map_err(|e| FleetError::internal(e.reason))?,
                resolution: *resolution,
                start: timestamp(*start)?,
                buckets: now.buckets.clone(),
                ids: now.ids.clone(),
                ttl: retention.ttl(*resolution, *start),
                registered_at: Some(owner.stamp),
            };
            if now.buckets.0.is_empty() {
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
                loaded.as_ref() != Some(now) && !(loaded.is_none() && now.buckets.0.is_empty())
            })
            .count()
    }

    /// The newest 5-minute block of each type as this attempt leaves it, taken as loaded: what
    /// a warm ingestor keeps for the device's next batch, whose flush then needs no read while
    /// the state's `ingestSeq` shows nobody wrote since (every summary write moves it).
    pub(super) fn newest_blocks(&self) -> SeriesItems {
        let mut newest: BTreeMap<&str, (&(String, Resolution, i64), &Stored)> = BTreeMap::new();
        for (key, (_, now)) in &self.items {
            if key.1 == Resolution::FiveMinutes {
                newest.insert(key.0.as_str(), (key, now));
            }
        }
        SeriesItems {
            items: newest
                .into_values()
                .map(|(key, now)| {
                    let loaded = (!now.buckets.0.is_empty()).then(|| now.clone());
                    (key.clone(), (loaded, now.clone()))
                })
                .collect(),
        }
    }

    fn loaded(&mut self, key: (String, Resolution, i64), found: Option<Stored>) {
        self.items.entry(key).or_insert_with(|| {
            let now = found.clone().unwrap_or_default();
            (found, now)
        });
    }
}

/// Whose summary items: the device's owner key, the device, and the stamp of its
/// registration (its items' `reg`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SeriesOwner {
    pub(super) user_id: UserId,
    pub(super) device_id: DeviceId,
    pub(super) stamp: i64,
    /// The previous owner while a move copies the device's history (the live state's
    /// `movingFrom`): a summary item this owner has no copy of yet is read from there.
    pub(super) moving_from: Option<UserId>,
}

impl SeriesOwner {
    /// The owner of a registered device's summaries, its live state `state`.
    pub(super) fn of(registration: &RegistrationItem, state: &DeviceStateItem) -> Self {
        Self {
            user_id: registration.user_id.clone(),
            device_id: registration.device_id.clone(),
            stamp: registration_stamp(&registration.created_at),
            moving_from: state.moving_from.clone(),
        }
    }
}

/// Reads and writes summaries for one device: its summary items.
pub(super) struct SeriesStore<'a> {
    pub(super) table: &'a FleetTable,
    pub(super) owner: SeriesOwner,
}

impl SeriesStore<'_> {
    /// The stamp of the registration this store writes for (its items' `reg`).
    fn stamp(&self) -> i64 {
        self.owner.stamp
    }

    /// The items `wanted` that are not loaded yet, with one consistent BatchGetItem per 100
    /// (a late reading's block, day and month items: O(1) requests per batch whatever the
    /// readings' order). While a move copies the device's history, an item this owner has no
    /// copy of yet is read from the previous owner (one more BatchGetItem, only during a move):
    /// this owner's item then starts from it, and the copy, finding this owner's item, keeps it
    /// (issue 38 item 4: a late reading never starts a bucket over).
    async fn load_keys(
        &self,
        items: &mut SeriesItems,
        wanted: &BTreeSet<(String, Resolution, i64)>,
    ) -> Result<(), FleetError> {
        let missing: Vec<(String, Resolution, i64)> = wanted
            .iter()
            .filter(|k| !items.items.contains_key(*k))
            .cloned()
            .collect();
        let mut found = self.read_items(&self.owner.user_id, &missing).await?;
        if let Some(previous) = &self.owner.moving_from {
            let not_copied: Vec<(String, Resolution, i64)> = missing
                .iter()
                .filter(|k| !found.contains_key(*k))
                .cloned()
                .collect();
            found.extend(self.read_items(previous, &not_copied).await?);
        }
        for key in missing {
            let stored = found.remove(&key);
            items.loaded(key, stored);
        }
        Ok(())
    }

    /// The summary items `keys` of this device under `user` that this registration wrote, read
    /// consistently (one BatchGetItem per 100).
    async fn read_items(
        &self,
        user: &UserId,
        keys: &[(String, Resolution, i64)],
    ) -> Result<BTreeMap<(String, Resolution, i64), Stored>, FleetError> {
        let mut found = BTreeMap::new();
        for chunk in keys.chunks(100) {
            let keys = chunk
                .iter()
                .map(|(kind, resolution, start)| {
                    Ok(ItemKey::Series {
                        user: user.clone(),
                        device: self.owner.device_id.clone(),
                        event_type: EventType::parse(kind)
                            .map_err(|e| FleetError::internal(e.reason))?,
                        resolution: *resolution,
                        start: timestamp(*start)?,
                    }
                    .attributes())
                })
                .collect::<Result<Vec<_>, FleetError>>()?;
            let request = KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(FleetError::internal)?;
            let mut retry = Retry::attempts(crate::store::table::MAX_ATTEMPTS);
            for item in get_all(self.table, request, &mut retry).await? {
                if EntityType::of(&item) == Some(EntityType::Series) {
                    let item = SeriesItem::from_item(item)?;
                    // Another registration's item under the same id (a deleted device's,
                    // left for the purge) is absent to this one: replaced, never merged.
                    if !stored_by(item.registered_at, self.stamp()) {
                        continue;
                    }
                    found.insert(
                        (
                            item.event_type.to_string(),
                            item.resolution,
                            item.start.epoch_millis(),
                        ),
                        Stored {
                            buckets: item.buckets,
                            ids: item.ids,
                        },
                    );
                }
            }
        }
        Ok(found)
    }

    /// One item, loaded (consistently) when not loaded yet.
    async fn item<'i>(
        &self,
        items: &'i mut SeriesItems,
        kind: &str,
        resolution: Resolution,
        start: i64,
    ) -> Result<&'i mut Stored, FleetError> {
        let key = (kind.to_string(), resolution, start);
        if !items.items.contains_key(&key) {
            self.load_keys(items, &BTreeSet::from([key.clone()]))
                .await?;
        }
        Ok(&mut items.items.get_mut(&key).expect("loaded").1)
    }

    /// Counts the stored readings `events` once each: a reading of an open bucket into the
    /// state (its bucket's identities decide whether it is new), one of a flushed bucket into
    /// its block (the block's identities decide), and when its day is rolled, additively into
    /// the day's hour and the month's day as well (exact sums merge in any order). The items
    /// are read with one consistent BatchGetItem; nothing is recomputed from raw readings, so
    /// nothing shrinks when they expire, are in flight or are still being copied. At most
    /// `room` items change; false when readings were left for another round (a backlog spread
    /// over more items than a transaction holds).
    pub(super) async fn count(
        &self,
        series: &mut SeriesState,
        events: &[NewEvent],
        items: &mut SeriesItems,
        room: usize,
    ) -> Result<bool, FleetError> {
        open_types(series, events);
        let mut wanted = BTreeSet::new();
        for e in events {
            let (kind, at) = (e.event_type.as_str(), e.at.epoch_millis());
            let open = &series.0[kind];
            if open.is_open(at) {
                continue;
            }
            wanted.insert((kind.to_string(), Resolution::FiveMinutes, block_start(at)));
            let day = Resolution::Day.bucket_start(at);
            if day < open.rolled_before {
                wanted.insert((kind.to_string(), Resolution::Hour, day));
                wanted.insert((kind.to_string(), Resolution::Day, month_start(day)));
            }
        }
        self.load_keys(items, &wanted).await?;
        let mut touched: BTreeSet<(String, Resolution, i64)> = BTreeSet::new();
        let mut complete = true;
        for e in events {
            let (kind, at, id) = (e.event_type.as_str(), e.at.epoch_millis(), e.id.as_str());
            let open = series.0.get_mut(kind).expect("opened above");
            if open.is_open(at) {
                open.record_once(at, id, &e.value);
                continue;
            }
            let rolled_before = open.rolled_before;
            let block_key = (kind.to_string(), Resolution::FiveMinutes, block_start(at));
            let first_block = block_key.2 == block_start(open.flushed_before);
            if self
                .item(items, kind, Resolution::FiveMinutes, block_key.2)
                .await?
                .ids
                .contains(at, id)
            {
                continue;
            }
            // A reading's block, hour and day change together, in one transaction: a reading
            // whose items do not fit this one waits for the next round.
            let day = Resolution::Day.bucket_start(at);
            let mut keys = vec![block_key];
            if day < rolled_before {
                keys.push((kind.to_string(), Resolution::Hour, day));
                keys.push((kind.to_string(), Resolution::Day, month_start(day)));
            }
            let more = keys.iter().filter(|k| !touched.contains(*k)).count();
            if touched.len() + more > room {
                complete = false;
                continue;
            }
            touched.extend(keys);
            if first_block {
                open.first_block_written = true;
            }
            let block = self
                .item(items, kind, Resolution::FiveMinutes, block_start(at))
                .await?;
            block.ids.insert(at, id);
            block
                .buckets
                .0
                .entry(Resolution::FiveMinutes.bucket_start(at))
                .or_default()
                .record(&e.value);
            if day < rolled_before {
                let hours = self.item(items, kind, Resolution::Hour, day).await?;
                hours
                    .buckets
                    .0
                    .entry(Resolution::Hour.bucket_start(at))
                    .or_default()
                    .record(&e.value);
                let days = self
                    .item(items, kind, Resolution::Day, month_start(day))
                    .await?;
                days.buckets.0.entry(day).or_default().record(&e.value);
            }
        }
        Ok(complete)
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
        if total.count == 0 {
            days.buckets.0.remove(&day);
        } else {
            days.buckets.0.insert(day, total);
        }
        Ok(())
    }

    /// Writes the closed 5-minute buckets of every type out of `series` (those before the
    /// bucket of the type's newest reading, into their blocks, with their reading identities)
    /// and rolls the days now wholly flushed into day and month items; the trail's hours follow
    /// from the merged blocks and the open buckets together.
    pub(super) async fn flush(
        &self,
        series: &mut SeriesState,
        latest: &BTreeMap<String, StoredReading>,
        items: &mut SeriesItems,
    ) -> Result<(), FleetError> {
        // A flush runs when the state is over one write unit: every bucket before the device's
        // newest 5-minute bucket goes, whatever its type, so a type gone silent (or reporting
        // late) does not keep the state over the unit on every write.
        let Some(device_newest) = latest.values().map(|r| r.0).max() else {
            return Ok(());
        };
        let current = Resolution::FiveMinutes.bucket_start(device_newest);
        self.flush_before(series, current, |kind| latest.contains_key(kind), items)
            .await
    }

    /// Writes the 5-minute buckets before `current` of every type `flushes` takes out of
    /// `series` into their blocks and rolls the days now wholly flushed: a batch's flush
    /// ([`Self::flush`]) and the worker's roll of a device gone silent (`current` the start of
    /// a day that has begun).
    pub(super) async fn flush_before(
        &self,
        series: &mut SeriesState,
        current: i64,
        flushes: impl Fn(&str) -> bool,
        items: &mut SeriesItems,
    ) -> Result<(), FleetError> {
        // Every type's closed buckets first, so the blocks they go into are read with one
        // BatchGetItem for all types (a chain of one, not one read per type).
        let mut flushes_now = Vec::new();
        let mut blocks = BTreeSet::new();
        for (kind, open) in series.0.iter_mut() {
            if !flushes(kind) {
                continue;
            }
            if open.open.0.range(..current).next().is_none() {
                continue;
            }
            // A block after the one `flushed_before` falls in holds nothing yet: only a flush
            // writes past `flushed_before` (late readings are before it), and it moves it on.
            // That one block is read only when something was written to it (and not when this
            // ingestor wrote it last).
            let first_block = block_start(open.flushed_before);
            let first_written = open.first_block_written;
            let (closed, ids) = open.take_closed_with_ids(current);
            for start in closed.0.keys() {
                let key = (kind.clone(), Resolution::FiveMinutes, block_start(*start));
                if key.2 > first_block || !first_written {
                    items.loaded(key, None);
                } else {
                    blocks.insert(key);
                }
            }
            let now_first = block_start(open.flushed_before);
            open.first_block_written = (now_first == first_block && first_written)
                || closed.0.keys().any(|s| block_start(*s) == now_first);
            flushes_now.push((kind.clone(), closed, ids));
        }
        self.load_keys(items, &blocks).await?;
        // Then each type's buckets into their blocks, its trail, and the days it may roll: the
        // days' blocks and day items of every type, one consistent BatchGetItem per 100 keys.
        let day_ms = Resolution::Day.millis();
        let mut rolls = Vec::new();
        let mut keys = BTreeSet::new();
        for (kind, closed, mut ids) in flushes_now {
            let open = series.0.get_mut(&kind).expect("a type being flushed");
            let mut hours = BTreeSet::new();
            for (start, bucket) in &closed.0 {
                let block = self
                    .item(items, &kind, Resolution::FiveMinutes, block_start(*start))
                    .await?;
                // Only the state held this bucket while it was open: the block has none of it.
                block.buckets.0.insert(*start, bucket.clone());
                if let Some(set) = ids.0.remove(start) {
                    block.ids.0.insert(*start, set);
                }
                hours.insert(Resolution::Hour.bucket_start(*start));
            }
            // An hour's buckets all lie in one block (blocks are two whole hours).
            let mut stored = Buckets::default();
            for hour in hours {
                let block = self
                    .item(items, &kind, Resolution::FiveMinutes, block_start(hour))
                    .await?;
                for (start, bucket) in block.buckets.within(hour, hour + Resolution::Hour.millis())
                {
                    stored.add(*start, bucket);
                }
            }
            open.update_trail(&stored);
            let days = open.take_days_to_roll();
            if days.is_empty() {
                continue;
            }
            for day in &days {
                keys.insert((kind.clone(), Resolution::Hour, *day));
                keys.insert((kind.clone(), Resolution::Day, month_start(*day)));
                for block in (*day..day + day_ms).step_by(BLOCK_MS as usize) {
                    keys.insert((kind.clone(), Resolution::FiveMinutes, block));
                }
            }
            rolls.push((kind, days));
        }
        self.load_keys(items, &keys).await?;
        for (kind, days) in rolls {
            let kind = &kind;
            for day in days {
                let mut hours = Buckets::default();
                for ((k, resolution, start), (_, blocks)) in items.items.range(
                    (kind.clone(), Resolution::FiveMinutes, day)
                        ..(kind.clone(), Resolution::FiveMinutes, day + day_ms),
                ) {
                    debug_assert!(
                        k == kind && *resolution == Resolution::FiveMinutes && *start >= day
                    );
                    for (s, b) in &blocks.buckets.0 {
                        hours.add(Resolution::Hour.bucket_start(*s), b);
                    }
                }
                if hours.0.is_empty() {
                    continue;
                }
                self.set_day_total(items, kind, day, &hours).await?;
                self.item(items, kind, Resolution::Hour, day).await?.buckets = hours;
            }
        }
        Ok(())
    }
}

/// The timestamp of `ms` (every bucket start is a valid time).
pub(super) fn timestamp(ms: i64) -> Result<Timestamp, FleetError> {
    Timestamp::from_epoch_millis(ms)
        .ok_or_else(|| FleetError::internal(format!("no timestamp for {ms} ms")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ids::{EventId, EventType};
    use crate::model::readings::EventValue;

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
    fn a_type_opens_at_its_earliest_reading_and_a_reading_counts_once() {
        let batch = [event("a", T0 + 660_000, 2.0), event("c", T0 + 30_000, 3.0)];
        let mut series = SeriesState::default();
        open_types(&mut series, &batch);
        assert_eq!(series.0["power"].flushed_before, T0);
        let open = series.0.get_mut("power").unwrap();
        for e in batch.iter().chain(batch.iter()) {
            open.record_once(e.at.epoch_millis(), e.id.as_str(), &e.value);
        }
        assert_eq!(open.open.0[&T0].count, 1);
        assert_eq!(open.open.0[&(T0 + 600_000)].count, 1);
    }

    #[test]
    fn items_expire_after_their_span_and_their_resolutions_retention() {
        let keep = SeriesRetention {
            block_days: 90,
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

    #[test]
    fn a_block_outlives_the_roll_of_its_day_whatever_the_retention() {
        let short = SeriesRetention {
            block_days: 1,
            hourly_days: 400,
            daily_days: 1826,
        };
        // The first block of a day ends earliest; the worker rolls the day ROLL_GRACE after
        // the day ends, and its walk may take the next runs: a day more at the least.
        let rolled_by = T0 / 1000 + 86_400 + ROLL_GRACE.as_secs() as i64 + 86_400;
        assert!(short.ttl(Resolution::FiveMinutes, T0) > rolled_by);
    }
}
