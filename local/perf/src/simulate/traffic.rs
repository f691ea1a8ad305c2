//! The steady-state traffic of a drawn fleet, phase by phase: each owner's devices (events,
//! type index, registration, status and due entries) and partitions, the sharded key
//! families, offline detection, storage, and the peak of a fleet-wide rollout.

use shared::model::entities::alarm::REMINDER_SHARDS;
use shared::model::entities::device_state::{
    due_gsi3pk, placement, state_pk, status_gsi1pk, DUE_SHARDS,
};
use shared::model::entities::event::device_type_gsi1pk;
use shared::model::entities::open_alarm::{open_alarms_gsi3pk, OPEN_ALARM_SHARDS};
use shared::model::entities::registration::registration_pk;
use shared::model::entities::type_mark::{type_gsi1pk, TYPE_WINDOW_SECONDS};
use shared::model::ids::{EventType, UserId};
use shared::model::keys::event_pk;
use shared::model::offline::{OFFLINE_SEVERITY, SEEN_GRANULARITY_SECONDS};
use shared::model::shard::{shard_of, ShardCounts};
use shared::model::status::DeviceStatus;
use shared::model::timestamp::Day;
use shared::ops::events::MAX_TYPE_DEVICES;

use super::fleet::{device_id, Fleet};
use super::orgs::{OrgModel, OrgSteady, MEMBERSHIP_READ_UNITS};
use super::partitions::{KeyKind, KeyLoad, ShardFamily, TableLoad};
use super::profile::{Profile, DEFAULT_RETENTION_DAYS};
use super::sizes::EVENT_PAGE;
use super::sizes::{EventSize, ItemSizes};
use fleet_testkit::capacity::{
    eventual_read_units, query_read_units, strong_read_units, write_units, STORAGE_OVERHEAD_BYTES,
};

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
    /// Summaries (issue 32): write units a day of flush transactions (the state's extra unit
    /// and the 5-minute blocks) and daily rolls (day and month items).
    pub series_write_units_per_day: f64,
    /// Summaries: consistent read units a day (blocks read at a flush, the day's blocks and
    /// the month item read at a roll).
    pub series_read_units_per_day: f64,
    /// Summaries: flush transactions a day, fleet-wide.
    pub series_flushes_per_day: f64,
    /// Summaries: stored bytes (with overhead) of blocks, day and month items at steady state.
    pub series_storage_bytes: f64,
    /// Summaries: stored items (blocks, day and month items).
    pub series_items: f64,
    /// Organization requests a second at an ordinary moment (each reads the caller's
    /// membership: 0.5 units), part of the API's reads.
    pub org_requests_per_second: f64,
}

/// The live state's room for open summaries before a flush: one write unit.
const STATE_FLUSH_BYTES: f64 = 1024.0;
/// What each type adds to the state's `series` attribute besides its buckets (its name,
/// boundaries and the 24-hour trail), bytes.
const SERIES_TYPE_BYTES: f64 = 40.0;
/// A summary item's key and attributes besides its buckets, bytes (about).
const SERIES_KEY_BYTES: f64 = 120.0;
/// Days an hourly (day) item and a daily (month) item are kept: the template's defaults.
const SERIES_HOURLY_DAYS: f64 = 400.0;
/// See [`SERIES_HOURLY_DAYS`].
const SERIES_DAILY_DAYS: f64 = 1826.0;

/// The chance that a type read `type_rate` times a second has a reading in a 2-hour block.
fn in_block_of(type_rate: f64) -> f64 {
    1.0 - (-type_rate * 7200.0).exp()
}

/// One device's summaries, per second: write and read units on its event partition, the
/// extra write units on its live state (a flush's transaction bills the state twice), the
/// flushes, and the stored bytes and items.
#[derive(Default)]
struct DeviceSeries {
    partition_wcu: f64,
    partition_rcu: f64,
    state_wcu: f64,
    flushes: f64,
    bytes: f64,
    items: f64,
}

