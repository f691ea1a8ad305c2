//! What a live state keeps of its device's summaries: per type the open 5-minute buckets, the
//! boundaries of the stored items and the sparkline trail, in their compact stored form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::error::FleetError;
use crate::model::readings::EventValue;
use crate::model::series::bucket::Buckets;
use crate::model::series::ids::BucketIds;
use crate::model::series::resolution::{Resolution, DAY_MS, FIVE_MINUTES_MS, HOUR_MS};

/// What a device's live state keeps of one event type's summaries: the 5-minute buckets not
/// yet written to the stored blocks, and where the stored items end. Ingest counts every
/// reading newer than the type's latest in here (no extra write: the state is written with
/// every batch anyway), and writes the closed 5-minute buckets out when the state needs the
/// room.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenSeries {
    /// 5-minute aligned: the 5-minute buckets before this instant are in the stored blocks;
    /// the open buckets hold every reading at or after it. An hour may be split by it: its
    /// first buckets in a block, the rest open.
    pub flushed_before: i64,
    /// Day-aligned, never after `flushed_before`: the days before it are in the stored hourly
    /// (day) and daily (month) items; the days from it on are in blocks and open buckets only.
    pub rolled_before: i64,
    /// The 5-minute buckets at or after `flushed_before`.
    pub open: Buckets,
    /// Which readings the open buckets hold (issue 38): a reading is counted once.
    pub ids: BucketIds,
    /// Whether the block `flushed_before` falls in may hold buckets already (an earlier flush
    /// into it, or a late reading's): only then does a flush read it. No block after it holds
    /// anything (only a flush writes past `flushed_before`).
    pub first_block_written: bool,
    /// Hourly averages of the flushed hours of the last day, for the dashboard's sparkline;
    /// an hour split by `flushed_before` averages the whole hour as of its last flush.
    pub trail: Trail,
}

impl OpenSeries {
    /// The summaries of a type whose first counted reading is at `at_ms`: nothing stored yet.
    pub fn starting_at(at_ms: i64) -> Self {
        let bucket = Resolution::FiveMinutes.bucket_start(at_ms);
        Self {
            flushed_before: bucket,
            rolled_before: Resolution::Day.bucket_start(bucket),
            open: Buckets::default(),
            ids: BucketIds::default(),
            first_block_written: false,
            trail: Trail::default(),
        }
    }

    /// Whether a reading at `at_ms` belongs to the open buckets (else to the stored items).
    pub fn is_open(&self, at_ms: i64) -> bool {
        at_ms >= self.flushed_before
    }

    /// Counts in the reading `event_id` at `at_ms` unless its open bucket holds it already;
    /// whether it was new.
    pub fn record_once(&mut self, at_ms: i64, event_id: &str, value: &EventValue) -> bool {
        if !self.ids.insert(at_ms, event_id) {
            return false;
        }
        self.record(at_ms, value);
        true
    }

    /// Counts in a reading, without its identity (a recompute's, or a test's).
    pub fn record(&mut self, at_ms: i64, value: &EventValue) {
        debug_assert!(
            self.is_open(at_ms),
            "a new reading is never before the open buckets"
        );
        self.open
            .0
            .entry(Resolution::FiveMinutes.bucket_start(at_ms))
            .or_default()
            .record(value);
    }

    /// Takes the open buckets before `before` (aligned down to 5 minutes) out, to be written
    /// to the stored blocks; the stored part now ends at `before`.
    pub fn take_closed(&mut self, before: i64) -> Buckets {
        self.take_closed_with_ids(before).0
    }

    /// [`OpenSeries::take_closed`] with the closed buckets' reading identities.
    pub fn take_closed_with_ids(&mut self, before: i64) -> (Buckets, BucketIds) {
        let before = Resolution::FiveMinutes
            .bucket_start(before)
            .max(self.flushed_before);
        let kept = self.open.0.split_off(&before);
        let closed = std::mem::replace(&mut self.open.0, kept);
        let ids = self.ids.take_before(before);
        self.flushed_before = before;
        (Buckets(closed), ids)
    }

