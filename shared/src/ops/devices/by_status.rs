//! AP-13 (operators): devices with a status seen since a time, across all users: one Query per
//! status shard on GSI1 (the devices' live state items), concurrently, merged newest first.

use serde::Serialize;

use crate::model::entities::device_state::{
    parse_seen_gsi1sk, seen_since, status_gsi1pk, DeviceStateItem,
};
use crate::model::entities::Entity;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{GSI1, GSI1PK, GSI1SK};
use crate::model::status::DeviceStatus;
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{newest_first, query, scatter_gather, string_value};
use crate::store::table::FleetTable;
use crate::store::with_expressions::WithExpressions;

/// A device as the operator listing shows it (GSI1's projection).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetDevice {
    /// Device id.
    pub device_id: String,
    /// Owner.
    pub user_id: String,
    /// Name.
    pub name: String,
    /// Device type.
    #[serde(rename = "type")]
    pub device_type: String,
    /// Status.
    pub status: DeviceStatus,
    /// Last seen, to the 15 minutes of the `SEEN#` key.
    pub seen: String,
}

/// AP-13, implemented by [`devices_by_status`].
pub const DEVICES_BY_STATUS: AccessPattern = AccessPattern {
    id: PatternId::DevicesByStatus,
    description: "devices with a status seen since a time (operators)",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: Some(GSI1),
    key_condition: "GSI1PK = STATUS#{status}#{shard} AND GSI1SK >= SEEN#{since}",
    budget: RequestBudget::PerShardPage,
    max_read_units: None,
    route: Some("GET /admin/devices"),
    implemented_by: implemented_by!(devices_by_status),
};

/// AP-13: devices with `status` seen since `since` (to the 15 minutes of the `SEEN#` key),
/// newest first, at most `limit`.
pub async fn devices_by_status(
    table: &FleetTable,
    status: DeviceStatus,
    since: Timestamp,
    limit: u32,
) -> Result<Vec<FleetDevice>, FleetError> {
    let from = seen_since(&since);
    let queries = (0..table.config.shards.status_shards(status)).map(|shard| {
        query(
            table
                .client
                .query()
                .table_name(table.name())
                .index_name(GSI1)
                .expressions(
                    Expressions::builder()
                        .key_condition(
                            Condition::equals(GSI1PK, string_value(status_gsi1pk(status, shard)))
                                .and(Condition::at_least(GSI1SK, string_value(from.clone()))),
                        )
                        .build(),
                )
                .scan_index_forward(false)
                .limit(limit as i32),
        )
    });
    let mut devices = Vec::new();
    for (items, _) in scatter_gather(queries).await? {
        for item in items {
            let seen_key = item
                .get(GSI1SK.name())
                .and_then(|v| v.as_s().ok())
                .cloned()
                .ok_or_else(|| FleetError::internal("index item without its sort key"))?;
            let seen = parse_seen_gsi1sk(&seen_key)?.to_string();
            // GSI1 projects the state's key (owner, device) and its status/name/type copies.
            let d = DeviceStateItem::from_item(item)?;
            devices.push((
                seen_key,
                FleetDevice {
                    device_id: d.device_id.to_string(),
                    user_id: d.user_id.to_string(),
                    name: d.name,
                    device_type: d.device_type.to_string(),
                    status: d.status,
                    seen,
                },
            ));
        }
    }
    let devices = newest_first(devices, |d| &d.0, limit);
    Ok(devices.into_iter().map(|(_, d)| d).collect())
}
