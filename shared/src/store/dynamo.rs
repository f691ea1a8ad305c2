//! DynamoDB plumbing shared by the operations: the multi-request calls (write all, get all,
//! transact) with the one retry policy of [`crate::store::retry`], and scatter-gather over the shards
//! of a write-sharded index.
//!
//! Every call here is metered (operations, attempts and consumed capacity) like any other.

use std::cmp::Ordering;
use std::future::Future;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    CancellationReason, KeysAndAttributes, TransactWriteItem, WriteRequest,
};
use aws_smithy_types::error::display::DisplayErrorContext;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, ExpressionsBuilder};
use crate::model::schema::{Item, PK, SK};
use crate::model::token::random_id;
use crate::store::metrics::{RequestMeter, DEPENDENCY_UNREACHABLE};
use crate::store::retry::Retry;
use crate::store::table::{
    cancelled_transiently, is_transient, sdk_error, transient, FleetTable, Transient,
    RETRY_AFTER_SECONDS,
};
use crate::store::with_expressions::WithExpressions;

/// Most write requests in one BatchWriteItem.
pub const BATCH_WRITE_SIZE: usize = 25;
/// Most keys in one BatchGetItem.
pub const BATCH_GET_SIZE: usize = 100;

/// The 503 a caller answers when the retry policy ran out.
pub fn throttled() -> FleetError {
    FleetError::Throttled {
        retry_after_seconds: RETRY_AFTER_SECONDS,
    }
}

/// Sends one batch (at most [`BATCH_WRITE_SIZE`] requests) with BatchWriteItem, again and again
/// for the `UnprocessedItems` and after transient errors, while `retry` allows. Returns the
/// requests still unprocessed when it stopped (empty when all were written); an error that is
/// not transient is returned at once.
pub async fn write_all(
    table: &FleetTable,
    requests: Vec<WriteRequest>,
    retry: &mut Retry,
) -> Result<Vec<WriteRequest>, FleetError> {
    let mut pending = requests;
    let mut last_failure = None;
    while !pending.is_empty() && retry.next_attempt().await {
        let result = table
            .client
            .batch_write_item()
            .request_items(table.name(), pending.clone())
            .send()
            .await;
        match result {
            Ok(out) => {
                pending = out
                    .unprocessed_items
                    .and_then(|mut u| u.remove(table.name()))
                    .unwrap_or_default();
            }
            Err(err) if is_transient(&err) => {
                last_failure = transient(&err);
                tracing::warn!(attempt = retry.attempt(), error = %DisplayErrorContext(&err), "batch write failed, retrying");
            }
            Err(err) => return Err(sdk_error(err)),
        }
    }
    // Items left because DynamoDB could not be reached: the request's answer says so in its
    // metrics and log line, whatever its body (ingest names the ids to resend).
    if !pending.is_empty() && last_failure == Some(Transient::Unreachable) {
        RequestMeter::set_figure(DEPENDENCY_UNREACHABLE, 1.0);
    }
    Ok(pending)
}

/// Reads the items of `request` (at most [`BATCH_GET_SIZE`] keys) with BatchGetItem, again for
/// the `UnprocessedKeys`, while `retry` allows; [`throttled`] when it runs out first.
pub async fn get_all(
    table: &FleetTable,
    request: KeysAndAttributes,
    retry: &mut Retry,
) -> Result<Vec<Item>, FleetError> {
    let mut found = Vec::new();
    let mut pending = Some(request);
    while let Some(request) = pending.take().filter(|r| !r.keys().is_empty()) {
        if !retry.next_attempt().await {
            return Err(throttled());
        }
        let out = table
            .client
            .batch_get_item()
            .request_items(table.name(), request)
            .send()
            .await
            .map_err(sdk_error)?;
        found.extend(out.responses.unwrap_or_default().into_values().flatten());
        pending = out
            .unprocessed_keys
            .and_then(|mut u| u.remove(table.name()));
    }
    Ok(found)
}