/// The summaries of a device sending `rate` events a second with the profile's type mix
/// (docs/design.md section 13): open 5-minute buckets grow the live state until it passes one
/// write unit, then a transaction writes the closed hours to their 2-hour blocks (2 units per
/// KB per item, the state's update billed twice); each day a roll writes the day item (hourly
/// buckets) and the month item's day; blocks are kept as long as the raw readings, day items
/// 400 days, month items 5 years.
fn device_series(m: &Model, rate: f64, retention_days: f64) -> DeviceSeries {
    let sizes = m.sizes;
    let mut out = DeviceSeries::default();
    if rate <= 0.0 {
        return out;
    }
    let five = 300.0;
    let mut growth = 0.0; // state bytes a second
    let mut active_types = 0.0;
    for (_, share) in &m.types {
        let type_rate = rate * share;
        if type_rate <= 0.0 {
            continue;
        }
        active_types += 1.0;
        let per_bucket = type_rate * five;
        let present = 1.0 - (-per_bucket).exp();
        let [dense, sparse] = sizes.series_bucket_bytes;
        let bytes = sparse + (dense - sparse) * ((per_bucket - 1.0) / 4.0).clamp(0.0, 1.0);
        growth += present / five * bytes;
    }
    let room =
        (STATE_FLUSH_BYTES - sizes.state as f64 - active_types * SERIES_TYPE_BYTES).max(100.0);
    // Closed hours only: at most one flush an hour.
    let interval = (room / growth).max(3600.0);
    let flushes = 1.0 / interval;
    let [block, day_item, month_item] = sizes.series_items;
    let tx = |bytes: u64| 2.0 * write_units(bytes) as f64;
    let mut flush_wcu = 0.0;
    let mut flush_rcu = 0.0;
    let mut roll_wcu = 0.0;
    let mut roll_rcu = 0.0;
    for (_, share) in &m.types {
        let type_rate = rate * share;
        if type_rate <= 0.0 {
            continue;
        }
        // A flush writes the type's blocks of the closed hours (plus the one partly flushed
        // before), if the type had readings since the last one.
        let in_flush = 1.0 - (-type_rate * interval).exp();
        let blocks = interval / 7200.0 * in_block_of(type_rate) + 1.0;
        flush_wcu += in_flush * blocks * tx(block);
        flush_rcu += in_flush * blocks * strong_read_units(block);
        // A roll a day the type reports: the day item and the month item, read then written.
        let in_day = 1.0 - (-type_rate * 86_400.0).exp();
        roll_wcu += in_day * (tx(day_item) + tx(month_item)) / 86_400.0;
        roll_rcu += in_day
            * (query_read_units((12.0 * in_block_of(type_rate) * block as f64) as u64) * 2.0
                + strong_read_units(month_item))
            / 86_400.0;
        let o = STORAGE_OVERHEAD_BYTES as f64;
        // Only spans with readings have an item.
        let in_block = in_block_of(type_rate);
        let in_month = 1.0 - (-type_rate * 30.4 * 86_400.0).exp();
        let blocks_kept = in_block * 12.0 * retention_days;
        let days_kept = in_day * SERIES_HOURLY_DAYS;
        let months_kept = in_month * SERIES_DAILY_DAYS / 30.4;
        // An item holds only the buckets with readings: a sparse type's are smaller.
        let in_five = 1.0 - (-type_rate * 300.0).exp();
        let in_hour = 1.0 - (-type_rate * 3600.0).exp();
        let filled = |full: u64, fill: f64| {
            SERIES_KEY_BYTES + (full as f64 - SERIES_KEY_BYTES).max(0.0) * fill.min(1.0)
        };
        out.bytes += blocks_kept * (filled(block, in_five / in_block) + o)
            + days_kept * (filled(day_item, in_hour / in_day) + o)
            + months_kept * (filled(month_item, in_day / in_month) + o);
        out.items += blocks_kept + days_kept + months_kept;
    }
    out.partition_wcu = flushes * flush_wcu + roll_wcu;
    out.partition_rcu = flushes * flush_rcu + roll_rcu;
    out.state_wcu = flushes * m.state_update_wcu;
    out.flushes = flushes;
    out
}

/// Bytes of a directory (GSI2) entry: keys, entity type, user id, shards and device count.
const DIRECTORY_ENTRY_BYTES: f64 = 100.0;

/// Type marks one AP-09 Query of a (day, shard) returns at most.
const MARKS_PER_PAGE: f64 = 4.0 * MAX_TYPE_DEVICES as f64;

/// What every key's load is computed from: the profile, its items' sizes, its drawn fleet and
/// the per-event and per-device costs they give.
pub(super) struct Model<'a> {
    profile: &'a Profile,
    sizes: &'a ItemSizes,
    day: &'a Day,
    fleet: &'a Fleet,
    /// The event type mix: each type with its share of events.
    types: Vec<(EventType, f64)>,
    /// Per type of the mix, its shard count when it is searchable.
    searchable: Vec<Option<u16>>,
    /// Per type of the mix, how many devices send it on a day (what AP-09 reads; a Poisson
    /// device sends at least one event of the type that day with 1 - e^(-rate x day)).
    devices_with_type: Vec<f64>,
    event_wcu: f64,
    event_bytes: f64,
    state_update_wcu: f64,
    status_rewrite_wcu: f64,
    registration_rcu: f64,
    due_rewrite_wcu: f64,
    per_user_dashboards: f64,
    per_device_event_reads: f64,
    type_reads_per_type: f64,
    active_shards: u16,
    devices_per_shard: u32,
    document_wcu: f64,
    twin_device_wcu: f64,
    twin_device_rcu: f64,
    twin_state_wcu: f64,
    /// The profile's organizations.
    pub(super) orgs: Vec<OrgModel>,
}

