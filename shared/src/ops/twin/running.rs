//! The running list's count per owner (issue 39 item 8): a start takes a slot in its
//! transaction, conditioned on the count being under [`MAX_RUNNING_ROLLOUTS`], and every end
//! gives it back in the transaction that deletes the rollout's running-list entry, so racing
//! starts cannot pass the cap together and the count is always the owner's entries on the
//! list ([`RolloutSlotsItem`]).

use aws_sdk_dynamodb::types::{CancellationReason, Delete, TransactWriteItem, Update};

use crate::model::entities::rollout_slots::RolloutSlotsItem;
use crate::model::entities::running_rollout::RunningRolloutItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update as Changes};
use crate::model::ids::UserId;
use crate::model::schema::PK;
use crate::model::twin::MAX_RUNNING_ROLLOUTS;
use crate::store::dynamo::{number_value, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// The 409 of an owner at [`MAX_RUNNING_ROLLOUTS`].
pub(super) fn rollout_limit() -> FleetError {
    FleetError::Conflict {
        code: "rollout_limit",
        message: format!(
            "an owner has at most {MAX_RUNNING_ROLLOUTS} rollouts running: wait for one to finish"
        ),
    }
}

/// Whether a cancelled transaction's action `index` failed its condition.
pub(super) fn condition_failed(reasons: &[CancellationReason], index: usize) -> bool {
    reasons
        .get(index)
        .and_then(|r| r.code())
        .is_some_and(|code| code == "ConditionalCheckFailed")
}

/// The start's action on `user`'s count: one more, under the cap at the moment of the write.
/// An owner whose rollouts predate the count starts it at `counted`, the entries the start's
/// Query found.
pub(super) fn take_slot(
    table: &FleetTable,
    user: &UserId,
    counted: usize,
) -> Result<TransactWriteItem, FleetError> {
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::RolloutSlots { user: user.clone() }.attributes(),
        ))
        .expressions(Expressions::write(
            Changes::new().increment_from(
                RolloutSlotsItem::RUNNING,
                number_value(counted),
                number_value(1),
            ),
            Some(
                Condition::absent(RolloutSlotsItem::RUNNING).or(Condition::below(
                    RolloutSlotsItem::RUNNING,
                    number_value(MAX_RUNNING_ROLLOUTS),
                )),
            ),
        ))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Takes `running` off the running list and gives its slot back, in one transaction
/// conditioned on the entry, so every end (finished, or its rollout gone) is counted once
/// however many runs end it. An entry whose owner has no count (an organization being
/// deleted, or a rollout started before the count) is deleted alone.
pub(super) async fn delete_running(
    table: &FleetTable,
    running: &RunningRolloutItem,
) -> Result<(), FleetError> {
    let entry = Delete::builder()
        .table_name(table.name())
        .set_key(Some(running.item_key().attributes()))
        .expressions(Expressions::condition(Condition::exists(PK)))
        .build()
        .map_err(FleetError::internal)?;
    let give_back = Update::builder()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::RolloutSlots {
                user: running.user_id.clone(),
            }
            .attributes(),
        ))
        .expressions(Expressions::write(
            Changes::new().increment(RolloutSlotsItem::RUNNING, number_value(-1)),
            Some(Condition::above(RolloutSlotsItem::RUNNING, number_value(0))),
        ))
        .build()
        .map_err(FleetError::internal)?;
    let actions = vec![
        TransactWriteItem::builder().delete(entry).build(),
        TransactWriteItem::builder().update(give_back).build(),
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(()),
        // Another run ended it already.
        Transaction::Cancelled(reasons) if condition_failed(&reasons, 0) => Ok(()),
        Transaction::Cancelled(_) => {
            table
                .client
                .delete_item()
                .table_name(table.name())
                .set_key(Some(running.item_key().attributes()))
                .send()
                .await
                .map_err(sdk_error)?;
            Ok(())
        }
    }
}
