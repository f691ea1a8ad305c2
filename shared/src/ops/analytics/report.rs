//! The daily report: the segments' tallies merged into the shape of docs/openapi.yaml.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tally::{SegmentTally, HEAT_KEYS, TOP_DEVICES};
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::parse_event_pk;
use crate::model::timestamp::Day;

/// Share of the day's writes above which a key is flagged hot (the target of docs/key-distribution.md).
pub const HOT_SHARE: f64 = 0.10;

/// The daily report as stored and as `GET /admin/reports/{date}` returns it (docs/openapi.yaml, plus
/// the run's own figures).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DailyReport {
    /// The report's day.
    pub date: Day,
    /// Live devices.
    pub devices: DeviceFigures,
    /// Users: people (profiles; the active ones by their own fleets).
    pub users: UserFigures,
    /// Organizations, counted apart from people (absent from reports stored before: zero).
    #[serde(default)]
    pub organizations: OrgFigures,
    /// The day's events.
    pub events: EventFigures,
    /// The devices with the most events of the day, most first.
    pub top_devices: Vec<TopDevice>,
    /// The busiest device partitions and their share of the day's events.
    pub partition_heat: Vec<KeyHeat>,
    /// The busiest event-type index partitions and their share of the day's events.
    pub index_heat: Vec<KeyHeat>,
    /// Share above which a key is flagged hot.
    pub hot_key_threshold: f64,
    /// Events of deleted devices removed by this run.
    pub purged_events: u64,
    /// What the run cost.
    pub run: RunFigures,
}

/// The report's `devices`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceFigures {
    /// Live devices.
    pub total: u64,
    /// Devices per status.
    pub by_status: BTreeMap<String, u64>,
    /// Devices per type.
    pub by_type: BTreeMap<String, u64>,
    /// Devices seen in the 24 hours before the day's end.
    #[serde(rename = "online24h")]
    pub online_24h: u64,
}

/// The report's `users`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserFigures {
    /// Profiles.
    pub total: u64,
    /// People whose own fleet has a device seen in the 30 days before the day's end (an
    /// organization's fleet counts in `organizations`, not here).
    #[serde(rename = "active30d")]
    pub active_30d: u64,
}

/// The report's `organizations`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrgFigures {
    /// Organizations whose fleet has a device seen in the 30 days before the day's end.
    #[serde(rename = "active30d")]
    pub active_30d: u64,
}

/// The report's `events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFigures {
    /// The day's events.
    pub total: u64,
    /// The day's events per type.
    pub by_type: BTreeMap<String, u64>,
}

/// One of the day's busiest devices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopDevice {
    /// Owner.
    pub user_id: UserId,
    /// Device.
    pub device_id: DeviceId,
    /// Its events of the day.
    pub events: u64,
}

/// One key's share of the day's writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyHeat {
    /// The partition key.
    pub key: String,
    /// The day's writes to it.
    pub writes: u64,
    /// Its share of the day's events, to four decimals.
    pub share: f64,
    /// Whether the share is above [`HOT_SHARE`].
    pub hot: bool,
}

/// The run's own figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFigures {
    /// Scan segments.
    pub segments: u32,
    /// Items scanned.
    pub items_scanned: u64,
    /// Checkpoint writes (the segments' progress saved). Reports stored before this name
    /// spelled it `pages` (one write per unit then).
    #[serde(alias = "pages")]
    pub checkpoint_writes: u64,
    /// DynamoDB requests issued.
    pub requests: u64,
    /// Read capacity consumed.
    pub rcu: f64,
    /// Write capacity consumed (the purge).
    pub wcu: f64,
    /// The longest segment's time, milliseconds.
    pub duration_ms: u64,
}

