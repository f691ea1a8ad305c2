//! An owner's fleet item: how many devices it has and on how many live-state partitions they
//! are placed. Registration reads it and counts one more ([`super::register`]); a deletion
//! counts one less ([`super::delete`]). It also holds the owner's raw retention per device
//! type ([`crate::ops::retention`]), which registration copies onto the new device's
//! registration from the same read.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use crate::model::entities::fleet::FleetItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{DeviceType, UserId};
use crate::store::dynamo::number_value;
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// An owner's fleet as registration reads it: live-state partitions and devices, and the
/// raw retentions it copies onto a new registration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetSize {
    /// Live-state partitions (`None`: the owner has registered nothing yet).
    pub partitions: Option<u32>,
    /// Registered devices.
    pub devices: u64,
    /// The owner's shortened raw retentions, days per device type.
    pub raw_retention: BTreeMap<DeviceType, u32>,
    /// The fleet item's `retentionVersion` as read.
    pub retention_version: Option<u64>,
}

impl FleetSize {
    /// The partitions after one more registration: doubled once the devices would exceed
    /// `devices_per_shard` on each. Never fewer than now.
    pub fn partitions_after_one_more(&self, devices_per_partition: u32) -> u32 {
        let shards = self.partitions.unwrap_or(1).max(1);
        if self.devices + 1 > u64::from(shards) * u64::from(devices_per_partition) {
            shards.saturating_mul(2)
        } else {
            shards
        }
    }
}

/// Reads `user`'s fleet item (consistently: a registration places by it).
pub(super) async fn read_fleet(table: &FleetTable, user: &UserId) -> Result<FleetSize, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(match out.item {
        Some(item) => {
            let fleet = FleetItem::from_item(item)?;
            FleetSize {
                // A fleet item written only by a retention change places nothing yet.
                partitions: Some(fleet.partitions).filter(|&p| p > 0),
                devices: fleet.devices,
                raw_retention: fleet.raw_retention,
                retention_version: fleet.retention_version,
            }
        }
        None => FleetSize::default(),
    })
}

/// The transaction action counting one more device on the fleet item (creating it), setting
/// its partitions to `shards`, on the condition that nobody changed them, nor the raw
/// retentions, since `read` (a retention change in between would otherwise miss the new
/// device: the change lists the owner's devices after writing the fleet item).
pub(super) fn count_registration(
    table: &FleetTable,
    user: &UserId,
    read: &FleetSize,
    shards: u32,
) -> Result<TransactWriteItem, FleetError> {
    // The fleet item is created by its first registration: its type and directory entry
    // (GSI2) come from the entity.
    let fleet = FleetItem {
        user_id: user.clone(),
        partitions: shards,
        devices: read.devices + 1,
        raw_retention: BTreeMap::new(),
        retention_version: None,
    };
    let changes = UpdateExpression::new()
        .set(FleetItem::PARTITIONS, number_value(shards))
        .set_all([FleetItem::ENTITY_TYPE.assignment()])
        .set_all(fleet.index_keys(&table.config.shards).attributes())
        .add(FleetItem::DEVICES, number_value(1));
    let unchanged = match read.partitions {
        Some(current) => Condition::equals(FleetItem::PARTITIONS, number_value(current)),
        None => Condition::absent(FleetItem::PARTITIONS),
    };
    let unchanged = unchanged.and(match read.retention_version {
        Some(version) => Condition::equals(FleetItem::RETENTION_VERSION, number_value(version)),
        None => Condition::absent(FleetItem::RETENTION_VERSION),
    });
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .expressions(Expressions::write(changes, Some(unchanged)));
    Ok(TransactWriteItem::builder()
        .update(update.build().map_err(FleetError::internal)?)
        .build())
}

/// The transaction action counting one device less on the fleet item.
pub(super) fn count_deletion(
    table: &FleetTable,
    user: &UserId,
) -> Result<TransactWriteItem, FleetError> {
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new().add(FleetItem::DEVICES, number_value(-1)),
            Some(Condition::exists(FleetItem::PARTITIONS)),
        ))
        .build()
        .map_err(FleetError::internal)?;
    Ok(TransactWriteItem::builder().update(update).build())
}
