//! The resolutions of the summaries, their UTC-aligned buckets and the spans their items hold.

use serde::{Deserialize, Serialize};

/// Milliseconds in five minutes.
pub const FIVE_MINUTES_MS: i64 = 5 * 60 * 1000;
/// Milliseconds in an hour.
pub const HOUR_MS: i64 = 60 * 60 * 1000;
/// Milliseconds in a day.
pub const DAY_MS: i64 = 24 * HOUR_MS;

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
