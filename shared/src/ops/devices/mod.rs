//! Devices (docs/design.md, "Devices"): one module per access pattern, each with its
//! definition, budget, code and contract: register (AP-07, [`register`]), read (AP-03,
//! [`read`]), update (AP-06, [`update`]), delete (AP-08, [`delete`]) and the operators' listing
//! by status (AP-13, [`by_status`]); the device as the API shows it ([`view`]) and the owner's
//! fleet count that places devices on live-state partitions ([`fleet`]).
//!
//! The device item carries `tags`; each tag also has a tag-link item (`TAG#{tag}#{deviceId}`)
//! so "devices with tag T" is one Query, and name/type are copied onto the links and onto the
//! registration (which ingestion copies onto events). Updates never read first: a status
//! change is one conditional UpdateItem. A change of name, type or tags is that same
//! UpdateItem plus one transaction that brings the copies in step, because a write that has
//! not read the item cannot know which old tag links to delete. The device item records
//! which tags have links (`linkedTags`) and a `syncVersion`, so concurrent updates converge:
//! only the sync of the newest name/tags can commit, and it deletes exactly the links that
//! exist.

pub mod by_status;
pub mod delete;
pub mod fleet;
pub mod r#move;
pub mod read;
pub mod register;
pub mod update;
pub mod view;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use crate::model::entities::device::DeviceItem;
use crate::model::entities::tag_link::TagLinkItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions};
use crate::model::ids::Tag;
use crate::store::table::FleetTable;
use crate::store::with_expressions::WithExpressions;

/// Longest device name, in characters.
pub const MAX_DEVICE_NAME: usize = 100;

/// The tag-link item of `device` for `tag` (with its name and type copies).
pub(super) fn tag_link(device: &DeviceItem, tag: &Tag) -> TagLinkItem {
    TagLinkItem {
        user_id: device.user_id.clone(),
        tag: tag.clone(),
        device_id: device.device_id.clone(),
        name: device.name.clone(),
        device_type: device.device_type.clone(),
    }
}

/// The transaction action putting `item` (under `condition`, if any).
pub(super) fn put(
    table: &FleetTable,
    item: &impl Entity,
    condition: Option<Condition>,
) -> Result<TransactWriteItem, FleetError> {
    let mut put = Put::builder()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?));
    if let Some(condition) = condition {
        put = put.expressions(Expressions::condition(condition));
    }
    let put = put.build().map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The key of `device`'s live state (on the partition it was placed on).
pub(crate) fn state_key(device: &DeviceItem) -> ItemKey {
    ItemKey::DeviceState {
        user: device.user_id.clone(),
        partition: device.partition,
        device: device.device_id.clone(),
    }
}

/// For an organization's fleet (`org:{orgId}`), the transaction action that checks the
/// organization still admits devices: it exists and its deletion has not begun
/// ([`crate::model::entities::organization::admits`]). A registration or a move into the fleet
/// carries it, so none commits after a deletion marked the organization. `None` for a
/// person's fleet.
pub(crate) fn org_admits_check(
    table: &FleetTable,
    owner: &crate::model::ids::UserId,
) -> Result<Option<TransactWriteItem>, FleetError> {
    let Some(org) = owner.fleet_org() else {
        return Ok(None);
    };
    let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::Organization { org }.attributes()))
        .expressions(Expressions::condition(
            crate::model::entities::organization::admits(),
        ))
        .build()
        .map_err(FleetError::internal)?;
    Ok(Some(
        TransactWriteItem::builder().condition_check(check).build(),
    ))
}
