//! AP-14: device-authenticated, idempotent batch ingestion.
//!
//! A batch costs at most ceil(n/25) + 3 requests: the registration GetItem (skipped while the
//! warm Lambda's cache holds it), one BatchWriteItem per 25 events (sent concurrently), and
//! one conditional UpdateItem of the device summary (a second one only when another batch for
//! the same device got in between). Events are keyed by their id and time, so a replayed batch
//! overwrites identical items and stores nothing twice.

mod store;
mod summary;
mod validate;

pub use summary::DeviceSummary;
pub use validate::{derive_event_id, validate_batch, NewEvent, SubmittedEvent};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::catalog::{
    implemented_by, AccessPattern, Frequency, Operation, PatternId, RequestBudget,
};
use crate::entity::Entity;
use crate::error::FleetError;
use crate::ids::{DeviceId, EventId};
use crate::items::RegistrationItem;
use crate::keys::ItemKey;
use crate::table::{sdk_error, FleetTable};
use crate::timestamp::Timestamp;

/// Most events in one request.
pub const MAX_EVENTS_PER_BATCH: usize = 100;
/// Events per BatchWriteItem (DynamoDB's limit).
pub use crate::dynamo::BATCH_WRITE_SIZE;
/// Longest text value of an event, in characters.
pub const MAX_TEXT_VALUE: usize = 256;
/// Events kept in a device's `recent` list (the dashboard shows the last 10).
pub const RECENT_EVENTS: usize = 10;
pub use crate::keys::SEEN_GRANULARITY_SECONDS;

/// Ingestion settings, from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestConfig {
    /// `REGISTRATION_CACHE_SECONDS` (default 30): how long a warm Lambda trusts a registration
    /// it read. A deleted or re-registered device stops working within this window.
    pub registration_cache: Duration,
    /// `MAX_CLOCK_SKEW_SECONDS` (default 300): how far in the future an event may be.
    pub max_clock_skew: Duration,
    /// `INGEST_RETRY_MS` (default 5000): how long to keep retrying unprocessed or throttled
    /// writes, further bounded by the Lambda's remaining time.
    pub retry_window: Duration,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            registration_cache: Duration::from_secs(30),
            max_clock_skew: Duration::from_secs(300),
            retry_window: Duration::from_secs(5),
        }
    }
}

impl IngestConfig {
    /// Reads the settings from the process environment (defaults for what is unset).
    pub fn from_env() -> Result<Self, FleetError> {
        let d = Self::default();
        let secs = |name: &str, default: Duration, unit_ms: bool| -> Result<Duration, FleetError> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(raw) => raw
                    .trim()
                    .parse::<u64>()
                    .map(|v| {
                        if unit_ms {
                            Duration::from_millis(v)
                        } else {
                            Duration::from_secs(v)
                        }
                    })
                    .map_err(|_| FleetError::Internal(format!("{name}={raw:?} is not a number"))),
            }
        };
        Ok(Self {
            registration_cache: secs("REGISTRATION_CACHE_SECONDS", d.registration_cache, false)?,
            max_clock_skew: secs("MAX_CLOCK_SKEW_SECONDS", d.max_clock_skew, false)?,
            retry_window: secs("INGEST_RETRY_MS", d.retry_window, true)?,
        })
    }
}

/// The result of storing a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    /// Stored (and reflected in the device summary).
    pub accepted: Vec<EventId>,
    /// Not acknowledged: the device should resend these.
    pub failed: Vec<EventId>,
}

#[derive(Clone)]
struct CachedRegistration {
    registration: RegistrationItem,
    fetched: Instant,
}

/// Ingestion with the warm-Lambda caches: registrations (authentication) and device
/// summaries (so a busy device's summary update needs no read).
pub struct Ingestor {
    table: FleetTable,
    config: IngestConfig,
    registrations: Mutex<HashMap<DeviceId, CachedRegistration>>,
    summaries: Mutex<HashMap<DeviceId, DeviceSummary>>,
}

/// Bound on cached entries, so a Lambda serving many devices keeps a small footprint.
const CACHE_CAPACITY: usize = 10_000;

