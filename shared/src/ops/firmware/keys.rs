//! An owner's Ed25519 public keys per device type: `PUT /me/firmware-keys/{deviceType}`.
//! All in one item (`FIRMWARE#{userId}` / `KEYS`), changed by a conditional PutItem on its
//! version, so two owners' admins setting keys of two types at once both land.

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use serde::Serialize;

use crate::model::entities::firmware_keys::FirmwareKeysItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions};
use crate::model::firmware::parse_public_key;
use crate::model::ids::{DeviceType, UserId};
use crate::model::schema::PK;
use crate::store::dynamo::{number_value, read_consistent};
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// Attempts of a key change against concurrent changes.
pub const CHANGE_ATTEMPTS: u32 = 3;

/// Most device types with a key per owner (the item stays a few KB).
pub const MAX_SIGNING_KEYS: usize = 100;

/// A device type's signing key as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SigningKey {
    /// The device type.
    pub device_type: DeviceType,
    /// The Ed25519 public key, base64.
    pub public_key: String,
}

/// Sets (or replaces) `device_type`'s public key: packages created afterwards need a
/// signature that verifies under it. Packages created before keep the key they were created
/// with (none, or the old one).
pub async fn set_signing_key(
    table: &FleetTable,
    owner: &UserId,
    device_type: DeviceType,
    public_key: &str,
) -> Result<SigningKey, FleetError> {
    parse_public_key(public_key)?;
    for _ in 0..CHANGE_ATTEMPTS {
        let mut set: FirmwareKeysItem = read_consistent(
            table,
            &ItemKey::FirmwareKeys {
                user: owner.clone(),
            },
        )
        .await?
        .unwrap_or_else(|| FirmwareKeysItem {
            user_id: owner.clone(),
            keys: Default::default(),
            version: 0,
        });
        if set.keys.len() >= MAX_SIGNING_KEYS && !set.keys.contains_key(device_type.as_str()) {
            return Err(FleetError::Conflict {
                code: "signing_key_limit",
                message: format!("an owner keeps at most {MAX_SIGNING_KEYS} signing keys"),
            });
        }
        let read_version = set.version;
        set.keys
            .insert(device_type.to_string(), public_key.to_string());
        set.version = read_version + 1;
        let unchanged = if read_version == 0 {
            Condition::absent(PK)
        } else {
            Condition::equals(FirmwareKeysItem::VERSION, number_value(read_version))
        };
        let result = table
            .client
            .put_item()
            .table_name(table.name())
            .set_item(Some(set.to_item(&table.config.shards)?))
            .expressions(Expressions::condition(unchanged))
            .send()
            .await;
        match result {
            Ok(_) => {
                return Ok(SigningKey {
                    device_type,
                    public_key: public_key.to_string(),
                })
            }
            Err(err) => match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(_)) => continue,
                _ => return Err(sdk_error(err)),
            },
        }
    }
    Err(FleetError::Conflict {
        code: "busy",
        message: "the signing keys changed meanwhile: retry".to_string(),
    })
}
