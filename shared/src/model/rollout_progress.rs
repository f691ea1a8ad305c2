//! How a device moves through a staged firmware rollout (issue 40 items 3 and 5): its phases,
//! its failure classes, the report it sends, the per-stage counters, and the one pure step
//! that turns a check-in into the next phase and the counter changes. No I/O.

use serde::{Deserialize, Serialize};

use crate::model::error::ValidationError;
use crate::model::rollout_health::HealthTally;
use crate::model::timestamp::Timestamp;

/// Longest failure reason kept from a device, in characters (longer ones are refused, naming
/// the field).
pub const MAX_REASON_LEN: usize = 256;

/// Where a device is in a firmware rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OfferPhase {
    /// Offered; the device has said nothing of it yet.
    Offered,
    /// The device said it is downloading.
    Downloading,
    /// The device said it is installing.
    Installing,
    /// The device reported running the new version (after its reboot) and is counting
    /// healthy check-ins.
    Updated,
    /// Running the new version and healthy: done.
    Succeeded,
    /// Failed, with a class and the device's reason: done.
    Failed,
}

impl OfferPhase {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OfferPhase::Offered => "offered",
            OfferPhase::Downloading => "downloading",
            OfferPhase::Installing => "installing",
            OfferPhase::Updated => "updated",
            OfferPhase::Succeeded => "succeeded",
            OfferPhase::Failed => "failed",
        }
    }

    /// Counted `inProgress`: started on the offer and not finished.
    pub fn in_progress(self) -> bool {
        matches!(
            self,
            OfferPhase::Downloading | OfferPhase::Installing | OfferPhase::Updated
        )
    }

    /// Succeeded or failed: nothing more happens to it in this rollout.
    pub fn finished(self) -> bool {
        matches!(self, OfferPhase::Succeeded | OfferPhase::Failed)
    }

    /// The device still needs the image: the offer rides in its answers.
    pub fn wants_offer(self) -> bool {
        matches!(
            self,
            OfferPhase::Offered | OfferPhase::Downloading | OfferPhase::Installing
        )
    }
}

/// Why a device failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureClass {
    /// The download failed (the device said so while downloading, or before starting).
    Download,
    /// The downloaded image's digest or signature did not verify on the device.
    Verify,
    /// The installation failed (the device said so while installing).
    Install,
    /// The device installed, then reported the version it ran before: it rolled back.
    Rollback,
    /// It did not check in within its learned interval plus a margin.
    Timeout,
    /// After updating, an alarm was raised on it, or it reported a failure.
    Unhealthy,
}

impl FailureClass {
    /// The stored and shown spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Download => "download",
            FailureClass::Verify => "verify",
            FailureClass::Install => "install",
            FailureClass::Rollback => "rollback",
            FailureClass::Timeout => "timeout",
            FailureClass::Unhealthy => "unhealthy",
        }
    }

    /// How many times a device failed of this class is offered the image again (the walk
    /// re-offers it after [`retry_at`]'s backoff). A download or a timeout is most often the
    /// network or a device asleep longer than usual, so it gets 3 and 2 more tries; a digest
    /// that did not verify may be a corrupted transfer (2); a failed install a glitch of the
    /// device's (1); a rollback or an unhealthy device says the image itself is bad for that
    /// device, so trying again would only hurt it again (0).
    pub fn retries(self) -> u32 {
        match self {
            FailureClass::Download => 3,
            FailureClass::Verify => 2,
            FailureClass::Timeout => 2,
            FailureClass::Install => 1,
            FailureClass::Rollback | FailureClass::Unhealthy => 0,
        }
    }
}

/// The first retry's backoff after a failure; each further one waits 4 times longer (1 h,
/// 4 h, 16 h): long enough for a device's network or power to change, short enough that a
/// device waking hourly is retried within the day.
pub const RETRY_FIRST_BACKOFF_SECONDS: i64 = 3600;

/// When a device that failed of `class` at `failed_at` on its `attempts`-th offer may be
/// offered the image again, or `None` when its class's retries are spent.
pub fn retry_at(class: FailureClass, attempts: u32, failed_at: Timestamp) -> Option<Timestamp> {
    let attempts = attempts.max(1);
    (attempts <= class.retries())
        .then(|| failed_at.plus_seconds(RETRY_FIRST_BACKOFF_SECONDS << (2 * (attempts - 1).min(8))))
}

