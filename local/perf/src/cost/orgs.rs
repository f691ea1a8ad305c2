//! Organizations (issue 33) in the cost model: the membership check every organization
//! request makes, and what moving a device between fleets costs when its history is copied.

use std::fmt::Write as _;

use shared::model::ids::{EventType, UserId};
use shared::model::shard::ShardCounts;
use shared::model::timestamp::Day;

use super::prices::{LambdaBilling, MonthlyCost, RRU_USD, SECONDS_PER_MONTH, WRU_USD};
use crate::simulate::{
    device_id, event_item, group, millions, org_id, type_mark_item, user_id, ItemSizes, Simulation,
    DEFAULT_DAY, MEMBERSHIP_READ_UNITS,
};
use fleet_testkit::capacity::{
    item_size, write_units, write_units_of_change, READ_UNIT_BYTES, TRANSACTION_FACTOR,
};

/// Days of history the move's figure is for (the "30 days of one-minute readings").
pub const MOVE_HISTORY_DAYS: u64 = 30;

/// One kind of item a move copies: how many, and the units of each.
#[derive(Clone, Debug, PartialEq)]
pub struct MovedItems {
    /// What they are.
    pub what: String,
    /// How many.
    pub count: f64,
    /// Read units of each: its share of the consistent Query pages that read them (1 unit
    /// per 4 KB).
    pub read_units: f64,
    /// Write units of each: its put at the new owner and its delete at the old, with their
    /// index entries (a transaction's items bill their table write twice).
    pub write_units: f64,
}

impl MovedItems {
    /// USD of all of them.
    pub fn usd(&self) -> f64 {
        self.count * (self.read_units * RRU_USD + self.write_units * WRU_USD)
    }
}

/// The history of one device with `MOVE_HISTORY_DAYS` of one-minute readings of type `t`,
/// moved from a person's fleet to an organization's, priced with the project's rules
/// (`fleet_testkit::capacity`, as `fleet_testkit::pricing` prices a request): events and type
/// marks are put and deleted in BatchWriteItems, summaries in transactions, every page read
/// by a consistent Query (docs/design.md, "Moving a device").
pub fn device_move(t: &EventType, sizes: &ItemSizes) -> Vec<MovedItems> {
    let shards = ShardCounts::default();
    let day = Day::parse_field("day", DEFAULT_DAY).expect("a valid default day");
    let at = day.start().plus_seconds(12 * 3600);
    let (from, to) = (user_id(0), UserId::org_fleet(&org_id(0)));
    let device = device_id(0, 0);
    let minutes = (MOVE_HISTORY_DAYS * 24 * 60) as f64;
    let read_share = |bytes: u64| bytes as f64 / READ_UNIT_BYTES as f64;
    let single = |old: &_, new: &_| {
        (write_units_of_change(None, Some(new)) + write_units_of_change(Some(old), None)) as f64
    };
    let old = event_item(&from, &device, t, at, &shards);
    let new = event_item(&to, &device, t, at, &shards);
    let indexed = old.contains_key(shared::model::schema::INDEXES[0].partition_key.name());
    let mut out = vec![MovedItems {
        what: format!(
            "{} `{t}` events ({} B, {})",
            group(minutes as u64),
            item_size(&old),
            if indexed {
                "searchable: a GSI1 entry each"
            } else {
                "telemetry: on no index"
            }
        ),
        count: minutes,
        read_units: read_share(item_size(&old)),
        write_units: single(&old, &new),
    }];
    if indexed {
        let old = type_mark_item(&from, &device, t, at, &shards);
        let new = type_mark_item(&to, &device, t, at, &shards);
        out.push(MovedItems {
            what: format!(
                "{} type marks (one an hour, {} B, a GSI1 entry each)",
                group(MOVE_HISTORY_DAYS * 24),
                item_size(&old)
            ),
            count: (MOVE_HISTORY_DAYS * 24) as f64,
            read_units: read_share(item_size(&old)),
            write_units: single(&old, &new),
        });
    }
    // Summaries: a 2-hour block of 5-minute buckets every 2 hours, a day item a day, a month
    // item a month (on no index); moved in transactions.
    let [block, day_item, month_item] = sizes.series_items;
    let unindexed = |bytes: u64| (2 * TRANSACTION_FACTOR * write_units(bytes)) as f64;
    for (what, count, bytes) in [
        (
            "2-hour blocks of 5-minute summaries",
            MOVE_HISTORY_DAYS * 12,
            block,
        ),
        ("day items of hourly summaries", MOVE_HISTORY_DAYS, day_item),
        ("month items of daily summaries", 2, month_item),
    ] {
        out.push(MovedItems {
            what: format!("{} {what} ({bytes} B, in transactions)", group(count)),
            count: count as f64,
            read_units: read_share(bytes),
            write_units: unindexed(bytes),
        });
    }
    out
}

