//! The key-distribution simulator (docs/key-distribution.md).
//!
//! A workload profile (`bench/profiles/*.yaml`) describes users, a skewed number of devices
//! per user (with explicit very large fleets), event rates (with hot devices), the event type
//! mix and the read mix. The simulator draws the fleet with a seeded RNG, builds every
//! partition key with the real builders of `shared::model::keys` and the real shard function and
//! shard counts, prices the real items (`shared::model::entities`, serialized exactly as stored) with
//! DynamoDB's size rules ([`crate::capacity`]), and adds up steady-state **rates** (units per
//! second) per partition key of the base table, GSI1 and GSI2. Keys whose load is complete
//! (a user's or a device's) stream through a bounded top list, so a million devices take no
//! more memory than the fleet-size list; only the low-cardinality sharded keys are kept.
//!
//! A key is flagged when it exceeds DynamoDB's per-partition limits (1,000 WCU/s, 3,000 RCU/s)
//! or 10% of its table's or index's traffic (docs/key-distribution.md's target); for a write-sharded key the
//! report gives the shard count that fixes it.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Zipf};
use serde::Deserialize;
use shared::model::alarm::status::AlarmState;
use shared::model::entities::alarm::AlarmItem;
use shared::model::entities::alarm::REMINDER_SHARDS;
use shared::model::entities::device::DeviceItem;
use shared::model::entities::device_state::DeviceStateItem;
use shared::model::entities::device_state::{
    due_gsi3pk, placement, state_pk, status_gsi1pk, DUE_SHARDS,
};
use shared::model::entities::event::device_type_gsi1pk;
use shared::model::entities::event::EventItem;
use shared::model::entities::open_alarm::OpenAlarmItem;
use shared::model::entities::open_alarm::{open_alarms_gsi3pk, OPEN_ALARM_SHARDS};
use shared::model::entities::profile::ProfileItem;
use shared::model::entities::registration::registration_pk;
use shared::model::entities::registration::RegistrationItem;
use shared::model::entities::tag_link::TagLinkItem;
use shared::model::entities::type_mark::TypeMarkItem;
use shared::model::entities::type_mark::{type_gsi1pk, type_window, TYPE_WINDOW_SECONDS};
use shared::model::entities::Entity;
use shared::model::ids::{DeviceId, DeviceType, EventId, EventType, Tag, UserId};
use shared::model::keys::event_pk;
use shared::model::offline::OFFLINE_SEVERITY;
use shared::model::offline::SEEN_GRANULARITY_SECONDS;
use shared::model::pattern_id::PatternId;
use shared::model::readings::{derive_event_id, EventValue, StoredEvent, StoredReading};
use shared::model::schema::INDEXES;
use shared::model::shard::{shard_of, shards_for_peak_wcu, ShardCounts};
use shared::model::status::DeviceStatus;
use shared::model::timestamp::Day;
use shared::ops::events::MAX_TYPE_DEVICES;
use shared::ops::ingest::RECENT_EVENTS;

use crate::capacity::{
    eventual_read_units, index_entry, item_size, query_read_units, strong_read_units, write_units,
    Item, STORAGE_OVERHEAD_BYTES,
};

/// Where the documented profiles live.
pub const PROFILES_DIR: &str = "bench/profiles";
/// The generated report.
pub const REPORT_PATH: &str = "docs/key-distribution.md";
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
/// Bytes of a directory (GSI2) entry: keys, entity type, user id, shards and device count.
const DIRECTORY_ENTRY_BYTES: f64 = 100.0;

/// Events an event-list read returns (the API's default page).
pub const EVENT_PAGE: f64 = 50.0;
/// Type marks one AP-09 Query of a (day, shard) returns at most.
const MARKS_PER_PAGE: f64 = 4.0 * MAX_TYPE_DEVICES as f64;
/// The default day events are written on (the GSI1 `TYPE#` keys carry the day).
pub const DEFAULT_DAY: &str = "2026-11-20";
/// Events retained (`RETENTION_DAYS` default), for storage.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A workload profile, as written in `bench/profiles/*.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name.
    pub name: String,
    /// What the profile models and where its figures come from.
    pub description: String,
    /// RNG seed: the same profile always draws the same fleet.
    #[serde(default)]
    pub seed: u64,
    /// Ordinary users.
    pub users: u64,
    /// How many devices each ordinary user has.
    pub devices_per_user: FleetSize,
    /// Extra users with very large fleets.
    #[serde(default)]
    pub large_fleets: Vec<LargeFleet>,
    /// Event traffic.
    pub events: EventLoad,
    /// Read traffic.
    #[serde(default)]
    pub reads: ReadMix,
    /// Shard counts (default: the stack's, `shared::model::shard::ShardCounts::default()`).
    #[serde(default)]
    pub shards: Option<ShardSettings>,
    /// Events retained, days (default 90).
    #[serde(default)]
    pub retention_days: Option<u32>,
    /// Device registrations, renames and deletions (default: [`DeviceChanges::default`]).
    #[serde(default)]
    pub device_changes: DeviceChanges,
    /// The device twin's traffic (default: [`TwinTraffic::default`]).
    #[serde(default)]
    pub twin: TwinTraffic,
    /// Devices going silent (offline detection; default: [`Offline::default`]).
    #[serde(default)]
    pub offline: Offline,
}

/// The device twin's traffic (docs/design.md section 12), per device per month.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TwinTraffic {
    /// Desired-state changes an owner makes to one device (AP-T1), each delivered once and
    /// reported once.
    pub desired_changes_per_device_per_month: f64,
    /// Commands queued for one device (AP-T2), each delivered, marked and acknowledged.
    pub commands_per_device_per_month: f64,
    /// Fleet-wide changes (AP-T5, AP-T7) reaching every device of the fleet, each delivered
    /// and reported like a desired change.
    pub rollouts_per_month: f64,
}

impl Default for TwinTraffic {
    /// An assumption, not a measurement: each device gets one desired change and one command
    /// a month from its owner, and one fleet-wide change a month reaches every device.
    fn default() -> Self {
        Self {
            desired_changes_per_device_per_month: 1.0,
            commands_per_device_per_month: 1.0,
            rollouts_per_month: 1.0,
        }
    }
}

/// The rollout worker's pace (`shared::ops::twin::rollout::ROLLOUT_DEVICES_PER_SECOND`).
pub const ROLLOUT_DEVICES_PER_SECOND: f64 =
    shared::ops::twin::rollout::ROLLOUT_DEVICES_PER_SECOND as f64;
/// Devices per rollout page (`shared::ops::twin::rollout::ROLLOUT_PAGE`).
pub const ROLLOUT_PAGE: f64 = shared::ops::twin::rollout::ROLLOUT_PAGE as f64;
/// Seconds in the 730-hour month the twin's monthly rates are spread over.
const MONTH_SECONDS: f64 = 730.0 * 3600.0;

/// One fleet-wide change of the largest fleet at the worker's pace: the busiest keys while it
/// runs (a storm, not an average).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RolloutPeak {
    /// Devices of the largest fleet.
    pub devices: u64,
    /// How long the change takes, seconds.
    pub seconds: f64,
    /// Read units per second on the owner's partition (tag links and device items, a page at
    /// a time).
    pub owner_partition_rcu: f64,
    /// Write units per second on one live-state partition (its devices are spread over the
    /// whole walk).
    pub state_partition_wcu: f64,
    /// Write units on each device's own key, once.
    pub device_key_wcu: f64,
}

/// How often devices go silent (the offline detector's work), as a share of the fleet.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Offline {
    /// Devices that go silent (and later report again) a day, as a share of the fleet.
    pub per_day: f64,
    /// Devices whose owner asked for tight offline detection (`offlineDetection: tight`), as a
    /// share of the fleet (default 0): their due entry moves with every batch, not once per
    /// `SEEN#` bucket.
    #[serde(default)]
    pub tight: f64,
}

impl Default for Offline {
    /// An assumption, not a measurement: 1% of a fleet drops off (power, network) on a day;
    /// nobody asks for tight detection.
    fn default() -> Self {
        Self {
            per_day: 0.01,
            tight: 0.0,
        }
    }
}

/// Device lifecycle traffic, as shares of the fleet per month.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceChanges {
    /// Devices registered a month, as a share of the fleet (AP-07).
    pub registered_per_month: f64,
    /// Devices renamed or retagged a month, as a share of the fleet (AP-06 with link sync).
    pub renamed_per_month: f64,
    /// Devices deleted a month, as a share of the fleet (AP-08).
    pub deleted_per_month: f64,
}

impl Default for DeviceChanges {
    /// An assumption, not a measurement: a fleet replaces about 2% of its devices a month
    /// (registered and deleted) and renames or retags 5%.
    fn default() -> Self {
        Self {
            registered_per_month: 0.02,
            renamed_per_month: 0.05,
            deleted_per_month: 0.02,
        }
    }
}

