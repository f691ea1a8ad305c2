//! The table's keys (docs/design.md, "Key schema"): [`PrimaryKey`], the [`ItemKey`] parser of
//! stored keys, the index key attributes ([`IndexKeys`]) and the partitions several entities
//! share (the user partition, a device's event partition, the directory). Each entity's own
//! key spelling, builders, parser and template live in its file under
//! [`crate::model::entities`]; the table of every key is in docs/access-patterns.md and
//! docs/model.json, generated from the entities' [`KeyTemplate`]s.
//!
//! Every part is a validated type that cannot contain `#`, so parsing is unambiguous.

use std::any::Any;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::model::alarm::AlarmSource;
use crate::model::error::ValidationError;
use crate::model::expression::Attribute;
use crate::model::ids::{DeviceId, EventId, EventType, RolloutId, Tag, UserId};
use crate::model::schema::{Item, GSI1PK, GSI1SK, GSI2PK, GSI2SK, GSI3PK, GSI3SK, PK, SK};
use crate::model::shard::shard_of;
use crate::model::timestamp::{Day, Timestamp};

/// Shards of the directory index (GSI2): profiles and fleet items, which the daily run scans.
pub const DIRECTORY_SHARDS: u16 = 16;

/// A primary key (PK, SK).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PrimaryKey {
    /// Partition key value.
    pub pk: String,
    /// Sort key value.
    pub sk: String,
}

impl PrimaryKey {
    /// The key as request attributes (`PK`, `SK`).
    pub fn attributes(&self) -> Item {
        HashMap::from([
            (PK.name().to_string(), AttributeValue::S(self.pk.clone())),
            (SK.name().to_string(), AttributeValue::S(self.sk.clone())),
        ])
    }

    /// The primary key of a stored item (or key), if it has one.
    pub fn of(item: &Item) -> Option<PrimaryKey> {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        Some(PrimaryKey {
            pk: text(PK.name())?,
            sk: text(SK.name())?,
        })
    }
}

/// A stored key taken apart at its `#`s, for the entities' parsers (`parse_key` in each
/// entity's file).
pub struct KeyParts<'a> {
    /// The partition key as stored.
    pub pk: &'a str,
    /// The sort key as stored.
    pub sk: &'a str,
    /// The partition key's parts.
    pub pk_parts: Vec<&'a str>,
    /// The sort key's parts.
    pub sk_parts: Vec<&'a str>,
}

impl<'a> KeyParts<'a> {
    /// `pk` and `sk` taken apart.
    pub fn new(pk: &'a str, sk: &'a str) -> Self {
        KeyParts {
            pk,
            sk,
            pk_parts: pk.split('#').collect(),
            sk_parts: sk.split('#').collect(),
        }
    }

    /// The error for a key that is none of the table's shapes.
    pub fn bad(&self) -> ValidationError {
        ValidationError::new(
            "key",
            format!("not a Device Fleet key: {} / {}", self.pk, self.sk),
        )
    }
}

/// The attribute a key part is read back as, for the parts an entity may keep only in its key
/// ([`crate::model::entities::Entity::FIELDS_IN_KEY`]): the owner, the device, the rollout
/// and a live state's placement. Other parts (times, tags, ids) are not entity fields.
fn entity_field(part: &str, value: &dyn Any) -> Option<(&'static str, AttributeValue)> {
    let text = |name, value: Option<String>| value.map(|v| (name, AttributeValue::S(v)));
    match part {
        "user" => text(
            "userId",
            value.downcast_ref::<UserId>().map(UserId::to_string),
        ),
        "device" => text(
            "deviceId",
            value.downcast_ref::<DeviceId>().map(DeviceId::to_string),
        ),
        "rollout" => text(
            "rolloutId",
            value.downcast_ref::<RolloutId>().map(RolloutId::to_string),
        ),
        "partition" => value
            .downcast_ref::<u32>()
            .map(|shard| ("shard", AttributeValue::N(shard.to_string()))),
        _ => None,
    }
}

