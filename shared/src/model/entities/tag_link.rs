//! A tag link: `USER#{userId}` / `TAG#{tag}#{deviceId}` (device carries tag).

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, DeviceType, Tag, UserId};
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};

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

/// Sort-key prefix of tag links in the user partition.
pub const TAG_PREFIX: &str = "TAG#";

/// `TAG#{tag}#{deviceId}`.
pub fn tag_link_sk(tag: &Tag, device: &DeviceId) -> String {
    format!("{TAG_PREFIX}{tag}#{device}")
}

/// `TAG#{tag}#`: prefix of all tag links for `tag` in a user partition.
pub fn tag_link_prefix(tag: &Tag) -> String {
    format!("{TAG_PREFIX}{tag}#")
}

/// `USER#{userId}` / `TAG#{tag}#{deviceId}`.
pub fn primary_key(user: &UserId, tag: &Tag, device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: tag_link_sk(tag, device),
    }
}

/// A tag link's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["TAG", tag, device]) => key.matched(|| {
            Ok(ItemKey::TagLink {
                user: UserId::parse(*user)?,
                tag: Tag::parse(*tag)?,
                device: DeviceId::parse(*device)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "tagLink",
    pk: "USER#${userId}",
    sk: "TAG#${tag}#${deviceId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
