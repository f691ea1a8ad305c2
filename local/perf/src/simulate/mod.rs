//! The key-distribution simulator (docs/key-distribution.md).
//!
//! A workload profile (`bench/profiles/*.yaml`) describes users, a skewed number of devices
//! per user (with explicit very large fleets), event rates (with hot devices), the event type
//! mix and the read mix. The simulator draws the fleet with a seeded RNG, builds every
//! partition key with the real builders of `shared::model::keys` and the real shard function and
//! shard counts, prices the real items (`shared::model::entities`, serialized exactly as stored) with
//! DynamoDB's size rules ([`fleet_testkit::capacity`]), and adds up steady-state **rates** (units per
//! second) per partition key of the base table, GSI1 and GSI2. Keys whose load is complete
//! (a user's or a device's) stream through a bounded top list, so a million devices take no
//! more memory than the fleet-size list; only the low-cardinality sharded keys are kept.
//!
//! A key is flagged when it exceeds DynamoDB's per-partition limits (1,000 WCU/s, 3,000 RCU/s)
//! or 10% of its table's or index's traffic (docs/key-distribution.md's target); for a write-sharded key the
//! report gives the shard count that fixes it.
mod firmware;
mod fleet;
mod numbers;
mod orgs;
mod partitions;
mod profile;
mod report;
mod simulation;
mod sizes;
mod traffic;

pub use firmware::{
    hours, FirmwareRolloutPeak, FirmwareStep, StageTiming, WORKER_INTERVAL_SECONDS,
};
pub use fleet::{device_id, user_id};
pub use fleet::{member_id, org_id};
pub use numbers::{group, millions, num};
pub use orgs::{KeyPeak, OrgItemSizes, OrgReport, OrgSteady, Scenario, MEMBERSHIP_READ_UNITS};
pub use partitions::{
    suggested_shards, Flag, KeyKind, KeyLoad, ShardFamily, TableLoad, MAX_SHARDS, RCU_LIMIT,
    SHARE_LIMIT, TOP_KEYS, WCU_LIMIT,
};
pub use profile::{
    documented_profiles, DeviceChanges, EventLoad, FirmwareRolloutPlan, FleetSize, HotDevices,
    LargeFleet, MemberActivity, Offline, Organization, Profile, ReadMix, ShardSettings,
    TwinTraffic, DEFAULT_DAY, DEFAULT_RETENTION_DAYS, PROFILES_DIR,
};
pub use report::{render, render_report, write_or_print, REPORT_PATH};
pub use simulation::{simulate, Simulation};
pub use sizes::EVENT_PAGE;
pub use sizes::{event_item, type_mark_item, EventSize, ItemSizes};
pub use traffic::{RolloutPeak, Workload, ROLLOUT_DEVICES_PER_SECOND, ROLLOUT_PAGE};

#[cfg(test)]
mod tests {
    use super::*;
    use shared::model::keys::event_pk;

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
        // 2,000 events/s of 1-WCU items, and its summaries' flushes (a hot device fills its
        // open buckets fastest, yet flushes at most once an hour: a fraction of a unit).
        assert!(
            (0.0..1.0).contains(&(hot.load.wcu - 2000.0)),
            "{}",
            hot.load.wcu
        );
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

    const ORG: &str = "
name: org
description: one organization beside ordinary owners
seed: 5
users: 200
devices_per_user: {distribution: fixed, devices: 3}
organizations:
  - {devices: 20000, members: 100, activity: {online: 0.5, poll_seconds: 5, device_pages_per_minute: 2}}
events: {per_device_per_minute: 1, batch_size: 10, types: {temperature: 1}}
";