/// What a device says of its update state in a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportedUpdate {
    /// Downloading the image.
    Downloading,
    /// Installing it.
    Installing,
    /// Failed, of this class when the device names one (`download`, `verify`, `install`).
    Failed(Option<FailureClass>),
}

/// `"firmware": {"version", "state"?, "reason"?, "class"?}` of a device's request, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirmwareReport {
    /// The version it runs now.
    pub version: String,
    /// Its update state, when it is working on one (absent: just running `version`).
    pub state: Option<ReportedUpdate>,
    /// Its reason for a failure.
    pub reason: Option<String>,
}

/// `firmware` as a device sends it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmittedFirmwareReport {
    /// The version it runs.
    pub version: String,
    /// `downloading`, `installing` or `failed`.
    #[serde(default)]
    pub state: Option<String>,
    /// Why it failed.
    #[serde(default)]
    pub reason: Option<String>,
    /// A failure's class, when the device knows it: `download`, `verify` or `install`.
    #[serde(default)]
    pub class: Option<String>,
}

impl FirmwareReport {
    /// Validates a device's `firmware`: a 400 naming the field (`firmware.version`,
    /// `firmware.state`, `firmware.reason`, `firmware.class`).
    pub fn parse(submitted: SubmittedFirmwareReport) -> Result<Self, ValidationError> {
        crate::model::firmware::check_version(&submitted.version)
            .map_err(|e| ValidationError::new("firmware.version", e.reason))?;
        let class = match submitted.class.as_deref() {
            None => None,
            Some("download") => Some(FailureClass::Download),
            Some("verify") => Some(FailureClass::Verify),
            Some("install") => Some(FailureClass::Install),
            Some(_) => {
                return Err(ValidationError::new(
                    "firmware.class",
                    "must be download, verify or install",
                ))
            }
        };
        let state = match submitted.state.as_deref() {
            None => None,
            Some("downloading") => Some(ReportedUpdate::Downloading),
            Some("installing") => Some(ReportedUpdate::Installing),
            Some("failed") => Some(ReportedUpdate::Failed(class)),
            Some(_) => {
                return Err(ValidationError::new(
                    "firmware.state",
                    "must be downloading, installing or failed",
                ))
            }
        };
        if class.is_some() && !matches!(state, Some(ReportedUpdate::Failed(_))) {
            return Err(ValidationError::new(
                "firmware.class",
                "is only for a failed state",
            ));
        }
        if let Some(reason) = &submitted.reason {
            if reason.chars().count() > MAX_REASON_LEN || reason.chars().any(char::is_control) {
                return Err(ValidationError::new(
                    "firmware.reason",
                    format!(
                        "must be at most {MAX_REASON_LEN} characters, without control characters"
                    ),
                ));
            }
        }
        Ok(Self {
            version: submitted.version,
            state,
            reason: submitted.reason,
        })
    }
}

/// One of a stage's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StageCounter {
    /// Devices offered the firmware.
    Offered,
    /// Devices started on it and not finished.
    InProgress,
    /// Devices running it healthy.
    Succeeded,
    /// Devices failed (every class, timeouts included).
    Failed,
    /// Of the failed, those that timed out.
    TimedOut,
    /// Failed devices offered the image again ([`FailureClass::retries`]): each retry takes
    /// one from `failed` (and `timedOut`) and adds one here.
    Retried,
}

impl StageCounter {
    /// Every counter.
    pub const ALL: [StageCounter; 6] = [
        StageCounter::Offered,
        StageCounter::InProgress,
        StageCounter::Succeeded,
        StageCounter::Failed,
        StageCounter::TimedOut,
        StageCounter::Retried,
    ];

