//! The table's keys (docs/design.md, "Key schema"): [`PrimaryKey`], a stored key's parts
//! ([`KeyParts`], which the entities' parsers read), the index key attributes ([`IndexKeys`])
//! and the partitions several entities share (the user partition, a device's event partition,
//! the directory). Each entity's own key spelling, builders, parser and template live in its
//! file under [`crate::model::entities`] (`ItemKey` there too); docs/model.json lists every
//! key, generated from the entities' [`KeyTemplate`]s.
//!
//! Every part is a validated type that cannot contain `#`, so parsing is unambiguous.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::model::error::ValidationError;
use crate::model::expression::Attribute;
use crate::model::ids::{DeviceId, UserId};
use crate::model::schema::{Item, GSI1PK, GSI1SK, GSI2PK, GSI2SK, GSI3PK, GSI3SK, PK, SK};
use crate::model::shard::shard_of;

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

    /// What a parser answers once the key has its shape: the key its parts `parse` into, or the
    /// error of the part that does not parse.
    pub fn matched<T>(
        &self,
        parse: impl FnOnce() -> Result<T, ValidationError>,
    ) -> Option<Result<T, ValidationError>> {
        Some(parse())
    }

    /// The error for a key that is none of the table's shapes.
    pub fn bad(&self) -> ValidationError {
        ValidationError::new(
            "key",
            format!("not a Device Fleet key: {} / {}", self.pk, self.sk),
        )
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
