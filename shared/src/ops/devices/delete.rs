//! AP-08: deleting a device: marked first, then its item, registration (released), live
//! state, twin documents, tag links and open alarms gone in one transaction, its id free and
//! a purge marker left for its events.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{Delete, ReturnValue, TransactWriteItem};

use super::fleet::count_deletion;
use super::register::registration_key_put;
use super::{put, state_key};
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::purge_marker::PurgeMarkerItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::released_registration::ReleasedRegistrationItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{DeviceId, UserId};
use crate::model::pattern_id::PatternId;
use crate::model::schema::PK;
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{delete_action, number_value, string_value, transact, Transaction};
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, FleetTable, TransactionSlot, MAX_ATTEMPTS};
use crate::store::with_expressions::WithExpressions;

/// The actions of a deletion's transaction whose failed condition means something: the
/// device first, then the registration's release, the live state, the fleet count, the
/// purge marker, the twin's documents, the tag links and the clears of open alarms.
#[derive(Clone, Copy, Debug)]
enum DeletionSlot {
    /// Deletes the marked device; fails when another request completed the deletion.
    Device = 0,
    /// Deletes the live state as it was read; fails when a batch (or the offline detector)
    /// changed it since, which may have raised an alarm the clears do not name.
    State = 2,
}

/// Most actions in one TransactWriteItems (DynamoDB's limit).
const MAX_TRANSACTION_ACTIONS: usize = 100;

/// Attempts of a deletion against batches that keep changing the live state.
const DELETION_ATTEMPTS: u32 = 5;

// A deletion fits one transaction in the worst case: the 5 fixed actions, 2 twin documents,
// the links of old and new tags during a sync, and a clear and a pointer delete per open
// alarm (one per rule and offline). A device with more open alarms still works: see
// `delete_device`.
const _: () = assert!(
    7 + 2 * crate::model::ids::MAX_TAGS_PER_DEVICE
        + 2 * (crate::model::alarm::MAX_RULES_PER_OWNER + 1)
        <= MAX_TRANSACTION_ACTIONS
);

impl TransactionSlot for DeletionSlot {
    fn position(self) -> usize {
        self as usize
    }
}

/// Marks `user`'s device as being deleted (keeping an earlier mark) and returns it as it is
/// now; [`FleetError::NotFound`] if there is no such device.
async fn mark_deleting(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<DeviceItem, FleetError> {
    let now = Timestamp::now().to_string();
    let result = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::device(user, device).attributes()))
        // A device registered after this request was made is not the one it means to delete:
        // a request that lands late (after its own retry, a re-registration and all) must not
        // mark the new device.
        .expressions(Expressions::write(
            UpdateExpression::new()
                .set_if_absent(DeviceItem::DELETING_AT, string_value(now.clone())),
            Some(Condition::exists(PK).and(Condition::at_most(
                DeviceItem::CREATED_AT,
                string_value(now),
            ))),
        ))
        .return_values(ReturnValue::AllNew)
        .send()
        .await;
    let out = match result {
        Ok(out) => out,
        Err(err) => {
            if let Some(UpdateItemError::ConditionalCheckFailedException(_)) =
                err.as_service_error()
            {
                return Err(FleetError::NotFound("device"));
            }
            return Err(sdk_error(err));
        }
    };
    let attributes = out
        .attributes
        .ok_or_else(|| FleetError::internal("UpdateItem returned no attributes"))?;
    DeviceItem::from_item(attributes)
}

/// The transaction deleting the marked device `item`, its registration, its live state as
/// read (`state`), its twin's documents and its tag links.
fn deletion(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    item: &DeviceItem,
    state: Option<&DeviceStateItem>,
) -> Result<Vec<TransactWriteItem>, FleetError> {
    let device_delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::device(user, device).attributes()))
        .expressions(Expressions::condition(Condition::exists(
            DeviceItem::DELETING_AT,
        )))
        .build()
        .map_err(FleetError::internal)?;
    // The registration is replaced by its released fence. One that is already gone (or
    // already released) must not block the clean-up; one that belongs to someone else must
    // never be touched.
    let released = ReleasedRegistrationItem::new(device.clone(), Timestamp::now());
    let registration_release = registration_key_put(
        table,
        &released,
        Condition::absent(PK)
            .or(Condition::equals(
                RegistrationItem::USER_ID,
                string_value(user.as_str()),
            ))
            .or(super::register::released()),
    )?
    .build()
    .map_err(FleetError::internal)?;
    let mut actions = vec![
        TransactWriteItem::builder().delete(device_delete).build(),
        TransactWriteItem::builder()
            .put(registration_release)
            .build(),
        state_delete(table, item, state)?,
        count_deletion(table, user)?,
        // The daily run finds the device's events from this marker, not by reading history.
        put(
            table,
            &PurgeMarkerItem {
                user_id: user.clone(),
                device_id: device.clone(),
                deleted_at: item.deleting_at.unwrap_or_else(Timestamp::now),
            },
            None,
        )?,
        // The twin's documents go with the device: a device registered again under this id
        // must not be shown (or measured against) the old one's configuration.
        delete_action(
            table,
            &ItemKey::Desired {
                user: user.clone(),
                device: device.clone(),
            },
        )?,
        delete_action(
            table,
            &ItemKey::Reported {
                user: user.clone(),
                device: device.clone(),
            },
        )?,
    ];
    for tag in item
        .linked_tags
        .iter()
        .chain(item.tags.iter())
        .collect::<std::collections::BTreeSet<_>>()
    {
        actions.push(delete_action(
            table,
            &ItemKey::TagLink {
                user: user.clone(),
                tag: tag.clone(),
                device: device.clone(),
            },
        )?);
    }
    Ok(actions)
}

