//! An organization: `ORG#{orgId}` / `ORG`. Its fleet is keyed like a person's, under the owner
//! key `org:{orgId}` ([`crate::model::ids::UserId::org_fleet`]); this item holds what the
//! organization is (name, owner, member count).

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{OrgId, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;

/// An organization: `ORG#{orgId}` / `ORG`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationItem {
    /// The organization.
    pub org_id: OrgId,
    /// Display name.
    pub name: String,
    /// Its one owner.
    pub owner: UserId,
    /// Who created it.
    pub created_by: UserId,
    /// Creation.
    pub created_at: Timestamp,
    /// Members, owner included (changed in every membership transaction).
    pub member_count: u64,
    /// Set when its deletion began: from then on no invitation is accepted and no device is
    /// registered or moved into its fleet (each is conditioned on its absence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting_at: Option<Timestamp>,
}

attributes!(OrganizationItem {
    /// `orgId`.
    ORG_ID = "orgId",
    /// `name`.
    NAME = "name",
    /// `owner`.
    OWNER = "owner",
    /// `createdBy`.
    CREATED_BY = "createdBy",
    /// `createdAt`.
    CREATED_AT = "createdAt",
    /// `memberCount`.
    MEMBER_COUNT = "memberCount",
    /// `deletingAt`.
    DELETING_AT = "deletingAt",
});

impl Entity for OrganizationItem {
    const ENTITY_TYPE: EntityType = EntityType::Organization;
    fn item_key(&self) -> ItemKey {
        ItemKey::Organization {
            org: self.org_id.clone(),
        }
    }
}

/// The condition every accept, registration into its fleet and move into it is written on:
/// the organization exists and is not being deleted.
pub fn admits() -> crate::model::expression::Condition {
    use crate::model::expression::Condition;
    Condition::exists(crate::model::schema::PK)
        .and(Condition::absent(OrganizationItem::DELETING_AT))
}

/// Sort key of the organization item.
pub const ORG_SK: &str = "ORG";

/// `ORG#{orgId}`: the organization's partition (its item, members and invitations).
pub fn org_pk(org: &OrgId) -> String {
    format!("ORG#{org}")
}

/// `ORG#{orgId}` / `ORG`.
pub fn primary_key(org: &OrgId) -> PrimaryKey {
    PrimaryKey {
        pk: org_pk(org),
        sk: ORG_SK.to_string(),
    }
}

/// An organization's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ORG", org], ["ORG"]) => {
            Some(OrgId::parse(*org).map(|org| ItemKey::Organization { org }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "organization",
    pk: "ORG#${orgId}",
    sk: "ORG",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
