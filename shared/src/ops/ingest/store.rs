//! A batch's events and type marks as BatchWriteItem puts (written by
//! `Ingestor::store_events`, in concurrent calls of 25 retried until the deadline).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};

use super::validate::NewEvent;
use crate::model::entities::event::{registration_stamp, EventItem};
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::type_mark::{type_window, TypeMarkItem, TYPE_WINDOW_SECONDS};
use crate::model::entities::Entity;
use crate::model::error::FleetError;
use crate::model::ids::{EventId, EventType};
use crate::model::settings::FleetConfig;
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;

/// One BatchWriteItem put and the (at, id) of the events that stand or fall with it: its own
/// event, or every event a type mark leads AP-09 to.
pub(super) type EventWrite = (Vec<(Timestamp, EventId)>, WriteRequest);

/// Days `registration`'s raw readings are kept (their events' and 5-minute blocks' `ttl`):
/// its owner's setting for its device type, copied onto the registration by
/// `PUT /me/retention` and by registration (no read per batch), never past the template's
/// `RETENTION_DAYS`.
pub fn raw_retention_days(registration: &RegistrationItem, config: &FleetConfig) -> u32 {
    registration.raw_retention_days(config.retention_days)
}

/// The puts of a batch: each event as its [`EventItem`] (expiring `retention_days` after its
/// time), and one type mark per searchable type and window the batch holds
/// ([`TypeMarkItem`]). A mark that cannot be written fails every event of its type and window,
/// so the device resends them and the resend writes the mark again.
pub(super) fn event_writes(
    registration: &RegistrationItem,
    events: &[NewEvent],
    retention_days: u32,
    shards: &ShardCounts,
) -> Result<Vec<EventWrite>, FleetError> {
    let ttl_seconds = i64::from(retention_days) * 86_400;
    let stamp = registration_stamp(&registration.created_at);
    let mut items = Vec::with_capacity(events.len() + 1);
    let mut marks: BTreeMap<(EventType, Timestamp), Vec<(Timestamp, EventId)>> = BTreeMap::new();
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
            registered_at: Some(stamp),
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
    Ok(items)
}

/// A BatchWriteItem put of `entity`.
fn put(entity: &impl Entity, shards: &ShardCounts) -> Result<WriteRequest, FleetError> {
    let put = PutRequest::builder()
        .set_item(Some(entity.to_item(shards)?))
        .build()
        .map_err(FleetError::internal)?;
    Ok(WriteRequest::builder().put_request(put).build())
}
