//! Retention per device type (`PUT /me/retention` AP-R1, `GET /me/retention` AP-R2): an owner
//! shortens the raw retention of their devices of one type, never past the template's
//! `RETENTION_DAYS`; the summaries keep `HOURLY_RETENTION_DAYS` / `DAILY_RETENTION_DAYS`.
//!
//! The setting lives on the owner's fleet item (registration reads that item anyway, so a new
//! device copies its type's setting for free) and is copied onto each registration of that
//! type, which ingestion reads for every batch: the shorter `ttl` costs no read per batch.
//! A change is ordered by the fleet item's `retentionVersion`: the copy on a registration is
//! only replaced by a newer version's, so concurrent changes converge on the last one; a
//! registration racing a change is retried by its own condition on that version
//! ([`crate::ops::devices::fleet`]). The type of a device never changes after registration,
//! so no other write has to copy it.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValue;
use serde::Serialize;

use crate::model::entities::device::{DeviceItem, DEVICE_PREFIX};
use crate::model::entities::fleet::FleetItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{DeviceType, UserId};
use crate::model::keys::user_pk;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, ENTITY_TYPE, PK, SK};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{number_value, query, string_value};
use crate::store::table::{done_unless_failed, sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// A validated `PUT /me/retention`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetentionChange {
    /// The device type (the devices' `type`).
    pub device_type: DeviceType,
    /// Days the raw readings of that type are kept, 1..=`RETENTION_DAYS`; `None` restores the
    /// template's.
    pub raw_days: Option<u32>,
}

impl RetentionChange {
    /// The change, once `raw_days` is checked against the template's `retention_days`: past
    /// it, or zero, is an error naming `rawDays`.
    pub fn new(
        device_type: DeviceType,
        raw_days: Option<u64>,
        retention_days: u32,
    ) -> Result<Self, ValidationError> {
        let raw_days = match raw_days {
            None => None,
            Some(days) if (1..=u64::from(retention_days)).contains(&days) => Some(days as u32),
            Some(_) => {
                return Err(ValidationError::new(
                    "rawDays",
                    format!("must be a whole number of days from 1 to {retention_days} (the template's RetentionDays), or null for the default"),
                ))
            }
        };
        Ok(Self {
            device_type,
            raw_days,
        })
    }
}

/// One shortened device type as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeRetention {
    /// The device type.
    pub device_type: String,
    /// Days its raw readings are kept.
    pub raw_days: u32,
}

/// An owner's retentions as `GET /me/retention` shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// Raw readings of every type not listed (`RETENTION_DAYS`).
    pub default_raw_days: u32,
    /// Hourly summaries (`HOURLY_RETENTION_DAYS`).
    pub hourly_days: u32,
    /// Daily summaries (`DAILY_RETENTION_DAYS`).
    pub daily_days: u32,
    /// The types the owner shortened, by type.
    pub device_types: Vec<TypeRetention>,
}

