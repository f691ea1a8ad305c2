//! The history part of a move (AP-M1): copying what is keyed by the old owner to the new one,
//! phase by phase from the move marker, in bounded, resumable, idempotent steps (docs/design.md,
//! "Moving a device between owners").

use std::time::Instant;

use aws_sdk_dynamodb::types::{
    Delete, DeleteRequest, Put, PutRequest, TransactWriteItem, Update, WriteRequest,
};

use crate::model::entities::alarm::{alarm_pk, AlarmItem};
use crate::model::entities::command::{CommandItem, COMMAND_PREFIX};
use crate::model::entities::desired_state::DesiredStateItem;
use crate::model::entities::device_move::{DeviceMoveItem, MovePhase};
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::event::{EventItem, EVENT_PREFIX};
use crate::model::entities::open_alarm::OpenAlarmItem;
use crate::model::entities::reported_state::ReportedStateItem;
use crate::model::entities::series::{SeriesItem, SERIES_PREFIX};
use crate::model::entities::type_mark::TypeMarkItem;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::keys::{event_pk, PrimaryKey};
use crate::model::schema::{Item, KEY_ATTRIBUTES, PK, SK};
use crate::store::dynamo::{
    number_value, query, string_value, transact, write_all, Transaction, BATCH_WRITE_SIZE,
};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// Items read from the source per Query: a page copies in well under a second, so a run
/// stops close to its deadline.
pub(super) const PAGE_ITEMS: i32 = 1_000;

/// BatchWriteItem calls in flight at once while copying events.
pub(super) const CONCURRENT_BATCHES: usize = 8;

/// Items copied between two looks at the deadline: one round of [`CONCURRENT_BATCHES`].
pub(super) const CHUNK_ITEMS: usize = CONCURRENT_BATCHES * BATCH_WRITE_SIZE;

/// Items per transaction when copying what can change under the copy (each is a put at the
/// target and a delete at the source: two of DynamoDB's 100 actions).
pub(super) const ITEMS_PER_TRANSACTION: usize = 50;

/// Attempts of a transaction against concurrent writers: the live transaction's (a batch
/// changing the live state, a PATCH, a registration growing the target fleet) and a summary
/// item's merge.
pub(super) const MOVE_ATTEMPTS: u32 = 5;

/// The source partition and sort-key condition of `phase` of the move of `marker`.
fn phase_range(marker: &DeviceMoveItem) -> (String, Option<Condition>) {
    let from = &marker.from_user_id;
    let device = &marker.device_id;
    match marker.phase {
        MovePhase::Alarms => (alarm_pk(from, device), None),
        MovePhase::Commands => (
            event_pk(from, device),
            Some(Condition::begins_with(SK, string_value(COMMAND_PREFIX))),
        ),
        MovePhase::Summaries => (
            event_pk(from, device),
            Some(Condition::at_least(SK, string_value(SERIES_PREFIX))),
        ),
        MovePhase::Events => (
            event_pk(from, device),
            Some(Condition::begins_with(SK, string_value(EVENT_PREFIX))),
        ),
    }
}

/// Copies the history of the move of `marker` to its new owner until `until` or the end,
/// recording its progress on `marker`. Returns whether every item is copied.
///
/// Safe to repeat and to stop anywhere: events and type marks never change once written, so
/// they are put at the target, then deleted at the source (a run that stops between the two
/// puts them again); what can change under the copy (alarms, commands, summaries, twin
/// documents) moves in transactions, each item put at the target only where the new owner
/// has not written it since the move, and deleted at the source in the same transaction.
pub async fn copy_history(
    table: &FleetTable,
    marker: &mut DeviceMoveItem,
    until: Instant,
) -> Result<bool, FleetError> {
    loop {
        if Instant::now() >= until {
            return Ok(false);
        }
        let (pk, sort) = phase_range(marker);
        let mut key = Condition::equals(PK, string_value(pk.clone()));
        if let Some(sort) = sort {
            key = key.and(sort);
        }
        let start = marker.resume_after.as_ref().map(|sk| {
            PrimaryKey {
                pk: pk.clone(),
                sk: sk.clone(),
            }
            .attributes()
        });
        let request = table
            .client
            .query()
            .table_name(table.name())
            .expressions(Expressions::builder().key_condition(key).build())
            .consistent_read(true)
            .limit(PAGE_ITEMS)
            .set_exclusive_start_key(start);
        let (items, next) = query(request).await?;
        // A page goes in chunks, so a run stops close to its deadline.
        for chunk in items.chunks(CHUNK_ITEMS) {
            if Instant::now() >= until {
                return Ok(false);
            }
            if marker.cancelled_at.is_some() {
                delete_source(table, chunk).await?;
            } else if marker.phase == MovePhase::Events {
                copy_events(table, marker, chunk).await?;
            } else {
                copy_changing(table, marker, chunk).await?;
            }
            if marker.cancelled_at.is_none() {
                marker.items_moved += chunk.len() as u64;
            }
            marker.resume_after = chunk.last().and_then(PrimaryKey::of).map(|k| k.sk);
        }
        if next.is_none() {
            match marker.phase.next() {
                Some(phase) => {
                    marker.phase = phase;
                    marker.resume_after = None;
                }
                None => return Ok(true),
            }
        }
    }
}

