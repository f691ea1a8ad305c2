//! [`Ingestor`]: the warm-Lambda caches and the whole write path of a batch in one `impl`,
//! in the order a batch takes it: authenticate, read what is not cached (the live state and the
//! owner's alarm rules), store the events beside the live-state update, repair the state should
//! an event not be stored, and the twin's part of the answer. The pure parts (merging a batch
//! into a state, the event items) are in the sibling modules.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    KeysAndAttributes, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update as UpdateAction, WriteRequest,
};

use super::config::IngestConfig;
use super::receipt::{BatchReceipt, IncompleteBatch, StoredBatch};
use super::series::{SeriesItems, SeriesRetention, SeriesStore};
use super::state::{
    check_type_cap, evaluated, item_bytes, rules_refused, state_key, unchanged_since_read,
    FoldedState, Recorded, StateSlot, STATE_ATTEMPTS, STATE_FLUSH_BYTES,
};
use super::store::{event_writes, raw_retention_days, EventWrite};
use super::validate::NewEvent;
use crate::model::alarm::evaluation::Transition;
use crate::model::alarm::rule::Rule;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::rule_set::RuleSetItem;
use crate::model::entities::ItemKey;
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::expression::{Expressions, Update};
use crate::model::ids::{DeviceId, EventId, UserId};
use crate::model::keys::{IndexKeys, PrimaryKey};
use crate::model::schema::{Item, GSI1SK, GSI3PK, GSI3SK};
use crate::model::timestamp::Timestamp;
use crate::model::twin::TwinVersions;
use crate::ops::alarms::{transition_actions, AlarmDevice};
use crate::ops::limits::KeyedLimiter;
use crate::ops::twin::device::{
    apply_report, pending_work, sync_device, AppliedReport, DeviceReport, TwinReply,
};
use crate::store::deadline::Deadline;
use crate::store::dynamo::{
    get_all, number_value, scatter_gather, transact, write_all, Transaction, BATCH_WRITE_SIZE,
};
use crate::store::metrics::RequestMeter;
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, transient, FleetTable, Transient};
use crate::store::with_expressions::WithExpressions;

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
    /// Per device, the newest block of each type as this ingestor last wrote it, with the
    /// state's `ingestSeq` after that write: a flush finds it here instead of reading it.
    blocks: Mutex<HashMap<DeviceId, (u64, SeriesItems)>>,
    /// Attempts redone because another writer moved the state first (for tests and logs).
    conflict_redoes: std::sync::atomic::AtomicU64,
    /// Owners' alarm rules.
    rules: Mutex<HashMap<UserId, CachedRules>>,
    /// Per-device batch rate (authenticated devices only, so guessed ids take no bucket).
    device_limiter: KeyedLimiter<DeviceId>,
}

