//! Bounded exponential backoff with full jitter, for retries the SDK does not do itself
//! (cancelled transactions, unprocessed batch items).

use std::time::Duration;

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
}
