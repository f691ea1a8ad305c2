//! Offline detection without I/O: how often a device is expected to report (declared by its
//! owner, or learned from its own rhythm), when its silence makes it offline, and where it
//! waits on the due index (docs/design.md, "Offline detection").
//!
//! **Due time.** A watched device is offline once the end of its 15-minute `SEEN#` bucket
//! holding `lastSeen`, plus its expected interval, plus a grace period, has passed:
//!
//! `due = seen_bucket(lastSeen) + 15 min + expected + grace`, `grace = max(60 s, expected / 2,
//! 4 x learned jitter)`.
//!
//! So the silence that makes a device offline is its interval plus the grace plus 0 to 15
//! minutes (the rest of its bucket). That is what lets the due entry move only when the
//! `SEEN#` entry does (at most once per bucket, never per batch): the due time is a function
//! of the bucket, not of `lastSeen`, and the learned interval changes only when the bucket
//! does. A device that keeps to its rhythm is never a candidate of the detector: its next
//! report (at most `expected` after the last, which was before its bucket's end) moves the
//! entry before it is reached.
//!
//! **Learning.** Without a declared `reportEverySeconds`, the interval is an exponentially
//! weighted mean of the gaps between reports (weight 1/8) and the jitter the mean of their
//! deviation from it (weight 1/4), as TCP estimates a round trip: one gap per bucket change
//! (the gap that crossed into the new bucket), which ingestion knows anyway. Before a device's
//! second bucket nothing is known and it is not watched. A gap that ends an offline alarm
//! counts at most twice the expected interval, so an outage does not teach the device to be slow.
//!
//! **Tight detection.** An owner may ask for [`OfflineDetection::Tight`] on a device: its due
//! time is `lastSeen + expected + 60 s`, with no bucket term, so the detector (every minute)
//! flags it within its interval plus two minutes of its last report. The price is the due
//! entry moving with every batch that moves `lastSeen` (2 write units per such batch: a
//! delete and a put on GSI3) instead of once per bucket; every other device keeps the bucket.

use serde::{Deserialize, Serialize};

use crate::model::alarm::severity::Severity;
use crate::model::error::ValidationError;
use crate::model::ids::DeviceId;
use crate::model::timestamp::Timestamp;

/// Granularity of the `SEEN#` index key: a device's index entry moves at most once per
/// bucket, however often it reports.
pub const SEEN_GRANULARITY_SECONDS: i64 = 15 * 60;

/// The start of `device`'s [`SEEN_GRANULARITY_SECONDS`] bucket holding `last_seen`: what its
/// `SEEN#` index key holds. Each device's buckets are offset by a stable hash of its id, so
/// devices cross their bucket boundaries spread over the whole interval, never all at the
/// same instant (a shared boundary would move every busy device's index entry at once).
pub fn seen_bucket(last_seen: &Timestamp, device: &DeviceId) -> Timestamp {
    let offset = (xxhash_rust::xxh3::xxh3_64(device.as_str().as_bytes())
        % SEEN_GRANULARITY_SECONDS as u64) as i64;
    let secs = last_seen.epoch_seconds() + offset;
    let start = secs - secs.rem_euclid(SEEN_GRANULARITY_SECONDS) - offset;
    Timestamp::from_epoch_millis(start * 1000)
        .unwrap_or(*last_seen)
        .min(*last_seen)
}

/// Shortest reporting interval an owner may declare.
pub const MIN_REPORT_EVERY_SECONDS: u64 = 10;
/// Longest reporting interval an owner may declare (and the longest one learned).
pub const MAX_REPORT_EVERY_SECONDS: u64 = 7 * 86_400;
/// Shortest grace period.
pub const MIN_GRACE_SECONDS: u64 = 60;
/// Severity of an offline alarm.
pub const OFFLINE_SEVERITY: Severity = Severity::Major;

/// How closely an owner asks for a device's silence to be watched (`offlineDetection`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OfflineDetection {
    /// Flagged after its interval, the grace and the rest of its 15-minute `SEEN#` bucket;
    /// its due entry moves at most once per bucket (no write beyond the `SEEN#` move's).
    #[default]
    Standard,
    /// Flagged within its interval plus two minutes of its last report; its due entry moves
    /// with every batch that moves `lastSeen` (2 write units each).
    Tight,
}

impl OfflineDetection {
    /// Every value, as the API spells them.
    pub const ALL: [OfflineDetection; 2] = [OfflineDetection::Standard, OfflineDetection::Tight];

    /// The name the API and the table use.
    pub fn as_str(self) -> &'static str {
        match self {
            OfflineDetection::Standard => "standard",
            OfflineDetection::Tight => "tight",
        }
    }

    /// Whether this is the default (not stored: a standard device's items keep their size).
    pub fn is_standard(&self) -> bool {
        *self == OfflineDetection::Standard
    }

    /// Validates `value` under `field`: `"standard"` or `"tight"`.
    pub fn parse_field(field: &str, value: &serde_json::Value) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|d| value.as_str() == Some(d.as_str()))
            .ok_or_else(|| ValidationError::new(field, "must be \"standard\" or \"tight\""))
    }
}

