//! Summaries of a device's readings per 5 minutes, hour and day (issue 32): the bucket
//! arithmetic and the compact stored forms. No I/O.
//!
//! A [`Bucket`] holds `count`, `min`, `max` and `sum` of the readings in one UTC-aligned
//! interval. Two buckets of disjoint readings combine into the bucket of all of them
//! ([`Bucket::merge`]), and the result does not depend on the order readings arrived in:
//! `count`, `min` and `max` trivially, and `sum` because it is kept exactly ([`ExactSum`]:
//! Shewchuk's non-overlapping partials, as Python's `math.fsum`), rounded once when shown. So a
//! bucket built reading by reading at ingest, one recomputed from the stored raw readings and
//! one combined from smaller buckets are the same bucket, bit for bit. That is what makes the
//! summaries exact under replays, out-of-order batches and late readings: ingest never has to
//! count a reading twice to stay right, it recomputes what it cannot count once (see
//! docs/design.md, "Summaries").
//!
//! Text and flag readings are counted (`count`) but carry no number: a bucket of only those has
//! no `min`, `max`, `sum` or `avg`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::error::FleetError;
use crate::model::readings::EventValue;

/// Milliseconds in five minutes, an hour and a day.
const FIVE_MINUTES_MS: i64 = 5 * 60 * 1000;
const HOUR_MS: i64 = 60 * 60 * 1000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// The resolutions the summaries keep, finest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Resolution {
    /// 5-minute buckets (kept as long as the raw readings).
    #[serde(rename = "5m")]
    FiveMinutes,
    /// Hourly buckets.
    #[serde(rename = "1h")]
    Hour,
    /// Daily buckets (UTC days).
    #[serde(rename = "1d")]
    Day,
}

impl Resolution {
    /// Every resolution, finest first (what `auto` tries in turn).
    pub const ALL: [Resolution; 3] = [Self::FiveMinutes, Self::Hour, Self::Day];

    /// The name the API uses: `5m`, `1h`, `1d`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FiveMinutes => "5m",
            Self::Hour => "1h",
            Self::Day => "1d",
        }
    }

    /// The resolution an API name means.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// A bucket's length in milliseconds.
    pub fn millis(self) -> i64 {
        match self {
            Self::FiveMinutes => FIVE_MINUTES_MS,
            Self::Hour => HOUR_MS,
            Self::Day => DAY_MS,
        }
    }

    /// The start (epoch ms, UTC-aligned) of the bucket holding `at_ms`.
    pub fn bucket_start(self, at_ms: i64) -> i64 {
        at_ms.div_euclid(self.millis()) * self.millis()
    }

    /// How many buckets of this resolution `[from, to)` touches.
    pub fn buckets_in(self, from_ms: i64, to_ms: i64) -> i64 {
        if to_ms <= from_ms {
            return 0;
        }
        (self.bucket_start(to_ms - 1) - self.bucket_start(from_ms)) / self.millis() + 1
    }
}

/// The exact sum of `f64` values: non-overlapping partials whose sum is the exact real sum
/// (Shewchuk 1997, as CPython's `math.fsum`). Adding values in any order, or merging two
/// sums, gives the same exact sum; [`ExactSum::value`] rounds it once, correctly.
///
/// Hand-written rather than the `fsum` crate: the partials are stored (a bucket's sum must
/// combine exactly with another bucket's), and that crate keeps them private.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExactSum {
    partials: Vec<f64>,
}

