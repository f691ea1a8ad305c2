//! [`Ingestor`]: the write path of a batch in the order a batch takes it: authenticate, read
//! what is not cached (the live state and the owner's alarm rules), store the events, then
//! count what was stored into the live state and its summaries, and the twin's part of the
//! answer. The pure parts (merging a batch
//! into a state, the event items) are in the sibling modules; the registrations, the caches and
//! the event writes in the child modules.

mod caches;
mod events;
mod registrations;

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
use super::series::{SeriesItems, SeriesOwner, SeriesRetention, SeriesStore};
use super::state::{
    check_type_cap, evaluated, item_bytes, rules_refused, state_key, unchanged_since_read,
    FoldedState, Recorded, StateSlot, MAX_TRANSACTION_ACTIONS, STATE_ATTEMPTS, STATE_FLUSH_BYTES,
};
use super::store::{event_writes, raw_retention_days, EventWrite};
use super::validate::NewEvent;
use crate::model::alarm::evaluation::Transition;
use crate::model::alarm::rule::Rule;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::rollout::RolloutItem;
use crate::model::entities::rule_set::RuleSetItem;
use crate::model::entities::ItemKey;
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::expression::{Expressions, Update};
use crate::model::ids::{DeviceId, EventId, RolloutId, UserId};
use crate::model::keys::{IndexKeys, PrimaryKey};
use crate::model::rollout_progress::FirmwareReport;
use crate::model::schema::{Item, GSI1SK, GSI3PK, GSI3SK};
use crate::model::timestamp::Timestamp;
use crate::model::twin::TwinVersions;
use crate::ops::alarms::{transition_actions, AlarmDevice};
use crate::ops::limits::KeyedLimiter;
use crate::ops::twin::device::{
    apply_report, pending_work, sync_device_with_firmware, AppliedReport, DeviceReport, TwinReply,
};
use crate::ops::twin::firmware_offer::{
    read_rollout, rollout_terms, FirmwareCheckIn, FirmwareFold, OpenFirmware,
};
use crate::store::deadline::Deadline;
use crate::store::dynamo::{
    get_all, number_value, scatter_gather, transact, write_all, Transaction, BATCH_WRITE_SIZE,
};
use crate::store::firmware_images::{FirmwareImages, FIRMWARE_BUCKET_ENV};
use crate::store::metrics::RequestMeter;
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, transient, FleetTable, Transient};
use crate::store::with_expressions::WithExpressions;

