//! An organization's members: the list (AP-O6), a role change or hand-over of ownership
//! (AP-O7), a removal or a leave (AP-O8). The org member and membership items of a person are
//! always written in one transaction, so they never differ.

use crate::model::cursor::{self, Page};
use crate::model::entities::membership::MembershipItem;
use crate::model::entities::org_member::{OrgMemberItem, MEMBER_PREFIX};
use crate::model::entities::organization::{org_pk, OrganizationItem};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{OrgId, UserId};
use crate::model::org::Role;
use crate::model::pattern_id::PatternId;
use crate::model::schema::{PK, SK};
use crate::ops::orgs::access::require;
use crate::ops::orgs::revocation::revoke_made_by;
use crate::ops::orgs::view::Member;
use crate::ops::orgs::writes;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    key_prefix, number_value, query, read_consistent, string_value, transact, Transaction,
};
use crate::store::retry::Retry;
use crate::store::table::FleetTable;

/// Members per page of `GET /orgs/{orgId}/members`.
pub const MEMBERS_PAGE: i32 = 500;

/// AP-O6, implemented by [`list_members`].
pub const ORG_MEMBERS: AccessPattern = AccessPattern {
    id: PatternId::OrgMembers,
    description: "an organization's members (after the caller's role, AP-O13)",
    frequency: Frequency::Important,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = ORG#{orgId}, SK begins_with MEMBER#",
    budget: RequestBudget::PerPage(1),
    max_read_units: None,
    route: Some("GET /orgs/{orgId}/members"),
    implemented_by: implemented_by!(list_members),
};

/// AP-O6: one page of `org`'s members, by user id.
pub async fn list_members(
    table: &FleetTable,
    org: &OrgId,
    cursor: Option<&str>,
) -> Result<Page<Member>, FleetError> {
    let pk = org_pk(org);
    let start = cursor::resume(
        PatternId::OrgMembers,
        cursor,
        &[(PK, &pk)],
        &[(SK, MEMBER_PREFIX)],
    )?;
    let (items, next) = query(
        key_prefix(table, pk.clone(), MEMBER_PREFIX, Expressions::builder())
            .limit(MEMBERS_PAGE)
            .set_exclusive_start_key(start),
    )
    .await?;
    let members = items
        .into_iter()
        .map(|item| OrgMemberItem::from_item(item).map(|m| Member::from(&m)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page {
        items: members,
        cursor: cursor::after(PatternId::OrgMembers, next.as_ref()),
    })
}

/// AP-O7, implemented by [`change_role`].
pub const CHANGE_MEMBER_ROLE: AccessPattern = AccessPattern {
    id: PatternId::ChangeMemberRole,
    description: "change a member's role, or hand ownership over",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::GetItem,
        Operation::TransactWriteItems,
        Operation::Query,
        Operation::BatchWriteItem,
    ],
    index: None,
    key_condition: "ORG#{orgId}/MEMBER#{userId} and MEMBER#{userId}/ORG#{orgId} (both members' for a hand-over, and ORG#{orgId}/ORG); an admin lowered below admin: PK = ORG#{orgId}, SK begins_with INVITATION#, createdBy = {userId}, deleted",
    // An admin lowered below admin: the Query of their invitations (one page, the open ones
    // capped) and their deletion, 25 a batch.
    budget: RequestBudget::BatchOf25Plus(3),
    max_read_units: None,
    route: Some("PATCH /orgs/{orgId}/members/{userId}"),
    implemented_by: implemented_by!(change_role),
};

/// Who acts on an organization's members, and with which role.
#[derive(Clone, Debug)]
pub struct Actor {
    /// The person.
    pub user: UserId,
    /// Their role (from AP-O13).
    pub role: Role,
}

/// AP-O7: gives `target` the role `role`. Nobody raises a role above their own; members above
/// admin (the owner) are changed only by handing ownership over: `role` = owner, by the owner,
/// makes `target` the owner and the caller an admin in one transaction.
pub async fn change_role(
    table: &FleetTable,
    org: &OrgId,
    actor: &Actor,
    target: &UserId,
    role: Role,
) -> Result<Member, FleetError> {
    require(actor.role, role.max(Role::Admin))?;
    let current = read_member(table, org, target).await?;
    if current.role == Role::Owner && target != &actor.user {
        return Err(owner_must_stay());
    }
    if role == Role::Owner {
        if target == &actor.user {
            return Ok(Member::from(&current));
        }
        return hand_over(table, org, actor, current).await;
    }
    if current.role == Role::Owner {
        // The owner lowering themselves would leave the organization without one.
        return Err(owner_must_stay());
    }
    let actions = vec![
        set_role(
            table,
            ItemKey::OrgMember {
                org: org.clone(),
                member: target.clone(),
            },
            current.role,
            role,
        )?,
        set_role(
            table,
            ItemKey::Membership {
                member: target.clone(),
                org: org.clone(),
            },
            current.role,
            role,
        )?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => {}
        Transaction::Cancelled(_) => return Err(changed_meanwhile()),
    }
    // A role that invites nobody any more: what they invited goes (accepting checks the
    // maker's role too, should this be cut short).
    if current.role.includes(Role::Admin) && !role.includes(Role::Admin) {
        revoke_made_by(table, org, target).await?;
    }
    Ok(Member::from(&OrgMemberItem { role, ..current }))
}

