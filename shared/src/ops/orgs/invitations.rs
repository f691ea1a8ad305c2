//! Invitations: a one-time code that admits its holder with a role (AP-O9 to AP-O12). The
//! code is `{orgId}.{secret}`; only a hash of the secret is stored ([`InvitationCode`]), so
//! the table never holds what admits someone and the code is shown once. Accepting needs no
//! lookup of the invitee by e-mail: whoever signs in with the code (Cognito or any JWT issuer)
//! becomes the member.
//!
//! An invitation admits nobody once its maker could no longer make it: a member removed, or
//! lowered below admin, has their invitations revoked
//! ([`crate::ops::orgs::revocation::revoke_made_by`]), and accepting is
//! conditioned on the maker's membership still holding a role that may make it, in the same
//! transaction (the fence, should a revocation be interrupted).

use aws_sdk_dynamodb::types::Select;

use crate::model::cursor::{self, Page};
use crate::model::entities::invitation::{InvitationItem, INVITATION_PREFIX};
use crate::model::entities::membership::{membership_pk, MembershipItem, ORG_PREFIX};
use crate::model::entities::org_member::OrgMemberItem;
use crate::model::entities::organization::{org_pk, OrganizationItem};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{OrgId, UserId};
use crate::model::org::{
    InvitationCode, InvitationId, Role, DEFAULT_INVITATION_DAYS, MAX_INVITATION_DAYS,
    MAX_MEMBERS_PER_ORG, MAX_ORGS_PER_USER,
};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{PK, SK};
use crate::model::timestamp::Timestamp;
use crate::ops::orgs::access::require;
use crate::ops::orgs::members::Actor;
use crate::ops::orgs::view::{Invitation, NewInvitation, Org};
use crate::ops::orgs::writes;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    key_prefix, number_value, query, read_consistent, string_value, transact, Transaction,
};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};

/// Most open (unexpired) invitations an organization has at once (409 `invitation_limit`
/// past it). Far above an onboarding wave, and small enough that every open invitation fits
/// one Query page (200 items of about 300 bytes, 60 KB) for the count [`invite`] makes and
/// the revocation of a removed member's invitations, and two pages of the list.
pub const MAX_OPEN_INVITATIONS: u32 = 200;

/// Invitations per page of `GET /orgs/{orgId}/invitations`.
pub const INVITATIONS_PAGE: i32 = 100;

/// What an invitation gives: a role below owner, for a number of days.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvitationTerms {
    role: Role,
    days: u32,
}

impl InvitationTerms {
    /// Validates the terms: `role` viewer, operator or admin (an organization has one owner,
    /// handed over to a member, never invited), `days` 1..=[`MAX_INVITATION_DAYS`]
    /// (default [`DEFAULT_INVITATION_DAYS`]).
    pub fn new(role: Role, days: Option<u64>) -> Result<Self, ValidationError> {
        if role == Role::Owner {
            return Err(ValidationError::new(
                "role",
                "an invitation gives viewer, operator or admin; hand ownership over to a member instead",
            ));
        }
        let days = match days {
            None => DEFAULT_INVITATION_DAYS,
            Some(d) if (1..=u64::from(MAX_INVITATION_DAYS)).contains(&d) => d as u32,
            Some(_) => {
                return Err(ValidationError::new(
                    "expiresInDays",
                    format!("must be a whole number of days from 1 to {MAX_INVITATION_DAYS}"),
                ))
            }
        };
        Ok(Self { role, days })
    }
}

/// AP-O9, implemented by [`invite`].
pub const INVITE: AccessPattern = AccessPattern {
    id: PatternId::Invite,
    description: "invite someone into an organization with a role (a one-time code)",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query, Operation::PutItem],
    index: None,
    key_condition: "PK = ORG#{orgId}, SK begins_with INVITATION# (count of the open ones); put ORG#{orgId}/INVITATION#{invitationId}",
    // The count is one page: the open invitations are capped, and expired ones live only
    // until TTL removes them.
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /orgs/{orgId}/invitations"),
    implemented_by: implemented_by!(invite),
};

