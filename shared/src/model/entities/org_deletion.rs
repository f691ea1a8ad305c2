//! An organization being deleted: `ORGS#DELETING` / `{orgId}`, what the scheduled worker lists
//! to finish a deletion its request did not (docs/design.md, "Deleting an organization").

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::OrgId;
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Timestamp;

/// An organization whose deletion is under way: written in the transaction that marks the
/// organization as being deleted, deleted after its last item: a deletion interrupted after
/// any step is found here and finished by the worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgDeletionItem {
    /// The organization.
    pub org_id: OrgId,
    /// When its deletion began.
    pub started_at: Timestamp,
}

attributes!(OrgDeletionItem {
    /// `orgId`.
    ORG_ID = "orgId",
    /// `startedAt`.
    STARTED_AT = "startedAt",
});

impl Entity for OrgDeletionItem {
    const ENTITY_TYPE: EntityType = EntityType::OrgDeletion;
    fn item_key(&self) -> ItemKey {
        ItemKey::OrgDeletion {
            org: self.org_id.clone(),
        }
    }
}

/// Partition of the organizations being deleted, which the scheduled worker lists (two writes
/// per deletion, read once a minute).
pub const DELETING_ORGS_PK: &str = "ORGS#DELETING";

/// `ORGS#DELETING` / `{orgId}`.
pub fn primary_key(org: &OrgId) -> PrimaryKey {
    PrimaryKey {
        pk: DELETING_ORGS_PK.to_string(),
        sk: org.to_string(),
    }
}

/// An organization deletion's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ORGS", "DELETING"], [org]) => key.matched(|| {
            Ok(ItemKey::OrgDeletion {
                org: OrgId::parse(*org)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "orgDeletion",
    pk: "ORGS#DELETING",
    sk: "${orgId}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
