//! AP-14: device-authenticated, idempotent batch ingestion.
//!
//! A batch costs at most ceil(n/25) + 3 requests: the registration GetItem and one
//! BatchGetItem of the live state and the owner's alarm rules (each skipped while the warm
//! Lambda's cache holds it), one BatchWriteItem per 25 events (sent concurrently), and one
//! conditional UpdateItem of the device's live state, or, when the batch raises or clears an
//! alarm, one TransactWriteItems of that update and the alarm writes (none for a replay; a
//! second one only when another batch for the same device got in between). Events are keyed
//! by their id and time, so a replayed batch overwrites identical items and stores nothing
//! twice, and alarm rules see only readings newer than the state's, so it raises nothing.
//!
//! Write units (DynamoDB's rules): an event of a type operators do not search is one item of
//! under 1 KB and nothing else, one unit; a searchable type adds its GSI1 entry. The live
//! state adds one unit per batch for a typical device (two more when its `SEEN#` bucket
//! moves). So a 100-event batch of telemetry costs about 1.01 units per event and a
//! single-event request about 2.
//!
//! The device twin adds nothing when nothing is pending: the live-state update returns the
//! item as written (`ReturnValues=ALL_NEW`, which costs no capacity), whose twin versions say
//! whether a desired state or a command waits ([`IngestOutcome::twin`]); only then does
//! `ops::twin::device` read it.

mod alarms;
mod state;
mod store;
mod validate;

pub use state::{check_type_cap, merged, without, MAX_STATE_BYTES, MAX_STATE_TYPES};
pub use validate::{validate_batch, NewEvent, SubmittedEvent};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::ItemKey;
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::ids::{DeviceId, EventId};
use crate::model::pattern_id::PatternId;
use crate::model::settings::number;
use crate::model::timestamp::Timestamp;
use crate::model::twin::TwinVersions;
use crate::ops::limits::{KeyedLimiter, Rate};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::table::{sdk_error, FleetTable};

/// Most events in one request.
pub const MAX_EVENTS_PER_BATCH: usize = 100;
/// Events per BatchWriteItem (DynamoDB's limit).
pub use crate::store::dynamo::BATCH_WRITE_SIZE;
/// Longest text value of an event, in characters (it is also kept on the device's live
/// state, whose size it bounds).
pub const MAX_TEXT_VALUE: usize = 64;
/// Events kept in a device's `recent` list (the dashboard shows the last 10).
pub const RECENT_EVENTS: usize = 10;
pub use crate::model::offline::SEEN_GRANULARITY_SECONDS;

/// Ingestion settings, from the environment.
#[derive(Clone, Debug, PartialEq)]
pub struct IngestConfig {
    /// `REGISTRATION_CACHE_SECONDS` (default 30): how long a warm Lambda trusts a registration
    /// it read. A deleted or re-registered device stops working within this window.
    pub registration_cache: Duration,
    /// `MAX_CLOCK_SKEW_SECONDS` (default 300): how far in the future an event may be.
    pub max_clock_skew: Duration,
    /// `INGEST_RETRY_MS` (default 5000): how long to keep retrying unprocessed or throttled
    /// writes, further bounded by the Lambda's remaining time.
    pub retry_window: Duration,
    /// `NEGATIVE_CACHE_SECONDS` (default 10): how long an unknown device, or a device whose
    /// registration a read showed not to match a presented token, is answered 401 without
    /// another read. A device registered (or re-registered) within this window after such an
    /// attempt is refused until it passes.
    pub negative_cache: Duration,
    /// `RULES_CACHE_SECONDS` (default 60): how long a warm Lambda uses an owner's alarm rules
    /// it read. A created, changed or deleted rule applies to every batch within this time.
    pub rules_cache: Duration,
    /// `INGEST_DEVICE_RATE_PER_SECOND` and `INGEST_DEVICE_BURST` (unset: no limit; the
    /// template sets both): batches one device may send to one execution environment, answered
    /// 429 with `Retry-After` above it. See [`crate::ops::limits`] for what a per-container limit
    /// does when API Gateway spreads requests.
    pub device_rate: Rate,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            registration_cache: Duration::from_secs(30),
            max_clock_skew: Duration::from_secs(300),
            retry_window: Duration::from_secs(5),
            negative_cache: Duration::from_secs(10),
            rules_cache: Duration::from_secs(60),
            device_rate: Rate::UNLIMITED,
        }
    }
}