/// AP-O9: a new invitation into `org` on `terms`; nobody invites above their own role, and
/// an organization has at most [`MAX_OPEN_INVITATIONS`] open (409 `invitation_limit`). The
/// count is read before the put: admins inviting at the same instant can pass it together,
/// by as many as they are (the limit bounds what a list shows and a revocation reads, not a
/// right).
pub async fn invite(
    table: &FleetTable,
    org: &OrgId,
    actor: &Actor,
    terms: InvitationTerms,
) -> Result<NewInvitation, FleetError> {
    require(actor.role, maker_role(terms.role))?;
    if open_invitations(table, org).await? >= MAX_OPEN_INVITATIONS {
        return Err(FleetError::Conflict {
            code: "invitation_limit",
            message: format!(
                "an organization has at most {MAX_OPEN_INVITATIONS} open invitations: revoke some first"
            ),
        });
    }
    let code = InvitationCode::generate(org);
    let created_at = Timestamp::now();
    let expires_at = created_at.plus_seconds(i64::from(terms.days) * 86_400);
    let item = InvitationItem {
        org_id: org.clone(),
        invitation_id: code.invitation_id(),
        role: terms.role,
        created_by: actor.user.clone(),
        created_at,
        expires_at,
        ttl: expires_at.epoch_seconds(),
    };
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(NewInvitation {
        invitation: Invitation::from(&item),
        code: code.reveal(),
    })
}

/// AP-O10, implemented by [`list_invitations`].
pub const ORG_INVITATIONS: AccessPattern = AccessPattern {
    id: PatternId::OrgInvitations,
    description: "an organization's open invitations, a page",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = ORG#{orgId}, SK begins_with INVITATION#, expiresAt > now",
    budget: RequestBudget::PerPage(1),
    max_read_units: None,
    route: Some("GET /orgs/{orgId}/invitations"),
    implemented_by: implemented_by!(list_invitations),
};

/// AP-O10: one page of `org`'s unexpired invitations, by id (TTL deletes late, so expired ones
/// are filtered out: a page can hold fewer than [`INVITATIONS_PAGE`] and still have a next).
pub async fn list_invitations(
    table: &FleetTable,
    org: &OrgId,
    cursor: Option<&str>,
) -> Result<Page<Invitation>, FleetError> {
    let pk = org_pk(org);
    let start = cursor::resume(
        PatternId::OrgInvitations,
        cursor,
        &[(PK, &pk)],
        &[(SK, INVITATION_PREFIX)],
    )?;
    let (items, next) = query(
        key_prefix(
            table,
            pk.clone(),
            INVITATION_PREFIX,
            Expressions::builder().condition(unexpired()),
        )
        .limit(INVITATIONS_PAGE)
        .set_exclusive_start_key(start),
    )
    .await?;
    let invitations = items
        .into_iter()
        .map(|item| InvitationItem::from_item(item).map(|i| Invitation::from(&i)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page {
        items: invitations,
        cursor: cursor::after(PatternId::OrgInvitations, next.as_ref()),
    })
}

/// The filter of invitations that still admit: `expiresAt` after now.
fn unexpired() -> Condition {
    Condition::above(
        InvitationItem::EXPIRES_AT,
        string_value(Timestamp::now().to_string()),
    )
}

/// The least role that may make an invitation giving `role` (an admin at least: viewers and
/// operators invite nobody).
fn maker_role(role: Role) -> Role {
    role.max(Role::Admin)
}

/// How many of `org`'s invitations are open (a consistent count, every page).
async fn open_invitations(table: &FleetTable, org: &OrgId) -> Result<u32, FleetError> {
    let mut count = 0;
    let mut start = None;
    loop {
        let out = key_prefix(
            table,
            org_pk(org),
            INVITATION_PREFIX,
            Expressions::builder().condition(unexpired()),
        )
        .select(Select::Count)
        .consistent_read(true)
        .set_exclusive_start_key(start)
        .send()
        .await
        .map_err(sdk_error)?;
        count += u32::try_from(out.count).unwrap_or(0);
        match out.last_evaluated_key {
            Some(next) => start = Some(next),
            None => return Ok(count),
        }
    }
}

/// AP-O11, implemented by [`revoke_invitation`].
pub const REVOKE_INVITATION: AccessPattern = AccessPattern {
    id: PatternId::RevokeInvitation,
    description: "revoke an invitation",
    frequency: Frequency::Analytics,
    operations: &[Operation::DeleteItem],
    index: None,
    key_condition: "delete ORG#{orgId}/INVITATION#{invitationId}",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("DELETE /orgs/{orgId}/invitations/{invitationId}"),
    implemented_by: implemented_by!(revoke_invitation),
};

/// AP-O11: revokes invitation `id` of `org` (404 when there is none).
pub async fn revoke_invitation(
    table: &FleetTable,
    org: &OrgId,
    id: &InvitationId,
) -> Result<(), FleetError> {
    let out = table
        .client
        .delete_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Invitation {
                org: org.clone(),
                invitation: id.clone(),
            }
            .attributes(),
        ))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
        .send()
        .await
        .map_err(sdk_error)?;
    match out.attributes {
        Some(old) if !old.is_empty() => Ok(()),
        _ => Err(FleetError::NotFound("invitation")),
    }
}

