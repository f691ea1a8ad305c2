//! Who may do what in an organization: the caller's role, read from their own membership item
//! on every organization request (AP-O13).
//!
//! One eventually consistent GetItem of `MEMBER#{userId}` / `ORG#{orgId}` (0.5 units; items
//! under 4 KB). No cache: a per-container cache misses on most requests in production anyway
//! (API Gateway spreads a user's requests over containers), and without one a removed member or
//! lowered role is refused on their next request, bounded only by DynamoDB's replication of an
//! eventually consistent read (typically well under a second; the issue allows 60 s). The key is
//! the caller's own, so a thousand members' requests land on a thousand partitions keys, never
//! on the organization's.

use crate::model::entities::membership::MembershipItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::ids::{OrgId, UserId};
use crate::model::org::Role;
use crate::model::pattern_id::PatternId;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::table::{sdk_error, FleetTable};

/// AP-O13, implemented by [`member_role`].
pub const MEMBER_ROLE: AccessPattern = AccessPattern {
    id: PatternId::MemberRole,
    description: "the caller's role in an organization (each /orgs/{orgId}/... request)",
    frequency: Frequency::Critical,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = MEMBER#{userId}, SK = ORG#{orgId}",
    budget: RequestBudget::Fixed(1),
    max_read_units: Some(0.5),
    route: None,
    implemented_by: implemented_by!(member_role),
};

/// AP-O13: `user`'s role in `org`, or `None` when they are not a member (or the organization
/// does not exist: the two are never told apart).
pub async fn member_role(
    table: &FleetTable,
    user: &UserId,
    org: &OrgId,
) -> Result<Option<Role>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Membership {
                member: user.clone(),
                org: org.clone(),
            }
            .attributes(),
        ))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(out
        .item
        .map(MembershipItem::from_item)
        .transpose()?
        .map(|m| m.role))
}

/// `user`'s role in `org` when it includes `needed`: a non-member's request is a 404 (the
/// organization's existence is not revealed), a member's without the role a 403 naming it.
pub async fn authorize(
    table: &FleetTable,
    user: &UserId,
    org: &OrgId,
    needed: Role,
) -> Result<Role, FleetError> {
    let held = member_role(table, user, org)
        .await?
        .ok_or(FleetError::NotFound("organization"))?;
    require(held, needed)?;
    Ok(held)
}

/// `held` when it includes `needed`, else the 403 naming `needed`.
pub fn require(held: Role, needed: Role) -> Result<Role, FleetError> {
    if held.includes(needed) {
        Ok(held)
    } else {
        Err(FleetError::RoleRequired {
            needed: needed.as_str(),
            held: held.as_str(),
        })
    }
}
