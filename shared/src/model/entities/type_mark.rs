//! A type mark: `USER#{userId}#DEVICE#{deviceId}` / `TYPEMARK#{type}#{window}`, on GSI1
//! under `TYPE#{type}#{day}#{shard}` (the event-type index).

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, EventType, UserId};
use crate::model::keys::{event_pk, IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::shard::{shard_of, ShardCounts};
use crate::model::timestamp::{Day, Timestamp};

/// That a device sent events of a searchable type during a window of
/// [`TYPE_WINDOW_SECONDS`]: `USER#{userId}#DEVICE#{deviceId}` /
/// `TYPEMARK#{type}#{window}`, on GSI1 under `TYPE#{type}#{day}#{shard}`. Ingestion puts the
/// same mark with every batch holding the type in that window: an identical put changes no
/// index entry, so the type's index partitions take one write per device and window, however
/// many events the devices send. AP-09 lists the marks, then reads each device's events of
/// the type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeMarkItem {
    /// Owner (stored: GSI1 projects it, AP-09 reads it from the index).
    pub user_id: UserId,
    /// Device (stored, as the owner).
    pub device_id: DeviceId,
    /// The searchable type.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// The window's start. Stored as `at`, an attribute GSI1 already projects (a projection
    /// cannot change on a deployed index).
    #[serde(rename = "at")]
    pub window: Timestamp,
    /// Device name at ingest time.
    pub device_name: String,
    /// Expiry, epoch seconds: the window's end + retention, when its last events expire.
    pub ttl: i64,
}

impl Entity for TypeMarkItem {
    const ENTITY_TYPE: EntityType = EntityType::TypeMark;
    fn item_key(&self) -> ItemKey {
        ItemKey::TypeMark {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            event_type: self.event_type.clone(),
            window: self.window,
        }
    }
    fn index_keys(&self, shards: &ShardCounts) -> IndexKeys {
        IndexKeys::type_mark(
            &self.user_id,
            &self.device_id,
            &self.event_type,
            &self.window,
            shards,
        )
    }
}

attributes!(TypeMarkItem {
    /// `userId`.
    USER_ID = "userId",
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `type`.
    EVENT_TYPE = "type",
    /// `at`: the window's start.
    WINDOW = "at",
    /// `deviceName`.
    DEVICE_NAME = "deviceName",
    /// `ttl`.
    TTL = "ttl",
});

/// Sort-key prefix of a type mark in a device-event partition (sorts after every `EVENT#`,
/// so no event range ever reads one).
pub const TYPE_MARK_PREFIX: &str = "TYPEMARK#";
/// The window of a type mark: a device has at most one mark per searchable type and window,
/// so the marks' index partitions take at most one write per device, type and window however
/// many events the device sends (docs/design.md, "The event-type index").
pub const TYPE_WINDOW_SECONDS: i64 = 3600;

/// GSI1 partition key of the type marks of a searchable type and day, one shard of them:
/// `TYPE#{type}#{day}#{shard}` (which devices sent the type, window by window).
pub fn type_gsi1pk(event_type: &EventType, day: &Day, shard: u16) -> String {
    format!("TYPE#{event_type}#{day}#{shard}")
}

/// `TYPEMARK#{type}#{window start}`: a device's type mark in its event partition.
pub fn type_mark_sk(event_type: &EventType, window: &Timestamp) -> String {
    format!("{TYPE_MARK_PREFIX}{event_type}#{window}")
}

/// The start of the [`TYPE_WINDOW_SECONDS`] window holding `at` (windows are aligned to the
/// epoch, so a day holds whole windows).
pub fn type_window(at: &Timestamp) -> Timestamp {
    let secs = at.epoch_seconds();
    Timestamp::from_epoch_millis((secs - secs.rem_euclid(TYPE_WINDOW_SECONDS)) * 1000)
        .unwrap_or(*at)
}

/// GSI1 sort key of a type mark: `{window start}#{userId}#{deviceId}` (window order).
pub fn type_mark_gsi1sk(window: &Timestamp, user: &UserId, device: &DeviceId) -> String {
    format!("{window}#{user}#{device}")
}

/// The window, owner and device of a type mark's GSI1 sort key.
pub fn parse_type_mark_gsi1sk(sk: &str) -> Result<(Timestamp, UserId, DeviceId), ValidationError> {
    let bad = || ValidationError::new("key", format!("not a type mark index key: {sk}"));
    match sk.split('#').collect::<Vec<_>>().as_slice() {
        [window, user, device] => Ok((
            Timestamp::parse_field("key", window).map_err(|_| bad())?,
            UserId::parse(*user)?,
            DeviceId::parse(*device)?,
        )),
        _ => Err(bad()),
    }
}

impl IndexKeys {
    /// A type mark on GSI1: by type, day and shard (`SEARCHABLE_EVENT_TYPES`' count; the
    /// shard hashes the device, whose marks come at most one per window), in window order.
    pub fn type_mark(
        user: &UserId,
        device: &DeviceId,
        event_type: &EventType,
        window: &Timestamp,
        shards: &ShardCounts,
    ) -> Self {
        let Some(type_shards) = shards.type_shards(event_type) else {
            return IndexKeys::default();
        };
        let spread = format!("{user}#{device}");
        IndexKeys {
            gsi1pk: Some(type_gsi1pk(
                event_type,
                &window.day(),
                shard_of(&spread, type_shards),
            )),
            gsi1sk: Some(type_mark_gsi1sk(window, user, device)),
            ..IndexKeys::default()
        }
    }
}

/// `USER#{userId}#DEVICE#{deviceId}` / `TYPEMARK#{type}#{window}`.
pub fn primary_key(
    user: &UserId,
    device: &DeviceId,
    event_type: &EventType,
    window: &Timestamp,
) -> PrimaryKey {
    PrimaryKey {
        pk: event_pk(user, device),
        sk: type_mark_sk(event_type, window),
    }
}

/// A type mark's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "DEVICE", device], ["TYPEMARK", event_type, window]) => key.matched(|| {
            Ok(ItemKey::TypeMark {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
                event_type: EventType::parse(*event_type)?,
                window: Timestamp::parse_field("at", window)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "typeMark",
    pk: "USER#${userId}#DEVICE#${deviceId}",
    sk: "TYPEMARK#${type}#${window}",
    gsi1: Some((
        "TYPE#${type}#${day}#${shard}",
        "${window}#${userId}#${deviceId}",
    )),
    gsi2: None,
    gsi3: None,
};
