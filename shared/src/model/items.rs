//! The items stored in the table, one struct per `entityType`, (de)serialized with
//! serde_dynamo. Each is an [`Entity`]: its keys and `entityType` are derived from its fields
//! when it is stored, never carried as fields.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::model::alarm::ids::{AlarmId, AlarmSource};
use crate::model::alarm::rule::Rule;
use crate::model::alarm::severity::Severity;
use crate::model::alarm::status::{AlarmReading, AlarmState, AlarmStatuses};
use crate::model::alarm::OFFLINE;
use crate::model::entity::{Entity, EntityType};
use crate::model::expression::Attribute;
use crate::model::keys::seen_bucket;
use crate::model::offline::{due_at, OfflineDetection, Rhythm};
use crate::model::shard::ShardCounts;
use crate::model::status::DeviceStatus;

use crate::model::ids::{DeviceId, DeviceType, EventId, EventType, Tag, UserId};
use crate::model::keys::{DirectoryEntry, IndexKeys, ItemKey};
use crate::model::readings::{EventValue, LiveReadings, StoredEvent, StoredReading};
use crate::model::schema::Item;

use crate::model::timestamp::{Day, Timestamp};
use crate::model::token::token_matches;
use crate::model::twin::TwinVersions;

/// A user's profile: `USER#{userId}` / `PROFILE`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileItem {
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

/// A device: `USER#{userId}` / `DEVICE#{deviceId}`. What its owner set (name, type, status,
/// tags) and where its live state is placed; written only by its owner, so it never heats
/// the owner's partition. The readings are on its [`DeviceStateItem`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceItem {
    /// Owner (stored once, in the key; read back from there).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device id (stored once, in the key; read back from there).
    #[serde(skip_serializing)]
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
    /// +1 whenever name, type or tags change: the copies on tag links, the registration and
    /// the live state are brought in step under this number (see `ops::devices`).
    pub sync_version: u64,
    /// The tags that have a tag-link item right now.
    pub linked_tags: Vec<Tag>,
    /// The owner's live-state partition this device was placed on at registration (0: the
    /// user partition). Never changes. Stored as `shard` (its name before index shards and
    /// owner partitions were told apart).
    #[serde(default, rename = "shard")]
    pub partition: u32,
    /// Registration time.
    pub created_at: Timestamp,
    /// Last update by the owner.
    pub updated_at: Timestamp,
    /// Set while a deletion is in progress; such a device is gone for every reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting_at: Option<Timestamp>,
    /// How often the device promises to report (offline detection); `None`: learned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_every_seconds: Option<u64>,
    /// How closely its silence is watched; stored only when tight (a standard device's item
    /// is as it was).
    #[serde(default, skip_serializing_if = "OfflineDetection::is_standard")]
    pub offline_detection: OfflineDetection,
}

/// An owner's fleet: `USER#{userId}` / `FLEET`, and in the directory (GSI2). Registration
/// and deletion keep `devices`; `shards` is how many live-state partitions the owner's
/// devices are placed on, and only ever grows (see `ops::devices::register::register_device`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Live-state partitions (1, 2, 4, ...), stored as `shards`.
    #[serde(rename = "shards")]
    pub partitions: u32,
    /// Registered devices.
    pub devices: u64,
}

/// A device's live state: `{state partition}` / `DEVICE#{deviceId}#STATE`, kept by ingestion.
/// It sits in the owner's partition placed at registration ([`crate::model::keys::state_pk`]): an
/// ordinary owner's states share the user partition (the dashboard stays one Query), a large
/// owner's spread over `USER#{userId}#SHARD#{k}`. On GSI1 as the status index (AP-13), with the
/// copies that index returns. Bounded: see `ops::ingest` for the caps and the largest size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStateItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// The owner's partition it is placed on (read back from the key, as `shard`).
    #[serde(skip_serializing, default, rename = "shard")]
    pub partition: u32,
    /// Copy of the device's status (its GSI1 partition).
    pub status: DeviceStatus,
    /// Copy of the device's name (AP-13 returns it).
    pub name: String,
    /// Copy of the device's type (AP-13 returns it).
    #[serde(rename = "type")]
    pub device_type: DeviceType,
    /// Newest event time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Timestamp>,
    /// Latest reading per event type. Stored with `recent` in the compact `readings`
    /// attribute ([`crate::model::readings`]); read from a list form too (states written before it).
    #[serde(default, skip_serializing)]
    pub latest: BTreeMap<String, StoredReading>,
    /// The newest events, newest first (stored in `readings`, like `latest`).
    #[serde(default, skip_serializing)]
    pub recent: Vec<StoredEvent>,
    /// Optimistic-concurrency counter of ingestion's updates (0: never updated).
    #[serde(default)]
    pub ingest_seq: u64,
    /// The device `version` whose status and name were last copied here (an older PATCH's
    /// copy landing late is refused).
    #[serde(default)]
    pub device_version: u64,
    /// The twin's versions (desired, reported, commands): ingestion's own update returns them,
    /// so it knows whether anything is pending without a read ([`crate::model::twin`]).
    #[serde(flatten)]
    pub twin: TwinVersions,
    /// Copy of the device's tags (alarm rules scoped by tag), with its status and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag>,
    /// The device's alarm statuses by source: open alarms and conditions pending their
    /// duration ([`crate::model::alarm::evaluation::evaluate`]); empty for a device with nothing open.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub alarms: AlarmStatuses,
    /// Copy of the device's declared reporting interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_every_seconds: Option<u64>,
    /// Copy of the device's offline detection (stored only when tight, like the device's).
    #[serde(default, skip_serializing_if = "OfflineDetection::is_standard")]
    pub offline_detection: OfflineDetection,
    /// The learned mean gap between reports, changed at most once per `SEEN#` bucket
    /// ([`crate::model::offline`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_every_seconds: Option<u64>,
    /// The learned mean deviation of the gaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_jitter_seconds: Option<u64>,
    /// Where the due index holds the device now (read back from its GSI3 sort key, never
    /// stored as an attribute of its own): what an update compares [`DeviceStateItem::due_at`]
    /// with to decide whether the entry moves.
    #[serde(skip)]
    pub indexed_due: Option<Timestamp>,
}

