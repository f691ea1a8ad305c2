//! Organizations (issue 33): a fleet run by a team. Its devices are an ordinary owner's, under
//! the owner key `org:{orgId}` (owner-adaptive sharding applies), simulated with every other
//! fleet; this module adds what its members do. Every `/orgs/{orgId}/...` request first reads
//! the caller's membership (`MEMBER#{userId}` / `ORG#{orgId}`, eventually consistent, 0.5
//! units); member and invitation management writes the organization's partition
//! (`ORG#{orgId}`: its item, members, invitations) and the member's own.
//!
//! An ordinary moment (members polling their dashboards, opening device pages) is added to
//! the tables like any steady load. The bursts (an incident that brings every member in, an
//! admin's device import, a whole team invited and joining) are peaks: each scenario gives
//! the keys it touches with their steady load plus the burst, in units per second while it
//! lasts, against DynamoDB's per-partition limits.

use std::collections::HashSet;

use shared::model::entities::alarm::owner_alarms_gsi3pk;
use shared::model::entities::device_state::state_pk;
use shared::model::entities::fleet::FleetItem;
use shared::model::entities::invitation::InvitationItem;
use shared::model::entities::membership::{membership_pk, MembershipItem};
use shared::model::entities::org_member::OrgMemberItem;
use shared::model::entities::organization::{org_pk, OrganizationItem};
use shared::model::entities::registration::registration_pk;
use shared::model::entities::Entity;
use shared::model::ids::{DeviceId, OrgId, UserId};
use shared::model::org::{InvitationId, Role};
use shared::model::shard::ShardCounts;
use shared::model::timestamp::Day;
use shared::ops::dashboard::DASHBOARD_PAGE_ITEMS;

use super::fleet::{device_id, member_id, Fleet};
use super::partitions::{RCU_LIMIT, WCU_LIMIT};
use super::profile::{MemberActivity, Profile};
use super::sizes::{ItemSizes, EVENT_PAGE};
use fleet_testkit::capacity::{
    eventual_read_units, item_size, query_read_units, strong_read_units, write_units,
};

/// The units of one membership check: an eventually consistent GetItem of an item under 4 KB.
pub const MEMBERSHIP_READ_UNITS: f64 = 0.5;

/// Sizes of the organization's own items, as stored, bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct OrgItemSizes {
    /// The organization item (`ORG#{orgId}` / `ORG`).
    pub organization: u64,
    /// A member in its list (`ORG#{orgId}` / `MEMBER#{userId}`).
    pub org_member: u64,
    /// A person's membership (`MEMBER#{userId}` / `ORG#{orgId}`).
    pub membership: u64,
    /// An invitation (`ORG#{orgId}` / `INVITATION#{id}`).
    pub invitation: u64,
    /// The fleet item every registration reads and counts on (`USER#{owner}` / `FLEET`).
    pub fleet: u64,
}

impl OrgItemSizes {
    /// One of each, built as the operations build them.
    pub fn of(org: &OrgId, day: &Day, shards: &ShardCounts) -> Self {
        let at = day.start().plus_seconds(12 * 3600);
        let person = member_id(0, 0);
        let size = |item: Result<_, _>| item_size(&item.expect("items serialize"));
        let invitation = InvitationItem {
            org_id: org.clone(),
            invitation_id: InvitationId::parse(&"0".repeat(32)).expect("32 hex digits"),
            role: Role::Operator,
            created_by: person.clone(),
            created_at: at,
            expires_at: at.plus_seconds(7 * 86_400),
            ttl: at.epoch_seconds() + 7 * 86_400,
        };
        Self {
            organization: size(
                OrganizationItem {
                    org_id: org.clone(),
                    name: "Northwind Utilities".into(),
                    owner: person.clone(),
                    created_by: person.clone(),
                    created_at: at,
                    member_count: 1000,
                    deleting_at: None,
                }
                .to_item(shards),
            ),
            org_member: size(
                OrgMemberItem {
                    org_id: org.clone(),
                    user_id: person.clone(),
                    role: Role::Operator,
                    joined_at: at,
                    email: Some("ada.lovelace@example.com".into()),
                }
                .to_item(shards),
            ),
            membership: size(
                MembershipItem {
                    user_id: person.clone(),
                    org_id: org.clone(),
                    role: Role::Operator,
                    joined_at: at,
                }
                .to_item(shards),
            ),
            invitation: size(invitation.to_item(shards)),
            fleet: size(
                FleetItem {
                    user_id: UserId::org_fleet(org),
                    partitions: 16_384,
                    devices: 1_000_000,
                    raw_retention: Default::default(),
                    retention_version: None,
                }
                .to_item(shards),
            ),
        }
    }
}

