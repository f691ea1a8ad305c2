//! Function configuration, from the environment only, so any Lambda runtime can drive them.
//!
//! One style for every function's settings: a struct with `from_env()` and
//! `from_lookup(lookup)` (a map in tests), each number read by [`number_setting`] /
//! [`optional_number_setting`] so a bad value is an error naming the variable.

use crate::model::error::FleetError;

use crate::model::shard::{parse_searchable, ShardCounts, DEFAULT_SEARCHABLE_EVENT_TYPES};

/// Everything a function reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// `TABLE_NAME`: the single table.
    pub table_name: String,
    /// `RETENTION_DAYS`: events expire this many days after `at` (default 90).
    pub retention_days: u32,
    /// `HOURLY_RETENTION_DAYS`: hourly summaries expire this many days after their day
    /// (default 400, never shorter than `RETENTION_DAYS`).
    pub hourly_retention_days: u32,
    /// `DAILY_RETENTION_DAYS`: daily summaries expire this many days after their month
    /// (default 1826, five years; never shorter than `HOURLY_RETENTION_DAYS`).
    pub daily_retention_days: u32,
    /// `STATUS_SHARDS`, `ACTIVE_STATUS_SHARDS`, `EVENT_TYPE_SHARDS`, `SEARCHABLE_EVENT_TYPES`.
    pub shards: ShardCounts,
    /// `DEVICES_PER_SHARD` (default 100): how many devices' live state one partition of an
    /// owner holds before the owner's fleet spreads over more (see `ops::devices`).
    pub devices_per_partition: u32,
    /// `TOKEN_OVERLAP_SECONDS`: how long a device's replaced token keeps working after a
    /// rotation (default one hour, at most seven days; 0 stops it at once).
    pub token_overlap_seconds: u32,
}

/// Default of `DEVICES_PER_SHARD`: at the per-device batch limit of the template (1 batch/s,
/// burst 10) and one write unit per batch, 100 devices keep a partition at a tenth of
/// DynamoDB's 1,000 WCU/s, which leaves room for bursts and for several containers each
/// admitting a device's burst.
pub const DEFAULT_DEVICES_PER_PARTITION: u32 = 100;

/// Default of `HOURLY_RETENTION_DAYS`.
pub const DEFAULT_HOURLY_RETENTION_DAYS: u32 = 400;

/// Default of `DAILY_RETENTION_DAYS` (five years, leap days included).
pub const DEFAULT_DAILY_RETENTION_DAYS: u32 = 1826;

/// Default of `TOKEN_OVERLAP_SECONDS`.
pub const DEFAULT_TOKEN_OVERLAP_SECONDS: u32 = 3600;

impl FleetConfig {
    /// A configuration for `table_name` with every other setting at its default.
    pub fn for_table(table_name: impl Into<String>) -> Self {
        Self {
            table_name: table_name.into(),
            retention_days: 90,
            hourly_retention_days: DEFAULT_HOURLY_RETENTION_DAYS,
            daily_retention_days: DEFAULT_DAILY_RETENTION_DAYS,
            shards: ShardCounts::default(),
            devices_per_partition: DEFAULT_DEVICES_PER_PARTITION,
            token_overlap_seconds: DEFAULT_TOKEN_OVERLAP_SECONDS,
        }
    }

    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, FleetError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, FleetError> {
        let table_name = lookup("TABLE_NAME")
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| FleetError::Internal("TABLE_NAME is not set".into()))?;
        let defaults = ShardCounts::default();
        let event_type =
            number_setting(&lookup, "EVENT_TYPE_SHARDS", defaults.event_type, 1..=1000)?;
        let retention_days = number_setting(&lookup, "RETENTION_DAYS", 90, 1..=3650)?;
        // Each resolution outlives the finer one it summarises: a series never has a range
        // where the coarser summaries are gone and the finer ones still there.
        let hourly_retention_days = number_setting(
            &lookup,
            "HOURLY_RETENTION_DAYS",
            DEFAULT_HOURLY_RETENTION_DAYS.max(retention_days),
            1..=36_500,
        )?;
        let daily_retention_days = number_setting(
            &lookup,
            "DAILY_RETENTION_DAYS",
            DEFAULT_DAILY_RETENTION_DAYS.max(hourly_retention_days),
            1..=36_500,
        )?;
        outlives(
            ("HOURLY_RETENTION_DAYS", hourly_retention_days),
            ("RETENTION_DAYS", retention_days),
        )?;
        outlives(
            ("DAILY_RETENTION_DAYS", daily_retention_days),
            ("HOURLY_RETENTION_DAYS", hourly_retention_days),
        )?;
        Ok(Self {
            table_name,
            retention_days,
            hourly_retention_days,
            daily_retention_days,
            shards: ShardCounts {
                status: number_setting(&lookup, "STATUS_SHARDS", defaults.status, 1..=1000)?,
                active_status: number_setting(
                    &lookup,
                    "ACTIVE_STATUS_SHARDS",
                    defaults.active_status,
                    1..=1000,
                )?,
                event_type,
                searchable: parse_searchable(
                    &lookup("SEARCHABLE_EVENT_TYPES")
                        .unwrap_or_else(|| DEFAULT_SEARCHABLE_EVENT_TYPES.to_string()),
                    event_type,
                )?,
            },
            devices_per_partition: number_setting(
                &lookup,
                "DEVICES_PER_SHARD",
                DEFAULT_DEVICES_PER_PARTITION,
                1..=100_000,
            )?,
            token_overlap_seconds: number_setting(
                &lookup,
                "TOKEN_OVERLAP_SECONDS",
                DEFAULT_TOKEN_OVERLAP_SECONDS,
                0..=7 * 86_400,
            )?,
        })
    }
}