/// The item `item` of the move of `marker` as its new owner stores it: keys, index keys and
/// owner from its entity with the owner (and, for an alarm, the placement) changed; every other
/// attribute as it was.
fn rehomed(table: &FleetTable, marker: &DeviceMoveItem, item: &Item) -> Result<Item, FleetError> {
    let to = &marker.to_user_id;
    let shards = &table.config.shards;
    fn change<E: Entity>(item: &Item, f: impl FnOnce(&mut E)) -> Result<E, FleetError> {
        let mut entity = E::from_item(item.clone())?;
        f(&mut entity);
        Ok(entity)
    }
    let moved = match EntityType::of(item) {
        Some(EntityType::Event) => {
            change(item, |e: &mut EventItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::TypeMark) => {
            change(item, |e: &mut TypeMarkItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::Series) => {
            change(item, |e: &mut SeriesItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::DesiredState) => {
            change(item, |e: &mut DesiredStateItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::ReportedState) => {
            change(item, |e: &mut ReportedStateItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::Command) => {
            change(item, |e: &mut CommandItem| e.user_id = to.clone())?.to_item(shards)?
        }
        Some(EntityType::Alarm) => change(item, |e: &mut AlarmItem| {
            e.user_id = to.clone();
            e.partition = marker.partition;
        })?
        .to_item(shards)?,
        Some(EntityType::OpenAlarm) => {
            change(item, |e: &mut OpenAlarmItem| e.user_id = to.clone())?.to_item(shards)?
        }
        other => {
            return Err(FleetError::internal(format!(
                "a {:?} item in a moved device's history",
                other.map(|t| t.as_str())
            )))
        }
    };
    let mut out = item.clone();
    for attribute in KEY_ATTRIBUTES {
        out.remove(attribute.name());
    }
    out.extend(moved);
    Ok(out)
}

/// The key attributes of a stored item.
fn key_of(item: &Item) -> Result<Item, FleetError> {
    PrimaryKey::of(item)
        .map(|k| k.attributes())
        .ok_or_else(|| FleetError::internal("an item without PK and SK"))
}

/// Events and type marks (never changed once written): put at the target in concurrent
/// BatchWriteItems, then deleted at the source the same way.
async fn copy_events(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    items: &[Item],
) -> Result<(), FleetError> {
    let mut puts = Vec::with_capacity(items.len());
    let mut deletes = Vec::with_capacity(items.len());
    for item in items {
        let put = PutRequest::builder()
            .set_item(Some(rehomed(table, marker, item)?))
            .build()
            .map_err(FleetError::internal)?;
        puts.push(WriteRequest::builder().put_request(put).build());
        let delete = DeleteRequest::builder()
            .set_key(Some(key_of(item)?))
            .build()
            .map_err(FleetError::internal)?;
        deletes.push(WriteRequest::builder().delete_request(delete).build());
    }
    write_batches(table, puts).await?;
    write_batches(table, deletes).await
}

/// Deletes `items` at the source of a cancelled move (the device was deleted at its new
/// owner): what the copy had not reached yet goes with the deleted device.
async fn delete_source(table: &FleetTable, items: &[Item]) -> Result<(), FleetError> {
    let mut deletes = Vec::with_capacity(items.len());
    for item in items {
        let delete = DeleteRequest::builder()
            .set_key(Some(key_of(item)?))
            .build()
            .map_err(FleetError::internal)?;
        deletes.push(WriteRequest::builder().delete_request(delete).build());
    }
    write_batches(table, deletes).await
}

/// Writes `requests` in BatchWriteItems of 25, [`CONCURRENT_BATCHES`] at a time (on this task,
/// so the request meter sees them); [`crate::store::dynamo::throttled`] if any is left.
async fn write_batches(table: &FleetTable, requests: Vec<WriteRequest>) -> Result<(), FleetError> {
    let batches: Vec<Vec<WriteRequest>> = requests
        .chunks(BATCH_WRITE_SIZE)
        .map(<[WriteRequest]>::to_vec)
        .collect();
    for group in batches.chunks(CONCURRENT_BATCHES) {
        let results = futures::future::join_all(group.iter().cloned().map(|batch| async move {
            let mut retry = Retry::attempts(MAX_ATTEMPTS);
            write_all(table, batch, &mut retry).await
        }))
        .await;
        for left in results {
            if !left?.is_empty() {
                return Err(crate::store::dynamo::throttled());
            }
        }
    }
    Ok(())
}

/// Items that can change under the copy, in transactions of [`ITEMS_PER_TRANSACTION`]: each
/// put at the target where the new owner has no such item yet and deleted at the source.
/// An item the new owner wrote since the move is newer than the copy and is kept; a summary
/// item gets the copy's buckets the new owner's lacks ([`merge_summary`]).
///
/// Summary items are written by ingest only in transactions conditioned on the live state's
/// `ingestSeq`, which reads them first (issue 38): a copy that wrote them behind its back
/// could be overwritten by an attempt that read them before. So a transaction that copies
/// summary items also moves the new owner's `ingestSeq` ([`fence_summaries`]): an ingest
/// attempt that read before the copy fails its condition and reads again (finding the copy).
async fn copy_changing(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    items: &[Item],
) -> Result<(), FleetError> {
    let per_transaction = if marker.phase == MovePhase::Summaries {
        ITEMS_PER_TRANSACTION - 1
    } else {
        ITEMS_PER_TRANSACTION
    };
    for chunk in items.chunks(per_transaction) {
        let mut pending: Vec<&Item> = chunk.iter().collect();
        let mut fenced = marker.phase == MovePhase::Summaries;
        while !pending.is_empty() {
            let mut actions = Vec::with_capacity(2 * pending.len() + 1);
            for item in &pending {
                let put = Put::builder()
                    .table_name(table.name())
                    .set_item(Some(rehomed(table, marker, item)?))
                    .expressions(Expressions::condition(Condition::absent(PK)))
                    .build()
                    .map_err(FleetError::internal)?;
                actions.push(TransactWriteItem::builder().put(put).build());
                let delete = Delete::builder()
                    .table_name(table.name())
                    .set_key(Some(key_of(item)?))
                    .build()
                    .map_err(FleetError::internal)?;
                actions.push(TransactWriteItem::builder().delete(delete).build());
            }
            if fenced {
                actions.push(fence_summaries(table, marker)?);
            }
            match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
                Transaction::Committed => break,
                Transaction::Cancelled(reasons) => {
                    if fenced
                        && reasons.get(2 * pending.len()).and_then(|r| r.code())
                            == Some("ConditionalCheckFailed")
                    {
                        // No live state at the new owner: the device was deleted there (its
                        // move is being cancelled) and nobody ingests for it.
                        fenced = false;
                        continue;
                    }
                    let taken: Vec<usize> = (0..pending.len())
                        .filter(|i| {
                            reasons.get(2 * i).and_then(|r| r.code())
                                == Some("ConditionalCheckFailed")
                        })
                        .collect();
                    if taken.is_empty() {
                        return Err(FleetError::internal(format!(
                            "history copy cancelled: {reasons:?}"
                        )));
                    }
                    for &i in &taken {
                        merge_taken(table, marker, pending[i]).await?;
                    }
                    pending = pending
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| !taken.contains(i))
                        .map(|(_, item)| item)
                        .collect();
                }
            }
        }
    }
    Ok(())
}

/// The update that moves the new owner's live-state `ingestSeq` on, where that state exists:
/// what serializes a copy of summary items with ingest's writes of them.
fn fence_summaries(
    table: &FleetTable,
    marker: &DeviceMoveItem,
) -> Result<TransactWriteItem, FleetError> {
    let state = ItemKey::DeviceState {
        user: marker.to_user_id.clone(),
        partition: marker.partition,
        device: marker.device_id.clone(),
    };
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(state.attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new().increment(DeviceStateItem::INGEST_SEQ, number_value(1)),
            Some(Condition::exists(PK)),
        ))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// An item of the source that the new owner wrote too since the move: a summary item is
/// merged ([`merge_summary`]), anything else kept as the new owner wrote it; the source's goes.
async fn merge_taken(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    item: &Item,
) -> Result<(), FleetError> {
    if EntityType::of(item) == Some(EntityType::Series) {
        return merge_summary(table, marker, item).await;
    }
    table
        .client
        .delete_item()
        .table_name(table.name())
        .set_key(Some(key_of(item)?))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(())
}

/// A summary item both owners have: the new owner's buckets with the ones only the copy has
/// added (the new owner's are newer where both have one), written on the condition that the
/// new owner's item is unchanged since read, with the source's delete, in one transaction.
async fn merge_summary(
    table: &FleetTable,
    marker: &DeviceMoveItem,
    item: &Item,
) -> Result<(), FleetError> {
    let source = SeriesItem::from_item(item.clone())?;
    let target_key = SeriesItem {
        user_id: marker.to_user_id.clone(),
        ..source.clone()
    }
    .item_key();
    // Written with the new owner's `ingestSeq` moved on, as a copy is (see [`copy_changing`]).
    let mut fenced = true;
    for _ in 0..MOVE_ATTEMPTS {
        let out = table
            .client
            .get_item()
            .table_name(table.name())
            .set_key(Some(target_key.attributes()))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let (mut merged, unchanged) = match out.item {
            Some(stored) => {
                let buckets = stored.get(SeriesItem::BUCKETS.name()).cloned();
                let target = SeriesItem::from_item(stored)?;
                let condition = match buckets {
                    Some(b) => Condition::equals(SeriesItem::BUCKETS, b),
                    None => Condition::absent(SeriesItem::BUCKETS),
                };
                (target, condition)
            }
            None => (
                SeriesItem {
                    user_id: marker.to_user_id.clone(),
                    ..source.clone()
                },
                Condition::absent(PK),
            ),
        };
        // Ingest builds a summary item the new owner lacks from the source's during a move
        // (`ops::ingest`'s fallback read), so the new owner's holds the source's buckets; a
        // bucket only the source has comes with its reading identities.
        for (start, bucket) in &source.buckets.0 {
            if !merged.buckets.0.contains_key(start) {
                merged.buckets.0.insert(*start, bucket.clone());
                if let Some(ids) = source.ids.0.get(start) {
                    merged.ids.0.insert(*start, ids.clone());
                }
            }
        }
        merged.ttl = merged.ttl.max(source.ttl);
        let put = Put::builder()
            .table_name(table.name())
            .set_item(Some(merged.to_item(&table.config.shards)?))
            .expressions(Expressions::condition(unchanged))
            .build()
            .map_err(FleetError::internal)?;
        let delete = Delete::builder()
            .table_name(table.name())
            .set_key(Some(key_of(item)?))
            .build()
            .map_err(FleetError::internal)?;
        let mut actions = vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().delete(delete).build(),
        ];
        if fenced {
            actions.push(fence_summaries(table, marker)?);
        }
        match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => return Ok(()),
            // No live state at the new owner (deleted there): nothing to fence.
            Transaction::Cancelled(reasons)
                if fenced
                    && reasons.get(2).and_then(|r| r.code()) == Some("ConditionalCheckFailed") =>
            {
                fenced = false
            }
            Transaction::Cancelled(_) => {}
        }
    }
    Err(crate::store::dynamo::throttled())
}