/// The delete of the live state as it was read: unchanged since (`ingestSeq`), or still
/// absent when none was read.
fn state_delete(
    table: &FleetTable,
    item: &DeviceItem,
    state: Option<&DeviceStateItem>,
) -> Result<TransactWriteItem, FleetError> {
    let condition = match state {
        Some(state) => Condition::exists(PK).and(Condition::equals(
            DeviceStateItem::INGEST_SEQ,
            number_value(state.ingest_seq),
        )),
        None => Condition::absent(PK),
    };
    let delete = Delete::builder()
        .table_name(table.name())
        .set_key(Some(state_key(item).attributes()))
        .expressions(Expressions::condition(condition))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().delete(delete).build())
}

/// The live state of `item`, read consistently (the deletion is conditioned on it).
async fn read_state(
    table: &FleetTable,
    item: &DeviceItem,
) -> Result<Option<DeviceStateItem>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(state_key(item).attributes()))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    out.item.map(DeviceStateItem::from_item).transpose()
}

/// AP-08, implemented by [`delete_device`].
pub const DELETE_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::DeleteDevice,
    description:
        "delete a device and free its id (a purge marker: the next daily runs purge its events)",
    frequency: Frequency::Important,
    operations: &[
        Operation::UpdateItem,
        Operation::GetItem,
        Operation::TransactWriteItems,
    ],
    index: None,
    key_condition:
        "PK = USER#{userId}, SK = DEVICE#{deviceId}; its live state; PK = DEVICE#{deviceId}, SK = REGISTRATION",
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("DELETE /me/devices/{deviceId}"),
    implemented_by: implemented_by!(delete_device),
};

/// AP-08: deletes `user`'s device, its tag links and its registration, which frees the id.
/// Its events are purged by the next daily analytics run.
///
/// Two requests: an UpdateItem marks the device as being deleted and returns which tag links
/// it has (a write that has not read the item cannot know them), then one transaction deletes
/// device, registration and links together. A device marked but not yet deleted is gone for
/// every reader, and a retried DELETE completes it.
///
/// The device's open alarms clear in the same transaction (issue 30 item 4: nothing would
/// clear them afterwards). Which alarms are open is what its live state says, read
/// consistently just before (one GetItem more); the state's delete is conditioned on it being
/// unchanged, so an alarm a batch raised in between is not left behind: the deletion reads
/// again. Past DynamoDB's 100 actions (never with today's limits, checked above), the
/// alarms clear in transactions of their own first.
pub async fn delete_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<(), FleetError> {
    let item = mark_deleting(table, user, device).await?;
    for _ in 0..DELETION_ATTEMPTS {
        let state = read_state(table, &item).await?;
        let now = Timestamp::now();
        let mut actions = deletion(table, user, device, &item, state.as_ref())?;
        let clears = match &state {
            Some(state) => crate::ops::alarms::withdraw::device_clears(table, state, now)?,
            None => Vec::new(),
        };
        if let (Some(state), true) = (
            &state,
            actions.len() + clears.len() > MAX_TRANSACTION_ACTIONS,
        ) {
            let some = crate::ops::alarms::withdraw::partial_device_clears(
                table,
                state,
                now,
                MAX_TRANSACTION_ACTIONS,
            )?;
            transact(table, some, Retry::attempts(MAX_ATTEMPTS)).await?;
            continue;
        }
        actions.extend(clears);
        match transact(table, actions, Retry::attempts(MAX_ATTEMPTS)).await? {
            Transaction::Committed => return Ok(()),
            // A concurrent DELETE of the same device completed first.
            Transaction::Cancelled(reasons) if condition_failed(&reasons, DeletionSlot::Device) => {
                return Ok(())
            }
            // A batch changed the live state since it was read: read it again.
            Transaction::Cancelled(reasons) if condition_failed(&reasons, DeletionSlot::State) => {
                continue
            }
            Transaction::Cancelled(reasons) => {
                return Err(FleetError::internal(format!(
                    "deletion cancelled: {reasons:?}"
                )))
            }
        }
    }
    Err(crate::store::dynamo::throttled())
}