/// Ok when the coarser retention `(name, days)` is at least the finer one. The error names
/// both and what to raise: a replay run with a long `RETENTION_DAYS` (the samples' 3650) under
/// the template's summary retentions (400, 1826) otherwise only learns a range.
fn outlives(coarse: (&str, u32), fine: (&str, u32)) -> Result<(), FleetError> {
    if coarse.1 >= fine.1 {
        return Ok(());
    }
    Err(FleetError::Internal(format!(
        "{}={} is shorter than {}={}: a coarser summary must outlive the finer data it \
         summarises, so a longer RETENTION_DAYS needs the summaries' retentions raised with it: \
         raise HOURLY_RETENTION_DAYS and DAILY_RETENTION_DAYS to at least RETENTION_DAYS \
         (and DAILY_RETENTION_DAYS to at least HOURLY_RETENTION_DAYS)",
        coarse.0, coarse.1, fine.0, fine.1
    )))
}

/// The setting `name` read through `lookup`: `default` when unset or blank, an error naming
/// the variable when it is not a number in `range`. Every function setting is read this way.
pub fn number_setting<T>(
    lookup: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, FleetError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    Ok(optional_number_setting(lookup, name, range)?.unwrap_or(default))
}

/// Like [`number_setting`] for a setting without a default: `None` when unset or blank.
pub fn optional_number_setting<T>(
    lookup: &impl Fn(&str) -> Option<String>,
    name: &str,
    range: std::ops::RangeInclusive<T>,
) -> Result<Option<T>, FleetError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let Some(raw) = lookup(name).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match raw.trim().parse::<T>() {
        Ok(v) if range.contains(&v) => Ok(Some(v)),
        _ => Err(FleetError::Internal(format!(
            "{name}={raw:?} is not a number in {}..={}",
            range.start(),
            range.end()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    use crate::model::ids::EventType;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn reads_defaults_and_overrides() {
        let c = FleetConfig::from_lookup(lookup(&[("TABLE_NAME", "fleet")])).unwrap();
        assert_eq!(c, FleetConfig::for_table("fleet"));
        let c = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("RETENTION_DAYS", "30"),
            ("EVENT_TYPE_SHARDS", "20"),
            ("TOKEN_OVERLAP_SECONDS", "0"),
        ]))
        .unwrap();
        assert_eq!(c.retention_days, 30);
        assert_eq!(c.hourly_retention_days, 400);
        assert_eq!(c.daily_retention_days, 1826);
        // A raw retention past the hourly default raises the summaries' defaults with it.
        let long =
            FleetConfig::from_lookup(lookup(&[("TABLE_NAME", "t"), ("RETENTION_DAYS", "3650")]))
                .unwrap();
        assert_eq!(
            (long.hourly_retention_days, long.daily_retention_days),
            (3650, 3650)
        );
        assert_eq!(c.shards.event_type, 20);
        assert_eq!(c.token_overlap_seconds, 0);
        let alarm = EventType::parse("alarm").unwrap();
        assert_eq!(
            c.shards.type_shards(&alarm),
            Some(20),
            "listed without a count"
        );
        assert_eq!(
            c.shards
                .type_shards(&EventType::parse("temperature").unwrap()),
            None
        );
        let c = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("SEARCHABLE_EVENT_TYPES", " temperature:120 , door "),
        ]))
        .unwrap();
        assert_eq!(
            c.shards
                .type_shards(&EventType::parse("temperature").unwrap()),
            Some(120)
        );
        assert_eq!(
            c.shards.type_shards(&EventType::parse("door").unwrap()),
            Some(8)
        );
        assert_eq!(c.shards.type_shards(&alarm), None);
        let week_and_a_second = [("TABLE_NAME", "t"), ("TOKEN_OVERLAP_SECONDS", "604801")];
        let err = FleetConfig::from_lookup(lookup(&week_and_a_second)).unwrap_err();
        assert!(err.to_string().contains("TOKEN_OVERLAP_SECONDS"), "{err}");
    }

    #[test]
    fn rejects_missing_table_and_bad_numbers_by_name() {
        let err = FleetConfig::from_lookup(lookup(&[])).unwrap_err();
        assert!(err.to_string().contains("TABLE_NAME"));
        let err = FleetConfig::from_lookup(lookup(&[("TABLE_NAME", "t"), ("RETENTION_DAYS", "0")]))
            .unwrap_err();
        assert!(err.to_string().contains("RETENTION_DAYS"));
        // Hourly summaries kept shorter than raw readings, daily shorter than hourly.
        let err = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("RETENTION_DAYS", "90"),
            ("HOURLY_RETENTION_DAYS", "60"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("HOURLY_RETENTION_DAYS"), "{err}");
        let err = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("HOURLY_RETENTION_DAYS", "500"),
            ("DAILY_RETENTION_DAYS", "499"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("DAILY_RETENTION_DAYS"), "{err}");
        let err = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("DAILY_RETENTION_DAYS", "five years"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("DAILY_RETENTION_DAYS"), "{err}");
        let err = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("ACTIVE_STATUS_SHARDS", "many"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("ACTIVE_STATUS_SHARDS"));
        for bad in ["alarm:0", "a#b", "alarm,alarm", "alarm:x"] {
            let err = FleetConfig::from_lookup(lookup(&[
                ("TABLE_NAME", "t"),
                ("SEARCHABLE_EVENT_TYPES", bad),
            ]))
            .unwrap_err();
            assert!(
                err.to_string().contains("SEARCHABLE_EVENT_TYPES"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_long_raw_retention_under_the_template_summaries_says_to_raise_both() {
        // The samples' replay runs with RETENTION_DAYS=3650 while the template passes its
        // summaries' retentions (400 and 1826): the error says what to raise, not just a range.
        let err = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("RETENTION_DAYS", "3650"),
            ("HOURLY_RETENTION_DAYS", "400"),
            ("DAILY_RETENTION_DAYS", "1826"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("HOURLY_RETENTION_DAYS=400 is shorter than RETENTION_DAYS=3650")
                && err.contains("raise HOURLY_RETENTION_DAYS and DAILY_RETENTION_DAYS"),
            "{err}"
        );
        let err = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("RETENTION_DAYS", "3650"),
            ("HOURLY_RETENTION_DAYS", "3650"),
            ("DAILY_RETENTION_DAYS", "1826"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("DAILY_RETENTION_DAYS=1826 is shorter than HOURLY_RETENTION_DAYS=3650"),
            "{err}"
        );
        let all = FleetConfig::from_lookup(lookup(&[
            ("TABLE_NAME", "t"),
            ("RETENTION_DAYS", "3650"),
            ("HOURLY_RETENTION_DAYS", "3650"),
            ("DAILY_RETENTION_DAYS", "3650"),
        ]))
        .unwrap();
        assert_eq!(all.daily_retention_days, 3650);
    }
}
