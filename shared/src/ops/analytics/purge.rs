//! The purge of a deleted device's events, found from its purge marker (written by the
//! deletion's transaction), never by reading live devices' history. Bounded work per run: at
//! most [`PURGE_PER_RUN`] events per marker; the marker stays until its device's events from
//! before the deletion are gone.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{DeleteRequest, KeysAndAttributes, WriteRequest};

use crate::model::entities::event::EVENT_PREFIX;
use crate::model::entities::purge_marker::PurgeMarkerItem;
use crate::model::entities::series::SERIES_PREFIX;
use crate::model::entities::type_mark::{TypeMarkItem, TYPE_MARK_PREFIX};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions};
use crate::model::keys::{event_pk, PrimaryKey};
use crate::model::schema::{PK, SK};
use crate::store::dynamo::{
    get_all, key_prefix, key_range, query, string_value, throttled, write_all, BATCH_WRITE_SIZE,
};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};

/// Most events one run deletes for one deleted device (a unit of work between checkpoints).
pub const PURGE_PER_RUN: i32 = 1_000;

/// How long past the run's deadline a purge already started may keep retrying: its unit is
/// checkpointed only once it is done.
const PURGE_GRACE: Duration = Duration::from_secs(30);

/// Deletes up to [`PURGE_PER_RUN`] of the marker's device's events from before its deletion,
/// then its type marks from before it and its summary items, and the marker once none is left. Returns how many
/// events it deleted.
pub(super) async fn purge_device(
    table: &FleetTable,
    marker: &PurgeMarkerItem,
    deadline: Instant,
) -> Result<u64, FleetError> {
    let (items, more) = query(
        key_range(
            table,
            event_pk(&marker.user_id, &marker.device_id),
            EVENT_PREFIX,
            // Through the deletion instant: ids use only characters below `~`.
            format!("{EVENT_PREFIX}{}#~", marker.deleted_at),
            Expressions::builder().projection(&[PK, SK]),
        )
        .limit(PURGE_PER_RUN),
    )
    .await?;
    let purged = items.len() as u64;
    delete_all(table, &items, deadline).await?;
    if more.is_none() {
        // Its type marks from before the deletion go too: they name the device, and AP-09
        // would read a gone device's partition for each. A mark's window may reach past the
        // deletion; a mark of a later window is a re-registered device's and stays.
        let (marks, more_marks) = query(
            key_prefix(
                table,
                event_pk(&marker.user_id, &marker.device_id),
                TYPE_MARK_PREFIX,
                Expressions::builder()
                    .condition(Condition::at_most(
                        TypeMarkItem::WINDOW,
                        string_value(marker.deleted_at.to_string()),
                    ))
                    .projection(&[PK, SK]),
            )
            .limit(PURGE_PER_RUN),
        )
        .await?;
        delete_all(table, &marks, deadline).await?;
        // Its summary items (5-minute blocks, day and month items: everything `SERIES#` in
        // the partition) go with its events (issue 38: they stayed up to 5 years). Not when
        // the id was registered again meanwhile: the partition's summaries may then hold the
        // new device's readings, and nothing tells them apart (docs/design.md section 13).
        let more_series = if more_marks.is_none() && !registered_again(table, marker).await? {
            let (series, more_series) = query(
                key_prefix(
                    table,
                    event_pk(&marker.user_id, &marker.device_id),
                    SERIES_PREFIX,
                    Expressions::builder().projection(&[PK, SK]),
                )
                .limit(PURGE_PER_RUN),
            )
            .await?;
            delete_all(table, &series, deadline).await?;
            more_series
        } else {
            None
        };
        if more_marks.is_none() && more_series.is_none() {
            table
                .client
                .delete_item()
                .table_name(table.name())
                .set_key(Some(marker.item_key().attributes()))
                .send()
                .await
                .map_err(sdk_error)?;
        }
    }
    Ok(purged)
}

/// Whether the marker's device id is registered again to the same owner (its device item
/// exists): one consistent BatchGetItem of that one key. Not a GetItem: the daily run's role
/// has no single-item read (it reads in batches and never reads a device for a write).
async fn registered_again(
    table: &FleetTable,
    marker: &PurgeMarkerItem,
) -> Result<bool, FleetError> {
    let key = ItemKey::device(&marker.user_id, &marker.device_id);
    let request = KeysAndAttributes::builder()
        .keys(key.attributes())
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    Ok(!get_all(table, request, &mut Retry::attempts(4))
        .await?
        .is_empty())
}

/// Deletes `items` (keys) in BatchWriteItem calls of 25, retrying unprocessed ones while the
/// deadline (and its grace) allows.
async fn delete_all(
    table: &FleetTable,
    items: &[crate::model::schema::Item],
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
