//! The twin's part of a device's stored state: the view AP-03 shows, the consistent read of
//! the live state and the desired-state write. A leaf the owner, device and rollout operations
//! share, so none of them reaches back to the module above.

use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};
use serde::Serialize;
use serde_json::Value;

use crate::model::entities::desired_state::DesiredStateItem;
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::reported_state::ReportedStateItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update as UpdateExpression};
use crate::model::ids::{DeviceId, UserId};
use crate::model::timestamp::Timestamp;
use crate::model::twin::{TwinDocument, TwinVersions};
use crate::store::table::FleetTable;
use crate::store::with_expressions::WithExpressions;

/// The twin as an owner reads it: versions from the live state (the dashboard, AP-DASH) and,
/// on one device's read (AP-03), the documents and their delta.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TwinView {
    /// Version of the desired document (0: none).
    pub desired_version: u64,
    /// The desired version the device last reported applying.
    pub reported_version: u64,
    /// Whether the device reported the current desired version.
    pub in_sync: bool,
    /// Commands neither finished nor known to be expired.
    pub open_commands: u64,
    /// The desired document (AP-03 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Value>,
    /// When it last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired_updated_at: Option<String>,
    /// The reported document (AP-03 only, once the device reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported: Option<Value>,
    /// When the device reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported_at: Option<String>,
    /// What desired asks that reported does not show (AP-03 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<Value>,
}

impl TwinView {
    /// The versions of a live state, or `None` for a device that never had a desired state
    /// or a command (the dashboard shows nothing for it).
    pub fn of_state(state: &DeviceStateItem) -> Option<Self> {
        let v = state.twin;
        (v != TwinVersions::default()).then(|| TwinView {
            desired_version: v.desired_version,
            reported_version: v.reported_version,
            in_sync: !v.desired_pending(),
            open_commands: v.open_commands(),
            ..TwinView::default()
        })
    }

    /// With the documents read by [`owner::twin_documents`].
    pub fn with_documents(
        mut self,
        desired: Option<DesiredStateItem>,
        reported: Option<ReportedStateItem>,
    ) -> Result<Self, FleetError> {
        let desired_doc = desired
            .as_ref()
            .map(|d| TwinDocument::from_text(&d.document))
            .transpose()?;
        let reported_doc = reported
            .as_ref()
            .map(|r| TwinDocument::from_text(&r.document))
            .transpose()?;
        if let Some(want) = &desired_doc {
            self.delta = Some(
                want.delta(&reported_doc.clone().unwrap_or_default())
                    .as_value(),
            );
        }
        self.desired = desired_doc.map(|d| d.as_value());
        self.desired_updated_at = desired.map(|d| d.updated_at.to_string());
        self.reported = reported_doc.map(|d| d.as_value());
        self.reported_at = reported.map(|r| r.reported_at.to_string());
        Ok(self)
    }
}

/// The key of a device's live state, from its device item (the placement is stored there).
pub(super) fn state_key_of(device: &DeviceItem) -> ItemKey {
    ItemKey::DeviceState {
        user: device.user_id.clone(),
        partition: device.partition,
        device: device.device_id.clone(),
    }
}

/// `user`'s device `device`, read consistently (it guards the twin's writes), or `None`.
pub(super) async fn owned_device(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<Option<DeviceItem>, FleetError> {
    crate::ops::ownership::owned_device(table, user, device, true).await
}

/// The live state at `key`, read consistently, or `None` when the device is gone.
pub(super) async fn read_state(
    table: &FleetTable,
    key: ItemKey,
) -> Result<Option<DeviceStateItem>, FleetError> {
    crate::store::dynamo::read_consistent(table, &key).await
}

/// The transaction that makes `document` the desired state of the device whose live state is
/// at `state`, version `expected + 1`: the live state's `desiredVersion` moves from `expected`
/// (the condition: the state exists, so the device does, and nobody changed it since) and
/// the document is put beside the device's commands. The live state is the one authority on
/// the version, so a document left by a deleted device of the same id is simply replaced.
pub(super) fn desired_write(
    table: &FleetTable,
    state: ItemKey,
    user: &UserId,
    device: &DeviceId,
    expected: u64,
    document: &TwinDocument,
    now: Timestamp,
) -> Result<(Vec<TransactWriteItem>, DesiredStateItem), FleetError> {
    use crate::store::dynamo::number_value;
    let unchanged = if expected == 0 {
        Condition::absent(TwinVersions::DESIRED_VERSION).or(Condition::equals(
            TwinVersions::DESIRED_VERSION,
            number_value(0),
        ))
    } else {
        Condition::equals(TwinVersions::DESIRED_VERSION, number_value(expected))
    };
    let item = DesiredStateItem {
        user_id: user.clone(),
        device_id: device.clone(),
        document: document.to_text(),
        version: expected + 1,
        updated_at: now,
    };
    let update = Update::builder()
        .table_name(table.name())
        .set_key(Some(state.attributes()))
        .expressions(Expressions::write(
            UpdateExpression::new().set(TwinVersions::DESIRED_VERSION, number_value(expected + 1)),
            Some(Condition::exists(crate::model::schema::PK).and(unchanged)),
        ))
        .build()
        .map_err(FleetError::internal)?;
    let put = Put::builder()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .build()
        .map_err(FleetError::internal)?;
    Ok((
        vec![
            TransactWriteItem::builder().update(update).build(),
            TransactWriteItem::builder().put(put).build(),
        ],
        item,
    ))
}