impl ExactSum {
    /// Adds one value exactly.
    pub fn add(&mut self, value: f64) {
        let mut x = value;
        let mut kept = 0;
        for i in 0..self.partials.len() {
            let mut y = self.partials[i];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        self.partials.truncate(kept);
        self.partials.push(x);
    }

    /// Adds another exact sum (exactly: its partials are values like any other).
    pub fn merge(&mut self, other: &ExactSum) {
        for &p in &other.partials {
            self.add(p);
        }
    }

    /// The exact sum rounded to the nearest `f64` (ties to even), as `math.fsum`.
    pub fn value(&self) -> f64 {
        let p = &self.partials;
        let Some(mut n) = p.len().checked_sub(1) else {
            return 0.0;
        };
        let mut hi = p[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = p[n];
            hi = x + y;
            let y_rounded = hi - x;
            lo = y - y_rounded;
            if lo != 0.0 {
                break;
            }
        }
        // Half-way cases: the partials below may tip the rounding (CPython's fix).
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        hi
    }

    /// The stored partials.
    fn partials(&self) -> &[f64] {
        &self.partials
    }
}

/// The summary of the readings of one type in one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bucket {
    /// Every reading (numbers, text and flags).
    pub count: u64,
    /// The numeric readings among them.
    pub numeric: u64,
    /// Smallest numeric reading (meaningless when `numeric` is 0).
    pub min: f64,
    /// Largest numeric reading (meaningless when `numeric` is 0).
    pub max: f64,
    /// Exact sum of the numeric readings.
    pub sum: ExactSum,
}

impl Bucket {
    /// The bucket of `values`.
    pub fn of<'a>(values: impl IntoIterator<Item = &'a EventValue>) -> Self {
        let mut bucket = Self::default();
        for value in values {
            bucket.record(value);
        }
        bucket
    }

    /// Counts one reading in.
    pub fn record(&mut self, value: &EventValue) {
        self.count += 1;
        if let EventValue::Number(v) = value {
            self.record_number(*v);
        }
    }

    fn record_number(&mut self, v: f64) {
        if self.numeric == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.numeric += 1;
        self.sum.add(v);
    }

    /// Combines the bucket of other, disjoint readings into this one.
    pub fn merge(&mut self, other: &Bucket) {
        if other.numeric > 0 {
            if self.numeric == 0 {
                self.min = other.min;
                self.max = other.max;
            } else {
                self.min = self.min.min(other.min);
                self.max = self.max.max(other.max);
            }
        }
        self.count += other.count;
        self.numeric += other.numeric;
        self.sum.merge(&other.sum);
    }

    /// The numeric summary, when the bucket holds numbers: `(min, max, sum, avg)`, the sum
    /// and average over the numeric readings only.
    pub fn numbers(&self) -> Option<(f64, f64, f64, f64)> {
        (self.numeric > 0).then(|| {
            let sum = self.sum.value();
            (self.min, self.max, sum, sum / self.numeric as f64)
        })
    }

    fn stored(&self) -> StoredForm {
        if self.count == 1 && self.numeric == 1 {
            return StoredForm::One(CompactNumber::of(self.min));
        }
        StoredForm::Many(StoredBucket {
            count: self.count,
            numeric: (self.numeric != self.count).then_some(self.numeric),
            numbers: (self.numeric > 0).then(|| {
                (
                    CompactNumber::of(self.min),
                    CompactNumber::of(self.max),
                    self.sum
                        .partials()
                        .iter()
                        .map(|p| CompactNumber::of(*p))
                        .collect(),
                )
            }),
        })
    }

    fn from_stored(stored: StoredForm) -> Result<Self, String> {
        let stored = match stored {
            StoredForm::One(value) => return Ok(Bucket::of(&[EventValue::Number(value.value())])),
            StoredForm::Many(stored) => stored,
        };
        let numeric = stored.numeric.unwrap_or(stored.count);
        if numeric > stored.count {
            return Err(format!("{numeric} numeric readings of {}", stored.count));
        }
        let mut bucket = Bucket {
            count: stored.count,
            numeric,
            ..Bucket::default()
        };
        match (numeric, stored.numbers) {
            (0, None) => {}
            (n, Some((min, max, partials))) if n > 0 => {
                bucket.min = min.value();
                bucket.max = max.value();
                bucket.sum = ExactSum {
                    partials: partials.into_iter().map(CompactNumber::value).collect(),
                };
            }
            _ => return Err("numbers do not match the numeric count".into()),
        }
        Ok(bucket)
    }
}

