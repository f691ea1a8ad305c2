//! Organizations, members and invitations as the API answers them.

use serde::Serialize;

use crate::model::entities::invitation::InvitationItem;
use crate::model::entities::org_member::OrgMemberItem;
use crate::model::entities::organization::OrganizationItem;
use crate::model::org::Role;

/// An organization as one of its members sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Org {
    /// The organization.
    pub org_id: String,
    /// Display name.
    pub name: String,
    /// The caller's role in it.
    pub role: Role,
    /// Members, owner included.
    pub member_count: u64,
    /// Creation.
    pub created_at: String,
}

impl Org {
    /// `item` as a member with `role` sees it.
    pub fn of(item: &OrganizationItem, role: Role) -> Self {
        Self {
            org_id: item.org_id.to_string(),
            name: item.name.clone(),
            role,
            member_count: item.member_count,
            created_at: item.created_at.to_string(),
        }
    }
}

/// A member of an organization.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// The member's user id.
    pub user_id: String,
    /// Their role.
    pub role: Role,
    /// When they joined.
    pub joined_at: String,
    /// Their e-mail, when their identity token carried one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

impl From<&OrgMemberItem> for Member {
    fn from(item: &OrgMemberItem) -> Self {
        Self {
            user_id: item.user_id.to_string(),
            role: item.role,
            joined_at: item.joined_at.to_string(),
            email: item.email.clone(),
        }
    }
}

/// An open invitation (never its code, which only its creator was shown).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Invitation {
    /// Its id (a hash of the code's secret): what revoking names.
    pub invitation_id: String,
    /// The role it gives.
    pub role: Role,
    /// Who invited.
    pub created_by: String,
    /// When.
    pub created_at: String,
    /// After this it admits nobody.
    pub expires_at: String,
}

impl From<&InvitationItem> for Invitation {
    fn from(item: &InvitationItem) -> Self {
        Self {
            invitation_id: item.invitation_id.to_string(),
            role: item.role,
            created_by: item.created_by.to_string(),
            created_at: item.created_at.to_string(),
            expires_at: item.expires_at.to_string(),
        }
    }
}

/// A new invitation with the code to hand over: the only time the code is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewInvitation {
    /// The invitation.
    #[serde(flatten)]
    pub invitation: Invitation,
    /// `{orgId}.{secret}`: accept with `POST /invitations/{code}/accept`.
    pub code: String,
}
