//! Entities: one file per stored item type, holding its struct, its [`Entity`] impl (its
//! primary key, index keys and `entityType` derived from its own fields, as modyne's
//! `Entity::primary_key` / `full_key`), its stored attribute names, its key and index key
//! builders and parsers, and its key template for the generated docs. So no caller ever sets a
//! key attribute by hand, and an item read back can be told apart by type, not by key shape.
//!
//! A new entity adds its file here, a variant to [`EntityType`] and its lines in
//! [`registry`] (its key template and, when it has a key shape of its own, its `ItemKey`
//! variant's builder and parser).

use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use strum::{EnumIter, IntoEnumIterator, IntoStaticStr};

use crate::model::error::FleetError;
use crate::model::expression::Attribute;
use crate::model::keys::{IndexKeys, ItemKey};
use crate::model::schema::{Item, ENTITY_TYPE};
use crate::model::shard::ShardCounts;

/// Declares an entity's stored attribute names as associated constants (the one spelling of
/// each, used by every expression), and `ATTRIBUTES`, which a test checks against the names
/// serde stores, so a renamed field cannot leave an expression behind.
macro_rules! attributes {
    ($entity:ty { $($(#[$doc:meta])* $name:ident = $stored:literal),* $(,)? }) => {
        impl $entity {
            $($(#[$doc])* pub const $name: crate::model::expression::Attribute =
                crate::model::expression::Attribute::named($stored);)*
            /// Every attribute named above (what a stored item of this type may carry).
            pub const ATTRIBUTES: &'static [crate::model::expression::Attribute] = &[$(Self::$name),*];
        }
    };
}

pub mod alarm;
pub mod checkpoint;
pub mod command;
pub mod desired_state;
pub mod device;
pub mod device_state;
pub mod event;
pub mod fleet;
pub mod open_alarm;
pub mod profile;
pub mod purge_marker;
pub mod registration;
pub mod registry;
pub mod released_registration;
pub mod report;
pub mod reported_state;
pub mod rollout;
pub mod rule_set;
pub mod running_rollout;
pub mod tag_link;
pub mod type_mark;

/// A stored item type: its fields are the item's non-key attributes; the keys follow from them.
pub trait Entity: Serialize + DeserializeOwned {
    /// The `entityType` every item of this type carries.
    const ENTITY_TYPE: EntityType;

    /// The primary key, from the item's own fields.
    fn item_key(&self) -> ItemKey;

    /// The index keys, from the item's own fields and the table's shard counts (none by
    /// default: most entities are on no index).
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        IndexKeys::default()
    }

    /// Whether the owner, device and placement this entity's key names are stored only in the
    /// key (its fields skip serializing): reading an item back restores them from there
    /// ([`ItemKey::entity_fields`]). Off by default, so reads of other entities (events, by
    /// the page) parse no key.
    const FIELDS_IN_KEY: bool = false;

    /// The whole item to store: attributes, primary key, index keys and `entityType`.
    fn to_item(&self, shards: &ShardCounts) -> Result<Item, FleetError> {
        entity_item(self, shards)
    }

    /// An item read back, checked to be of this type (key attributes are ignored; a
    /// projection without them reads as well).
    fn from_item(item: Item) -> Result<Self, FleetError> {
        checked_item(item)
    }
}

/// `entity`'s serialized fields with its primary key, index keys and `entityType` (what
/// [`Entity::to_item`] stores unless an entity adds attributes of its own).
pub fn entity_item<E: Entity>(entity: &E, shards: &ShardCounts) -> Result<Item, FleetError> {
    let mut item: Item = serde_dynamo::to_item(entity)?;
    item.extend(entity.item_key().attributes());
    item.extend(
        entity
            .index_keys(shards)
            .attributes()
            .map(|(name, value)| (name.name().to_string(), value)),
    );
    item.insert(
        ENTITY_TYPE.name().to_string(),
        AttributeValue::S(E::ENTITY_TYPE.as_str().to_string()),
    );
    Ok(item)
}

/// `item` as an `E`, if its `entityType` says it is one.
pub fn checked_item<E: Entity>(mut item: Item) -> Result<E, FleetError> {
    match EntityType::of(&item) {
        Some(found) if found == E::ENTITY_TYPE => {
            if E::FIELDS_IN_KEY {
                if let Ok(key) = ItemKey::of(&item) {
                    for (name, value) in key.entity_fields() {
                        item.entry(name.to_string()).or_insert(value);
                    }
                }
            }
            Ok(serde_dynamo::from_item(item)?)
        }
        found => Err(FleetError::internal(format!(
            "expected a {} item, found {:?}",
            E::ENTITY_TYPE.as_str(),
            found.map(|t| t.as_str())
        ))),
    }
}

/// The `entityType` attribute on every item; its stored spelling is the variant's name in
/// camelCase (serde and [`EntityType::as_str`] agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, EnumIter, IntoStaticStr)]
#[serde(rename_all = "camelCase")]
#[strum(serialize_all = "camelCase")]
pub enum EntityType {
    /// A user's profile.
    Profile,
    /// A device in its owner's partition.
    Device,
    /// An owner's fleet (device count, live-state partitions).
    Fleet,
    /// A device's live state (what ingestion keeps for the dashboard).
    DeviceState,
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
    /// A deleted device whose events the daily run still has to purge.
    PurgeMarker,
    /// A deleted device's registration, kept for a while as a fence (the id is free).
    ReleasedRegistration,
    /// That a device sent events of a searchable type in a window (the event-type index).
    TypeMark,
    /// What a device's owner wants it configured as (its twin's desired half).
    DesiredState,
    /// What a device reported it applied (its twin's reported half).
    ReportedState,
    /// A command queued for a device.
    Command,
    /// A fleet-wide desired-state change (by tag or device type).
    Rollout,
    /// A rollout the scheduled worker has not finished.
    RunningRollout,
    /// An owner's alarm rules.
    RuleSet,
    /// One alarm of one device (its history entry).
    Alarm,
    /// The open alarm of a device and source.
    OpenAlarm,
}

impl EntityType {
    /// `entityType = this type`, for an update that creates the item or a condition on it.
    pub fn assignment(&self) -> (Attribute, AttributeValue) {
        (ENTITY_TYPE, AttributeValue::S(self.as_str().to_string()))
    }

    /// The stored spelling of `entityType`.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }

    /// The type of a stored item, from its `entityType` attribute (`None` if it has none
    /// or an unknown one).
    pub fn of(item: &Item) -> Option<EntityType> {
        let stored = item.get(ENTITY_TYPE.name())?.as_s().ok()?;
        EntityType::iter().find(|t| t.as_str() == stored)
    }
}
