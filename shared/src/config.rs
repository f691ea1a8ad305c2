//! Function configuration, from the environment only, so any Lambda runtime can drive them.
//!
//! One style for every function's settings: a struct with `from_env()` and
//! `from_lookup(lookup)` (a map in tests), each number read by [`number`] /
//! [`optional_number`] so a bad value is an error naming the variable.

use crate::error::FleetError;

/// Shard counts of the write-sharded index keys. Writers and readers must agree, so these are
/// set once for the whole stack (template `Globals`), derived from expected peak throughput
/// with [`crate::shard::shards_for_peak_wcu`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardCounts {
    /// `STATUS#{status}#{shard}` on GSI1 (devices by status).
    pub status: u16,
    /// `TYPE#{type}#{day}#{shard}` on GSI1 (events by type and day).
    pub event_type: u16,
    /// `OWNER#{userId}#{shard}` on GSI2 (a user's events across devices).
    pub owner: u16,
}

impl Default for ShardCounts {
    fn default() -> Self {
        Self {
            status: 4,
            event_type: 8,
            owner: 2,
        }
    }
}

/// Everything a function reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// `TABLE_NAME`: the single table.
    pub table_name: String,
    /// `RETENTION_DAYS`: events expire this many days after `at` (default 90).
    pub retention_days: u32,
    /// `STATUS_SHARDS`, `EVENT_TYPE_SHARDS`, `OWNER_SHARDS`.
    pub shards: ShardCounts,
    /// `TOKEN_OVERLAP_SECONDS`: how long a device's replaced token keeps working after a
    /// rotation (default one hour, at most seven days; 0 stops it at once).
    pub token_overlap_seconds: u32,
}

/// Default of `TOKEN_OVERLAP_SECONDS`.
pub const DEFAULT_TOKEN_OVERLAP_SECONDS: u32 = 3600;

impl FleetConfig {
    /// A configuration for `table_name` with every other setting at its default.
    pub fn for_table(table_name: impl Into<String>) -> Self {
        Self {
            table_name: table_name.into(),
            retention_days: 90,
            shards: ShardCounts::default(),
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
        Ok(Self {
            table_name,
            retention_days: number(&lookup, "RETENTION_DAYS", 90, 1..=3650)?,
            shards: ShardCounts {
                status: number(&lookup, "STATUS_SHARDS", defaults.status, 1..=1000)?,
                event_type: number(&lookup, "EVENT_TYPE_SHARDS", defaults.event_type, 1..=1000)?,
                owner: number(&lookup, "OWNER_SHARDS", defaults.owner, 1..=1000)?,
            },
            token_overlap_seconds: number(
                &lookup,
                "TOKEN_OVERLAP_SECONDS",
                DEFAULT_TOKEN_OVERLAP_SECONDS,
                0..=7 * 86_400,
            )?,
        })
    }
}

/// The setting `name` read through `lookup`: `default` when unset or blank, an error naming
/// the variable when it is not a number in `range`. Every function setting is read this way.
pub fn number<T>(
    lookup: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, FleetError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    Ok(optional_number(lookup, name, range)?.unwrap_or(default))
}

/// Like [`number`] for a setting without a default: `None` when unset or blank.
pub fn optional_number<T>(
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
        assert_eq!(c.shards.event_type, 20);
        assert_eq!(c.token_overlap_seconds, 0);
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
        let err =
            FleetConfig::from_lookup(lookup(&[("TABLE_NAME", "t"), ("OWNER_SHARDS", "many")]))
                .unwrap_err();
        assert!(err.to_string().contains("OWNER_SHARDS"));
    }
}
