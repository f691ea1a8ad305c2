//! The user partition reads: the dashboard (AP-DASH), a user's devices (AP-02) and devices
//! with a tag (AP-12). Each page is one Query. A device's live state sits right after its
//! device item when it is placed on the user partition (every device of an ordinary owner);
//! the states of a large owner's devices placed on other partitions are read with one
//! BatchGetItem per page.

use serde::Serialize;

use super::profile::Profile;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::KeysAndAttributes;

use crate::model::cursor;
use crate::model::cursor::Page;
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device::DEVICE_PREFIX;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::profile::ProfileItem;
use crate::model::entities::profile::PROFILE_SK;
use crate::model::entities::tag_link::tag_link_prefix;
use crate::model::entities::tag_link::TagLinkItem;
use crate::model::entities::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::expression::Expressions;
use crate::model::ids::{DeviceId, Tag, UserId};
use crate::model::keys::{user_pk, PrimaryKey};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, PK, SK};
use crate::ops::devices::state_key;
use crate::ops::devices::view::{Device, DeviceTrail};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{get_all, key_prefix, key_range, query};
use crate::store::retry::Retry;
use crate::store::table::{FleetTable, MAX_ATTEMPTS};

/// The dashboard: the profile and every device with its latest readings and recent events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dashboard {
    /// The profile (on the last page; `None` before the first `PUT /me`).
    pub profile: Option<Profile>,
    /// Devices, by id.
    pub devices: Vec<Device>,
    /// Cursor for the rest, when a user's devices exceed one page ([`DASHBOARD_PAGE_ITEMS`]).
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
) -> Result<Option<Item>, FleetError> {
    Ok(cursor::resume(
        pattern,
        cursor,
        &[(PK, &user_pk(user))],
        &[(SK, sk_prefix)],
    )?)
}

fn next_cursor(pattern: PatternId, last: Option<Item>) -> Option<String> {
    cursor::after(pattern, last.as_ref())
}

/// One page of the user partition's items whose sort key starts with `prefix`.
fn prefix_page(
    table: &FleetTable,
    user: &UserId,
    prefix: &str,
    limit: u32,
    start_key: Option<Item>,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    key_prefix(table, user_pk(user), prefix, Expressions::builder())
        .limit(limit as i32)
        .set_exclusive_start_key(start_key)
}

/// Items one dashboard page reads: an ordinary fleet (devices, their states, the fleet item
/// and the profile) fits in one page, and a page never holds more devices than one
/// BatchGetItem can fetch states for.
pub const DASHBOARD_PAGE_ITEMS: u32 = 100;

/// The devices among `items` (a page of the user partition) with their live states: the ones
/// beside them in the page, the others (placed on another partition, or cut off by the page
/// end) read with one BatchGetItem. A state whose device is on the previous page is skipped.
/// Also returns the profile if the page holds it.
async fn devices_with_states(
    table: &FleetTable,
    items: Vec<Item>,
    with_trails: bool,
) -> Result<(Vec<Device>, Option<ProfileItem>), FleetError> {
    let mut devices: Vec<(DeviceItem, Option<DeviceStateItem>)> = Vec::new();
    let mut profile = None;
    for item in items {
        match EntityType::of(&item) {
            Some(EntityType::Profile) => profile = Some(ProfileItem::from_item(item)?),
            Some(EntityType::Device) => {
                let d = DeviceItem::from_item(item)?;
                if d.deleting_at.is_none() {
                    devices.push((d, None));
                }
            }
            Some(EntityType::DeviceState) => {
                let state = DeviceStateItem::from_item(item)?;
                if let Some((_, slot)) = devices
                    .last_mut()
                    .filter(|(d, _)| d.device_id == state.device_id)
                {
                    *slot = Some(state);
                }
            }
            Some(EntityType::Fleet) => {}
            other => {
                return Err(FleetError::internal(format!(
                    "unexpected {other:?} item in the user partition's device range"
                )))
            }
        }
    }
    let missing: Vec<_> = devices
        .iter()
        .filter(|(_, state)| state.is_none())
        .map(|(d, _)| state_key(d).attributes())
        .collect();
    let mut placed: HashMap<DeviceId, DeviceStateItem> = HashMap::new();
    if !missing.is_empty() {
        let request = KeysAndAttributes::builder()
            .set_keys(Some(missing))
            .build()
            .map_err(FleetError::internal)?;
        for item in get_all(table, request, &mut Retry::attempts(MAX_ATTEMPTS)).await? {
            let state = DeviceStateItem::from_item(item)?;
            placed.insert(state.device_id.clone(), state);
        }
    }
    let devices = devices
        .into_iter()
        .map(|(d, state)| {
            let state = state.or_else(|| placed.remove(&d.device_id));
            let mut device = Device::with_state(d, state.as_ref());
            if with_trails {
                device.trail = state.as_ref().and_then(DeviceTrail::of_state);
            }
            device
        })
        .collect();
    Ok((devices, profile))
}