/// AP-O12, implemented by [`accept_invitation`].
pub const ACCEPT_INVITATION: AccessPattern = AccessPattern {
    id: PatternId::AcceptInvitation,
    description: "accept an invitation: the caller joins with its role",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::GetItem,
        Operation::Query,
        Operation::TransactWriteItems,
    ],
    index: None,
    key_condition: "ORG#{orgId}/INVITATION#{invitationId}; PK = MEMBER#{userId} (count); delete it, put ORG#{orgId}/MEMBER#{userId} and MEMBER#{userId}/ORG#{orgId}, ORG#{orgId}/ORG memberCount + 1, check MEMBER#{createdBy}/ORG#{orgId} role; ORG#{orgId}/ORG",
    budget: RequestBudget::Fixed(4),
    max_read_units: None,
    route: Some("POST /invitations/{code}/accept"),
    implemented_by: implemented_by!(accept_invitation),
};

/// AP-O12: `user` accepts the invitation `code` (as its text in the path): they join its
/// organization with its role, and the code admits nobody else. An unknown, used, revoked,
/// expired or malformed code is the same 404, and so is one whose maker no longer holds a
/// role that may make it (removed, or lowered: checked in the joining transaction) and one of
/// an organization that is gone. A member already is a 409 `already_member`, a person in
/// [`MAX_ORGS_PER_USER`] organizations a 409 `org_limit`, a full organization a 409
/// `member_limit`. `email` is shown to the other members: give it only when verified.
pub async fn accept_invitation(
    table: &FleetTable,
    user: &UserId,
    email: Option<String>,
    code: &str,
) -> Result<Org, FleetError> {
    let not_found = || FleetError::NotFound("invitation");
    let code = InvitationCode::parse(code).ok_or_else(not_found)?;
    let org = code.org().clone();
    let key = ItemKey::Invitation {
        org: org.clone(),
        invitation: code.invitation_id(),
    };
    let invitation: InvitationItem = read_consistent(table, &key).await?.ok_or_else(not_found)?;
    let now = Timestamp::now();
    if invitation.expires_at <= now {
        return Err(not_found());
    }
    // As creating one does: counted before the transaction, so two acceptances at the same
    // instant can pass it together (by as many as they are).
    if memberships(table, user).await? >= MAX_ORGS_PER_USER {
        return Err(FleetError::Conflict {
            code: "org_limit",
            message: format!("a person belongs to at most {MAX_ORGS_PER_USER} organizations"),
        });
    }
    let member = OrgMemberItem {
        org_id: org.clone(),
        user_id: user.clone(),
        role: invitation.role,
        joined_at: now,
        email,
    };
    let membership = MembershipItem {
        user_id: user.clone(),
        org_id: org.clone(),
        role: invitation.role,
        joined_at: now,
    };
    let organization_key = ItemKey::Organization { org: org.clone() };
    let actions = vec![
        writes::delete(
            table,
            &key,
            Some(Condition::above(
                InvitationItem::EXPIRES_AT,
                string_value(now.to_string()),
            )),
        )?,
        writes::put(table, &member, Some(Condition::absent(PK)))?,
        writes::put(table, &membership, Some(Condition::absent(PK)))?,
        writes::update(
            table,
            &organization_key,
            Update::new().increment(OrganizationItem::MEMBER_COUNT, number_value(1)),
            crate::model::entities::organization::admits().and(Condition::below(
                OrganizationItem::MEMBER_COUNT,
                number_value(MAX_MEMBERS_PER_ORG),
            )),
        )?,
        // The fence: the maker still holds a role that may make this invitation.
        writes::check(
            table,
            &ItemKey::Membership {
                member: invitation.created_by.clone(),
                org: org.clone(),
            },
            may_make(invitation.role),
        )?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => {}
        Transaction::Cancelled(reasons) => {
            let failed = |slot: usize| {
                reasons
                    .get(slot)
                    .and_then(|r| r.code())
                    .is_some_and(|c| c == "ConditionalCheckFailed")
            };
            return Err(if failed(1) || failed(2) {
                FleetError::Conflict {
                    code: "already_member",
                    message: "you are a member of this organization already".into(),
                }
            } else if failed(3) {
                refused_by_organization(table, &organization_key).await?
            } else {
                not_found()
            });
        }
    }
    let organization: OrganizationItem = read_consistent(table, &organization_key)
        .await?
        .ok_or(FleetError::NotFound("organization"))?;
    Ok(Org::of(&organization, invitation.role))
}

