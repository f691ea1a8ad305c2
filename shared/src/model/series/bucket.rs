//! A bucket's figures (`count`, `min`, `max`, the exact `sum`), buckets by start time and
//! their compact stored form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::error::FleetError;
use crate::model::readings::EventValue;
use crate::model::series::resolution::{Resolution, DAY_MS, FIVE_MINUTES_MS, HOUR_MS};

/// The exact sum of `f64` values: non-overlapping partials whose sum is the exact real sum
/// (Shewchuk 1997, as CPython's `math.fsum`). Adding values in any order, or merging two
/// sums, gives the same exact sum; [`ExactSum::value`] rounds it once, correctly.
///
/// The partials are kept canonical: the greedy expansion `s1 = fsum(x)`, `s2 = fsum(x - s1)`,
/// ... (smallest first), a function of the exact sum alone. Shewchuk's own partials depend on
/// the order the values came in, so equal sums would be stored differently and a replay
/// (whose recompute reads readings in time order) would rewrite a bucket it did not change
/// (issue 38).
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
        self.grow(value);
        self.canonicalize();
    }

    /// Shewchuk's grow-expansion: adds `value` exactly, the partials left as it leaves them.
    fn grow(&mut self, value: f64) {
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
            self.grow(p);
        }
        self.canonicalize();
    }

    /// Rewrites the partials as the greedy expansion of their exact sum: each the correctly
    /// rounded remainder of the ones above it, smallest first (non-overlapping, so still a
    /// valid expansion). A zero sum keeps its one rounded zero; no partials stay none.
    fn canonicalize(&mut self) {
        if self.partials.is_empty() {
            return;
        }
        let mut rest = ExactSum {
            partials: std::mem::take(&mut self.partials),
        };
        loop {
            let s = rest.value();
            self.partials.push(s);
            // An overflowing sum (beyond any reading's range) has no finite remainder.
            if s == 0.0 || !s.is_finite() {
                break;
            }
            rest.grow(-s);
            if rest.partials.iter().all(|p| *p == 0.0) {
                break;
            }
        }
        self.partials.reverse();
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
    fn equal_exact_sums_have_equal_partials_whatever_the_order() {
        // Shewchuk's partials of these four differ by order; the canonical ones do not.
        let values = [-2.97, 246.6, 217.32, 39.27];
        let mut orders = Vec::new();
        for rotation in 0..values.len() {
            for reversed in [false, true] {
                let mut order = values.to_vec();
                order.rotate_left(rotation);
                if reversed {
                    order.reverse();
                }
                let mut sum = ExactSum::default();
                order.iter().for_each(|v| sum.add(*v));
                orders.push(sum);
            }
        }
        let mut merged = ExactSum::default();
        let (mut a, mut b) = (ExactSum::default(), ExactSum::default());
        a.add(values[3]);
        a.add(values[0]);
        b.add(values[2]);
        b.add(values[1]);
        merged.merge(&b);
        merged.merge(&a);
        orders.push(merged);
        for sum in &orders {
            assert_eq!(sum.partials(), orders[0].partials());
        }
        assert_eq!(orders[0].value(), 500.21999999999997);
        // The greedy expansion: the rounded sum on top, the remainder below it.
        assert_eq!(orders[0].partials().last(), Some(&500.21999999999997));
        assert_eq!(orders[0].partials().len(), 2);
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
