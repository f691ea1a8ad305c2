//! AP-03: one device with its live state, and its twin's documents once it has one.

use super::state_key;
use super::view::Device;
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::{state_sk, DeviceStateItem};
use crate::model::entities::ItemKey;
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::expression::Expressions;
use crate::model::ids::{DeviceId, UserId};
use crate::model::pattern_id::PatternId;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::ops::twin::owner::twin_documents;
use crate::store::table::{sdk_error, FleetTable};

/// AP-03, implemented by [`get_device`].
pub const GET_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::GetDevice,
    description: "one device, with its live state (and its twin's documents once it has one)",
    frequency: Frequency::Critical,
    operations: &[Operation::Query, Operation::GetItem],
    index: None,
    key_condition:
        "PK = USER#{userId} AND SK BETWEEN DEVICE#{deviceId} AND DEVICE#{deviceId}#STATE; with a twin, PK = USER#{userId}#DEVICE#{deviceId} AND SK begins_with TWIN#",
    budget: RequestBudget::FixedPlusPlacedStateAndTwin(1),
    max_read_units: Some(1.0),
    route: Some("GET /me/devices/{deviceId}"),
    implemented_by: implemented_by!(get_device),
};

/// AP-03: one device of `user` with its live state, or `None` (also for another user's device
/// or one being deleted). One eventually consistent Query of the device item and the state
/// beside it; a device of a large fleet whose state is placed on another partition takes one
/// GetItem more.
pub async fn get_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<Device>, FleetError> {
    let Some((item, state)) = device_and_state(table, user, device).await? else {
        return Ok(None);
    };
    let id = device;
    let registered = item.created_at;
    let mut device = Device::with_state(item, state.as_ref());
    // A device with a twin: its documents, one Query more.
    if let Some(view) = device.twin.take() {
        device.twin = Some(twin_documents(table, user, id, registered, view).await?);
    }
    Ok(Some(device))
}

/// `user`'s device `device` with its live state, or `None` (another user's, an unknown or a
/// deleting device): one eventually consistent Query of the device item and the state beside
/// it, one GetItem more for a state placed on another of a large owner's partitions. Also
/// what AP-29 reads first (the state holds the open summaries).
pub(crate) async fn device_and_state(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<(DeviceItem, Option<DeviceStateItem>)>, FleetError> {
    let key = ItemKey::device(user, device).primary_key();
    let (items, _) = crate::store::dynamo::query(crate::store::dynamo::key_range(
        table,
        key.pk,
        key.sk,
        state_sk(device),
        Expressions::builder(),
    ))
    .await?;
    let mut found = None;
    let mut state = None;
    for item in items {
        match EntityType::of(&item) {
            Some(EntityType::Device) => found = Some(DeviceItem::from_item(item)?),
            Some(EntityType::DeviceState) => state = Some(DeviceStateItem::from_item(item)?),
            other => {
                return Err(FleetError::internal(format!(
                    "unexpected {other:?} item in a device's range"
                )))
            }
        }
    }
    let Some(item) = found.filter(|d| d.deleting_at.is_none()) else {
        return Ok(None);
    };
    if state.is_none() && item.partition > 0 {
        let out = table
            .client
            .get_item()
            .table_name(table.name())
            .set_key(Some(state_key(&item).attributes()))
            .send()
            .await
            .map_err(sdk_error)?;
        state = out.item.map(DeviceStateItem::from_item).transpose()?;
    }
    Ok(Some((item, state)))
}
