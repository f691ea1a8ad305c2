//! The user partition reads: the dashboard (AP-DASH), a user's devices (AP-02) and devices
//! with a tag (AP-12). Each page is one Query.

use serde::Serialize;

use super::profile::Profile;
use super::{query, s, Page, RawItem};
use crate::catalog::{
    implemented_by, AccessPattern, Frequency, Operation, PatternId, RequestBudget,
};
use crate::cursor;
use crate::entity::Entity;
use crate::error::FleetError;
use crate::ids::{Tag, UserId};
use crate::items::{DeviceItem, EntityType, ProfileItem, TagLinkItem};
use crate::keys::{tag_link_prefix, user_pk, DEVICE_PREFIX, PROFILE_SK};
use crate::ops::devices::Device;
use crate::schema::{PK, SK};
use crate::table::FleetTable;

/// The dashboard: the profile and every device with its latest readings and recent events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dashboard {
    /// The profile (on the last page; `None` before the first `PUT /me`).
    pub profile: Option<Profile>,
    /// Devices, by id.
    pub devices: Vec<Device>,
    /// Cursor for the rest, when a user's devices exceed one 1 MB page.
    pub cursor: Option<String>,
}

/// A device as a tag listing shows it (from the tag link, without another read).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaggedDevice {
    /// Device id.
    pub device_id: String,
    /// Name.
    pub name: String,
    /// Device type.
    #[serde(rename = "type")]
    pub device_type: String,
}

fn start(
    pattern: PatternId,
    cursor: Option<&str>,
    user: &UserId,
    sk_prefix: &str,
) -> Result<Option<RawItem>, FleetError> {
    Ok(cursor::resume(
        pattern,
        cursor,
        &[(PK, &user_pk(user))],
        &[(SK, sk_prefix)],
    )?)
}

fn next_cursor(pattern: PatternId, last: Option<RawItem>) -> Option<String> {
    cursor::after(pattern, last.as_ref())
}

/// One page of the user partition's items whose sort key starts with `prefix`.
fn prefix_page(
    table: &FleetTable,
    user: &UserId,
    prefix: &str,
    limit: u32,
    start_key: Option<RawItem>,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    table
        .client
        .query()
        .table_name(table.name())
        .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
        .expression_attribute_values(":pk", s(user_pk(user)))
        .expression_attribute_values(":prefix", s(prefix))
        .limit(limit as i32)
        .set_exclusive_start_key(start_key)
}

/// AP-DASH, implemented by [`dashboard`].
pub const DASHBOARD: AccessPattern = AccessPattern {
    id: PatternId::ApDash,
    description:
        "dashboard: profile and every device with its latest reading per type and last 10 events",
    frequency: Frequency::Critical,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId} AND SK BETWEEN DEVICE# AND PROFILE",
    budget: RequestBudget::Fixed(1),
    max_read_units: Some(2.5),
    route: Some("GET /me/dashboard"),
    implemented_by: implemented_by!(dashboard),
};

/// AP-DASH: one Query, `PK = USER#u AND SK BETWEEN 'DEVICE#' AND 'PROFILE'`, which holds every
/// device (with `latest` and `recent`, kept by ingestion) and the profile, and never a tag
/// link or an event.
pub async fn dashboard(
    table: &FleetTable,
    user: &UserId,
    cursor: Option<&str>,
) -> Result<Dashboard, FleetError> {
    let start_key = start(DASHBOARD.id, cursor, user, "")?;
    let (items, last) = query(
        table
            .client
            .query()
            .table_name(table.name())
            .key_condition_expression("PK = :pk AND SK BETWEEN :first AND :last")
            .expression_attribute_values(":pk", s(user_pk(user)))
            .expression_attribute_values(":first", s(DEVICE_PREFIX))
            .expression_attribute_values(":last", s(PROFILE_SK))
            .set_exclusive_start_key(start_key),
    )
    .await?;
    let mut dashboard = Dashboard {
        profile: None,
        devices: Vec::new(),
        cursor: next_cursor(DASHBOARD.id, last),
    };
    for item in items {
        match EntityType::of(&item) {
            Some(EntityType::Profile) => {
                dashboard.profile = Some(ProfileItem::from_item(item)?.into());
            }
            Some(EntityType::Device) => {
                let d = DeviceItem::from_item(item)?;
                if d.deleting_at.is_none() {
                    dashboard.devices.push(d.into());
                }
            }
            other => {
                return Err(FleetError::internal(format!(
                    "unexpected {other:?} item in the dashboard range"
                )))
            }
        }
    }
    Ok(dashboard)
}

/// AP-02, implemented by [`list_devices`].
pub const LIST_DEVICES: AccessPattern = AccessPattern {
    id: PatternId::Ap02,
    description: "a user's devices, paged",
    frequency: Frequency::Critical,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId} AND begins_with(SK, DEVICE#)",
    budget: RequestBudget::PerPage(1),
    max_read_units: None,
    route: Some("GET /me/devices"),
    implemented_by: implemented_by!(list_devices),
};

/// AP-02: a page of the user's devices, by id. One Query per page.
pub async fn list_devices(
    table: &FleetTable,
    user: &UserId,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<Device>, FleetError> {
    let start_key = start(LIST_DEVICES.id, cursor, user, DEVICE_PREFIX)?;
    let (items, last) = query(prefix_page(table, user, DEVICE_PREFIX, limit, start_key)).await?;
    let mut devices = Vec::with_capacity(items.len());
    for item in items {
        let d = DeviceItem::from_item(item)?;
        if d.deleting_at.is_none() {
            devices.push(d.into());
        }
    }
    Ok(Page {
        items: devices,
        cursor: next_cursor(LIST_DEVICES.id, last),
    })
}

/// AP-12, implemented by [`devices_with_tag`] (`GET /me/devices?tag=`).
pub const DEVICES_WITH_TAG: AccessPattern = AccessPattern {
    id: PatternId::Ap12,
    description: "a user's devices with a tag",
    frequency: Frequency::Important,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId} AND begins_with(SK, TAG#{tag}#)",
    budget: RequestBudget::PerPage(1),
    max_read_units: None,
    route: Some("GET /me/devices"),
    implemented_by: implemented_by!(devices_with_tag),
};

/// AP-12: a page of the user's devices carrying `tag`, from the tag links. One Query per page.
pub async fn devices_with_tag(
    table: &FleetTable,
    user: &UserId,
    tag: &Tag,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<TaggedDevice>, FleetError> {
    let prefix = tag_link_prefix(tag);
    let start_key = start(DEVICES_WITH_TAG.id, cursor, user, &prefix)?;
    let (items, last) = query(prefix_page(table, user, &prefix, limit, start_key)).await?;
    let devices = items
        .into_iter()
        .map(|item| {
            let link = TagLinkItem::from_item(item)?;
            Ok(TaggedDevice {
                device_id: link.device_id.to_string(),
                name: link.name,
                device_type: link.device_type.to_string(),
            })
        })
        .collect::<Result<Vec<_>, FleetError>>()?;
    Ok(Page {
        items: devices,
        cursor: next_cursor(DEVICES_WITH_TAG.id, last),
    })
}
