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
use crate::model::ids::UserId;
use crate::model::settings::number_setting;

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

/// device-updates' registration limit: `REGISTRATIONS_PER_USER_PER_HOUR` (unset or 0: no
/// limit; the template sets it), the device registrations one user may make through one
/// execution environment per hour, all of them at once at most. Read once at start-up like
/// every setting: a value that is not a whole number in range stops the function with an
/// error naming it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegistrationLimit {
    /// Registrations per user per hour (0: no limit).
    pub per_hour: u32,
}

impl RegistrationLimit {
    /// The limit from the process environment.
    pub fn from_env() -> Result<Self, FleetError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The limit read through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, FleetError> {
        Ok(Self {
            per_hour: number_setting(&lookup, "REGISTRATIONS_PER_USER_PER_HOUR", 0, 0..=1_000_000)?,
        })
    }

    /// The per-user buckets of one execution environment (unlimited at 0: it remembers
    /// nothing).
    pub fn limiter(&self) -> KeyedLimiter<UserId> {
        let rate = match self.per_hour {
            0 => Rate::UNLIMITED,
            n => Rate {
                per_second: f64::from(n) / 3600.0,
                burst: f64::from(n),
            },
        };
        KeyedLimiter::new(rate, 10_000)
    }
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
    fn the_registration_limit_is_read_in_range_or_refused_by_name() {
        let read = |v: &str| {
            let v = v.to_string();
            RegistrationLimit::from_lookup(move |name| {
                (name == "REGISTRATIONS_PER_USER_PER_HOUR").then(|| v.clone())
            })
        };
        assert_eq!(read("2").unwrap().per_hour, 2);
        assert_eq!(
            read("").unwrap(),
            RegistrationLimit::default(),
            "blank: unset"
        );
        for bad in ["-1", "many", "2.5", "1000001"] {
            let err = read(bad).unwrap_err();
            assert!(
                err.to_string().contains("REGISTRATIONS_PER_USER_PER_HOUR"),
                "{bad}: {err}"
            );
        }
        let two = read("2").unwrap().limiter();
        let user = UserId::parse("u").unwrap();
        let now = Instant::now();
        assert!(two.take(&user, now).is_ok() && two.take(&user, now).is_ok());
        assert!(
            two.take(&user, now).is_err(),
            "the third within the hour waits"
        );
        assert!(RegistrationLimit::default().limiter().is_empty());
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
