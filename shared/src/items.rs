//! The items stored in the table, one struct per `entityType`, (de)serialized with
//! serde_dynamo. Key attributes are carried explicitly so an item read back can be checked.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::ValidationError;
use crate::ids::{DeviceId, DeviceType, EventId, EventType, Tag, UserId};
use crate::timestamp::Timestamp;

/// The `entityType` attribute on every item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EntityType {
    /// A user's profile.
    Profile,
    /// A device in its owner's partition.
    Device,
    /// A tag link (device carries tag).
    TagLink,
    /// A device id's table-wide registration.
    Registration,
    /// A device event.
    Event,
    /// A daily analytics report.
    Report,
    /// Progress of one scan segment of a daily analytics run.
    Checkpoint,
}

/// Device status; `STATUS#{status}#{shard}` on GSI1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceStatus {
    /// In service (the status of a new device).
    Active,
    /// Switched off or retired.
    Inactive,
    /// Being serviced.
    Maintenance,
    /// Reporting a fault.
    Error,
}

impl DeviceStatus {
    /// Every status, in a stable order.
    pub const ALL: [DeviceStatus; 4] = [
        DeviceStatus::Active,
        DeviceStatus::Inactive,
        DeviceStatus::Maintenance,
        DeviceStatus::Error,
    ];

    /// The stored and API spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            DeviceStatus::Active => "active",
            DeviceStatus::Inactive => "inactive",
            DeviceStatus::Maintenance => "maintenance",
            DeviceStatus::Error => "error",
        }
    }

    /// Parses the API spelling; anything else is a 400 on `field`.
    pub fn parse_field(field: &str, value: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| {
                ValidationError::new(field, "must be one of active, inactive, maintenance, error")
            })
    }
}

/// The value of an event: a JSON number, string or boolean.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EventValue {
    /// A boolean reading (`door open`).
    Flag(bool),
    /// A numeric reading.
    Number(f64),
    /// A text reading.
    Text(String),
}

/// A user's profile: `USER#{userId}` / `PROFILE`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileItem {
    /// `USER#{userId}`.
    #[serde(rename = "PK")]
    pub pk: String,
    /// `PROFILE`.
    #[serde(rename = "SK")]
    pub sk: String,
    /// Always [`EntityType::Profile`].
    pub entity_type: EntityType,
    /// The owner (JWT `sub`).
    pub user_id: UserId,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// E-mail from the identity provider's claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// First write.
    pub created_at: Timestamp,
    /// Last write.
    pub updated_at: Timestamp,
}

/// The latest reading of one event type on a device (dashboard).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// When it was taken.
    pub at: Timestamp,
    /// What it was.
    pub value: EventValue,
}

/// One of a device's most recent events, denormalized onto the device item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecentEvent {
    /// Event id.
    pub id: EventId,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// Value.
    pub value: EventValue,
    /// When it happened.
    pub at: Timestamp,
}

/// A device: `USER#{userId}` / `DEVICE#{deviceId}`, and on GSI1
/// `STATUS#{status}#{shard}` / `SEEN#{lastSeen}#{deviceId}` once it has been seen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceItem {
    /// `USER#{userId}`.
    #[serde(rename = "PK")]
    pub pk: String,
    /// `DEVICE#{deviceId}`.
    #[serde(rename = "SK")]
    pub sk: String,
    /// `STATUS#{status}#{shard}`.
    #[serde(rename = "GSI1PK")]
    pub gsi1pk: String,
    /// `SEEN#{lastSeen}#{deviceId}`; absent until the device first sends events, which keeps
    /// never-seen devices out of "seen since" queries (a sparse index).
    #[serde(rename = "GSI1SK", default, skip_serializing_if = "Option::is_none")]
    pub gsi1sk: Option<String>,
    /// Always [`EntityType::Device`].
    pub entity_type: EntityType,
    /// Owner.
    pub user_id: UserId,
    /// Device id.
    pub device_id: DeviceId,
    /// Display name.
    pub name: String,
    /// Device type (`thermostat`).
    #[serde(rename = "type")]
    pub device_type: DeviceType,
    /// Status.
    pub status: DeviceStatus,
    /// Tags, sorted.
    pub tags: Vec<Tag>,
    /// Optimistic-locking version; 1 at registration, +1 on every update.
    pub version: u64,
    /// +1 whenever name, type or tags change: the copies on tag links and the registration
    /// are brought in step under this number (see `ops::devices`).
    pub sync_version: u64,
    /// The tags that have a tag-link item right now.
    pub linked_tags: Vec<Tag>,
    /// Registration time.
    pub created_at: Timestamp,
    /// Last update by the owner.
    pub updated_at: Timestamp,
    /// Newest event time seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Timestamp>,
    /// Latest reading per event type.
    #[serde(default)]
    pub latest: BTreeMap<String, Reading>,
    /// The newest events, newest first.
    #[serde(default)]
    pub recent: Vec<RecentEvent>,
    /// Set while a deletion is in progress; such a device is gone for every reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting_at: Option<Timestamp>,
}

