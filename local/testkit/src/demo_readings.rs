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