/// The `T` at `key`, read consistently (GetItem), or `None` when there is no item.
pub async fn read_consistent<T: Entity>(
    table: &FleetTable,
    key: &ItemKey,
) -> Result<Option<T>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    out.item.map(T::from_item).transpose()
}

/// Result of a write transaction that DynamoDB accepted or cancelled.
pub enum Transaction {
    /// All actions were applied.
    Committed,
    /// Cancelled by a failed condition; one reason per action.
    Cancelled(Vec<CancellationReason>),
}

/// Sends one TransactWriteItems. A cancellation caused by a conflicting transaction or
/// throttling is retried while `retry` allows ([`throttled`] after that); one caused by a
/// failed condition is returned for the caller to interpret. The same idempotency token is
/// sent on every attempt so a commit whose response was lost is not applied twice.
pub async fn transact(
    table: &FleetTable,
    actions: Vec<TransactWriteItem>,
    mut retry: Retry,
) -> Result<Transaction, FleetError> {
    let token = random_id()?;
    while retry.next_attempt().await {
        let result = table
            .client
            .transact_write_items()
            .set_transact_items(Some(actions.clone()))
            .client_request_token(&token)
            .send()
            .await;
        let Err(err) = result else {
            return Ok(Transaction::Committed);
        };
        let reasons = match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
                c.cancellation_reasons().to_vec()
            }
            _ => return Err(sdk_error(err)),
        };
        if !cancelled_transiently(&reasons) {
            return Ok(Transaction::Cancelled(reasons));
        }
    }
    Err(throttled())
}

/// Scatter-gather: runs one query per shard concurrently (on this task, so the request meter
/// sees them all) and returns their results in shard order, or the first error.
pub async fn scatter_gather<T, Q>(
    queries: impl IntoIterator<Item = Q>,
) -> Result<Vec<T>, FleetError>
where
    Q: Future<Output = Result<T, FleetError>>,
{
    futures::future::join_all(queries)
        .await
        .into_iter()
        .collect()
}

/// Joins shard results newest first by `sort_key` (a stable sort: ties keep shard order) and
/// keeps the first `limit`.
pub fn newest_first<T, K: Ord>(
    mut rows: Vec<T>,
    sort_key: impl Fn(&T) -> &K,
    limit: u32,
) -> Vec<T> {
    rows.sort_by(|a, b| -> Ordering { sort_key(b).cmp(sort_key(a)) });
    rows.truncate(limit as usize);
    rows
}