async fn hand_over(
    table: &FleetTable,
    org: &OrgId,
    actor: &Actor,
    target: OrgMemberItem,
) -> Result<Member, FleetError> {
    let owner = &actor.user;
    let new_owner = &target.user_id;
    let actions = vec![
        set_role(
            table,
            ItemKey::OrgMember {
                org: org.clone(),
                member: new_owner.clone(),
            },
            target.role,
            Role::Owner,
        )?,
        set_role(
            table,
            ItemKey::Membership {
                member: new_owner.clone(),
                org: org.clone(),
            },
            target.role,
            Role::Owner,
        )?,
        set_role(
            table,
            ItemKey::OrgMember {
                org: org.clone(),
                member: owner.clone(),
            },
            Role::Owner,
            Role::Admin,
        )?,
        set_role(
            table,
            ItemKey::Membership {
                member: owner.clone(),
                org: org.clone(),
            },
            Role::Owner,
            Role::Admin,
        )?,
        writes::update(
            table,
            &ItemKey::Organization { org: org.clone() },
            Update::new().set(OrganizationItem::OWNER, string_value(new_owner.as_str())),
            Condition::equals(OrganizationItem::OWNER, string_value(owner.as_str())),
        )?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(Member::from(&OrgMemberItem {
            role: Role::Owner,
            ..target
        })),
        Transaction::Cancelled(_) => Err(changed_meanwhile()),
    }
}

/// AP-O8, implemented by [`remove_member`].
pub const REMOVE_MEMBER: AccessPattern = AccessPattern {
    id: PatternId::RemoveMember,
    description: "remove a member, or leave",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::GetItem,
        Operation::TransactWriteItems,
        Operation::Query,
        Operation::BatchWriteItem,
    ],
    index: None,
    key_condition: "delete ORG#{orgId}/MEMBER#{userId} and MEMBER#{userId}/ORG#{orgId}; ORG#{orgId}/ORG memberCount - 1; an admin's: PK = ORG#{orgId}, SK begins_with INVITATION#, createdBy = {userId}, deleted",
    // An admin's removal: the Query of their invitations (one page, the open ones capped) and
    // their deletion, 25 a batch.
    budget: RequestBudget::BatchOf25Plus(3),
    max_read_units: None,
    route: Some("DELETE /orgs/{orgId}/members/{userId}"),
    implemented_by: implemented_by!(remove_member),
};

/// AP-O8: `target` leaves `org`: by their own request at any role but owner (who hands
/// ownership over first), or removed by an admin or the owner (never the owner). An admin's
/// invitations are revoked with them.
pub async fn remove_member(
    table: &FleetTable,
    org: &OrgId,
    actor: &Actor,
    target: &UserId,
) -> Result<(), FleetError> {
    if target != &actor.user {
        require(actor.role, Role::Admin)?;
    }
    let current = read_member(table, org, target).await?;
    if current.role == Role::Owner {
        return Err(owner_must_stay());
    }
    let role = || Condition::equals(MembershipItem::ROLE, string_value(current.role.as_str()));
    let actions = vec![
        writes::delete(
            table,
            &ItemKey::OrgMember {
                org: org.clone(),
                member: target.clone(),
            },
            Some(role()),
        )?,
        writes::delete(
            table,
            &ItemKey::Membership {
                member: target.clone(),
                org: org.clone(),
            },
            Some(role()),
        )?,
        writes::update(
            table,
            &ItemKey::Organization { org: org.clone() },
            Update::new().increment(OrganizationItem::MEMBER_COUNT, number_value(-1)),
            Condition::exists(PK),
        )?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => {}
        Transaction::Cancelled(_) => return Err(changed_meanwhile()),
    }
    if current.role.includes(Role::Admin) {
        revoke_made_by(table, org, target).await?;
    }
    Ok(())
}

/// `target`'s entry in `org`'s member list, read consistently, or 404 `member`.
async fn read_member(
    table: &FleetTable,
    org: &OrgId,
    target: &UserId,
) -> Result<OrgMemberItem, FleetError> {
    read_consistent::<OrgMemberItem>(
        table,
        &ItemKey::OrgMember {
            org: org.clone(),
            member: target.clone(),
        },
    )
    .await?
    .ok_or(FleetError::NotFound("member"))
}

/// Sets the role on a member's item, conditioned on the role it was read with.
fn set_role(
    table: &FleetTable,
    key: ItemKey,
    from: Role,
    to: Role,
) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, FleetError> {
    writes::update(
        table,
        &key,
        Update::new().set(MembershipItem::ROLE, string_value(to.as_str())),
        Condition::equals(MembershipItem::ROLE, string_value(from.as_str())),
    )
}

/// 409: the owner cannot leave, be removed or lowered; ownership is handed over first.
fn owner_must_stay() -> FleetError {
    FleetError::Conflict {
        code: "owner_must_stay",
        message:
            "an organization always has its owner: hand ownership over to another member first"
                .into(),
    }
}

/// 409: the member changed between the read and the write.
fn changed_meanwhile() -> FleetError {
    FleetError::Conflict {
        code: "busy",
        message: "the member changed meanwhile: read the members again and retry".into(),
    }
}
