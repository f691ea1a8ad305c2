//! How a device moves through a staged firmware rollout (issue 40 items 3 and 5): its phases,
//! its failure classes, the report it sends, its part as its live state keeps it
//! ([`FirmwareProgress`]) and the one pure step that turns a check-in into the next phase. The
//! per-stage counts the worker's walk tallies from those parts, and the gate they open, are in
//! [`crate::model::rollout_stages`]. No I/O.

use serde::{Deserialize, Serialize};

use crate::model::error::ValidationError;
use crate::model::firmware::FirmwareId;
use crate::model::ids::RolloutId;
use crate::model::timestamp::Timestamp;
use crate::model::twin::RolloutStatus;

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

/// A device's part in a staged firmware rollout, kept on its live state (attribute `firmware`,
/// [`crate::model::entities::device_state::DeviceStateItem::firmware`]): written by the
/// rollout worker when it offers the device the image (or times it out, or offers it again),
/// moved on by the device's check-ins inside ingestion's own update of the live state, which
/// it writes anyway. What the device needs to download (the digest, size, signature and
/// object) is on the rollout, which a check-in reads for its status. It stays when the
/// device's part is over: it is the device's firmware record (`GET
/// /me/devices/{deviceId}/firmware`), until a later rollout replaces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwareProgress {
    /// The rollout that offered it.
    pub rollout_id: RolloutId,
    /// The package.
    pub firmware_id: FirmwareId,
    /// The package's version: the one the device must report running.
    pub version: String,
    /// The device's stage (index into the plan's stages).
    pub stage: u32,
    /// How far the device got.
    pub phase: OfferPhase,
    /// The version the device said it ran before it started on the offer (a rollback is
    /// reporting it again after installing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// Check-ins since it first reported the new version (`phase` `updated`).
    #[serde(default)]
    pub healthy_check_ins: u32,
    /// Why it failed (`phase` `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    /// The device's own reason, bounded ([`MAX_REASON_LEN`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Offers of this rollout made to the device: 1, and one more for each retry after a
    /// failure ([`FailureClass::retries`]).
    pub attempts: u32,
    /// When the worker offered it (the last time, after a retry).
    pub offered_at: Timestamp,
    /// The device's last check-in that moved it (the offer's time before any).
    pub updated_at: Timestamp,
    /// The rollout ended (cancelled, done or deleted) before the device finished: nothing more
    /// happens to it, and its check-ins read nothing for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended: bool,
}

impl FirmwareProgress {
    /// A first offer (or a retry's, `attempts` > 1) of `version` of `firmware_id` by `rollout`
    /// to a device of `stage`, made at `now`.
    pub fn offered(
        rollout: RolloutId,
        (firmware_id, version): (FirmwareId, String),
        stage: u32,
        attempts: u32,
        now: Timestamp,
    ) -> Self {
        Self {
            rollout_id: rollout,
            firmware_id,
            version,
            stage,
            phase: OfferPhase::Offered,
            from_version: None,
            healthy_check_ins: 0,
            failure: None,
            reason: None,
            attempts,
            offered_at: now,
            updated_at: now,
            ended: false,
        }
    }

    /// A check-in must look at it: its rollout may still move it.
    pub fn open(&self) -> bool {
        !self.phase.finished() && !self.ended
    }

    /// What [`step`] needs of it.
    pub fn as_offer(&self) -> OfferProgress {
        OfferProgress {
            phase: self.phase,
            target: self.version.clone(),
            from_version: self.from_version.clone(),
            healthy_check_ins: self.healthy_check_ins,
        }
    }

    /// It after `next` at `now`, with the failure's `reason`.
    pub fn moved(&self, next: &Step, reason: Option<String>, now: Timestamp) -> Self {
        Self {
            phase: next.phase,
            from_version: next.from_version.clone(),
            healthy_check_ins: next.healthy_check_ins,
            failure: next.failure.or(self.failure),
            reason: reason.or_else(|| self.reason.clone()),
            updated_at: now,
            ..self.clone()
        }
    }

    /// What a check-in does to it: `None` when nothing changes (it is not open, or the check-in
    /// moves nothing). `running` is its rollout's status and plan as the check-in read them
    /// (`None`: the rollout is gone, or is not a firmware rollout); a rollout cancelled, done or
    /// gone ends it where it is. Otherwise the `report` moves it ([`step`], with `alarmed`:
    /// an alarm is raised on the device now), the failure's reason taken from the report, or
    /// said for a rollback or an alarm.
    pub fn checked_in(
        &self,
        rollout: Option<(RolloutStatus, u32)>,
        report: Option<&FirmwareReport>,
        alarmed: bool,
        now: Timestamp,
    ) -> Option<Self> {
        if !self.open() {
            return None;
        }
        let healthy_needed = match rollout {
            Some((RolloutStatus::Running | RolloutStatus::Paused, healthy_needed)) => {
                healthy_needed
            }
            _ => return Some(self.ended()),
        };
        let before = self.as_offer();
        let next = step(&before, report, alarmed, healthy_needed);
        if next.unchanged(&before) {
            return None;
        }
        let reason = match next.failure {
            Some(FailureClass::Unhealthy) if report.and_then(|r| r.reason.as_ref()).is_none() => {
                Some("an alarm was raised on the device after it updated".to_string())
            }
            Some(FailureClass::Rollback) => Some(format!(
                "the device reported {} again after installing {}",
                report
                    .map(|r| r.version.as_str())
                    .unwrap_or("its old version"),
                self.version
            )),
            Some(_) => report.and_then(|r| r.reason.clone()),
            None => None,
        };
        Some(self.moved(&next, reason, now))
    }