impl Retention {
    fn of(table: &FleetTable, fleet: Option<&FleetItem>) -> Self {
        let config = &table.config;
        Self {
            default_raw_days: config.retention_days,
            hourly_days: config.hourly_retention_days,
            daily_days: config.daily_retention_days,
            device_types: fleet
                .map(|f| {
                    f.raw_retention
                        .iter()
                        .map(|(kind, &days)| TypeRetention {
                            device_type: kind.to_string(),
                            // A setting made under a longer template retention is capped.
                            raw_days: days.min(config.retention_days),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// AP-R1, implemented by [`set_raw_retention`].
pub const SET_RETENTION: AccessPattern = AccessPattern {
    id: PatternId::SetRetention,
    description: "shorten (or restore) the raw retention of the owner's devices of one type",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::UpdateItem, Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId}, SK = FLEET (read, then retentionVersion = read); PK = USER#{userId} AND SK begins_with DEVICE# (consistent, type filter); per device PK = DEVICE#{deviceId}, SK = REGISTRATION (retentionVersion older)",
    budget: RequestBudget::FixedPlusPagesAndDevices(2),
    max_read_units: None,
    route: Some("PUT /me/retention"),
    implemented_by: implemented_by!(set_raw_retention),
};

/// Fleet-item conflicts (another retention change of the same owner in between) a change
/// retries.
const VERSION_ATTEMPTS: u32 = 5;

/// Registrations updated at once (one page of devices may hold hundreds).
const COPIES_AT_ONCE: usize = 25;

/// AP-R1: applies `change` for `user`: one consistent GetItem of the fleet item, one
/// UpdateItem writing its new retentions at the next `retentionVersion` (conditioned on the
/// version read), then one consistent Query per page of the owner's devices (filtered to the
/// type) and one UpdateItem per device of that type copying the setting onto its registration.
/// Answers the owner's retentions after the change. Events stored from then on (after the
/// ingest Lambda's registration cache, `REGISTRATION_CACHE_SECONDS`) carry the new `ttl`;
/// events already stored keep theirs.
pub async fn set_raw_retention(
    table: &FleetTable,
    user: &UserId,
    change: RetentionChange,
) -> Result<Retention, FleetError> {
    for _ in 0..VERSION_ATTEMPTS {
        let read = read_fleet_item(table, user, true).await?;
        let mut fleet = read.clone().unwrap_or_else(|| FleetItem {
            user_id: user.clone(),
            partitions: 0,
            devices: 0,
            raw_retention: Default::default(),
            retention_version: None,
        });
        match change.raw_days {
            Some(days) => fleet.raw_retention.insert(change.device_type.clone(), days),
            None => fleet.raw_retention.remove(&change.device_type),
        };
        let version = fleet.retention_version.unwrap_or(0) + 1;
        fleet.retention_version = Some(version);
        if !write_fleet_retention(table, &fleet, read.and_then(|f| f.retention_version)).await? {
            continue;
        }
        copy_to_registrations(table, user, &change, version).await?;
        return Ok(Retention::of(table, Some(&fleet)));
    }
    Err(crate::store::dynamo::throttled())
}

/// Writes `fleet`'s retentions and version if the item is still at `read_version`; `false`
/// when another change came first.
async fn write_fleet_retention(
    table: &FleetTable,
    fleet: &FleetItem,
    read_version: Option<u64>,
) -> Result<bool, FleetError> {
    let changes = Update::new()
        .set_all([FleetItem::ENTITY_TYPE.assignment()])
        .set(
            FleetItem::RETENTION_VERSION,
            number_value(fleet.retention_version.unwrap_or(0)),
        );
    let changes = if fleet.raw_retention.is_empty() {
        changes.remove(FleetItem::RAW_RETENTION)
    } else {
        changes.set(
            FleetItem::RAW_RETENTION,
            serde_dynamo::to_attribute_value(&fleet.raw_retention)?,
        )
    };
    let unchanged = match read_version {
        Some(version) => Condition::equals(FleetItem::RETENTION_VERSION, number_value(version)),
        None => Condition::absent(FleetItem::RETENTION_VERSION),
    };
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(&fleet.user_id).attributes()))
        .expressions(Expressions::write(changes, Some(unchanged)))
        .return_values(ReturnValue::None)
        .send()
        .await;
    match sent {
        Ok(_) => Ok(true),
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(UpdateItemError::ConditionalCheckFailedException(_))
            ) =>
        {
            Ok(false)
        }
        Err(err) => Err(sdk_error(err)),
    }
}

/// Copies `change` at `version` onto the registration of each of `user`'s devices of its type.
async fn copy_to_registrations(
    table: &FleetTable,
    user: &UserId,
    change: &RetentionChange,
    version: u64,
) -> Result<(), FleetError> {
    let of_type = Condition::equals(ENTITY_TYPE, string_value(EntityType::Device.as_str())).and(
        Condition::equals(
            DeviceItem::DEVICE_TYPE,
            string_value(change.device_type.as_str()),
        ),
    );
    let mut start: Option<Item> = None;
    loop {
        // Consistent: a registration committed before the fleet item's write above is listed
        // (one committed after it copied the new setting itself).
        let request = crate::store::dynamo::key_range(
            table,
            user_pk(user),
            DEVICE_PREFIX,
            format!("{DEVICE_PREFIX}\u{10FFFF}"),
            Expressions::builder()
                .condition(of_type.clone())
                .projection(&[PK, SK]),
        )
        .consistent_read(true)
        .set_exclusive_start_key(start.take());
        let (items, last) = query(request).await?;
        let devices = items
            .iter()
            .map(ItemKey::of)
            .collect::<Result<Vec<_>, _>>()?;
        for group in devices.chunks(COPIES_AT_ONCE) {
            let copies = group.iter().filter_map(|key| match key {
                ItemKey::Device { device, .. } => {
                    Some(copy_to_registration(table, user, device, change, version))
                }
                _ => None,
            });
            futures::future::try_join_all(copies).await?;
        }
        match last {
            Some(key) => start = Some(key),
            None => return Ok(()),
        }
    }
}

/// One registration's copy: replaced only while it is `user`'s, of the change's type, and holds
/// an older version's copy (a newer change's copy stays).
async fn copy_to_registration(
    table: &FleetTable,
    user: &UserId,
    device: &crate::model::ids::DeviceId,
    change: &RetentionChange,
    version: u64,
) -> Result<(), FleetError> {
    let changes = Update::new().set(RegistrationItem::RETENTION_VERSION, number_value(version));
    let changes = match change.raw_days {
        Some(days) => changes.set(RegistrationItem::RAW_RETENTION_DAYS, number_value(days)),
        None => changes.remove(RegistrationItem::RAW_RETENTION_DAYS),
    };
    let ours = Condition::equals(RegistrationItem::USER_ID, string_value(user.as_str()))
        .and(Condition::equals(
            RegistrationItem::DEVICE_TYPE,
            string_value(change.device_type.as_str()),
        ))
        .and(
            Condition::absent(RegistrationItem::RETENTION_VERSION).or(Condition::below(
                RegistrationItem::RETENTION_VERSION,
                number_value(version),
            )),
        );
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::registration(device).attributes()))
        .expressions(Expressions::write(changes, Some(ours)))
        .send()
        .await;
    // A newer change's copy is there already, or the device was deleted meanwhile.
    done_unless_failed(sent)
}

/// AP-R2, implemented by [`get_retention`].
pub const GET_RETENTION: AccessPattern = AccessPattern {
    id: PatternId::GetRetention,
    description: "the owner's retentions: raw per device type, hourly and daily summaries",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = FLEET",
    budget: RequestBudget::Fixed(1),
    max_read_units: Some(0.5),
    route: Some("GET /me/retention"),
    implemented_by: implemented_by!(get_retention),
};

/// AP-R2: `user`'s retentions, from one eventually consistent GetItem of the fleet item.
pub async fn get_retention(table: &FleetTable, user: &UserId) -> Result<Retention, FleetError> {
    let fleet = read_fleet_item(table, user, false).await?;
    Ok(Retention::of(table, fleet.as_ref()))
}

async fn read_fleet_item(
    table: &FleetTable,
    user: &UserId,
    consistent: bool,
) -> Result<Option<FleetItem>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::fleet(user).attributes()))
        .consistent_read(consistent)
        .send()
        .await
        .map_err(sdk_error)?;
    out.item.map(FleetItem::from_item).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::settings::FleetConfig;
    use crate::model::timestamp::Timestamp;
    use crate::ops::ingest::raw_retention_days;

    #[test]
    fn raw_days_run_from_one_to_the_template_retention() {
        let kind = DeviceType::parse("thermostat").unwrap();
        for ok in [Some(1), Some(90), None] {
            assert!(RetentionChange::new(kind.clone(), ok, 90).is_ok(), "{ok:?}");
        }
        for bad in [0, 91, u64::MAX] {
            let err = RetentionChange::new(kind.clone(), Some(bad), 90).unwrap_err();
            assert_eq!(err.field, "rawDays", "{bad}");
        }
    }

    #[test]
    fn a_registrations_retention_is_its_owners_setting_capped_by_the_template() {
        let config = FleetConfig::for_table("t");
        let mut registration = RegistrationItem {
            device_id: crate::model::ids::DeviceId::parse("d-1").unwrap(),
            user_id: UserId::parse("u").unwrap(),
            token_sha256: String::new(),
            previous_token_sha256: None,
            previous_token_until: None,
            revoked_at: None,
            device_name: "D".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            partition: 0,
            created_at: Timestamp::now(),
            raw_retention_days: None,
            retention_version: None,
        };
        assert_eq!(raw_retention_days(&registration, &config), 90);
        registration.raw_retention_days = Some(7);
        assert_eq!(raw_retention_days(&registration, &config), 7);
        // Set under a longer template retention, then the template was shortened.
        registration.raw_retention_days = Some(365);
        assert_eq!(raw_retention_days(&registration, &config), 90);
    }
}