/// An owner's alarm rules as a warm Lambda holds them: read with the device's live state (one
/// BatchGetItem, so no request of their own) and used for `RULES_CACHE_SECONDS`, so a changed
/// rule applies to every batch within that time.
#[derive(Clone)]
struct CachedRules {
    rules: Arc<Vec<Rule>>,
    fetched: Instant,
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
            blocks: Mutex::new(HashMap::new()),
            conflict_redoes: std::sync::atomic::AtomicU64::new(0),
            rules: Mutex::new(HashMap::new()),
            device_limiter: KeyedLimiter::new(config.device_rate, CACHE_CAPACITY),
            config,
        }
    }

    /// An ingestor for the table and settings of the process environment (a Lambda's
    /// start-up).
    pub async fn from_env() -> Result<Self, FleetError> {
        Ok(Self::new(
            FleetTable::from_env().await?,
            IngestConfig::from_env()?,
        ))
    }

    /// The table.
    pub fn table(&self) -> &FleetTable {
        &self.table
    }

    /// The settings.
    pub fn config(&self) -> &IngestConfig {
        &self.config
    }

    /// How many state updates this ingestor redid from a newer state after a conflict.
    pub fn conflict_redoes(&self) -> u64 {
        self.conflict_redoes
            .load(std::sync::atomic::Ordering::Relaxed)
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

    /// AP-14 with the device's twin: stores `events` ([`Ingestor::ingest`]) while the device's
    /// `report` and acknowledgements are applied (they go out with the batch's writes, none
    /// when it sends neither, so they add no round of requests); then, when every event was
    /// stored, gathers its pending work from the twin versions the live-state update returned
    /// (nothing is read when nothing is pending; only a replay, which sends no update, reads
    /// the live state). Counts the request's `EventsAccepted`, `EventsFailed` and
    /// `TwinRequests`.
    ///
    /// A device moved to another owner since this Lambda cached its registration finds its
    /// old live state gone (a 401 for a deleted device): the registration is read again, and
    /// when it is the same registration under another owner ([`Ingestor::moved_registration`])
    /// the batch is written under the new owner, so the device never notices the move.
    pub async fn receive(
        &self,
        registration: &RegistrationItem,
        events: Vec<NewEvent>,
        report: &DeviceReport,
        deadline: Instant,
    ) -> Result<BatchReceipt, FleetError> {
        let first = self
            .receive_as(registration, events.clone(), report, deadline)
            .await;
        if !matches!(first, Err(FleetError::Unauthorized)) {
            return first;
        }
        let Some(moved) = self.moved_registration(registration).await? else {
            return first;
        };
        let answer = self
            .receive_as(&moved, events.clone(), report, deadline)
            .await;
        if answer.is_ok() {
            self.forget_strays(registration, &events, report).await;
        }
        answer
    }

    /// [`Ingestor::receive`] as the owner `registration` names.
    async fn receive_as(
        &self,
        registration: &RegistrationItem,
        events: Vec<NewEvent>,
        report: &DeviceReport,
        deadline: Instant,
    ) -> Result<BatchReceipt, FleetError> {
        let (outcome, applied) = tokio::join!(self.ingest(registration, events, deadline), async {
            if report.is_empty() {
                Ok(AppliedReport::default())
            } else {
                apply_report(&self.table, registration, report).await
            }
        });
        let outcome = outcome?;
        let applied = applied?;
        RequestMeter::add_figure("EventsAccepted", outcome.accepted.len() as f64);
        RequestMeter::add_figure("EventsFailed", outcome.failed.len() as f64);
        if !outcome.failed.is_empty() {
            return Ok(BatchReceipt::Incomplete(IncompleteBatch {
                accepted: outcome.accepted,
                failed: outcome.failed,
            }));
        }
        // The newer of what the live-state update and the report's update returned.
        let versions = match (outcome.twin, applied.versions) {
            (Some(a), Some(b)) => Some(a.newest(b)),
            (a, b) => a.or(b),
        };
        let reply = pending_work(&self.table, registration, versions, applied.into()).await?;
        RequestMeter::add_figure("TwinRequests", f64::from(reply.requests));
        Ok(BatchReceipt::Stored(StoredBatch::new(
            outcome.accepted,
            reply,
        )))
    }

    /// AP-T4 for an authenticated device ([`sync_device`]), its `TwinRequests` counted.
    pub async fn sync(
        &self,
        registration: &RegistrationItem,
        report: &DeviceReport,
    ) -> Result<TwinReply, FleetError> {
        let reply = match sync_device(&self.table, registration, report).await {
            // Moved since this Lambda cached the registration: as the new owner's.
            Err(FleetError::Unauthorized) => match self.moved_registration(registration).await? {
                Some(moved) => {
                    let reply = sync_device(&self.table, &moved, report).await?;
                    self.forget_strays(registration, &[], report).await;
                    reply
                }
                None => return Err(FleetError::Unauthorized),
            },
            other => other?,
        };
        RequestMeter::add_figure("TwinRequests", f64::from(reply.requests));
        Ok(reply)
    }

    /// The registration of a device that moved to another owner since `stale` (this Lambda's
    /// cached copy) was read: read again consistently, the same registration (its
    /// `createdAt`: a move keeps it, a deletion and a new registration of the id do not)
    /// under another owner, its token not revoked. Cached in place of `stale`. `None` (and the
    /// cache dropped) when the device was deleted or its id registered again: the 401 stands.
    async fn moved_registration(
        &self,
        stale: &RegistrationItem,
    ) -> Result<Option<RegistrationItem>, FleetError> {
        let device = &stale.device_id;
        let fresh = self.read_registration(device, true).await?;
        let moved = fresh.filter(|r| {
            r.user_id != stale.user_id && r.created_at == stale.created_at && r.revoked_at.is_none()
        });
        match &moved {
            Some(registration) => {
                self.states.lock().expect("cache lock").remove(device);
                self.remember(
                    device,
                    CachedRegistration {
                        registration: Some(registration.clone()),
                        fetched: Instant::now(),
                        refused: None,
                    },
                );
            }
            None => self.forget(device),
        }
        Ok(moved)
    }

    /// Deletes, best effort, what a request of a moved device may have stored under its old
    /// owner before the old live state was found gone (the event writes and the report go out
    /// beside the state's update): the same events and the report are stored under the new
    /// owner, so nothing of the device stays behind at the old one. One delete per event
    /// (and the reported document when the device reported), only on this rare path, after
    /// the request succeeded as the new owner's.
    async fn forget_strays(
        &self,
        stale: &RegistrationItem,
        events: &[NewEvent],
        report: &DeviceReport,
    ) {
        let reported = report.reported.is_some().then(|| ItemKey::Reported {
            user: stale.user_id.clone(),
            device: stale.device_id.clone(),
        });
        let deletes: Vec<WriteRequest> = events
            .iter()
            .map(|e| ItemKey::Event {
                user: stale.user_id.clone(),
                device: stale.device_id.clone(),
                at: e.at,
                event: e.id.clone(),
            })
            .chain(reported)
            .filter_map(|key| {
                let delete = aws_sdk_dynamodb::types::DeleteRequest::builder()
                    .set_key(Some(key.attributes()))
                    .build()
                    .ok()?;
                Some(WriteRequest::builder().delete_request(delete).build())
            })
            .collect();
        for chunk in deletes.chunks(BATCH_WRITE_SIZE) {
            let mut retry = Retry::attempts(crate::store::table::MAX_ATTEMPTS);
            if let Err(err) = write_all(&self.table, chunk.to_vec(), &mut retry).await {
                tracing::warn!(device = %stale.device_id, error = %err, "a moved device's stray events were not deleted");
            }
        }
    }

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
        // The events are written first (concurrent BatchWriteItem calls), then the live state
        // counts exactly the readings whose write succeeded (issue 38): a reading is never
        // counted before its raw event is stored, so nothing needs repairing when a write
        // fails or is ambiguous; the device resends what failed and its resend is counted
        // once (the buckets' reading identities).
        let unstored = self.store_events(registration, &events, deadline).await?;
        let (stored, failed): (Vec<NewEvent>, Vec<NewEvent>) = events
            .into_iter()
            .partition(|e| !unstored.contains(&(e.at, e.id.clone())));
        if stored.is_empty() {
            return Ok(IngestOutcome {
                accepted: Vec::new(),
                failed: failed.into_iter().map(|e| e.id).collect(),
                twin: None,
            });
        }
        match self
            .update_state(registration, state, &rules, &stored, deadline)
            .await
        {
            Ok(written) => Ok(IngestOutcome {
                accepted: stored.into_iter().map(|e| e.id).collect(),
                failed: failed.into_iter().map(|e| e.id).collect(),
                twin: written.and_then(|folded| folded.twin),
            }),
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

    /// The live state of the device of `registration` and its owner's alarm rules: this warm
    /// Lambda's copies, or one consistent BatchGetItem of what is not cached (a read costs half
    /// of a failed conditional write of the item, and API Gateway spreads a device's batches
    /// over containers, so most batches miss the state cache). A device without a state item
    /// is gone: [`FleetError::Unauthorized`].
    async fn live_state(
        &self,
        registration: &RegistrationItem,
    ) -> Result<(DeviceStateItem, Arc<Vec<Rule>>), FleetError> {
        let cached = self.cached_state(&registration.device_id);
        let read = self
            .read_state_and_rules(registration, state_key(registration), cached.is_none())
            .await;
        match read {
            Ok((Some(state), rules)) => {
                self.remember_state(state.clone());
                Ok((state, rules))
            }
            Ok((None, rules)) => Ok((cached.expect("the state was cached"), rules)),
            Err(FleetError::Unauthorized) => {
                self.forget(&registration.device_id);
                Err(FleetError::Unauthorized)
            }
            Err(err) => Err(err),
        }
    }

    /// Folds `events` into the live state `base` and evaluates the owner's alarm `rules` on
    /// them, with one conditional UpdateItem, or, when an alarm is raised or cleared, one
    /// TransactWriteItems of the same update and the alarm writes ([`transition_actions`]);
    /// skipped when it would change nothing (a replay). On a conflict the failed write returns
    /// the current item, which is merged and evaluated again (no separate read). Returns what
    /// the write folded in ([`FoldedState`], `None` when skipped), which a repair needs.
    async fn update_state(
        &self,
        registration: &RegistrationItem,
        mut base: DeviceStateItem,
        rules: &[Rule],
        events: &[NewEvent],
        deadline: Instant,
    ) -> Result<Option<FoldedState>, FleetError> {
        let device = &registration.device_id;
        let mut retry = Retry::until(deadline).at_most(STATE_ATTEMPTS);
        // What the caller is told if the attempts run out: conflicts and throttling are busy.
        let mut gave_up = Transient::Busy;
        // Whether this batch's alarm changes are written; a refused alarm write must not
        // refuse the readings (see below).
        let mut record_alarms = true;
        // The owner's rules as a refused raise returned them (issue 39 item 7).
        let mut current_rules: Option<Vec<Rule>> = None;
        while retry.next_attempt().await {
            let rules = current_rules.as_deref().unwrap_or(rules);
            let (mut next, mut transitions) = evaluated(registration, &base, rules, events);
            if !record_alarms {
                next.alarms = base.alarms.clone();
                transitions.clear();
            }
            let mut actions = if transitions.is_empty() {
                Vec::new()
            } else {
                self.alarm_actions(registration, &base, rules, &transitions)?
            };
            let (items, complete) = self
                .summarise(registration, &mut next, events, actions.len())
                .await?;
            if next == base && items.changed() == 0 {
                return Ok(None);
            }
            let summary = items.actions(&self.table, registration, self.series_retention())?;
            actions.extend(summary);
            // A transaction returns no item: its state update is also conditioned on the twin's
            // versions as `base` has them, so the committed state has them too and the answer
            // needs no read to tell the device's pending work (a change meanwhile is a
            // conflict, redone from the item it returns).
            let fenced = !actions.is_empty();
            let (changes, stored) = self.state_changes(registration, &base, next, fenced)?;
            if !actions.is_empty() {
                let recorded = self
                    .record_transitions(registration, changes, actions, deadline)
                    .await;
                let recorded = match recorded {
                    Ok(recorded) => recorded,
                    Err(err) if err.is_retryable() || matches!(err, FleetError::Unauthorized) => {
                        return Err(err)
                    }
                    Err(err) => {
                        // DynamoDB refused the alarm writes themselves (a ValidationException, or
                        // a cancellation no retry changes). Resending would be refused the same
                        // way forever, so the readings are stored and folded in without this
                        // batch's alarm changes, and the refusal is logged as an error.
                        tracing::error!(device = %registration.device_id, error = %err, transitions = transitions.len(), "alarm or summary writes refused: the batch is stored without its alarm changes");
                        record_alarms = false;
                        continue;
                    }
                };
                match recorded {
                    Recorded::Committed if !complete => {
                        // Late readings spread over more items than one transaction holds (weeks
                        // of backlog): the next round counts the rest (those counted now are in
                        // their buckets' identities), each reading's items in one transaction.
                        self.remember_blocks(device, stored.ingest_seq, &items);
                        self.remember_state(stored.clone());
                        base = stored;
                        retry = Retry::until(deadline).at_most(STATE_ATTEMPTS);
                        continue;
                    }
                    Recorded::Committed => {
                        self.remember_blocks(device, stored.ingest_seq, &items);
                        self.remember_state(stored.clone());
                        return Ok(Some(FoldedState {
                            twin: Some(stored.twin),
                        }));
                    }
                    Recorded::StateChanged(current) => {
                        base = self.after_conflict(device, current.as_ref())?;
                        continue;
                    }
                    Recorded::RulesChanged(fresh) => {
                        self.remember_rules(
                            &registration.user_id,
                            Arc::new(fresh.clone()),
                            Instant::now(),
                        );
                        current_rules = Some(fresh);
                        continue;
                    }
                }
            }
            let request = self.state_request(registration, changes);
            let err = match request.return_values(ReturnValue::AllNew).send().await {
                Ok(out) => {
                    // The item as written carries what others own on it too: the twin's
                    // versions tell the device's pending work without a read (ops::twin), and
                    // the owner's copies bring the cached state in step with a PATCH.
                    let (twin, stored) = match out.attributes {
                        Some(item) => {
                            let written = DeviceStateItem::from_item(item)?;
                            (Some(written.twin), stored.with_copies_of(&written))
                        }
                        None => (None, stored),
                    };
                    // No summary item was written: the cached blocks are still current.
                    let carried = self.cached_blocks(device, base.ingest_seq);
                    self.remember_blocks(device, stored.ingest_seq, &carried);
                    self.remember_state(stored.clone());
                    return Ok(Some(FoldedState { twin }));
                }
                Err(err) => err,
            };
            match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    base = self.after_conflict(device, failed.item())?;
                }
                _ => match transient(&err) {
                    Some(kind) => gave_up = kind,
                    None => return Err(sdk_error(err)),
                },
            }
        }
        Err(gave_up.error())
    }

    /// The alarm writes of `transitions` as transaction actions.
    fn alarm_actions(
        &self,
        registration: &RegistrationItem,
        base: &DeviceStateItem,
        rules: &[Rule],
        transitions: &[Transition],
    ) -> Result<Vec<TransactWriteItem>, FleetError> {
        let device = AlarmDevice {
            user: registration.user_id.clone(),
            device: registration.device_id.clone(),
            partition: registration.partition,
            name: base.name.clone(),
        };
        transition_actions(&self.table, &device, rules, transitions)
    }

    /// How long the device's summary items are kept.
    fn series_retention(&self) -> SeriesRetention {
        SeriesRetention {
            block_days: self.table.config.retention_days,
            hourly_days: self.config.hourly_retention_days,
            daily_days: self.config.daily_retention_days,
        }
    }

    /// The summaries' part of an attempt on `next` (the state with the batch merged in): the
    /// batch's stored readings counted once each ([`SeriesStore::count`]) and, when the state
    /// item would be over one write unit, the closed 5-minute buckets flushed, if the
    /// transaction has room for them beside `other_actions` and the state's update. Returns the
    /// summary items to write with the state.
    async fn summarise(
        &self,
        registration: &RegistrationItem,
        next: &mut DeviceStateItem,
        events: &[NewEvent],
        other_actions: usize,
    ) -> Result<(SeriesItems, bool), FleetError> {
        let store = SeriesStore {
            table: &self.table,
            registration,
        };
        let mut series = std::mem::take(&mut next.series);
        let mut items = self.cached_blocks(&registration.device_id, next.ingest_seq);
        let room = MAX_TRANSACTION_ACTIONS.saturating_sub(1 + other_actions);
        let complete = store.count(&mut series, events, &mut items, room).await?;
        next.series = series;
        let size = item_bytes(&next.to_item(&self.table.config.shards)?);
        if complete && size > STATE_FLUSH_BYTES {
            let mut flushed = next.series.clone();
            let mut flushed_items = items.clone();
            store
                .flush(&mut flushed, &next.latest, &mut flushed_items)
                .await?;
            // A flush that does not fit the transaction waits for a batch with more room.
            if 1 + other_actions + flushed_items.changed() <= MAX_TRANSACTION_ACTIONS {
                next.series = flushed;
                items = flushed_items;
            }
        }
        Ok((items, complete))
    }

    /// Sends the live state's update with `others` (alarm and summary writes) in one
    /// transaction. A clear whose alarm item is gone (expired or removed by hand) is dropped
    /// and the rest sent again, so a lost item never blocks a device's ingestion.
    async fn record_transitions(
        &self,
        registration: &RegistrationItem,
        changes: Expressions,
        others: Vec<TransactWriteItem>,
        deadline: Instant,
    ) -> Result<Recorded, FleetError> {
        let state = UpdateAction::builder()
            .table_name(self.table.name())
            .set_key(Some(state_key(registration).attributes()))
            .expressions(changes)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(FleetError::internal)?;
        let mut actions = vec![TransactWriteItem::builder().update(state).build()];
        actions.extend(others);
        loop {
            let retry = Retry::until(deadline).at_most(STATE_ATTEMPTS);
            let reasons = match transact(&self.table, actions.clone(), retry).await? {
                Transaction::Committed => return Ok(Recorded::Committed),
                Transaction::Cancelled(reasons) => reasons,
            };
            if condition_failed(&reasons, StateSlot) {
                return Ok(Recorded::StateChanged(reasons[0].item().cloned()));
            }
            if let Some(rules) = rules_refused(&actions, &reasons)? {
                return Ok(Recorded::RulesChanged(rules));
            }
            let failed: Vec<usize> = (1..actions.len())
                .filter(|i| {
                    reasons
                        .get(*i)
                        .and_then(|r| r.code())
                        .is_some_and(|c| c == "ConditionalCheckFailed")
                })
                .collect();
            if failed.is_empty() {
                return Err(FleetError::internal(format!(
                    "alarm transaction cancelled: {reasons:?}"
                )));
            }
            tracing::warn!(device = %registration.device_id, dropped = failed.len(), "clearing alarms whose items are gone");
            actions = actions
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !failed.contains(i))
                .map(|(_, a)| a)
                .collect();
        }
    }

    fn cached_state(&self, device: &DeviceId) -> Option<DeviceStateItem> {
        self.states.lock().expect("cache lock").get(device).cloned()
    }

    /// Keeps the newest blocks `items` leave, as of the state's `ingest_seq` after their write.
    fn remember_blocks(&self, device: &DeviceId, ingest_seq: u64, items: &SeriesItems) {
        let mut cache = self.blocks.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(device) {
            cache.clear();
        }
        cache.insert(device.clone(), (ingest_seq, items.newest_blocks()));
    }

    /// The blocks this ingestor wrote for `device` if the state is still at `ingest_seq` (no
    /// summary write since: each moves it); else nothing (read them).
    fn cached_blocks(&self, device: &DeviceId, ingest_seq: u64) -> SeriesItems {
        let cache = self.blocks.lock().expect("cache lock");
        match cache.get(device) {
            Some((seq, items)) if *seq == ingest_seq => items.clone(),
            _ => SeriesItems::default(),
        }
    }

    fn remember_state(&self, state: DeviceStateItem) {
        let mut cache = self.states.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(&state.device_id) {
            cache.clear();
        }
        cache.insert(state.device_id.clone(), state);
    }

    /// The conditional update that turns `base` (what this Lambda believes is stored) into
    /// `next`, and the state stored once it succeeds. Only what ingestion owns is written, so
    /// an owner's concurrent status or name change is never overwritten.
    fn state_changes(
        &self,
        registration: &RegistrationItem,
        base: &DeviceStateItem,
        mut next: DeviceStateItem,
        twin_fenced: bool,
    ) -> Result<(Expressions, DeviceStateItem), FleetError> {
        let device = &registration.device_id;
        next.ingest_seq = base.ingest_seq + 1;
        let mut changes = Update::new()
            .set(
                DeviceStateItem::LAST_SEEN,
                serde_dynamo::to_attribute_value(next.last_seen)?,
            )
            .set(DeviceStateItem::READINGS, next.readings_attribute())
            .set(DeviceStateItem::INGEST_SEQ, number_value(next.ingest_seq));
        // The open summaries change with nearly every batch of new readings; a replay or a
        // batch of other types leaves them (and their bytes) alone.
        if next.series != base.series {
            changes = match next.series_attribute() {
                Some(series) => changes.set(DeviceStateItem::SERIES, series),
                None => changes.remove(DeviceStateItem::SERIES),
            };
        }
        if next.alarms != base.alarms {
            changes = if next.alarms.is_empty() {
                changes.remove(DeviceStateItem::ALARMS)
            } else {
                changes.set(
                    DeviceStateItem::ALARMS,
                    serde_dynamo::to_attribute_value(&next.alarms)?,
                )
            };
        }
        // The index entry moves (a delete and a put on GSI1) only when the device's own
        // offset SEEN bucket does: at most once per bucket, never for all devices at once.
        // Only the sort key is ingestion's: the partition follows the owner's status.
        let seen_key = |state: &DeviceStateItem| {
            IndexKeys::device_state(
                state.status,
                device,
                state.last_seen.as_ref(),
                &self.table.config.shards,
            )
            .attributes()
            .find(|(name, _)| *name == GSI1SK)
        };
        if let Some(moved) = seen_key(&next).filter(|k| Some(k) != seen_key(base).as_ref()) {
            changes = changes.set_all([moved]);
        }
        // The learned rhythm and the offline-check due entry (GSI3) change only when the SEEN
        // bucket does (or when the entry is not where the state says it belongs: a PATCH asked
        // for a recheck, the detector removed it, an offline alarm cleared).
        if next.rhythm() != base.rhythm() {
            changes = changes
                .set(
                    DeviceStateItem::LEARNED_EVERY_SECONDS,
                    serde_dynamo::to_attribute_value(next.learned_every_seconds)?,
                )
                .set(
                    DeviceStateItem::LEARNED_JITTER_SECONDS,
                    serde_dynamo::to_attribute_value(next.learned_jitter_seconds)?,
                );
        }
        let due = next.due_at();
        if due != base.indexed_due {
            changes = match due {
                Some(at) => changes.set_all(IndexKeys::due(device, Some(&at)).attributes()),
                None => changes.remove(GSI3PK).remove(GSI3SK),
            };
        }
        next.indexed_due = due;
        // The list form of states written before `readings` goes as they are rewritten.
        let changes = changes
            .remove(DeviceStateItem::LEGACY_LATEST)
            .remove(DeviceStateItem::LEGACY_RECENT);
        let mut condition = unchanged_since_read(base);
        if twin_fenced {
            condition = condition.and(twin_unchanged(&base.twin));
        }
        Ok((Expressions::write(changes, Some(condition)), next))
    }

    /// The UpdateItem of `changes` on the device's live state; a failed condition returns the
    /// item as it is.
    fn state_request(
        &self,
        registration: &RegistrationItem,
        changes: Expressions,
    ) -> UpdateItemFluentBuilder {
        self.table
            .client
            .update_item()
            .table_name(self.table.name())
            .set_key(Some(state_key(registration).attributes()))
            .expressions(changes)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    }

    /// After a failed condition, with the item as it is now: the state to merge into next, or
    /// [`FleetError::Unauthorized`] when the device is gone.
    fn after_conflict(
        &self,
        device: &DeviceId,
        current: Option<&Item>,
    ) -> Result<DeviceStateItem, FleetError> {
        let Some(current) = current else {
            self.forget(device);
            return Err(FleetError::Unauthorized);
        };
        self.conflict_redoes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let current = DeviceStateItem::from_item(current.clone())?;
        self.remember_state(current.clone());
        Ok(current)
    }

    /// The owner's rules while this Lambda's copy is fresh.
    fn cached_rules(&self, user: &UserId, now: Instant) -> Option<Arc<Vec<Rule>>> {
        let cache = self.rules.lock().expect("cache lock");
        cache
            .get(user)
            .filter(|c| now - c.fetched < self.config.rules_cache)
            .map(|c| c.rules.clone())
    }

    fn remember_rules(&self, user: &UserId, rules: Arc<Vec<Rule>>, fetched: Instant) {
        let mut cache = self.rules.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(user) {
            cache.clear();
        }
        cache.insert(user.clone(), CachedRules { rules, fetched });
    }

    /// Reads what is not cached of the device's live state and its owner's rules, in one
    /// request: a consistent BatchGetItem of both, or a GetItem-like read of one. Returns the
    /// state read (`None` when it was not asked for) and the rules (`None`: not asked for).
    /// A state asked for and absent means the device is gone ([`FleetError::Unauthorized`]).
    async fn read_state_and_rules(
        &self,
        registration: &RegistrationItem,
        state_key: ItemKey,
        want_state: bool,
    ) -> Result<(Option<DeviceStateItem>, Arc<Vec<Rule>>), FleetError> {
        let now = Instant::now();
        let user = &registration.user_id;
        let cached = self.cached_rules(user, now);
        let rules_key = ItemKey::RuleSet { user: user.clone() };
        let mut keys = Vec::new();
        if want_state {
            keys.push(state_key.attributes());
        }
        if cached.is_none() {
            keys.push(rules_key.attributes());
        }
        if keys.is_empty() {
            return Ok((None, cached.unwrap_or_default()));
        }
        let request = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(true)
            .build()
            .map_err(FleetError::internal)?;
        let mut retry = Retry::until(now + self.config.retry_window).at_most(4);
        let items = get_all(&self.table, request, &mut retry).await?;
        let mut state = None;
        let mut rules = cached.clone();
        let mut read_rules = Vec::new();
        for item in items {
            match EntityType::of(&item) {
                Some(EntityType::DeviceState) => state = Some(DeviceStateItem::from_item(item)?),
                Some(EntityType::RuleSet) => read_rules = RuleSetItem::from_item(item)?.rule_list(),
                _ => {}
            }
        }
        if cached.is_none() {
            let fresh = Arc::new(read_rules);
            self.remember_rules(user, fresh.clone(), now);
            rules = Some(fresh);
        }
        if want_state && state.is_none() {
            return Err(FleetError::Unauthorized);
        }
        Ok((state, rules.unwrap_or_default()))
    }

    /// Writes the events, and one type mark per searchable type and window the batch holds
    /// ([`TypeMarkItem`]), in concurrent BatchWriteItem calls of 25, retrying unprocessed items
    /// and throttled calls with full-jitter backoff until `deadline`. Returns the (at, id) of
    /// the events that could not be written; a mark that could not be written fails every
    /// event of its type and window (AP-09 finds a device's events through its marks), so the
    /// device resends them and the resend writes the mark again.
    async fn store_events(
        &self,
        registration: &RegistrationItem,
        events: &[NewEvent],
        deadline: Instant,
    ) -> Result<HashSet<(Timestamp, EventId)>, FleetError> {
        let items = event_writes(
            registration,
            events,
            raw_retention_days(registration, &self.table.config),
            &self.table.config.shards,
        )?;
        let chunks: Vec<Vec<_>> = items.chunks(BATCH_WRITE_SIZE).map(<[_]>::to_vec).collect();
        let unstored = scatter_gather(
            chunks
                .into_iter()
                .map(|chunk| self.write_chunk(chunk, deadline)),
        )
        .await?;
        Ok(unstored.into_iter().flatten().collect())
    }

    async fn write_chunk(
        &self,
        chunk: Vec<EventWrite>,
        deadline: Instant,
    ) -> Result<Vec<(Timestamp, EventId)>, FleetError> {
        let requests = chunk.iter().map(|(_, r)| r.clone()).collect();
        let unprocessed = write_all(&self.table, requests, &mut Retry::until(deadline)).await?;
        let key = |request: &WriteRequest| {
            request
                .put_request
                .as_ref()
                .and_then(|p| PrimaryKey::of(&p.item))
        };
        let unprocessed: Vec<_> = unprocessed.iter().filter_map(key).collect();
        Ok(chunk
            .into_iter()
            .filter(|(_, request)| key(request).is_some_and(|k| unprocessed.contains(&k)))
            .flat_map(|(events, _)| events)
            .collect())
    }
}