/// The condition on a maker's membership under which their invitation giving `role` admits:
/// their role now is one that may make it.
fn may_make(role: Role) -> Condition {
    let needed = maker_role(role);
    [Role::Admin, Role::Owner]
        .into_iter()
        .filter(|held| held.includes(needed))
        .map(|held| Condition::equals(MembershipItem::ROLE, string_value(held.as_str())))
        .reduce(Condition::or)
        .unwrap_or_else(|| Condition::absent(PK))
}

/// Why the organization item refused a new member: a 409 `member_limit` only when the
/// organization is there and its count is at the limit; anything else its condition refuses
/// (the item gone: a deletion under way or done) is the 404 of an organization that does not
/// exist. One consistent read, on this failure only.
async fn refused_by_organization(
    table: &FleetTable,
    key: &ItemKey,
) -> Result<FleetError, FleetError> {
    let organization: Option<OrganizationItem> = read_consistent(table, key).await?;
    Ok(match organization {
        Some(o) if o.deleting_at.is_none() && o.member_count >= MAX_MEMBERS_PER_ORG => {
            FleetError::Conflict {
                code: "member_limit",
                message: format!("an organization has at most {MAX_MEMBERS_PER_ORG} members"),
            }
        }
        _ => FleetError::NotFound("organization"),
    })
}

/// How many organizations `user` belongs to, up to [`MAX_ORGS_PER_USER`] (a consistent count,
/// one page).
async fn memberships(table: &FleetTable, user: &UserId) -> Result<usize, FleetError> {
    let out = key_prefix(
        table,
        membership_pk(user),
        ORG_PREFIX,
        Expressions::builder(),
    )
    .select(Select::Count)
    .limit(MAX_ORGS_PER_USER as i32)
    .consistent_read(true)
    .send()
    .await
    .map_err(sdk_error)?;
    Ok(usize::try_from(out.count).unwrap_or(0))
}
