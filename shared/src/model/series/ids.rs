//! Which readings a 5-minute bucket holds (issue 38): per bucket, the set of its readings'
//! identities, so a reading is counted into its bucket once however often it arrives and in
//! whatever order, without reading the raw readings back.
//!
//! A reading's identity is what its raw event's key dedupes on, `(type, at, event id)`: the
//! set belongs to one type's bucket, and holds per reading its millisecond offset inside the
//! bucket and a 16-bit tag of its event id (`offset << 16 | tag`, the tag the low 16 bits of
//! the id's xxh3). Sorted and delta-encoded as varints (postcard), a reading a minute after the
//! previous one costs 5 bytes, one a millisecond after 3.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::model::error::FleetError;
use crate::model::series::resolution::{Resolution, FIVE_MINUTES_MS};

/// Per 5-minute bucket start, the identities of the readings counted in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketIds(pub BTreeMap<i64, BTreeSet<u64>>);

/// A reading's identity inside its 5-minute bucket: `(bucket start, offset << 16 | tag)`.
pub fn reading_id(at_ms: i64, event_id: &str) -> (i64, u64) {
    let bucket = Resolution::FiveMinutes.bucket_start(at_ms);
    let offset = (at_ms - bucket) as u64;
    (
        bucket,
        offset << 16 | (xxh3_64(event_id.as_bytes()) & 0xFFFF),
    )
}

#[derive(Serialize, Deserialize)]
struct StoredBucketIds(Vec<(u32, Vec<u64>)>);

impl BucketIds {
    /// Adds the reading at `at_ms` with `event_id`; false when its bucket already holds it.
    pub fn insert(&mut self, at_ms: i64, event_id: &str) -> bool {
        let (bucket, id) = reading_id(at_ms, event_id);
        self.0.entry(bucket).or_default().insert(id)
    }

    /// Whether the reading at `at_ms` with `event_id` is counted.
    pub fn contains(&self, at_ms: i64, event_id: &str) -> bool {
        let (bucket, id) = reading_id(at_ms, event_id);
        self.0.get(&bucket).is_some_and(|ids| ids.contains(&id))
    }

    /// The sets of the buckets before `before`, taken out.
    pub fn take_before(&mut self, before: i64) -> BucketIds {
        let kept = self.0.split_off(&before);
        BucketIds(std::mem::replace(&mut self.0, kept))
    }

    /// The compact form, bucket starts as 5-minute periods after `origin` (a block's or the
    /// open part's start): postcard `Vec<(u32, Vec<u64>)>`, each set as its first identity
    /// and then the differences.
    pub fn encode(&self, origin: i64) -> Vec<u8> {
        let stored = StoredBucketIds(
            self.0
                .iter()
                .filter(|(_, ids)| !ids.is_empty())
                .map(|(start, ids)| {
                    let mut previous = 0;
                    let deltas = ids
                        .iter()
                        .map(|id| {
                            let delta = id - previous;
                            previous = *id;
                            delta
                        })
                        .collect();
                    (((start - origin) / FIVE_MINUTES_MS) as u32, deltas)
                })
                .collect(),
        );
        postcard::to_allocvec(&stored).expect("ids encode into memory")
    }

    /// The sets `bytes` hold ([`BucketIds::encode`] with the same `origin`).
    pub fn decode(bytes: &[u8], origin: i64) -> Result<Self, FleetError> {
        let StoredBucketIds(stored) = postcard::from_bytes(bytes)
            .map_err(|e| FleetError::internal(format!("unreadable reading ids: {e}")))?;
        let mut sets = BTreeMap::new();
        for (index, deltas) in stored {
            let mut id = 0u64;
            let set: BTreeSet<u64> = deltas
                .into_iter()
                .map(|d| {
                    id += d;
                    id
                })
                .collect();
            sets.insert(origin + i64::from(index) * FIVE_MINUTES_MS, set);
        }
        Ok(Self(sets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_767_225_600_000;

    #[test]
    fn a_reading_is_new_once_and_the_sets_round_trip() {
        let mut ids = BucketIds::default();
        assert!(ids.insert(T0 + 5, "a"));
        assert!(!ids.insert(T0 + 5, "a"), "the same reading again");
        assert!(ids.insert(T0 + 5, "b"), "another event at the same time");
        assert!(ids.insert(T0 + 300_000, "a"));
        assert!(ids.contains(T0 + 5, "b") && !ids.contains(T0 + 6, "b"));
        let bytes = ids.encode(T0);
        assert_eq!(BucketIds::decode(&bytes, T0).unwrap(), ids);
        let before = ids.take_before(T0 + 300_000);
        assert_eq!(before.0.len(), 1);
        assert_eq!(ids.0.len(), 1);
    }

    #[test]
    fn readings_a_millisecond_apart_cost_about_three_bytes() {
        let mut ids = BucketIds::default();
        for i in 0..100 {
            ids.insert(T0 + i, &format!("e{i}"));
        }
        let bytes = ids.encode(T0).len();
        assert!(bytes <= 100 * 3 + 8, "{bytes} bytes");
    }
}