/// A bucket as stored: the numeric count only when it differs from the count (a type of
/// numbers only, the usual case, stores one count).
#[derive(Serialize, Deserialize)]
struct StoredBucket {
    count: u64,
    numeric: Option<u64>,
    /// `(min, max, sum partials)`, present when there are numeric readings.
    numbers: Option<(CompactNumber, CompactNumber, Vec<CompactNumber>)>,
}

/// A bucket in its stored form: one numeric reading (a device slower than the bucket, the
/// usual case for a meter) is its value alone.
#[derive(Serialize, Deserialize)]
enum StoredForm {
    One(CompactNumber),
    Many(StoredBucket),
}

/// A number in the fewest bytes that give the same `f64` back (as the live state's readings).
#[derive(Serialize, Deserialize)]
enum CompactNumber {
    Whole(i64),
    Single(f32),
    Double(f64),
}

/// Whole numbers below 2^53 convert to and from `f64` exactly.
const EXACT_WHOLE: f64 = 9_007_199_254_740_992.0;

impl CompactNumber {
    fn of(v: f64) -> Self {
        if v.fract() == 0.0 && v.abs() < EXACT_WHOLE && !(v == 0.0 && v.is_sign_negative()) {
            Self::Whole(v as i64)
        } else if f64::from(v as f32).to_bits() == v.to_bits() {
            Self::Single(v as f32)
        } else {
            Self::Double(v)
        }
    }

    fn value(self) -> f64 {
        match self {
            Self::Whole(w) => w as f64,
            Self::Single(f) => f64::from(f),
            Self::Double(d) => d,
        }
    }
}

/// Buckets of one resolution by start time (epoch ms), oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets(pub BTreeMap<i64, Bucket>);

/// The stored form of [`Buckets`]: starts as differences, in bucket lengths, from the first.
#[derive(Serialize, Deserialize)]
enum StoredBuckets {
    V1 {
        /// The bucket length the steps count in (ms).
        step: i64,
        /// The first start (epoch ms).
        first: i64,
        /// `(steps after the previous start, bucket)`.
        buckets: Vec<(u64, StoredForm)>,
    },
}

impl Buckets {
    /// The bytes an item stores for these buckets of `resolution`.
    pub fn encode(&self, resolution: Resolution) -> Vec<u8> {
        let step = resolution.millis();
        let first = self.0.keys().next().copied().unwrap_or(0);
        let mut previous = first;
        let buckets = self
            .0
            .iter()
            .map(|(start, bucket)| {
                let steps = ((start - previous) / step) as u64;
                previous = *start;
                (steps, bucket.stored())
            })
            .collect();
        postcard::to_allocvec(&StoredBuckets::V1 {
            step,
            first,
            buckets,
        })
        .expect("buckets encode into memory")
    }

    /// The buckets `bytes` hold, checked.
    pub fn decode(bytes: &[u8]) -> Result<Self, FleetError> {
        let bad = |why: String| FleetError::internal(format!("unreadable summary: {why}"));
        let StoredBuckets::V1 {
            step,
            first,
            buckets,
        } = postcard::from_bytes(bytes).map_err(|e| bad(e.to_string()))?;
        if ![FIVE_MINUTES_MS, HOUR_MS, DAY_MS].contains(&step) {
            return Err(bad(format!("bucket length {step}")));
        }
        let mut start = first;
        let mut decoded = BTreeMap::new();
        for (steps, stored) in buckets {
            start = i64::try_from(steps)
                .ok()
                .and_then(|s| s.checked_mul(step))
                .and_then(|d| start.checked_add(d))
                .ok_or_else(|| bad("start out of range".into()))?;
            decoded.insert(start, Bucket::from_stored(stored).map_err(bad)?);
        }
        Ok(Self(decoded))
    }

    /// Merges `bucket` into the one starting at `start`.
    pub fn add(&mut self, start: i64, bucket: &Bucket) {
        self.0.entry(start).or_default().merge(bucket);
    }