    /// Its spelling in the API and in the stored attribute names.
    pub fn as_str(self) -> &'static str {
        match self {
            StageCounter::Offered => "offered",
            StageCounter::InProgress => "inProgress",
            StageCounter::Succeeded => "succeeded",
            StageCounter::Failed => "failed",
            StageCounter::TimedOut => "timedOut",
            StageCounter::Retried => "retried",
        }
    }

    /// The counter spelled `text`.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// A stage's counts (summed over the shards).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
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
    /// `n` more of `counter`.
    pub fn add(&mut self, counter: StageCounter, n: i64) {
        let slot = match counter {
            StageCounter::Offered => &mut self.offered,
            StageCounter::InProgress => &mut self.in_progress,
            StageCounter::Succeeded => &mut self.succeeded,
            StageCounter::Failed => &mut self.failed,
            StageCounter::TimedOut => &mut self.timed_out,
            StageCounter::Retried => &mut self.retried,
        };
        *slot += n;
    }

    /// Devices finished (succeeded or failed).
    pub fn finished(&self) -> i64 {
        self.succeeded + self.failed
    }
}

/// A device's offer as a check-in finds it: what [`step`] needs of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfferProgress {
    /// Its phase.
    pub phase: OfferPhase,
    /// The version it must run.
    pub target: String,
    /// What it ran before starting.
    pub from_version: Option<String>,
    /// Check-ins since it first reported the target.
    pub healthy_check_ins: u32,
}

/// What one check-in does to a device's offer: the new phase and fields, and the changes to its
/// stage's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The phase after the check-in.
    pub phase: OfferPhase,
    /// `fromVersion` after it.
    pub from_version: Option<String>,
    /// Healthy check-ins after it.
    pub healthy_check_ins: u32,
    /// The failure, when it failed now.
    pub failure: Option<FailureClass>,
    /// The counters it changes (never zero).
    pub counters: Vec<(StageCounter, i64)>,
}

impl Step {
    /// Whether the check-in changed nothing.
    pub fn unchanged(&self, before: &OfferProgress) -> bool {
        self.phase == before.phase
            && self.from_version == before.from_version
            && self.healthy_check_ins == before.healthy_check_ins
    }
}

/// A check-in of a device with the offer `before`: its firmware `report` (none: it said nothing
/// of its firmware), whether an alarm is raised on it now, and the plan's `healthy_needed`.
///
/// - A failure it reports fails it: of the class it names, else by where it was (`download`
///   before installing, `install` while installing, `unhealthy` once updated).
/// - Reporting the target version: from `offered` (it never started: it runs it already) it
///   succeeds at once; from `downloading` or `installing` (its first check-in after the
///   reboot) it is `updated`, and succeeds there when `healthy_needed` is 0; while `updated`,
///   each check-in (with or without a report) without an alarm counts one more healthy one.
/// - Reporting another version after installing (`installing` or `updated`): a rollback.
///   Before that, the version it reports is remembered as where it came from.
/// - An alarm raised on it while `updated`: `unhealthy`.
///
/// A finished device stays as it is.
pub fn step(
    before: &OfferProgress,
    report: Option<&FirmwareReport>,
    alarmed: bool,
    healthy_needed: u32,
) -> Step {
    let mut next = Step {
        phase: before.phase,
        from_version: before.from_version.clone(),
        healthy_check_ins: before.healthy_check_ins,
        failure: None,
        counters: Vec::new(),
    };
    if before.phase.finished() {
        return next;
    }
    let failed = |class: FailureClass, next: &mut Step| {
        next.phase = OfferPhase::Failed;
        next.failure = Some(class);
    };
    match report {
        Some(FirmwareReport {
            state: Some(ReportedUpdate::Failed(class)),
            ..
        }) => {
            let class = class.unwrap_or(match before.phase {
                OfferPhase::Offered | OfferPhase::Downloading => FailureClass::Download,
                OfferPhase::Installing => FailureClass::Install,
                _ => FailureClass::Unhealthy,
            });
            failed(class, &mut next);
        }
        Some(report) if report.version == before.target => match (before.phase, report.state) {
            (OfferPhase::Offered, None) => next.phase = OfferPhase::Succeeded,
            (OfferPhase::Downloading | OfferPhase::Installing, None) => {
                next.phase = OfferPhase::Updated;
                next.healthy_check_ins = 0;
            }
            (OfferPhase::Updated, _) => next.healthy_check_ins += 1,
            // Working on the version it runs already: it says so, nothing moves.
            _ => {}
        },
        Some(report) => match (before.phase, report.state) {
            (OfferPhase::Installing | OfferPhase::Updated, None) => {
                failed(FailureClass::Rollback, &mut next)
            }
            (OfferPhase::Offered | OfferPhase::Downloading, state) => {
                if next.from_version.is_none() {
                    next.from_version = Some(report.version.clone());
                }
                match state {
                    Some(ReportedUpdate::Downloading) if before.phase == OfferPhase::Offered => {
                        next.phase = OfferPhase::Downloading
                    }
                    Some(ReportedUpdate::Installing) => next.phase = OfferPhase::Installing,
                    _ => {}
                }
            }
            // Still installing, reporting the old version it runs until the reboot.
            _ => {}
        },
        None if before.phase == OfferPhase::Updated => next.healthy_check_ins += 1,
        None => {}
    }
    if next.phase == OfferPhase::Updated && alarmed {
        failed(FailureClass::Unhealthy, &mut next);
    }
    if next.phase == OfferPhase::Updated && next.healthy_check_ins >= healthy_needed {
        next.phase = OfferPhase::Succeeded;
    }
    next.counters = counter_changes(before.phase, next.phase, next.failure);
    next
}