/// Declares [`ItemKey`] from one line per key shape, and [`ItemKey::entity_fields`] from the
/// names of its parts. How each shape is spelled and parsed is its entity's
/// (`crate::model::entities::registry`).
macro_rules! item_keys {
    ($( $(#[$doc:meta])* $variant:ident { $($field:ident: $ty:ty),* $(,)? }, )*) => {
        /// The item a primary key addresses, with its parts.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum ItemKey {
            $( $(#[$doc])* $variant { $($field: $ty),* }, )*
        }

        impl ItemKey {
            /// The entity fields this key names, as attributes: the owner (`userId`), the
            /// device (`deviceId`), the rollout (`rolloutId`) and a live state's placement
            /// (`shard`). An entity that stores them only in its key
            /// ([`crate::model::entities::Entity::FIELDS_IN_KEY`]) reads them back from here.
            pub fn entity_fields(&self) -> Vec<(&'static str, AttributeValue)> {
                match self {
                    $( ItemKey::$variant { $($field),* } => {
                        [$(entity_field(stringify!($field), $field as &dyn Any)),*]
                            .into_iter()
                            .flatten()
                            .collect()
                    } )*
                }
            }
        }
    };
}

item_keys! {
    /// A user's profile.
    Profile { user: UserId },
    /// A device in its owner's partition.
    Device { user: UserId, device: DeviceId },
    /// An owner's fleet: how many devices and over how many partitions their live state spreads.
    Fleet { user: UserId },
    /// A device's live state, in its owner's partition `shard` (0 is the user partition).
    DeviceState { user: UserId, partition: u32, device: DeviceId },
    /// A tag link: `device` carries `tag`.
    TagLink { user: UserId, tag: Tag, device: DeviceId },
    /// The table-wide registration of a device id (uniqueness, owner, token hash).
    Registration { device: DeviceId },
    /// One event of one device of one owner.
    Event { user: UserId, device: DeviceId, at: Timestamp, event: EventId },
    /// That a device sent events of a searchable type during the window starting at `window`.
    TypeMark { user: UserId, device: DeviceId, event_type: EventType, window: Timestamp },
    /// The daily analytics report for `day`.
    Report { day: Day },
    /// One scan segment's checkpoint of the daily run for `day` (a key of its own per segment).
    Checkpoint { day: Day, segment: u32 },
    /// A deleted device whose events the daily run still has to purge.
    PurgeMarker { user: UserId, device: DeviceId },
    /// What a device's owner wants it to be configured as.
    Desired { user: UserId, device: DeviceId },
    /// What a device reported it applied.
    Reported { user: UserId, device: DeviceId },
    /// A command queued for a device, by its sequence number.
    Command { user: UserId, device: DeviceId, seq: u64 },
    /// A fleet-wide desired-state change of an owner.
    Rollout { user: UserId, rollout: RolloutId },
    /// A rollout the scheduled worker still has to carry out.
    RunningRollout { user: UserId, rollout: RolloutId },
    /// An owner's alarm rules (all in one item: ingestion reads them with the live state).
    RuleSet { user: UserId },
    /// The open alarm of a device and source, while there is one (at most one per pair).
    OpenAlarm { user: UserId, device: DeviceId, source: AlarmSource },
    /// One alarm of one device, raised at `raised_at` by `source` (its history entry).
    Alarm { user: UserId, device: DeviceId, raised_at: Timestamp, source: AlarmSource },
}

impl ItemKey {
    /// The key as request attributes (`PK`, `SK`).
    pub fn attributes(&self) -> Item {
        self.primary_key().attributes()
    }

    /// The item a stored item's (or key's) `PK`/`SK` address.
    pub fn of(item: &Item) -> Result<Self, ValidationError> {
        let key = PrimaryKey::of(item)
            .ok_or_else(|| ValidationError::new("key", "an item without PK and SK"))?;
        Self::parse(&key.pk, &key.sk)
    }
}

/// `USER#{userId}`: the user partition (profile, fleet, devices, tag links, rules, rollouts).
pub fn user_pk(user: &UserId) -> String {
    format!("USER#{user}")
}

/// `USER#{userId}#DEVICE#`: the common start of every event partition of `user`.
pub fn event_pk_prefix(user: &UserId) -> String {
    format!("USER#{user}#DEVICE#")
}

/// `USER#{userId}#DEVICE#{deviceId}`: one owner's device partition (its events, type marks,
/// twin documents and commands).
pub fn event_pk(user: &UserId, device: &DeviceId) -> String {
    format!("{}{device}", event_pk_prefix(user))
}

/// The owner and device of an event partition key `USER#{userId}#DEVICE#{deviceId}`.
pub fn parse_event_pk(pk: &str) -> Result<(UserId, DeviceId), ValidationError> {
    match pk.split('#').collect::<Vec<_>>().as_slice() {
        ["USER", user, "DEVICE", device] => Ok((UserId::parse(*user)?, DeviceId::parse(*device)?)),
        _ => Err(ValidationError::new(
            "key",
            format!("not an event partition: {pk}"),
        )),
    }
}

/// GSI2 (directory) partition key of a user's profile and fleet items: `DIRECTORY#{shard}`.
pub fn directory_gsi2pk(user: &UserId) -> String {
    format!("DIRECTORY#{}", shard_of(user.as_str(), DIRECTORY_SHARDS))
}

/// What a directory (GSI2) entry stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectoryEntry {
    /// A user's profile.
    Profile,
    /// An owner's fleet item.
    Fleet,
    /// A deleted device's purge marker.
    Purge,
}

impl DirectoryEntry {
    fn as_str(self) -> &'static str {
        match self {
            DirectoryEntry::Profile => "PROFILE",
            DirectoryEntry::Fleet => "FLEET",
            DirectoryEntry::Purge => "PURGE",
        }
    }
}

/// The index key attributes an item carries. A pair left out keeps the item out of that
/// index (sparse indexes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexKeys {
    /// `GSI1PK`.
    pub gsi1pk: Option<String>,
    /// `GSI1SK`.
    pub gsi1sk: Option<String>,
    /// `GSI2PK`.
    pub gsi2pk: Option<String>,
    /// `GSI2SK`.
    pub gsi2sk: Option<String>,
    /// `GSI3PK`.
    pub gsi3pk: Option<String>,
    /// `GSI3SK`.
    pub gsi3sk: Option<String>,
}

