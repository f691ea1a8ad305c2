//! The one retry policy for retries the SDK does not do itself (cancelled transactions,
//! unprocessed batch items, conditional-update conflicts): exponential backoff with full
//! jitter, bounded by a deadline and/or a number of attempts.

use std::time::{Duration, Instant};

/// First backoff ceiling.
pub const BASE_DELAY: Duration = Duration::from_millis(25);
/// Largest backoff ceiling.
pub const MAX_DELAY: Duration = Duration::from_secs(1);

/// The backoff ceiling before attempt `attempt + 1` (attempt counts from 1).
pub fn backoff_ceiling(attempt: u32) -> Duration {
    let factor = 1u32
        .checked_shl(attempt.saturating_sub(1))
        .unwrap_or(u32::MAX);
    BASE_DELAY.saturating_mul(factor).min(MAX_DELAY)
}

/// Sleeps a uniformly random time in `0..=backoff_ceiling(attempt)` ("full jitter"), so
/// clients that failed together do not retry together.
pub async fn backoff(attempt: u32) {
    let ceiling = backoff_ceiling(attempt).as_micros() as u64;
    let mut bytes = [0u8; 8];
    let jitter = match getrandom::fill(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes) % (ceiling + 1),
        Err(_) => ceiling / 2,
    };
    tokio::time::sleep(Duration::from_micros(jitter)).await;
}

/// How long a caller may keep retrying: the attempt counter and its bounds. Call
/// [`Retry::next_attempt`] before every attempt, including the first.
#[derive(Clone, Debug)]
pub struct Retry {
    attempt: u32,
    max_attempts: u32,
    deadline: Option<Instant>,
}

impl Retry {
    /// Retries until `deadline` (the first attempt always runs).
    pub fn until(deadline: Instant) -> Self {
        Self {
            attempt: 0,
            max_attempts: u32::MAX,
            deadline: Some(deadline),
        }
    }

    /// At most `max` attempts, without a deadline (for callers that are not handed one).
    pub fn attempts(max: u32) -> Self {
        Self {
            attempt: 0,
            max_attempts: max,
            deadline: None,
        }
    }

    /// The same policy, also stopping after `max` attempts.
    pub fn at_most(self, max: u32) -> Self {
        Self {
            max_attempts: max,
            ..self
        }
    }

    /// Whether another attempt may run. From the second attempt on this first checks the
    /// bounds, then sleeps the full-jitter backoff; the first attempt runs at once.
    pub async fn next_attempt(&mut self) -> bool {
        self.attempt += 1;
        if self.attempt > 1 {
            let out_of_time = self.deadline.is_some_and(|d| Instant::now() >= d);
            if self.attempt > self.max_attempts || out_of_time {
                return false;
            }
            backoff(self.attempt - 1).await;
        }
        true
    }

    /// The attempt in progress (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_then_caps() {
        assert_eq!(backoff_ceiling(1), Duration::from_millis(25));
        assert_eq!(backoff_ceiling(2), Duration::from_millis(50));
        assert_eq!(backoff_ceiling(3), Duration::from_millis(100));
        assert_eq!(backoff_ceiling(10), MAX_DELAY);
        assert_eq!(backoff_ceiling(100), MAX_DELAY);
    }

    #[tokio::test]
    async fn stops_at_the_attempt_bound_or_the_deadline() {
        let mut retry = Retry::attempts(2);
        assert!(retry.next_attempt().await);
        assert!(retry.next_attempt().await);
        assert!(!retry.next_attempt().await);

        // A deadline already passed still allows the first attempt, never a second.
        let mut retry = Retry::until(Instant::now());
        assert!(retry.next_attempt().await);
        assert!(!retry.next_attempt().await);
        assert_eq!(retry.attempt(), 2);
    }
}
