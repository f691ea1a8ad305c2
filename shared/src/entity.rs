//! Entities: every stored item type derives its primary key, its index keys and its
//! `entityType` from its own fields (modyne's `Entity::primary_key` / `full_key`, in a few
//! lines), so no caller ever sets a key attribute by hand and an item read back can be told
//! apart by type, not by key shape.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::ShardCounts;
use crate::error::FleetError;
use crate::items::EntityType;
use crate::keys::{Attributes, IndexKeys, ItemKey};
use crate::schema::ENTITY_TYPE;

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
    fn to_item(&self, shards: &ShardCounts) -> Result<Attributes, FleetError> {
        entity_item(self, shards)
    }

    /// An item read back, checked to be of this type (key attributes are ignored; a
    /// projection without them reads as well).
    fn from_item(item: Attributes) -> Result<Self, FleetError> {
        checked_item(item)
    }
}

/// `entity`'s serialized fields with its primary key, index keys and `entityType` (what
/// [`Entity::to_item`] stores unless an entity adds attributes of its own).
pub fn entity_item<E: Entity>(entity: &E, shards: &ShardCounts) -> Result<Attributes, FleetError> {
    let mut item: Attributes = serde_dynamo::to_item(entity)?;
    item.extend(entity.item_key().attributes());
    item.extend(entity.index_keys(shards).attributes());
    item.insert(
        ENTITY_TYPE.to_string(),
        AttributeValue::S(E::ENTITY_TYPE.as_str().to_string()),
    );
    Ok(item)
}

/// `item` as an `E`, if its `entityType` says it is one.
pub fn checked_item<E: Entity>(mut item: Attributes) -> Result<E, FleetError> {
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
