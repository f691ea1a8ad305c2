//! How the demo data's readings are stored: through the ingest path, as a device's batch would
//! be (the personal demo fleets' and the demo organization's alike).

use std::time::{Duration, Instant};

use shared::model::ids::DeviceId;
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, SubmittedEvent};
use shared::{FleetError, FleetTable};

/// Ingests `submitted` for `device` as its batch would be.
pub(crate) async fn store_readings(
    table: &FleetTable,
    device: &str,
    token: &str,
    submitted: Vec<SubmittedEvent>,
) -> Result<(), FleetError> {
    let ingestor = Ingestor::new(table.clone(), IngestConfig::default());
    let registration = ingestor
        .authenticate(&DeviceId::parse(device)?, token)
        .await?;
    let now = Timestamp::now();
    let events = validate_batch(
        submitted,
        now,
        table.config.retention_days,
        Duration::from_secs(300),
    )?;
    let outcome = ingestor
        .ingest(
            &registration,
            events,
            Instant::now() + Duration::from_secs(30),
        )
        .await?;
    if outcome.failed.is_empty() {
        Ok(())
    } else {
        Err(FleetError::internal(format!(
            "demo readings of {device} not stored"
        )))
    }
}

/// When a demo reading fixed at `fixed` happens: then, while that is inside the table's
/// retention (with a day to spare), else an hour ago, so an old demo time still stores.
pub(crate) fn fixed_or_recent(table: &FleetTable, fixed: &str) -> Result<Timestamp, FleetError> {
    let now = Timestamp::now();
    let fixed = Timestamp::parse_field("at", fixed)?;
    let retention = i64::from(table.config.retention_days) * 86_400;
    Ok(
        if fixed.epoch_seconds() > now.epoch_seconds() - retention + 86_400 {
            fixed
        } else {
            now.plus_seconds(-3600)
        },
    )
}
