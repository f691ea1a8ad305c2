//! Workload profiles (`bench/profiles/*.yaml`): users, fleet sizes, event and read rates,
//! the twin's traffic, offline detection and shard settings.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use shared::model::ids::EventType;
use shared::model::shard::ShardCounts;

/// What the simulator's steps fail with.
pub(super) type Error = Box<dyn std::error::Error + Send + Sync>;

/// Where the documented profiles live.
pub const PROFILES_DIR: &str = "bench/profiles";
/// The default day events are written on (the GSI1 `TYPE#` keys carry the day).
pub const DEFAULT_DAY: &str = "2026-11-20";
/// Events retained (`RETENTION_DAYS` default), for storage.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;

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
    /// Organizations (issue 33): fleets run by their members through the console.
    #[serde(default)]
    pub organizations: Vec<Organization>,
    /// A staged firmware rollout (issue 40) over the largest fleet, when given.
    #[serde(default)]
    pub firmware_rollout: Option<FirmwareRolloutPlan>,
}

/// A staged firmware rollout's plan, as `POST /me/rollouts` takes it; an absent field takes the
/// API's default, and a value the API refuses is refused here too.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FirmwareRolloutPlan {
    /// Cumulative percents.
    #[serde(default)]
    pub stages: Option<Vec<u8>>,
    /// Seconds a stage soaks after meeting its criterion.
    #[serde(default)]
    pub soak_seconds: Option<u32>,
    /// Check-ins after the reboot that make a device succeed.
    #[serde(default)]
    pub healthy_check_ins: Option<u8>,
    /// Percent of a stage that must succeed.
    #[serde(default)]
    pub success_percent: Option<u8>,
}

/// An organization (issue 33): its fleet is an owner like any other (owner key
/// `org:{orgId}`, owner-adaptive sharding), drawn after the large fleets; its members reach it
/// through the console, each request reading the caller's membership first.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Organization {
    /// Devices of its fleet.
    pub devices: u32,
    /// Members (each a person with their own `MEMBER#{userId}` partition).
    pub members: u32,
    /// Its devices' rate, if not the profile's.
    #[serde(default)]
    pub events_per_device_per_minute: Option<f64>,
    /// What its members do (default: [`MemberActivity::default`]).
    #[serde(default)]
    pub activity: MemberActivity,
}

/// What an organization's members do through the console: an ordinary day's polling, and the
/// bursts the simulator reports as peaks (a storm is not an average).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MemberActivity {
    /// Share of members with a visible dashboard at an ordinary moment.
    pub online: f64,
    /// How often a visible dashboard asks again (the console's `POLL_SECONDS`).
    pub poll_seconds: f64,
    /// Device pages (the device, its events and its summaries) an online member opens a minute.
    pub device_pages_per_minute: f64,
    /// The incident: every member opens the console (their organizations, the dashboard, the
    /// alarms, the alarming device's page) within this many seconds, then keeps polling.
    pub incident_seconds: f64,
    /// An admin's import: devices registered (`POST /orgs/{orgId}/devices`) ...
    pub import_devices: u32,
    /// ... at this many a second (a script's concurrency).
    pub import_per_second: f64,
    /// The member wave: an admin invites every member, and they accept, within this many
    /// seconds each.
    pub invitation_seconds: f64,
}

impl Default for MemberActivity {
    /// Assumptions, not measurements: a quarter of the members have the dashboard open; each
    /// opens a device page a minute; an incident brings every member in within 10 seconds; an
    /// admin imports 10,000 devices at 50 a second; a whole team is invited and joins within a
    /// minute each. Polling is the console's (`web/src/pages/Dashboard.tsx`: every 5 s).
    fn default() -> Self {
        Self {
            online: 0.25,
            poll_seconds: 5.0,
            device_pages_per_minute: 1.0,
            incident_seconds: 10.0,
            import_devices: 10_000,
            import_per_second: 50.0,
            invitation_seconds: 60.0,
        }
    }
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

    pub(super) fn check(&self) -> Result<(), Error> {
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
        for org in &self.organizations {
            let a = &org.activity;
            // Teams over the product's limit may be simulated: that is how the limit is found.
            if org.members == 0
                || !(0.0..=1.0).contains(&a.online)
                || [
                    a.poll_seconds,
                    a.incident_seconds,
                    a.invitation_seconds,
                    a.import_per_second,
                ]
                .iter()
                .any(|v| v.is_nan() || *v <= 0.0)
                || a.device_pages_per_minute.is_nan()
                || a.device_pages_per_minute < 0.0
            {
                return Err(
                    "organizations: members >= 1, online a share, seconds and rates > 0".into(),
                );
            }
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
    pub(super) fn type_shares(&self) -> Vec<(EventType, f64)> {
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