/// AP-DASH, implemented by [`dashboard`].
pub const DASHBOARD: AccessPattern = AccessPattern {
    id: PatternId::Dashboard,
    description:
        "dashboard: profile and every device with its latest reading per type and last 10 events",
    frequency: Frequency::Critical,
    operations: &[Operation::Query, Operation::BatchGetItem],
    index: None,
    key_condition: "PK = USER#{userId} AND SK BETWEEN DEVICE# AND PROFILE (+ the states placed on the owner's other partitions)",
    budget: RequestBudget::PerPagePlusPlacedStates(1),
    // Ten devices with ten recent events each and the profile came to under 8 KB (the live
    // state's readings are compact, `crate::model::readings`): one eventually consistent read
    // unit. The states now also carry their open summaries and sparkline trail (issue 32,
    // `crate::model::series`), about 100 to 150 bytes each on the reference dataset: half a
    // unit more, the price of sparklines and exact series without a read per device.
    max_read_units: Some(1.5),
    route: Some("GET /me/dashboard"),
    implemented_by: implemented_by!(dashboard),
};

/// AP-DASH: one Query per page, `PK = USER#u AND SK BETWEEN 'DEVICE#' AND 'PROFILE'`, which
/// holds every device (each with its sparkline `trail` from its live state's summaries), the live states placed on the user partition (all of an ordinary
/// owner's), the fleet item and the profile, and never a tag link or an event; plus one
/// BatchGetItem per page for the states of a large owner's devices placed elsewhere.
pub async fn dashboard(
    table: &FleetTable,
    user: &UserId,
    cursor: Option<&str>,
) -> Result<Dashboard, FleetError> {
    let start_key = start(DASHBOARD.id, cursor, user, "")?;
    let (items, last) = query(
        key_range(
            table,
            user_pk(user),
            DEVICE_PREFIX,
            PROFILE_SK,
            Expressions::builder(),
        )
        .limit(DASHBOARD_PAGE_ITEMS as i32)
        .set_exclusive_start_key(start_key),
    )
    .await?;
    let (devices, profile) = devices_with_states(table, items, true).await?;
    Ok(Dashboard {
        profile: profile.map(Into::into),
        devices,
        cursor: next_cursor(DASHBOARD.id, last),
    })
}

/// AP-02, implemented by [`list_devices`].
pub const LIST_DEVICES: AccessPattern = AccessPattern {
    id: PatternId::ListDevices,
    description: "a user's devices, paged",
    frequency: Frequency::Critical,
    operations: &[Operation::Query, Operation::BatchGetItem],
    index: None,
    key_condition: "PK = USER#{userId} AND begins_with(SK, DEVICE#) (+ the states placed on the owner's other partitions)",
    budget: RequestBudget::PerPagePlusPlacedStates(1),
    max_read_units: None,
    route: Some("GET /me/devices"),
    implemented_by: implemented_by!(list_devices),
};

/// AP-02: a page of at most `limit` of the user's devices, by id, with their live states. One
/// Query per page (reading a device and the state beside it), plus one BatchGetItem for states
/// placed on the owner's other partitions.
pub async fn list_devices(
    table: &FleetTable,
    user: &UserId,
    limit: u32,
    cursor: Option<&str>,
) -> Result<Page<Device>, FleetError> {
    let start_key = start(LIST_DEVICES.id, cursor, user, DEVICE_PREFIX)?;
    let (mut items, mut last) = query(prefix_page(
        table,
        user,
        DEVICE_PREFIX,
        limit.saturating_mul(2),
        start_key,
    ))
    .await?;
    // Two items per device at most; with states placed elsewhere a page may hold more
    // devices than asked for: keep `limit` and resume after the last kept one's items.
    let mut kept = 0;
    let cut = items.iter().position(|item| {
        if EntityType::of(item) == Some(EntityType::Device) {
            kept += 1;
        }
        kept > limit
    });
    if let Some(cut) = cut {
        items.truncate(cut);
        last = items
            .last()
            .and_then(PrimaryKey::of)
            .map(|k| k.attributes());
    }
    let (devices, _) = devices_with_states(table, items, false).await?;
    Ok(Page {
        items: devices,
        cursor: next_cursor(LIST_DEVICES.id, last),
    })
}

/// AP-12, implemented by [`devices_with_tag`] (`GET /me/devices?tag=`).
pub const DEVICES_WITH_TAG: AccessPattern = AccessPattern {
    id: PatternId::DevicesByTag,
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