    #[test]
    fn an_organizations_fleet_is_an_owner_keyed_org_and_each_request_checks_the_membership() {
        let sim = simulate(profile(ORG), "test").unwrap();
        assert_eq!(sim.workload.devices, 200 * 3 + 20_000);
        let [org] = sim.orgs.as_slice() else {
            panic!("one organization: {:?}", sim.orgs.len())
        };
        let owner = format!("USER#org:{}", org.org);
        // Owner-adaptive sharding: 20,000 devices over partitions of 100 (doubling: 256).
        assert_eq!(org.steady.partitions, 256);
        // 50 members online: a poll every 5 s each (10/s) and 2 device pages a minute (5/3 a
        // second, 3 requests each): 15 requests a second, 0.5 units each.
        assert!((org.requests_per_second - 15.0).abs() < 1e-9);
        assert!((org.membership_rcu - 7.5).abs() < 1e-9);
        // Each member's key carries its share, in the base table's total.
        let members: f64 = 100.0 * (15.0 / 100.0) * MEMBERSHIP_READ_UNITS;
        assert!(sim.tables[0].rcu > members);
        // The busiest key is the organization's owner partition: with 100 members, the
        // import's 50 registrations a second (device item, tag link and the fleet item's
        // count in a transaction: 6 units) outweigh the incident's reads.
        let (scenario, busiest) = org.busiest().unwrap();
        assert_eq!(
            (scenario, busiest.key.as_str()),
            ("device import", owner.as_str())
        );
        let on_owner = |name: &str| {
            let s = org.scenarios.iter().find(|s| s.name == name).unwrap();
            s.keys.iter().find(|k| k.key == owner).unwrap().clone()
        };
        let ordinary = on_owner("ordinary moment");
        assert!(
            (busiest.wcu - ordinary.wcu - 50.0 * 6.0).abs() < 1e-9,
            "{busiest:?}"
        );
        // The incident: 10 opens and 20 polls a second of the first dashboard page, where 10
        // polls were.
        let incident = on_owner("incident");
        assert!(
            incident.rcu > ordinary.rcu * 2.0,
            "{incident:?} {ordinary:?}"
        );
        // The team size at which the incident's reads reach the partition's limit: just under
        // it, the owner partition holds; just over, it is over 3,000 RCU/s.
        let at_limit = org.incident_members_at_read_limit;
        // This profile's activity is the console's (a 5 s poll): the product's member limit
        // keeps a whole team under the key's limit.
        assert!(
            at_limit > shared::model::org::MAX_MEMBERS_PER_ORG as f64,
            "{at_limit} members reach the owner partition's limit"
        );
        for (members, over) in [(at_limit.floor(), false), (at_limit.ceil() + 1.0, true)] {
            let bigger = simulate(
                profile(&ORG.replace("members: 100,", &format!("members: {members},"))),
                "test",
            )
            .unwrap();
            let incident = &bigger.orgs[0].scenarios[1];
            assert_eq!(incident.name, "incident");
            let owner_key = incident.keys.iter().find(|k| k.key == owner).unwrap();
            assert_eq!(
                owner_key.rcu > RCU_LIMIT,
                over,
                "{members} members: {owner_key:?}"
            );
        }
        assert!(!busiest.over_limit());
        assert!(render(&sim).contains(&format!("**Busiest key of the organization: `{owner}`**")));
        // The member wave: 100 acceptances a minute, each a transaction of three items on
        // the organization's partition (2 units per KB each: 6) and a consistent read.
        let wave = org
            .scenarios
            .iter()
            .find(|s| s.name == "member wave")
            .unwrap();
        let org_key = &wave.keys[0];
        assert_eq!(org_key.key, format!("ORG#{}", org.org));
        assert!(
            (org_key.wcu - 100.0 / 60.0 * 6.0).abs() < 1e-9,
            "{org_key:?}"
        );
    }

    #[test]
    fn a_firmware_rollout_is_timed_by_the_walk_and_the_devices_check_ins_and_priced_per_step() {
        // 1,000 devices (walked in a second of one run), a check-in every 10 minutes, stages
        // 50/100, an hour's soak, 2 healthy check-ins, 95 % success.
        let yaml = "
name: rollout
description: one fleet updated
users: 1
devices_per_user: {distribution: fixed, devices: 1000}
events: {per_device_per_minute: 1, batch_size: 10, types: {temperature: 1}}
firmware_rollout: {stages: [50, 100], soak_seconds: 3600}
";
        let sim = simulate(profile(yaml), "test").unwrap();
        let f = sim.firmware.as_ref().expect("the profile has a rollout");
        assert_eq!((f.devices, f.wake_seconds), (1000, 600.0));
        assert_eq!((f.walk_seconds, f.lap_seconds), (1.0, 60.0));
        // Stage 0: 95 % of its devices offered within the second's walk and checked in since
        // (U1 x 1 + U2 x 600 at 0.95: 0.95 x 600 + 1 / 2 = 570.5 s), then 3 check-ins more
        // (1,800 s), seen at the next run (60 s): 2,430.5 s; the soak and the run that opens
        // stage 1: 6,090.5 s. Stage 1 waits for its last device: 1 + 600 + 1,800 + 60 s.
        let [first, last] = f.timings.as_slice() else {
            panic!("{:?}", f.timings)
        };
        assert!((first.met_after - 2430.5).abs() < 1e-6, "{first:?}");
        assert!((last.opens_at - 6090.5).abs() < 1e-6, "{last:?}");
        assert!((f.completion_seconds - 8551.5).abs() < 1e-6, "{f:?}");
        assert_eq!(f.goal_seconds, 2.0 * 3600.0 + 2.0 * 600.0);
        // The steps as the measuring test prices them on DynamoDB Local (tests/it/
        // firmware_rollouts.rs: the offer's one unit with a live state under 1 KB, the moves
        // inside ingestion's own writes).
        assert!(f.marked_state_bytes < 1024, "{}", f.marked_state_bytes);
        let units: Vec<u64> = f.steps.iter().map(|s| s.write_units).collect();
        assert_eq!(units, [1, 0]);
        assert_eq!(f.write_units_per_device(), 1);
        // Stage 1's 500 devices are offered within the second: the busiest key is the live-state
        // partition of 100 of them (a tenth of the offers, a unit each).
        let busiest = f.busiest().unwrap();
        assert!(busiest.key.contains("#SHARD#"), "{busiest:?}");
        assert!((busiest.wcu - 500.0 * 0.1).abs() < 1e-9, "{busiest:?}");
        assert!(!f.keys.iter().any(|k| k.key.contains("#COUNTS#")));
        assert!(render(&sim).contains("**Completion: 2.4 h**"));
        // A plan the API refuses is refused here.
        let bad = yaml.replace("[50, 100]", "[50, 40]");
        assert!(simulate(profile(&bad), "test").is_err());
    }

    #[test]
    fn a_profile_without_organizations_has_none() {
        let sim = simulate(profile(UNIFORM), "test").unwrap();
        assert!(sim.orgs.is_empty());
        assert_eq!(sim.workload.org_requests_per_second, 0.0);
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
