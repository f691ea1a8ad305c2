//! A device event: `USER#{userId}#DEVICE#{deviceId}` / `EVENT#{at}#{eventId}`, on GSI1
//! under its device and type when the type is searchable.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, DeviceType, EventId, EventType, UserId};
use crate::model::keys::{event_pk, IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::readings::EventValue;
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;

/// One device event: `USER#{userId}#DEVICE#{deviceId}` / `EVENT#{at}#{eventId}`; on GSI1 under
/// its device and type only when its type is searchable (`SEARCHABLE_EVENT_TYPES`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventItem {
    /// Owner at ingest time.
    pub user_id: UserId,
    /// Device id.
    pub device_id: DeviceId,
    /// Event id.
    pub id: EventId,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// Value.
    pub value: EventValue,
    /// When it happened.
    pub at: Timestamp,
    /// Device name at ingest time.
    pub device_name: String,
    /// Device type at ingest time.
    pub device_type: DeviceType,
    /// Expiry, epoch seconds (`at` + retention).
    pub ttl: i64,
    /// The registration that stored it ([`registration_stamp`] of its `createdAt`), stored as
    /// `reg`: events are keyed by the reading's own time, so only this tells a deleted
    /// device's events from those of a device registered again under the same id (issue 38).
    /// Absent on events stored before the stamp: read as the current registration's.
    #[serde(default, rename = "reg", skip_serializing_if = "Option::is_none")]
    pub registered_at: Option<i64>,
}

attributes!(EventItem {
    /// `userId`.
    USER_ID = "userId",
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `id`.
    ID = "id",
    /// `type`.
    EVENT_TYPE = "type",
    /// `value`.
    VALUE = "value",
    /// `at`.
    AT = "at",
    /// `deviceName`.
    DEVICE_NAME = "deviceName",
    /// `deviceType`.
    DEVICE_TYPE = "deviceType",
    /// `ttl`.
    TTL = "ttl",
    /// `reg`: the registration stamp.
    REGISTERED_AT = "reg",
});

impl Entity for EventItem {
    const ENTITY_TYPE: EntityType = EntityType::Event;
    fn item_key(&self) -> ItemKey {
        ItemKey::Event {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            at: self.at,
            event: self.id.clone(),
        }
    }
    fn index_keys(&self, shards: &ShardCounts) -> IndexKeys {
        IndexKeys::event(
            &self.user_id,
            &self.device_id,
            &self.event_type,
            &self.at,
            &self.id,
            shards,
        )
    }
}

/// A registration's stamp on the items it stores (events and summary items, attribute `reg`):
/// its `createdAt` in epoch milliseconds. A move keeps `createdAt`, so the stamp travels
/// with the device; a deletion and a registration again under the id start a new one.
pub fn registration_stamp(created_at: &Timestamp) -> i64 {
    created_at.epoch_millis()
}

/// Whether an item stamped `stamp` belongs to the registration stamped `registration`: the
/// same stamp, or no stamp (stored before stamps existed; nothing tells it apart).
pub fn stored_by(stamp: Option<i64>, registration: i64) -> bool {
    stamp.is_none_or(|s| s == registration)
}

/// Sort-key prefix of events in a device-event partition.
pub const EVENT_PREFIX: &str = "EVENT#";

/// `EVENT#{at}#{eventId}`.
pub fn event_sk(at: &Timestamp, event: &EventId) -> String {
    format!("{EVENT_PREFIX}{at}#{event}")
}

/// GSI1 partition key of one device's events of one searchable type:
/// `DEVICETYPE#{userId}#{deviceId}#{type}`. Its write rate is that device's rate of that type,
/// never more than the device's own event partition takes.
pub fn device_type_gsi1pk(user: &UserId, device: &DeviceId, event_type: &EventType) -> String {
    format!("DEVICETYPE#{user}#{device}#{event_type}")
}

/// GSI1 sort key of an event: `{at}#{deviceId}#{eventId}` (time order across devices).
pub fn event_index_sk(at: &Timestamp, device: &DeviceId, event: &EventId) -> String {
    format!("{at}#{device}#{event}")
}

/// The event id at the end of an index sort key `{at}#{deviceId}#{eventId}`.
pub fn parse_event_index_sk(sk: &str) -> Result<EventId, ValidationError> {
    let id = sk
        .rsplit_once('#')
        .map(|(_, id)| id)
        .ok_or_else(|| ValidationError::new("key", format!("not an event index key: {sk}")))?;
    EventId::parse(id)
}

impl IndexKeys {
    /// An event of a searchable type on GSI1, under its device and type (in time order); no
    /// index entry for any other type. A key per device: no storm of many devices can heat one
    /// partition, and one device's key takes no more than its own event partition.
    pub fn event(
        user: &UserId,
        device: &DeviceId,
        event_type: &EventType,
        at: &Timestamp,
        event: &EventId,
        shards: &ShardCounts,
    ) -> Self {
        if shards.type_shards(event_type).is_none() {
            return IndexKeys::default();
        }
        IndexKeys {
            gsi1pk: Some(device_type_gsi1pk(user, device, event_type)),
            gsi1sk: Some(event_index_sk(at, device, event)),
            ..IndexKeys::default()
        }
    }
}

/// `USER#{userId}#DEVICE#{deviceId}` / `EVENT#{at}#{eventId}`.
pub fn primary_key(
    user: &UserId,
    device: &DeviceId,
    at: &Timestamp,
    event: &EventId,
) -> PrimaryKey {
    PrimaryKey {
        pk: event_pk(user, device),
        sk: event_sk(at, event),
    }
}

/// An event's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "DEVICE", device], ["EVENT", at, event]) => key.matched(|| {
            Ok(ItemKey::Event {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
                at: Timestamp::parse_field("at", at)?,
                event: EventId::parse(*event)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "event",
    pk: "USER#${userId}#DEVICE#${deviceId}",
    sk: "EVENT#${at}#${eventId}",
    gsi1: Some((
        "DEVICETYPE#${userId}#${deviceId}#${type} (searchable types only)",
        "${at}#${deviceId}#${eventId}",
    )),
    gsi2: None,
    gsi3: None,
};