/// A device's reporting rhythm as its live state keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rhythm {
    /// `reportEverySeconds`, declared by the owner.
    pub declared: Option<u64>,
    /// `learnedEverySeconds`: the mean gap between reports.
    pub learned: Option<u64>,
    /// `learnedJitterSeconds`: the mean deviation of the gaps from that mean.
    pub jitter: Option<u64>,
    /// `offlineDetection`: how the due time is placed (owner's choice, copied like `declared`).
    pub detection: OfflineDetection,
}

impl Rhythm {
    /// The interval the device is expected to report within: declared, else learned.
    pub fn expected_seconds(&self) -> Option<u64> {
        self.declared.or(self.learned)
    }

    /// The grace period on top of the interval: `max(60 s, interval / 2, 4 x jitter)` (the
    /// jitter only counts for a learned interval: a declared one is the owner's promise);
    /// 60 s for tight detection, which the owner asked to hold to the interval.
    pub fn grace_seconds(&self) -> Option<u64> {
        let expected = self.expected_seconds()?;
        if self.detection == OfflineDetection::Tight {
            return Some(MIN_GRACE_SECONDS);
        }
        let jitter = match self.declared {
            Some(_) => 0,
            None => self.jitter.unwrap_or(0).saturating_mul(4),
        };
        Some(
            MIN_GRACE_SECONDS
                .max(expected / 2)
                .max(jitter)
                .min(MAX_REPORT_EVERY_SECONDS),
        )
    }

    /// The rhythm after a gap of `gap_seconds` between two reports. `ended_offline`: the gap
    /// ended an offline alarm, and counts at most twice the expected interval.
    pub fn learned_after(&self, gap_seconds: i64, ended_offline: bool) -> Rhythm {
        if gap_seconds <= 0 {
            return *self;
        }
        let mut gap = (gap_seconds as u64).min(MAX_REPORT_EVERY_SECONDS);
        if let (true, Some(expected)) = (ended_offline, self.expected_seconds()) {
            gap = gap.min(expected.saturating_mul(2));
        }
        let (mean, deviation) = match (self.learned, self.jitter) {
            (Some(mean), jitter) => {
                let jitter = jitter.unwrap_or(0) as i64;
                let (mean, gap) = (mean as i64, gap as i64);
                // Rounded, so the integer means settle on the gaps instead of one short.
                let next_mean = (7 * mean + gap + 4) / 8;
                let next_jitter = (3 * jitter + (gap - mean).abs() + 2) / 4;
                (next_mean.max(1) as u64, next_jitter.max(0) as u64)
            }
            (None, _) => (gap.max(1), gap / 2),
        };
        Rhythm {
            learned: Some(mean.min(MAX_REPORT_EVERY_SECONDS)),
            jitter: Some(deviation.min(MAX_REPORT_EVERY_SECONDS)),
            ..*self
        }
    }
}

/// When a device last seen at `last_seen` with `rhythm` is offline (see the module's docs), or
/// `None` when no interval is known. Standard: from the end of its `SEEN#` bucket; tight: from
/// `last_seen` itself.
pub fn due_at(last_seen: &Timestamp, device: &DeviceId, rhythm: &Rhythm) -> Option<Timestamp> {
    let silence = (rhythm.expected_seconds()? + rhythm.grace_seconds()?) as i64;
    Some(match rhythm.detection {
        OfflineDetection::Standard => {
            seen_bucket(last_seen, device).plus_seconds(SEEN_GRANULARITY_SECONDS + silence)
        }
        OfflineDetection::Tight => last_seen.plus_seconds(silence),
    })
}

