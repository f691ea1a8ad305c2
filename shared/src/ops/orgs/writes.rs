//! The transaction actions the organization operations are made of: puts, deletes and updates
//! of whole entities, each with its condition.

use aws_sdk_dynamodb::types::{
    ConditionCheck, Delete, Put, TransactWriteItem, Update as SdkUpdate,
};

use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::store::table::FleetTable;
use crate::store::with_expressions::WithExpressions;

/// Puts `entity`, under `condition` when given.
pub(crate) fn put(
    table: &FleetTable,
    entity: &impl Entity,
    condition: Option<Condition>,
) -> Result<TransactWriteItem, FleetError> {
    let mut put = Put::builder()
        .table_name(table.name())
        .set_item(Some(entity.to_item(&table.config.shards)?));
    if let Some(condition) = condition {
        put = put.expressions(Expressions::condition(condition));
    }
    Ok(TransactWriteItem::builder()
        .put(put.build().map_err(FleetError::internal)?)
        .build())
}

/// Deletes the item at `key`, under `condition` when given.
pub(crate) fn delete(
    table: &FleetTable,
    key: &ItemKey,
    condition: Option<Condition>,
) -> Result<TransactWriteItem, FleetError> {
    let mut delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(key.attributes()));
    if let Some(condition) = condition {
        delete = delete.expressions(Expressions::condition(condition));
    }
    Ok(TransactWriteItem::builder()
        .delete(delete.build().map_err(FleetError::internal)?)
        .build())
}

/// Applies `update` to the item at `key` under `condition`.
pub(crate) fn update(
    table: &FleetTable,
    key: &ItemKey,
    update: Update,
    condition: Condition,
) -> Result<TransactWriteItem, FleetError> {
    Ok(TransactWriteItem::builder()
        .update(
            SdkUpdate::builder()
                .table_name(table.name())
                .set_key(Some(key.attributes()))
                .expressions(Expressions::write(update, Some(condition)))
                .build()
                .map_err(FleetError::internal)?,
        )
        .build())
}

/// Checks `condition` on the item at `key` without writing it.
pub(crate) fn check(
    table: &FleetTable,
    key: &ItemKey,
    condition: Condition,
) -> Result<TransactWriteItem, FleetError> {
    Ok(TransactWriteItem::builder()
        .condition_check(
            ConditionCheck::builder()
                .table_name(table.name())
                .set_key(Some(key.attributes()))
                .expressions(Expressions::condition(condition))
                .build()
                .map_err(FleetError::internal)?,
        )
        .build())
}
