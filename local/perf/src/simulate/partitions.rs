//! Load per partition key: each table's and index's keys, the busiest kept in bounded top
//! lists, the flags over DynamoDB's per-partition limits or the share target, and the shard
//! count that fixes a write-sharded key.

use std::collections::HashSet;

use shared::model::shard::shards_for_peak_wcu;

use super::numbers::{group, num};

/// DynamoDB's write limit per partition, units per second.
pub const WCU_LIMIT: f64 = 1000.0;
/// DynamoDB's read limit per partition, units per second.
pub const RCU_LIMIT: f64 = 3000.0;
/// Seed 003's distribution target: no key over this share of its table's or index's traffic.
pub const SHARE_LIMIT: f64 = 0.10;
/// The largest shard count `shared::model::settings` accepts.
pub const MAX_SHARDS: u16 = 1000;
/// Keys kept per top list.
pub const TOP_KEYS: usize = 10;

/// What a key's load comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// `USER#u`: profile, devices (summary updates), dashboard reads.
    UserPartition,
    /// `USER#u#DEVICE#d`: one device's events.
    DeviceEvents,
    /// `DEVICE#d`: a registration, read by ingestion.
    Registration,
    /// `TYPE#t#day#shard` on GSI1: type marks.
    EventType,
    /// `DEVICETYPE#u#d#t` on GSI1: one device's events of a searchable type.
    DeviceType,
    /// `STATUS#s#shard` on GSI1.
    Status,
    /// `OWNER#u#shard` on GSI2.
    Owner,
    /// `DUE#shard` on GSI3: devices' offline-check due times.
    Due,
    /// `OPEN#severity#shard` on GSI3: open alarms across owners.
    OpenAlarms,
    /// `MEMBER#u`: a person's memberships, read by each of their organization requests.
    Membership,
}

impl KeyKind {
    pub(super) fn describe(self) -> &'static str {
        match self {
            KeyKind::UserPartition => "owner partition (live states, dashboard)",
            KeyKind::DeviceEvents => "one device's events",
            KeyKind::Registration => "registration (ingest auth)",
            KeyKind::EventType => {
                "type marks of a type and day (one per device and hour), one shard"
            }
            KeyKind::DeviceType => "one device's events of a searchable type",
            KeyKind::Status => "devices of a status, one shard",
            KeyKind::Owner => "a user's events, one shard",
            KeyKind::Due => "devices' offline-check due times, one shard (moves with SEEN#)",
            KeyKind::OpenAlarms => "open alarms of a severity across owners, one shard",
            KeyKind::Membership => "a member's memberships (each organization request's check)",
        }
    }
}

/// The whole family a write-sharded key belongs to, for the shard-count fix.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardFamily {
    /// The setting that controls its shard count.
    pub setting: &'static str,
    /// Current count.
    pub shards: u16,
    /// Write units per second over all its shards.
    pub wcu: f64,
    /// Read units per second over all its shards.
    pub rcu: f64,
}

/// One partition key's steady-state load.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyLoad {
    /// The partition key value.
    pub key: String,
    /// What it holds.
    pub kind: KeyKind,
    /// Write units per second.
    pub wcu: f64,
    /// Read units per second.
    pub rcu: f64,
    /// Its shard family, if write-sharded.
    pub family: Option<ShardFamily>,
}

/// A key over a limit or over its share, and what would fix it.
#[derive(Clone, Debug, PartialEq)]
pub struct Flag {
    /// The key.
    pub load: KeyLoad,
    /// Why it is flagged.
    pub reasons: Vec<String>,
    /// Over a per-partition limit (throttles), not only over the 10% share.
    pub over_limit: bool,
    /// For a sharded key: the shard count that fixes it.
    pub suggested_shards: Option<u16>,
    /// What to do.
    pub fix: String,
}

#[derive(Default)]
struct TopKeys(Vec<KeyLoad>);

impl TopKeys {
    fn admits(&self, value: f64, by: fn(&KeyLoad) -> f64) -> bool {
        value > 0.0
            && (self.0.len() < TOP_KEYS || self.0.last().is_some_and(|last| value > by(last)))
    }

    fn insert(&mut self, load: KeyLoad, by: fn(&KeyLoad) -> f64) {
        let at = self.0.partition_point(|k| by(k) >= by(&load));
        self.0.insert(at, load);
        self.0.truncate(TOP_KEYS);
    }
}

/// The load on one table or index.
pub struct TableLoad {
    /// `base table`, `GSI1`, `GSI2`.
    pub name: &'static str,
    /// Partition keys with any load.
    pub keys: u64,
    /// Write units per second, all keys.
    pub wcu: f64,
    /// Read units per second, all keys.
    pub rcu: f64,
    /// The busiest keys by writes.
    pub top_writes: Vec<KeyLoad>,
    /// The busiest keys by reads.
    pub top_reads: Vec<KeyLoad>,
    over: Vec<KeyLoad>,
    over_count: u64,
    /// Keys over a limit or their share.
    pub flags: Vec<Flag>,
}

fn by_wcu(k: &KeyLoad) -> f64 {
    k.wcu
}
fn by_rcu(k: &KeyLoad) -> f64 {
    k.rcu
}

impl TableLoad {
    pub(super) fn new(name: &'static str) -> Self {
        Self {
            name,
            keys: 0,
            wcu: 0.0,
            rcu: 0.0,
            top_writes: Vec::new(),
            top_reads: Vec::new(),
            over: Vec::new(),
            over_count: 0,
            flags: Vec::new(),
        }
    }