/// A string attribute value.
pub(crate) fn string_value(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute value.
pub(crate) fn number_value(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A failed Query as the caller sees it: a start key DynamoDB refuses is the cursor's fault.
fn query_error(
    err: aws_sdk_dynamodb::error::SdkError<
        aws_sdk_dynamodb::operation::query::QueryError,
        aws_smithy_runtime_api::http::Response,
    >,
    resumes: bool,
) -> FleetError {
    let refused_start_key = err.code() == Some("ValidationException")
        && err
            .message()
            .is_some_and(|m| m.to_ascii_lowercase().contains("start"));
    if resumes && refused_start_key {
        crate::model::cursor::invalid().into()
    } else {
        sdk_error(err)
    }
}

/// Sends one Query (metered, with consumed capacity); returns its items and
/// `LastEvaluatedKey`. A start key DynamoDB refuses (a cursor edited within the caller's own
/// partition so that it no longer fits the query, e.g. a sort key outside the range) is a 400
/// on `cursor`, not a 500: fuzzing found such cursors answered with 500s.
pub(crate) async fn query(
    request: QueryFluentBuilder,
) -> Result<(Vec<Item>, Option<Item>), FleetError> {
    let resumes = request.get_exclusive_start_key().is_some();
    let out = match request.send().await {
        Ok(out) => out,
        Err(err) => return Err(query_error(err, resumes)),
    };
    Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
}

/// Every item of the small partition `pk`, read consistently, page after page: the worker's
/// lists of unfinished work (moves, organization deletions), whose every entry it must see.
pub(crate) async fn whole_partition(
    table: &crate::store::table::FleetTable,
    pk: &str,
) -> Result<Vec<Item>, FleetError> {
    let mut items = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let request = table
            .client
            .query()
            .table_name(table.name())
            .expressions(
                Expressions::builder()
                    .key_condition(Condition::equals(PK, string_value(pk)))
                    .build(),
            )
            .set_exclusive_start_key(start.take())
            .consistent_read(true);
        let (page, last) = query(request).await?;
        items.extend(page);
        match last {
            Some(key) => start = Some(key),
            None => return Ok(items),
        }
    }
}

/// A Query of partition `pk` over the sort keys `first..=last` (`PK = pk AND SK BETWEEN first
/// AND last`), with the filter and projection of `read`, for the caller to add order and limit.
pub(crate) fn key_range(
    table: &crate::store::table::FleetTable,
    pk: impl Into<String>,
    first: impl Into<String>,
    last: impl Into<String>,
    read: ExpressionsBuilder,
) -> QueryFluentBuilder {
    let key = Condition::equals(PK, string_value(pk)).and(Condition::between(
        SK,
        string_value(first),
        string_value(last),
    ));
    table
        .client
        .query()
        .table_name(table.name())
        .expressions(read.key_condition(key).build())
}

/// A Query of partition `pk` over the sort keys that begin with `prefix`, with the filter and
/// projection of `read`, for the caller to add order, limit and start.
pub(crate) fn key_prefix(
    table: &crate::store::table::FleetTable,
    pk: impl Into<String>,
    prefix: impl Into<String>,
    read: ExpressionsBuilder,
) -> QueryFluentBuilder {
    let key = Condition::equals(PK, string_value(pk))
        .and(Condition::begins_with(SK, string_value(prefix)));
    table
        .client
        .query()
        .table_name(table.name())
        .expressions(read.key_condition(key).build())
}

/// The current time as a TTL value: items whose `ttl` is not after it have expired (DynamoDB
/// deletes them up to days late, so readers filter them out).
pub(crate) fn ttl_now() -> AttributeValue {
    number_value(crate::model::timestamp::Timestamp::now().epoch_seconds())
}

/// Writes `item` with one metered PutItem (replacing any item with its key).
pub async fn put_item(
    table: &crate::store::table::FleetTable,
    item: &impl crate::model::entities::Entity,
) -> Result<(), FleetError> {
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(())
}

/// Writes `item`, the next version of an item read at `read_version` (0: there was none), on
/// the condition that nobody wrote it since (its `version` attribute still `read_version`):
/// true when written, false when another writer came first (read again and retry).
pub async fn put_if_version(
    table: &crate::store::table::FleetTable,
    item: &impl Entity,
    version: crate::model::expression::Attribute,
    read_version: u64,
) -> Result<bool, FleetError> {
    let unchanged = if read_version == 0 {
        Condition::absent(PK)
    } else {
        Condition::equals(version, number_value(read_version))
    };
    let result = table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .expressions(Expressions::condition(unchanged))
        .send()
        .await;
    match result {
        Ok(_) => Ok(true),
        Err(err) => match err.as_service_error() {
            Some(
                aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(
                    _,
                ),
            ) => Ok(false),
            _ => Err(sdk_error(err)),
        },
    }
}

/// Writes `item` only if no item has its key: true when written, false when one was there.
pub async fn put_new(
    table: &crate::store::table::FleetTable,
    item: &impl Entity,
) -> Result<bool, FleetError> {
    put_if_version(table, item, PK, 0).await
}

/// The transaction action that deletes the item at `key`, unconditionally.
pub(crate) fn delete_action(
    table: &crate::store::table::FleetTable,
    key: &crate::model::entities::ItemKey,
) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, FleetError> {
    let delete = aws_sdk_dynamodb::types::Delete::builder()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .build()
        .map_err(FleetError::internal)?;
    Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
        .delete(delete)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_sorts_descending_stably_and_truncates() {
        let rows = vec![("b", 0), ("c", 0), ("b", 1), ("a", 1)];
        assert_eq!(
            newest_first(rows, |r| &r.0, 3),
            vec![("c", 0), ("b", 0), ("b", 1)]
        );
    }
}
