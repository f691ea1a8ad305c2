//! Whose device is it: the one ownership read the routes that act on a device by its id make
//! before anything else (a leaf of `ops`, so the device, twin and alarm operations can all use
//! it without importing one another).

use crate::model::entities::device::DeviceItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::ids::{DeviceId, UserId};
use crate::store::table::{sdk_error, FleetTable};

/// `user`'s device `device` (one GetItem of the device item), or `None` for another user's,
/// an unknown or a deleting device: the same 404 to the caller. `consistent` where the
/// answer guards a write that must see the latest delete.
pub(crate) async fn owned_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    consistent: bool,
) -> Result<Option<DeviceItem>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::device(user, device).attributes()))
        .consistent_read(consistent)
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(out
        .item
        .map(DeviceItem::from_item)
        .transpose()?
        .filter(|d| d.deleting_at.is_none()))
}