impl Ingestor {
    /// An ingestor for `table`.
    pub fn new(table: FleetTable, config: IngestConfig) -> Self {
        Self {
            table,
            config,
            registrations: Mutex::new(HashMap::new()),
            summaries: Mutex::new(HashMap::new()),
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
    /// [`FleetError::Unauthorized`], the same for an unknown device and a wrong token.
    pub async fn authenticate(
        &self,
        device: &DeviceId,
        token: &str,
    ) -> Result<RegistrationItem, FleetError> {
        let cached = self
            .registrations
            .lock()
            .expect("cache lock")
            .get(device)
            .filter(|c| c.fetched.elapsed() < self.config.registration_cache)
            .cloned();
        if let Some(cached) = &cached {
            if cached.registration.accepts(token, Timestamp::now()) {
                return Ok(cached.registration.clone());
            }
        }
        // Not cached, expired, or the token changed (re-registration): read it.
        let registration = self.read_registration(device).await?;
        match registration {
            Some(r) if r.accepts(token, Timestamp::now()) => {
                let mut cache = self.registrations.lock().expect("cache lock");
                if cache.len() >= CACHE_CAPACITY {
                    cache.clear();
                }
                cache.insert(
                    device.clone(),
                    CachedRegistration {
                        registration: r.clone(),
                        fetched: Instant::now(),
                    },
                );
                Ok(r)
            }
            _ => {
                self.forget(device);
                Err(FleetError::Unauthorized)
            }
        }
    }

    async fn read_registration(
        &self,
        device: &DeviceId,
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
            // A device may send its first batch right after registration.
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        out.item.map(RegistrationItem::from_item).transpose()
    }

    fn forget(&self, device: &DeviceId) {
        self.registrations
            .lock()
            .expect("cache lock")
            .remove(device);
        self.summaries.lock().expect("cache lock").remove(device);
    }

    /// AP-14, implemented by [`Ingestor::ingest`].
    pub const INGEST_BATCH: AccessPattern = AccessPattern {
        id: PatternId::Ap14,
        description: "ingest a batch of up to 100 events for one device",
        frequency: Frequency::Critical,
        operations: &[
            Operation::GetItem,
            Operation::BatchWriteItem,
            Operation::UpdateItem,
        ],
        index: None,
        key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION; events; device item",
        budget: RequestBudget::BatchOf25Plus(3),
        max_read_units: None,
        route: Some("POST /devices/{deviceId}/events"),
        implemented_by: implemented_by!(Ingestor::ingest),
    };

    /// Stores `events` for the device of `registration` and folds them into its summary, with
    /// retries until `deadline`. Returns what was stored and what the device must resend; a
    /// device deleted since it authenticated is [`FleetError::Unauthorized`].
    pub async fn ingest(
        &self,
        registration: &RegistrationItem,
        events: Vec<NewEvent>,
        deadline: Instant,
    ) -> Result<IngestOutcome, FleetError> {
        let deadline = deadline.min(Instant::now() + self.config.retry_window);
        // The event writes and the summary update go out together: waiting for one before the
        // other cost a whole round trip per batch (the summary was sent only after the last
        // BatchWriteItem answered). An event is acknowledged only when both its write and the
        // summary succeeded; a failed one is named in `failed`, and the device's resend (a
        // replay: identical items, a summary that already holds it) completes it.
        let (unstored, summary) = tokio::join!(
            self.store_events(registration, &events, deadline),
            self.update_summary(registration, &events, deadline),
        );
        let unstored = unstored?;
        let (stored, failed): (Vec<NewEvent>, Vec<NewEvent>) = events
            .into_iter()
            .partition(|e| !unstored.contains(&(e.at, e.id.clone())));
        match summary {
            Ok(()) => Ok(IngestOutcome {
                accepted: stored.into_iter().map(|e| e.id).collect(),
                failed: failed.into_iter().map(|e| e.id).collect(),
            }),
            Err(FleetError::Unauthorized) => Err(FleetError::Unauthorized),
            // Not on the dashboard yet: acknowledge nothing, so the device resends the whole
            // batch (idempotent) and the summary catches up.
            Err(err) => {
                tracing::warn!(device = %registration.device_id, error = %err, "device summary not updated");
                Ok(IngestOutcome {
                    accepted: Vec::new(),
                    failed: stored.into_iter().chain(failed).map(|e| e.id).collect(),
                })
            }
        }
    }
}