    /// These buckets combined into buckets of the coarser `resolution`.
    pub fn coarsen(&self, resolution: Resolution) -> Buckets {
        let mut coarse = Buckets::default();
        for (start, bucket) in &self.0 {
            coarse.add(resolution.bucket_start(*start), bucket);
        }
        coarse
    }

    /// The buckets starting in `[from, to)`.
    pub fn within(&self, from_ms: i64, to_ms: i64) -> impl Iterator<Item = (&i64, &Bucket)> {
        self.0.range(from_ms..to_ms)
    }
}

/// The 5-minute buckets of `readings` (epoch ms, value).
pub fn five_minute_buckets<'a>(
    readings: impl IntoIterator<Item = (i64, &'a EventValue)>,
) -> Buckets {
    let mut buckets = Buckets::default();
    for (at, value) in readings {
        buckets
            .0
            .entry(Resolution::FiveMinutes.bucket_start(at))
            .or_default()
            .record(value);
    }
    buckets
}

/// 5-minute buckets are stored in blocks of two hours, one item each: 24 buckets of a device
/// reading every minute stay under 1 KB (one write unit), and a day at 5 minutes is 12 items.
pub const BLOCK_MS: i64 = 2 * HOUR_MS;

/// The start of the block holding `at_ms`.
pub fn block_start(at_ms: i64) -> i64 {
    at_ms.div_euclid(BLOCK_MS) * BLOCK_MS
}

/// The start of the UTC month holding `at_ms` (the daily buckets are stored a month an item).
pub fn month_start(at_ms: i64) -> i64 {
    let day = time::OffsetDateTime::from_unix_timestamp(at_ms.div_euclid(1000))
        .map(|t| t.date())
        .unwrap_or(time::Date::MIN);
    let first = day.replace_day(1).expect("every month has a first day");
    first.midnight().assume_utc().unix_timestamp() * 1000
}

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
            trail: Trail::default(),
        }
    }

    /// Whether a reading at `at_ms` belongs to the open buckets (else to the stored items).
    pub fn is_open(&self, at_ms: i64) -> bool {
        at_ms >= self.flushed_before
    }

    /// Counts in a reading not counted before (ingest: newer than the type's latest reading).
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
        let before = Resolution::FiveMinutes
            .bucket_start(before)
            .max(self.flushed_before);
        let kept = self.open.0.split_off(&before);
        let closed = std::mem::replace(&mut self.open.0, kept);
        self.flushed_before = before;
        Buckets(closed)
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
            .collect();
        postcard::to_allocvec(&StoredSeriesState::V1(types)).expect("series encode into memory")
    }

    /// The summaries `bytes` hold, checked.
    pub fn decode(bytes: &[u8]) -> Result<Self, FleetError> {
        let bad = |why: String| FleetError::internal(format!("unreadable open series: {why}"));
        let StoredSeriesState::V1(types) =
            postcard::from_bytes(bytes).map_err(|e| bad(e.to_string()))?;
        let mut state = BTreeMap::new();
        for stored in types {
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
                    trail: stored.trail.map(Trail::from_stored).unwrap_or_default(),
                },
            );
        }
        Ok(Self(state))
    }
}

/// What was read of one type's stored summaries for a range: 5-minute blocks, hourly day
/// items and daily month items (whichever the resolution needs).
#[derive(Clone, Debug, Default)]
pub struct StoredSeries {
    /// Buckets of the stored blocks (5 minutes).
    pub blocks: Buckets,
    /// Buckets of the stored day items (hours).
    pub days: Buckets,
    /// Buckets of the stored month items (days).
    pub months: Buckets,
}