/// Devices per user.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "distribution", rename_all = "lowercase", deny_unknown_fields)]
pub enum FleetSize {
    /// Every user has `devices`.
    Fixed {
        /// Devices per user.
        devices: u32,
    },
    /// Lognormal around `median` with shape `sigma`, at least 1, at most `max`.
    Lognormal {
        /// Median fleet size.
        median: f64,
        /// Shape (standard deviation of the log).
        sigma: f64,
        /// Largest fleet drawn.
        max: u32,
    },
    /// Zipf over `1..=max` with `exponent` (most users have one device, a few very many).
    Zipf {
        /// Largest fleet drawn.
        max: u32,
        /// Zipf exponent.
        exponent: f64,
    },
}

/// A group of users with very large fleets.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LargeFleet {
    /// How many such users.
    pub owners: u32,
    /// Devices each.
    pub devices: u32,
    /// Their devices' rate, if not the profile's.
    #[serde(default)]
    pub events_per_device_per_minute: Option<f64>,
}

/// Event traffic.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventLoad {
    /// Events per device per minute.
    pub per_device_per_minute: f64,
    /// Events per ingest request (each request also updates the device summary once).
    pub batch_size: u32,
    /// Hot devices, drawn at random among all devices.
    #[serde(default)]
    pub hot_devices: Option<HotDevices>,
    /// Event type -> share of events.
    pub types: BTreeMap<String, f64>,
}

/// Devices that send far more than the rest.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotDevices {
    /// How many.
    pub count: u64,
    /// Their rate, events per minute.
    pub per_device_per_minute: f64,
}

/// Reads per minute across the whole fleet.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadMix {
    /// `GET /me/dashboard` (AP-DASH), spread evenly over users.
    #[serde(default)]
    pub dashboard_opens_per_minute: f64,
    /// `GET /me/devices/{id}/events` (AP-04), spread evenly over devices.
    #[serde(default)]
    pub device_event_reads_per_minute: f64,
    /// `GET /me/events` (AP-05, GSI2), spread evenly over users.
    #[serde(default)]
    pub user_event_reads_per_minute: f64,
    /// `GET /admin/events?type=` (AP-09, GSI1), spread evenly over event types.
    #[serde(default)]
    pub admin_event_type_reads_per_minute: f64,
    /// `GET /admin/devices?status=active` (AP-13, GSI1).
    #[serde(default)]
    pub admin_status_reads_per_minute: f64,
}

/// Shard counts a profile may override.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardSettings {
    /// `STATUS_SHARDS`.
    pub status: Option<u16>,
    /// `ACTIVE_STATUS_SHARDS`.
    pub active_status: Option<u16>,
    /// `EVENT_TYPE_SHARDS`.
    pub event_type: Option<u16>,
    /// `SEARCHABLE_EVENT_TYPES`.
    pub searchable: Option<String>,
    /// `DEVICES_PER_SHARD`.
    pub devices_per_shard: Option<u32>,
}

impl Profile {
    /// Reads a profile from a YAML (or JSON, a subset of YAML) file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let profile: Profile =
            yaml_serde::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        profile.check()?;
        Ok(profile)
    }

    fn check(&self) -> Result<(), Error> {
        let e = &self.events;
        if e.batch_size == 0 || e.batch_size > 100 {
            return Err("events.batch_size must be 1..=100 (the ingest API's limit)".into());
        }
        if e.types.is_empty() || e.types.values().any(|w| *w < 0.0) {
            return Err("events.types needs at least one type with a share >= 0".into());
        }
        for t in e.types.keys() {
            EventType::parse(t.as_str()).map_err(|err| format!("events.types: {err}"))?;
        }
        if e.per_device_per_minute.is_nan() || e.per_device_per_minute < 0.0 {
            return Err("events.per_device_per_minute must be >= 0".into());
        }
        if let Some(text) = self.shards.as_ref().and_then(|s| s.searchable.as_deref()) {
            shared::model::shard::parse_searchable(text, 8)
                .map_err(|err| format!("shards.searchable: {err}"))?;
        }
        Ok(())
    }

    /// The shard counts this profile runs with.
    pub fn shard_counts(&self) -> ShardCounts {
        let d = ShardCounts::default();
        let s = self.shards.as_ref();
        let event_type = s.and_then(|s| s.event_type).unwrap_or(d.event_type);
        ShardCounts {
            status: s.and_then(|s| s.status).unwrap_or(d.status),
            active_status: s.and_then(|s| s.active_status).unwrap_or(d.active_status),
            event_type,
            searchable: s
                .and_then(|s| s.searchable.as_deref())
                .map(|text| {
                    shared::model::shard::parse_searchable(text, event_type)
                        .expect("checked on load")
                })
                .unwrap_or(d.searchable),
        }
    }

    /// `DEVICES_PER_SHARD` this profile runs with.
    pub fn devices_per_shard(&self) -> u32 {
        self.shards
            .as_ref()
            .and_then(|s| s.devices_per_shard)
            .unwrap_or(shared::model::settings::DEFAULT_DEVICES_PER_PARTITION)
    }

    /// Event types with their shares, normalized to sum to 1.
    fn type_shares(&self) -> Vec<(EventType, f64)> {
        let total: f64 = self.events.types.values().sum();
        self.events
            .types
            .iter()
            .map(|(t, w)| {
                (
                    EventType::parse(t.as_str()).expect("checked on load"),
                    if total > 0.0 { w / total } else { 0.0 },
                )
            })
            .collect()
    }
}

/// Every profile under `bench/profiles/`, by file name.
pub fn documented_profiles(root: &Path) -> Result<Vec<std::path::PathBuf>, Error> {
    let dir = root.join(PROFILES_DIR);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    paths.sort();
    Ok(paths)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The simulated user number `i`: shaped like a Cognito `sub` (a UUID), as in production.
pub fn user_id(i: u64) -> UserId {
    let h = splitmix(i);
    let l = splitmix(h);
    UserId::parse(format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (l >> 48) & 0xfff,
        l & 0xffff_ffff_ffff
    ))
    .expect("hex digits and dashes form a valid id")
}

/// The simulated device `j` of user `i`: `dev-` and 12 hex digits, unique per (i, j).
pub fn device_id(i: u64, j: u64) -> DeviceId {
    let h = splitmix(splitmix(i) ^ j.wrapping_mul(0x2545_F491_4F6C_DD1D));
    DeviceId::parse(format!("dev-{:012x}", h & 0xffff_ffff_ffff)).expect("valid id")
}

/// One event type's sizes: (type, base item, GSI1 entry, GSI2 entry), bytes.
pub type EventSize = (EventType, u64, u64, u64);

/// Sizes of the real items of one profile, as stored (serde_dynamo), in bytes.
#[derive(Clone, Debug)]
pub struct ItemSizes {
    /// Per event type: (type, base item, GSI1 entry, GSI2 entry).
    pub events: Vec<EventSize>,
    /// A device's live state (`latest`, `recent`, `lastSeen`), bytes.
    pub state: u64,
    /// The live state's GSI1 entry (`STATUS#`/`SEEN#`).
    pub state_gsi1: u64,
    /// The device item (what its owner set), bytes.
    pub device_item: u64,
    /// A profile.
    pub profile: u64,
    /// A registration.
    pub registration: u64,
    /// A tag link.
    pub tag_link: u64,
    /// A type mark (one per device, searchable type and window), bytes.
    pub type_mark: u64,
    /// Its GSI1 entry (`TYPE#{type}#{day}#{shard}`).
    pub type_mark_gsi1: u64,
    /// A desired (or reported) document of a few settings, or a command, bytes.
    pub twin_document: u64,
    /// The live state's GSI3 due entry (`DUE#{shard}`, offline detection).
    pub state_gsi3: u64,
    /// An offline alarm item (its history entry), bytes.
    pub offline_alarm: u64,
    /// Its GSI3 entry in its owner's list (`ALARMS#{user}#{partition}`).
    pub offline_alarm_gsi3: u64,
    /// Its open-alarm pointer, bytes.
    pub open_pointer: u64,
    /// The pointer's GSI3 entry (`OPEN#{severity}#{shard}`).
    pub open_pointer_gsi3: u64,
}

fn to_item(entity: &impl Entity, shards: &ShardCounts) -> Item {
    entity.to_item(shards).expect("items serialize")
}