/// The counter changes of a device moving from `before` to `after`.
pub fn counter_changes(
    before: OfferPhase,
    after: OfferPhase,
    failure: Option<FailureClass>,
) -> Vec<(StageCounter, i64)> {
    let mut changes = Vec::new();
    if before == after {
        return changes;
    }
    match (before.in_progress(), after.in_progress()) {
        (false, true) => changes.push((StageCounter::InProgress, 1)),
        (true, false) => changes.push((StageCounter::InProgress, -1)),
        _ => {}
    }
    match after {
        OfferPhase::Succeeded => changes.push((StageCounter::Succeeded, 1)),
        OfferPhase::Failed => {
            changes.push((StageCounter::Failed, 1));
            if failure == Some(FailureClass::Timeout) {
                changes.push((StageCounter::TimedOut, 1));
            }
        }
        _ => {}
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(phase: OfferPhase) -> OfferProgress {
        OfferProgress {
            phase,
            target: "2.0.0".into(),
            from_version: None,
            healthy_check_ins: 0,
        }
    }

    fn report(version: &str, state: Option<ReportedUpdate>) -> FirmwareReport {
        FirmwareReport {
            version: version.into(),
            state,
            reason: None,
        }
    }

    #[test]
    fn a_failure_is_retried_by_its_class_with_a_growing_backoff() {
        let failed_at = Timestamp::parse_field("t", "2026-11-29T10:00:00Z").unwrap();
        let at = |class, attempts| retry_at(class, attempts, failed_at);
        let hours = |h: i64| Some(failed_at.plus_seconds(h * 3600));
        assert_eq!(at(FailureClass::Download, 1), hours(1));
        assert_eq!(at(FailureClass::Download, 2), hours(4));
        assert_eq!(at(FailureClass::Download, 3), hours(16));
        assert_eq!(at(FailureClass::Download, 4), None);
        assert!(at(FailureClass::Install, 1).is_some());
        assert_eq!(at(FailureClass::Install, 2), None);
        assert_eq!(at(FailureClass::Rollback, 1), None);
        assert_eq!(at(FailureClass::Unhealthy, 1), None);
    }

    #[test]
    fn a_device_on_the_version_already_succeeds_at_once() {
        let s = step(
            &at(OfferPhase::Offered),
            Some(&report("2.0.0", None)),
            false,
            3,
        );
        assert_eq!(s.phase, OfferPhase::Succeeded);
        assert_eq!(s.counters, vec![(StageCounter::Succeeded, 1)]);
    }

    #[test]
    fn success_needs_the_new_version_after_installing_and_healthy_check_ins() {
        let mut p = at(OfferPhase::Offered);
        let s = step(
            &p,
            Some(&report("1.0.0", Some(ReportedUpdate::Downloading))),
            false,
            2,
        );
        assert_eq!(s.phase, OfferPhase::Downloading);
        assert_eq!(s.from_version.as_deref(), Some("1.0.0"));
        assert_eq!(s.counters, vec![(StageCounter::InProgress, 1)]);
        p.phase = s.phase;
        p.from_version = s.from_version;
        let s = step(
            &p,
            Some(&report("1.0.0", Some(ReportedUpdate::Installing))),
            false,
            2,
        );
        assert_eq!(s.phase, OfferPhase::Installing);
        assert!(s.counters.is_empty());
        p.phase = s.phase;
        let s = step(&p, Some(&report("2.0.0", None)), false, 2);
        assert_eq!((s.phase, s.healthy_check_ins), (OfferPhase::Updated, 0));
        p.phase = s.phase;
        let s = step(&p, None, false, 2);
        assert_eq!((s.phase, s.healthy_check_ins), (OfferPhase::Updated, 1));
        p.healthy_check_ins = 1;
        let s = step(&p, Some(&report("2.0.0", None)), false, 2);
        assert_eq!(s.phase, OfferPhase::Succeeded);
        assert_eq!(
            s.counters,
            vec![(StageCounter::InProgress, -1), (StageCounter::Succeeded, 1)]
        );
    }

    #[test]
    fn the_old_version_after_installing_is_a_rollback_and_an_alarm_is_unhealthy() {
        let mut p = at(OfferPhase::Installing);
        p.from_version = Some("1.0.0".into());
        let s = step(&p, Some(&report("1.0.0", None)), false, 2);
        assert_eq!(
            (s.phase, s.failure),
            (OfferPhase::Failed, Some(FailureClass::Rollback))
        );
        assert_eq!(
            s.counters,
            vec![(StageCounter::InProgress, -1), (StageCounter::Failed, 1)]
        );
        let s = step(&at(OfferPhase::Updated), None, true, 2);
        assert_eq!(s.failure, Some(FailureClass::Unhealthy));
        // Still installing: the old version until the reboot is no rollback.
        let s = step(
            &p,
            Some(&report("1.0.0", Some(ReportedUpdate::Installing))),
            false,
            2,
        );
        assert_eq!(s.phase, OfferPhase::Installing);
    }

    #[test]
    fn a_reported_failure_takes_its_class_or_the_one_of_where_it_was() {
        let failed = |class| Some(ReportedUpdate::Failed(class));
        let s = step(
            &at(OfferPhase::Downloading),
            Some(&report("1.0.0", failed(None))),
            false,
            2,
        );
        assert_eq!(s.failure, Some(FailureClass::Download));
        let s = step(
            &at(OfferPhase::Installing),
            Some(&report("1.0.0", failed(None))),
            false,
            2,
        );
        assert_eq!(s.failure, Some(FailureClass::Install));
        let s = step(
            &at(OfferPhase::Downloading),
            Some(&report("1.0.0", failed(Some(FailureClass::Verify)))),
            false,
            2,
        );
        assert_eq!(s.failure, Some(FailureClass::Verify));
        // Finished devices stay finished.
        let s = step(
            &at(OfferPhase::Succeeded),
            Some(&report("1.0.0", None)),
            true,
            2,
        );
        assert_eq!(s.phase, OfferPhase::Succeeded);
        assert!(s.counters.is_empty());
    }

    #[test]
    fn a_report_is_validated_naming_the_field() {
        let submitted = |state: Option<&str>, class: Option<&str>| SubmittedFirmwareReport {
            version: "1.0.0".into(),
            state: state.map(str::to_string),
            reason: None,
            class: class.map(str::to_string),
        };
        assert_eq!(
            FirmwareReport::parse(submitted(Some("rebooting"), None))
                .unwrap_err()
                .field,
            "firmware.state"
        );
        assert_eq!(
            FirmwareReport::parse(submitted(Some("installing"), Some("verify")))
                .unwrap_err()
                .field,
            "firmware.class"
        );
        let mut bad_version = submitted(None, None);
        bad_version.version = "v1".into();
        assert_eq!(
            FirmwareReport::parse(bad_version).unwrap_err().field,
            "firmware.version"
        );
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
    pub opened_at: Vec<crate::model::timestamp::Timestamp>,
    /// When the last open stage first met the success criterion (its soak runs from then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_at: Option<crate::model::timestamp::Timestamp>,
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