/// Which stored items a `series` read of `[from, to)` at `resolution` needs, given the live
/// state's boundaries: `(resolution of the items, from, to)` ranges, at most two.
pub fn stored_ranges(
    resolution: Resolution,
    from_ms: i64,
    to_ms: i64,
    open: Option<&OpenSeries>,
) -> Vec<(Resolution, i64, i64)> {
    let (rolled, flushed) = open.map_or((i64::MAX, i64::MAX), |o| {
        (o.rolled_before, o.flushed_before)
    });
    let mut ranges = Vec::new();
    let mut push = |r: Resolution, from: i64, to: i64| {
        if from < to {
            ranges.push((r, from, to));
        }
    };
    match resolution {
        Resolution::FiveMinutes => push(Resolution::FiveMinutes, from_ms, to_ms.min(flushed)),
        coarse => {
            push(coarse, from_ms, to_ms.min(rolled));
            push(
                Resolution::FiveMinutes,
                from_ms.max(rolled),
                to_ms.min(flushed),
            );
        }
    }
    ranges
}

/// The buckets of `resolution` that overlap `[from, to)`, each whole: the stored items before the state's
/// boundaries and the open buckets after them. The boundaries come from the state, read
/// before the items: an item written after that read (a flush in between) holds nothing the
/// open buckets do not, and is cut at the boundary, so nothing is counted twice.
pub fn assemble(
    resolution: Resolution,
    from_ms: i64,
    to_ms: i64,
    open: Option<&OpenSeries>,
    stored: &StoredSeries,
) -> Buckets {
    let (rolled, flushed) = open.map_or((i64::MAX, i64::MAX), |o| {
        (o.rolled_before, o.flushed_before)
    });
    let mut fine = Buckets::default();
    // Blocks before `rolled` are in the day and month items the coarse resolutions read.
    let blocks_from = if resolution == Resolution::FiveMinutes {
        i64::MIN
    } else {
        rolled
    };
    for (start, bucket) in stored.blocks.0.range(blocks_from..flushed.max(blocks_from)) {
        fine.add(*start, bucket);
    }
    if let Some(open) = open {
        for (start, bucket) in &open.open.0 {
            fine.add(*start, bucket);
        }
    }
    let mut answer = match resolution {
        Resolution::FiveMinutes => fine,
        Resolution::Hour | Resolution::Day => {
            let mut coarse = fine.coarsen(resolution);
            let items = if resolution == Resolution::Hour {
                &stored.days
            } else {
                &stored.months
            };
            for (start, bucket) in items.0.range(..rolled) {
                coarse.add(*start, bucket);
            }
            coarse
        }
    };
    let from = resolution.bucket_start(from_ms);
    answer.0 = answer.0.split_off(&from);
    answer
        .0
        .retain(|start, bucket| *start < to_ms && bucket.count > 0);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: f64) -> EventValue {
        EventValue::Number(v)
    }

    #[test]
    fn exact_sums_do_not_depend_on_order_and_round_like_fsum() {
        let values = [0.1, 1e16, 21.37, -1e16, 0.2, 3.3, 1e-3, 7.77];
        let mut forward = ExactSum::default();
        values.iter().for_each(|v| forward.add(*v));
        let mut backward = ExactSum::default();
        values.iter().rev().for_each(|v| backward.add(*v));
        assert_eq!(forward.value().to_bits(), backward.value().to_bits());
        // math.fsum([0.1, 1e16, 21.37, -1e16, 0.2, 3.3, 1e-3, 7.77]) == 32.741
        assert_eq!(forward.value(), 32.741);
        let mut tenths = ExactSum::default();
        (0..10).for_each(|_| tenths.add(0.1));
        assert_eq!(
            tenths.value(),
            1.0,
            "naive summation gives 0.9999999999999999"
        );
        // CPython's half-way correction: fsum([1e-16, 1, 1e16]) == 1.0000000000000002e16
        let mut halfway = ExactSum::default();
        [1e-16, 1.0, 1e16].iter().for_each(|v| halfway.add(*v));
        assert_eq!(halfway.value(), 1.0000000000000002e16);
        assert_eq!(ExactSum::default().value(), 0.0);
    }

    #[test]
    fn merged_buckets_equal_the_bucket_of_all_their_readings() {
        let readings: Vec<EventValue> = (0..50)
            .map(|i| n(20.0 + f64::from(i) * 0.37))
            .chain([EventValue::Text("ok".into()), EventValue::Flag(true)])
            .collect();
        let whole = Bucket::of(&readings);
        let (left, right) = readings.split_at(17);
        let mut merged = Bucket::of(right);
        merged.merge(&Bucket::of(left));
        assert_eq!(merged, Bucket::of(readings.iter().rev()).clone());
        assert_eq!(merged.count, 52);
        assert_eq!(merged.numeric, 50);
        assert_eq!((merged.min, merged.max), (20.0, 20.0 + 49.0 * 0.37));
        assert_eq!(merged.sum.value().to_bits(), whole.sum.value().to_bits());
        let text_only = Bucket::of(&[EventValue::Text("a".into())]);
        assert_eq!(text_only.numbers(), None);
        assert_eq!(text_only.count, 1);
    }

    #[test]
    fn buckets_round_trip_their_stored_form_and_stay_small() {
        let readings: Vec<(i64, EventValue)> = (0..120)
            .map(|i| {
                (
                    1_699_999_800_000 + i * 60_000,
                    n(21.0 + (i % 7) as f64 * 0.13),
                )
            })
            .chain([(
                1_699_999_800_000 + 5 * 60_000,
                EventValue::Text("door".into()),
            )])
            .collect();
        let buckets = five_minute_buckets(readings.iter().map(|(at, v)| (*at, v)));
        let bytes = buckets.encode(Resolution::FiveMinutes);
        assert_eq!(Buckets::decode(&bytes).unwrap(), buckets);
        assert_eq!(buckets.0.len(), 24);
        assert!(
            bytes.len() <= 24 * 40,
            "{} bytes for 24 buckets",
            bytes.len()
        );
        let hours = buckets.coarsen(Resolution::Hour);
        assert_eq!(
            Buckets::decode(&hours.encode(Resolution::Hour)).unwrap(),
            hours
        );
        assert_eq!(hours.0.values().map(|b| b.count).sum::<u64>(), 121);
        assert!(Buckets::decode(b"\x00\x07").is_err());
    }

    #[test]
    fn buckets_align_to_utc_and_auto_counts_them() {
        let at = 1_700_000_123_456; // 2023-11-14T22:15:23.456Z
        assert_eq!(Resolution::FiveMinutes.bucket_start(at), 1_700_000_100_000);
        assert_eq!(Resolution::Hour.bucket_start(at), 1_699_999_200_000);
        assert_eq!(Resolution::Day.bucket_start(at), 1_699_920_000_000);
        assert_eq!(Resolution::Hour.buckets_in(0, 30 * DAY_MS), 720);
        assert_eq!(Resolution::FiveMinutes.buckets_in(0, DAY_MS), 288);
        assert_eq!(Resolution::Day.buckets_in(1, DAY_MS + 1), 2);
        assert_eq!(Resolution::parse("1h"), Some(Resolution::Hour));
        assert_eq!(Resolution::parse("15m"), None);
    }
}

