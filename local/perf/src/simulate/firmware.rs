//! A staged firmware rollout (issue 40) over the profile's largest fleet, as the engine runs it
//! today (docs/design.md section 15): the write units a healthy device costs, priced on the real
//! items; how long the rollout takes from start to done; and the keys it loads while its last
//! (largest) stage is offered, against DynamoDB's per-partition limits.
//!
//! **The engine's pace.** The worker walks the target a page of [`ROLLOUT_PAGE`] devices a
//! turn, in a lane of its own, at most [`ROLLOUT_DEVICES_PER_SECOND`] (the pace's floor per
//! turn; pages with offers take longer on DynamoDB, so this is the fastest it goes) for
//! [`WORKER_RUN_SECONDS`] of each run, one run every [`WORKER_INTERVAL_SECONDS`], and at most
//! one whole walk a run; it offers each device of an open stage as it passes it. A stage meets
//! its criterion once the walk has passed the whole target since it opened and at least
//! `successPercent` of its offered devices succeeded, then soaks, then the next opens and the
//! walk starts over.
//!
//! **A device's pace** (an assumption, stated in the report): it wakes every `wake` seconds (the
//! profile's batch interval), at a uniformly random phase. At its first check-in after the walk
//! offered it, it gets the offer, downloads, installs and reboots before its next check-in, where
//! it reports the new version (`updated`); `healthyCheckIns` further check-ins make it succeed.
//! So a device succeeds `U x wake + (1 + healthyCheckIns) x wake` after its offer, `U` uniform.

use serde_json::json;
use shared::model::entities::device_state::{state_pk, DeviceStateItem};
use shared::model::entities::rollout::RolloutItem;
use shared::model::entities::Entity;
use shared::model::firmware::{FirmwareId, FirmwarePlan, OfferedImage, StagePlan};
use shared::model::ids::{DeviceId, DeviceType, RolloutId, UserId};
use shared::model::keys::user_pk;
use shared::model::rollout_health::{GroupHealth, HealthTally};
use shared::model::rollout_progress::{FirmwareProgress, OfferPhase};
use shared::model::rollout_stages::{StageCounts, StageGate};
use shared::model::shard::ShardCounts;
use shared::model::timestamp::Day;
use shared::model::twin::{RolloutStatus, RolloutTarget};
use shared::ops::twin::rollout::{
    ROLLOUT_DEVICES_PER_SECOND, ROLLOUT_PAGE, WALK_CHECKPOINT_SECONDS,
};

use super::orgs::KeyPeak;
use super::profile::{Error, FirmwareRolloutPlan};
use fleet_testkit::capacity::{item_size, query_read_units, strong_read_units, write_units};

/// How often the scheduled rollout worker runs (`RolloutWorkerFunction`'s `rate(1 minute)` in
/// template.yaml).
pub const WORKER_INTERVAL_SECONDS: f64 = 60.0;

/// How long a run works: the function's `Timeout` (60 s) less the margin it keeps for its
/// last page and its answer (`MARGIN` in functions/rollout-worker/src/lib.rs).
pub const WORKER_RUN_SECONDS: f64 = 55.0;

/// One step of a healthy device's rollout and the write units it costs beyond ingestion's own
/// live-state write (which the check-ins' moves ride on), as the measuring test counts them.
#[derive(Clone, Debug, PartialEq)]
pub struct FirmwareStep {
    /// What happens.
    pub step: &'static str,
    /// Write units.
    pub write_units: u64,
}

/// One stage's timing.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTiming {
    /// Its cumulative percent of the target.
    pub percent: u8,
    /// Its devices.
    pub devices: u64,
    /// Seconds from the rollout's start until it opens.
    pub opens_at: f64,
    /// Seconds from its opening until it meets its criterion (the last stage: until every
    /// offered device finished, which ends the rollout).
    pub met_after: f64,
}

