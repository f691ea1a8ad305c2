//! Storing a batch's events: concurrent BatchWriteItem calls of 25, retried until the
//! deadline.

use std::collections::HashSet;
use std::time::Instant;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};

use super::{Ingestor, NewEvent};
use crate::model::entity::Entity;
use crate::model::error::FleetError;
use crate::model::ids::EventId;
use crate::model::items::{EventItem, RegistrationItem};
use crate::model::keys::PrimaryKey;
use crate::model::timestamp::Timestamp;
use crate::store::dynamo::{scatter_gather, write_all, BATCH_WRITE_SIZE};
use crate::store::retry::Retry;

impl Ingestor {
    /// Writes the events in concurrent BatchWriteItem calls of 25, retrying unprocessed items
    /// and throttled calls with full-jitter backoff until `deadline`. Returns the (at, id) of
    /// the events that could not be written.
    pub(super) async fn store_events(
        &self,
        registration: &RegistrationItem,
        events: &[NewEvent],
        deadline: Instant,
    ) -> Result<HashSet<(Timestamp, EventId)>, FleetError> {
        let ttl_seconds = i64::from(self.table.config.retention_days) * 86_400;
        let mut items = Vec::with_capacity(events.len());
        for e in events {
            let item = EventItem {
                user_id: registration.user_id.clone(),
                device_id: registration.device_id.clone(),
                id: e.id.clone(),
                event_type: e.event_type.clone(),
                value: e.value.clone(),
                at: e.at,
                device_name: registration.device_name.clone(),
                device_type: registration.device_type.clone(),
                ttl: e.at.epoch_seconds() + ttl_seconds,
            };
            let put = PutRequest::builder()
                .set_item(Some(item.to_item(&self.table.config.shards)?))
                .build()
                .map_err(FleetError::internal)?;
            items.push((
                (e.at, e.id.clone()),
                WriteRequest::builder().put_request(put).build(),
            ));
        }
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
        chunk: Vec<((Timestamp, EventId), WriteRequest)>,
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
            .map(|(event, _)| event)
            .collect())
    }
}
