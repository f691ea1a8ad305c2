//! Storing a batch's events and its type marks: concurrent BatchWriteItem calls of 25,
//! retried until the deadline.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};

use super::{Ingestor, NewEvent};
use crate::model::entities::event::EventItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::type_mark::{type_window, TypeMarkItem, TYPE_WINDOW_SECONDS};
use crate::model::entities::Entity;
use crate::model::error::FleetError;
use crate::model::ids::{EventId, EventType};
use crate::model::keys::PrimaryKey;
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;
use crate::store::dynamo::{scatter_gather, write_all, BATCH_WRITE_SIZE};
use crate::store::retry::Retry;

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
        let ttl_seconds = i64::from(self.table.config.retention_days) * 86_400;
        let shards = &self.table.config.shards;
        let mut items = Vec::with_capacity(events.len() + 1);
        let mut marks: BTreeMap<(EventType, Timestamp), Vec<(Timestamp, EventId)>> =
            BTreeMap::new();
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
            items.push((vec![(e.at, e.id.clone())], put(&item, shards)?));
            if shards.type_shards(&e.event_type).is_some() {
                marks
                    .entry((e.event_type.clone(), type_window(&e.at)))
                    .or_default()
                    .push((e.at, e.id.clone()));
            }
        }
        for ((event_type, window), marked) in marks {
            let mark = TypeMarkItem {
                user_id: registration.user_id.clone(),
                device_id: registration.device_id.clone(),
                event_type,
                window,
                device_name: registration.device_name.clone(),
                // Its last events' expiry: a mark must outlive every event it leads AP-09 to.
                ttl: window.epoch_seconds() + TYPE_WINDOW_SECONDS + ttl_seconds,
            };
            items.push((marked, put(&mark, shards)?));
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
        chunk: Vec<(Vec<(Timestamp, EventId)>, WriteRequest)>,
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

/// A BatchWriteItem put of `entity`.
fn put(entity: &impl Entity, shards: &ShardCounts) -> Result<WriteRequest, FleetError> {
    let put = PutRequest::builder()
        .set_item(Some(entity.to_item(shards)?))
        .build()
        .map_err(FleetError::internal)?;
    Ok(WriteRequest::builder().put_request(put).build())
}