/// The result of storing a batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngestOutcome {
    /// Stored (and reflected in the live state).
    pub accepted: Vec<EventId>,
    /// Not acknowledged: the device should resend these.
    pub failed: Vec<EventId>,
    /// The twin's versions as the live-state update returned them (`None` when no update was
    /// sent, a replay: the caller reads them if it needs them). What tells ingestion whether
    /// anything is pending for the device without a read ([`crate::model::twin`]).
    pub twin: Option<TwinVersions>,
    /// What the live-state update did with the device's open part in a firmware rollout
    /// (`None`: it has none).
    pub firmware: Option<FirmwareFold>,
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
    /// The firmware image bucket, where firmware offers' download URLs are presigned (none:
    /// offers are not made, and a warning says why).
    images: Option<FirmwareImages>,
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
            images: None,
        }
    }

    /// This ingestor presigning firmware offers' downloads on `images`.
    pub fn with_firmware_images(mut self, images: FirmwareImages) -> Self {
        self.images = Some(images);
        self
    }

    /// An ingestor for the table and settings of the process environment (a Lambda's
    /// start-up).
    pub async fn from_env() -> Result<Self, FleetError> {
        let ingestor = Self::new(FleetTable::from_env().await?, IngestConfig::from_env()?);
        // The image bucket presigns firmware offers (issue 40); a deployment without one
        // ingests as before.
        Ok(match std::env::var(FIRMWARE_BUCKET_ENV) {
            Ok(_) => ingestor.with_firmware_images(FirmwareImages::from_env().await?),
            Err(_) => ingestor,
        })
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
        let firmware_report = report.firmware.as_ref();
        let ingested = self.ingest_reporting(registration, events, firmware_report, deadline);
        let (outcome, applied) = tokio::join!(ingested, async {
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
        // The update folded the check-in in; one that found a part it had not read (and the
        // report's update, when no batch update was sent) checks in on its own.
        let fold = outcome
            .firmware
            .clone()
            .or_else(|| applied.firmware.clone().map(FirmwareFold::Found));
        let mut reply = pending_work(&self.table, registration, versions, applied.into()).await?;
        let firmware = match fold {
            Some(fold) => {
                fold.check_in(
                    &self.table,
                    self.images.as_ref(),
                    registration,
                    firmware_report,
                )
                .await?
            }
            None => FirmwareCheckIn::default(),
        };
        reply.firmware = firmware.offer;
        reply.requests += firmware.requests;
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
        let images = self.images.as_ref();
        let reply = match sync_device_with_firmware(&self.table, images, registration, report).await
        {
            // Moved since this Lambda cached the registration: as the new owner's.
            Err(FleetError::Unauthorized) => match self.moved_registration(registration).await? {
                Some(moved) => {
                    let reply =
                        sync_device_with_firmware(&self.table, images, &moved, report).await?;
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
        self.ingest_reporting(registration, events, None, deadline)
            .await
    }

    /// [`Ingestor::ingest`] of a batch whose request also reported the device's `firmware`,
    /// which moves its open part in a firmware rollout within the same update.
    async fn ingest_reporting(
        &self,
        registration: &RegistrationItem,
        events: Vec<NewEvent>,
        firmware: Option<&FirmwareReport>,
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
                firmware: None,
            });
        }
        match self
            .update_state(registration, state, &rules, (&stored, firmware), deadline)
            .await
        {
            Ok(written) => Ok(IngestOutcome {
                accepted: stored.into_iter().map(|e| e.id).collect(),
                failed: failed.into_iter().map(|e| e.id).collect(),
                twin: written.as_ref().and_then(|folded| folded.twin),
                firmware: written.and_then(|folded| folded.firmware),
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
                    firmware: None,
                })
            }
        }
    }

    /// Folds `events` into the live state `base` and evaluates the owner's alarm `rules` on
    /// them, with one conditional UpdateItem, or, when an alarm is raised or cleared, one
    /// TransactWriteItems of the same update and the alarm writes ([`transition_actions`]);
    /// skipped when it would change nothing (a replay). On a conflict the failed write returns
    /// the current item, which is merged and evaluated again (no separate read). A device with
    /// an open part in a firmware rollout checks in here: its rollout is read once, and the
    /// move its `firmware` report (or the check-in itself) makes is written with the update,
    /// conditioned on the part as read. Returns what the write folded in ([`FoldedState`],
    /// `None` when skipped with nothing to check in).
    async fn update_state(
        &self,
        registration: &RegistrationItem,
        mut base: DeviceStateItem,
        rules: &[Rule],
        (events, firmware): (&[NewEvent], Option<&FirmwareReport>),
        deadline: Instant,
    ) -> Result<Option<FoldedState>, FleetError> {
        let device = &registration.device_id;
        let now = Timestamp::now();
        // The rollout of the device's open part, read once (again only if a conflict shows
        // another rollout's part).
        let mut rollout: Option<(RolloutId, Option<RolloutItem>)> = None;
        let mut rollout_reads = 0;
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
            let checked_in = match base.firmware.as_ref().filter(|p| p.open()) {
                Some(progress) => {
                    if rollout
                        .as_ref()
                        .is_none_or(|(id, _)| *id != progress.rollout_id)
                    {
                        let read =
                            read_rollout(&self.table, &registration.user_id, &progress.rollout_id)
                                .await?;
                        rollout_reads += 1;
                        rollout = Some((progress.rollout_id.clone(), read));
                    }
                    let terms = rollout_terms(rollout.as_ref().and_then(|(_, r)| r.as_ref()));
                    if let Some(moved) =
                        progress.checked_in(terms, firmware, next.has_open_alarm(), now)
                    {
                        next.firmware = Some(moved);
                    }
                    true
                }
                None => false,
            };
            // What the check-in tells the caller, from the part as the update left it.
            let fold = |written: &DeviceStateItem| -> Option<FirmwareFold> {
                if checked_in {
                    written
                        .firmware
                        .clone()
                        .map(|progress| FirmwareFold::CheckedIn {
                            progress,
                            rollout: rollout.as_ref().and_then(|(_, r)| r.clone()).map(Box::new),
                            requests: rollout_reads,
                        })
                } else {
                    OpenFirmware::of(written).map(FirmwareFold::Found)
                }
            };
            let (items, complete) = self
                .summarise(registration, &mut next, events, actions.len())
                .await?;
            if next == base && items.changed() == 0 {
                // A replay: nothing to write, but a check-in still answers with its offer.
                return Ok(checked_in.then(|| FoldedState {
                    twin: None,
                    firmware: fold(&base),
                }));
            }
            let summary = items.actions(
                &self.table,
                &SeriesOwner::of(registration, &next),
                self.series_retention(),
            )?;
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
                        // No item comes back from a transaction: what this update wrote.
                        return Ok(Some(FoldedState {
                            twin: Some(stored.twin),
                            firmware: checked_in.then(|| fold(&stored)).flatten(),
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
                    let (twin, firmware, stored) = match out.attributes {
                        Some(item) => {
                            let written = DeviceStateItem::from_item(item)?;
                            (
                                Some(written.twin),
                                fold(&written),
                                stored.with_copies_of(&written),
                            )
                        }
                        None => (None, None, stored),
                    };
                    // No summary item was written: the cached blocks are still current.
                    let carried = self.cached_blocks(device, base.ingest_seq);
                    self.remember_blocks(device, stored.ingest_seq, &carried);
                    self.remember_state(stored.clone());
                    return Ok(Some(FoldedState { twin, firmware }));
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
            owner: SeriesOwner::of(registration, next),
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
        let mut changes = changes
            .remove(DeviceStateItem::LEGACY_LATEST)
            .remove(DeviceStateItem::LEGACY_RECENT);
        let mut condition = unchanged_since_read(base);
        // A check-in's move of the device's firmware part, conditioned on the part as read
        // (the worker writes it too).
        if next.firmware != base.firmware {
            next.firmware_seq = base.firmware_seq + 1;
            changes = changes
                .set(
                    DeviceStateItem::FIRMWARE,
                    serde_dynamo::to_attribute_value(&next.firmware)?,
                )
                .set(
                    DeviceStateItem::FIRMWARE_SEQ,
                    number_value(next.firmware_seq),
                );
            condition = condition.and(DeviceStateItem::firmware_unchanged(base.firmware_seq));
        }
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
