//! The reference dataset's fixed facts: its users, its day and retention, and ingest as of that
//! day. A leaf that the seed (`reference.rs`) and the cases (`reference/cases/`) share.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use shared::model::entities::registration::RegistrationItem;
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{validate_batch, IngestOutcome, Ingestor, SubmittedEvent};
use shared::FleetError;

/// The reference time: every event of the dataset is on this day, before it.
pub const REFERENCE_NOW: &str = "2026-11-20T12:00:00.000Z";
/// Retention the reference table runs with, so the fixed timestamps stay valid.
pub const REFERENCE_RETENTION_DAYS: u32 = 3650;
/// The user with 10 devices x 10 events.
pub const ALICE: &str = "ref-alice";
/// A second user.
pub const BOB: &str = "ref-bob";

pub(crate) fn now() -> Timestamp {
    Timestamp::parse_field("now", REFERENCE_NOW).expect("valid constant")
}

/// The device tokens of the dataset, by device id.
pub type Tokens = BTreeMap<String, String>;

/// Validates `events` as the ingest function would at the reference time and stores them for
/// the device of `registration`.
pub(crate) async fn ingest_at_reference_time(
    ingestor: &Ingestor,
    registration: &RegistrationItem,
    events: Vec<SubmittedEvent>,
) -> Result<IngestOutcome, FleetError> {
    let batch = validate_batch(
        events,
        now(),
        REFERENCE_RETENTION_DAYS,
        Duration::from_secs(300),
    )?;
    ingestor
        .ingest(
            registration,
            batch,
            Instant::now() + Duration::from_secs(30),
        )
        .await
}
