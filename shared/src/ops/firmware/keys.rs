//! An owner's Ed25519 public keys per device type: `PUT /me/firmware-keys/{deviceType}`.
//! All in one item (`FIRMWARE#{userId}` / `KEYS`), changed by a conditional PutItem on its
//! version, so two owners' admins setting keys of two types at once both land.

use serde::Serialize;

use crate::model::entities::firmware_keys::FirmwareKeysItem;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::firmware::parse_public_key;
use crate::model::ids::{DeviceType, UserId};
use crate::model::pattern_id::PatternId;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{put_if_version, read_consistent};
use crate::store::table::FleetTable;

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

/// AP-F5, implemented by [`set_signing_key`].
pub const SET_SIGNING_KEY: AccessPattern = AccessPattern {
    id: PatternId::SetSigningKey,
    description: "set or replace a device type's Ed25519 signing key",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem, Operation::PutItem],
    index: None,
    key_condition:
        "PK = FIRMWARE#{userId}, SK = KEYS (read, then written conditioned on the version read)",
    // A read and a conditional write per attempt (2 without a concurrent change).
    budget: RequestBudget::Fixed(2 * CHANGE_ATTEMPTS),
    max_read_units: None,
    route: Some("PUT /me/firmware-keys/{deviceType}"),
    implemented_by: implemented_by!(set_signing_key),
};

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
        if put_if_version(table, &set, FirmwareKeysItem::VERSION, read_version).await? {
            return Ok(SigningKey {
                device_type,
                public_key: public_key.to_string(),
            });
        }
    }
    Err(FleetError::Conflict {
        code: "busy",
        message: "the signing keys changed meanwhile: retry".to_string(),
    })
}