/// The organizations' section of `docs/cost-model.md`.
pub fn section(sims: &[Simulation], billing: &LambdaBilling) -> String {
    let mut out = String::from(
        "## Organizations (issue 33)\n\n\
         ### The membership check\n\n\
         Every `/orgs/{orgId}/...` request reads the caller's membership (`MEMBER#{userId}` / \
         `ORG#{orgId}`) once, eventually consistent: an item under 4 KB, so **0.5 read units per \
         organization request**, $0.0625 per million requests at the price above; the device path \
         (ingest, sync) reads nothing more. Its reads are in the profiles' figures above; here \
         they are on their own.\n\n\
         | profile | organization requests / month | membership read units / month | USD / month | of the profile's DynamoDB reads |\n\
         |---|---|---|---|---|\n",
    );
    let mut any = false;
    for sim in sims {
        let requests = sim.workload.org_requests_per_second * SECONDS_PER_MONTH;
        if requests <= 0.0 {
            continue;
        }
        any = true;
        let m = MonthlyCost::of(sim, billing);
        let units = requests * MEMBERSHIP_READ_UNITS;
        let _ = writeln!(
            out,
            "| {} | {} | {} | ${:.2} | {:.2}% |",
            sim.profile.name,
            millions(requests),
            millions(units),
            units * RRU_USD,
            100.0 * units / (m.read_units + m.scan_read_units).max(f64::MIN_POSITIVE),
        );
    }
    if !any {
        out.push_str("| (no profile with organizations) | | | | |\n");
    }
    // The organization's profile's items where there is one.
    let Some(sim) = sims
        .iter()
        .find(|s| !s.orgs.is_empty())
        .or_else(|| sims.first())
    else {
        return out;
    };
    let _ = writeln!(
        out,
        "\n### Moving a device between fleets\n\n\
         A device moved between a person's fleet and an organization's (`POST .../devices/{{deviceId}}/move`) \
         keeps its token; its live items move in one transaction and its history is copied: each \
         event read by a consistent Query (its share of the page: 1 unit per 4 KB), put under the \
         new owner and deleted under the old in BatchWriteItems (with its GSI1 entry when its type \
         is searchable); summaries move in transactions (2 units per KB per write). Priced with \
         `fleet_testkit::capacity`'s rules on the real items (profile `{}`'s sizes), for {} days \
         of one-minute readings of one type:\n",
        sim.profile.name, MOVE_HISTORY_DAYS
    );
    out.push_str("| history | items | read units | write units | USD |\n|---|---|---|---|---|\n");
    let mut per_event = Vec::new();
    for t in ["temperature", "alarm"] {
        let t = EventType::parse(t).expect("valid");
        let items = device_move(&t, &sim.sizes);
        let (mut reads, mut writes, mut usd) = (0.0, 0.0, 0.0);
        for i in &items {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | ${:.4} |",
                i.what,
                group(i.count as u64),
                millions(i.count * i.read_units),
                group((i.count * i.write_units).round() as u64),
                i.usd()
            );
            reads += i.count * i.read_units;
            writes += i.count * i.write_units;
            usd += i.usd();
        }
        let _ = writeln!(
            out,
            "| **one device, `{t}`** | | **{}** | **{}** | **${usd:.4}** |",
            millions(reads),
            group(writes.round() as u64),
        );
        per_event.push((t, items[0].read_units, items[0].write_units, usd));
    }
    out.push('\n');
    for (t, read, write, usd) in per_event {
        let _ = writeln!(
            out,
            "- Per `{t}` event: {read:.3} read units and {write} write units (${:.4} per thousand events); the whole device: ${usd:.3}.",
            (read * RRU_USD + write * WRU_USD) * 1000.0
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::{simulate, Profile};

    #[test]
    fn a_moved_event_costs_its_put_and_delete_and_its_index_entries() {
        let profile: Profile = yaml_serde::from_str(
            "
name: hand
description: hand-computed
users: 1
devices_per_user: {distribution: fixed, devices: 1}
events: {per_device_per_minute: 1, batch_size: 1, types: {temperature: 1}}
",
        )
        .unwrap();
        let sim = simulate(profile, "test").unwrap();
        let telemetry = device_move(&EventType::parse("temperature").unwrap(), &sim.sizes);
        // 30 days of one-minute readings: 43,200 events, each under 1 KB on no index: a put
        // and a delete (1 unit each), and its share of a 4 KB read unit.
        assert_eq!(telemetry[0].count, 43_200.0);
        assert_eq!(telemetry[0].write_units, 2.0);
        assert!((0.01..0.25).contains(&telemetry[0].read_units));
        // A searchable type: its GSI1 entry is put and deleted too, and an hourly type mark.
        let alarm = device_move(&EventType::parse("alarm").unwrap(), &sim.sizes);
        assert_eq!(alarm[0].write_units, 4.0);
        assert_eq!(alarm[1].count, 720.0);
        // Summaries move in transactions: 2 units per KB for the put and the delete.
        let blocks = telemetry
            .iter()
            .find(|i| i.what.contains("blocks"))
            .unwrap();
        assert_eq!(blocks.count, 360.0);
        assert_eq!(
            blocks.write_units,
            4.0 * write_units(sim.sizes.series_items[0]) as f64
        );
    }
}
