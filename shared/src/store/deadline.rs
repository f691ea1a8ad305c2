//! When an invocation must stop: one rule for every function.
//!
//! Lambda gives each invocation a deadline (the Runtime API's `Lambda-Runtime-Deadline-Ms`,
//! `lambda_runtime::Context::deadline`). Emulators do not always send a real one: cargo-lambda
//! 1.9.2's `cargo lambda watch` sends a fixed 600000 ms, a moment in 1970. So a deadline that
//! is already past, or further away than Lambda's longest timeout (15 minutes), is not taken
//! at its word: the invocation gets the function's configured timeout (its `Timeout` in
//! `template.yaml`) from now instead. A real deadline is always used as given.

use std::time::{Duration, Instant, SystemTime};

/// Lambda's longest timeout: no real deadline lies further ahead.
pub const LAMBDA_MAX_TIMEOUT: Duration = Duration::from_secs(900);

/// The moment an invocation must have answered by, on the monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline Lambda gave (`deadline`, wall clock), or now plus `timeout` (the
    /// function's configured timeout) when the given one is past or absurd (see the module
    /// docs).
    pub fn from_lambda(deadline: SystemTime, timeout: Duration) -> Self {
        Self::from_lambda_at(deadline, timeout, SystemTime::now(), Instant::now())
    }

    /// [`Deadline::from_lambda`] as seen at `now` (wall clock) = `at` (monotonic clock).
    pub fn from_lambda_at(
        deadline: SystemTime,
        timeout: Duration,
        now: SystemTime,
        at: Instant,
    ) -> Self {
        let left = deadline
            .duration_since(now)
            .ok()
            .filter(|left| !left.is_zero() && *left <= LAMBDA_MAX_TIMEOUT)
            .unwrap_or(timeout);
        Self(at + left)
    }

    /// `timeout` from now: for callers outside Lambda (the dev server, tests).
    pub fn after(timeout: Duration) -> Self {
        Self(Instant::now() + timeout)
    }

    /// The deadline less `margin` (kept in reserve to checkpoint and answer), never earlier
    /// than now.
    pub fn less(self, margin: Duration) -> Instant {
        self.0
            .checked_sub(margin)
            .unwrap_or(self.0)
            .max(Instant::now())
    }

    /// The deadline itself.
    pub fn instant(self) -> Instant {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);

    fn left(deadline: SystemTime, now: SystemTime) -> Duration {
        let at = Instant::now();
        Deadline::from_lambda_at(deadline, TIMEOUT, now, at).instant() - at
    }

    #[test]
    fn a_real_deadline_is_used_as_given() {
        let now = SystemTime::now();
        assert_eq!(
            left(now + Duration::from_secs(3), now),
            Duration::from_secs(3)
        );
        assert_eq!(left(now + LAMBDA_MAX_TIMEOUT, now), LAMBDA_MAX_TIMEOUT);
    }

    #[test]
    fn a_past_or_absurd_deadline_falls_back_to_the_configured_timeout() {
        let now = SystemTime::now();
        // cargo-lambda 1.9.2's emulator: Lambda-Runtime-Deadline-Ms: 600000 (1970).
        let emulator = SystemTime::UNIX_EPOCH + Duration::from_millis(600_000);
        assert_eq!(left(emulator, now), TIMEOUT);
        assert_eq!(left(now, now), TIMEOUT);
        assert_eq!(left(now - Duration::from_secs(1), now), TIMEOUT);
        assert_eq!(left(now + Duration::from_secs(901), now), TIMEOUT);
    }
}
