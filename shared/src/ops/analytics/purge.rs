//! The purge of a deleted device's events, found from its purge marker (written by the
//! deletion's transaction), never by reading live devices' history. Bounded work per run: at
//! most [`PURGE_PER_RUN`] events per marker; the marker stays until its device's events from
//! before the deletion are gone.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{DeleteRequest, KeysAndAttributes, WriteRequest};

use crate::model::entities::device::DeviceItem;
use crate::model::entities::event::{registration_stamp, EventItem, EVENT_PREFIX};
use crate::model::entities::purge_marker::PurgeMarkerItem;
use crate::model::entities::series::{SeriesItem, SERIES_PREFIX};
use crate::model::entities::type_mark::{TypeMarkItem, TYPE_MARK_PREFIX};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions};
use crate::model::keys::{event_pk, PrimaryKey};
use crate::model::schema::{PK, SK};
use crate::store::dynamo::{
    get_all, key_prefix, key_range, number_value, query, string_value, throttled, write_all,
    BATCH_WRITE_SIZE,
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
    // The id registered again to the same owner: that registration's stamp. Its items (its
    // late readings from before the deletion instant, its summaries) stay; every other
    // registration's go.
    let current = registered_again(table, marker).await?;
    let not_current = |attribute| {
        current.map(|stamp| {
            Condition::absent(attribute).or(Condition::differs(attribute, number_value(stamp)))
        })
    };
    let events = Expressions::builder().projection(&[PK, SK]);
    let events = match not_current(EventItem::REGISTERED_AT) {
        Some(condition) => events.condition(condition),
        None => events,
    };
    let (items, more) = query(
        key_range(
            table,
            event_pk(&marker.user_id, &marker.device_id),
            EVENT_PREFIX,
            // Through the deletion instant: ids use only characters below `~`.
            format!("{EVENT_PREFIX}{}#~", marker.deleted_at),
            events,
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
        // the partition) go with its events (issue 38: they stayed up to 5 years). When the
        // id is registered again, only the items stamped by another registration: the new
        // device's are stamped with its own (`reg`); an unstamped item (written before
        // stamps) may be either's and stays, as before.
        let more_series = if more_marks.is_none() {
            let series = Expressions::builder().projection(&[PK, SK]);
            let series = match current {
                Some(stamp) => series.condition(Condition::exists(SeriesItem::REGISTERED_AT).and(
                    Condition::differs(SeriesItem::REGISTERED_AT, number_value(stamp)),
                )),
                None => series,
            };
            purge_pages(
                table,
                key_prefix(
                    table,
                    event_pk(&marker.user_id, &marker.device_id),
                    SERIES_PREFIX,
                    series,
                ),
                deadline,
            )
            .await?
        } else {
            false
        };
        if more_marks.is_none() && !more_series {
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

/// The registration stamp of the marker's device id if it is registered again to the same
/// owner (its device item exists): one consistent BatchGetItem of that one key. Not a
/// GetItem: the daily run's role has no single-item read (it reads in batches and never
/// reads a device for a write).
async fn registered_again(
    table: &FleetTable,
    marker: &PurgeMarkerItem,
) -> Result<Option<i64>, FleetError> {
    let key = ItemKey::device(&marker.user_id, &marker.device_id);
    let request = KeysAndAttributes::builder()
        .keys(key.attributes())
        .consistent_read(true)
        .build()
        .map_err(FleetError::internal)?;
    match get_all(table, request, &mut Retry::attempts(4))
        .await?
        .into_iter()
        .next()
    {
        Some(item) => Ok(Some(registration_stamp(
            &DeviceItem::from_item(item)?.created_at,
        ))),
        None => Ok(None),
    }
}

/// Deletes every item `request` finds, page after page (a filter may leave whole pages of
/// items that stay, so one page is not enough to make progress), until the deadline.
/// Whether items may be left.
async fn purge_pages(
    table: &FleetTable,
    request: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    deadline: Instant,
) -> Result<bool, FleetError> {
    let mut start = None;
    loop {
        let (items, last) = query(
            request
                .clone()
                .limit(PURGE_PER_RUN)
                .set_exclusive_start_key(start.take()),
        )
        .await?;
        delete_all(table, &items, deadline).await?;
        match last {
            None => return Ok(false),
            Some(_) if Instant::now() >= deadline => return Ok(true),
            Some(key) => start = Some(key),
        }
    }
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
