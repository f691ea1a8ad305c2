//! Write sharding for low-cardinality index keys (event type, device status, event owner).
//!
//! The shard is a stable hash of an id modulo a configured count, so the same id always lands
//! on the same shard across processes, releases and machines (Rust's `DefaultHasher` is not
//! stable across releases, so it is not used). Readers scatter-gather over `0..count`.

use xxhash_rust::xxh3::xxh3_64;

use crate::model::error::FleetError;
use crate::model::ids::EventType;
use crate::model::status::DeviceStatus;

/// The shard (`0..count`) of `id`. A `count` of 0 is treated as 1.
pub fn shard_of(id: &str, count: u16) -> u16 {
    let count = u64::from(count.max(1));
    (xxh3_64(id.as_bytes()) % count) as u16
}

/// The fewest shards that keep each index partition under DynamoDB's 1,000 WCU per-partition
/// limit with 2x headroom (docs/key-distribution.md: cardinality >= 2 x peak WCU / 1000).
pub fn shards_for_peak_wcu(peak_wcu: u32) -> u16 {
    let needed = (u64::from(peak_wcu) * 2).div_ceil(1000);
    needed.clamp(1, u64::from(u16::MAX)) as u16
}

/// How the write-sharded index keys spread. Writers and readers must agree, so these are set
/// once for the whole stack (template `Globals`), each sized with
/// [`crate::model::shard::shards_for_peak_wcu`] for its own key: one global count would be too small
/// for the busiest key and a needless fan-out for the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardCounts {
    /// `STATUS_SHARDS`: shards of `STATUS#{status}#{shard}` (devices by status) for every
    /// status but `active`.
    pub status: u16,
    /// `ACTIVE_STATUS_SHARDS`: shards of `STATUS#active#{shard}`, where nearly every device of
    /// a fleet sits and where the `SEEN#` entries move.
    pub active_status: u16,
    /// `EVENT_TYPE_SHARDS`: shards of `TYPE#{type}#{day}#{shard}` for a searchable type listed
    /// without its own count.
    pub event_type: u16,
    /// `SEARCHABLE_EVENT_TYPES` (`alarm,error:16`): the event types operators search (AP-09),
    /// each with its shard count. Only events of these types are copied into GSI1; every
    /// other event is one item and one write unit.
    pub searchable: Vec<(EventType, u16)>,
}

/// Default of `SEARCHABLE_EVENT_TYPES`: the types an operator looks for across fleets.
pub const DEFAULT_SEARCHABLE_EVENT_TYPES: &str = "alarm,error,fault";

impl Default for ShardCounts {
    fn default() -> Self {
        let event_type = 8;
        Self {
            status: 4,
            active_status: 64,
            event_type,
            searchable: parse_searchable(DEFAULT_SEARCHABLE_EVENT_TYPES, event_type)
                .expect("the default parses"),
        }
    }
}

impl ShardCounts {
    /// Shards of `STATUS#{status}#{shard}`.
    pub fn status_shards(&self, status: DeviceStatus) -> u16 {
        match status {
            DeviceStatus::Active => self.active_status,
            _ => self.status,
        }
    }

    /// Shards of `TYPE#{type}#...` when `event_type` is searchable; `None` when its events are
    /// not indexed.
    pub fn type_shards(&self, event_type: &EventType) -> Option<u16> {
        self.searchable
            .iter()
            .find(|(t, _)| t == event_type)
            .map(|(_, n)| *n)
    }
}

/// Parses `SEARCHABLE_EVENT_TYPES`: comma-separated types, each optionally `:shards`.
pub fn parse_searchable(
    text: &str,
    default_shards: u16,
) -> Result<Vec<(EventType, u16)>, FleetError> {
    let bad = |why: String| FleetError::Internal(format!("SEARCHABLE_EVENT_TYPES={text:?}: {why}"));
    let mut types: Vec<(EventType, u16)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, shards) = match entry.split_once(':') {
            Some((name, count)) => match count.trim().parse::<u16>() {
                Ok(n) if (1..=1000).contains(&n) => (name.trim(), n),
                _ => return Err(bad(format!("{count:?} is not a shard count in 1..=1000"))),
            },
            None => (entry, default_shards),
        };
        let event_type = EventType::parse(name).map_err(|e| bad(e.to_string()))?;
        if types.iter().any(|(t, _)| *t == event_type) {
            return Err(bad(format!("{name} is listed twice")));
        }
        types.push((event_type, shards));
    }
    Ok(types)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_stable_across_builds() {
        // Pinned values: if these change, every sharded index key in existing tables would move.
        assert_eq!(shard_of("thermo-1", 16), shard_of("thermo-1", 16));
        let pinned: Vec<u16> = ["thermo-1", "door-7", "a", "device-0042"]
            .iter()
            .map(|id| shard_of(id, 1000))
            .collect();
        assert_eq!(pinned, PINNED);
    }

    // xxh3 is a fixed specification: these values were cross-checked with the Python
    // `xxhash` package (xxh3_64_intdigest % 1000) and hold on every platform and release.
    const PINNED: [u16; 4] = [966, 880, 719, 270];

    #[test]
    fn stays_in_range_and_spreads_evenly() {
        let count = 8;
        let mut hits = [0u32; 8];
        for i in 0..8000 {
            let s = shard_of(&format!("device-{i}"), count);
            assert!(s < count);
            hits[usize::from(s)] += 1;
        }
        // Each shard within 15% of the mean of 1000.
        for h in hits {
            assert!((850..=1150).contains(&h), "{hits:?}");
        }
        assert_eq!(shard_of("x", 0), 0);
        assert_eq!(shard_of("x", 1), 0);
    }

    #[test]
    fn shard_count_follows_the_seed_rule() {
        assert_eq!(shards_for_peak_wcu(0), 1);
        assert_eq!(shards_for_peak_wcu(500), 1);
        assert_eq!(shards_for_peak_wcu(501), 2);
        assert_eq!(shards_for_peak_wcu(10_000), 20);
    }
}