    /// Sets the trail's averages of the hours a flush wrote to: `stored` holds those hours'
    /// 5-minute buckets as their blocks now hold them (after the flush's merge); the open
    /// buckets of the same hours are added, so an hour split between a block and the open
    /// buckets averages all of its readings, never the flushed part alone.
    pub fn update_trail(&mut self, stored: &Buckets) {
        let mut hours = stored.coarsen(Resolution::Hour);
        let starts: Vec<i64> = hours.0.keys().copied().collect();
        for hour in starts {
            for (start, bucket) in self.open.within(hour, hour + HOUR_MS) {
                hours.add(Resolution::Hour.bucket_start(*start), bucket);
            }
        }
        self.trail.update(&hours);
    }

    /// The sparkline's hourly averages of the last 24 hours: the trail's hours, and the hours
    /// after `flushed_before`'s hour from the open buckets. The hour split by `flushed_before`
    /// keeps the trail's average, taken from the whole hour (block and open buckets) at its
    /// last flush; the open buckets alone hold only its later part.
    pub fn hourly_averages(&self) -> BTreeMap<i64, f64> {
        let split = Resolution::Hour.bucket_start(self.flushed_before);
        let mut averages = self.trail.0.clone();
        for (hour, bucket) in self.open.coarsen(Resolution::Hour).0 {
            if hour == split && averages.contains_key(&hour) {
                continue;
            }
            if let Some((_, _, _, avg)) = bucket.numbers() {
                averages.insert(hour, avg);
            }
        }
        if let Some(newest) = averages.keys().next_back().copied() {
            averages = averages.split_off(&(newest - (Trail::HOURS - 1) * HOUR_MS));
        }
        averages
    }

    /// The days now wholly in stored blocks and not yet in the day and month items: their
    /// starts, oldest first; the rolled part now ends before the first day still open.
    pub fn take_days_to_roll(&mut self) -> Vec<i64> {
        let until = Resolution::Day.bucket_start(self.flushed_before);
        let days = (self.rolled_before..until)
            .step_by(DAY_MS as usize)
            .collect();
        self.rolled_before = until.max(self.rolled_before);
        days
    }
}

/// Hourly averages of the last 24 hours of one type, quantized to 1/254 of their range: a
/// sparkline's points, kept on the live state so the dashboard draws it without a read per
/// device. Exact figures are the `series` route's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trail(pub BTreeMap<i64, f64>);

impl Trail {
    /// How many hours a trail keeps.
    pub const HOURS: i64 = 24;

    /// Sets the averages of `hours` (hourly buckets); keeps the 24 hours up to the newest.
    pub fn update(&mut self, hours: &Buckets) {
        for (start, bucket) in &hours.0 {
            match bucket.numbers() {
                Some((_, _, _, avg)) => self.0.insert(*start, avg),
                None => self.0.remove(start),
            };
        }
        if let Some(newest) = self.0.keys().next_back().copied() {
            self.0 = self.0.split_off(&(newest - (Self::HOURS - 1) * HOUR_MS));
        }
    }

    fn stored(&self) -> Option<StoredTrail> {
        let first = *self.0.keys().next()?;
        let lo = self.0.values().copied().fold(f64::INFINITY, f64::min) as f32;
        let hi = self.0.values().copied().fold(f64::NEG_INFINITY, f64::max) as f32;
        let range = f64::from(hi) - f64::from(lo);
        let mut points = vec![0u8; ((self.0.keys().next_back()? - first) / HOUR_MS + 1) as usize];
        for (start, avg) in &self.0 {
            let q = if range > 0.0 {
                ((avg - f64::from(lo)) / range * 254.0)
                    .round()
                    .clamp(0.0, 254.0) as u8
            } else {
                0
            };
            points[((start - first) / HOUR_MS) as usize] = q + 1;
        }
        Some(StoredTrail {
            first_hour: first / HOUR_MS,
            lo,
            hi,
            points,
        })
    }