/// Validates a declared `reportEverySeconds` under `field`.
pub fn parse_report_every(field: &str, value: &serde_json::Value) -> Result<u64, ValidationError> {
    value
        .as_u64()
        .filter(|s| (MIN_REPORT_EVERY_SECONDS..=MAX_REPORT_EVERY_SECONDS).contains(s))
        .ok_or_else(|| {
            ValidationError::new(
                field,
                format!(
                    "must be a whole number of seconds from {MIN_REPORT_EVERY_SECONDS} to {MAX_REPORT_EVERY_SECONDS}"
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> DeviceId {
        DeviceId::parse("meter-7").unwrap()
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_epoch_millis(1_700_000_000_000 + secs * 1000).unwrap()
    }

    #[test]
    fn the_due_time_follows_the_bucket_not_each_report() {
        let rhythm = Rhythm {
            declared: Some(60),
            ..Rhythm::default()
        };
        let d = device();
        let first = seen_bucket(&at(0), &d);
        // Every report within one bucket gives the same due time: the entry does not move.
        let due = due_at(&first, &d, &rhythm).unwrap();
        for s in [0, 60, 600, 899] {
            assert_eq!(due_at(&first.plus_seconds(s), &d, &rhythm), Some(due));
        }
        // 15 min (the bucket) + 60 s (interval) + 60 s (grace) after the bucket started.
        assert_eq!(due, first.plus_seconds(900 + 120));
        // A device that keeps reporting every minute moves to the next bucket before its due
        // time: its last report in a bucket is before the bucket's end, the next within 60 s.
        let next = due_at(&first.plus_seconds(900), &d, &rhythm).unwrap();
        assert!(next > due && first.plus_seconds(899 + 60) < due);
    }

    #[test]
    fn a_tight_device_is_due_a_minute_after_its_interval_from_each_report() {
        let d = device();
        let tight = Rhythm {
            declared: Some(60),
            detection: OfflineDetection::Tight,
            ..Rhythm::default()
        };
        let first = seen_bucket(&at(0), &d);
        // Every report moves the due time: interval + 60 s after it, whatever the bucket.
        for s in [0, 60, 600, 899, 900] {
            let seen = first.plus_seconds(s);
            assert_eq!(due_at(&seen, &d, &tight), Some(seen.plus_seconds(120)));
        }
        // A jittery learned interval does not widen the grace: the owner asked for the bound.
        let learned = Rhythm {
            learned: Some(300),
            jitter: Some(100),
            detection: OfflineDetection::Tight,
            ..Rhythm::default()
        };
        assert_eq!(learned.grace_seconds(), Some(60));
        assert_eq!(due_at(&at(0), &d, &learned), Some(at(0).plus_seconds(360)));
        // Without an interval a tight device is not watched either.
        let unknown = Rhythm {
            detection: OfflineDetection::Tight,
            ..Rhythm::default()
        };
        assert_eq!(due_at(&at(0), &d, &unknown), None);
    }

    #[test]
    fn offline_detection_is_standard_or_tight() {
        assert_eq!(
            OfflineDetection::parse_field("offlineDetection", &serde_json::json!("tight")),
            Ok(OfflineDetection::Tight)
        );
        for bad in [
            serde_json::json!("Tight"),
            serde_json::json!(""),
            serde_json::json!(1),
            serde_json::json!(null),
        ] {
            let err = OfflineDetection::parse_field("offlineDetection", &bad).unwrap_err();
            assert_eq!(err.field, "offlineDetection");
        }
    }

    #[test]
    fn the_grace_is_a_minute_half_the_interval_or_four_jitters() {
        let declared = |s| Rhythm {
            declared: Some(s),
            learned: Some(5),
            jitter: Some(10_000),
            ..Rhythm::default()
        };
        assert_eq!(declared(60).grace_seconds(), Some(60));
        assert_eq!(declared(6 * 3600).grace_seconds(), Some(3 * 3600));
        let learned = Rhythm {
            declared: None,
            learned: Some(600),
            jitter: Some(200),
            ..Rhythm::default()
        };
        assert_eq!(learned.grace_seconds(), Some(800));
        assert_eq!(Rhythm::default().grace_seconds(), None);
        assert_eq!(due_at(&at(0), &device(), &Rhythm::default()), None);
    }

    #[test]
    fn a_rhythm_is_learned_from_gaps_and_an_outage_does_not_teach_slowness() {
        let mut r = Rhythm::default().learned_after(300, false);
        assert_eq!((r.learned, r.jitter), (Some(300), Some(150)));
        for _ in 0..40 {
            r = r.learned_after(300, false);
        }
        assert_eq!(r.learned, Some(300));
        assert!(r.jitter.unwrap() <= 2, "{r:?}");
        // Three days offline: counts as 600 s at most.
        let after = r.learned_after(3 * 86_400, true);
        assert!(after.learned.unwrap() <= 300 + 300 / 8 + 1, "{after:?}");
        // A device that really slows down is learned within a few gaps.
        let mut slow = r;
        for _ in 0..30 {
            slow = slow.learned_after(3600, false);
        }
        assert!(slow.learned.unwrap() > 3000, "{slow:?}");
        // Replays and late batches (no gap) teach nothing.
        assert_eq!(r.learned_after(0, false), r);
    }

    #[test]
    fn declared_intervals_are_bounded() {
        assert_eq!(
            parse_report_every("reportEverySeconds", &serde_json::json!(60)),
            Ok(60)
        );
        for bad in [
            serde_json::json!(9),
            serde_json::json!(604_801),
            serde_json::json!(1.5),
            serde_json::json!("60"),
            serde_json::json!(-1),
        ] {
            let err = parse_report_every("reportEverySeconds", &bad).unwrap_err();
            assert_eq!(err.field, "reportEverySeconds");
        }
    }
}
