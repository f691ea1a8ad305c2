//! An invitation into an organization: `ORG#{orgId}` / `INVITATION#{invitationId}`, the id a
//! hash of the code's secret (the code itself is never stored). It expires by `ttl`; readers
//! also check `expiresAt`, since TTL deletes late.

use serde::{Deserialize, Serialize};

use crate::model::entities::organization::org_pk;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{OrgId, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::org::{InvitationId, Role};
use crate::model::timestamp::Timestamp;

/// An invitation: `ORG#{orgId}` / `INVITATION#{invitationId}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvitationItem {
    /// The organization.
    pub org_id: OrgId,
    /// The hash of the code's secret.
    pub invitation_id: InvitationId,
    /// The role the invitee gets.
    pub role: Role,
    /// Who invited.
    pub created_by: UserId,
    /// When.
    pub created_at: Timestamp,
    /// After this the code admits nobody.
    pub expires_at: Timestamp,
    /// DynamoDB TTL (epoch seconds): `expiresAt`.
    pub ttl: i64,
}

attributes!(InvitationItem {
    /// `expiresAt`.
    EXPIRES_AT = "expiresAt",
    /// `createdBy`.
    CREATED_BY = "createdBy",
});

impl Entity for InvitationItem {
    const ENTITY_TYPE: EntityType = EntityType::Invitation;
    fn item_key(&self) -> ItemKey {
        ItemKey::Invitation {
            org: self.org_id.clone(),
            invitation: self.invitation_id.clone(),
        }
    }
}

/// Sort-key prefix of an organization's invitations.
pub const INVITATION_PREFIX: &str = "INVITATION#";

/// `ORG#{orgId}` / `INVITATION#{invitationId}`.
pub fn primary_key(org: &OrgId, invitation: &InvitationId) -> PrimaryKey {
    PrimaryKey {
        pk: org_pk(org),
        sk: format!("{INVITATION_PREFIX}{invitation}"),
    }
}

/// An invitation's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ORG", org], ["INVITATION", invitation]) => Some((|| {
            Ok(ItemKey::Invitation {
                org: OrgId::parse(*org)?,
                invitation: InvitationId::parse(invitation)?,
            })
        })()),
        _ => None,
    }
}

/// Its key templates, for the generated docs.
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "invitation",
    pk: "ORG#${orgId}",
    sk: "INVITATION#${invitationId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
