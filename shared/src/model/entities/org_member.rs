//! A member in an organization's member list: `ORG#{orgId}` / `MEMBER#{userId}`. Always written
//! in the same transaction as the member's [`super::membership`] item, so the two never differ;
//! this one is what `GET /orgs/{orgId}/members` pages through.

use serde::{Deserialize, Serialize};

use crate::model::entities::organization::org_pk;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{OrgId, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::org::Role;
use crate::model::timestamp::Timestamp;

/// A member in an organization's list: `ORG#{orgId}` / `MEMBER#{userId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgMemberItem {
    /// The organization.
    pub org_id: OrgId,
    /// The member.
    pub user_id: UserId,
    /// Their role.
    pub role: Role,
    /// When they joined.
    pub joined_at: Timestamp,
    /// Their e-mail, from their identity token when they joined (shown to teammates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

attributes!(OrgMemberItem {
    /// `role`.
    ROLE = "role",
});

impl Entity for OrgMemberItem {
    const ENTITY_TYPE: EntityType = EntityType::OrgMember;
    fn item_key(&self) -> ItemKey {
        ItemKey::OrgMember {
            org: self.org_id.clone(),
            member: self.user_id.clone(),
        }
    }
}

/// Sort-key prefix of an organization's members.
pub const MEMBER_PREFIX: &str = "MEMBER#";

/// `ORG#{orgId}` / `MEMBER#{userId}`.
pub fn primary_key(org: &OrgId, member: &UserId) -> PrimaryKey {
    PrimaryKey {
        pk: org_pk(org),
        sk: format!("{MEMBER_PREFIX}{member}"),
    }
}

/// A member's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ORG", org], ["MEMBER", member]) => Some((|| {
            Ok(ItemKey::OrgMember {
                org: OrgId::parse(*org)?,
                member: UserId::parse(*member)?,
            })
        })()),
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "orgMember",
    pk: "ORG#${orgId}",
    sk: "MEMBER#${userId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
