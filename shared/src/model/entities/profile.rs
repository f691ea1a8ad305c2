//! A user's profile: `USER#{userId}` / `PROFILE`, and in the directory (GSI2).

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::UserId;
use crate::model::keys::{user_pk, DirectoryEntry, IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;

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

/// Sort key of the profile item.
pub const PROFILE_SK: &str = "PROFILE";

/// `USER#{userId}` / `PROFILE`.
pub fn primary_key(user: &UserId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: PROFILE_SK.to_string(),
    }
}

/// A profile's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["PROFILE"]) => {
            Some(UserId::parse(*user).map(|user| ItemKey::Profile { user }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "profile",
    pk: "USER#${userId}",
    sk: "PROFILE",
    gsi1: None,
    gsi2: Some(("DIRECTORY#${directoryShard}", "PROFILE#${userId}")),
    gsi3: None,
};