impl<'a> Model<'a> {
    pub(super) fn new(
        profile: &'a Profile,
        sizes: &'a ItemSizes,
        shards: &'a ShardCounts,
        day: &'a Day,
        fleet: &'a Fleet,
    ) -> Self {
        let types = profile.type_shares();
        let reads = &profile.reads;
        let (users, devices) = (fleet.users, fleet.devices);
        // The twin, per device per second: a desired change (an owner's or a rollout's) puts
        // the document in a transaction (2 x its units), is read once at delivery (a
        // consistent read) and reported (a put of the reported document); a command is put in
        // a transaction, read by the delivery's Query, marked delivered and acknowledged. On
        // the live state: the desired version (a transaction item), the reported version, the
        // command sequence (a transaction item) and the queue's watermark.
        let twin = &profile.twin;
        let desired_rate =
            (twin.desired_changes_per_device_per_month + twin.rollouts_per_month) / MONTH_SECONDS;
        let command_rate = twin.commands_per_device_per_month / MONTH_SECONDS;
        let document_wcu = write_units(sizes.twin_document) as f64;
        let state_update_wcu = write_units(sizes.state) as f64;
        let searchable: Vec<Option<u16>> =
            types.iter().map(|(t, _)| shards.type_shards(t)).collect();
        let mut model = Self {
            profile,
            sizes,
            day,
            fleet,
            searchable,
            devices_with_type: vec![0.0_f64; types.len()],
            event_wcu: 0.0,
            event_bytes: 0.0,
            state_update_wcu,
            // Offline detection (docs/design.md, "Offline detection"): due entries move with
            // SEEN#.
            status_rewrite_wcu: 2.0 * write_units(sizes.state_gsi1) as f64,
            registration_rcu: eventual_read_units(sizes.registration),
            due_rewrite_wcu: 2.0 * write_units(sizes.state_gsi3) as f64,
            per_user_dashboards: reads.dashboard_opens_per_minute / 60.0 / users.max(1) as f64,
            per_device_event_reads: reads.device_event_reads_per_minute
                / 60.0
                / devices.max(1) as f64,
            type_reads_per_type: reads.admin_event_type_reads_per_minute
                / 60.0
                / types.len() as f64,
            active_shards: shards.status_shards(DeviceStatus::Active),
            devices_per_shard: profile.devices_per_shard(),
            document_wcu,
            twin_device_wcu: desired_rate * (2.0 * document_wcu + document_wcu)
                + command_rate * (2.0 * document_wcu + 2.0 * document_wcu),
            twin_device_rcu: desired_rate * strong_read_units(sizes.twin_document)
                + command_rate * strong_read_units(sizes.twin_document),
            twin_state_wcu: desired_rate * 3.0 * state_update_wcu
                + command_rate * 3.0 * state_update_wcu,
            types,
            orgs: Vec::new(),
        };
        // Per-event costs, weighted by the type mix.
        model.event_wcu = model.weighted(&|e| write_units(e.1) as f64);
        model.event_bytes = model.weighted(&|e| e.1 as f64);
        model.orgs = super::orgs::models(profile, fleet, sizes, model.event_bytes);
        model.devices_with_type = model.devices_with_type();
        model
    }

    /// Organization `k` of the profile when fleet `i` is its fleet.
    fn org_of(&self, i: u64) -> Option<(usize, &OrgModel)> {
        self.orgs.iter().enumerate().find(|(_, o)| o.index == i)
    }

    /// `f` of each event type's sizes, weighted by the type mix.
    fn weighted(&self, f: &dyn Fn(&EventSize) -> f64) -> f64 {
        self.sizes
            .events
            .iter()
            .zip(&self.types)
            .map(|(e, (_, w))| f(e) * w)
            .sum()
    }

    /// Device number `global`'s rate, in events per minute: hot, its large fleet's, or the
    /// profile's.
    fn per_minute(&self, global: u64, rate_override: Option<f64>) -> f64 {
        if self.fleet.hot.contains(&global) {
            self.profile
                .events
                .hot_devices
                .as_ref()
                .map_or(0.0, |h| h.per_device_per_minute)
        } else {
            rate_override.unwrap_or(self.profile.events.per_device_per_minute)
        }
    }

