//! A staged firmware rollout's health rule (issue 40 item 4): the updated devices of a stage
//! going offline or raising alarms at a clearly higher rate than the devices of the target not
//! yet updated pauses the rollout. No I/O: the worker's walk tallies both groups from the live
//! states it reads anyway, a pass over the target at a time, and asks [`health_pause_reason`]
//! at the end of each pass.
//!
//! **How "clearly" is decided.** One-sided Fisher's exact test on the pass's 2×2 table
//! (updated or not × unhealthy or not): the chance that a share of unhealthy devices at least
//! as high as the stage's would fall on the updated devices if the update made no difference
//! (the hypergeometric tail). The rollout pauses when that chance is below
//! [`HEALTH_SIGNIFICANCE`] (1 in 1,000). Exact at any size, so a 1 % stage of a few devices is
//! judged as soundly as a 25 % stage of 250,000 (no normal approximation that small counts
//! break), and it needs no setting tuned to a fleet: a stage of 4 updated devices pauses only
//! when 3 or more are unhealthy against a 1 % baseline, a stage of 10,000 already when its rate
//! is a few tenths of a point above the baseline's. The test is repeated once a pass, so over
//! many passes a healthy rollout can still be paused by chance (about 1 in 1,000 per pass and
//! stage); a person's resume then accepts the stages open at that moment for this rule.

use serde::{Deserialize, Serialize};
use statrs::distribution::{DiscreteCDF, Hypergeometric};

/// Below this one-sided p-value the updated devices' unhealthy rate is clearly higher.
pub const HEALTH_SIGNIFICANCE: f64 = 0.001;

/// Devices of one group seen in one pass, and how many of them were unhealthy (an open alarm,
/// the offline one included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupHealth {
    /// Devices seen.
    pub devices: u64,
    /// Of them, with an open alarm (offline is one).
    pub unhealthy: u64,
}

impl GroupHealth {
    /// One more device, `unhealthy` or not.
    pub fn count(&mut self, unhealthy: bool) {
        self.devices += 1;
        self.unhealthy += u64::from(unhealthy);
    }

    /// Its unhealthy share, 0 when it has no device.
    pub fn rate(&self) -> f64 {
        if self.devices == 0 {
            0.0
        } else {
            self.unhealthy as f64 / self.devices as f64
        }
    }
}

/// One pass's tally: the updated devices of each stage (running the new image: `updated`,
/// `succeeded`, or failed `unhealthy` after updating) and the devices of the target not yet
/// updated (no offer of this rollout yet, or offered and not started).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthTally {
    /// Per stage (index into the plan's stages), its updated devices.
    #[serde(default)]
    pub updated: Vec<GroupHealth>,
    /// The target's devices not yet updated.
    #[serde(default)]
    pub not_updated: GroupHealth,
}

impl HealthTally {
    /// An updated device of `stage`.
    pub fn count_updated(&mut self, stage: u32, unhealthy: bool) {
        let stage = stage as usize;
        if self.updated.len() <= stage {
            self.updated.resize(stage + 1, GroupHealth::default());
        }
        self.updated[stage].count(unhealthy);
    }

    /// A device of the target not yet updated.
    pub fn count_not_updated(&mut self, unhealthy: bool) {
        self.not_updated.count(unhealthy);
    }

    /// Adds `other`'s counts (a page's, to the walk's).
    pub fn merge(&mut self, other: &HealthTally) {
        for (stage, group) in other.updated.iter().enumerate() {
            if self.updated.len() <= stage {
                self.updated.resize(stage + 1, GroupHealth::default());
            }
            self.updated[stage].devices += group.devices;
            self.updated[stage].unhealthy += group.unhealthy;
        }
        self.not_updated.devices += other.not_updated.devices;
        self.not_updated.unhealthy += other.not_updated.unhealthy;
    }
}

/// The one-sided p-value of Fisher's exact test that `updated` is unhealthy more often than
/// `not_updated`: the chance of at least `updated.unhealthy` unhealthy devices among
/// `updated.devices` drawn from both groups together, were health independent of the update.
pub fn higher_rate_p_value(updated: GroupHealth, not_updated: GroupHealth) -> f64 {
    let population = updated.devices + not_updated.devices;
    let unhealthy = updated.unhealthy + not_updated.unhealthy;
    if updated.unhealthy == 0 {
        return 1.0;
    }
    match Hypergeometric::new(population, unhealthy, updated.devices) {
        // P(X >= k) = sf(k - 1).
        Ok(distribution) => distribution.sf(updated.unhealthy - 1),
        Err(_) => 1.0,
    }
}

