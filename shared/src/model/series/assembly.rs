//! A series from the live state's open buckets and the stored items: which items a range
//! needs and how the two are put together without counting anything twice.

use crate::model::series::bucket::Buckets;
use crate::model::series::open::OpenSeries;
use crate::model::series::resolution::Resolution;

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
    // Every overlapping bucket is answered whole: a bucket of an unrolled day is summed from
    // blocks before `from` and after `to` too (issue 38 item 7), so the ranges start at the
    // first bucket's start and end at the last one's end.
    let from_ms = resolution.bucket_start(from_ms);
    let to_ms = resolution.bucket_start(to_ms - 1) + resolution.millis();
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
    use crate::model::readings::EventValue;
    use crate::model::series::open::SeriesState;
    use crate::model::series::resolution::{DAY_MS, FIVE_MINUTES_MS, HOUR_MS};
    use std::collections::BTreeMap;

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