/// A staged firmware rollout over the largest fleet.
#[derive(Clone, Debug, PartialEq)]
pub struct FirmwareRolloutPeak {
    /// Devices of the target (the largest fleet).
    pub devices: u64,
    /// Seconds between a device's check-ins.
    pub wake_seconds: f64,
    /// The plan's stages, percents.
    pub stages: Vec<u8>,
    /// Soak, seconds.
    pub soak_seconds: f64,
    /// Healthy check-ins that make a device succeed.
    pub healthy_check_ins: u8,
    /// Percent of a stage's devices that must succeed.
    pub success_percent: u8,
    /// Devices the walk passes a second.
    pub walk_devices_per_second: f64,
    /// Seconds for one walk of the whole target.
    pub walk_seconds: f64,
    /// Seconds between the starts of two walks: whole runs, a walk a run at most.
    pub lap_seconds: f64,
    /// Each stage's timing.
    pub timings: Vec<StageTiming>,
    /// Start to done, seconds.
    pub completion_seconds: f64,
    /// Issue 40's goal: stages x soak + 2 wake intervals, seconds.
    pub goal_seconds: f64,
    /// A healthy device's steps and their write units.
    pub steps: Vec<FirmwareStep>,
    /// The live state's size with the device's part in the rollout, bytes.
    pub marked_state_bytes: u64,
    /// The rollout item's size at its largest (every stage's counts and health), bytes.
    pub rollout_bytes: u64,
    /// Checkpoints of the rollout item in one walk of the whole target (one every
    /// `WALK_CHECKPOINT_SECONDS` of walking, and one when a run stops).
    pub checkpoints_per_walk: f64,
    /// Write units of the walks' checkpoints, every walk, a device's share: the worker's, not
    /// any device's, so apart from `steps`.
    pub checkpoint_write_units: f64,
    /// Read units a device costs by its own check-ins: each one with an open part reads the
    /// rollout item (consistent).
    pub check_in_read_units: f64,
    /// Whole walks of the target from start to done.
    pub walks: f64,
    /// Read units a device costs by the walks: each reads its live state (consistent).
    pub walk_read_units: f64,
    /// The keys loaded while the last stage is offered, busiest (share of a limit) first.
    pub keys: Vec<KeyPeak>,
}

impl FirmwareRolloutPeak {
    /// Write units of a healthy device over the whole rollout (its own steps).
    pub fn write_units_per_device(&self) -> u64 {
        self.steps.iter().map(|s| s.write_units).sum()
    }

    /// Write units of the whole rollout per device: the device's steps and its share of the
    /// walks' checkpoints.
    pub fn all_write_units_per_device(&self) -> f64 {
        self.write_units_per_device() as f64 + self.checkpoint_write_units
    }

    /// The busiest key.
    pub fn busiest(&self) -> Option<&KeyPeak> {
        self.keys.first()
    }
}

/// The simulated rollout's id: fixed, so the report names the same keys on every run.
fn sample_rollout_id() -> RolloutId {
    RolloutId::parse_generated("r-001795200000000-0123456789abcdef").expect("the generated shape")
}

/// The sizes of the rollout's items, as stored.
struct RolloutItemSizes {
    rollout: u64,
    marked_state: u64,
    state: u64,
}

fn plan_of(requested: &FirmwareRolloutPlan) -> Result<StagePlan, Error> {
    let stages = requested.stages.as_ref().map(|s| json!(s));
    let soak = requested.soak_seconds.map(|s| json!(s));
    let healthy = requested.healthy_check_ins.map(|s| json!(s));
    let success = requested.success_percent.map(|s| json!(s));
    StagePlan::parse(
        stages.as_ref(),
        soak.as_ref(),
        healthy.as_ref(),
        success.as_ref(),
        None,
        None,
    )
    .map_err(|e| format!("firmware_rollout.{}: {}", e.field, e.reason).into())
}