impl ItemSizes {
    /// Builds one of each item the way the operations store them, for a typical user and
    /// device of the profile, with numeric readings of `21.5`.
    pub fn of(profile: &Profile, shards: ShardCounts, day: &Day) -> Self {
        let user = user_id(0);
        let device = device_id(0, 0);
        let at = day.start().plus_seconds(12 * 3600);
        let value = EventValue::Number(21.5);
        let ttl = at.epoch_seconds() + 90 * 86_400;
        let name = "Kitchen thermostat".to_string();
        let kind = DeviceType::parse("thermostat").expect("valid");
        let event_item = |t: &EventType, id: &EventId| EventItem {
            user_id: user.clone(),
            device_id: device.clone(),
            id: id.clone(),
            event_type: t.clone(),
            value: value.clone(),
            at,
            device_name: name.clone(),
            device_type: kind.clone(),
            ttl,
        };
        let types = profile.type_shares();
        let events = types
            .iter()
            .map(|(t, _)| {
                let id = derive_event_id(t, &value, &at);
                let item = to_item(&event_item(t, &id), &shards);
                let gsi = |i: usize| index_entry(&item, &INDEXES[i]).map_or(0, |e| item_size(&e));
                (t.clone(), item_size(&item), gsi(0), gsi(1))
            })
            .collect();
        // The live state ingestion keeps: the latest reading of every type and the 10 newest
        // events (types in turn, derived ids as devices that send no id get).
        let latest = types
            .iter()
            .map(|(t, _)| {
                (
                    t.to_string(),
                    StoredReading(at.epoch_millis(), value.clone()),
                )
            })
            .collect();
        let recent = (0..RECENT_EVENTS)
            .map(|i| {
                let t = types[i % types.len()].0.clone();
                let at = at.plus_seconds(-(i as i64) * 60);
                StoredEvent(
                    at.epoch_millis(),
                    derive_event_id(&t, &value, &at),
                    t,
                    value.clone(),
                )
            })
            .collect();
        let mark_type = EventType::parse("fault").expect("valid");
        let type_mark = to_item(
            &TypeMarkItem {
                user_id: user.clone(),
                device_id: device.clone(),
                event_type: mark_type,
                window: type_window(&at),
                device_name: name.clone(),
                ttl,
            },
            &shards,
        );
        let type_mark_gsi1 = index_entry(&type_mark, &INDEXES[0]).map_or(0, |e| item_size(&e));
        let tag = Tag::parse("home").expect("valid");
        let device_item = DeviceItem {
            user_id: user.clone(),
            device_id: device.clone(),
            name: name.clone(),
            device_type: kind.clone(),
            status: DeviceStatus::Active,
            tags: vec![tag.clone()],
            version: 3,
            sync_version: 1,
            linked_tags: vec![tag.clone()],
            partition: 0,
            created_at: at,
            updated_at: at,
            deleting_at: None,
            report_every_seconds: None,
            offline_detection: Default::default(),
        };
        let state = DeviceStateItem {
            user_id: user.clone(),
            device_id: device.clone(),
            partition: 0,
            status: DeviceStatus::Active,
            name: name.clone(),
            device_type: kind.clone(),
            last_seen: Some(at),
            latest,
            recent,
            ingest_seq: 48_213,
            device_version: 3,
            twin: Default::default(),
            // The live state carries the device's tags (alarm rules scoped by tag).
            tags: device_item.tags.clone(),
            alarms: Default::default(),
            report_every_seconds: None,
            offline_detection: Default::default(),
            // A learned rhythm (offline detection): every reporting device carries one.
            learned_every_seconds: Some(300),
            learned_jitter_seconds: Some(12),
            indexed_due: None,
            series: Default::default(),
        };
        let state_attrs = to_item(&state, &shards);
        let state_gsi1 = index_entry(&state_attrs, &INDEXES[0]).map_or(0, |e| item_size(&e));
        let state_gsi3 = index_entry(&state_attrs, &INDEXES[2]).map_or(0, |e| item_size(&e));
        let offline_alarm = AlarmItem {
            user_id: user.clone(),
            device_id: device.clone(),
            partition: 0,
            device_name: name.clone(),
            source: "offline".into(),
            rule_name: None,
            severity: OFFLINE_SEVERITY,
            state: AlarmState::Active,
            raised_at: at,
            cleared_at: None,
            acknowledged_at: None,
            reading: None,
            clear_reading: None,
            last_seen: Some(at),
            remind_every_seconds: None,
            remind_at: None,
            reminders: 0,
            ttl: None,
        };
        let pointer = to_item(&OpenAlarmItem::of(&offline_alarm), &shards);
        let offline_alarm = to_item(&offline_alarm, &shards);
        let gsi3 = |item: &Item| index_entry(item, &INDEXES[2]).map_or(0, |e| item_size(&e));
        let profile_item = ProfileItem {
            user_id: user.clone(),
            name: Some("Ada Lovelace".into()),
            email: Some("ada.lovelace@example.com".into()),
            created_at: at,
            updated_at: at,
        };
        let registration = RegistrationItem {
            device_id: device.clone(),
            user_id: user.clone(),
            token_sha256: "0".repeat(64),
            device_name: name.clone(),
            device_type: kind.clone(),
            partition: 0,
            created_at: at,
            previous_token_sha256: None,
            previous_token_until: None,
            revoked_at: None,
        };
        // A desired document of a few settings (a reported one or a command is about as large).
        let twin_document = item_size(&to_item(
            &shared::model::entities::desired_state::DesiredStateItem {
                user_id: user.clone(),
                device_id: device.clone(),
                document: r#"{"reportIntervalSeconds":300,"setpoint":{"day":21.5,"night":18}}"#
                    .into(),
                version: 3,
                updated_at: at,
            },
            &shards,
        ));
        let tag_link = TagLinkItem {
            user_id: user.clone(),
            tag,
            device_id: device,
            name,
            device_type: kind,
        };
        Self {
            events,
            state: item_size(&state_attrs),
            device_item: item_size(&to_item(&device_item, &shards)),
            state_gsi1,
            profile: item_size(&to_item(&profile_item, &shards)),
            registration: item_size(&to_item(&registration, &shards)),
            tag_link: item_size(&to_item(&tag_link, &shards)),
            type_mark: item_size(&type_mark),
            type_mark_gsi1,
            twin_document,
            state_gsi3,
            offline_alarm_gsi3: gsi3(&offline_alarm),
            offline_alarm: item_size(&offline_alarm),
            open_pointer_gsi3: gsi3(&pointer),
            open_pointer: item_size(&pointer),
        }
    }
}

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
}

