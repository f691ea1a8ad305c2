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
//! Summaries (`series`, docs/design.md section 13) add nothing to the common path: the state
//! update, sent once the events are stored, counts the stored readings into the open buckets
//! it writes anyway, each once (per-bucket reading identities). A reading of a flushed bucket
//! (late, out of order, replayed) adds one consistent BatchGetItem of its block, day and month
//! items per batch, and a late one makes the state's write a transaction with them; when the
//! state passes one write unit, its closed 5-minute buckets go into their blocks in that
//! transaction (the one block that may hold earlier buckets read unless this warm Lambda wrote
//! it last). Nothing is ever recomputed from the raw readings.
//!
//! The device twin adds nothing when nothing is pending: the live-state update returns the
//! item as written (`ReturnValues=ALL_NEW`, which costs no capacity), whose twin versions say
//! whether a desired state or a command waits ([`IngestOutcome::twin`]); only then does
//! `ops::twin::device` read it. [`Ingestor::receive`] is the whole request: the batch, the
//! device's report and acknowledgements, and its pending work, as a typed [`BatchReceipt`].
//! A staged firmware rollout rides on the same update: a device whose live state has an open
//! part in a rollout (`firmware`) reads the rollout, and its check-in's move of the part is
//! written with the update, conditioned on the part as read (`ops::twin::firmware_offer`).
//!
//! [`Ingestor`] and its one `impl` (the write path, in order) are in `ingestor.rs`; the
//! modules beside it hold what it is made of and import nothing back: `validate` (the
//! submitted batch), `state` (merging a batch into the live state), `series` (the
//! summaries' part), `store` (the event items), `config` and `receipt` (the answer).

mod config;
mod ingestor;
mod receipt;
mod series;
pub mod silent;
mod state;
mod store;
mod validate;

pub use config::IngestConfig;
pub use ingestor::{batch_deadline, IngestOutcome, Ingestor};
pub use receipt::{BatchReceipt, IncompleteBatch, StoredBatch};
pub use series::SeriesRetention;
pub use state::{
    check_type_cap, item_bytes, state_with_batch, MAX_STATE_BYTES, MAX_STATE_TYPES, RECENT_EVENTS,
};
pub use store::raw_retention_days;
pub use validate::{
    validate_batch, NewEvent, SubmittedEvent, MAX_EVENTS_PER_BATCH, MAX_TEXT_VALUE,
};

pub use crate::model::offline::SEEN_GRANULARITY_SECONDS;

use crate::model::pattern_id::PatternId;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};

/// AP-14, implemented by [`Ingestor::ingest`] (defined here so the catalog names this module
/// as the pattern's home).
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
    key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION; the device's live state and PK = USER#{userId}, SK = RULES; events; on a transition its alarm (ALARM#{userId}#{deviceId}); the device's twin (PK = USER#{userId}#DEVICE#{deviceId}, SK = TWIN#... or COMMAND#...) only when it reports, acknowledges or has work pending; the rollout (PK = USER#{userId}, SK = ROLLOUT#{rolloutId}) only while its live state has an open part in a firmware rollout",
    budget: RequestBudget::BatchOf25PlusTwin(3),
    max_read_units: None,
    route: Some("POST /devices/{deviceId}/events"),
    implemented_by: implemented_by!(Ingestor::ingest),
};
/// Events per BatchWriteItem (DynamoDB's limit).
pub use crate::store::dynamo::BATCH_WRITE_SIZE;