/// Why the pass's `tally` pauses the rollout, if it does: the first stage after
/// `accepted_through` (the stages a resume accepted) whose updated devices are unhealthy at a
/// clearly higher rate than the target's devices not yet updated. With no device left to
/// compare with (every device updated) the rule has no baseline and says nothing; the failure
/// rule still holds. `stage_percent` names a stage for the reason.
pub fn health_pause_reason(
    tally: &HealthTally,
    accepted_through: Option<u32>,
    stage_percent: impl Fn(u32) -> u8,
) -> Option<String> {
    let base = tally.not_updated;
    if base.devices == 0 {
        return None;
    }
    tally
        .updated
        .iter()
        .enumerate()
        .map(|(stage, group)| (stage as u32, *group))
        .filter(|(stage, _)| accepted_through.is_none_or(|accepted| *stage > accepted))
        .find_map(|(stage, group)| {
            let p = higher_rate_p_value(group, base);
            (group.rate() > base.rate() && p < HEALTH_SIGNIFICANCE).then(|| {
                format!(
                    "stage {stage} ({}%): {} of {} updated devices are offline or alarmed \
                     ({:.1}%) against {} of {} devices not yet updated ({:.1}%); one-sided \
                     Fisher's exact test p = {p:.1e}, below {HEALTH_SIGNIFICANCE}",
                    stage_percent(stage),
                    group.unhealthy,
                    group.devices,
                    group.rate() * 100.0,
                    base.unhealthy,
                    base.devices,
                    base.rate() * 100.0,
                )
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(devices: u64, unhealthy: u64) -> GroupHealth {
        GroupHealth { devices, unhealthy }
    }

    fn tally(updated: GroupHealth, not_updated: GroupHealth) -> HealthTally {
        HealthTally {
            updated: vec![updated],
            not_updated,
        }
    }

    #[test]
    fn the_p_value_is_the_hypergeometric_tail() {
        // 2x2 table [[3, 1], [1, 3]]: P(X >= 3) with N=8, K=4, n=4 = (16 + 1) / 70.
        let p = higher_rate_p_value(group(4, 3), group(4, 1));
        assert!((p - 17.0 / 70.0).abs() < 1e-12, "{p}");
        assert_eq!(higher_rate_p_value(group(4, 0), group(4, 1)), 1.0);
    }

    #[test]
    fn a_small_stage_pauses_only_on_a_rate_no_chance_explains() {
        let base = group(396, 4);
        // 1 % unhealthy among the not-yet-updated: 2 of 4 updated can be chance, 3 cannot.
        assert_eq!(
            health_pause_reason(&tally(group(4, 2), base), None, |_| 1),
            None
        );
        let reason = health_pause_reason(&tally(group(4, 3), base), None, |_| 1).unwrap();
        assert!(
            reason.starts_with("stage 0 (1%): 3 of 4 updated devices"),
            "{reason}"
        );
    }

    #[test]
    fn a_large_stage_pauses_on_a_small_but_certain_difference_and_not_on_noise() {
        let base = group(750_000, 7_500);
        assert!(health_pause_reason(&tally(group(250_000, 3_000), base), None, |_| 25).is_some());
        assert_eq!(
            health_pause_reason(&tally(group(250_000, 2_560), base), None, |_| 25),
            None
        );
        // Lower than the baseline never pauses.
        assert_eq!(
            health_pause_reason(&tally(group(250_000, 1_000), base), None, |_| 25),
            None
        );
    }

    #[test]
    fn accepted_stages_and_a_fleet_with_no_device_left_to_compare_say_nothing() {
        let bad = tally(group(10, 10), group(100, 0));
        assert!(health_pause_reason(&bad, None, |_| 5).is_some());
        assert_eq!(health_pause_reason(&bad, Some(0), |_| 5), None);
        assert_eq!(
            health_pause_reason(&tally(group(10, 10), group(0, 0)), None, |_| 100),
            None
        );
    }
}
