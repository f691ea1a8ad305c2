//! The daily report: the segments' tallies merged into the DESIGN §4 shape.

use serde_json::{json, Value};

use super::{SegmentTally, HEAT_KEYS, HOT_SHARE, TOP_DEVICES};

/// Merges the segments' tallies into the report (DESIGN §4 shape, plus the run's figures).
pub fn build_report(day: &str, tallies: &[&SegmentTally], segments: u32) -> Value {
    let mut total = SegmentTally::default();
    let mut partitions = Vec::new();
    for t in tallies {
        total.add(t);
        partitions.extend(t.top_partitions.iter().cloned());
    }
    partitions.sort_by(|a, b| b.writes.cmp(&a.writes).then(a.key.cmp(&b.key)));
    let top_devices: Vec<Value> = partitions
        .iter()
        .take(TOP_DEVICES)
        .map(|p| {
            let parts: Vec<&str> = p.key.split('#').collect();
            json!({"userId": parts.get(1), "deviceId": parts.get(3), "events": p.writes})
        })
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
    json!({
        "date": day,
        "devices": {
            "total": total.devices,
            "byStatus": total.devices_by_status,
            "byType": total.devices_by_type,
            "online24h": total.online_24h,
        },
        "users": {"total": total.users, "active30d": total.active_users},
        "events": {"total": total.events, "byType": total.events_by_type},
        "topDevices": top_devices,
        "partitionHeat": partition_heat,
        "indexHeat": index_heat,
        "hotKeyThreshold": HOT_SHARE,
        "purgedEvents": total.purged,
        "run": {
            "segments": segments,
            "itemsScanned": total.scanned,
            "pages": total.pages,
            "requests": total.requests,
            "rcu": total.read_units,
            "wcu": total.write_units,
            "durationMs": total.duration_ms,
        },
    })
}

/// The first [`HEAT_KEYS`] of `keys` (already ranked) with their share of the day's `events`
/// and whether that share makes them hot.
fn heat<'a>(keys: impl Iterator<Item = (&'a str, u64)>, events: u64) -> Vec<Value> {
    let share = |writes: u64| {
        if events == 0 {
            0.0
        } else {
            (writes as f64 / events as f64 * 10_000.0).round() / 10_000.0
        }
    };
    keys.take(HEAT_KEYS)
        .map(|(key, writes)| {
            json!({"key": key, "writes": writes, "share": share(writes), "hot": share(writes) > HOT_SHARE})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_merges_segments_and_flags_hot_keys() {
        let mut a = SegmentTally::default();
        for _ in 0..8 {
            a.count_event("USER#u#DEVICE#hot", "t", None);
        }
        a.close_partition();
        let mut b = SegmentTally::default();
        for i in 0..20 {
            b.count_event(&format!("USER#v#DEVICE#d{i}"), "t", None);
        }
        b.close_partition();
        let report = build_report("2024-04-10", &[&a, &b], 2);
        assert_eq!(report["events"]["total"], 28);
        assert_eq!(report["topDevices"][0]["deviceId"], "hot");
        assert_eq!(report["topDevices"][0]["events"], 8);
        assert_eq!(report["partitionHeat"][0]["hot"], true);
        assert_eq!(report["partitionHeat"][1]["hot"], false);
        assert_eq!(report["partitionHeat"][0]["share"], 0.2857);
    }
}