    /// The device still needs the image and its rollout is `status`: the offer rides in the
    /// answer (a paused rollout offers nothing).
    pub fn wants_offer(&self, status: RolloutStatus) -> bool {
        status == RolloutStatus::Running && !self.ended && self.phase.wants_offer()
    }

    /// It ended with its rollout, where it was.
    pub fn ended(&self) -> Self {
        Self {
            ended: true,
            ..self.clone()
        }
    }

    /// It failed as `timeout` at `now`.
    pub fn timed_out(&self, now: Timestamp) -> Self {
        Self {
            phase: OfferPhase::Failed,
            failure: Some(FailureClass::Timeout),
            reason: Some(
                "the device did not check in within its expected interval and grace".to_string(),
            ),
            updated_at: now,
            ..self.clone()
        }
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

/// What one check-in does to a device's offer: the new phase and fields.
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
    next
}

#[cfg(test)]
pub(crate) mod tests {
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
        p.phase = s.phase;
        p.from_version = s.from_version;
        let s = step(
            &p,
            Some(&report("1.0.0", Some(ReportedUpdate::Installing))),
            false,
            2,
        );
        assert_eq!(s.phase, OfferPhase::Installing);
        p.phase = s.phase;
        let s = step(&p, Some(&report("2.0.0", None)), false, 2);
        assert_eq!((s.phase, s.healthy_check_ins), (OfferPhase::Updated, 0));
        p.phase = s.phase;
        let s = step(&p, None, false, 2);
        assert_eq!((s.phase, s.healthy_check_ins), (OfferPhase::Updated, 1));
        p.healthy_check_ins = 1;
        let s = step(&p, Some(&report("2.0.0", None)), false, 2);
        assert_eq!(s.phase, OfferPhase::Succeeded);
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
    }

    /// A device's part in a rollout, in `phase` (stage 1, attempt 1).
    pub(crate) fn part(phase: OfferPhase) -> FirmwareProgress {
        let at = Timestamp::parse_field("t", "2026-11-29T10:00:00Z").unwrap();
        FirmwareProgress {
            phase,
            ..FirmwareProgress::offered(
                RolloutId::parse("r-000001700000000-0123456789abcdef").unwrap(),
                (
                    FirmwareId::parse("f-000001700000000-0123456789abcdef").unwrap(),
                    "2.0.0".into(),
                ),
                1,
                1,
                at,
            )
        }
    }

    #[test]
    fn a_check_in_moves_an_open_part_and_an_ended_rollout_ends_it_where_it_is() {
        let now = Timestamp::parse_field("t", "2026-11-29T11:00:00Z").unwrap();
        let running = Some((RolloutStatus::Running, 2));
        let downloading = Some(report("1.0.0", Some(ReportedUpdate::Downloading)));
        let moved = part(OfferPhase::Offered)
            .checked_in(running, downloading.as_ref(), false, now)
            .unwrap();
        assert_eq!(moved.phase, OfferPhase::Downloading);
        assert_eq!(moved.from_version.as_deref(), Some("1.0.0"));
        assert_eq!(moved.updated_at, now);
        // Nothing moves: nothing to write.
        assert_eq!(
            moved.checked_in(running, downloading.as_ref(), false, now),
            None
        );
        // A paused rollout's part still moves; a cancelled, done or gone one's ends.
        let paused = Some((RolloutStatus::Paused, 2));
        let installing = report("1.0.0", Some(ReportedUpdate::Installing));
        assert_eq!(
            moved
                .checked_in(paused, Some(&installing), false, now)
                .unwrap()
                .phase,
            OfferPhase::Installing
        );
        for over in [
            Some((RolloutStatus::Cancelled, 2)),
            Some((RolloutStatus::Done, 2)),
            None,
        ] {
            let ended = moved
                .checked_in(over, Some(&installing), false, now)
                .unwrap();
            assert!(ended.ended && !ended.open());
            assert_eq!(ended.phase, OfferPhase::Downloading, "where it was");
            assert_eq!(
                ended.checked_in(running, Some(&installing), false, now),
                None
            );
        }
        // A rollback says so; the offer rides only while running and needed.
        let rolled_back = part(OfferPhase::Installing)
            .checked_in(running, Some(&report("1.0.0", None)), false, now)
            .unwrap();
        assert_eq!(rolled_back.failure, Some(FailureClass::Rollback));
        assert!(rolled_back.reason.unwrap().contains("reported 1.0.0 again"));
        assert!(moved.wants_offer(RolloutStatus::Running));
        assert!(!moved.wants_offer(RolloutStatus::Paused));
        assert!(!part(OfferPhase::Updated).wants_offer(RolloutStatus::Running));
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
