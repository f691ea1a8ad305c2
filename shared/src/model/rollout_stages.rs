//! A staged firmware rollout's stages as the worker sees them (issue 40 items 2 and 4): the
//! per-stage counts its walk tallies from the devices' parts ([`FirmwareProgress`]), and the
//! gate stored on the rollout that says which stages are open. No I/O.

use serde::{Deserialize, Serialize};

use crate::model::rollout_health::HealthTally;
use crate::model::rollout_progress::{FailureClass, FirmwareProgress, OfferPhase};
use crate::model::timestamp::Timestamp;

/// A stage's counts, tallied by the worker's walk from its devices' live states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageCounts {
    /// Devices offered the firmware.
    pub offered: i64,
    /// Started and not finished.
    pub in_progress: i64,
    /// Succeeded.
    pub succeeded: i64,
    /// Failed (every class, timeouts included).
    pub failed: i64,
    /// Of the failed, timed out.
    pub timed_out: i64,
    /// Retries made (failed devices offered the image again).
    pub retried: i64,
}

impl StageCounts {
    /// Devices finished (succeeded or failed).
    pub fn finished(&self) -> i64 {
        self.succeeded + self.failed
    }

    /// Counts a device whose part in the rollout is `progress`: offered once, in progress,
    /// succeeded or failed (timed out among them) as it is now, and its retries.
    pub fn count(&mut self, progress: &FirmwareProgress) {
        self.offered += 1;
        self.retried += i64::from(progress.attempts.max(1) - 1);
        if progress.phase.in_progress() {
            self.in_progress += 1;
        }
        match progress.phase {
            OfferPhase::Succeeded => self.succeeded += 1,
            OfferPhase::Failed => {
                self.failed += 1;
                if progress.failure == Some(FailureClass::Timeout) {
                    self.timed_out += 1;
                }
            }
            _ => {}
        }
    }

    /// Adds `other`'s counts (a page's, to the walk's).
    pub fn merge(&mut self, other: &StageCounts) {
        self.offered += other.offered;
        self.in_progress += other.in_progress;
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.timed_out += other.timed_out;
        self.retried += other.retried;
    }
}

/// Per stage (index into the plan's stages), its counts.
pub type StageTally = Vec<StageCounts>;

/// Counts `progress` on its stage of `tally`.
pub fn tally_device(tally: &mut StageTally, progress: &FirmwareProgress) {
    let stage = progress.stage as usize;
    if tally.len() <= stage {
        tally.resize(stage + 1, StageCounts::default());
    }
    tally[stage].count(progress);
}

/// Adds a page's `counts` to the walk's `tally`.
pub fn merge_tally(tally: &mut StageTally, counts: &StageTally) {
    if tally.len() < counts.len() {
        tally.resize(counts.len(), StageCounts::default());
    }
    for (sum, page) in tally.iter_mut().zip(counts) {
        sum.merge(page);
    }
}

/// Which stages of a firmware rollout are open, stored on the rollout (`gate`): stage 0 opens
/// at the start; the worker opens the next one when the last open stage has met the success
/// criterion (`met_at`) and soaked since.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageGate {
    /// The last open stage (index into the plan's stages).
    pub open: u32,
    /// When each open stage opened, in order.
    pub opened_at: Vec<Timestamp>,
    /// When the last open stage first met the success criterion (its soak runs from then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_at: Option<Timestamp>,
    /// The worker has walked the whole target since the last stage opened: every device of
    /// the open stages was offered, so the stage's counts are of all its devices.
    #[serde(default)]
    pub walked: bool,
    /// The stages' finished and failed counts when the owner last resumed the rollout: the
    /// abort rule counts from there, so the failures that paused it do not pause it again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline: Vec<StageBaseline>,
    /// The health rule's tally of the walk under way ([`crate::model::rollout_health`]).
    #[serde(default)]
    pub health: HealthTally,
    /// The last whole walk's tally, which the rule judged (shown on the rollout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_health: Option<HealthTally>,
    /// The stages' counts of the walk under way, tallied from the live states it reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tally: StageTally,
    /// The last whole walk's counts: what the abort and success rules judge and the owner
    /// reads (absent until a walk ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<StageTally>,
    /// When that walk ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_at: Option<Timestamp>,
    /// The last stage open when the owner last resumed: the health rule leaves the stages up
    /// to it be (the owner accepted them as they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_accepted_through: Option<u32>,
}

/// A stage's counts at a resume ([`StageGate::baseline`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageBaseline {
    /// The stage.
    pub stage: u32,
    /// Its finished devices then.
    pub finished: i64,
    /// Its failed devices then.
    pub failed: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rollout_progress::tests::part;

    #[test]
    fn the_walk_tallies_each_device_once_as_it_is_now() {
        let mut tally = StageTally::new();
        let mut retried = part(OfferPhase::Failed);
        retried.failure = Some(FailureClass::Timeout);
        retried.attempts = 3;
        retried.stage = 2;
        for p in [
            part(OfferPhase::Offered),
            part(OfferPhase::Downloading),
            part(OfferPhase::Updated),
            part(OfferPhase::Succeeded),
            retried,
        ] {
            tally_device(&mut tally, &p);
        }
        assert_eq!(tally.len(), 3);
        assert_eq!(tally[0], StageCounts::default());
        assert_eq!(
            tally[1],
            StageCounts {
                offered: 4,
                in_progress: 2,
                succeeded: 1,
                ..StageCounts::default()
            }
        );
        assert_eq!(
            tally[2],
            StageCounts {
                offered: 1,
                failed: 1,
                timed_out: 1,
                retried: 2,
                ..StageCounts::default()
            }
        );
        let mut walk = vec![StageCounts::default()];
        merge_tally(&mut walk, &tally);
        merge_tally(&mut walk, &tally);
        assert_eq!(walk[1].offered, 8);
        assert_eq!(walk[2].retried, 4);
    }
}