/// A tag link: `USER#{userId}` / `TAG#{tag}#{deviceId}`, carrying what a tag listing shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagLinkItem {
    /// Owner of the device. Not stored: the link's partition key already names the owner,
    /// and [`TagLinkItem::from_item`] reads it back from there.
    #[serde(skip_serializing)]
    pub user_id: UserId,
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
    /// Device id.
    pub device_id: DeviceId,
    /// Owner.
    pub user_id: UserId,
    /// Hex SHA-256 of the device token; the token itself is never stored.
    pub token_sha256: String,
    /// The digest a rotation replaced, accepted until `previous_token_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_token_sha256: Option<String>,
    /// End of the replaced token's overlap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_token_until: Option<Timestamp>,
    /// Set when the owner revoked the device's tokens: none is accepted until a rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// Copy of the device's name (copied onto events at ingest).
    pub device_name: String,
    /// Copy of the device's type (copied onto events at ingest).
    pub device_type: DeviceType,
    /// The owner's live-state partition the device is placed on (ingestion reads it here),
    /// stored as `shard`.
    #[serde(default, rename = "shard")]
    pub partition: u32,
    /// Registration time.
    pub created_at: Timestamp,
}

/// A deleted device's registration: `DEVICE#{deviceId}` / `REGISTRATION`, the id free to
/// register again. It fences off requests that are older than the deletion: a registration
/// attempt delayed in the network past its client's retries (whose request was answered
/// meanwhile) must not land after the device was deleted and bring it back. Registration
/// replaces it only when the request began after `releasedAt`; TTL removes it a day later.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasedRegistrationItem {
    /// The device id (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// When the device was deleted.
    pub released_at: Timestamp,
    /// Expiry, epoch seconds (`released_at` + [`ReleasedRegistrationItem::KEPT_SECONDS`]).
    pub ttl: i64,
}

impl ReleasedRegistrationItem {
    /// How long the fence is kept: far longer than any request can be delayed (DynamoDB
    /// refuses requests signed more than 15 minutes ago).
    pub const KEPT_SECONDS: i64 = 86_400;

    /// The fence left by deleting `device` at `now`.
    pub fn new(device: DeviceId, now: Timestamp) -> Self {
        Self {
            device_id: device,
            released_at: now,
            ttl: now.epoch_seconds() + Self::KEPT_SECONDS,
        }
    }
}

impl Entity for ReleasedRegistrationItem {
    const ENTITY_TYPE: EntityType = EntityType::ReleasedRegistration;
    fn item_key(&self) -> ItemKey {
        ItemKey::Registration {
            device: self.device_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

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
}

/// That a device sent events of a searchable type during a window of
/// [`crate::model::keys::TYPE_WINDOW_SECONDS`]: `USER#{userId}#DEVICE#{deviceId}` /
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

/// A deleted device whose events the daily run still has to purge: `PURGE#{userId}#{deviceId}`
/// / `PURGE`, and in the directory (GSI2), which the daily run scans. Written by the deletion's
/// transaction; removed by the run once the device's events from before `deletedAt` are gone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PurgeMarkerItem {
    /// Owner of the deleted device (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// The deleted device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// When it was deleted: its events up to then are purged.
    pub deleted_at: Timestamp,
}

/// A daily report: `REPORT#{day}` / `REPORT`, written by the daily run, read by AP-15.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportItem {
    /// The report's day.
    pub day: Day,
    /// The report as the API returns it, as JSON text: opaque to DynamoDB, and read back
    /// exactly as written (a DynamoDB number would turn `7.0` into `7`).
    pub report_json: String,
}

impl Entity for ReportItem {
    const ENTITY_TYPE: EntityType = EntityType::Report;
    fn item_key(&self) -> ItemKey {
        ItemKey::Report { day: self.day }
    }
}