/// One organization of the profile, as the traffic needs it.
pub(super) struct OrgModel {
    /// Its place in the fleet list.
    pub(super) index: u64,
    /// The organization.
    pub(super) org: OrgId,
    /// Its fleet's owner key, `org:{orgId}`.
    pub(super) owner: UserId,
    /// Members.
    pub(super) members: u32,
    /// What they do.
    pub(super) activity: MemberActivity,
    /// The first dashboard page's devices (the lowest ids): every poll reads their states.
    pub(super) first_page: HashSet<DeviceId>,
    /// Read units of the dashboard's Query of one page on the owner's partition.
    pub(super) page_query_rcu: f64,
    /// Read units of one device page on the owner's partition: the device's Query (AP-03)
    /// and the summaries' Query of the device and its state (AP-S1).
    pub(super) device_page_owner_rcu: f64,
    /// Read units of one device page on the device's own partition: its twin, a page of
    /// events and a day of 5-minute blocks.
    pub(super) device_page_device_rcu: f64,
}

impl OrgModel {
    /// Dashboards polled a second at an ordinary moment.
    pub(super) fn polls(&self) -> f64 {
        f64::from(self.members) * self.activity.online / self.activity.poll_seconds
    }

    /// Device pages opened a second at an ordinary moment.
    pub(super) fn device_pages(&self) -> f64 {
        f64::from(self.members) * self.activity.online * self.activity.device_pages_per_minute
            / 60.0
    }

    /// Organization requests a second at an ordinary moment (a device page is three: the
    /// device, its events, its summaries), each reading the caller's membership.
    pub(super) fn requests(&self) -> f64 {
        self.polls() + 3.0 * self.device_pages()
    }

    /// Read units a second on the owner's partition at an ordinary moment.
    pub(super) fn owner_partition_rcu(&self) -> f64 {
        self.polls() * self.page_query_rcu + self.device_pages() * self.device_page_owner_rcu
    }
}

/// The organizations of `profile` in `fleet`.
pub(super) fn models(
    profile: &Profile,
    fleet: &Fleet,
    sizes: &ItemSizes,
    event_bytes: f64,
) -> Vec<OrgModel> {
    fleet
        .orgs
        .iter()
        .zip(&profile.organizations)
        .map(|((index, org), o)| {
            let mut ids: Vec<DeviceId> = (0..u64::from(o.devices))
                .map(|j| device_id(*index, j))
                .collect();
            ids.sort_unstable();
            ids.truncate(DASHBOARD_PAGE_ITEMS as usize);
            let page_devices = ids.len() as u64;
            let [block, ..] = sizes.series_items;
            OrgModel {
                index: *index,
                org: org.clone(),
                owner: UserId::org_fleet(org),
                members: o.members,
                activity: o.activity.clone(),
                first_page: ids.into_iter().collect(),
                page_query_rcu: query_read_units(page_devices * sizes.device_item),
                device_page_owner_rcu: 2.0 * query_read_units(sizes.device_item + sizes.state),
                device_page_device_rcu: query_read_units(sizes.twin_document)
                    + query_read_units((EVENT_PAGE * event_bytes) as u64)
                    + query_read_units(12 * block),
            }
        })
        .collect()
}

/// What the steady simulation gave an organization's busiest keys.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrgSteady {
    /// The owner's partition (`USER#org:{orgId}`): WCU/s, RCU/s.
    pub owner_partition: (f64, f64),
    /// The live-state partition holding most of the first page's states: its key, its
    /// first-page devices, WCU/s, RCU/s.
    pub page_partition: (String, f64, f64, f64),
    /// The organization's busiest device (the one an incident is about): key, WCU/s, RCU/s.
    pub busiest_device: (String, f64, f64),
    /// Live-state partitions of the fleet.
    pub partitions: u32,
}

/// One key's load while a scenario runs.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyPeak {
    /// The partition key.
    pub key: String,
    /// Table or index.
    pub table: &'static str,
    /// What it holds.
    pub holds: &'static str,
    /// Write units per second.
    pub wcu: f64,
    /// Read units per second.
    pub rcu: f64,
}

impl KeyPeak {
    /// The larger of its shares of the per-partition write and read limits.
    pub fn of_limit(&self) -> f64 {
        (self.wcu / WCU_LIMIT).max(self.rcu / RCU_LIMIT)
    }

    /// Over a per-partition limit.
    pub fn over_limit(&self) -> bool {
        self.wcu > WCU_LIMIT || self.rcu > RCU_LIMIT
    }
}

/// One burst and the keys it loads.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Short name.
    pub name: &'static str,
    /// What happens.
    pub what: String,
    /// How long it lasts, seconds.
    pub seconds: f64,
    /// The keys it touches, busiest (share of a limit) first.
    pub keys: Vec<KeyPeak>,
}

