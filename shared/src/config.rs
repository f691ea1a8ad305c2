//! Function configuration, from the environment only, so any Lambda runtime can drive them.
//!
//! One style for every function's settings: a struct with `from_env()` and
//! `from_lookup(lookup)` (a map in tests), each number read by [`number`] /
//! [`optional_number`] so a bad value is an error naming the variable.

use crate::error::FleetError;
use crate::ids::EventType;
use crate::items::DeviceStatus;

/// How the write-sharded index keys spread. Writers and readers must agree, so these are set
/// once for the whole stack (template `Globals`), each sized with
/// [`crate::shard::shards_for_peak_wcu`] for its own key: one global count would be too small
/// for the busiest key and a needless fan-out for the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardCounts {
    /// `STATUS_SHARDS`: shards of `STATUS#{status}#{shard}` (devices by status) for every
    /// status but `active`.
    pub status: u16,
    /// `ACTIVE_STATUS_SHARDS`: shards of `STATUS#active#{shard}`, where nearly every device of
    /// a fleet sits and where the `SEEN#` entries move.
    pub active_status: u16,
    /// `EVENT_TYPE_SHARDS`: shards of `TYPE#{type}#{day}#{shard}` for a searchable type listed
    /// without its own count.
    pub event_type: u16,
    /// `SEARCHABLE_EVENT_TYPES` (`alarm,error:16`): the event types operators search (AP-09),
    /// each with its shard count. Only events of these types are copied into GSI1; every
    /// other event is one item and one write unit.
    pub searchable: Vec<(EventType, u16)>,
}

/// Default of `SEARCHABLE_EVENT_TYPES`: the types an operator looks for across fleets.
pub const DEFAULT_SEARCHABLE_EVENT_TYPES: &str = "alarm,error,fault";

impl Default for ShardCounts {
    fn default() -> Self {
        let event_type = 8;
        Self {
            status: 4,
            active_status: 64,
            event_type,
            searchable: parse_searchable(DEFAULT_SEARCHABLE_EVENT_TYPES, event_type)
                .expect("the default parses"),
        }
    }
}

impl ShardCounts {
    /// Shards of `STATUS#{status}#{shard}`.
    pub fn status_shards(&self, status: DeviceStatus) -> u16 {
        match status {
            DeviceStatus::Active => self.active_status,
            _ => self.status,
        }
    }

    /// Shards of `TYPE#{type}#...` when `event_type` is searchable; `None` when its events are
    /// not indexed.
    pub fn type_shards(&self, event_type: &EventType) -> Option<u16> {
        self.searchable
            .iter()
            .find(|(t, _)| t == event_type)
            .map(|(_, n)| *n)
    }
}

/// Parses `SEARCHABLE_EVENT_TYPES`: comma-separated types, each optionally `:shards`.
pub fn parse_searchable(
    text: &str,
    default_shards: u16,
) -> Result<Vec<(EventType, u16)>, FleetError> {
    let bad = |why: String| FleetError::Internal(format!("SEARCHABLE_EVENT_TYPES={text:?}: {why}"));
    let mut types: Vec<(EventType, u16)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, shards) = match entry.split_once(':') {
            Some((name, count)) => match count.trim().parse::<u16>() {
                Ok(n) if (1..=1000).contains(&n) => (name.trim(), n),
                _ => return Err(bad(format!("{count:?} is not a shard count in 1..=1000"))),
            },
            None => (entry, default_shards),
        };
        let event_type = EventType::parse(name).map_err(|e| bad(e.to_string()))?;
        if types.iter().any(|(t, _)| *t == event_type) {
            return Err(bad(format!("{name} is listed twice")));
        }
        types.push((event_type, shards));
    }
    Ok(types)
}

/// Everything a function reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// `TABLE_NAME`: the single table.
    pub table_name: String,
    /// `RETENTION_DAYS`: events expire this many days after `at` (default 90).
    pub retention_days: u32,
    /// `STATUS_SHARDS`, `ACTIVE_STATUS_SHARDS`, `EVENT_TYPE_SHARDS`, `SEARCHABLE_EVENT_TYPES`.
    pub shards: ShardCounts,
    /// `DEVICES_PER_SHARD` (default 100): how many devices' live state one partition of an
    /// owner holds before the owner's fleet spreads over more (see `ops::devices`).
    pub devices_per_shard: u32,
    /// `TOKEN_OVERLAP_SECONDS`: how long a device's replaced token keeps working after a
    /// rotation (default one hour, at most seven days; 0 stops it at once).
    pub token_overlap_seconds: u32,
}

/// Default of `DEVICES_PER_SHARD`: at the per-device batch limit of the template (1 batch/s,
/// burst 10) and one write unit per batch, 100 devices keep a partition at a tenth of
/// DynamoDB's 1,000 WCU/s, which leaves room for bursts and for several containers each
/// admitting a device's burst.
pub const DEFAULT_DEVICES_PER_SHARD: u32 = 100;

/// Default of `TOKEN_OVERLAP_SECONDS`.
pub const DEFAULT_TOKEN_OVERLAP_SECONDS: u32 = 3600;

impl FleetConfig {
    /// A configuration for `table_name` with every other setting at its default.
    pub fn for_table(table_name: impl Into<String>) -> Self {
        Self {
            table_name: table_name.into(),
            retention_days: 90,
            shards: ShardCounts::default(),
            devices_per_shard: DEFAULT_DEVICES_PER_SHARD,
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
        let event_type = number(&lookup, "EVENT_TYPE_SHARDS", defaults.event_type, 1..=1000)?;
        Ok(Self {
            table_name,
            retention_days: number(&lookup, "RETENTION_DAYS", 90, 1..=3650)?,
            shards: ShardCounts {
                status: number(&lookup, "STATUS_SHARDS", defaults.status, 1..=1000)?,
                active_status: number(
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
            devices_per_shard: number(
                &lookup,
                "DEVICES_PER_SHARD",
                DEFAULT_DEVICES_PER_SHARD,
                1..=100_000,
            )?,
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
}