/// Declares an entity's stored attribute names as associated constants (the one spelling of
/// each, used by every expression), and `ATTRIBUTES`, which a test checks against the names
/// serde stores, so a renamed field cannot leave an expression behind.
macro_rules! attributes {
    ($entity:ty { $($(#[$doc:meta])* $name:ident = $stored:literal),* $(,)? }) => {
        impl $entity {
            $($(#[$doc])* pub const $name: Attribute = Attribute::named($stored);)*
            /// Every attribute named above (what a stored item of this type may carry).
            pub const ATTRIBUTES: &'static [Attribute] = &[$(Self::$name),*];
        }
    };
}

attributes!(ProfileItem {
    /// `userId`.
    USER_ID = "userId",
    /// `name`.
    NAME = "name",
    /// `email`.
    EMAIL = "email",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `updatedAt`.
    UPDATED_AT = "updatedAt",
});

attributes!(DeviceItem {
    /// `name`.
    NAME = "name",
    /// `type`.
    DEVICE_TYPE = "type",
    /// `status`.
    STATUS = "status",
    /// `tags`.
    TAGS = "tags",
    /// `version`.
    VERSION = "version",
    /// `syncVersion`.
    SYNC_VERSION = "syncVersion",
    /// `linkedTags`.
    LINKED_TAGS = "linkedTags",
    /// `shard`: the owner's live-state partition.
    PARTITION = "shard",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `updatedAt`.
    UPDATED_AT = "updatedAt",
    /// `deletingAt`: set while a deletion is in progress (readers treat the device as gone).
    DELETING_AT = "deletingAt",
    /// `reportEverySeconds`: the declared reporting interval.
    REPORT_EVERY_SECONDS = "reportEverySeconds",
    /// `offlineDetection`: `tight` when the owner asked for it (absent: standard).
    OFFLINE_DETECTION = "offlineDetection",
});

attributes!(FleetItem {
    /// `shards`: the owner's live-state partitions.
    PARTITIONS = "shards",
    /// `devices`.
    DEVICES = "devices",
});

attributes!(DeviceStateItem {
    /// `status`.
    STATUS = "status",
    /// `name`.
    NAME = "name",
    /// `type`.
    DEVICE_TYPE = "type",
    /// `lastSeen`.
    LAST_SEEN = "lastSeen",
    /// `ingestSeq`.
    INGEST_SEQ = "ingestSeq",
    /// `deviceVersion`.
    DEVICE_VERSION = "deviceVersion",
    /// `readings`: `latest` and `recent` in their compact form.
    READINGS = "readings",
    /// `desiredVersion` ([`TwinVersions`]).
    DESIRED_VERSION = "desiredVersion",
    /// `reportedVersion` ([`TwinVersions`]).
    REPORTED_VERSION = "reportedVersion",
    /// `commandSeq` ([`TwinVersions`]).
    COMMAND_SEQ = "commandSeq",
    /// `commandsDone` ([`TwinVersions`]).
    COMMANDS_DONE = "commandsDone",
    /// `tags`: copy of the device's tags.
    TAGS = "tags",
    /// `alarms`: alarm statuses by source.
    ALARMS = "alarms",
    /// `reportEverySeconds`: copy of the declared reporting interval.
    REPORT_EVERY_SECONDS = "reportEverySeconds",
    /// `offlineDetection`: copy of the device's offline detection (absent: standard).
    OFFLINE_DETECTION = "offlineDetection",
    /// `learnedEverySeconds`: the learned reporting interval.
    LEARNED_EVERY_SECONDS = "learnedEverySeconds",
    /// `learnedJitterSeconds`: the learned jitter of the interval.
    LEARNED_JITTER_SECONDS = "learnedJitterSeconds",
});

impl DeviceStateItem {
    /// `latest` of a state written before the compact form (read, removed by the next write).
    pub const LEGACY_LATEST: Attribute = Attribute::named("latest");
    /// `recent` of a state written before the compact form (read, removed by the next write).
    pub const LEGACY_RECENT: Attribute = Attribute::named("recent");
}

attributes!(TagLinkItem {
    /// `tag`.
    TAG = "tag",
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `name`.
    NAME = "name",
    /// `type`.
    DEVICE_TYPE = "type",
});

attributes!(RegistrationItem {
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `userId`.
    USER_ID = "userId",
    /// `tokenSha256`.
    TOKEN_SHA256 = "tokenSha256",
    /// `previousTokenSha256`.
    PREVIOUS_TOKEN_SHA256 = "previousTokenSha256",
    /// `previousTokenUntil`.
    PREVIOUS_TOKEN_UNTIL = "previousTokenUntil",
    /// `revokedAt`.
    REVOKED_AT = "revokedAt",
    /// `deviceName`.
    DEVICE_NAME = "deviceName",
    /// `deviceType`.
    DEVICE_TYPE = "deviceType",
    /// `shard`: the owner's live-state partition.
    PARTITION = "shard",
    /// `createdAt`.
    CREATED_AT = "createdAt",
});

attributes!(ReleasedRegistrationItem {
    /// `releasedAt`.
    RELEASED_AT = "releasedAt",
    /// `ttl`.
    TTL = "ttl",
});

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
});

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

attributes!(PurgeMarkerItem {
    /// `deletedAt`.
    DELETED_AT = "deletedAt",
});

impl Entity for PurgeMarkerItem {
    const ENTITY_TYPE: EntityType = EntityType::PurgeMarker;
    fn item_key(&self) -> ItemKey {
        ItemKey::PurgeMarker {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        IndexKeys::directory_entry(
            &self.user_id,
            DirectoryEntry::Purge,
            Some(self.device_id.as_str()),
        )
    }
    const FIELDS_IN_KEY: bool = true;
}

impl Entity for ProfileItem {
    const ENTITY_TYPE: EntityType = EntityType::Profile;
    fn item_key(&self) -> ItemKey {
        ItemKey::Profile {
            user: self.user_id.clone(),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        IndexKeys::directory(&self.user_id, DirectoryEntry::Profile)
    }
}

impl Entity for DeviceItem {
    const ENTITY_TYPE: EntityType = EntityType::Device;
    fn item_key(&self) -> ItemKey {
        ItemKey::Device {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
        }
    }
    /// Owner and device come from the key (every dashboard reads device items: 66 bytes
    /// fewer each); items written with them as attributes read the same.
    const FIELDS_IN_KEY: bool = true;
}

impl Entity for FleetItem {
    const ENTITY_TYPE: EntityType = EntityType::Fleet;
    fn item_key(&self) -> ItemKey {
        ItemKey::Fleet {
            user: self.user_id.clone(),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        IndexKeys::directory(&self.user_id, DirectoryEntry::Fleet)
    }
    const FIELDS_IN_KEY: bool = true;
}

impl Entity for DeviceStateItem {
    const ENTITY_TYPE: EntityType = EntityType::DeviceState;
    fn item_key(&self) -> ItemKey {
        ItemKey::DeviceState {
            user: self.user_id.clone(),
            partition: self.partition,
            device: self.device_id.clone(),
        }
    }
    /// On GSI1 by status shard; sparse in the `SEEN#` sort key until the device first sends
    /// events, which keeps never-seen devices out of "seen since" queries.
    /// On GSI3 by its offline-check due time while it is watched ([`DeviceStateItem::due_at`]).
    fn index_keys(&self, shards: &ShardCounts) -> IndexKeys {
        let due = IndexKeys::due(&self.device_id, self.due_at().as_ref());
        IndexKeys {
            gsi3pk: due.gsi3pk,
            gsi3sk: due.gsi3sk,
            ..IndexKeys::device_state(
                self.status,
                &self.device_id,
                self.last_seen.as_ref(),
                shards,
            )
        }
    }
    /// The readings go into one compact attribute ([`crate::model::readings`]).
    fn to_item(&self, shards: &ShardCounts) -> Result<Item, crate::model::error::FleetError> {
        let mut item = crate::model::entity::entity_item(self, shards)?;
        item.insert(
            DeviceStateItem::READINGS.name().into(),
            self.readings_attribute(),
        );
        Ok(item)
    }
    /// Owner, device and shard come from the key (GSI1 projects the table's key as well).
    const FIELDS_IN_KEY: bool = true;
    /// The readings come from their compact attribute, or from the lists of an older state.
    fn from_item(mut item: Item) -> Result<Self, crate::model::error::FleetError> {
        let readings = match item.remove(DeviceStateItem::READINGS.name()) {
            Some(AttributeValue::B(bytes)) => Some(LiveReadings::decode(bytes.as_ref())?),
            Some(_) => {
                return Err(crate::model::error::FleetError::internal(
                    "live state readings are not binary",
                ))
            }
            None => None,
        };
        let indexed_due = item
            .get(crate::model::schema::GSI3SK.name())
            .and_then(|v| v.as_s().ok())
            .and_then(|sk| crate::model::keys::parse_due_gsi3sk(sk).ok())
            .map(|(at, _)| at);
        let mut state: Self = crate::model::entity::checked_item(item)?;
        state.indexed_due = indexed_due;
        if let Some(readings) = readings {
            state.latest = readings.latest;
            state.recent = readings.recent;
        }
        Ok(state)
    }
}

impl DeviceStateItem {
    /// Its reporting rhythm: the declared interval and the learned one.
    pub fn rhythm(&self) -> Rhythm {
        Rhythm {
            declared: self.report_every_seconds,
            learned: self.learned_every_seconds,
            jitter: self.learned_jitter_seconds,
            detection: self.offline_detection,
        }
    }

    /// When the device is offline unless it reports first ([`crate::model::offline`]), while it
    /// is watched: active, seen, with an interval known, and not offline already.
    pub fn due_at(&self) -> Option<Timestamp> {
        if self.status != DeviceStatus::Active || self.alarms.contains_key(OFFLINE) {
            return None;
        }
        due_at(self.last_seen.as_ref()?, &self.device_id, &self.rhythm())
    }

    /// This state with what others write on the item taken from `written` (the item as an
    /// update returned it): the owner's copies (status, name, tags, interval, offline
    /// detection, their version) and where the due index holds the device. A PATCH does not
    /// move `ingestSeq`, so a warm ingestion container's cached state would keep the old
    /// copies (and place the due entry by them) until its cache missed; refreshed from every
    /// update's answer, its next batch works from the owner's current settings.
    pub fn with_copies_of(self, written: &DeviceStateItem) -> Self {
        Self {
            status: written.status,
            name: written.name.clone(),
            tags: written.tags.clone(),
            device_version: written.device_version,
            report_every_seconds: written.report_every_seconds,
            offline_detection: written.offline_detection,
            indexed_due: written.indexed_due,
            ..self
        }
    }

    /// Learns from the gap between `before`'s report and this state's, once per `SEEN#`
    /// bucket (when the bucket changes): the learned interval, like the due entry, changes
    /// only when the `SEEN#` entry moves.
    pub fn learn_rhythm(&mut self, before: &DeviceStateItem) {
        let (Some(then), Some(now)) = (before.last_seen, self.last_seen) else {
            return;
        };
        if seen_bucket(&then, &self.device_id) == seen_bucket(&now, &self.device_id) {
            return;
        }
        let gap = now.epoch_seconds() - then.epoch_seconds();
        let learned = before
            .rhythm()
            .learned_after(gap, before.alarms.contains_key(OFFLINE));
        self.learned_every_seconds = learned.learned;
        self.learned_jitter_seconds = learned.jitter;
    }

    /// `latest` and `recent` as the state item stores them (attribute [`DeviceStateItem::READINGS`]).
    pub fn readings_attribute(&self) -> AttributeValue {
        AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
            crate::model::readings::encode(&self.latest, &self.recent),
        ))
    }
}

impl Entity for TagLinkItem {
    const ENTITY_TYPE: EntityType = EntityType::TagLink;
    fn item_key(&self) -> ItemKey {
        ItemKey::TagLink {
            user: self.user_id.clone(),
            tag: self.tag.clone(),
            device: self.device_id.clone(),
        }
    }
    /// The owner comes from the link's key (it is not stored as an attribute of its own).
    const FIELDS_IN_KEY: bool = true;
}

impl RegistrationItem {
    /// Whether `token` authenticates the device at `now`: its current token, or the one a
    /// rotation replaced while its overlap lasts; never after a revocation. Both digests are
    /// always compared, in constant time, so timing tells nothing about which matched.
    pub fn accepts(&self, token: &str, now: Timestamp) -> bool {
        let current = token_matches(token, &self.token_sha256);
        let previous = match (&self.previous_token_sha256, self.previous_token_until) {
            (Some(digest), Some(until)) => token_matches(token, digest) & (now < until),
            _ => false,
        };
        (current | previous) & self.revoked_at.is_none()
    }
}

impl Entity for RegistrationItem {
    const ENTITY_TYPE: EntityType = EntityType::Registration;
    fn item_key(&self) -> ItemKey {
        ItemKey::Registration {
            device: self.device_id.clone(),
        }
    }
}

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

/// An owner's alarm rules: `USER#{userId}` / `RULES`, all in one item (at most
/// [`crate::model::alarm::MAX_RULES_PER_OWNER`], a few KB), so ingestion reads them together
/// with a device's live state in one BatchGetItem, and every change is one conditional write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSetItem {
    /// The owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// The rules by id.
    #[serde(default)]
    pub rules: BTreeMap<String, Rule>,
    /// Every change adds one (the condition of the next change).
    #[serde(default)]
    pub version: u64,
}

attributes!(RuleSetItem {
    /// `rules`: the rules by id.
    RULES = "rules",
    /// `version`.
    VERSION = "version",
});

impl Entity for RuleSetItem {
    const ENTITY_TYPE: EntityType = EntityType::RuleSet;
    fn item_key(&self) -> ItemKey {
        ItemKey::RuleSet {
            user: self.user_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

impl RuleSetItem {
    /// The rules in id order.
    pub fn rule_list(&self) -> Vec<Rule> {
        self.rules.values().cloned().collect()
    }
}

/// One alarm of one device: `ALARM#{userId}#{deviceId}` / `{raisedAt}#{source}` (the device's
/// history, newest last), on GSI3 in its owner's list (open first), and on GSI1 while a
/// reminder is due. Written only on a transition, expired by TTL like events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmItem {
    /// The owner.
    pub user_id: UserId,
    /// The device.
    pub device_id: DeviceId,
    /// The owner's live-state partition the device is placed on (its owner-list key; not on
    /// GSI3, whose readers do not need it).
    #[serde(rename = "shard", default)]
    pub partition: u32,
    /// The device's name when it was raised.
    pub device_name: String,
    /// The rule's id, or `offline`.
    pub source: String,
    /// The rule's name when it was raised (none for offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// How urgent.
    pub severity: Severity,
    /// Where it is in its life.
    pub state: AlarmState,
    /// When it was raised.
    pub raised_at: Timestamp,
    /// When it cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared_at: Option<Timestamp>,
    /// When it was acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<Timestamp>,
    /// The reading that raised it (none for offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<AlarmReading>,
    /// The reading that cleared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear_reading: Option<AlarmReading>,
    /// The device's last report when an offline alarm was raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Timestamp>,
    /// The rule's reminder interval when it was raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_every_seconds: Option<u64>,
    /// When the next reminder is due (while active and unacknowledged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_at: Option<Timestamp>,
    /// Reminders sent so far.
    #[serde(default)]
    pub reminders: u32,
    /// Expiry, epoch seconds: set when it clears (its time + the events' retention); an open
    /// alarm never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
}

attributes!(AlarmItem {
    /// `userId`.
    USER_ID = "userId",
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `shard`.
    PARTITION = "shard",
    /// `deviceName`.
    DEVICE_NAME = "deviceName",
    /// `source`.
    SOURCE = "source",
    /// `ruleName`.
    RULE_NAME = "ruleName",
    /// `severity`.
    SEVERITY = "severity",
    /// `state`.
    STATE = "state",
    /// `raisedAt`.
    RAISED_AT = "raisedAt",
    /// `clearedAt`.
    CLEARED_AT = "clearedAt",
    /// `acknowledgedAt`.
    ACKNOWLEDGED_AT = "acknowledgedAt",
    /// `reading`.
    READING = "reading",
    /// `clearReading`.
    CLEAR_READING = "clearReading",
    /// `lastSeen`.
    LAST_SEEN = "lastSeen",
    /// `remindEverySeconds`.
    REMIND_EVERY_SECONDS = "remindEverySeconds",
    /// `remindAt`.
    REMIND_AT = "remindAt",
    /// `reminders`.
    REMINDERS = "reminders",
    /// `ttl`.
    TTL = "ttl",
});

impl AlarmItem {
    /// Where it came from.
    pub fn alarm_source(&self) -> Result<AlarmSource, crate::model::error::ValidationError> {
        AlarmSource::parse(&self.source)
    }

    /// Its id as the API shows it.
    pub fn alarm_id(&self) -> Result<AlarmId, crate::model::error::ValidationError> {
        Ok(AlarmId {
            device: self.device_id.clone(),
            source: self.alarm_source()?,
            raised_at: self.raised_at,
        })
    }
}

impl Entity for AlarmItem {
    const ENTITY_TYPE: EntityType = EntityType::Alarm;
    fn item_key(&self) -> ItemKey {
        ItemKey::Alarm {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            raised_at: self.raised_at,
            source: AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        let source = AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline);
        let reminder = self
            .remind_at
            .as_ref()
            .filter(|_| self.state == AlarmState::Active);
        IndexKeys::alarm(
            &self.user_id,
            &self.device_id,
            self.partition,
            &source,
            &self.raised_at,
            self.state != AlarmState::Cleared,
            reminder,
        )
    }
}

/// The open alarm of a device and source, while it is open: `ALARM#{userId}#{deviceId}` /
/// `OPEN#{source}` (so a second one cannot be raised), on GSI3 under
/// `OPEN#{severity}#{shard}` for operators. Deleted when the alarm clears.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAlarmItem {
    /// The owner.
    pub user_id: UserId,
    /// The device.
    pub device_id: DeviceId,
    /// The device's name.
    pub device_name: String,
    /// The rule's id, or `offline`.
    pub source: String,
    /// The rule's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// How urgent.
    pub severity: Severity,
    /// Active or acknowledged.
    pub state: AlarmState,
    /// When it was raised.
    pub raised_at: Timestamp,
    /// When it was acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<Timestamp>,
    /// The reading that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<AlarmReading>,
}

attributes!(OpenAlarmItem {
    /// `userId`.
    USER_ID = "userId",
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `deviceName`.
    DEVICE_NAME = "deviceName",
    /// `source`.
    SOURCE = "source",
    /// `ruleName`.
    RULE_NAME = "ruleName",
    /// `severity`.
    SEVERITY = "severity",
    /// `state`.
    STATE = "state",
    /// `raisedAt`.
    RAISED_AT = "raisedAt",
    /// `acknowledgedAt`.
    ACKNOWLEDGED_AT = "acknowledgedAt",
    /// `reading`.
    READING = "reading",
});

impl OpenAlarmItem {
    /// The pointer of an open alarm.
    pub fn of(alarm: &AlarmItem) -> Self {
        Self {
            user_id: alarm.user_id.clone(),
            device_id: alarm.device_id.clone(),
            device_name: alarm.device_name.clone(),
            source: alarm.source.clone(),
            rule_name: alarm.rule_name.clone(),
            severity: alarm.severity,
            state: alarm.state,
            raised_at: alarm.raised_at,
            acknowledged_at: alarm.acknowledged_at,
            reading: alarm.reading.clone(),
        }
    }
}

impl Entity for OpenAlarmItem {
    const ENTITY_TYPE: EntityType = EntityType::OpenAlarm;
    fn item_key(&self) -> ItemKey {
        ItemKey::OpenAlarm {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            source: AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        let source = AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline);
        IndexKeys::open_alarm(
            &self.user_id,
            &self.device_id,
            &source,
            self.severity,
            &self.raised_at,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::schema::ENTITY_TYPE;
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::collections::BTreeSet;

    /// Every attribute an entity declares is one serde stores, and every one serde stores
    /// (beside the keys and `entityType`) is declared: expressions name only real attributes.
    #[test]
    fn declared_attributes_are_exactly_the_stored_ones() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let user = UserId::parse("u").unwrap();
        let device = DeviceId::parse("d").unwrap();
        let kind = DeviceType::parse("thermostat").unwrap();
        let tag = Tag::parse("home").unwrap();
        let shards = ShardCounts::default();
        let stored = |item: Item| -> BTreeSet<String> {
            let keys = crate::model::schema::KEY_ATTRIBUTES.map(|a| a.name());
            item.into_keys()
                .filter(|n| !keys.contains(&n.as_str()) && n != ENTITY_TYPE.name())
                .collect()
        };
        let declared = |names: &[Attribute]| {
            names
                .iter()
                .map(|a| a.name().to_string())
                .collect::<BTreeSet<_>>()
        };
        let reading = AlarmReading {
            id: EventId::parse("e").unwrap(),
            event_type: EventType::parse("temperature").unwrap(),
            value: EventValue::Number(90.0),
            at,
        };
        let alarm = AlarmItem {
            user_id: user.clone(),
            device_id: device.clone(),
            partition: 0,
            device_name: "K".into(),
            source: "r00000000000000ff".into(),
            rule_name: Some("hot".into()),
            severity: Severity::Major,
            state: AlarmState::Acknowledged,
            raised_at: at,
            cleared_at: Some(at),
            acknowledged_at: Some(at),
            reading: Some(reading.clone()),
            clear_reading: Some(reading),
            last_seen: Some(at),
            remind_every_seconds: Some(600),
            remind_at: Some(at),
            reminders: 1,
            ttl: Some(1),
        };
        let cases: Vec<(&str, Item, &[Attribute])> = vec![
            (
                "profile",
                ProfileItem {
                    user_id: user.clone(),
                    name: Some("A".into()),
                    email: Some("a@example.com".into()),
                    created_at: at,
                    updated_at: at,
                }
                .to_item(&shards)
                .unwrap(),
                ProfileItem::ATTRIBUTES,
            ),
            (
                "device",
                DeviceItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    name: "K".into(),
                    device_type: kind.clone(),
                    status: DeviceStatus::Active,
                    tags: vec![tag.clone()],
                    version: 1,
                    sync_version: 1,
                    linked_tags: vec![tag.clone()],
                    partition: 0,
                    created_at: at,
                    updated_at: at,
                    deleting_at: Some(at),
                    report_every_seconds: Some(60),
                    offline_detection: crate::model::offline::OfflineDetection::Tight,
                }
                .to_item(&shards)
                .unwrap(),
                DeviceItem::ATTRIBUTES,
            ),
            (
                "fleet",
                FleetItem {
                    user_id: user.clone(),
                    partitions: 1,
                    devices: 1,
                }
                .to_item(&shards)
                .unwrap(),
                FleetItem::ATTRIBUTES,
            ),
            (
                "state",
                DeviceStateItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    partition: 0,
                    status: DeviceStatus::Active,
                    name: "K".into(),
                    device_type: kind.clone(),
                    last_seen: Some(at),
                    latest: BTreeMap::new(),
                    recent: Vec::new(),
                    ingest_seq: 1,
                    device_version: 1,
                    twin: TwinVersions {
                        desired_version: 2,
                        reported_version: 1,
                        command_seq: 3,
                        commands_done: 2,
                    },
                    tags: vec![Tag::parse("home").unwrap()],
                    alarms: BTreeMap::from([(
                        "offline".to_string(),
                        crate::model::alarm::status::AlarmStatus::default(),
                    )]),
                    report_every_seconds: Some(60),
                    offline_detection: crate::model::offline::OfflineDetection::Tight,
                    learned_every_seconds: Some(61),
                    learned_jitter_seconds: Some(2),
                    indexed_due: None,
                }
                .to_item(&shards)
                .unwrap(),
                DeviceStateItem::ATTRIBUTES,
            ),
            (
                "tag link",
                TagLinkItem {
                    user_id: user.clone(),
                    tag: tag.clone(),
                    device_id: device.clone(),
                    name: "K".into(),
                    device_type: kind.clone(),
                }
                .to_item(&shards)
                .unwrap(),
                TagLinkItem::ATTRIBUTES,
            ),
            (
                "registration",
                RegistrationItem {
                    device_id: device.clone(),
                    user_id: user.clone(),
                    token_sha256: "x".into(),
                    previous_token_sha256: Some("y".into()),
                    previous_token_until: Some(at),
                    revoked_at: Some(at),
                    device_name: "K".into(),
                    device_type: kind.clone(),
                    partition: 0,
                    created_at: at,
                }
                .to_item(&shards)
                .unwrap(),
                RegistrationItem::ATTRIBUTES,
            ),
            (
                "released registration",
                ReleasedRegistrationItem::new(device.clone(), at)
                    .to_item(&shards)
                    .unwrap(),
                ReleasedRegistrationItem::ATTRIBUTES,
            ),
            (
                "event",
                EventItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    id: EventId::parse("e").unwrap(),
                    event_type: EventType::parse("alarm").unwrap(),
                    value: EventValue::Number(1.0),
                    at,
                    device_name: "K".into(),
                    device_type: kind.clone(),
                    ttl: 1,
                }
                .to_item(&shards)
                .unwrap(),
                EventItem::ATTRIBUTES,
            ),
            (
                "type mark",
                TypeMarkItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    event_type: EventType::parse("alarm").unwrap(),
                    window: at,
                    device_name: "K".into(),
                    ttl: 1,
                }
                .to_item(&shards)
                .unwrap(),
                TypeMarkItem::ATTRIBUTES,
            ),
            (
                "purge marker",
                PurgeMarkerItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    deleted_at: at,
                }
                .to_item(&shards)
                .unwrap(),
                PurgeMarkerItem::ATTRIBUTES,
            ),
            (
                "rule set",
                RuleSetItem {
                    user_id: user.clone(),
                    rules: BTreeMap::new(),
                    version: 1,
                }
                .to_item(&shards)
                .unwrap(),
                RuleSetItem::ATTRIBUTES,
            ),
            (
                "alarm",
                alarm.to_item(&shards).unwrap(),
                AlarmItem::ATTRIBUTES,
            ),
            (
                "open alarm",
                OpenAlarmItem::of(&alarm).to_item(&shards).unwrap(),
                OpenAlarmItem::ATTRIBUTES,
            ),
        ];
        let mut all_declared = BTreeSet::new();
        for (entity, item, names) in cases {
            assert_eq!(stored(item), declared(names), "{entity}");
            all_declared.extend(declared(names));
        }
        // What the indexes project is what some entity stores.
        for index in crate::model::schema::INDEXES {
            for projected in index.projected {
                assert!(
                    *projected == ENTITY_TYPE || all_declared.contains(projected.name()),
                    "{} projects {projected}, which no entity declares",
                    index.name
                );
            }
        }
    }

    #[test]
    fn device_item_round_trips_through_dynamodb_attributes() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let item = DeviceItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            name: "Kitchen".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            status: DeviceStatus::Active,
            tags: vec![Tag::parse("home").unwrap()],
            version: 1,
            sync_version: 1,
            linked_tags: vec![Tag::parse("home").unwrap()],
            partition: 3,
            created_at: at,
            updated_at: at,
            deleting_at: None,
            report_every_seconds: None,
            offline_detection: Default::default(),
        };
        let shards = ShardCounts::default();
        let attrs = item.to_item(&shards).unwrap();
        assert_eq!(attrs["entityType"], AttributeValue::S("device".into()));
        assert_eq!(attrs["type"], AttributeValue::S("thermostat".into()));
        assert_eq!(attrs["version"], AttributeValue::N("1".into()));
        assert!(
            !attrs.contains_key("GSI1PK"),
            "the status index is on the live state"
        );
        let key = ItemKey::of(&attrs).unwrap();
        assert_eq!(key, item.item_key(), "the stored key is the derived one");
        let back = DeviceItem::from_item(attrs.clone()).unwrap();
        assert_eq!(back, item);
        // Another type's item is refused, not misread.
        assert!(ProfileItem::from_item(attrs).is_err());
    }

    #[test]
    fn device_state_reads_its_owner_device_and_shard_back_from_its_key() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let state = DeviceStateItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            partition: 5,
            status: DeviceStatus::Active,
            name: "Kitchen".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            last_seen: Some(at),
            latest: BTreeMap::from([(
                "temperature".to_string(),
                StoredReading(at.epoch_millis(), EventValue::Number(21.5)),
            )]),
            recent: vec![StoredEvent(
                at.epoch_millis(),
                EventId::parse("e").unwrap(),
                EventType::parse("door").unwrap(),
                EventValue::Flag(true),
            )],
            ingest_seq: 4,
            device_version: 2,
            twin: TwinVersions::default(),
            tags: Vec::new(),
            alarms: BTreeMap::new(),
            report_every_seconds: None,
            offline_detection: Default::default(),
            learned_every_seconds: None,
            learned_jitter_seconds: None,
            indexed_due: None,
        };
        let shards = ShardCounts::default();
        let attrs = state.to_item(&shards).unwrap();
        for stored_once in ["userId", "deviceId", "shard"] {
            assert!(
                !attrs.contains_key(stored_once),
                "{stored_once} is in the key"
            );
        }
        assert_eq!(attrs["PK"], AttributeValue::S("USER#u#SHARD#5".into()));
        let index = state.index_keys(&shards);
        assert_eq!(
            attrs["GSI1PK"].as_s().unwrap(),
            index.gsi1pk.as_deref().unwrap()
        );
        assert_eq!(
            attrs["GSI1SK"].as_s().unwrap(),
            index.gsi1sk.as_deref().unwrap()
        );
        assert_eq!(DeviceStateItem::from_item(attrs).unwrap(), state);
        assert_eq!(state.recent[0].recent_event().at, at);
        assert_eq!(state.latest["temperature"].reading().at, at);
        let never_seen = DeviceStateItem {
            last_seen: None,
            ..state
        }
        .to_item(&shards)
        .unwrap();
        assert!(never_seen.contains_key("GSI1PK"));
        assert!(!never_seen.contains_key("GSI1SK"), "sparse until seen");
    }

    #[test]
    fn a_tag_link_reads_its_owner_back_from_its_key() {
        let link = TagLinkItem {
            user_id: UserId::parse("u").unwrap(),
            tag: Tag::parse("home").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            name: "Kitchen".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
        };
        let attrs = link.to_item(&ShardCounts::default()).unwrap();
        assert!(
            !attrs.contains_key("userId"),
            "the owner is stored once, in PK"
        );
        assert_eq!(ItemKey::of(&attrs).unwrap(), link.item_key());
        assert_eq!(TagLinkItem::from_item(attrs).unwrap(), link);
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