impl KeyKind {
    fn describe(self) -> &'static str {
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
    fn new(name: &'static str) -> Self {
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
    fn add(&mut self, wcu: f64, rcu: f64, make: impl FnOnce() -> KeyLoad) {
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

    fn flag(&mut self) {
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

/// Totals the cost model needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    /// Users, including large fleets' owners.
    pub users: u64,
    /// Devices.
    pub devices: u64,
    /// Smallest, median and largest fleet.
    pub fleet_min: u32,
    /// Median fleet size.
    pub fleet_median: u32,
    /// Largest fleet.
    pub fleet_max: u32,
    /// Events per second.
    pub events_per_second: f64,
    /// Ingest requests (Lambda invocations) per second.
    pub ingest_requests_per_second: f64,
    /// Dashboard opens per second.
    pub dashboard_per_second: f64,
    /// Consistent registration reads by ingestion per second.
    pub registration_reads_per_second: f64,
    /// Other read requests (AP-04, AP-05, AP-09, AP-13) per second.
    pub other_reads_per_second: f64,
    /// Stored bytes with DynamoDB's per-item overhead: base table, GSI1, GSI2.
    pub storage_bytes: [f64; 3],
    /// Bytes of the base table's items without overhead (what a full Scan reads: the daily
    /// run before it read the directory instead, shown for comparison).
    pub scanned_bytes: f64,
    /// Read units of one daily run: the directory Scan, each owner's partitions, and each
    /// device's events of the day (docs/design.md section 5).
    pub analytics_read_units_per_day: f64,
    /// Units of work of one daily run: owner partitions (checkpoints:
    /// `cost::checkpoint_writes_per_day`).
    pub analytics_units_per_day: f64,
    /// Items one daily run reads.
    pub analytics_items_per_day: f64,
    /// Items in the base table.
    pub items: f64,
    /// Offline detection: the scheduled runs a day (every minute).
    pub detector_runs_per_day: f64,
    /// Offline alarms raised a day (and cleared when the device reports again).
    pub offline_alarms_per_day: f64,
    /// Read units a day of the detector: its Queries of the due and reminder shards every
    /// minute, and one eventually consistent read of each due device's live state.
    pub detector_read_units_per_day: f64,
    /// Write units a day of offline alarms: the detector's raise (state, alarm, pointer, in a
    /// transaction, and their index entries) and the clear when the device reports again.
    pub offline_write_units_per_day: f64,
    /// Write units a day of ingestion moving devices' due entries (with their SEEN# entries).
    pub due_move_write_units_per_day: f64,
    /// An outage storm: every device of the fleet due within one 15-minute window: WCU/s on
    /// the busiest `DUE#` and `OPEN#` shard while the detector raises them.
    pub storm_wcu_per_due_shard: f64,
    /// The same storm on the busiest `OPEN#major#{shard}` key.
    pub storm_wcu_per_open_shard: f64,
}

/// One profile's simulation.
pub struct Simulation {
    /// The profile.
    pub profile: Profile,
    /// Where it was read from.
    pub source: String,
    /// Shard counts used.
    pub shards: ShardCounts,
    /// Item sizes used.
    pub sizes: ItemSizes,
    /// Base table, GSI1, GSI2, GSI3.
    pub tables: [TableLoad; 4],
    /// Totals.
    pub workload: Workload,
    /// One fleet-wide change of the largest fleet, at the worker's pace.
    pub rollout_peak: RolloutPeak,
}

fn draw_fleet(size: &FleetSize, rng: &mut StdRng) -> Result<u32, Error> {
    Ok(match size {
        FleetSize::Fixed { devices } => *devices,
        FleetSize::Lognormal { median, sigma, max } => {
            let d = LogNormal::new(median.ln(), *sigma).map_err(|e| format!("lognormal: {e}"))?;
            (d.sample(rng).round() as u32).clamp(1, *max)
        }
        FleetSize::Zipf { max, exponent } => {
            let d = Zipf::new(f64::from(*max), *exponent).map_err(|e| format!("zipf: {e}"))?;
            (d.sample(rng) as u32).clamp(1, *max)
        }
    })
}

/// Runs `profile` (read from `source`).
pub fn simulate(profile: Profile, source: &str) -> Result<Simulation, Error> {
    profile.check()?;
    let shards = profile.shard_counts();
    let day = Day::parse_field("day", DEFAULT_DAY).expect("a valid default day");
    let sizes = ItemSizes::of(&profile, shards.clone(), &day);
    let types = profile.type_shares();
    let retention_days = f64::from(profile.retention_days.unwrap_or(DEFAULT_RETENTION_DAYS));
    let mut rng = StdRng::seed_from_u64(profile.seed);

    // The fleet: one size per user (ordinary users, then large fleets) and who is hot.
    let mut fleets: Vec<(u32, Option<f64>)> = Vec::with_capacity(profile.users as usize);
    for _ in 0..profile.users {
        fleets.push((draw_fleet(&profile.devices_per_user, &mut rng)?, None));
    }
    for large in &profile.large_fleets {
        for _ in 0..large.owners {
            fleets.push((large.devices, large.events_per_device_per_minute));
        }
    }
    let devices: u64 = fleets.iter().map(|(n, _)| u64::from(*n)).sum();
    let users = fleets.len() as u64;
    let hot: HashSet<u64> = match &profile.events.hot_devices {
        Some(h) if devices > 0 => {
            let count = h.count.min(devices);
            let mut set = HashSet::new();
            while (set.len() as u64) < count {
                set.insert(rng.random_range(0..devices));
            }
            set
        }
        _ => HashSet::new(),
    };

    // Per-event costs, weighted by the type mix.
    let weighted = |f: &dyn Fn(&EventSize) -> f64| -> f64 {
        sizes
            .events
            .iter()
            .zip(&types)
            .map(|(e, (_, w))| f(e) * w)
            .sum()
    };
    let event_wcu = weighted(&|e| write_units(e.1) as f64);
    let event_bytes = weighted(&|e| e.1 as f64);
    let state_update_wcu = write_units(sizes.state) as f64;
    let status_rewrite_wcu = 2.0 * write_units(sizes.state_gsi1) as f64;
    let registration_rcu = eventual_read_units(sizes.registration);

    let reads = &profile.reads;
    let per_user_dashboards = reads.dashboard_opens_per_minute / 60.0 / users.max(1) as f64;
    let per_device_event_reads = reads.device_event_reads_per_minute / 60.0 / devices.max(1) as f64;
    let per_user_event_reads = reads.user_event_reads_per_minute / 60.0 / users.max(1) as f64;

    let [mut base, mut gsi1, mut gsi2, mut gsi3] = [
        TableLoad::new("base table"),
        TableLoad::new("GSI1"),
        TableLoad::new("GSI2"),
        TableLoad::new("GSI3"),
    ];
    // Offline detection (docs/design.md, "Offline detection"): due entries move with SEEN#.
    let due_rewrite_wcu = 2.0 * write_units(sizes.state_gsi3) as f64;
    let mut due_wcu = vec![0.0_f64; usize::from(DUE_SHARDS)];
    let mut due_devices = vec![0.0_f64; usize::from(DUE_SHARDS)];
    let mut type_rates = vec![0.0_f64; types.len()];
    // A device's rate, in events per minute: hot, its large fleet's, or the profile's.
    let per_minute_of = |global: u64, rate_override: Option<f64>| {
        if hot.contains(&global) {
            profile
                .events
                .hot_devices
                .as_ref()
                .map_or(0.0, |h| h.per_device_per_minute)
        } else {
            rate_override.unwrap_or(profile.events.per_device_per_minute)
        }
    };
    // The event-type index (docs/design.md, "The event-type index"). Per searchable type: its
    // shard count, and how many devices send it on a day (what AP-09 reads; a Poisson
    // device sends at least one event of the type that day with 1 - e^(-rate x day)).
    let searchable: Vec<Option<u16>> = types.iter().map(|(t, _)| shards.type_shards(t)).collect();
    let window = TYPE_WINDOW_SECONDS as f64;
    let mut devices_with_type = vec![0.0_f64; types.len()];
    {
        let mut global = 0u64;
        for (fleet, rate_override) in &fleets {
            for _ in 0..*fleet {
                let rate = per_minute_of(global, *rate_override) / 60.0;
                global += 1;
                for (k, (_, share)) in types.iter().enumerate() {
                    if searchable[k].is_some() {
                        devices_with_type[k] += 1.0 - (-rate * share * 86_400.0).exp();
                    }
                }
            }
        }
    }
    let type_reads_per_type = reads.admin_event_type_reads_per_minute / 60.0 / types.len() as f64;
    // Type marks: per type and shard, index writes (one per device and window with the type)
    // and marks on the day.
    let mut mark_wcu: Vec<Vec<f64>> = searchable
        .iter()
        .map(|n| vec![0.0; usize::from(n.unwrap_or(0))])
        .collect();
    let mut marks_per_day: Vec<Vec<f64>> = mark_wcu.clone();
    let active_shards = shards.status_shards(DeviceStatus::Active);
    let mut status_wcu = vec![0.0_f64; usize::from(active_shards)];
    let mut status_devices = vec![0u64; usize::from(active_shards)];
    let devices_per_shard = profile.devices_per_shard();
    let mut w = Workload {
        users,
        devices,
        ..Workload::default()
    };
    let mut global = 0u64;
    let mut registration_reads = 0.0;
    // The twin, per device per second: a desired change (an owner's or a rollout's) puts the
    // document in a transaction (2 x its units), is read once at delivery (a consistent
    // read) and reported (a put of the reported document); a command is put in a
    // transaction, read by the delivery's Query, marked delivered and acknowledged. On the
    // live state: the desired version (a transaction item), the reported version, the command
    // sequence (a transaction item) and the queue's watermark.
    let twin = &profile.twin;
    let desired_rate =
        (twin.desired_changes_per_device_per_month + twin.rollouts_per_month) / MONTH_SECONDS;
    let command_rate = twin.commands_per_device_per_month / MONTH_SECONDS;
    let document_wcu = write_units(sizes.twin_document) as f64;
    let twin_device_wcu = desired_rate * (2.0 * document_wcu + document_wcu)
        + command_rate * (2.0 * document_wcu + 2.0 * document_wcu);
    let twin_device_rcu = desired_rate * strong_read_units(sizes.twin_document)
        + command_rate * strong_read_units(sizes.twin_document);
    let twin_state_wcu =
        desired_rate * 3.0 * state_update_wcu + command_rate * 3.0 * state_update_wcu;
    for (i, (fleet, rate_override)) in fleets.iter().enumerate() {
        let i = i as u64;
        let user = user_id(i);
        let mut user_events = 0.0;
        // The owner's live-state partitions (registration doubles them as the fleet grows)
        // and the batches each receives.
        let mut state_partitions: Vec<f64> = Vec::new();
        // The twin's live-state writes on each of them.
        let mut twin_partitions: Vec<f64> = Vec::new();
        let mut placed_shards = 1u32;
        for j in 0..u64::from(*fleet) {
            let per_minute = per_minute_of(global, *rate_override);
            global += 1;
            let rate = per_minute / 60.0;
            let batches = rate / f64::from(profile.events.batch_size);
            user_events += rate;
            let device = device_id(i, j);
            // Placement as registration does it: the fleet doubles its partitions when the
            // next device would exceed DEVICES_PER_SHARD on each.
            if j + 1 > u64::from(placed_shards) * u64::from(devices_per_shard) {
                placed_shards = placed_shards.saturating_mul(2);
            }
            let placed = placement(&device, placed_shards) as usize;
            if state_partitions.len() <= placed {
                state_partitions.resize(placed + 1, 0.0);
            }
            state_partitions[placed] += batches;
            // The daily run reads a device's events of the day only, one Query, on the days it
            // sent any: a device sending less than once a day is read on that share of days.
            let day_events = rate * 86_400.0;
            if day_events > 0.0 {
                let days_with_events = day_events.min(1.0);
                let per_query = (day_events / days_with_events) * event_bytes;
                w.analytics_read_units_per_day +=
                    days_with_events * query_read_units(per_query as u64);
                w.analytics_items_per_day += day_events;
            }
            // The device's events partition: writes, and AP-04 reads of a page of the day.
            let page = (rate * 86_400.0).min(EVENT_PAGE);
            let event_read_rcu =
                per_device_event_reads * query_read_units((page * event_bytes) as u64);
            // Its searchable types: each event's own GSI1 entry under the device and type, and
            // the type mark every batch holding the type puts again (an identical put bills the
            // table write; its index entry is written once per window).
            let mut mark_puts_wcu = 0.0;
            for (k, (t, share)) in types.iter().enumerate() {
                let Some(count) = searchable[k] else {
                    continue;
                };
                let type_rate = rate * share;
                if type_rate <= 0.0 {
                    continue;
                }
                let batch = f64::from(profile.events.batch_size);
                let batches_with_type = batches * (1.0 - (1.0 - share).powf(batch));
                mark_puts_wcu += batches_with_type * write_units(sizes.type_mark) as f64;
                let new_marks = (1.0 - (-type_rate * window).exp()) / window;
                let shard = usize::from(shard_of(&format!("{user}#{device}"), count));
                mark_wcu[k][shard] += new_marks * write_units(sizes.type_mark_gsi1) as f64;
                marks_per_day[k][shard] += new_marks * 86_400.0;
                // AP-09 reads up to MAX_TYPE_DEVICES of the devices that sent the type that day.
                let (_, _, gsi1_bytes, _) = sizes.events[k];
                let read_share = (MAX_TYPE_DEVICES as f64 / devices_with_type[k].max(1.0)).min(1.0);
                let device_page = (type_rate * 86_400.0).min(EVENT_PAGE);
                let wcu = type_rate * write_units(gsi1_bytes) as f64;
                let rcu = type_reads_per_type
                    * read_share
                    * query_read_units((device_page * gsi1_bytes as f64) as u64);
                gsi1.add(wcu, rcu, || KeyLoad {
                    key: device_type_gsi1pk(&user, &device, t),
                    kind: KeyKind::DeviceType,
                    wcu,
                    rcu,
                    family: None,
                });
            }
            let device_wcu = rate * event_wcu + mark_puts_wcu + twin_device_wcu;
            let device_rcu = event_read_rcu + twin_device_rcu;
            base.add(device_wcu, device_rcu, || KeyLoad {
                key: event_pk(&user, &device),
                kind: KeyKind::DeviceEvents,
                wcu: device_wcu,
                rcu: device_rcu,
                family: None,
            });
            if twin_partitions.len() <= placed {
                twin_partitions.resize(placed + 1, 0.0);
            }
            twin_partitions[placed] += twin_state_wcu;
            // The registration: one eventually consistent read per batch (a consistent one
            // only for a registration or rotation of the last second). API Gateway spreads a
            // device's batches over containers, so the per-container cache is assumed to miss.
            let auth_reads = batches * registration_rcu;
            registration_reads += auth_reads / registration_rcu;
            base.add(0.0, auth_reads, || KeyLoad {
                key: registration_pk(&device),
                kind: KeyKind::Registration,
                wcu: 0.0,
                rcu: auth_reads,
                family: None,
            });
            // The device's GSI1 entry moves (delete + put) when its 15-minute SEEN bucket does.
            let shard = usize::from(shard_of(device.as_str(), active_shards));
            let rewrites = batches.min(1.0 / SEEN_GRANULARITY_SECONDS as f64);
            status_wcu[shard] += rewrites * status_rewrite_wcu;
            status_devices[shard] += 1;
            // Its due entry (GSI3) moves at the same moments; a device that reports is watched.
            // A tight device's moves with every batch (its share of the fleet, on average).
            if rate > 0.0 {
                let tight = profile.offline.tight.clamp(0.0, 1.0);
                let due_moves = (1.0 - tight) * rewrites + tight * batches;
                let due_shard = usize::from(shard_of(device.as_str(), DUE_SHARDS));
                due_wcu[due_shard] += due_moves * due_rewrite_wcu;
                due_devices[due_shard] += 1.0;
                w.due_move_write_units_per_day += due_moves * due_rewrite_wcu * 86_400.0;
            }
            for (k, (_, share)) in types.iter().enumerate() {
                type_rates[k] += rate * share;
            }
        }
        // The owner's partitions: one live-state update per batch of each device placed there;
        // dashboards read the user partition (device items, shard 0's states, the profile) and
        // the states placed elsewhere by key. AP-05 reads the devices' own partitions.
        let _ = per_user_event_reads;
        // The daily run reads each of the owner's partitions once (one unit, one checkpoint):
        // the user partition with every device item, and each partition's live states.
        let partitions = state_partitions.len().max(1) as f64;
        let states_per_partition = f64::from(*fleet) / partitions;
        let user_partition = sizes.profile as f64
            + f64::from(*fleet) * sizes.device_item as f64
            + states_per_partition * sizes.state as f64;
        w.analytics_read_units_per_day += query_read_units(user_partition as u64)
            + (partitions - 1.0)
                * query_read_units((states_per_partition * sizes.state as f64) as u64);
        w.analytics_units_per_day += partitions;
        w.analytics_items_per_day += 2.0 * f64::from(*fleet);
        for (k, batches) in state_partitions.iter().enumerate() {
            let wcu = batches * state_update_wcu + twin_partitions.get(k).copied().unwrap_or(0.0);
            // Each batch reads the live state first (a cache miss, as for the registration).
            let state_reads = batches * strong_read_units(sizes.state);
            let rcu = state_reads
                + if k == 0 {
                    let dashboard_bytes = sizes.profile
                        + u64::from(*fleet) * sizes.device_item
                        + (u64::from(*fleet) / u64::from(placed_shards).max(1)) * sizes.state;
                    per_user_dashboards * query_read_units(dashboard_bytes)
                } else {
                    0.0
                };
            base.add(wcu, rcu, || KeyLoad {
                key: state_pk(&user, k as u32),
                kind: KeyKind::UserPartition,
                wcu,
                rcu,
                family: None,
            });
        }
        w.events_per_second += user_events;
        w.ingest_requests_per_second += state_partitions.iter().sum::<f64>();
    }

    // GSI1, type marks by type and day: one entry per device, type and window (their shard
    // hashes the device); AP-09 reads one page of marks per shard.
    for (k, (t, _)) in types.iter().enumerate() {
        let Some(count) = searchable[k] else {
            continue;
        };
        let family_wcu: f64 = mark_wcu[k].iter().sum();
        let rcu_of = |marks: f64| {
            type_reads_per_type
                * query_read_units((marks.min(MARKS_PER_PAGE) * sizes.type_mark_gsi1 as f64) as u64)
        };
        let family_rcu: f64 = marks_per_day[k].iter().map(|m| rcu_of(*m)).sum();
        for s in 0..count {
            let (wcu, rcu) = (
                mark_wcu[k][usize::from(s)],
                rcu_of(marks_per_day[k][usize::from(s)]),
            );
            gsi1.add(wcu, rcu, || KeyLoad {
                key: type_gsi1pk(t, &day, s),
                kind: KeyKind::EventType,
                wcu,
                rcu,
                family: Some(ShardFamily {
                    setting: "SEARCHABLE_EVENT_TYPES",
                    shards: count,
                    wcu: family_wcu,
                    rcu: family_rcu,
                }),
            });
        }
    }
    // GSI1, devices by status (all active): seen-bucket moves, and AP-13 reads one page per shard.
    let status_reads = reads.admin_status_reads_per_minute / 60.0;
    let status_rcu: Vec<f64> = status_devices
        .iter()
        .map(|n| {
            status_reads
                * query_read_units(((*n as f64).min(EVENT_PAGE) * sizes.state_gsi1 as f64) as u64)
        })
        .collect();
    let family = ShardFamily {
        setting: "ACTIVE_STATUS_SHARDS",
        shards: active_shards,
        wcu: status_wcu.iter().sum(),
        rcu: status_rcu.iter().sum(),
    };
    for s in 0..active_shards {
        let (wcu, rcu) = (status_wcu[usize::from(s)], status_rcu[usize::from(s)]);
        gsi1.add(wcu, rcu, || KeyLoad {
            key: status_gsi1pk(DeviceStatus::Active, s),
            kind: KeyKind::Status,
            wcu,
            rcu,
            family: Some(family.clone()),
        });
    }

    // GSI3: the due entries' moves and the raises' deletes and puts (offline devices a day),
    // the detector's Query of each due shard every minute; open alarms by severity.
    let offline_share = profile.offline.per_day.max(0.0);
    let watched: f64 = due_devices.iter().sum();
    let raises = watched * offline_share;
    let runs: f64 = 1440.0;
    let gsi3_entry = |bytes: u64| write_units(bytes) as f64;
    let due_family_wcu: f64 =
        due_wcu.iter().sum::<f64>() + raises * 2.0 * gsi3_entry(sizes.state_gsi3) / 86_400.0;
    let query_rcu = runs / 86_400.0 * 0.5;
    for s in 0..DUE_SHARDS {
        let shard_raises = due_devices[usize::from(s)] * offline_share;
        // Removed at the raise, put back when the device reports again.
        let wcu =
            due_wcu[usize::from(s)] + shard_raises * 2.0 * gsi3_entry(sizes.state_gsi3) / 86_400.0;
        let rcu = query_rcu.max(shard_raises / 86_400.0 * eventual_read_units(sizes.state_gsi3));
        gsi3.add(wcu, rcu, || KeyLoad {
            key: due_gsi3pk(s),
            kind: KeyKind::Due,
            wcu,
            rcu,
            family: Some(ShardFamily {
                setting: "DUE_SHARDS (shared::model::keys)",
                shards: DUE_SHARDS,
                wcu: due_family_wcu,
                rcu: query_rcu * f64::from(DUE_SHARDS),
            }),
        });
    }
    // The open-alarm pointer: put at the raise, deleted at the clear.
    let open_wcu = raises * 2.0 * gsi3_entry(sizes.open_pointer_gsi3) / 86_400.0;
    for s in 0..OPEN_ALARM_SHARDS {
        let wcu = open_wcu / f64::from(OPEN_ALARM_SHARDS);
        gsi3.add(wcu, 0.0, || KeyLoad {
            key: open_alarms_gsi3pk(OFFLINE_SEVERITY, s),
            kind: KeyKind::OpenAlarms,
            wcu,
            rcu: 0.0,
            family: Some(ShardFamily {
                setting: "OPEN_ALARM_SHARDS (shared::model::keys)",
                shards: OPEN_ALARM_SHARDS,
                wcu: open_wcu,
                rcu: 0.0,
            }),
        });
    }
    // The owners' alarm lists (a put at the raise, a move at the clear), spread like the
    // owners' live states: counted in GSI3's total, below any single key's limit.
    gsi3.wcu += raises * 3.0 * gsi3_entry(sizes.offline_alarm_gsi3) / 86_400.0;
    // Base table: the raise's transaction (state update, alarm and pointer puts, 2 units per
    // KB each) and the clear (alarm update, pointer delete, in ingestion's transaction).
    let raise_wcu = 2.0
        * (write_units(sizes.state)
            + write_units(sizes.offline_alarm)
            + write_units(sizes.open_pointer)) as f64;
    let clear_wcu =
        2.0 * (write_units(sizes.offline_alarm) + write_units(sizes.open_pointer)) as f64;
    base.wcu += raises * (raise_wcu + clear_wcu) / 86_400.0;
    // The detector's reads: its state read per due device (BatchGetItem, eventually
    // consistent) on the owners' partitions, and the Queries of the due and reminder shards.
    let state_reads = raises * eventual_read_units(sizes.state);
    base.rcu += state_reads / 86_400.0;
    gsi1.rcu += runs * f64::from(REMINDER_SHARDS) * 0.5 / 86_400.0;
    w.detector_runs_per_day = runs;
    w.offline_alarms_per_day = raises;
    w.detector_read_units_per_day = runs * f64::from(DUE_SHARDS + REMINDER_SHARDS) * 0.5
        + state_reads
        + raises * eventual_read_units(sizes.state_gsi3);
    w.offline_write_units_per_day = raises
        * (raise_wcu
            + clear_wcu
            + 2.0 * gsi3_entry(sizes.state_gsi3)
            + 3.0 * gsi3_entry(sizes.offline_alarm_gsi3)
            + 2.0 * gsi3_entry(sizes.open_pointer_gsi3));
    // The storm: every watched device due within 15 minutes (an outage), raised as the
    // detector reaches them: each due shard loses its entries, each open shard gains them.
    let storm_seconds = SEEN_GRANULARITY_SECONDS as f64;
    w.storm_wcu_per_due_shard = due_devices.iter().cloned().fold(0.0, f64::max)
        * gsi3_entry(sizes.state_gsi3)
        / storm_seconds;
    w.storm_wcu_per_open_shard = watched / f64::from(OPEN_ALARM_SHARDS)
        * gsi3_entry(sizes.open_pointer_gsi3)
        / storm_seconds;

    // Steady-state storage: events retained `retention_days`, one device, registration and
    // tag link per device, one profile per user.
    let stored_events = w.events_per_second * 86_400.0 * retention_days;
    let o = STORAGE_OVERHEAD_BYTES as f64;
    let per_event = |f: &dyn Fn(&EventSize) -> u64| weighted(&|e| f(e) as f64 + o);
    let d = devices as f64;
    let base_items_bytes = stored_events * event_bytes
        + d * (sizes.state + sizes.registration + sizes.tag_link) as f64
        + users as f64 * sizes.profile as f64;
    w.items = stored_events + 3.0 * d + users as f64;
    w.scanned_bytes = base_items_bytes;
    // The directory: one entry per profile and per fleet (about 100 bytes each), Scanned.
    let directory_bytes = 2.0 * users as f64 * DIRECTORY_ENTRY_BYTES;
    w.analytics_read_units_per_day += query_read_units(directory_bytes as u64);
    w.analytics_items_per_day += 2.0 * users as f64;
    w.storage_bytes = [
        base_items_bytes + w.items * o,
        stored_events * per_event(&|e| e.2) + d * (sizes.state_gsi1 as f64 + o),
        stored_events * per_event(&|e| e.3),
    ];
    w.registration_reads_per_second = registration_reads;
    w.dashboard_per_second = reads.dashboard_opens_per_minute / 60.0;
    w.other_reads_per_second = (reads.device_event_reads_per_minute
        + reads.user_event_reads_per_minute
        + reads.admin_event_type_reads_per_minute
        + reads.admin_status_reads_per_minute)
        / 60.0;
    let mut sorted: Vec<u32> = fleets.iter().map(|(n, _)| *n).collect();
    sorted.sort_unstable();
    w.fleet_min = sorted.first().copied().unwrap_or(0);
    w.fleet_median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    w.fleet_max = sorted.last().copied().unwrap_or(0);

    for table in [&mut base, &mut gsi1, &mut gsi2, &mut gsi3] {
        table.flag();
    }
    // A fleet-wide change of the largest fleet: pages of ROLLOUT_PAGE at the worker's pace.
    // Per page the owner's partition gives a page of tag links and their device items (one
    // BatchGetItem: each item a read of its own); each device's own key takes its desired
    // document once (a transaction item); its live-state partition holds at most
    // DEVICES_PER_SHARD devices, spread over the whole walk.
    let largest = u64::from(w.fleet_max);
    let seconds = largest as f64 / ROLLOUT_DEVICES_PER_SECOND;
    // A fleet smaller than a second's pace is read and written within one second.
    let window = seconds.max(1.0);
    let page = ROLLOUT_PAGE.min(largest as f64);
    let pages = (largest as f64 / ROLLOUT_PAGE).ceil();
    let page_rcu = eventual_read_units((page as u64) * sizes.tag_link)
        + page * eventual_read_units(sizes.device_item);
    let per_partition = f64::from(devices_per_shard).min(largest as f64);
    let rollout_peak = RolloutPeak {
        devices: largest,
        seconds,
        owner_partition_rcu: pages * page_rcu / window,
        state_partition_wcu: per_partition * 2.0 * state_update_wcu / window,
        device_key_wcu: 2.0 * document_wcu,
    };
    Ok(Simulation {
        profile,
        source: source.to_string(),
        shards,
        sizes,
        tables: [base, gsi1, gsi2, gsi3],
        workload: w,
        rollout_peak,
    })
}

fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 100.0 {
        group(v.round() as u64)
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        // Two significant digits, however small.
        let decimals = (-v.log10()).ceil() as usize + 1;
        format!("{v:.decimals$}")
    }
}

/// `1234567` as `1,234,567`.
pub fn group(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// The markdown section of one simulation.
pub fn render(sim: &Simulation) -> String {
    let p = &sim.profile;
    let w = &sim.workload;
    let s = &sim.sizes;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {}\n\n`{}`: {}\n",
        p.name,
        sim.source,
        p.description.trim()
    );
    let _ = writeln!(
        out,
        "| users | devices | devices per user (min / median / max) | events/s | ingest requests/s | dashboard opens/s | other reads/s |\n|---|---|---|---|---|---|---|\n| {} | {} | {} / {} / {} | {} | {} | {} | {} |\n",
        group(w.users),
        group(w.devices),
        w.fleet_min,
        w.fleet_median,
        group(u64::from(w.fleet_max)),
        num(w.events_per_second),
        num(w.ingest_requests_per_second),
        num(w.dashboard_per_second),
        num(w.other_reads_per_second),
    );
    let types: Vec<String> = p
        .events
        .types
        .iter()
        .map(|(t, share)| format!("{t} {share}"))
        .collect();
    let hot = p
        .events
        .hot_devices
        .as_ref()
        .map_or("none".to_string(), |h| {
            format!(
                "{} at {} events/min",
                group(h.count),
                h.per_device_per_minute
            )
        });
    let _ = writeln!(
        out,
        "Events: {} per device per minute, batches of {}, hot devices: {hot}; types: {}. Shards: `ACTIVE_STATUS_SHARDS` {}, `STATUS_SHARDS` {}, `SEARCHABLE_EVENT_TYPES` {}, `DEVICES_PER_SHARD` {}. Seed {}.\n",
        p.events.per_device_per_minute,
        p.events.batch_size,
        types.join(", "),
        sim.shards.active_status,
        sim.shards.status,
        sim.shards
            .searchable
            .iter()
            .map(|(t, n)| format!("{t}:{n}"))
            .collect::<Vec<_>>()
            .join(","),
        p.devices_per_shard(),
        p.seed,
    );
    let r = &sim.rollout_peak;
    let _ = writeln!(
        out,
        "Device twin (assumed rates, profile `twin`): {} desired changes and {} commands per device a month, {} fleet-wide changes a month reaching every device; their writes and reads are in the device and live-state partitions above (a document of {} B). A fleet-wide change of the largest fleet ({} devices) at the worker's pace of {} devices/s takes {} s: the owner's partition reads {} RCU/s while it runs (limit 3,000), one live-state partition takes {} WCU/s, each device's own key {} WCU once.\n",
        p.twin.desired_changes_per_device_per_month,
        p.twin.commands_per_device_per_month,
        p.twin.rollouts_per_month,
        s.twin_document,
        group(r.devices),
        group(ROLLOUT_DEVICES_PER_SECOND as u64),
        num(r.seconds),
        num(r.owner_partition_rcu),
        num(r.state_partition_wcu),
        num(r.device_key_wcu),
    );
    let events: Vec<String> = s
        .events
        .iter()
        .map(|(t, b, g1, g2)| {
            format!(
                "{t} {b} B ({} WCU), GSI1 {g1} B, GSI2 {g2} B",
                write_units(*b)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "Item sizes (real items, DynamoDB's size rules): event {}; device live state {} B ({} WCU per update), its GSI1 entry {} B; profile {} B; registration {} B.\n",
        events.join("; "),
        s.state,
        write_units(s.state),
        s.state_gsi1,
        s.profile,
        s.registration,
    );
    for table in &sim.tables {
        let _ = writeln!(out, "### {}\n", table.name);
        let peak_w = table.top_writes.first().map_or(0.0, |k| k.wcu);
        let peak_r = table.top_reads.first().map_or(0.0, |k| k.rcu);
        let _ = writeln!(
            out,
            "{} partition keys with traffic; {} WCU/s and {} RCU/s in all. The busiest key uses {} of a partition's 1,000 WCU/s; the most read {} of its 3,000 RCU/s.\n",
            group(table.keys),
            num(table.wcu),
            num(table.rcu),
            pct(peak_w / WCU_LIMIT),
            pct(peak_r / RCU_LIMIT),
        );
        for (title, list) in [("writes", &table.top_writes), ("reads", &table.top_reads)] {
            if list.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "Top keys by {title}:\n\n| key | holds | WCU/s | share of writes | RCU/s | share of reads |\n|---|---|---|---|---|---|"
            );
            for load in list.iter().take(5) {
                let (ws, rs) = table.shares(load);
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} | {} |",
                    load.key,
                    load.kind.describe(),
                    num(load.wcu),
                    pct(ws),
                    num(load.rcu),
                    pct(rs)
                );
            }
            out.push('\n');
        }
        if table.flags.is_empty() {
            let _ = writeln!(
                out,
                "**Verdict: fine.** No key over 1,000 WCU/s, 3,000 RCU/s or 10% of the {}'s traffic.\n",
                table.name
            );
            continue;
        }
        let limit = table.flags.iter().any(|f| f.over_limit);
        let _ = writeln!(
            out,
            "**Verdict: {}.**\n",
            if limit {
                "throttles: keys over DynamoDB's per-partition limits"
            } else {
                "uneven but under the per-partition limits"
            }
        );
        // A sharded family's keys are flagged together: one line per family.
        let mut lines: Vec<(String, &Flag, Vec<String>)> = Vec::new();
        for f in &table.flags {
            let (prefix, shard) = match &f.load.family {
                Some(_) => f
                    .load
                    .key
                    .rsplit_once('#')
                    .map_or((f.load.key.clone(), None), |(p, s)| {
                        (p.to_string(), Some(s))
                    }),
                None => (f.load.key.clone(), None),
            };
            match lines.iter_mut().find(|(p, ..)| *p == prefix) {
                Some((_, _, shards)) => shards.extend(shard.map(str::to_string)),
                None => lines.push((prefix, f, shard.map(str::to_string).into_iter().collect())),
            }
        }
        for (prefix, f, shards) in &mut lines {
            shards.sort_by_key(|s| s.parse::<u32>().unwrap_or(u32::MAX));
            let key = if shards.is_empty() {
                format!("`{prefix}`")
            } else {
                format!("`{prefix}#{{{}}}`", shards.join(","))
            };
            let _ = writeln!(
                out,
                "- {key} ({}): {}. Fix: {}.",
                f.load.kind.describe(),
                f.reasons.join("; "),
                f.fix
            );
        }
        let mut settings: BTreeMap<&str, (u16, u16)> = BTreeMap::new();
        for f in &table.flags {
            if let (Some(n), Some(family)) = (f.suggested_shards, &f.load.family) {
                let e = settings.entry(family.setting).or_insert((family.shards, n));
                e.1 = e.1.max(n);
            }
        }
        for (setting, (now, needed)) in settings {
            if needed > now {
                let beyond = if needed > MAX_SHARDS {
                    format!(" That is beyond the {MAX_SHARDS} the configuration accepts, and every {} read would scatter over that many Queries: at this rate the key needs a finer time bucket than a day", PatternId::EventsByType)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "- Shard setting that fixes every flagged family of the {}: `{setting}` = {} (now {now}).{beyond}",
                    table.name,
                    group(u64::from(needed))
                );
            }
        }
        if table.unlisted_over_limit() > 0 {
            let _ = writeln!(
                out,
                "- and {} more keys over a limit.",
                group(table.unlisted_over_limit())
            );
        }
        out.push('\n');
    }
    let devices = w.devices.max(1) as f64 / 1e6;
    let _ = writeln!(
        out,
        "### Offline detection (alarm-watch)\n\n| offline alarms a day | detector read units a day | offline alarm write units a day | due-entry moves, write units a day (ingest) | per million devices a day: detector reads / alarm writes / due moves | outage storm WCU/s: busiest DUE# / OPEN# shard |\n|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} / {} / {} | {} / {} |\n",
        num(w.offline_alarms_per_day),
        num(w.detector_read_units_per_day),
        num(w.offline_write_units_per_day),
        num(w.due_move_write_units_per_day),
        num(w.detector_read_units_per_day / devices),
        num(w.offline_write_units_per_day / devices),
        num(w.due_move_write_units_per_day / devices),
        num(w.storm_wcu_per_due_shard),
        num(w.storm_wcu_per_open_shard),
    );
    out
}

/// The whole `docs/key-distribution.md` for `sims`.
pub fn render_report(sims: &[Simulation]) -> String {
    let mut out = String::from(
        "# Key distribution: simulated load per partition key\n\n\
         Generated by `make simulate` (`cargo run -p fleet-perf -- simulate`) from the profiles in \
         `bench/profiles/`; do not edit by hand. The simulator draws each fleet with a seeded RNG, \
         builds every key with the real builders of `shared::model::keys` and the real shard function and \
         counts, prices the real items with DynamoDB's size rules (`local/perf/src/capacity.rs`), and adds \
         up steady-state units per second per partition key. A key is flagged over 1,000 WCU/s or \
         3,000 RCU/s (DynamoDB's per-partition limits) or over 10% of its table's or index's traffic \
         (docs/key-distribution.md's target); for a write-sharded key it gives the shard count that fixes it \
         (`shard::shards_for_peak_wcu`: 2x headroom, and at most 10% per shard).\n\n\
         Assumptions: rates are steady averages (no diurnal peak); every device is `active`; \
         API Gateway spreads a device's batches over containers, so every ingest request reads \
         the registration (eventually consistent) and the device's live state (consistent; a per-container cache \
         is assumed to miss); event values are numbers; the dashboard, AP-04 and AP-05 reads \
         are spread evenly over users or devices; each read returns one page (at most 50 events). \
         Searchable types (docs/design.md, \"The event-type index\"): each event's own GSI1 entry is \
         under its device and type; every batch holding a searchable type puts that hour's type mark \
         again (a table write; an identical put changes no index entry), and the type's shared \
         `TYPE#` partitions take one mark per device, type and hour a device sends the type in \
         (Poisson events: 1 - e^(-rate x hour) of the hours); AP-09 reads one page of marks per \
         shard and at most 25 devices' own keys. Offline detection (docs/design.md, \"Offline \
         detection\"): every reporting device is on the due index (GSI3 `DUE#`), whose entry moves \
         with its `SEEN#` entry; `offline.per_day` of the devices go silent a day (default 1%, an \
         assumption) and are raised by the detector (one transaction each) and cleared by their next \
         batch; the detector Queries its 64 `DUE#` and 16 `REMIND#` shards every minute. The outage \
         storm is every watched device due within one 15-minute window.\n\n",
    );
    out.push_str("| profile | devices | events/s | base table peak WCU/s | GSI1 peak WCU/s | GSI2 peak WCU/s | GSI3 peak WCU/s | outage storm WCU/s (DUE# / OPEN# shard) | verdict |\n|---|---|---|---|---|---|---|---|---|\n");
    for sim in sims {
        let peak = |t: &TableLoad| t.top_writes.first().map_or(0.0, |k| k.wcu);
        let w = &sim.workload;
        let limit = sim
            .tables
            .iter()
            .any(|t| t.flags.iter().any(|f| f.over_limit))
            || w.storm_wcu_per_due_shard > WCU_LIMIT
            || w.storm_wcu_per_open_shard > WCU_LIMIT;
        let uneven = sim.tables.iter().any(|t| !t.flags.is_empty());
        let verdict = if limit {
            "keys over the per-partition limits"
        } else if uneven {
            "under the limits; some keys over 10%"
        } else {
            "fine"
        };
        let _ = writeln!(
            out,
            "| [{}](#{}) | {} | {} | {} | {} | {} | {} | {} / {} | {verdict} |",
            sim.profile.name,
            sim.profile.name,
            group(sim.workload.devices),
            num(sim.workload.events_per_second),
            num(peak(&sim.tables[0])),
            num(peak(&sim.tables[1])),
            num(peak(&sim.tables[2])),
            num(peak(&sim.tables[3])),
            num(w.storm_wcu_per_due_shard),
            num(w.storm_wcu_per_open_shard),
        );
    }
    out.push('\n');
    for sim in sims {
        out.push_str(&render(sim));
    }
    out
}

/// Runs the profiles named in `args` (all documented ones when none is named) and either
/// prints `render(sims)` (profiles named), writes it to `path` (none named), or with `--check`
/// fails when `path` is stale.
pub fn write_or_print(
    profiles: &[std::path::PathBuf],
    check: bool,
    path: &str,
    render: impl FnOnce(&[Simulation]) -> String,
) -> Result<(), Error> {
    let root = fleet_testkit::repo_root();
    let (paths, documented) = if profiles.is_empty() {
        (documented_profiles(&root)?, true)
    } else {
        (profiles.to_vec(), false)
    };
    let mut sims = Vec::new();
    for p in &paths {
        let shown = p.strip_prefix(&root).unwrap_or(p).display().to_string();
        sims.push(simulate(Profile::load(p)?, &shown)?);
    }
    let text = render(&sims);
    if !documented {
        print!("{text}");
        return Ok(());
    }
    let full = root.join(path);
    if check {
        let current = std::fs::read_to_string(&full).unwrap_or_default();
        if current != text {
            return Err(format!("{path} is stale: run `make simulate` and `make cost`").into());
        }
        return Ok(());
    }
    std::fs::write(&full, text)?;
    println!("wrote {path}");
    Ok(())
}

/// `fleet-perf simulate [--check] [PROFILE...]`: without profiles, all documented ones into
/// docs/key-distribution.md (or, with `check`, verifies it is up to date).
pub fn command(profiles: &[std::path::PathBuf], check: bool) -> Result<(), Error> {
    write_or_print(profiles, check, REPORT_PATH, render_report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(yaml: &str) -> Profile {
        let p: Profile = yaml_serde::from_str(yaml).unwrap();
        p.check().unwrap();
        p
    }

    const UNIFORM: &str = "
name: uniform
description: even fleet
seed: 7
users: 2000
devices_per_user: {distribution: fixed, devices: 5}
events: {per_device_per_minute: 1, batch_size: 10, types: {temperature: 1, humidity: 1, door: 1, power: 1}}
reads: {dashboard_opens_per_minute: 100, device_event_reads_per_minute: 100}
";

    #[test]
    fn tight_offline_detection_moves_the_due_entry_with_every_batch() {
        let standard = simulate(profile(UNIFORM), "test").unwrap();
        let tight = simulate(
            profile(&format!(
                "{UNIFORM}offline: {{per_day: 0.01, tight: 1.0}}\n"
            )),
            "test",
        )
        .unwrap();
        // One event a minute in batches of 10: a batch every 10 minutes, each moving a tight
        // device's entry (144 a day, 2 units each), against a standard device's SEEN# moves
        // (at most one per 15-minute bucket: 96 a day).
        let per_device = |s: &Simulation| s.workload.due_move_write_units_per_day / 10_000.0;
        assert!(
            (per_device(&standard) - 2.0 * 96.0).abs() < 1e-6,
            "{}",
            per_device(&standard)
        );
        assert!(
            (per_device(&tight) - 2.0 * 144.0).abs() < 1e-6,
            "{}",
            per_device(&tight)
        );
    }

    #[test]
    fn a_uniform_profile_is_not_flagged() {
        let sim = simulate(profile(UNIFORM), "test").unwrap();
        assert_eq!(sim.workload.devices, 10_000);
        assert!((sim.workload.events_per_second - 10_000.0 / 60.0).abs() < 1e-6);
        for t in &sim.tables {
            assert!(t.flags.is_empty(), "{}: {:?}", t.name, t.flags);
        }
    }

    #[test]
    fn one_absurd_device_is_flagged_on_the_base_table_by_name() {
        let yaml = "
name: one-hot
description: one device at 120,000 events a minute
users: 3
devices_per_user: {distribution: fixed, devices: 1}
events:
  per_device_per_minute: 1
  batch_size: 100
  hot_devices: {count: 1, per_device_per_minute: 120000}
  types: {temperature: 1}
twin: {desired_changes_per_device_per_month: 0, commands_per_device_per_month: 0, rollouts_per_month: 0}
";
        let sim = simulate(profile(yaml), "test").unwrap();
        let base = &sim.tables[0];
        let hot = base
            .flags
            .iter()
            .find(|f| f.over_limit)
            .expect("the hot device is over 1,000 WCU/s");
        assert_eq!(hot.load.kind, KeyKind::DeviceEvents);
        // 2,000 events/s of 1-WCU items.
        assert!((hot.load.wcu - 2000.0).abs() < 1e-6, "{}", hot.load.wcu);
        // The key is the real event partition key of one of the simulated devices.
        let keys: Vec<String> = (0..3)
            .map(|i| event_pk(&user_id(i), &device_id(i, 0)))
            .collect();
        assert!(keys.contains(&hot.load.key), "{}", hot.load.key);
        assert!(render(&sim).contains(&format!("`{}`", hot.load.key)));
        assert!(
            hot.suggested_shards.is_none(),
            "an event partition is not sharded"
        );
    }

    #[test]
    fn shard_suggestion_matches_a_hand_computed_case() {
        // One event type at 5,000 events/s, all of GSI1's traffic: the seed's rule asks for
        // 2 x 5,000 / 1,000 = 10 shards, and 10 shards carry 10% each (not over).
        let family = ShardFamily {
            setting: "EVENT_TYPE_SHARDS",
            shards: 8,
            wcu: 5000.0,
            rcu: 0.0,
        };
        assert_eq!(suggested_shards(&family, 5000.0, 0.0), 10);
        // 30% of the index's writes at low volume: 3 shards for the share, never fewer than 8.
        let small = ShardFamily {
            wcu: 30.0,
            ..family.clone()
        };
        assert_eq!(suggested_shards(&small, 100.0, 0.0), 8);
        let small = ShardFamily { shards: 1, ..small };
        assert_eq!(suggested_shards(&small, 100.0, 0.0), 3);
        // Reads: 9,000 RCU/s over the family needs 2 x 9,000 / 3,000 = 6.
        let reads = ShardFamily {
            shards: 1,
            wcu: 0.0,
            rcu: 9000.0,
            ..family
        };
        assert_eq!(suggested_shards(&reads, 0.0, 90_000.0), 6);
    }

    #[test]
    fn a_type_that_is_every_event_holds_without_a_setting() {
        // 60,000 events/s of one searchable type from 1,000 devices: each device's own key
        // takes its 60 WCU/s, and the type's shared partitions one mark per device and hour
        // (1,000 / 3,600 WCU/s over 8 shards), where per-event entries took 7,500 WCU/s each.
        let yaml = "
name: busy-type
description: 1,000 devices at 3,600 events a minute
users: 100
devices_per_user: {distribution: fixed, devices: 10}
events: {per_device_per_minute: 3600, batch_size: 100, types: {temperature: 1}}
shards: {searchable: temperature}
";
        let sim = simulate(profile(yaml), "test").unwrap();
        let gsi1 = &sim.tables[1];
        assert!(gsi1.flags.is_empty(), "{:?}", gsi1.flags);
        // The rest: the marks (1,000 / 3,600) and the live states' SEEN# moves (2 x 1,000 / 900).
        let rest = 1_000.0 / 3_600.0 + 2.0 * 1_000.0 / 900.0;
        assert!((gsi1.wcu - (60_000.0 + rest)).abs() < 1e-3, "{}", gsi1.wcu);
        let busiest = &gsi1.top_writes[0];
        assert_eq!(busiest.kind, KeyKind::DeviceType);
        assert!((busiest.wcu - 60.0).abs() < 1e-9);
        // The base table is fine: 60 WCU/s per device (and a mark put per batch), 1,000 devices.
        assert!(sim.tables[0].flags.iter().all(|f| !f.over_limit));
    }

    #[test]
    fn the_same_profile_draws_the_same_fleet() {
        let yaml = "
name: skewed
description: lognormal
seed: 11
users: 500
devices_per_user: {distribution: lognormal, median: 3, sigma: 1.2, max: 400}
events: {per_device_per_minute: 1, batch_size: 5, types: {temperature: 1}}
";
        let a = simulate(profile(yaml), "a").unwrap();
        let b = simulate(profile(yaml), "b").unwrap();
        assert_eq!(a.workload, b.workload);
        assert!(
            a.workload.fleet_max > a.workload.fleet_median * 5,
            "{:?}",
            a.workload
        );
    }
}