    fn from_stored(stored: StoredTrail) -> Self {
        let range = f64::from(stored.hi) - f64::from(stored.lo);
        Trail(
            stored
                .points
                .iter()
                .enumerate()
                .filter(|(_, q)| **q > 0)
                .map(|(i, q)| {
                    (
                        (stored.first_hour + i as i64) * HOUR_MS,
                        f64::from(stored.lo) + f64::from(*q - 1) / 254.0 * range,
                    )
                })
                .collect(),
        )
    }
}

#[derive(Serialize, Deserialize)]
struct StoredTrail {
    first_hour: i64,
    lo: f32,
    hi: f32,
    /// 0: no reading that hour; 1..=255: `lo` + (q - 1)/254 of the range.
    points: Vec<u8>,
}

/// The summaries a live state keeps, per event type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeriesState(pub BTreeMap<String, OpenSeries>);

#[derive(Serialize, Deserialize)]
enum StoredSeriesState {
    V1(Vec<StoredOpenSeries>),
    /// V1 with each type's reading identities after it (issue 38).
    V2(Vec<(StoredOpenSeries, Vec<u8>, bool)>),
}

#[derive(Serialize, Deserialize)]
struct StoredOpenSeries {
    event_type: String,
    /// `flushed_before` in 5-minute periods since the epoch (milliseconds / 300,000).
    flushed_before_five_minutes: i64,
    /// Days before `flushed_before`'s day.
    rolled_days_back: u32,
    /// The open buckets ([`Buckets::encode`] at 5 minutes), empty when there are none.
    open: Vec<u8>,
    trail: Option<StoredTrail>,
}

impl SeriesState {
    /// The bytes the state item stores in its `series` attribute.
    pub fn encode(&self) -> Vec<u8> {
        let types = self
            .0
            .iter()
            .map(|(event_type, series)| StoredOpenSeries {
                event_type: event_type.clone(),
                flushed_before_five_minutes: series.flushed_before / FIVE_MINUTES_MS,
                rolled_days_back: ((Resolution::Day.bucket_start(series.flushed_before)
                    - series.rolled_before)
                    / DAY_MS)
                    .max(0) as u32,
                open: if series.open.0.is_empty() {
                    Vec::new()
                } else {
                    series.open.encode(Resolution::FiveMinutes)
                },
                trail: series.trail.stored(),
            })
            .zip(self.0.values())
            .map(|(stored, series)| {
                let ids = if series.ids.0.values().all(|ids| ids.is_empty()) {
                    Vec::new()
                } else {
                    series.ids.encode(series.flushed_before)
                };
                (stored, ids, series.first_block_written)
            })
            .collect();
        postcard::to_allocvec(&StoredSeriesState::V2(types)).expect("series encode into memory")
    }

    /// The summaries `bytes` hold, checked.
    pub fn decode(bytes: &[u8]) -> Result<Self, FleetError> {
        let bad = |why: String| FleetError::internal(format!("unreadable open series: {why}"));
        // A V1 state (before issue 38) holds no identities: its open readings are taken as
        // they are, and a replay of one of them would count again until the bucket flushes.
        let types = match postcard::from_bytes(bytes).map_err(|e| bad(e.to_string()))? {
            StoredSeriesState::V1(types) => {
                types.into_iter().map(|t| (t, Vec::new(), true)).collect()
            }
            StoredSeriesState::V2(types) => types,
        };
        let mut state = BTreeMap::new();
        for (stored, ids, first_block_written) in types {
            let flushed_before = stored
                .flushed_before_five_minutes
                .checked_mul(FIVE_MINUTES_MS)
                .ok_or_else(|| bad("flushed_before out of range".into()))?;
            let open = if stored.open.is_empty() {
                Buckets::default()
            } else {
                Buckets::decode(&stored.open)?
            };
            state.insert(
                stored.event_type,
                OpenSeries {
                    flushed_before,
                    rolled_before: Resolution::Day.bucket_start(flushed_before)
                        - i64::from(stored.rolled_days_back) * DAY_MS,
                    open,
                    ids: if ids.is_empty() {
                        BucketIds::default()
                    } else {
                        BucketIds::decode(&ids, flushed_before)?
                    },
                    first_block_written,
                    trail: stored.trail.map(Trail::from_stored).unwrap_or_default(),
                },
            );
        }
        Ok(Self(state))
    }
}
