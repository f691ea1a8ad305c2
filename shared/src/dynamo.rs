//! DynamoDB plumbing shared by the operations: the multi-request calls (write all, get all,
//! transact) with the one retry policy of [`crate::retry`], and scatter-gather over the shards
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

use crate::error::FleetError;
use crate::ops::RawItem;
use crate::retry::Retry;
use crate::table::{
    cancelled_transiently, is_transient, sdk_error, FleetTable, RETRY_AFTER_SECONDS,
};
use crate::token::random_id;

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
                tracing::warn!(attempt = retry.attempt(), error = %DisplayErrorContext(&err), "batch write failed, retrying");
            }
            Err(err) => return Err(sdk_error(err)),
        }
    }
    Ok(pending)
}

/// Reads the items of `request` (at most [`BATCH_GET_SIZE`] keys) with BatchGetItem, again for
/// the `UnprocessedKeys`, while `retry` allows; [`throttled`] when it runs out first.
pub async fn get_all(
    table: &FleetTable,
    request: KeysAndAttributes,
    retry: &mut Retry,
) -> Result<Vec<RawItem>, FleetError> {
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
