//! Invitations: a one-time code that admits its holder with a role (AP-O9 to AP-O12). The
//! code is `{orgId}.{secret}`; only a hash of the secret is stored ([`InvitationCode`]), so
//! the table never holds what admits someone and the code is shown once. Accepting needs no
//! lookup of the invitee by e-mail: whoever signs in with the code (Cognito or any JWT issuer)
//! becomes the member.

use crate::model::entities::invitation::{InvitationItem, INVITATION_PREFIX};
use crate::model::entities::membership::MembershipItem;
use crate::model::entities::org_member::OrgMemberItem;
use crate::model::entities::organization::{org_pk, OrganizationItem};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{OrgId, UserId};
use crate::model::org::{
    InvitationCode, InvitationId, Role, DEFAULT_INVITATION_DAYS, MAX_INVITATION_DAYS,
    MAX_MEMBERS_PER_ORG,
};
use crate::model::pattern_id::PatternId;
use crate::model::schema::PK;
use crate::model::timestamp::Timestamp;
use crate::ops::orgs::access::require;
use crate::ops::orgs::members::Actor;
use crate::ops::orgs::view::{Invitation, NewInvitation, Org};
use crate::ops::orgs::writes;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    key_prefix, number_value, query, read_consistent, transact, Transaction,
};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};

/// Most open invitations one organization lists (one page).
pub const MAX_OPEN_INVITATIONS: i32 = 200;

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
    operations: &[Operation::PutItem],
    index: None,
    key_condition: "put ORG#{orgId}/INVITATION#{invitationId}",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("POST /orgs/{orgId}/invitations"),
    implemented_by: implemented_by!(invite),
};

/// AP-O9: a new invitation into `org` on `terms`; nobody invites above their own role.
pub async fn invite(
    table: &FleetTable,
    org: &OrgId,
    actor: &Actor,
    terms: InvitationTerms,
) -> Result<NewInvitation, FleetError> {
    require(actor.role, terms.role.max(Role::Admin))?;
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
    description: "an organization's open invitations",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = ORG#{orgId}, SK begins_with INVITATION#",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("GET /orgs/{orgId}/invitations"),
    implemented_by: implemented_by!(list_invitations),
};

/// AP-O10: `org`'s unexpired invitations (TTL deletes late, so expired ones are left out here).
pub async fn list_invitations(
    table: &FleetTable,
    org: &OrgId,
) -> Result<Vec<Invitation>, FleetError> {
    let (items, _) = query(
        key_prefix(
            table,
            org_pk(org),
            INVITATION_PREFIX,
            Expressions::builder(),
        )
        .limit(MAX_OPEN_INVITATIONS),
    )
    .await?;
    let now = Timestamp::now();
    let mut open = Vec::new();
    for item in items {
        let invitation = InvitationItem::from_item(item)?;
        if invitation.expires_at > now {
            open.push(Invitation::from(&invitation));
        }
    }
    Ok(open)
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
    operations: &[Operation::GetItem, Operation::TransactWriteItems],
    index: None,
    key_condition: "ORG#{orgId}/INVITATION#{invitationId}; delete it, put ORG#{orgId}/MEMBER#{userId} and MEMBER#{userId}/ORG#{orgId}, ORG#{orgId}/ORG memberCount + 1",
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("POST /invitations/{code}/accept"),
    implemented_by: implemented_by!(accept_invitation),
};

/// AP-O12: `user` accepts the invitation `code` (as its text in the path): they join its
/// organization with its role, and the code admits nobody else. An unknown, used, revoked,
/// expired or malformed code is the same 404; a member already is a 409 `already_member`.
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
    let actions = vec![
        writes::delete(
            table,
            &key,
            Some(Condition::above(
                InvitationItem::EXPIRES_AT,
                crate::store::dynamo::string_value(now.to_string()),
            )),
        )?,
        writes::put(table, &member, Some(Condition::absent(PK)))?,
        writes::put(table, &membership, Some(Condition::absent(PK)))?,
        writes::update(
            table,
            &ItemKey::Organization { org: org.clone() },
            Update::new().increment(OrganizationItem::MEMBER_COUNT, number_value(1)),
            crate::model::entities::organization::admits().and(Condition::below(
                OrganizationItem::MEMBER_COUNT,
                number_value(MAX_MEMBERS_PER_ORG),
            )),
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
            } else if failed(3) && organization_admits(table, &org).await? {
                FleetError::Conflict {
                    code: "member_limit",
                    message: format!("an organization has at most {MAX_MEMBERS_PER_ORG} members"),
                }
            } else if failed(3) {
                // Gone, or being deleted: no invitation admits anyone any more.
                FleetError::NotFound("organization")
            } else {
                not_found()
            });
        }
    }
    let organization: OrganizationItem =
        read_consistent(table, &ItemKey::Organization { org: org.clone() })
            .await?
            .ok_or(FleetError::NotFound("organization"))?;
    Ok(Org::of(&organization, invitation.role))
}

/// Whether `org` exists and is not being deleted (read consistently), to tell a full
/// organization from one that admits nobody when an accept's condition on it failed.
async fn organization_admits(table: &FleetTable, org: &OrgId) -> Result<bool, FleetError> {
    let organization: Option<OrganizationItem> =
        read_consistent(table, &ItemKey::Organization { org: org.clone() }).await?;
    Ok(organization.is_some_and(|o| o.deleting_at.is_none()))
}
