//! Table operations: one function per access pattern (see [`crate::catalog`]).

pub mod devices;
pub mod ingest;
pub mod profile;

use aws_sdk_dynamodb::types::AttributeValue;

/// A string attribute value.
pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute value.
pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub mod analytics;
pub mod credentials;
pub mod dashboard;
pub mod events;
pub mod fleet;
pub mod reports;

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use serde::Serialize;

use crate::error::FleetError;
use crate::table::sdk_error;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;

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
        crate::cursor::invalid().into()
    } else {
        sdk_error(err)
    }
}

/// One stored item as the SDK returns it.
pub(crate) type RawItem = HashMap<String, AttributeValue>;

/// One page of a listing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page<T> {
    /// The items, in the pattern's order.
    pub items: Vec<T>,
    /// Opaque cursor for the next page; `None` on the last page.
    pub cursor: Option<String>,
}

/// Default and largest page sizes of the listing routes.
pub const DEFAULT_LIMIT: u32 = 50;
/// Largest page size a caller may ask for.
pub const MAX_LIMIT: u32 = 100;

/// Sends one Query (metered, with consumed capacity); returns its items and
/// `LastEvaluatedKey`. A start key DynamoDB refuses (a cursor edited within the caller's own
/// partition so that it no longer fits the query, e.g. a sort key outside the range) is a 400
/// on `cursor`, not a 500: fuzzing found such cursors answered with 500s.
pub(crate) async fn query(
    request: QueryFluentBuilder,
) -> Result<(Vec<RawItem>, Option<RawItem>), FleetError> {
    let resumes = request.get_exclusive_start_key().is_some();
    let out = match request.send().await {
        Ok(out) => out,
        Err(err) => return Err(query_error(err, resumes)),
    };
    Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
}

/// A Query of partition `pk` over the sort keys `first..=last` (`PK = :pk AND SK BETWEEN
/// :first AND :last`), for the caller to add projection, filter, order and limit.
pub(crate) fn key_range(
    table: &crate::FleetTable,
    pk: impl Into<String>,
    first: impl Into<String>,
    last: impl Into<String>,
) -> QueryFluentBuilder {
    table
        .client
        .query()
        .table_name(table.name())
        .key_condition_expression("PK = :pk AND SK BETWEEN :first AND :last")
        .expression_attribute_values(":pk", s(pk))
        .expression_attribute_values(":first", s(first))
        .expression_attribute_values(":last", s(last))
}

/// The current time as a TTL value: items whose `ttl` is not after it have expired (DynamoDB
/// deletes them up to days late, so readers filter them out).
pub(crate) fn ttl_now() -> AttributeValue {
    n(crate::timestamp::Timestamp::now().epoch_seconds())
}

/// Writes `item` with one metered PutItem (replacing any item with its key).
pub(crate) async fn put_item(
    table: &crate::table::FleetTable,
    item: &impl crate::entity::Entity,
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
