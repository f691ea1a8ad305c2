//! Which readings a 5-minute bucket holds (issue 38): per bucket, the set of its readings'
//! identities, so a reading is counted into its bucket once however often it arrives and in
//! whatever order, without reading the raw readings back.
//!
//! A reading's identity is what its raw event's key dedupes on, `(type, at, event id)`: the
//! set belongs to one type's bucket, and holds per reading its millisecond offset inside the
//! bucket and a 16-bit tag of its event id (`offset << 16 | tag`, the tag the low 16 bits of
//! the id's xxh3). Sorted and delta-encoded ([`BucketIds::encode`]), a reading whole seconds
//! after the previous one costs 3 bytes, one a millisecond after 3.

use std::collections::{BTreeMap, BTreeSet};

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
    /// open part's start): the number of sets, then per set its period, its size and per
    /// reading (in order) the offset after the previous one's and the 16-bit tag. An offset
    /// difference of whole seconds is stored as `seconds << 1` (a reading a minute after the
    /// previous one costs 1 byte, not 3), any other as `ms << 1 | 1`; the tag as 2 bytes.
    /// Varints are LEB128 as postcard writes them.
    pub fn encode(&self, origin: i64) -> Vec<u8> {
        let kept: Vec<_> = self.0.iter().filter(|(_, ids)| !ids.is_empty()).collect();
        let mut out = Vec::new();
        put_varint(&mut out, kept.len() as u64);
        for (start, ids) in kept {
            put_varint(&mut out, ((start - origin) / FIVE_MINUTES_MS) as u64);
            put_varint(&mut out, ids.len() as u64);
            let mut previous = 0u64;
            for id in ids {
                let offset = id >> 16;
                let step = offset - previous;
                previous = offset;
                put_varint(
                    &mut out,
                    if step.is_multiple_of(1000) {
                        (step / 1000) << 1
                    } else {
                        step << 1 | 1
                    },
                );
                out.extend_from_slice(&((id & 0xFFFF) as u16).to_le_bytes());
            }
        }
        out
    }

    /// The sets `bytes` hold ([`BucketIds::encode`] with the same `origin`).
    pub fn decode(bytes: &[u8], origin: i64) -> Result<Self, FleetError> {
        let unreadable = || FleetError::internal("unreadable reading ids");
        let mut rest = bytes;
        let mut sets = BTreeMap::new();
        for _ in 0..take_varint(&mut rest).ok_or_else(unreadable)? {
            let index = take_varint(&mut rest).ok_or_else(unreadable)?;
            let mut set = BTreeSet::new();
            let mut offset = 0u64;
            for _ in 0..take_varint(&mut rest).ok_or_else(unreadable)? {
                let step = take_varint(&mut rest).ok_or_else(unreadable)?;
                offset += if step & 1 == 0 {
                    (step >> 1) * 1000
                } else {
                    step >> 1
                };
                let (tag, after) = rest.split_first_chunk::<2>().ok_or_else(unreadable)?;
                rest = after;
                set.insert(offset << 16 | u64::from(u16::from_le_bytes(*tag)));
            }
            let index = i64::try_from(index).map_err(|_| unreadable())?;
            sets.insert(origin + index * FIVE_MINUTES_MS, set);
        }
        if !rest.is_empty() {
            return Err(unreadable());
        }
        Ok(Self(sets))
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7F) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
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

    #[test]
    fn readings_whole_seconds_apart_cost_three_bytes() {
        let mut ids = BucketIds::default();
        for i in 0..5 {
            ids.insert(T0 + 123 + i * 60_000, &format!("e{i}"));
        }
        let bytes = ids.encode(T0);
        assert!(bytes.len() <= 3 + 2 + 5 * 3, "{} bytes", bytes.len());
        assert_eq!(BucketIds::decode(&bytes, T0).unwrap(), ids);
        assert!(BucketIds::decode(&bytes[..bytes.len() - 1], T0).is_err());
    }
}
