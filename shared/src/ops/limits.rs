//! In-memory request limits of one execution environment: a token bucket per key (a device,
//! a user), bounded in memory. No DynamoDB request: a limit that cost a read or a write per
//! request would bill the flood it is meant to stop.
//!
//! What this does and does not do (docs/operations.md, "Throttling"): each warm Lambda
//! container keeps its own buckets, and API Gateway spreads requests over as many containers
//! as are busy, so one key can get up to `containers x rate` through. Reserved concurrency
//! (`IngestReservedConcurrency`) bounds the containers; API Gateway's route throttling
//! (`ApiThrottlingRateLimit`) bounds the total before any function runs.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::error::FleetError;

/// A rate: `per_second` tokens refill each second, up to `burst`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Steady requests per second allowed per key; 0 switches the limit off.
    pub per_second: f64,
    /// Requests a key may send at once after being idle.
    pub burst: f64,
}

impl Rate {
    /// No limit.
    pub const UNLIMITED: Rate = Rate {
        per_second: 0.0,
        burst: 0.0,
    };

    /// Whether this rate limits anything.
    pub fn is_limited(&self) -> bool {
        self.per_second > 0.0
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Token buckets by key, at most `capacity` of them.
#[derive(Debug)]
pub struct KeyedLimiter<K> {
    rate: Rate,
    capacity: usize,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: Eq + Hash + Clone> KeyedLimiter<K> {
    /// Buckets refilling at `rate`, at most `capacity` keys remembered.
    pub fn new(rate: Rate, capacity: usize) -> Self {
        Self {
            rate,
            capacity: capacity.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key` at `now`: `Ok` when there was one, else how long until the
    /// next one.
    pub fn take(&self, key: &K, now: Instant) -> Result<(), Duration> {
        if !self.rate.is_limited() {
            return Ok(());
        }
        let mut buckets = self.buckets.lock().expect("limiter lock");
        if !buckets.contains_key(key) && buckets.len() >= self.capacity {
            self.evict_idle(&mut buckets, now);
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            tokens: self.rate.burst.max(1.0),
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens =
            (bucket.tokens + elapsed * self.rate.per_second).min(self.rate.burst.max(1.0));
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let missing = 1.0 - bucket.tokens;
            Err(Duration::from_secs_f64(missing / self.rate.per_second))
        }
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.buckets.lock().expect("limiter lock").len()
    }

    /// Whether no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Full buckets carry no state a fresh one would not have: drop them first. If every key
    /// is busy, drop all (a limit briefly forgotten beats unbounded memory).
    fn evict_idle(&self, buckets: &mut HashMap<K, Bucket>, now: Instant) {
        let burst = self.rate.burst.max(1.0);
        let per_second = self.rate.per_second;
        buckets.retain(|_, b| {
            let elapsed = now.saturating_duration_since(b.updated).as_secs_f64();
            b.tokens + elapsed * per_second < burst
        });
        if buckets.len() >= self.capacity {
            buckets.clear();
        }
    }
}

/// `REGISTRATIONS_PER_USER_PER_HOUR` (unset or 0: no limit; the template sets it): device
/// registrations one user may make through one execution environment per hour, all of them
/// at once at most. Read once per process.
pub fn registration_rate() -> Rate {
    let per_hour = std::env::var("REGISTRATIONS_PER_USER_PER_HOUR")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0);
    match per_hour {
        Some(n) => Rate {
            per_second: n / 3600.0,
            burst: n,
        },
        None => Rate::UNLIMITED,
    }
}

/// Takes one registration from `user`'s allowance in this execution environment, or refuses
/// with a 429 ([`registration_rate`]). No DynamoDB request.
pub fn take_registration(user: &crate::model::ids::UserId) -> Result<(), FleetError> {
    static REGISTRATIONS: std::sync::OnceLock<KeyedLimiter<crate::model::ids::UserId>> =
        std::sync::OnceLock::new();
    REGISTRATIONS
        .get_or_init(|| KeyedLimiter::new(registration_rate(), 10_000))
        .take(user, Instant::now())
        .map_err(rate_limited)
}

/// The error for a refused request: 429 with `Retry-After` in whole seconds (at least 1).
pub fn rate_limited(wait: Duration) -> FleetError {
    FleetError::RateLimited {
        retry_after_seconds: wait.as_secs_f64().ceil().max(1.0) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_its_burst_then_the_steady_rate() {
        let limiter = KeyedLimiter::new(
            Rate {
                per_second: 2.0,
                burst: 3.0,
            },
            10,
        );
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take(&"a", t0).is_ok());
        }
        let wait = limiter.take(&"a", t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        // Another key has its own bucket.
        assert!(limiter.take(&"b", t0).is_ok());
        // Half a second later one token is back, and only one.
        let t1 = t0 + Duration::from_millis(500);
        assert!(limiter.take(&"a", t1).is_ok());
        assert!(limiter.take(&"a", t1).is_err());
        assert_eq!(
            rate_limited(Duration::from_millis(200)).to_string(),
            FleetError::RateLimited {
                retry_after_seconds: 1
            }
            .to_string()
        );
    }

    #[test]
    fn memory_stays_bounded_and_busy_keys_are_kept_before_idle_ones() {
        let limiter = KeyedLimiter::new(
            Rate {
                per_second: 1.0,
                burst: 2.0,
            },
            3,
        );
        let t0 = Instant::now();
        limiter.take(&0, t0).unwrap();
        limiter.take(&0, t0).unwrap();
        limiter.take(&1, t0).unwrap();
        limiter.take(&2, t0).unwrap();
        // 1.5 s on, keys 1 and 2 are full again (idle) and key 0 is still refilling: a new key
        // evicts the idle ones and keeps key 0's state (1.5 tokens, not a fresh burst of 2).
        let t1 = t0 + Duration::from_millis(1500);
        limiter.take(&3, t1).unwrap();
        assert_eq!(limiter.len(), 2);
        assert!(limiter.take(&0, t1).is_ok());
        assert!(limiter.take(&0, t1).is_err());
        for key in 10..1000 {
            let _ = limiter.take(&key, t1);
        }
        assert!(limiter.len() <= 3);
    }

    #[test]
    fn an_unlimited_rate_remembers_nothing() {
        let limiter = KeyedLimiter::new(Rate::UNLIMITED, 3);
        for _ in 0..100 {
            assert!(limiter.take(&"a", Instant::now()).is_ok());
        }
        assert!(limiter.is_empty());
    }
}