/// One organization's figures in the report.
#[derive(Clone, Debug, PartialEq)]
pub struct OrgReport {
    /// The organization.
    pub org: OrgId,
    /// Devices, members.
    pub devices: u64,
    /// Members.
    pub members: u32,
    /// Organization requests a second at an ordinary moment.
    pub requests_per_second: f64,
    /// Their membership reads, units a second.
    pub membership_rcu: f64,
    /// The steady load of its busiest keys.
    pub steady: OrgSteady,
    /// The bursts.
    pub scenarios: Vec<Scenario>,
    /// Members at which the incident's reads of the owner partition reach 3,000 RCU/s (the
    /// same activity per member; the member limit is 10,000).
    pub incident_members_at_read_limit: f64,
}

impl OrgReport {
    /// The busiest key over every scenario (by its share of a per-partition limit), with the
    /// scenario's name.
    pub fn busiest(&self) -> Option<(&'static str, &KeyPeak)> {
        self.scenarios
            .iter()
            .flat_map(|s| s.keys.iter().map(move |k| (s.name, k)))
            .max_by(|a, b| a.1.of_limit().total_cmp(&b.1.of_limit()))
    }
}

fn peak(key: String, table: &'static str, holds: &'static str, wcu: f64, rcu: f64) -> KeyPeak {
    KeyPeak {
        key,
        table,
        holds,
        wcu,
        rcu,
    }
}

