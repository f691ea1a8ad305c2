//! Organizations: the roles of their members and the codes that invite people in. No I/O.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use strum::{EnumIter, EnumString, IntoStaticStr};

use crate::model::error::ValidationError;
use crate::model::ids::OrgId;

/// Most organizations one person may belong to: `GET /orgs` is one page.
pub const MAX_ORGS_PER_USER: usize = 100;

/// Most members of one organization. Every member's console polls the fleet's first dashboard
/// page, which is on the organization's owner partition; when all members come at once (an
/// incident) those reads reach that partition's 3,000 RCU/s at about 2,400 members at the
/// console's 5 s poll (`make simulate`, docs/key-distribution.md). The limit keeps the whole team
/// under it with a margin; a larger team needs that page served from elsewhere first.
pub const MAX_MEMBERS_PER_ORG: u64 = 2_000;

/// Days an invitation stays valid when the inviter does not say.
pub const DEFAULT_INVITATION_DAYS: u32 = 7;

/// Longest an invitation may stay valid, in days.
pub const MAX_INVITATION_DAYS: u32 = 30;

/// Longest organization name, in characters.
pub const MAX_ORG_NAME: usize = 100;

/// A member's role; each includes the rights of the ones before it (the derived order is the
/// order of rights: `Viewer < Operator < Admin < Owner`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    EnumIter,
    EnumString,
    IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Role {
    /// Reads the dashboard, devices, events, summaries, rules, alarms and members.
    Viewer,
    /// Also acknowledges alarms, sets desired state and sends commands.
    Operator,
    /// Also registers, changes, moves and deletes devices, rotates tokens, edits rules and
    /// retention, starts rollouts, renames the organization and manages members and invitations.
    Admin,
    /// Also deletes the organization and hands ownership over; there is always exactly one.
    Owner,
}

impl Role {
    /// The role's name as the API spells it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Validates a role from a request body.
    pub fn parse_field(field: &str, value: &str) -> Result<Self, ValidationError> {
        value.parse().map_err(|_| {
            ValidationError::new(field, "must be one of viewer, operator, admin, owner")
        })
    }

    /// Whether this role includes `needed`'s rights.
    pub fn includes(self, needed: Role) -> bool {
        self >= needed
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An invitation's id: the first 32 hex digits of SHA-256 over its secret. Only the id is
/// stored, so the table never holds what admits someone; the code is shown once.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct InvitationId(String);

impl InvitationId {
    /// Validates an id from a path or a stored item: 32 lowercase hex digits.
    pub fn parse(value: &str) -> Result<Self, ValidationError> {
        if is_lower_hex(value, 32) {
            Ok(Self(value.to_string()))
        } else {
            Err(ValidationError::new("invitationId", "not an invitation id"))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InvitationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for InvitationId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

fn is_lower_hex(value: &str, len: usize) -> bool {
    value.len() == len
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What an invitee presents: `{orgId}.{secret}`, the secret 32 lowercase hex digits (128
/// random bits). The organization is in the code so accepting it reads one known key.
#[derive(Clone, PartialEq, Eq)]
pub struct InvitationCode {
    org: OrgId,
    secret: String,
}

impl fmt::Debug for InvitationCode {
    // The secret admits its holder: never in a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InvitationCode({}.…)", self.org)
    }
}

impl InvitationCode {
    /// A new code for `org`.
    pub fn generate(org: &OrgId) -> Self {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the OS has a random source");
        Self {
            org: org.clone(),
            secret: bytes.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// Validates a code from a path: anything else is the same 404 as an unknown code (a
    /// malformed code names nothing), so the caller learns nothing from its shape.
    pub fn parse(value: &str) -> Option<Self> {
        let (org, secret) = value.rsplit_once('.')?;
        if !is_lower_hex(secret, 32) {
            return None;
        }
        Some(Self {
            org: OrgId::parse(org).ok()?,
            secret: secret.to_string(),
        })
    }

    /// The organization it admits to.
    pub fn org(&self) -> &OrgId {
        &self.org
    }

    /// The id its invitation is stored under.
    pub fn invitation_id(&self) -> InvitationId {
        let digest = Sha256::digest(self.secret.as_bytes());
        InvitationId(
            digest[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        )
    }

    /// The code as the invitee is given it.
    pub fn reveal(&self) -> String {
        format!("{}.{}", self.org, self.secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_include_the_ones_before_them() {
        assert!(Role::Owner.includes(Role::Admin));
        assert!(Role::Admin.includes(Role::Operator));
        assert!(Role::Operator.includes(Role::Viewer));
        assert!(Role::Viewer.includes(Role::Viewer));
        assert!(!Role::Viewer.includes(Role::Operator));
        assert!(!Role::Admin.includes(Role::Owner));
        assert_eq!(Role::parse_field("role", "admin").unwrap(), Role::Admin);
        assert_eq!(
            serde_json::to_string(&Role::Operator).unwrap(),
            "\"operator\""
        );
        let err = Role::parse_field("role", "Admin").unwrap_err();
        assert_eq!(err.field, "role");
        assert!(Role::parse_field("role", "root").is_err());
    }

    #[test]
    fn a_code_round_trips_and_only_its_hash_names_the_invitation() {
        let org = OrgId::generate();
        let code = InvitationCode::generate(&org);
        let text = code.reveal();
        let parsed = InvitationCode::parse(&text).unwrap();
        assert_eq!(parsed, code);
        assert_eq!(parsed.org(), &org);
        let id = parsed.invitation_id();
        assert_eq!(id.as_str().len(), 32);
        assert!(!text.contains(id.as_str()));
        assert_eq!(InvitationId::parse(id.as_str()).unwrap(), id);
        assert!(!format!("{code:?}").contains(&text[org.as_str().len() + 1..]));
        for bad in [
            "",
            "nodot",
            "o1.short",
            "o#1.0123456789abcdef0123456789abcdef",
            "o1.0123456789ABCDEF0123456789ABCDEF",
        ] {
            assert!(InvitationCode::parse(bad).is_none(), "{bad}");
        }
    }
}
