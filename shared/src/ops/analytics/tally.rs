//! What a scan segment counts: users, devices, the day's events and the busiest partitions.

use crate::model::entities::device::DeviceItem;
use crate::model::expression::Attribute;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::schema::Item;
use crate::model::timestamp::{Day, Timestamp};

/// Devices listed in `topDevices`.
pub const TOP_DEVICES: usize = 10;
/// Partition keys listed in `partitionHeat`.
pub const HEAT_KEYS: usize = 10;

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
    /// People whose own fleet has a device that had an event in the 30 days before the day's
    /// end (organizations' fleets are counted apart, in `active_orgs`: `users` counts people).
    pub active_users: u64,
    /// Organizations whose fleet has such a device (absent from checkpoints written before
    /// it was counted apart: 0).
    #[serde(default)]
    pub active_orgs: u64,
    /// Live devices.
    pub devices: u64,
    /// Devices per status.
    pub devices_by_status: BTreeMap<String, u64>,
    /// Devices per type.
    pub devices_by_type: BTreeMap<String, u64>,
    /// Devices with an event during the day (never counting what came after it).
    pub online_24h: u64,
    /// The day's events (excluding purged ones).
    pub events: u64,
    /// The day's events per type.
    pub events_by_type: BTreeMap<String, u64>,
    /// The day's type-mark writes per GSI1 partition (`TYPE#{type}#{day}#{shard}`), one per
    /// device, searchable type and window: the index's heat where devices share partitions
    /// (a searchable event's own entry is under its device, as hot as its event partition).
    pub index_writes: BTreeMap<String, u64>,
    /// The busiest device partitions (closed ones), most writes first.
    pub top_partitions: Vec<PartitionCount>,
    /// The device partition being counted when the page ended.
    pub open_partition: Option<PartitionCount>,
    /// Unused since the run counts an owner's activity over its units (kept so checkpoints
    /// of an earlier build still read).
    #[serde(default, skip_serializing)]
    pub last_active_user: Option<String>,
    /// Events of deleted devices removed.
    pub purged: u64,
    /// Items read: directory entries, the owners' device and state items, and the day's events
    /// (never the rest of the history).
    pub scanned: u64,
    /// Checkpoint writes (one per `scan::UNITS_PER_CHECKPOINT` units of work at most, after
    /// every purge, and when an invocation stops).
    #[serde(default, alias = "pages")]
    pub checkpoint_writes: u64,
    /// Read capacity this segment consumed.
    pub read_units: f64,
    /// Write capacity of the purge (checkpoint writes are counted in `checkpoint_writes`).
    pub write_units: f64,
    /// DynamoDB requests issued.
    pub requests: u64,
    /// Time spent, milliseconds.
    pub duration_ms: u64,
}

impl SegmentTally {
    /// Adds `other`'s counts to this one (the run's duration is the longest segment's, as
    /// segments run in parallel). Partitions are ranked by the caller.
    pub(super) fn add(&mut self, other: &SegmentTally) {
        self.users += other.users;
        self.active_users += other.active_users;
        self.active_orgs += other.active_orgs;
        self.devices += other.devices;
        self.online_24h += other.online_24h;
        self.events += other.events;
        self.purged += other.purged;
        self.scanned += other.scanned;
        self.checkpoint_writes += other.checkpoint_writes;
        self.read_units += other.read_units;
        self.write_units += other.write_units;
        self.requests += other.requests;
        self.duration_ms = self.duration_ms.max(other.duration_ms);
        for (mine, theirs) in [
            (&mut self.devices_by_status, &other.devices_by_status),
            (&mut self.devices_by_type, &other.devices_by_type),
            (&mut self.events_by_type, &other.events_by_type),
            (&mut self.index_writes, &other.index_writes),
        ] {
            for (k, v) in theirs {
                *mine.entry(k.clone()).or_default() += v;
            }
        }
    }

    pub(super) fn close_partition(&mut self) {
        if let Some(done) = self.open_partition.take() {
            if done.writes > 0 {
                self.top_partitions.push(done);
                self.top_partitions
                    .sort_by(|a, b| b.writes.cmp(&a.writes).then(a.key.cmp(&b.key)));
                self.top_partitions.truncate(TOP_DEVICES.max(HEAT_KEYS));
            }
        }
    }

    /// Counts a live device item: by status and type.
    pub(super) fn count_device(&mut self, item: &Item) {
        self.devices += 1;
        let status = text(item, DeviceItem::STATUS)
            .unwrap_or("unknown")
            .to_string();
        *self.devices_by_status.entry(status).or_default() += 1;
        let kind = text(item, DeviceItem::DEVICE_TYPE)
            .unwrap_or("unknown")
            .to_string();
        *self.devices_by_type.entry(kind).or_default() += 1;
    }

    pub(super) fn count_event(
        &mut self,
        partition: &str,
        event_type: &str,
        index_key: Option<&str>,
    ) {
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

/// The time bounds of a report day: what was true of the day, whenever the run happens.
pub(super) struct PageBounds {
    /// Start of the day (inclusive).
    pub(super) from: Timestamp,
    /// End of the day (exclusive): nothing after it is counted.
    pub(super) to: Timestamp,
    /// A user with a device that had an event in [`active_since`, `to`) is active.
    pub(super) active_since: Timestamp,
    /// Events whose `ttl` is not after this have expired.
    pub(super) now: i64,
}

impl PageBounds {
    /// The bounds of `day`, with expiry judged at `now`.
    pub(super) fn for_day(day: &Day, now: &Timestamp) -> Self {
        let from = day.start();
        let to = from.plus_seconds(86_400);
        Self {
            from,
            to,
            active_since: to.plus_seconds(-30 * 86_400),
            now: now.epoch_seconds(),
        }
    }
}

pub(super) fn text(item: &Item, attribute: Attribute) -> Option<&str> {
    item.get(attribute.name())
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_counted_whole_and_ranked() {
        let day = crate::model::timestamp::Day::parse_field("day", "2024-04-10").unwrap();
        let temp = crate::model::ids::EventType::parse("temp").unwrap();
        let index_key = crate::model::entities::type_mark::type_gsi1pk(&temp, &day, 0);
        let mut t = SegmentTally::default();
        for (pk, n) in [("A", 3), ("B", 5), ("C", 1)] {
            for _ in 0..n {
                t.count_event(pk, "temp", Some(&index_key));
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
        assert_eq!(t.index_writes[&index_key], 9);
    }
}
