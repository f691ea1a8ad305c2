//! Ingestion settings, from the environment, read like every function setting.

use std::time::Duration;

use crate::model::error::FleetError;
use crate::model::settings::number_setting;
use crate::ops::limits::Rate;

/// Ingestion settings, from the environment.
#[derive(Clone, Debug, PartialEq)]
pub struct IngestConfig {
    /// `REGISTRATION_CACHE_SECONDS` (default 30): how long a warm Lambda trusts a registration
    /// it read. A deleted or re-registered device stops working within this window.
    pub registration_cache: Duration,
    /// `MAX_CLOCK_SKEW_SECONDS` (default 300): how far in the future an event may be.
    pub max_clock_skew: Duration,
    /// `INGEST_RETRY_MS` (default 5000): how long to keep retrying unprocessed or throttled
    /// writes, further bounded by the Lambda's remaining time.
    pub retry_window: Duration,
    /// `NEGATIVE_CACHE_SECONDS` (default 10): how long an unknown device, or a device whose
    /// registration a read showed not to match a presented token, is answered 401 without
    /// another read. A device registered (or re-registered) within this window after such an
    /// attempt is refused until it passes.
    pub negative_cache: Duration,
    /// `RULES_CACHE_SECONDS` (default 60): how long a warm Lambda uses an owner's alarm rules
    /// it read. A created, changed or deleted rule applies to every batch within this time.
    pub rules_cache: Duration,
    /// `INGEST_DEVICE_RATE_PER_SECOND` and `INGEST_DEVICE_BURST` (unset: no limit; the
    /// template sets both): batches one device may send to one execution environment, answered
    /// 429 with `Retry-After` above it. See [`crate::ops::limits`] for what a per-container limit
    /// does when API Gateway spreads requests.
    pub device_rate: Rate,
    /// `HOURLY_RETENTION_DAYS` (default 400, template `HourlyRetentionDays`): days a day item
    /// of hourly summaries is kept after its day ends.
    pub hourly_retention_days: u32,
    /// `DAILY_RETENTION_DAYS` (default 1826, template `DailyRetentionDays`): days a month item
    /// of daily summaries is kept after its month ends.
    pub daily_retention_days: u32,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            registration_cache: Duration::from_secs(30),
            max_clock_skew: Duration::from_secs(300),
            retry_window: Duration::from_secs(5),
            negative_cache: Duration::from_secs(10),
            rules_cache: Duration::from_secs(60),
            device_rate: Rate::UNLIMITED,
            hourly_retention_days: 400,
            daily_retention_days: 1826,
        }
    }
}

impl IngestConfig {
    /// Reads the settings from the process environment (defaults for what is unset).
    pub fn from_env() -> Result<Self, FleetError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup` (the environment, or a map in tests), each with
    /// [`number_setting`] as every function setting is: the default when unset or blank, an error
    /// naming the variable when it is not a number in range.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, FleetError> {
        let d = Self::default();
        let seconds = |name: &str, default: Duration| {
            number_setting(&lookup, name, default.as_secs(), 0..=86_400).map(Duration::from_secs)
        };
        let retry_ms = d.retry_window.as_millis() as u64;
        Ok(Self {
            registration_cache: seconds("REGISTRATION_CACHE_SECONDS", d.registration_cache)?,
            max_clock_skew: seconds("MAX_CLOCK_SKEW_SECONDS", d.max_clock_skew)?,
            retry_window: number_setting(&lookup, "INGEST_RETRY_MS", retry_ms, 0..=900_000)
                .map(Duration::from_millis)?,
            negative_cache: seconds("NEGATIVE_CACHE_SECONDS", d.negative_cache)?,
            rules_cache: seconds("RULES_CACHE_SECONDS", d.rules_cache)?,
            device_rate: Rate {
                per_second: number_setting(
                    &lookup,
                    "INGEST_DEVICE_RATE_PER_SECOND",
                    d.device_rate.per_second,
                    0.0..=1e6,
                )?,
                burst: number_setting(
                    &lookup,
                    "INGEST_DEVICE_BURST",
                    d.device_rate.burst,
                    0.0..=1e6,
                )?,
            },
            hourly_retention_days: number_setting(
                &lookup,
                "HOURLY_RETENTION_DAYS",
                d.hourly_retention_days,
                1..=36_500,
            )?,
            daily_retention_days: number_setting(
                &lookup,
                "DAILY_RETENTION_DAYS",
                d.daily_retention_days,
                1..=36_500,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<IngestConfig, FleetError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        IngestConfig::from_lookup(move |name| map.get(name).cloned())
    }

    #[test]
    fn settings_read_like_every_function_setting() {
        assert_eq!(config(&[]).unwrap(), IngestConfig::default());
        assert_eq!(
            config(&[("REGISTRATION_CACHE_SECONDS", " ")]).unwrap(),
            IngestConfig::default(),
            "blank is unset"
        );
        let c = config(&[
            ("REGISTRATION_CACHE_SECONDS", "5"),
            ("INGEST_RETRY_MS", "400"),
            ("INGEST_DEVICE_RATE_PER_SECOND", "2.5"),
            ("INGEST_DEVICE_BURST", "10"),
            ("HOURLY_RETENTION_DAYS", "30"),
        ])
        .unwrap();
        assert_eq!(c.registration_cache, Duration::from_secs(5));
        assert_eq!(c.retry_window, Duration::from_millis(400));
        assert_eq!((c.device_rate.per_second, c.device_rate.burst), (2.5, 10.0));
        assert_eq!(
            (c.hourly_retention_days, c.daily_retention_days),
            (30, 1826)
        );
        for (name, bad) in [
            ("INGEST_RETRY_MS", "soon"),
            ("NEGATIVE_CACHE_SECONDS", "-1"),
            ("INGEST_DEVICE_BURST", "NaN"),
            ("MAX_CLOCK_SKEW_SECONDS", "86401"),
        ] {
            let err = config(&[(name, bad)]).unwrap_err().to_string();
            assert!(err.contains(name), "{name}={bad}: {err}");
        }
    }
}