    /// Adds one key's complete load; `make` builds the key only if it must be remembered.
    pub(super) fn add(&mut self, wcu: f64, rcu: f64, make: impl FnOnce() -> KeyLoad) {
        if wcu <= 0.0 && rcu <= 0.0 {
            return;
        }
        self.keys += 1;
        self.wcu += wcu;
        self.rcu += rcu;
        let mut top_w = TopKeys(std::mem::take(&mut self.top_writes));
        let mut top_r = TopKeys(std::mem::take(&mut self.top_reads));
        let over = wcu > WCU_LIMIT || rcu > RCU_LIMIT;
        if top_w.admits(wcu, by_wcu) || top_r.admits(rcu, by_rcu) || over {
            let load = make();
            if top_w.admits(wcu, by_wcu) {
                top_w.insert(load.clone(), by_wcu);
            }
            if top_r.admits(rcu, by_rcu) {
                top_r.insert(load.clone(), by_rcu);
            }
            if over {
                self.over_count += 1;
                if self.over.len() < 100 {
                    self.over.push(load);
                }
            }
        }
        self.top_writes = top_w.0;
        self.top_reads = top_r.0;
    }

    /// Share of this table's write and read traffic.
    pub fn shares(&self, load: &KeyLoad) -> (f64, f64) {
        let share = |v: f64, total: f64| if total > 0.0 { v / total } else { 0.0 };
        (share(load.wcu, self.wcu), share(load.rcu, self.rcu))
    }

    /// Keys over a limit that are not listed (the list keeps 100).
    pub fn unlisted_over_limit(&self) -> u64 {
        self.over_count.saturating_sub(self.over.len() as u64)
    }

    pub(super) fn flag(&mut self) {
        let mut seen = HashSet::new();
        let candidates: Vec<KeyLoad> = self
            .over
            .iter()
            .chain(&self.top_writes)
            .chain(&self.top_reads)
            .filter(|k| seen.insert(k.key.clone()))
            .cloned()
            .collect();
        for load in candidates {
            let (w_share, r_share) = self.shares(&load);
            let mut reasons = Vec::new();
            if load.wcu > WCU_LIMIT {
                reasons.push(format!("{} WCU/s > 1,000 per partition", num(load.wcu)));
            }
            if load.rcu > RCU_LIMIT {
                reasons.push(format!("{} RCU/s > 3,000 per partition", num(load.rcu)));
            }
            if w_share > SHARE_LIMIT {
                reasons.push(format!("{:.1}% of {} writes", w_share * 100.0, self.name));
            }
            if r_share > SHARE_LIMIT {
                reasons.push(format!("{:.1}% of {} reads", r_share * 100.0, self.name));
            }
            if reasons.is_empty() {
                continue;
            }
            let over_limit = load.wcu > WCU_LIMIT || load.rcu > RCU_LIMIT;
            let suggested_shards = load
                .family
                .as_ref()
                .map(|f| suggested_shards(f, self.wcu, self.rcu));
            let fix = fix_for(&load, suggested_shards);
            self.flags.push(Flag {
                load,
                reasons,
                over_limit,
                suggested_shards,
                fix,
            });
        }
    }
}

/// The fewest shards for a sharded key family that keep every shard under the per-partition
/// limits with 2x headroom (docs/key-distribution.md: cardinality >= 2 x peak / limit, via
/// [`shards_for_peak_wcu`]) and under 10% of its index's traffic. Never fewer than now.
pub fn suggested_shards(family: &ShardFamily, index_wcu: f64, index_rcu: f64) -> u16 {
    let for_writes = shards_for_peak_wcu(family.wcu.ceil().min(f64::from(u32::MAX)) as u32);
    let for_reads = (2.0 * family.rcu / RCU_LIMIT).ceil() as u64;
    let share = |v: f64, total: f64| if total > 0.0 { v / total } else { 0.0 };
    let family_share = share(family.wcu, index_wcu).max(share(family.rcu, index_rcu));
    // Smallest n with family_share / n <= 10% (a hair of tolerance for float noise).
    let for_share = ((family_share / SHARE_LIMIT) - 1e-9).ceil().max(1.0) as u64;
    let n = u64::from(for_writes)
        .max(for_reads)
        .max(for_share)
        .max(u64::from(family.shards));
    n.min(u64::from(u16::MAX)) as u16
}

fn fix_for(load: &KeyLoad, shards: Option<u16>) -> String {
    match (load.kind, shards, &load.family) {
        (_, Some(n), Some(f)) if n > f.shards => format!(
            "set {} from {} to {} (the family carries {} WCU/s, {} RCU/s)",
            f.setting,
            f.shards,
            group(u64::from(n)),
            num(f.wcu),
            num(f.rcu)
        ),
        (_, Some(_), Some(f)) => format!(
            "{} = {} already spreads it; the share is the index's low cardinality, under the per-partition limits",
            f.setting, f.shards
        ),
        (KeyKind::UserPartition, _, _) => "an owner partition holds the live states of up to `DEVICES_PER_SHARD` devices: lower it (new devices then spread over more partitions) or cap the busiest devices' batch rate".into(),
        (KeyKind::DeviceEvents, _, _) => "not sharded: one device's events. Over 1,000 WCU/s it throttles; a device this busy needs its events time-sharded (time sharding) or its rate capped at ingest".into(),
        (KeyKind::Registration, _, _) => "not sharded: one registration, read by ingestion at most once per cache window per warm Lambda".into(),
        (KeyKind::DeviceType, _, _) => "not sharded: one device's events of one type, never busier than the device's own event partition; a device this busy needs its rate capped at ingest".into(),
        _ => "not sharded".into(),
    }
}