impl IndexKeys {
    /// A profile, fleet or purge marker in the directory (GSI2), which the daily run scans
    /// instead of the table: one entry per user, per fleet and per deleted device being purged,
    /// never an event. `detail` tells apart several entries of one user (a marker's device).
    pub fn directory(user: &UserId, entry: DirectoryEntry) -> Self {
        Self::directory_entry(user, entry, None)
    }

    /// [`IndexKeys::directory`] with a detail after the user (a purge marker's device).
    pub fn directory_entry(user: &UserId, entry: DirectoryEntry, detail: Option<&str>) -> Self {
        let sort = match detail {
            Some(detail) => format!("{}#{user}#{detail}", entry.as_str()),
            None => format!("{}#{user}", entry.as_str()),
        };
        IndexKeys {
            gsi2pk: Some(directory_gsi2pk(user)),
            gsi2sk: Some(sort),
            ..IndexKeys::default()
        }
    }

    /// The attributes to store (or to set in an update: see
    /// [`crate::model::expression::Update::set_all`]).
    pub fn attributes(&self) -> impl Iterator<Item = (Attribute, AttributeValue)> + '_ {
        [
            (GSI1PK, &self.gsi1pk),
            (GSI1SK, &self.gsi1sk),
            (GSI2PK, &self.gsi2pk),
            (GSI2SK, &self.gsi2sk),
            (GSI3PK, &self.gsi3pk),
            (GSI3SK, &self.gsi3sk),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| (name, AttributeValue::S(v.clone()))))
    }
}
/// The key templates of one entity, for documentation (`docs/model.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    /// `entityType`.
    pub entity_type: &'static str,
    /// Partition key template.
    pub pk: &'static str,
    /// Sort key template.
    pub sk: &'static str,
    /// GSI1 partition and sort key templates, if the entity is on GSI1.
    pub gsi1: Option<(&'static str, &'static str)>,
    /// GSI2 partition and sort key templates, if the entity is on GSI2.
    pub gsi2: Option<(&'static str, &'static str)>,
    /// GSI3 partition and sort key templates, if the entity is on GSI3.
    pub gsi3: Option<(&'static str, &'static str)>,
}
