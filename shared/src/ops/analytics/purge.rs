//! The purge of events whose device was deleted (or re-registered to another user): which
//! partitions are orphaned, and the batched deletes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, KeysAndAttributes, WriteRequest};

use super::tally::text;
use crate::dynamo::{get_all, throttled, write_all, BATCH_GET_SIZE, BATCH_WRITE_SIZE};
use crate::error::FleetError;
use crate::keys::{registration_pk, REGISTRATION_SK};
use crate::ops::{s, RawItem};
use crate::retry::Retry;
use crate::schema::{PK, SK};
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
            // `USER#{u}#DEVICE#{d}`.
            let parts: Vec<&str> = pk.split('#').collect();
            let [_, user, _, device] = parts.as_slice() else {
                results.push((pk.clone(), true));
                continue;
            };
            let registration = registration_pk(&crate::ids::DeviceId::parse(*device)?);
            wanted.insert(registration.clone(), (pk.clone(), user.to_string()));
            keys.push(HashMap::from([
                (PK.to_string(), s(registration)),
                (SK.to_string(), s(REGISTRATION_SK)),
            ]));
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
                let key: HashMap<String, AttributeValue> = [PK, SK]
                    .iter()
                    .filter_map(|k| item.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect();
                DeleteRequest::builder()
                    .set_key(Some(key))
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
