//! A person's membership of an organization: `MEMBER#{userId}` / `ORG#{orgId}`. The item every
//! organization request reads (one eventually consistent GetItem, 0.5 units) to learn the
//! caller's role: in the caller's own partition, so a thousand members' requests spread over a
//! thousand keys, never on the organization's. `GET /orgs` is one Query of it.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{OrgId, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::org::Role;
use crate::model::timestamp::Timestamp;

/// A person's membership: `MEMBER#{userId}` / `ORG#{orgId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MembershipItem {
    /// The member.
    pub user_id: UserId,
    /// The organization.
    pub org_id: OrgId,
    /// Their role.
    pub role: Role,
    /// When they joined.
    pub joined_at: Timestamp,
}

attributes!(MembershipItem {
    /// `role`.
    ROLE = "role",
});

impl Entity for MembershipItem {
    const ENTITY_TYPE: EntityType = EntityType::Membership;
    fn item_key(&self) -> ItemKey {
        ItemKey::Membership {
            member: self.user_id.clone(),
            org: self.org_id.clone(),
        }
    }
}

/// `MEMBER#{userId}`: a person's memberships.
pub fn membership_pk(member: &UserId) -> String {
    format!("MEMBER#{member}")
}

/// Sort-key prefix of a person's memberships.
pub const ORG_PREFIX: &str = "ORG#";

/// `MEMBER#{userId}` / `ORG#{orgId}`.
pub fn primary_key(member: &UserId, org: &OrgId) -> PrimaryKey {
    PrimaryKey {
        pk: membership_pk(member),
        sk: format!("{ORG_PREFIX}{org}"),
    }
}

/// A membership's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["MEMBER", member], ["ORG", org]) => Some((|| {
            Ok(ItemKey::Membership {
                member: UserId::parse(*member)?,
                org: OrgId::parse(*org)?,
            })
        })()),
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "membership",
    pk: "MEMBER#${userId}",
    sk: "ORG#${orgId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