/// The twin's versions on the live state are still `twin` (a version of 0 is stored absent).
fn twin_unchanged(twin: &TwinVersions) -> crate::model::expression::Condition {
    use crate::model::expression::Condition;
    let values = [
        twin.desired_version,
        twin.reported_version,
        twin.command_seq,
        twin.commands_done,
    ];
    let mut all: Option<Condition> = None;
    for (attribute, value) in TwinVersions::ATTRIBUTES.into_iter().zip(values) {
        let one = if value == 0 {
            Condition::absent(attribute).or(Condition::equals(attribute, number_value(0)))
        } else {
            Condition::equals(attribute, number_value(value))
        };
        all = Some(match all {
            Some(all) => all.and(one),
            None => one,
        });
    }
    all.expect("four versions")
}

/// Most actions of one TransactWriteItems (DynamoDB's limit).
const MAX_TRANSACTION_ACTIONS: usize = 100;

/// Time kept in reserve before the Lambda's deadline to answer the device.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// When retrying a batch's writes must stop: the Lambda's `deadline` (one rule for every
/// function, [`Deadline::from_lambda`] with the function's `timeout`) less a margin to answer;
/// outside Lambda (no deadline), the ingestor's own retry window applies.
pub fn batch_deadline(lambda_deadline: Option<SystemTime>, timeout: Duration) -> Instant {
    lambda_deadline
        .map(|at| Deadline::from_lambda(at, timeout).less(ANSWER_MARGIN))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600))
}