/// The rollout's items as the engine stores them: the live state with the part of a device
/// mid-update with the longest optional fields the engine writes on a healthy path
/// (`fromVersion`), and the rollout with its image (the S3 version) and every stage's counts and
/// health at a million devices' magnitudes.
fn item_sizes(
    owner: &UserId,
    device: &DeviceId,
    state: &DeviceStateItem,
    plan: &StagePlan,
    day: &Day,
    shards: &ShardCounts,
) -> RolloutItemSizes {
    let at = day.start().plus_seconds(12 * 3600);
    let rollout_id = sample_rollout_id();
    let firmware_id =
        FirmwareId::parse("f-001795100000000-0123456789abcdef").expect("the generated shape");
    let device_type = DeviceType::parse("meter").expect("a valid type");
    let size = |item: Result<_, _>| item_size(&item.expect("items serialize"));
    let part = FirmwareProgress {
        phase: OfferPhase::Updated,
        from_version: Some("2.13.9".into()),
        healthy_check_ins: 1,
        ..FirmwareProgress::offered(
            rollout_id.clone(),
            (firmware_id.clone(), "2.14.0".into()),
            3,
            1,
            at,
        )
    };
    let stages = plan.stages.len();
    let many = StageCounts {
        offered: 750_000,
        in_progress: 250_000,
        succeeded: 500_000,
        failed: 7_500,
        timed_out: 2_500,
        retried: 5_000,
    };
    let health = HealthTally {
        updated: vec![
            GroupHealth {
                devices: 500_000,
                unhealthy: 5_000,
            };
            stages
        ],
        not_updated: GroupHealth {
            devices: 250_000,
            unhealthy: 2_500,
        },
    };
    let rollout = RolloutItem {
        user_id: owner.clone(),
        rollout_id: rollout_id.clone(),
        target: RolloutTarget::Type(device_type.clone()),
        patch: String::new(),
        firmware: Some(FirmwarePlan {
            firmware_id: firmware_id.clone(),
            version: "2.14.0".into(),
            device_type,
            stages: plan.stages.clone(),
            soak_seconds: plan.soak_seconds,
            healthy_check_ins: plan.healthy_check_ins,
            success_percent: plan.success_percent,
            abort: plan.abort.clone(),
            maintenance_window: plan.maintenance_window,
        }),
        image: Some(OfferedImage {
            sha256: "0".repeat(64),
            size: 4 * 1024 * 1024,
            signature: None,
            object_key: format!("firmware/{owner}/{firmware_id}"),
            // S3's version ids are 32 characters.
            object_version: Some("3HL4kqtJlcpXroDTDmJ-rmSpXd3dIbrH".into()),
        }),
        status: RolloutStatus::Running,
        position: Some(device.clone()),
        devices_updated: 0,
        devices_failed: 0,
        failures: Vec::new(),
        created_at: at,
        finished_at: None,
        cancelled_at: None,
        gate: Some(StageGate {
            open: stages as u32 - 1,
            opened_at: vec![at; stages],
            met_at: Some(at),
            walked: true,
            health: health.clone(),
            last_health: Some(health),
            tally: vec![many; stages],
            counts: Some(vec![many; stages]),
            counted_at: Some(at),
            ..StageGate::default()
        }),
        paused_reason: None,
    };
    let mut marked = state.clone();
    marked.firmware = Some(part);
    marked.firmware_seq = 6;
    RolloutItemSizes {
        rollout: size(rollout.to_item(shards)),
        marked_state: size(marked.to_item(shards)),
        state: size(state.to_item(shards)),
    }
}

/// A healthy device's steps (docs/design.md section 15, "Write units per device, measured"):
/// the walk's offer (one UpdateItem of the live state: the part), then every move of the part
/// (downloading, installing, updated, the healthy check-ins, success) inside ingestion's own
/// update of the live state, which costs more only where the part takes the state over a
/// kilobyte boundary.
fn healthy_steps(s: &RolloutItemSizes, healthy_check_ins: u8) -> Vec<FirmwareStep> {
    let w = write_units;
    let moves = 3 + u64::from(healthy_check_ins);
    vec![
        FirmwareStep {
            step: "offer (one UpdateItem of the live state: the device's part)",
            write_units: w(s.marked_state),
        },
        FirmwareStep {
            step: "downloading, installing, updated, the healthy check-ins and success (each inside ingestion's own live-state update: only what the part adds to its size)",
            write_units: moves * (w(s.marked_state) - w(s.state)),
        },
    ]
}

