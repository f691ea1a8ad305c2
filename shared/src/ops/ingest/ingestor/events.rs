//! [`Ingestor`] writing a batch's events and type marks (the first step of a batch: the live
//! state counts only what these writes stored).

use super::*;

impl Ingestor {
    /// Writes the events, and one type mark per searchable type and window the batch holds
    /// ([`TypeMarkItem`]), in concurrent BatchWriteItem calls of 25, retrying unprocessed items
    /// and throttled calls with full-jitter backoff until `deadline`. Returns the (at, id) of
    /// the events that could not be written; a mark that could not be written fails every
    /// event of its type and window (AP-09 finds a device's events through its marks), so the
    /// device resends them and the resend writes the mark again.
    pub(super) async fn store_events(
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

    pub(super) async fn write_chunk(
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