    /// The event-type index (docs/design.md, "The event-type index"): per searchable type,
    /// how many devices send it on a day.
    fn devices_with_type(&self) -> Vec<f64> {
        let mut devices_with_type = vec![0.0_f64; self.types.len()];
        let mut global = 0u64;
        for (fleet, rate_override) in &self.fleet.sizes {
            for _ in 0..*fleet {
                let rate = self.per_minute(global, *rate_override) / 60.0;
                global += 1;
                for (k, (_, share)) in self.types.iter().enumerate() {
                    if self.searchable[k].is_some() {
                        devices_with_type[k] += 1.0 - (-rate * share * 86_400.0).exp();
                    }
                }
            }
        }
        devices_with_type
    }
}

/// One owner's live-state partitions while its devices are placed: the batches each receives,
/// the twin's writes on each, and how many partitions registration has opened.
struct OwnerPartitions {
    events: f64,
    state: Vec<f64>,
    twin: Vec<f64>,
    placed_shards: u32,
    /// An organization's fleet: the first dashboard page's devices per partition, and its
    /// busiest device (key, WCU/s, RCU/s).
    page: Vec<f64>,
    busiest_device: (String, f64, f64),
}

/// The load added up so far: per table and index, per sharded key family, and the totals.
pub(super) struct Traffic {
    pub(super) base: TableLoad,
    pub(super) gsi1: TableLoad,
    pub(super) gsi2: TableLoad,
    pub(super) gsi3: TableLoad,
    pub(super) workload: Workload,
    /// Per due shard (GSI3): write units, and the devices watched there.
    due_wcu: Vec<f64>,
    due_devices: Vec<f64>,
    /// Per searchable type and shard: type-mark index writes, and marks on the day.
    mark_wcu: Vec<Vec<f64>>,
    marks_per_day: Vec<Vec<f64>>,
    /// Per active-status shard: seen-bucket moves, and the devices there.
    status_wcu: Vec<f64>,
    status_devices: Vec<u64>,
    registration_reads: f64,
    /// Per organization of the profile: the steady load of its busiest keys.
    pub(super) org_steady: Vec<OrgSteady>,
}

impl Traffic {
    pub(super) fn new(m: &Model) -> Self {
        let mark_wcu: Vec<Vec<f64>> = m
            .searchable
            .iter()
            .map(|n| vec![0.0; usize::from(n.unwrap_or(0))])
            .collect();
        Self {
            base: TableLoad::new("base table"),
            gsi1: TableLoad::new("GSI1"),
            gsi2: TableLoad::new("GSI2"),
            gsi3: TableLoad::new("GSI3"),
            workload: Workload {
                users: m.fleet.users,
                devices: m.fleet.devices,
                ..Workload::default()
            },
            due_wcu: vec![0.0_f64; usize::from(DUE_SHARDS)],
            due_devices: vec![0.0_f64; usize::from(DUE_SHARDS)],
            marks_per_day: mark_wcu.clone(),
            mark_wcu,
            status_wcu: vec![0.0_f64; usize::from(m.active_shards)],
            status_devices: vec![0u64; usize::from(m.active_shards)],
            registration_reads: 0.0,
            org_steady: vec![OrgSteady::default(); m.orgs.len()],
        }
    }

    /// Every owner's devices, in fleet order, then the owner's own partitions.
    pub(super) fn owners(&mut self, m: &Model) {
        let mut global = 0u64;
        for (i, (fleet, rate_override)) in m.fleet.sizes.iter().enumerate() {
            let i = i as u64;
            let user = m.fleet.owner(i);
            let mut owner = OwnerPartitions {
                events: 0.0,
                state: Vec::new(),
                twin: Vec::new(),
                placed_shards: 1,
                page: Vec::new(),
                busiest_device: (String::new(), 0.0, 0.0),
            };
            for j in 0..u64::from(*fleet) {
                let per_minute = m.per_minute(global, *rate_override);
                global += 1;
                self.device(m, &user, i, j, per_minute, &mut owner);
            }
            self.owner(m, i, &user, *fleet, &owner);
        }
        self.org_members(m);
    }

    /// The organizations' members at an ordinary moment: each request's membership check on
    /// the caller's own partition, and the device pages' reads of states and events spread
    /// over the fleet (in the table's total, far below any key's limit).
    fn org_members(&mut self, m: &Model) {
        for (k, o) in m.orgs.iter().enumerate() {
            let per_member = o.requests() / f64::from(o.members.max(1));
            let rcu = per_member * MEMBERSHIP_READ_UNITS;
            for member in 0..u64::from(o.members) {
                self.base.add(0.0, rcu, || KeyLoad {
                    key: shared::model::entities::membership::membership_pk(
                        &super::fleet::member_id(k as u64, member),
                    ),
                    kind: KeyKind::Membership,
                    wcu: 0.0,
                    rcu,
                    family: None,
                });
            }
            let sizes = m.sizes;
            self.base.rcu +=
                o.device_pages() * (eventual_read_units(sizes.state) + o.device_page_device_rcu);
            self.workload.org_requests_per_second += o.requests();
        }
    }