/// A tag link: `USER#{userId}` / `TAG#{tag}#{deviceId}`, carrying what a tag listing shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagLinkItem {
    /// `USER#{userId}`.
    #[serde(rename = "PK")]
    pub pk: String,
    /// `TAG#{tag}#{deviceId}`.
    #[serde(rename = "SK")]
    pub sk: String,
    /// Always [`EntityType::TagLink`].
    pub entity_type: EntityType,
    /// The tag.
    pub tag: Tag,
    /// The tagged device.
    pub device_id: DeviceId,
    /// Copy of the device's name.
    pub name: String,
    /// Copy of the device's type.
    #[serde(rename = "type")]
    pub device_type: DeviceType,
}

/// The table-wide registration of a device id: `DEVICE#{deviceId}` / `REGISTRATION`.
/// Its existence makes the id unique; ingestion authenticates devices against it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationItem {
    /// `DEVICE#{deviceId}`.
    #[serde(rename = "PK")]
    pub pk: String,
    /// `REGISTRATION`.
    #[serde(rename = "SK")]
    pub sk: String,
    /// Always [`EntityType::Registration`].
    pub entity_type: EntityType,
    /// Device id.
    pub device_id: DeviceId,
    /// Owner.
    pub user_id: UserId,
    /// Hex SHA-256 of the device token; the token itself is never stored.
    pub token_sha256: String,
    /// Copy of the device's name (copied onto events at ingest).
    pub device_name: String,
    /// Copy of the device's type (copied onto events at ingest).
    pub device_type: DeviceType,
    /// Registration time.
    pub created_at: Timestamp,
}

/// One device event: `USER#{userId}#DEVICE#{deviceId}` / `EVENT#{at}#{eventId}`, on GSI1 by
/// type/day/shard and on GSI2 by owner shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventItem {
    /// `USER#{userId}#DEVICE#{deviceId}`.
    #[serde(rename = "PK")]
    pub pk: String,
    /// `EVENT#{at}#{eventId}`.
    #[serde(rename = "SK")]
    pub sk: String,
    /// `TYPE#{type}#{day}#{shard}`.
    #[serde(rename = "GSI1PK")]
    pub gsi1pk: String,
    /// `{at}#{deviceId}#{eventId}`.
    #[serde(rename = "GSI1SK")]
    pub gsi1sk: String,
    /// `OWNER#{userId}#{shard}`.
    #[serde(rename = "GSI2PK")]
    pub gsi2pk: String,
    /// `{at}#{deviceId}#{eventId}`.
    #[serde(rename = "GSI2SK")]
    pub gsi2sk: String,
    /// Always [`EntityType::Event`].
    pub entity_type: EntityType,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::collections::HashMap;

    #[test]
    fn device_item_round_trips_through_dynamodb_attributes() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let item = DeviceItem {
            pk: "USER#u".into(),
            sk: "DEVICE#d".into(),
            gsi1pk: "STATUS#active#0".into(),
            gsi1sk: None,
            entity_type: EntityType::Device,
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            name: "Kitchen".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            status: DeviceStatus::Active,
            tags: vec![Tag::parse("home").unwrap()],
            version: 1,
            sync_version: 1,
            linked_tags: vec![Tag::parse("home").unwrap()],
            created_at: at,
            updated_at: at,
            last_seen: Some(at),
            latest: BTreeMap::from([(
                "temperature".to_string(),
                Reading {
                    at,
                    value: EventValue::Number(21.5),
                },
            )]),
            recent: vec![RecentEvent {
                id: EventId::parse("e").unwrap(),
                event_type: EventType::parse("door").unwrap(),
                value: EventValue::Flag(true),
                at,
            }],
            deleting_at: None,
        };
        let attrs: HashMap<String, AttributeValue> = serde_dynamo::to_item(&item).unwrap();
        assert_eq!(attrs["entityType"], AttributeValue::S("device".into()));
        assert_eq!(attrs["type"], AttributeValue::S("thermostat".into()));
        assert_eq!(attrs["version"], AttributeValue::N("1".into()));
        assert!(!attrs.contains_key("GSI1SK"), "sparse until seen");
        let back: DeviceItem = serde_dynamo::from_item(attrs).unwrap();
        assert_eq!(back, item);
    }

    #[test]
    fn event_values_keep_their_json_type() {
        for (json, expected) in [
            ("21.5", EventValue::Number(21.5)),
            ("\"open\"", EventValue::Text("open".into())),
            ("true", EventValue::Flag(true)),
        ] {
            let v: EventValue = serde_json::from_str(json).unwrap();
            assert_eq!(v, expected);
            let attr: AttributeValue = serde_dynamo::to_attribute_value(&v).unwrap();
            let back: EventValue = serde_dynamo::from_attribute_value(attr).unwrap();
            assert_eq!(back, expected);
        }
        assert!(serde_json::from_str::<EventValue>("[1]").is_err());
        assert!(serde_json::from_str::<EventValue>("null").is_err());
    }

    #[test]
    fn status_parses_only_known_values() {
        assert_eq!(
            DeviceStatus::parse_field("status", "maintenance").unwrap(),
            DeviceStatus::Maintenance
        );
        let err = DeviceStatus::parse_field("status", "broken").unwrap_err();
        assert_eq!(err.field, "status");
    }
}