#[cfg(test)]
mod assembly {
    use super::*;

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    /// The stored items as ingest would keep them, in memory: blocks, day and month items.
    #[derive(Default)]
    struct Store {
        blocks: Buckets,
        days: Buckets,
        months: Buckets,
    }

    impl Store {
        fn read(&self) -> StoredSeries {
            StoredSeries {
                blocks: self.blocks.clone(),
                days: self.days.clone(),
                months: self.months.clone(),
            }
        }

        /// Replaces the 5-minute buckets of `[from, to)` (a recompute), and the hours and days
        /// that hold them where those are rolled.
        fn replace(&mut self, from: i64, to: i64, buckets: &Buckets, rolled: i64) {
            self.blocks.0.retain(|s, _| *s < from || *s >= to);
            for (s, b) in buckets.within(from, to) {
                self.blocks.add(*s, b);
            }
            self.reroll(from, rolled);
        }

        fn reroll(&mut self, at: i64, rolled: i64) {
            let day = Resolution::Day.bucket_start(at);
            if day >= rolled {
                return;
            }
            let hours = Buckets(
                self.blocks
                    .0
                    .range(day..day + DAY_MS)
                    .map(|(s, b)| (*s, b.clone()))
                    .collect(),
            )
            .coarsen(Resolution::Hour);
            self.days.0.retain(|s, _| *s < day || *s >= day + DAY_MS);
            self.days.0.extend(hours.0.clone());
            self.months.0.remove(&day);
            let total = hours.coarsen(Resolution::Day);
            self.months.0.extend(total.0);
        }
    }