    /// Device `j` of owner `i`, sending `per_minute` events a minute: its events partition,
    /// type index entries and marks, registration reads, status and due entries.
    fn device(
        &mut self,
        m: &Model,
        user: &UserId,
        i: u64,
        j: u64,
        per_minute: f64,
        owner: &mut OwnerPartitions,
    ) {
        let (profile, sizes, w) = (m.profile, m.sizes, &mut self.workload);
        let rate = per_minute / 60.0;
        let batches = rate / f64::from(profile.events.batch_size);
        owner.events += rate;
        let device = device_id(i, j);
        // Placement as registration does it: the fleet doubles its partitions when the
        // next device would exceed DEVICES_PER_SHARD on each.
        if j + 1 > u64::from(owner.placed_shards) * u64::from(m.devices_per_shard) {
            owner.placed_shards = owner.placed_shards.saturating_mul(2);
        }
        let placed = placement(&device, owner.placed_shards) as usize;
        if owner.state.len() <= placed {
            owner.state.resize(placed + 1, 0.0);
        }
        owner.state[placed] += batches;
        // The daily run reads a device's events of the day only, one Query, on the days it
        // sent any: a device sending less than once a day is read on that share of days.
        let day_events = rate * 86_400.0;
        if day_events > 0.0 {
            let days_with_events = day_events.min(1.0);
            let per_query = (day_events / days_with_events) * m.event_bytes;
            w.analytics_read_units_per_day += days_with_events * query_read_units(per_query as u64);
            w.analytics_items_per_day += day_events;
        }
        // The device's events partition: writes, and AP-04 reads of a page of the day.
        let page = (rate * 86_400.0).min(EVENT_PAGE);
        let event_read_rcu =
            m.per_device_event_reads * query_read_units((page * m.event_bytes) as u64);
        // Its searchable types: each event's own GSI1 entry under the device and type, and
        // the type mark every batch holding the type puts again (an identical put bills the
        // table write; its index entry is written once per window).
        let window = TYPE_WINDOW_SECONDS as f64;
        let mut mark_puts_wcu = 0.0;
        for (k, (t, share)) in m.types.iter().enumerate() {
            let Some(count) = m.searchable[k] else {
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
            self.mark_wcu[k][shard] += new_marks * write_units(sizes.type_mark_gsi1) as f64;
            self.marks_per_day[k][shard] += new_marks * 86_400.0;
            // AP-09 reads up to MAX_TYPE_DEVICES of the devices that sent the type that day.
            let (_, _, gsi1_bytes, _) = sizes.events[k];
            let read_share = (MAX_TYPE_DEVICES as f64 / m.devices_with_type[k].max(1.0)).min(1.0);
            let device_page = (type_rate * 86_400.0).min(EVENT_PAGE);
            let wcu = type_rate * write_units(gsi1_bytes) as f64;
            let rcu = m.type_reads_per_type
                * read_share
                * query_read_units((device_page * gsi1_bytes as f64) as u64);
            self.gsi1.add(wcu, rcu, || KeyLoad {
                key: device_type_gsi1pk(user, &device, t),
                kind: KeyKind::DeviceType,
                wcu,
                rcu,
                family: None,
            });
        }
        // Its summaries live in the same partition (no key of their own).
        let retention_days = f64::from(profile.retention_days.unwrap_or(DEFAULT_RETENTION_DAYS));
        let series = device_series(m, rate, retention_days);
        let w = &mut self.workload;
        w.series_write_units_per_day += (series.partition_wcu + series.state_wcu) * 86_400.0;
        w.series_read_units_per_day += series.partition_rcu * 86_400.0;
        w.series_flushes_per_day += series.flushes * 86_400.0;
        w.series_storage_bytes += series.bytes;
        w.series_items += series.items;
        let device_wcu =
            rate * m.event_wcu + mark_puts_wcu + m.twin_device_wcu + series.partition_wcu;
        let device_rcu = event_read_rcu + m.twin_device_rcu + series.partition_rcu;
        if let Some((_, o)) = m.org_of(i) {
            if o.first_page.contains(&device) {
                if owner.page.len() <= placed {
                    owner.page.resize(placed + 1, 0.0);
                }
                owner.page[placed] += 1.0;
            }
            if device_wcu > owner.busiest_device.1 || owner.busiest_device.0.is_empty() {
                owner.busiest_device = (event_pk(user, &device), device_wcu, device_rcu);
            }
        }
        self.base.add(device_wcu, device_rcu, || KeyLoad {
            key: event_pk(user, &device),
            kind: KeyKind::DeviceEvents,
            wcu: device_wcu,
            rcu: device_rcu,
            family: None,
        });
        if owner.twin.len() <= placed {
            owner.twin.resize(placed + 1, 0.0);
        }
        // The twin's and the summaries' flushes' writes on the live state.
        owner.twin[placed] += m.twin_state_wcu + series.state_wcu;
        // The registration: one eventually consistent read per batch (a consistent one
        // only for a registration or rotation of the last second). API Gateway spreads a
        // device's batches over containers, so the per-container cache is assumed to miss.
        let auth_reads = batches * m.registration_rcu;
        self.registration_reads += auth_reads / m.registration_rcu;
        self.base.add(0.0, auth_reads, || KeyLoad {
            key: registration_pk(&device),
            kind: KeyKind::Registration,
            wcu: 0.0,
            rcu: auth_reads,
            family: None,
        });
        // The device's GSI1 entry moves (delete + put) when its 15-minute SEEN bucket does.
        let shard = usize::from(shard_of(device.as_str(), m.active_shards));
        let rewrites = batches.min(1.0 / SEEN_GRANULARITY_SECONDS as f64);
        self.status_wcu[shard] += rewrites * m.status_rewrite_wcu;
        self.status_devices[shard] += 1;
        // Its due entry (GSI3) moves at the same moments; a device that reports is watched.
        // A tight device's moves with every batch (its share of the fleet, on average).
        if rate > 0.0 {
            let tight = profile.offline.tight.clamp(0.0, 1.0);
            let due_moves = (1.0 - tight) * rewrites + tight * batches;
            let due_shard = usize::from(shard_of(device.as_str(), DUE_SHARDS));
            self.due_wcu[due_shard] += due_moves * m.due_rewrite_wcu;
            self.due_devices[due_shard] += 1.0;
            w.due_move_write_units_per_day += due_moves * m.due_rewrite_wcu * 86_400.0;
        }
    }

    /// The owner's partitions: one live-state update per batch of each device placed there;
    /// dashboards read the user partition (device items, shard 0's states, the profile) and
    /// the states placed elsewhere by key. AP-05 reads the devices' own partitions.
    fn owner(&mut self, m: &Model, i: u64, user: &UserId, fleet: u32, owner: &OwnerPartitions) {
        let org = m.org_of(i);
        let (sizes, w) = (m.sizes, &mut self.workload);
        // The daily run reads each of the owner's partitions once (one unit, one checkpoint):
        // the user partition with every device item, and each partition's live states.
        let partitions = owner.state.len().max(1) as f64;
        let states_per_partition = f64::from(fleet) / partitions;
        let user_partition = sizes.profile as f64
            + f64::from(fleet) * sizes.device_item as f64
            + states_per_partition * sizes.state as f64;
        w.analytics_read_units_per_day += query_read_units(user_partition as u64)
            + (partitions - 1.0)
                * query_read_units((states_per_partition * sizes.state as f64) as u64);
        w.analytics_units_per_day += partitions;
        w.analytics_items_per_day += 2.0 * f64::from(fleet);
        for (k, batches) in owner.state.iter().enumerate() {
            let wcu = batches * m.state_update_wcu + owner.twin.get(k).copied().unwrap_or(0.0);
            // Each batch reads the live state first (a cache miss, as for the registration).
            let state_reads = batches * strong_read_units(sizes.state);
            // An organization's members poll the first dashboard page (its Query here, the
            // states placed elsewhere read by key) and open device pages.
            let org_reads = org.map_or(0.0, |(_, o)| match k {
                0 => o.owner_partition_rcu(),
                _ => {
                    owner.page.get(k).copied().unwrap_or(0.0)
                        * o.polls()
                        * eventual_read_units(sizes.state)
                }
            });
            let rcu = state_reads
                + org_reads
                + if k == 0 && org.is_none() {
                    let dashboard_bytes = sizes.profile
                        + u64::from(fleet) * sizes.device_item
                        + (u64::from(fleet) / u64::from(owner.placed_shards).max(1)) * sizes.state;
                    m.per_user_dashboards * query_read_units(dashboard_bytes)
                } else {
                    0.0
                };
            if let Some((n, _)) = org {
                let steady = &mut self.org_steady[n];
                if k == 0 {
                    steady.owner_partition = (wcu, rcu);
                }
                let page = owner.page.get(k).copied().unwrap_or(0.0);
                if page > steady.page_partition.1
                    || (page == steady.page_partition.1 && rcu > steady.page_partition.3)
                {
                    steady.page_partition = (state_pk(user, k as u32), page, wcu, rcu);
                }
            }
            self.base.add(wcu, rcu, || KeyLoad {
                key: state_pk(user, k as u32),
                kind: KeyKind::UserPartition,
                wcu,
                rcu,
                family: None,
            });
        }
        if let Some((n, _)) = org {
            let steady = &mut self.org_steady[n];
            steady.busiest_device = owner.busiest_device.clone();
            steady.partitions = owner.placed_shards;
        }
        w.events_per_second += owner.events;
        w.ingest_requests_per_second += owner.state.iter().sum::<f64>();
    }

    /// GSI1, type marks by type and day: one entry per device, type and window (their shard
    /// hashes the device); AP-09 reads one page of marks per shard.
    pub(super) fn type_marks(&mut self, m: &Model) {
        for (k, (t, _)) in m.types.iter().enumerate() {
            let Some(count) = m.searchable[k] else {
                continue;
            };
            let family_wcu: f64 = self.mark_wcu[k].iter().sum();
            let rcu_of = |marks: f64| {
                m.type_reads_per_type
                    * query_read_units(
                        (marks.min(MARKS_PER_PAGE) * m.sizes.type_mark_gsi1 as f64) as u64,
                    )
            };
            let family_rcu: f64 = self.marks_per_day[k].iter().map(|m| rcu_of(*m)).sum();
            for s in 0..count {
                let (wcu, rcu) = (
                    self.mark_wcu[k][usize::from(s)],
                    rcu_of(self.marks_per_day[k][usize::from(s)]),
                );
                self.gsi1.add(wcu, rcu, || KeyLoad {
                    key: type_gsi1pk(t, m.day, s),
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
    }

    /// GSI1, devices by status (all active): seen-bucket moves, and AP-13 reads one page per
    /// shard.
    pub(super) fn status_shards(&mut self, m: &Model) {
        let status_reads = m.profile.reads.admin_status_reads_per_minute / 60.0;
        let status_rcu: Vec<f64> = self
            .status_devices
            .iter()
            .map(|n| {
                status_reads
                    * query_read_units(
                        ((*n as f64).min(EVENT_PAGE) * m.sizes.state_gsi1 as f64) as u64,
                    )
            })
            .collect();
        let family = ShardFamily {
            setting: "ACTIVE_STATUS_SHARDS",
            shards: m.active_shards,
            wcu: self.status_wcu.iter().sum(),
            rcu: status_rcu.iter().sum(),
        };
        for s in 0..m.active_shards {
            let (wcu, rcu) = (self.status_wcu[usize::from(s)], status_rcu[usize::from(s)]);
            self.gsi1.add(wcu, rcu, || KeyLoad {
                key: status_gsi1pk(DeviceStatus::Active, s),
                kind: KeyKind::Status,
                wcu,
                rcu,
                family: Some(family.clone()),
            });
        }
    }

    /// GSI3: the due entries' moves and the raises' deletes and puts (offline devices a day),
    /// the detector's Query of each due shard every minute; open alarms by severity.
    pub(super) fn offline_detection(&mut self, m: &Model) {
        let (profile, sizes, w) = (m.profile, m.sizes, &mut self.workload);
        let (base, gsi1, gsi3) = (&mut self.base, &mut self.gsi1, &mut self.gsi3);
        let (due_wcu, due_devices) = (&self.due_wcu, &self.due_devices);
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
            let wcu = due_wcu[usize::from(s)]
                + shard_raises * 2.0 * gsi3_entry(sizes.state_gsi3) / 86_400.0;
            let rcu =
                query_rcu.max(shard_raises / 86_400.0 * eventual_read_units(sizes.state_gsi3));
            gsi3.add(wcu, rcu, || KeyLoad {
                key: due_gsi3pk(s),
                kind: KeyKind::Due,
                wcu,
                rcu,
                family: Some(ShardFamily {
                    setting: "DUE_SHARDS (shared::model::entities::device_state)",
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
                    setting: "OPEN_ALARM_SHARDS (shared::model::entities::open_alarm)",
                    shards: OPEN_ALARM_SHARDS,
                    wcu: open_wcu,
                    rcu: 0.0,
                }),
            });
        }
        // The owners' alarm lists (a put at the raise, a move at the clear), spread like the
        // owners' live states: counted in GSI3's total, below any single key's limit.
        gsi3.wcu += raises * 3.0 * gsi3_entry(sizes.offline_alarm_gsi3) / 86_400.0;
        // Base table: the raise's transaction (state update, alarm and pointer puts, 2 units
        // per KB each) and the clear (alarm update, pointer delete, in ingestion's
        // transaction).
        let raise_wcu = 2.0
            * (write_units(sizes.state)
                + write_units(sizes.offline_alarm)
                + write_units(sizes.open_pointer)) as f64;
        let clear_wcu =
            2.0 * (write_units(sizes.offline_alarm) + write_units(sizes.open_pointer)) as f64;
        base.wcu += raises * (raise_wcu + clear_wcu) / 86_400.0;
        // The detector's reads: its state read per due device (BatchGetItem, eventually
        // consistent) on the owners' partitions, and the Queries of the due and reminder
        // shards.
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
    }

    /// Steady-state storage: events retained `retention_days`, one device, registration and
    /// tag link per device, one profile per user; the request rates and the fleet sizes.
    pub(super) fn storage_and_totals(&mut self, m: &Model) {
        let (profile, sizes, w) = (m.profile, m.sizes, &mut self.workload);
        let reads = &profile.reads;
        let (users, devices) = (m.fleet.users, m.fleet.devices);
        let retention_days = f64::from(profile.retention_days.unwrap_or(DEFAULT_RETENTION_DAYS));
        let stored_events = w.events_per_second * 86_400.0 * retention_days;
        let o = STORAGE_OVERHEAD_BYTES as f64;
        let per_event = |f: &dyn Fn(&EventSize) -> u64| m.weighted(&|e| f(e) as f64 + o);
        let d = devices as f64;
        let base_items_bytes = stored_events * m.event_bytes
            + d * (sizes.state + sizes.registration + sizes.tag_link) as f64
            + users as f64 * sizes.profile as f64;
        w.items = stored_events + 3.0 * d + users as f64;
        w.scanned_bytes = base_items_bytes;
        // The summaries' items, with their overhead (the daily run never reads them).
        let series_bytes = w.series_storage_bytes;
        w.items += w.series_items;
        // The directory: one entry per profile and per fleet (about 100 bytes each), Scanned.
        let directory_bytes = 2.0 * users as f64 * DIRECTORY_ENTRY_BYTES;
        w.analytics_read_units_per_day += query_read_units(directory_bytes as u64);
        w.analytics_items_per_day += 2.0 * users as f64;
        w.storage_bytes = [
            base_items_bytes + (w.items - w.series_items) * o + series_bytes,
            stored_events * per_event(&|e| e.2) + d * (sizes.state_gsi1 as f64 + o),
            stored_events * per_event(&|e| e.3),
        ];
        w.registration_reads_per_second = self.registration_reads;
        // An organization's members' polls are dashboards; their device pages three reads each.
        w.dashboard_per_second =
            reads.dashboard_opens_per_minute / 60.0 + m.orgs.iter().map(|o| o.polls()).sum::<f64>();
        w.other_reads_per_second = (reads.device_event_reads_per_minute
            + reads.user_event_reads_per_minute
            + reads.admin_event_type_reads_per_minute
            + reads.admin_status_reads_per_minute)
            / 60.0
            + m.orgs.iter().map(|o| 3.0 * o.device_pages()).sum::<f64>();
        let mut sorted: Vec<u32> = m.fleet.sizes.iter().map(|(n, _)| *n).collect();
        sorted.sort_unstable();
        w.fleet_min = sorted.first().copied().unwrap_or(0);
        w.fleet_median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        w.fleet_max = sorted.last().copied().unwrap_or(0);
    }

    /// Flags the keys over a limit, in every table and index.
    pub(super) fn flag(&mut self) {
        for table in [
            &mut self.base,
            &mut self.gsi1,
            &mut self.gsi2,
            &mut self.gsi3,
        ] {
            table.flag();
        }
    }
}

/// A fleet-wide change of the largest fleet: pages of ROLLOUT_PAGE at the worker's pace.
/// Per page the owner's partition gives a page of tag links and their device items (one
/// BatchGetItem: each item a read of its own); each device's own key takes its desired
/// document once (a transaction item); its live-state partition holds at most
/// DEVICES_PER_SHARD devices, spread over the whole walk.
pub(super) fn rollout_peak(m: &Model, w: &Workload) -> RolloutPeak {
    let sizes = m.sizes;
    let largest = u64::from(w.fleet_max);
    let seconds = largest as f64 / ROLLOUT_DEVICES_PER_SECOND;
    // A fleet smaller than a second's pace is read and written within one second.
    let window = seconds.max(1.0);
    let page = ROLLOUT_PAGE.min(largest as f64);
    let pages = (largest as f64 / ROLLOUT_PAGE).ceil();
    let page_rcu = eventual_read_units((page as u64) * sizes.tag_link)
        + page * eventual_read_units(sizes.device_item);
    let per_partition = f64::from(m.devices_per_shard).min(largest as f64);
    RolloutPeak {
        devices: largest,
        seconds,
        owner_partition_rcu: pages * page_rcu / window,
        state_partition_wcu: per_partition * 2.0 * m.state_update_wcu / window,
        device_key_wcu: 2.0 * m.document_wcu,
    }
}
