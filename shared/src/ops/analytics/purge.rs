//! The purge of events whose device was deleted (or re-registered to another user): which
//! partitions are orphaned, and the batched deletes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{DeleteRequest, KeysAndAttributes, WriteRequest};

use super::tally::text;
use crate::dynamo::{get_all, throttled, write_all, BATCH_GET_SIZE, BATCH_WRITE_SIZE};
use crate::error::FleetError;
use crate::keys::{parse_event_pk, ItemKey, PrimaryKey};
use crate::ops::RawItem;
use crate::retry::Retry;
use crate::schema::PK;
use crate::table::FleetTable;

/// How long past the run's deadline the purge of a page already read may keep retrying: the
/// page is checkpointed only once its purge is done.
const PURGE_GRACE: Duration = Duration::from_secs(30);

/// For each event partition `USER#u#DEVICE#d`: whether `DEVICE#d` is still registered to `u`.
pub(super) async fn check_registrations(
    table: &FleetTable,
    partitions: &[String],
    deadline: Instant,
) -> Result<Vec<(String, bool)>, FleetError> {
    let mut results = Vec::new();
    for chunk in partitions.chunks(BATCH_GET_SIZE) {
        let mut wanted: HashMap<String, (String, String)> = HashMap::new();
        let mut keys = Vec::new();
        for pk in chunk {
            let Ok((user, device)) = parse_event_pk(pk) else {
                results.push((pk.clone(), true));
                continue;
            };
            let key = ItemKey::Registration { device };
            wanted.insert(key.primary_key().pk, (pk.clone(), user.to_string()));
            keys.push(key.attributes());
        }
        let request = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .projection_expression("PK, userId")
            .consistent_read(true)
            .build()
            .map_err(FleetError::internal)?;
        let mut found: HashMap<String, String> = HashMap::new();
        for item in get_all(table, request, &mut Retry::until(deadline + PURGE_GRACE)).await? {
            if let (Some(pk), Some(user)) = (text(&item, PK), text(&item, "userId")) {
                found.insert(pk.to_string(), user.to_string());
            }
        }
        for (registration, (partition, user)) in wanted {
            let registered = found.get(&registration) == Some(&user);
            results.push((partition, registered));
        }
    }
    Ok(results)
}

/// Deletes `items` (by key) in BatchWriteItem calls of 25, retrying unprocessed ones.
pub(super) async fn delete_items(
    table: &FleetTable,
    items: Vec<RawItem>,
    deadline: Instant,
) -> Result<(), FleetError> {
    for chunk in items.chunks(BATCH_WRITE_SIZE) {
        let requests: Vec<WriteRequest> = chunk
            .iter()
            .map(|item| {
                DeleteRequest::builder()
                    .set_key(PrimaryKey::of(item).map(|key| key.attributes()))
                    .build()
                    .map(|d| WriteRequest::builder().delete_request(d).build())
                    .map_err(FleetError::internal)
            })
            .collect::<Result<_, _>>()?;
        let unprocessed =
            write_all(table, requests, &mut Retry::until(deadline + PURGE_GRACE)).await?;
        if !unprocessed.is_empty() {
            return Err(throttled());
        }
    }
    Ok(())
}