    fn recompute(
        raw: &BTreeMap<(i64, u32), EventValue>,
        resolution: Resolution,
        from: i64,
        to: i64,
    ) -> Buckets {
        let mut b = Buckets::default();
        for ((at, _), v) in raw.range((from, 0)..(to, 0)) {
            b.0.entry(resolution.bucket_start(*at))
                .or_default()
                .record(v);
        }
        b
    }

    #[test]
    fn open_and_stored_buckets_assemble_into_a_recompute_of_every_reading() {
        // 3 days of minute readings arriving in shuffled batches; every 7th batch replayed;
        // some readings held back and sent 1 to 40 hours late; flushes (at 5-minute
        // boundaries, mostly inside an hour) whenever 7 open buckets pile up. Ingest's rule in memory: a reading newer than the latest counts
        // in; anything else recomputes its bucket from the stored readings.
        let mut raw: BTreeMap<(i64, u32), EventValue> = BTreeMap::new();
        let mut series: Option<OpenSeries> = None;
        let mut latest = i64::MIN;
        let mut store = Store::default();
        let mut late: Vec<(i64, EventValue)> = Vec::new();
        let mut split_hours = 0;
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        let minutes = 3 * 24 * 60;
        let mut batches: Vec<Vec<(i64, EventValue)>> = Vec::new();
        let mut batch = Vec::new();
        for m in 0..minutes {
            let at = T0 + m * 60_000 + (next() % 1000) as i64;
            let value = if m % 97 == 0 {
                EventValue::Text("door".into())
            } else {
                EventValue::Number(20.0 + (next() % 1000) as f64 / 100.0)
            };
            if next() % 50 == 0 {
                late.push((at, value));
            } else {
                batch.push((at, value));
            }
            if batch.len() == 30 {
                batches.push(std::mem::take(&mut batch));
            }
            if m % 600 == 599 && !late.is_empty() {
                batches.push(std::mem::take(&mut late));
            }
        }
        batches.push(batch);
        for (i, mut batch) in batches.into_iter().enumerate() {
            let copies = if i % 7 == 3 { 2 } else { 1 };
            for _ in 0..copies {
                batch.reverse();
                let mut recompute_buckets = std::collections::BTreeSet::new();
                let first = batch.iter().map(|(a, _)| *a).min().unwrap();
                for (at, value) in &batch {
                    raw.insert((*at, 0), value.clone());
                    let s = series.get_or_insert_with(|| OpenSeries::starting_at(first));
                    if *at > latest {
                        s.record(*at, value);
                    } else {
                        recompute_buckets.insert(Resolution::FiveMinutes.bucket_start(*at));
                    }
                }
                latest = latest.max(batch.iter().map(|(a, _)| *a).max().unwrap());
                let s = series.as_mut().unwrap();
                for start in recompute_buckets {
                    let exact = recompute(
                        &raw,
                        Resolution::FiveMinutes,
                        start,
                        start + FIVE_MINUTES_MS,
                    );
                    if s.is_open(start) {
                        s.open.0.remove(&start);
                        s.open.0.extend(exact.0);
                    } else {
                        store.replace(start, start + FIVE_MINUTES_MS, &exact, s.rolled_before);
                    }
                }
                if s.open.0.len() > 7 {
                    let closed = s.take_closed(latest);
                    assert_eq!(
                        s.flushed_before,
                        Resolution::FiveMinutes.bucket_start(latest)
                    );
                    split_hours += usize::from(s.flushed_before % HOUR_MS != 0);
                    let mut hours = std::collections::BTreeSet::new();
                    for (start, b) in &closed.0 {
                        store.blocks.add(*start, b);
                        hours.insert(Resolution::Hour.bucket_start(*start));
                    }
                    let stored = Buckets(
                        hours
                            .iter()
                            .flat_map(|h| store.blocks.within(*h, h + HOUR_MS))
                            .map(|(s, b)| (*s, b.clone()))
                            .collect(),
                    );
                    s.update_trail(&stored);
                    // The trail averages every reading of the hour so far, flushed or open.
                    for hour in hours {
                        let whole = recompute(&raw, Resolution::Hour, hour, hour + HOUR_MS);
                        let avg = whole.0[&hour].numbers().unwrap().3;
                        assert!((s.trail.0[&hour] - avg).abs() < 1e-9, "trail at {hour}");
                    }
                    let rolled_from = s.rolled_before;
                    for day in s.take_days_to_roll() {
                        store.reroll(day, day + 1);
                    }
                    assert!(s.rolled_before >= rolled_from);
                }
            }
        }
        let s = series.as_ref().unwrap();
        assert!(
            s.rolled_before > T0 && s.flushed_before > s.rolled_before,
            "the test rolled days and kept open hours"
        );
        assert!(!store.months.0.is_empty());
        assert!(split_hours > 50, "flushes split hours: {split_hours}");
        // The sparkline: 24 hours; an hour wholly open averages its open buckets, the others
        // come from the trail.
        let averages = s.hourly_averages();
        assert_eq!(averages.len(), 24);
        let newest = *averages.keys().next_back().unwrap();
        assert_eq!(newest, Resolution::Hour.bucket_start(latest));
        let split = Resolution::Hour.bucket_start(s.flushed_before);
        for (hour, avg) in &averages {
            if *hour > split || !s.trail.0.contains_key(hour) {
                let want = recompute(&raw, Resolution::Hour, *hour, hour + HOUR_MS);
                assert!((avg - want.0[hour].numbers().unwrap().3).abs() < 1e-9);
            } else {
                assert_eq!(*avg, s.trail.0[hour], "flushed hours from the trail");
            }
        }
        let end = T0 + 3 * DAY_MS;
        for resolution in Resolution::ALL {
            for (from, to) in [
                (T0, end),
                (T0 + 5 * HOUR_MS + 17, end - 3 * HOUR_MS),
                (end - 2 * HOUR_MS, end),
            ] {
                let got = assemble(resolution, from, to, Some(s), &store.read());
                // Buckets are whole: the last one runs past `to` when `to` is inside it.
                let whole_to = resolution.bucket_start(to - 1) + resolution.millis();
                let want = recompute(&raw, resolution, resolution.bucket_start(from), whole_to);
                assert_eq!(got.0.len(), want.0.len(), "{resolution:?} {from}..{to}");
                for ((gs, g), (ws, w)) in got.0.iter().zip(&want.0) {
                    assert_eq!(
                        (gs, g.count, g.numeric, g.min, g.max),
                        (ws, w.count, w.numeric, w.min, w.max)
                    );
                    assert_eq!(
                        g.sum.value().to_bits(),
                        w.sum.value().to_bits(),
                        "sum at {gs}"
                    );
                }
                assert!(stored_ranges(resolution, from, to, Some(s)).len() <= 2);
            }
        }
        let state = SeriesState([("power".to_string(), s.clone())].into());
        let bytes = state.encode();
        let back = SeriesState::decode(&bytes).unwrap();
        assert_eq!(back.0["power"].open, s.open);
        assert_eq!(
            (
                back.0["power"].flushed_before,
                back.0["power"].rolled_before
            ),
            (s.flushed_before, s.rolled_before)
        );
        assert_eq!(back.0["power"].trail.0.len(), s.trail.0.len());
    }
}