/// The `q` quantile of `U1 x a + U2 x b` (U1, U2 independent and uniform on [0, 1]): when a
/// share `q` of a stage's devices has been offered (spread over the walk, `a`) and has checked
/// in since (spread over a wake interval, `b`). Closed form of the trapezoidal distribution.
fn uniform_sum_quantile(a: f64, b: f64, q: f64) -> f64 {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    if lo <= 0.0 {
        return q * hi;
    }
    // CDF: t^2 / (2 lo hi) up to lo; (t - lo/2) / hi up to hi; then symmetric.
    let first = lo / (2.0 * hi);
    if q <= first {
        (2.0 * lo * hi * q).sqrt()
    } else if q <= 1.0 - first {
        q * hi + lo / 2.0
    } else {
        lo + hi - (2.0 * lo * hi * (1.0 - q)).sqrt()
    }
}

/// The rollout of `requested` over the fleet of `devices` devices of `owner` (one of them
/// `device`, whose live state is `state` and device item `device_item_bytes` long), waking every
/// `wake_seconds`; `devices_per_shard` is how many live states share a partition.
#[allow(clippy::too_many_arguments)]
pub(super) fn firmware_rollout(
    requested: &FirmwareRolloutPlan,
    owner: &UserId,
    device: &DeviceId,
    devices: u64,
    wake_seconds: f64,
    state: &DeviceStateItem,
    device_item_bytes: u64,
    devices_per_shard: u32,
    day: &Day,
    shards: &ShardCounts,
) -> Result<FirmwareRolloutPeak, Error> {
    let plan = plan_of(requested)?;
    let sizes = item_sizes(owner, device, state, &plan, day, shards);
    let steps = healthy_steps(&sizes, plan.healthy_check_ins);
    let n = devices as f64;
    let pace = ROLLOUT_DEVICES_PER_SECOND as f64;
    let per_run = pace * WORKER_RUN_SECONDS;
    let full_runs = (n / per_run).floor();
    let walk_seconds = full_runs * WORKER_INTERVAL_SECONDS + (n - full_runs * per_run) / pace;
    let lap_seconds = (n / per_run).ceil().max(1.0) * WORKER_INTERVAL_SECONDS;
    let walk_devices_per_second = n / walk_seconds;
    // A walk's checkpoints of the rollout item: one every WALK_CHECKPOINT_SECONDS of walking
    // in each run, the last of a run when it stops (or the walk ends).
    let every = WALK_CHECKPOINT_SECONDS as f64;
    let rest_seconds = (n - full_runs * per_run) / pace;
    let checkpoints_per_walk =
        full_runs * (WORKER_RUN_SECONDS / every).ceil() + (rest_seconds / every).ceil();
    let soak = f64::from(plan.soak_seconds);
    let healthy = f64::from(plan.healthy_check_ins);
    let success = f64::from(plan.success_percent) / 100.0;
    // Each stage's own share of the target (its percent less the previous one's).
    let shares: Vec<f64> = plan
        .stages
        .iter()
        .scan(0u8, |previous, &percent| {
            let share = f64::from(percent - *previous) / 100.0;
            *previous = percent;
            Some(share)
        })
        .collect();
    let mut timings = Vec::new();
    let mut opens_at = 0.0;
    let last = plan.stages.len() - 1;
    for (k, (&percent, &share)) in plan.stages.iter().zip(&shares).enumerate() {
        // Its devices are offered as the walk passes them (spread over a whole walk), and
        // succeed a residual wake plus (1 + healthy) wakes later; the worker sees it at its
        // next run.
        let q = if k == last { 1.0 } else { success };
        let succeeded =
            uniform_sum_quantile(walk_seconds, wake_seconds, q) + (1.0 + healthy) * wake_seconds;
        let met_after = succeeded.max(walk_seconds) + WORKER_INTERVAL_SECONDS;
        timings.push(StageTiming {
            percent,
            devices: (n * share).round() as u64,
            opens_at,
            met_after,
        });
        // The soak, then the run that opens the next stage.
        opens_at += met_after + soak + WORKER_INTERVAL_SECONDS;
    }
    let done = timings.last().map_or(0.0, |t| t.opens_at + t.met_after);
    let goal_seconds = plan.stages.len() as f64 * soak + 2.0 * wake_seconds;
    // The last stage, while the walk offers it: its share of the devices the walk passes.
    let last_share = shares[last];
    let offers = walk_devices_per_second * last_share;
    // Each offered device's part stays open for 2 + healthy check-ins (the offer's, updated,
    // the healthy ones), each a consistent GetItem of the rollout item: at the peak, the
    // devices offered within that time (at most the whole stage) check in once a wake each.
    let open = (offers * (2.0 + healthy) * wake_seconds).min(n * last_share);
    let open_check_ins = open / wake_seconds;
    // The walk's pages: a consistent BatchGetItem of each passed device's live state, the
    // offers' UpdateItems, and each page's checkpoint of the rollout item (its gate).
    let per_state_partition = f64::from(devices_per_shard).min(n) / n;
    let state_wcu = offers * write_units(sizes.marked_state) as f64;
    let state_rcu = walk_devices_per_second * strong_read_units(sizes.marked_state);
    let pages_per_second = walk_devices_per_second / ROLLOUT_PAGE as f64;
    let mut keys = vec![
        KeyPeak {
            key: user_pk(owner),
            table: "base",
            holds: "the owner's partition: the rollout item, read by every check-in of an open part (consistent) and checkpointed by the walk every few seconds; the walk's Query of the device items",
            wcu: write_units(sizes.rollout) as f64 / every,
            rcu: open_check_ins * strong_read_units(sizes.rollout)
                + pages_per_second * query_read_units(ROLLOUT_PAGE as u64 * device_item_bytes),
        },
        KeyPeak {
            key: state_pk(owner, 1),
            table: "base",
            holds: "one live-state partition of the owner's (the walk's offers and reads)",
            wcu: state_wcu * per_state_partition,
            rcu: state_rcu * per_state_partition,
        },
    ];
    keys.sort_by(|a, b| b.of_limit().total_cmp(&a.of_limit()));
    Ok(FirmwareRolloutPeak {
        devices,
        wake_seconds,
        stages: plan.stages.clone(),
        soak_seconds: soak,
        healthy_check_ins: plan.healthy_check_ins,
        success_percent: plan.success_percent,
        walk_devices_per_second,
        walk_seconds,
        lap_seconds,
        timings,
        completion_seconds: done,
        goal_seconds,
        steps,
        marked_state_bytes: sizes.marked_state,
        rollout_bytes: sizes.rollout,
        checkpoints_per_walk,
        checkpoint_write_units: done / lap_seconds
            * checkpoints_per_walk
            * write_units(sizes.rollout) as f64
            / n,
        check_in_read_units: (2.0 + healthy) * strong_read_units(sizes.rollout),
        walks: done / lap_seconds,
        walk_read_units: done / lap_seconds * strong_read_units(sizes.marked_state),
        keys,
    })
}

/// A duration as hours with one decimal.
pub fn hours(seconds: f64) -> String {
    format!("{:.1} h", seconds / 3600.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uniform_sum_quantiles_match_a_count_over_a_grid() {
        let (a, b) = (60_000.0, 3_600.0);
        let grid = 400;
        let mut sums: Vec<f64> = (0..grid)
            .flat_map(|i| {
                (0..grid).map(move |j| {
                    (f64::from(i) + 0.5) / f64::from(grid) * a
                        + (f64::from(j) + 0.5) / f64::from(grid) * b
                })
            })
            .collect();
        sums.sort_by(f64::total_cmp);
        for q in [0.01, 0.03, 0.5, 0.95, 0.99] {
            let counted = sums[(q * sums.len() as f64) as usize];
            let closed = uniform_sum_quantile(a, b, q);
            assert!(
                (counted - closed).abs() < a / 200.0,
                "{q}: {counted} {closed}"
            );
        }
        assert_eq!(uniform_sum_quantile(a, b, 1.0), a + b);
    }
}