/// The scenarios of organization `o` with the steady loads `steady`.
pub(super) fn scenarios(
    o: &OrgModel,
    steady: &OrgSteady,
    sizes: &ItemSizes,
    org_sizes: &OrgItemSizes,
    devices: u64,
) -> OrgReport {
    let a = &o.activity;
    let members = f64::from(o.members);
    let half = MEMBERSHIP_READ_UNITS;
    let (owner_w, owner_r) = steady.owner_partition;
    let owner_key = state_pk(&o.owner, 0);
    let (page_key, page_devices, page_w, page_r) = steady.page_partition.clone();
    let member = member_id(0, 1);
    let admin = member_id(0, 0);
    let mut out = Vec::new();

    // An ordinary moment: the steady figures themselves.
    let per_member = o.requests() / (members * a.online).max(1.0);
    out.push(Scenario {
        name: "ordinary moment",
        what: format!(
            "{} of the members with the dashboard open, each polling every {} s and opening {} device page(s) a minute",
            super::numbers::pct(a.online),
            a.poll_seconds,
            a.device_pages_per_minute
        ),
        seconds: 0.0,
        keys: vec![
            peak(owner_key.clone(), "base table", "the organization's owner partition (device items, dashboard pages)", owner_w, owner_r),
            peak(page_key.clone(), "base table", "a live-state partition with the first dashboard page's states", page_w, page_r),
            peak(membership_pk(&member), "base table", "an online member's memberships (the check of each request)", 0.0, per_member * half),
        ],
    });

    // The incident: every member opens the console within `incident_seconds` (their
    // organizations, the dashboard, the alarms, the alarming device's page), then polls.
    let opens = members / a.incident_seconds;
    let polls = members / a.poll_seconds;
    let dashboards = opens + polls;
    let (device_key, device_w, device_r) = steady.busiest_device.clone();
    let fleet_read = strong_read_units(org_sizes.fleet);
    // Per member, the incident's reads of the owner partition: its dashboards and its device
    // page (the ordinary moment's polls give way to the incident's; its device pages stay).
    let incident_per_member = (1.0 / a.incident_seconds + 1.0 / a.poll_seconds) * o.page_query_rcu
        + (o.device_page_owner_rcu + fleet_read) / a.incident_seconds
        + a.online * a.device_pages_per_minute / 60.0 * o.device_page_owner_rcu;
    let owner_base = owner_r - o.owner_partition_rcu();
    let incident_members_at_read_limit = (RCU_LIMIT - owner_base) / incident_per_member;
    let incident = vec![
        peak(
            owner_key.clone(),
            "base table",
            "the organization's owner partition (device items, dashboard pages)",
            owner_w,
            owner_r - o.polls() * o.page_query_rcu
                + dashboards * o.page_query_rcu
                + opens * (o.device_page_owner_rcu + fleet_read),
        ),
        peak(
            page_key,
            "base table",
            "a live-state partition with the first dashboard page's states",
            page_w,
            page_r + (dashboards - o.polls()) * page_devices * eventual_read_units(sizes.state),
        ),
        peak(
            device_key,
            "base table",
            "the alarming device's events, twin and summaries (everyone opens its page)",
            device_w,
            device_r + opens * o.device_page_device_rcu,
        ),
        peak(
            org_pk(&o.org),
            "base table",
            "the organization's partition (its item, read by `GET /orgs`)",
            0.0,
            opens * eventual_read_units(org_sizes.organization),
        ),
        peak(
            owner_alarms_gsi3pk(&o.owner, steady.partitions.saturating_sub(1)),
            "GSI3",
            "one of the owner's alarm-list partitions (`GET .../alarms` Queries every one)",
            0.0,
            opens * half,
        ),
        // A member's own partition: `GET /orgs` (a Query of their memberships) and the five
        // organization requests of the console's first second, each checking the membership.
        peak(
            membership_pk(&member),
            "base table",
            "a member's memberships (the check of each request)",
            0.0,
            half + 5.0 * half,
        ),
    ];
    out.push(Scenario {
        name: "incident",
        what: format!(
            "all {} members open the console within {} s (their organizations, the dashboard, the alarms, the alarming device's page) and keep polling every {} s. The alarms page (`GET .../alarms`, AP-23) Queries each of the fleet's {} alarm-list partitions: {} read units a page, {} for the team's openings, spread over those keys",
            super::numbers::group(u64::from(o.members)),
            a.incident_seconds,
            a.poll_seconds,
            super::numbers::group(u64::from(steady.partitions)),
            super::numbers::num(f64::from(steady.partitions) * half),
            super::numbers::num(f64::from(steady.partitions) * half * members),
        ),
        seconds: a.incident_seconds,
        keys: incident,
    });

    // The import: an admin registers devices at `import_per_second`, each a consistent read
    // of the fleet item and a transaction (registration, device item, live state, tag link,
    // the fleet item's count: 2 units per KB each).
    let r = a.import_per_second;
    let tx = |bytes: u64| 2.0 * write_units(bytes) as f64;
    let import = vec![
        peak(
            owner_key.clone(),
            "base table",
            "the organization's owner partition (device items, tag links, the fleet item)",
            owner_w + r * (tx(sizes.device_item) + tx(sizes.tag_link) + tx(org_sizes.fleet)),
            owner_r + r * fleet_read,
        ),
        peak(
            membership_pk(&admin),
            "base table",
            "the importing admin's memberships (the check of each request)",
            0.0,
            r * half,
        ),
        peak(
            registration_pk(&device_id(o.index, 0)),
            "base table",
            "one new device's registration (written once)",
            tx(sizes.registration),
            0.0,
        ),
        // New devices go to the newest half of the partitions, spread by their id's hash.
        peak(
            state_pk(&o.owner, steady.partitions.saturating_sub(1)),
            "base table",
            "one live-state partition receiving new devices",
            r / f64::from((steady.partitions / 2).max(1)) * tx(sizes.state),
            0.0,
        ),
    ];
    out.push(Scenario {
        name: "device import",
        what: format!(
            "an admin registers {} devices at {} a second",
            super::numbers::group(u64::from(a.import_devices)),
            r
        ),
        seconds: f64::from(a.import_devices) / r,
        keys: import,
    });

    // The member wave: an admin invites every member (a put each), then they accept: a
    // consistent read of the invitation and a transaction deleting it, putting the member
    // and the membership, counting on the organization item.
    let rate = members / a.invitation_seconds;
    let accept_wcu =
        tx(org_sizes.invitation) + tx(org_sizes.org_member) + tx(org_sizes.organization);
    let wave = vec![
        peak(
            org_pk(&o.org),
            "base table",
            "the organization's partition (its item, members, invitations)",
            rate * accept_wcu.max(write_units(org_sizes.invitation) as f64),
            rate * strong_read_units(org_sizes.invitation),
        ),
        peak(
            membership_pk(&admin),
            "base table",
            "the inviting admin's memberships (the check of each request)",
            0.0,
            rate * half,
        ),
        peak(
            membership_pk(&member),
            "base table",
            "a joining member's memberships (written once)",
            tx(org_sizes.membership),
            0.0,
        ),
    ];
    out.push(Scenario {
        name: "member wave",
        what: format!(
            "an admin invites all {} members within {} s, and they accept within {} s: {:.1} transactions a second on the organization item's member count",
            super::numbers::group(u64::from(o.members)),
            a.invitation_seconds,
            a.invitation_seconds,
            rate
        ),
        seconds: a.invitation_seconds,
        keys: wave,
    });
    for s in &mut out {
        sort(&mut s.keys);
    }
    OrgReport {
        org: o.org.clone(),
        devices,
        members: o.members,
        requests_per_second: o.requests(),
        membership_rcu: o.requests() * half,
        steady: steady.clone(),
        scenarios: out,
        incident_members_at_read_limit,
    }
}

fn sort(keys: &mut [KeyPeak]) {
    keys.sort_by(|a, b| b.of_limit().total_cmp(&a.of_limit()));
}
