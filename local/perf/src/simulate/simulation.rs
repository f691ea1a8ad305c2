//! One profile's simulation: the fleet drawn, its traffic added up phase by phase.

use rand::rngs::StdRng;
use rand::SeedableRng;
use shared::model::shard::ShardCounts;
use shared::model::timestamp::Day;

use super::firmware::{firmware_rollout, FirmwareRolloutPeak};
use super::fleet::{device_id, Fleet};
use super::orgs::{scenarios, OrgItemSizes, OrgReport};
use super::partitions::TableLoad;
use super::profile::Error;
use super::profile::{Profile, DEFAULT_DAY};
use super::sizes::ItemSizes;
use super::traffic::{rollout_peak, Model, RolloutPeak, Traffic, Workload};

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
    /// The organizations' bursts (issue 33), one per organization of the profile.
    pub orgs: Vec<OrgReport>,
    /// A staged firmware rollout over the largest fleet (issue 40), when the profile has one.
    pub firmware: Option<FirmwareRolloutPeak>,
}

/// Runs `profile` (read from `source`).
pub fn simulate(profile: Profile, source: &str) -> Result<Simulation, Error> {
    profile.check()?;
    let shards = profile.shard_counts();
    let day = Day::parse_field("day", DEFAULT_DAY).expect("a valid default day");
    let sizes = ItemSizes::of(&profile, shards.clone(), &day);
    let fleet = Fleet::draw(&profile, &mut StdRng::seed_from_u64(profile.seed))?;
    let model = Model::new(&profile, &sizes, &shards, &day, &fleet);
    let mut traffic = Traffic::new(&model);
    traffic.owners(&model);
    traffic.type_marks(&model);
    traffic.status_shards(&model);
    traffic.offline_detection(&model);
    traffic.storage_and_totals(&model);
    traffic.flag();
    let rollout_peak = rollout_peak(&model, &traffic.workload);
    let orgs: Vec<OrgReport> = model
        .orgs
        .iter()
        .zip(&traffic.org_steady)
        .map(|(o, steady)| {
            let org_sizes = OrgItemSizes::of(&o.org, &day, &shards);
            let devices = u64::from(fleet.sizes[o.index as usize].0);
            scenarios(o, steady, &sizes, &org_sizes, devices)
        })
        .collect();
    let firmware = match &profile.firmware_rollout {
        None => None,
        Some(requested) => {
            let (index, (devices, rate)) = fleet
                .sizes
                .iter()
                .enumerate()
                .max_by_key(|(i, (devices, _))| (*devices, std::cmp::Reverse(*i)))
                .ok_or("firmware_rollout: the profile has no fleet")?;
            let per_minute = rate.unwrap_or(profile.events.per_device_per_minute);
            if per_minute <= 0.0 {
                return Err("firmware_rollout: the largest fleet's devices never check in".into());
            }
            let wake_seconds = f64::from(profile.events.batch_size) / per_minute * 60.0;
            let index = index as u64;
            Some(firmware_rollout(
                requested,
                &fleet.owner(index),
                &device_id(index, 0),
                u64::from(*devices),
                wake_seconds,
                &sizes.state_item,
                sizes.device_item,
                profile.devices_per_shard(),
                &day,
                &shards,
            )?)
        }
    };
    let Traffic {
        base,
        gsi1,
        gsi2,
        gsi3,
        workload,
        ..
    } = traffic;
    Ok(Simulation {
        profile,
        source: source.to_string(),
        shards,
        sizes,
        tables: [base, gsi1, gsi2, gsi3],
        workload,
        rollout_peak,
        orgs,
        firmware,
    })
}
