//! Entities: one file per stored item type, holding its struct, its [`Entity`] impl (its
//! primary key, index keys and `entityType` derived from its own fields, as modyne's
//! `Entity::primary_key` / `full_key`), its stored attribute names, its key and index key
//! builders and parsers, and its key template for the generated docs. So no caller ever sets a
//! key attribute by hand, and an item read back can be told apart by type, not by key shape.
//!
//! A new entity adds its file here, a variant to [`EntityType`] (and, when it has a key shape
//! of its own, to [`ItemKey`]) and its lines in [`registry`] (its key template, its key's
//! builder and parser).

use std::any::Any;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use strum::{EnumIter, IntoEnumIterator, IntoStaticStr};

use crate::model::alarm::ids::AlarmSource;
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::Attribute;
use crate::model::firmware::FirmwareId;
use crate::model::ids::{DeviceId, EventId, EventType, OrgId, RolloutId, Tag, UserId};
use crate::model::keys::{IndexKeys, PrimaryKey};
use crate::model::org::InvitationId;
use crate::model::schema::{Item, ENTITY_TYPE};
use crate::model::series::Resolution;
use crate::model::shard::ShardCounts;
use crate::model::timestamp::{Day, Timestamp};
use crate::model::webhook::{DeliveryId, WebhookId};

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
pub mod deleted_webhook_log;
pub mod desired_state;
pub mod device;
pub mod device_move;
pub mod device_state;
pub mod event;
pub mod firmware;
pub mod firmware_keys;
pub mod fleet;
pub mod invitation;
pub mod membership;
pub mod open_alarm;
pub mod org_deletion;
pub mod org_member;
pub mod organization;
pub mod profile;
pub mod purge_marker;
pub mod registration;
pub mod registry;
pub mod released_registration;
pub mod report;
pub mod reported_state;
pub mod rollout;
pub mod rollout_slots;
pub mod rule_set;
pub mod running_rollout;
pub mod series;
pub mod silent_roll;
pub mod tag_link;
#[cfg(test)]
mod tests;
pub mod type_mark;
pub mod webhook;
pub mod webhook_delivery;

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
    /// How many of an owner's rollouts are running (the cap's conditional write).
    RolloutSlots,
    /// An owner's alarm rules.
    RuleSet,
    /// One alarm of one device (its history entry).
    Alarm,
    /// The open alarm of a device and source.
    OpenAlarm,
    /// A device's summaries of one event type over one span (5-minute block, day or month).
    Series,
    /// A device move whose history is still being copied.
    DeviceMove,
    Organization,
    OrgMember,
    Membership,
    Invitation,
    /// An organization being deleted (the worker's list).
    OrgDeletion,
    /// A firmware package (issue 40).
    Firmware,
    /// An owner's firmware signing keys by device type.
    FirmwareKeys,
    /// A webhook endpoint of an owner.
    Webhook,
    /// One webhook message to one endpoint and its attempts.
    WebhookDelivery,
    /// The delivery log of a deleted webhook endpoint, until it expires.
    DeletedWebhookLog,
    /// Where the worker is in rolling silent devices' summaries.
    SilentRoll,
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
        "firmware" => text(
            "firmwareId",
            value
                .downcast_ref::<FirmwareId>()
                .map(FirmwareId::to_string),
        ),
        "partition" => value
            .downcast_ref::<u32>()
            .map(|shard| ("shard", AttributeValue::N(shard.to_string()))),
        _ => None,
    }
}

/// Declares [`ItemKey`] from one line per key shape, and [`ItemKey::entity_fields`] from the
/// names of its parts. How each shape is spelled and parsed is its entity's
/// ([`registry`]).
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
                        let fields: [Option<(&'static str, AttributeValue)>; 0 $(+ { let _ = stringify!($field); 1 })*] =
                            [$(entity_field(stringify!($field), $field as &dyn Any)),*];
                        fields.into_iter().flatten().collect()
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
    /// How many of an owner's rollouts are running.
    RolloutSlots { user: UserId },
    /// An owner's alarm rules (all in one item: ingestion reads them with the live state).
    RuleSet { user: UserId },
    /// The open alarm of a device and source, while there is one (at most one per pair).
    OpenAlarm { user: UserId, device: DeviceId, source: AlarmSource },
    /// One alarm of one device, raised at `raised_at` by `source` (its history entry).
    Alarm { user: UserId, device: DeviceId, raised_at: Timestamp, source: AlarmSource },
    /// A device's summaries of one type at one resolution, from `start` (a block, day or month).
    Series { user: UserId, device: DeviceId, event_type: EventType, resolution: Resolution, start: Timestamp },
    /// A device move whose history is still being copied.
    DeviceMove { device: DeviceId },
    /// An organization.
    Organization { org: OrgId },
    /// A member in an organization's member list.
    OrgMember { org: OrgId, member: UserId },
    /// A person's membership of an organization (what authorization reads).
    Membership { member: UserId, org: OrgId },
    /// An invitation into an organization.
    Invitation { org: OrgId, invitation: InvitationId },
    /// An organization whose deletion is under way.
    OrgDeletion { org: OrgId },
    /// A firmware package of an owner.
    Firmware { user: UserId, firmware: FirmwareId },
    /// An owner's firmware signing keys.
    FirmwareKeys { user: UserId },
    /// A webhook endpoint of an owner.
    Webhook { user: UserId, webhook: WebhookId },
    /// One webhook message to one endpoint.
    WebhookDelivery { user: UserId, webhook: WebhookId, delivery: DeliveryId },
    /// The delivery log of a deleted webhook endpoint (in its owner's partition).
    DeletedWebhookLog { user: UserId, webhook: WebhookId },
    /// The worker's place in rolling silent devices' summaries (one item).
    SilentRoll {},
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
