//! A command queued for a device: `USER#{userId}#DEVICE#{deviceId}` / `COMMAND#{seq}`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{CommandName, DeviceId, UserId};
use crate::model::keys::{event_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;
use crate::model::twin::{command_id, CommandStatus};

/// A command for a device: `USER#{userId}#DEVICE#{deviceId}` / `COMMAND#{seq}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// Its place in the device's queue (the command id is `cmd-{seq}`).
    pub seq: u64,
    /// What to do.
    pub name: CommandName,
    /// Its parameters, as compact JSON text of an object.
    pub parameters: String,
    /// Where it is (never `expired`: see [`CommandStatus`]).
    pub status: CommandStatus,
    /// When it was queued.
    pub created_at: Timestamp,
    /// After this it is never delivered.
    pub expires_at: Timestamp,
    /// First delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    /// The device's acknowledgement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// What the device said about it, as compact JSON text of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Removal, epoch seconds: [`crate::model::twin::COMMAND_KEPT_SECONDS`] after its expiry.
    pub ttl: i64,
}

impl CommandItem {
    /// The id the API shows: `cmd-{seq}`.
    pub fn command_id(&self) -> String {
        command_id(self.seq)
    }

    /// Its status at `now`: a queued or delivered command past its expiry is expired.
    pub fn status_at(&self, now: Timestamp) -> CommandStatus {
        match self.status {
            CommandStatus::Queued | CommandStatus::Delivered if now >= self.expires_at => {
                CommandStatus::Expired
            }
            status => status,
        }
    }
}

attributes!(CommandItem {
    /// `seq`.
    SEQ = "seq",
    /// `name`.
    NAME = "name",
    /// `parameters`.
    PARAMETERS = "parameters",
    /// `status`.
    STATUS = "status",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `expiresAt`.
    EXPIRES_AT = "expiresAt",
    /// `deliveredAt`.
    DELIVERED_AT = "deliveredAt",
    /// `finishedAt`.
    FINISHED_AT = "finishedAt",
    /// `result`.
    RESULT = "result",
    /// `ttl`.
    TTL = "ttl",
});

impl Entity for CommandItem {
    const ENTITY_TYPE: EntityType = EntityType::Command;
    fn item_key(&self) -> ItemKey {
        ItemKey::Command {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            seq: self.seq,
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort-key prefix of a device's commands (in its event partition, after every `EVENT#`).
pub const COMMAND_PREFIX: &str = "COMMAND#";
/// `COMMAND#{seq}` (10 digits, so commands sort in the order they were queued).
pub fn command_sk(seq: u64) -> String {
    format!("{COMMAND_PREFIX}{seq:010}")
}

/// `USER#{userId}#DEVICE#{deviceId}` / `COMMAND#{seq}`.
pub fn primary_key(user: &UserId, device: &DeviceId, seq: &u64) -> PrimaryKey {
    PrimaryKey {
        pk: event_pk(user, device),
        sk: command_sk(*seq),
    }
}

/// A command's key, if `key` has its shape (a sequence number of exactly ten digits).
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "DEVICE", device], ["COMMAND", seq])
            if seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit()) =>
        {
            key.matched(|| {
                Ok(ItemKey::Command {
                    user: UserId::parse(*user)?,
                    device: DeviceId::parse(*device)?,
                    seq: seq.parse().map_err(|_| key.bad())?,
                })
            })
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "command",
    pk: "USER#${userId}#DEVICE#${deviceId}",
    sk: "COMMAND#${seq}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