impl IngestConfig {
    /// Reads the settings from the process environment (defaults for what is unset).
    pub fn from_env() -> Result<Self, FleetError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup` (the environment, or a map in tests), each with
    /// [`number`] as every function setting is: the default when unset or blank, an error
    /// naming the variable when it is not a number in range.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, FleetError> {
        let d = Self::default();
        let seconds = |name: &str, default: Duration| {
            number(&lookup, name, default.as_secs(), 0..=86_400).map(Duration::from_secs)
        };
        let retry_ms = d.retry_window.as_millis() as u64;
        Ok(Self {
            registration_cache: seconds("REGISTRATION_CACHE_SECONDS", d.registration_cache)?,
            max_clock_skew: seconds("MAX_CLOCK_SKEW_SECONDS", d.max_clock_skew)?,
            retry_window: number(&lookup, "INGEST_RETRY_MS", retry_ms, 0..=900_000)
                .map(Duration::from_millis)?,
            negative_cache: seconds("NEGATIVE_CACHE_SECONDS", d.negative_cache)?,
            rules_cache: seconds("RULES_CACHE_SECONDS", d.rules_cache)?,
            device_rate: Rate {
                per_second: number(
                    &lookup,
                    "INGEST_DEVICE_RATE_PER_SECOND",
                    d.device_rate.per_second,
                    0.0..=1e6,
                )?,
                burst: number(
                    &lookup,
                    "INGEST_DEVICE_BURST",
                    d.device_rate.burst,
                    0.0..=1e6,
                )?,
            },
        })
    }
}

/// The result of storing a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    /// Stored (and reflected in the live state).
    pub accepted: Vec<EventId>,
    /// Not acknowledged: the device should resend these.
    pub failed: Vec<EventId>,
    /// The twin's versions as the live-state update returned them (`None` when no update was
    /// sent, a replay: the caller reads them if it needs them). What tells ingestion whether
    /// anything is pending for the device without a read ([`crate::model::twin`]).
    pub twin: Option<TwinVersions>,
}

#[derive(Clone)]
struct CachedRegistration {
    /// `None`: the read found no such device.
    registration: Option<RegistrationItem>,
    fetched: Instant,
    /// When a read last showed a presented token not to be this registration's.
    refused: Option<Instant>,
}

/// Ingestion with the warm-Lambda caches: registrations (authentication) and live states (so
/// a device whose batches reach the same container needs no read before its update).
pub struct Ingestor {
    table: FleetTable,
    config: IngestConfig,
    registrations: Mutex<HashMap<DeviceId, CachedRegistration>>,
    states: Mutex<HashMap<DeviceId, DeviceStateItem>>,
    /// Owners' alarm rules.
    rules: Mutex<HashMap<crate::model::ids::UserId, alarms::CachedRules>>,
    /// Per-device batch rate (authenticated devices only, so guessed ids take no bucket).
    device_limiter: KeyedLimiter<DeviceId>,
}

/// Bound on cached entries, so a Lambda serving many devices keeps a small footprint.
const CACHE_CAPACITY: usize = 10_000;

impl Ingestor {
    /// An ingestor for `table`.
    pub fn new(table: FleetTable, config: IngestConfig) -> Self {
        Self {
            table,
            registrations: Mutex::new(HashMap::new()),
            states: Mutex::new(HashMap::new()),
            rules: Mutex::new(HashMap::new()),
            device_limiter: KeyedLimiter::new(config.device_rate, CACHE_CAPACITY),
            config,
        }
    }

    /// The table.
    pub fn table(&self) -> &FleetTable {
        &self.table
    }

    /// The settings.
    pub fn config(&self) -> &IngestConfig {
        &self.config
    }

    /// The registration of `device` if `token` is its token; otherwise
    /// [`FleetError::Unauthorized`], the same for an unknown device and a wrong token. A device
    /// over its batch rate is [`FleetError::RateLimited`].
    ///
    /// A registration read stays cached for `registration_cache`; an unknown device, and a
    /// registration a read showed not to match a presented token, are answered without a read
    /// for `negative_cache`, so a flood of guesses costs two reads (eventually consistent,
    /// then consistent) per device and window, not per attempt. The token is always compared
    /// in constant time with the stored hash.
    pub async fn authenticate(
        &self,
        device: &DeviceId,
        token: &str,
    ) -> Result<RegistrationItem, FleetError> {
        let now = Instant::now();
        if let Some(cached) = self.cached_registration(device, now) {
            match &cached.registration {
                Some(r) if r.accepts(token, Timestamp::now()) => {
                    return self.admit(device, r, now);
                }
                None => return Err(FleetError::Unauthorized),
                Some(_)
                    if cached
                        .refused
                        .is_some_and(|t| now - t < self.config.negative_cache) =>
                {
                    return Err(FleetError::Unauthorized);
                }
                // The token may be new (re-registration): read again.
                Some(_) => {}
            }
        }
        let accepted = |r: &Option<RegistrationItem>| {
            r.as_ref()
                .is_some_and(|r| r.accepts(token, Timestamp::now()))
        };
        // An eventually consistent read (half the units) is right for a device registered more
        // than a moment ago, which is nearly every read. A miss or a mismatch may be a
        // registration or rotation of the last second: read consistently before refusing.
        let mut registration = self.read_registration(device, false).await?;
        if !accepted(&registration) {
            registration = self.read_registration(device, true).await?;
        }
        let matched = accepted(&registration);
        self.remember(
            device,
            CachedRegistration {
                registration: registration.clone(),
                fetched: now,
                refused: (!matched).then_some(now),
            },
        );
        match registration {
            Some(r) if matched => self.admit(device, &r, now),
            _ => {
                self.states.lock().expect("cache lock").remove(device);
                Err(FleetError::Unauthorized)
            }
        }
    }

    /// The cached read of `device` while it is fresh: a registration for `registration_cache`,
    /// an absent device for `negative_cache`.
    fn cached_registration(&self, device: &DeviceId, now: Instant) -> Option<CachedRegistration> {
        let cache = self.registrations.lock().expect("cache lock");
        let cached = cache.get(device)?;
        let ttl = match cached.registration {
            Some(_) => self.config.registration_cache,
            None => self.config.negative_cache,
        };
        (now - cached.fetched < ttl).then(|| cached.clone())
    }

    fn remember(&self, device: &DeviceId, entry: CachedRegistration) {
        let mut cache = self.registrations.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(device) {
            cache.clear();
        }
        cache.insert(device.clone(), entry);
    }

    /// An authenticated device's batch, within its rate or refused with a 429.
    fn admit(
        &self,
        device: &DeviceId,
        registration: &RegistrationItem,
        now: Instant,
    ) -> Result<RegistrationItem, FleetError> {
        self.device_limiter
            .take(device, now)
            .map_err(crate::ops::limits::rate_limited)?;
        Ok(registration.clone())
    }

    async fn read_registration(
        &self,
        device: &DeviceId,
        consistent: bool,
    ) -> Result<Option<RegistrationItem>, FleetError> {
        let out = self
            .table
            .client
            .get_item()
            .table_name(self.table.name())
            .set_key(Some(
                ItemKey::Registration {
                    device: device.clone(),
                }
                .attributes(),
            ))
            .consistent_read(consistent)
            .send()
            .await
            .map_err(sdk_error)?;
        // A released registration (the device was deleted) authenticates nothing.
        out.item
            .filter(|item| EntityType::of(item) == Some(EntityType::Registration))
            .map(RegistrationItem::from_item)
            .transpose()
    }

    fn forget(&self, device: &DeviceId) {
        self.registrations
            .lock()
            .expect("cache lock")
            .remove(device);
        self.states.lock().expect("cache lock").remove(device);
    }

    /// AP-14, implemented by [`Ingestor::ingest`].
    pub const INGEST_BATCH: AccessPattern = AccessPattern {
        id: PatternId::IngestEvents,
        description: "ingest a batch of up to 100 events for one device",
        frequency: Frequency::Critical,
        operations: &[
            Operation::GetItem,
            Operation::BatchGetItem,
            Operation::BatchWriteItem,
            Operation::UpdateItem,
            Operation::TransactWriteItems,
            Operation::Query,
            Operation::PutItem,
        ],
        index: None,
        key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION; the device's live state and PK = USER#{userId}, SK = RULES; events; on a transition its alarm (ALARM#{userId}#{deviceId}); the device's twin (PK = USER#{userId}#DEVICE#{deviceId}, SK = TWIN#... or COMMAND#...) only when it reports, acknowledges or has work pending",
        budget: RequestBudget::BatchOf25PlusTwin(3),
        max_read_units: None,
        route: Some("POST /devices/{deviceId}/events"),
        implemented_by: implemented_by!(Ingestor::ingest),
    };

    /// Stores `events` for the device of `registration` and folds them into its live state,
    /// with retries until `deadline`. Returns what was stored and what the device must resend;
    /// a device deleted since it authenticated is [`FleetError::Unauthorized`]; a batch that
    /// would take the device over [`MAX_STATE_TYPES`] event types is a 400, before any write.
    pub async fn ingest(
        &self,
        registration: &RegistrationItem,
        events: Vec<NewEvent>,
        deadline: Instant,
    ) -> Result<IngestOutcome, FleetError> {
        let deadline = deadline.min(Instant::now() + self.config.retry_window);
        let (state, rules) = self.live_state(registration).await?;
        check_type_cap(&state, &events)?;
        // The live state's update goes out with the event writes, not after them: it is the
        // one request a batch would otherwise wait for on its own. Should an event not be
        // stored, the state is repaired before the answer (below).
        let (unstored, folded) = tokio::join!(
            self.store_events(registration, &events, deadline),
            self.update_state(registration, state, &rules, &events, deadline),
        );
        let unstored = match unstored {
            Ok(unstored) => unstored,
            Err(err) => {
                if let Ok(Some(folded)) = folded {
                    self.repair_state(registration, folded, &[], &events, deadline)
                        .await;
                }
                return Err(err);
            }
        };
        let (stored, failed): (Vec<NewEvent>, Vec<NewEvent>) = events
            .into_iter()
            .partition(|e| !unstored.contains(&(e.at, e.id.clone())));
        match folded {
            Ok(written) => {
                let twin = written.as_ref().and_then(|folded| folded.twin);
                if let (Some(folded), false) = (written, failed.is_empty()) {
                    self.repair_state(registration, folded, &stored, &failed, deadline)
                        .await;
                }
                Ok(IngestOutcome {
                    accepted: stored.into_iter().map(|e| e.id).collect(),
                    failed: failed.into_iter().map(|e| e.id).collect(),
                    twin,
                })
            }
            Err(FleetError::Unauthorized) => Err(FleetError::Unauthorized),
            // Stored but not on the dashboard yet: acknowledge nothing, so the device resends
            // the whole batch (idempotent) and the live state catches up.
            Err(err) => {
                tracing::warn!(device = %registration.device_id, error = %err, "live state not updated");
                Ok(IngestOutcome {
                    accepted: Vec::new(),
                    failed: stored.into_iter().chain(failed).map(|e| e.id).collect(),
                    twin: None,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<IngestConfig, FleetError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        IngestConfig::from_lookup(move |name| map.get(name).cloned())
    }

    #[test]
    fn settings_read_like_every_function_setting() {
        assert_eq!(config(&[]).unwrap(), IngestConfig::default());
        assert_eq!(
            config(&[("REGISTRATION_CACHE_SECONDS", " ")]).unwrap(),
            IngestConfig::default(),
            "blank is unset"
        );
        let c = config(&[
            ("REGISTRATION_CACHE_SECONDS", "5"),
            ("INGEST_RETRY_MS", "400"),
            ("INGEST_DEVICE_RATE_PER_SECOND", "2.5"),
            ("INGEST_DEVICE_BURST", "10"),
        ])
        .unwrap();
        assert_eq!(c.registration_cache, Duration::from_secs(5));
        assert_eq!(c.retry_window, Duration::from_millis(400));
        assert_eq!((c.device_rate.per_second, c.device_rate.burst), (2.5, 10.0));
        for (name, bad) in [
            ("INGEST_RETRY_MS", "soon"),
            ("NEGATIVE_CACHE_SECONDS", "-1"),
            ("INGEST_DEVICE_BURST", "NaN"),
            ("MAX_CLOCK_SKEW_SECONDS", "86401"),
        ] {
            let err = config(&[(name, bad)]).unwrap_err().to_string();
            assert!(err.contains(name), "{name}={bad}: {err}");
        }
    }
}