/// Merges the segments' tallies into the report.
pub fn build_report(day: Day, tallies: &[&SegmentTally], segments: u32) -> DailyReport {
    let mut total = SegmentTally::default();
    let mut partitions = Vec::new();
    for t in tallies {
        total.add(t);
        partitions.extend(t.top_partitions.iter().cloned());
    }
    partitions.sort_by(|a, b| b.writes.cmp(&a.writes).then(a.key.cmp(&b.key)));
    let top_devices = partitions
        .iter()
        .filter_map(|p| {
            let (user_id, device_id) = parse_event_pk(&p.key).ok()?;
            Some(TopDevice {
                user_id,
                device_id,
                events: p.writes,
            })
        })
        .take(TOP_DEVICES)
        .collect();
    let partition_heat = heat(
        partitions.iter().map(|p| (p.key.as_str(), p.writes)),
        total.events,
    );
    let mut index_writes: Vec<(&str, u64)> = total
        .index_writes
        .iter()
        .map(|(k, w)| (k.as_str(), *w))
        .collect();
    index_writes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let index_heat = heat(index_writes.into_iter(), total.events);
    DailyReport {
        date: day,
        devices: DeviceFigures {
            total: total.devices,
            by_status: total.devices_by_status,
            by_type: total.devices_by_type,
            online_24h: total.online_24h,
        },
        users: UserFigures {
            total: total.users,
            active_30d: total.active_users,
        },
        organizations: OrgFigures {
            active_30d: total.active_orgs,
        },
        events: EventFigures {
            total: total.events,
            by_type: total.events_by_type,
        },
        top_devices,
        partition_heat,
        index_heat,
        hot_key_threshold: HOT_SHARE,
        purged_events: total.purged,
        run: RunFigures {
            segments,
            items_scanned: total.scanned,
            checkpoint_writes: total.checkpoint_writes,
            requests: total.requests,
            rcu: total.read_units,
            wcu: total.write_units,
            duration_ms: total.duration_ms,
        },
    }
}

/// The first [`HEAT_KEYS`] of `keys` (already ranked) with their share of the day's `events`
/// and whether that share makes them hot.
fn heat<'a>(keys: impl Iterator<Item = (&'a str, u64)>, events: u64) -> Vec<KeyHeat> {
    let share = |writes: u64| {
        if events == 0 {
            0.0
        } else {
            (writes as f64 / events as f64 * 10_000.0).round() / 10_000.0
        }
    };
    keys.take(HEAT_KEYS)
        .map(|(key, writes)| KeyHeat {
            key: key.to_string(),
            writes,
            share: share(writes),
            hot: share(writes) > HOT_SHARE,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::keys::event_pk;

    #[test]
    fn report_merges_segments_and_flags_hot_keys() {
        let partition = |user: &str, device: &str| {
            event_pk(
                &UserId::parse(user).unwrap(),
                &DeviceId::parse(device).unwrap(),
            )
        };
        let mut a = SegmentTally::default();
        for _ in 0..8 {
            a.count_event(&partition("u", "hot"), "t", None);
        }
        a.close_partition();
        let mut b = SegmentTally::default();
        for i in 0..20 {
            b.count_event(&partition("v", &format!("d{i}")), "t", None);
        }
        b.close_partition();
        let day = Day::parse_field("day", "2024-04-10").unwrap();
        let report = build_report(day, &[&a, &b], 2);
        assert_eq!(report.events.total, 28);
        assert_eq!(report.top_devices[0].device_id.as_str(), "hot");
        assert_eq!(report.top_devices[0].user_id.as_str(), "u");
        assert_eq!(report.top_devices[0].events, 8);
        assert!(report.partition_heat[0].hot);
        assert!(!report.partition_heat[1].hot);
        assert_eq!(report.partition_heat[0].share, 0.2857);
        // The API's spelling of the fields.
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["date"], "2024-04-10");
        assert_eq!(json["topDevices"][0]["deviceId"], "hot");
        assert_eq!(json["devices"]["online24h"], 0);
        assert_eq!(json["users"]["active30d"], 0);
        assert_eq!(json["run"]["itemsScanned"], 0);
    }
}
