//! The cases of organizations (AP-O1 to AP-O13) on the reference organization
//! ([`REF_ORG`](crate::reference::REF_ORG): an owner, an admin, an operator, a viewer, one open
//! invitation, one device), with the fixtures the bench's calls consume.
//!
//! The runs read first (the caller's role, the owner's organizations, the organization, its
//! members and invitations), then change things in an order that leaves the dataset's own
//! members as they were: an invitation made and revoked, a newcomer who accepts one, has
//! their role changed and is removed, a throwaway organization created and deleted. Looking up
//! what a run acts on (an invitation's id, the throwaway's id) is outside the meter.
//!
//! The calls repeat: reads on the reference organization; invitations, acceptances, role
//! changes and removals on the bench organization, whose fixture invitations (one per call, a
//! code derived from the call's number) the calls consume; deletions of fixture organizations
//! without devices, one per call.

use serde_json::json;
use shared::model::entities::invitation::InvitationItem;
use shared::model::entities::membership::MembershipItem;
use shared::model::entities::org_member::OrgMemberItem;
use shared::model::entities::organization::OrganizationItem;
use shared::model::entities::Entity;
use shared::model::ids::{OrgId, UserId};
use shared::model::org::{InvitationCode, Role, DEFAULT_INVITATION_DAYS, MAX_ORGS_PER_USER};
use shared::model::pattern_id::PatternId;
use shared::model::schema::Item;
use shared::model::timestamp::Timestamp;
use shared::ops::orgs::access::member_role;
use shared::ops::orgs::invitations::{
    accept_invitation, invite, list_invitations, revoke_invitation, InvitationTerms,
    MAX_OPEN_INVITATIONS,
};
use shared::ops::orgs::manage::{create_org, delete_org, get_org, my_orgs, rename_org};
use shared::ops::orgs::members::{change_role, list_members, remove_member, Actor};
use shared::ops::pattern::BudgetScale;
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use super::common::{
    every_call, found, one, put_fixtures, read, route, write, PatternCase, FIXTURE_CALLS,
};
use crate::api_event::ApiEvent;
use crate::reference::dataset::{ORG_ADMIN, ORG_OWNER, ORG_VIEWER, REF_ORG, REF_ORG_NAME};

/// MemberRole: the viewer's role, as every `/orgs/{orgId}/...` request reads it.
pub(super) const MEMBER_ROLE: PatternCase = PatternCase {
    id: PatternId::MemberRole,
    workload: "the viewer's role in the organization (read by every /orgs/{orgId}/... request)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let role = member_role(table, &person(ORG_VIEWER)?, &ref_org()?).await?;
            found(role == Some(Role::Viewer), PatternId::MemberRole)
        })
    },
    call: None,
};

/// MyOrgs: the owner's one organization.
pub(super) const MY_ORGS: PatternCase = PatternCase {
    id: PatternId::MyOrgs,
    workload: "the owner's one organization, with their role",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let orgs = my_orgs(table, &person(ORG_OWNER)?, None).await?.items;
            found(
                orgs.len() == 1 && orgs[0].org_id == REF_ORG && orgs[0].role == Role::Owner,
                PatternId::MyOrgs,
            )
        })
    },
    call: read("GET /orgs (the owner's one organization)", |_, _| {
        every_call(ApiEvent::new(route(PatternId::MyOrgs), "/orgs").caller(ORG_OWNER))
    }),
};

/// GetOrg: the organization, as its viewer sees it.
pub(super) const GET_ORG: PatternCase = PatternCase {
    id: PatternId::GetOrg,
    workload: "the organization (4 members), as its viewer sees it",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let org = get_org(table, &ref_org()?, Role::Viewer).await?;
            found(org.member_count == 4, PatternId::GetOrg)
        })
    },
    call: read("GET /orgs/{orgId} (the viewer)", |_, _| {
        every_call(on_ref_org(PatternId::GetOrg, "").caller(ORG_VIEWER))
    }),
};

/// OrgMembers: the organization's 4 members, one page.
pub(super) const ORG_MEMBERS: PatternCase = PatternCase {
    id: PatternId::OrgMembers,
    workload: "the organization's 4 members (one of each role), one page",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let page = list_members(table, &ref_org()?, None).await?;
            found(
                page.items.len() == 4 && page.cursor.is_none(),
                PatternId::OrgMembers,
            )
        })
    },
    call: read("GET /orgs/{orgId}/members (4 members)", |_, _| {
        every_call(on_ref_org(PatternId::OrgMembers, "/members").caller(ORG_VIEWER))
    }),
};

/// OrgInvitations: the organization's one open invitation.
pub(super) const ORG_INVITATIONS: PatternCase = PatternCase {
    id: PatternId::OrgInvitations,
    workload: "the organization's one open invitation",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let open = list_invitations(table, &ref_org()?, None).await?.items;
            found(open.len() == 1, PatternId::OrgInvitations)
        })
    },
    call: read("GET /orgs/{orgId}/invitations (1 open)", |_, _| {
        every_call(on_ref_org(PatternId::OrgInvitations, "/invitations").caller(ORG_ADMIN))
    }),
};

/// Invite: the admin invites a viewer.
pub(super) const INVITE: PatternCase = PatternCase {
    id: PatternId::Invite,
    workload: "the admin invites a viewer (a one-time code)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let terms = InvitationTerms::new(Role::Viewer, None)?;
            invite(table, &ref_org()?, &actor(ORG_ADMIN, Role::Admin)?, terms).await?;
            Ok(())
        })
    },
    call: write("POST /orgs/{orgId}/invitations (a viewer)", 201, |_, _| {
        Box::new(|i| {
            on_org(PatternId::Invite, &inviting_org(i), "/invitations")
                .caller(BENCH_ORG_OWNER)
                .json(&json!({"role": "viewer"}))
                .to_bytes()
        })
    }),
};

/// RevokeInvitation: the admin revokes the invitation AP-O9 made.
pub(super) const REVOKE_INVITATION: PatternCase = PatternCase {
    id: PatternId::RevokeInvitation,
    workload: "the admin revokes an open invitation",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let org = ref_org()?;
            // AP-O9's, told from the seed's open one (the owner's) by its maker.
            let made = RequestMeter::new()
                .scope(list_invitations(table, &org, None))
                .await?
                .items
                .into_iter()
                .find(|i| i.created_by == ORG_ADMIN)
                .ok_or_else(|| FleetError::internal("AP-O9 made no invitation"))?;
            let id = shared::model::org::InvitationId::parse(&made.invitation_id)?;
            revoke_invitation(table, &org, &id).await
        })
    },
    call: write(
        "DELETE /orgs/{orgId}/invitations/{invitationId}",
        204,
        |_, _| {
            Box::new(|i| {
                let id = bench_code(REVOKED, i).invitation_id().to_string();
                on_bench_org(PatternId::RevokeInvitation, &format!("/invitations/{id}"))
                    .caller(BENCH_ORG_OWNER)
                    .param("invitationId", &id)
                    .to_bytes()
            })
        },
    ),
};

/// AcceptInvitation: a newcomer accepts an operator's invitation.
pub(super) const ACCEPT_INVITATION: PatternCase = PatternCase {
    id: PatternId::AcceptInvitation,
    workload: "a newcomer accepts an invitation (joins as operator)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let org = ref_org()?;
            let terms = InvitationTerms::new(Role::Operator, None)?;
            let invitation = RequestMeter::new()
                .scope(invite(table, &org, &actor(ORG_ADMIN, Role::Admin)?, terms))
                .await?;
            let joined = accept_invitation(table, &person(JOINER)?, None, &invitation.code).await?;
            found(joined.role == Role::Operator, PatternId::AcceptInvitation)
        })
    },
    call: write("POST /invitations/{code}/accept", 200, |_, _| {
        Box::new(|i| {
            let code = bench_code(ACCEPTED, i).reveal();
            ApiEvent::new(
                route(PatternId::AcceptInvitation),
                format!("/invitations/{code}/accept"),
            )
            .caller(&bench_joiner(i))
            .param("code", &code)
            .to_bytes()
        })
    }),
};

/// ChangeMemberRole: the admin makes the newcomer a viewer.
pub(super) const CHANGE_MEMBER_ROLE: PatternCase = PatternCase {
    id: PatternId::ChangeMemberRole,
    workload: "the admin changes a member's role (operator to viewer)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let actor = actor(ORG_ADMIN, Role::Admin)?;
            let member =
                change_role(table, &ref_org()?, &actor, &person(JOINER)?, Role::Viewer).await?;
            found(member.role == Role::Viewer, PatternId::ChangeMemberRole)
        })
    },
    call: write(
        "PATCH /orgs/{orgId}/members/{userId} (viewer to operator)",
        200,
        |_, _| {
            Box::new(|i| {
                let member = bench_joiner(i);
                on_bench_org(PatternId::ChangeMemberRole, &format!("/members/{member}"))
                    .caller(BENCH_ORG_OWNER)
                    .param("userId", &member)
                    .json(&json!({"role": "operator"}))
                    .to_bytes()
            })
        },
    ),
};

/// RemoveMember: the admin removes the newcomer.
pub(super) const REMOVE_MEMBER: PatternCase = PatternCase {
    id: PatternId::RemoveMember,
    workload: "the admin removes a member",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let actor = actor(ORG_ADMIN, Role::Admin)?;
            remove_member(table, &ref_org()?, &actor, &person(JOINER)?).await
        })
    },
    call: write("DELETE /orgs/{orgId}/members/{userId}", 204, |_, _| {
        Box::new(|i| {
            let member = bench_joiner(i);
            on_bench_org(PatternId::RemoveMember, &format!("/members/{member}"))
                .caller(BENCH_ORG_OWNER)
                .param("userId", &member)
                .to_bytes()
        })
    }),
};

/// CreateOrg: a person creates an organization (the one AP-O5 deletes).
pub(super) const CREATE_ORG: PatternCase = PatternCase {
    id: PatternId::CreateOrg,
    workload: "a person creates an organization",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let org = create_org(table, &person(FOUNDER)?, None, "Throwaway".into()).await?;
            found(org.role == Role::Owner, PatternId::CreateOrg)
        })
    },
    call: write("POST /orgs", 201, |_, _| {
        Box::new(|i| {
            ApiEvent::new(route(PatternId::CreateOrg), "/orgs")
                .caller(&format!("ref-org-founder-{i}"))
                .json(&json!({"name": format!("Founded {i}")}))
                .to_bytes()
        })
    }),
};

/// RenameOrg: the admin renames the organization.
pub(super) const RENAME_ORG: PatternCase = PatternCase {
    id: PatternId::RenameOrg,
    workload: "the admin renames the organization",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let renamed =
                rename_org(table, &ref_org()?, Role::Admin, "Reference Labs".into()).await?;
            found(renamed.name == "Reference Labs", PatternId::RenameOrg)
        })
    },
    call: write("PATCH /orgs/{orgId}", 200, |_, _| {
        Box::new(|i| {
            let name = ["Reference Labs", REF_ORG_NAME][i % 2];
            on_ref_org(PatternId::RenameOrg, "")
                .caller(ORG_ADMIN)
                .json(&json!({ "name": name }))
                .to_bytes()
        })
    }),
};

/// DeleteOrg: the owner deletes an organization without devices (AP-O1's).
pub(super) const DELETE_ORG: PatternCase = PatternCase {
    id: PatternId::DeleteOrg,
    workload: "the owner deletes an organization without devices (its one member)",
    // Its three items: the organization, its owner's member entry and membership.
    scale: |_| BudgetScale {
        batch_items: 3,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let founder = person(FOUNDER)?;
            let orgs = RequestMeter::new()
                .scope(my_orgs(table, &founder, None))
                .await?
                .items;
            let throwaway = orgs
                .first()
                .ok_or_else(|| FleetError::internal("AP-O1 created no organization"))?;
            // It has no firmware: the image store is never asked.
            let images = crate::moto_server::firmware_images_from_env();
            delete_org(table, &images, &OrgId::parse(&throwaway.org_id)?).await
        })
    },
    call: write(
        "DELETE /orgs/{orgId} (no devices, one member)",
        204,
        |_, _| {
            Box::new(|i| {
                let org = deletable_org(i);
                ApiEvent::new(route(PatternId::DeleteOrg), format!("/orgs/{org}"))
                    .caller(&deletable_org_owner(i))
                    .param("orgId", &org)
                    .to_bytes()
            })
        },
    ),
};

/// The newcomer of the AP-O12, AP-O7 and AP-O8 runs.
const JOINER: &str = "ref-org-joiner";
/// Who creates the organization AP-O5's run deletes.
const FOUNDER: &str = "ref-org-founder";
/// The organization the bench's membership calls change (its owner makes them).
pub(super) const BENCH_ORG: &str = "o00000000000000000002";
/// The bench organization's owner.
pub(super) const BENCH_ORG_OWNER: &str = "ref-bench-org-owner";
/// The fixture invitations of the bench organization: the ones its AP-O12 calls accept, and
/// the ones its AP-O11 calls revoke.
const ACCEPTED: char = 'a';
const REVOKED: char = 'b';

fn ref_org() -> Result<OrgId, FleetError> {
    Ok(OrgId::parse(REF_ORG)?)
}

fn person(id: &str) -> Result<UserId, FleetError> {
    Ok(UserId::parse(id)?)
}

fn actor(id: &str, role: Role) -> Result<Actor, FleetError> {
    Ok(Actor {
        user: person(id)?,
        role,
    })
}

/// A request to the reference organization's route of `id`, at `/orgs/{orgId}{rest}`.
fn on_ref_org(id: PatternId, rest: &str) -> ApiEvent {
    on_org(id, REF_ORG, rest)
}

/// A request to the bench organization's route of `id`, at `/orgs/{orgId}{rest}`.
fn on_bench_org(id: PatternId, rest: &str) -> ApiEvent {
    on_org(id, BENCH_ORG, rest)
}

fn on_org(id: PatternId, org: &str, rest: &str) -> ApiEvent {
    ApiEvent::new(route(id), format!("/orgs/{org}{rest}")).param("orgId", org)
}

/// The bench organization's `i`-th fixture invitation of a `kind` ([`ACCEPTED`], [`REVOKED`]):
/// a code whose secret is the kind and the call's number.
fn bench_code(kind: char, i: usize) -> InvitationCode {
    InvitationCode::parse(&format!("{BENCH_ORG}.{kind}{i:031x}")).expect("a valid code")
}

/// Who accepts the bench organization's `i`-th invitation.
fn bench_joiner(i: usize) -> String {
    format!("ref-bench-joiner-{i}")
}

/// The organization the `i`-th AP-O9 call invites into: a new one every
/// [`INVITATIONS_PER_INVITING_ORG`] calls, so the calls stay under the cap of open invitations
/// (the bench organization holds its fixture invitations, past the cap).
fn inviting_org(i: usize) -> String {
    format!("o{:020x}", 0x2_0000 + i / INVITATIONS_PER_INVITING_ORG)
}

/// AP-O9 calls per inviting organization: half the cap.
const INVITATIONS_PER_INVITING_ORG: usize = MAX_OPEN_INVITATIONS as usize / 2;

/// The `i`-th fixture organization the AP-O5 calls delete.
fn deletable_org(i: usize) -> String {
    format!("o{:020x}", 0x1_0000 + i)
}

/// Its owner: one person per [`MAX_ORGS_PER_USER`] of them.
fn deletable_org_owner(i: usize) -> String {
    format!("ref-org-keeper-{}", i / MAX_ORGS_PER_USER)
}

/// What the organization routes' bench calls consume, written directly (fixtures, not
/// operations): the bench organization with its owner, the organizations the AP-O9 calls
/// invite into (the same owner) and, per call, a device of the owner's
/// own fleet to move into it (registered as any), an invitation to accept
/// and one to revoke; and an organization without devices per call to delete.
pub async fn seed_org_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    let shards = &table.config.shards;
    let now = Timestamp::now();
    let mut items: Vec<Item> = Vec::new();
    let mut org_with_owner = |org: &str, owner: &str| -> Result<(), FleetError> {
        let org_id = OrgId::parse(org)?;
        let owner = person(owner)?;
        items.push(
            OrganizationItem {
                org_id: org_id.clone(),
                name: "Bench".into(),
                owner: owner.clone(),
                created_by: owner.clone(),
                created_at: now,
                member_count: 1,
                deleting_at: None,
            }
            .to_item(shards)?,
        );
        items.push(
            OrgMemberItem {
                org_id: org_id.clone(),
                user_id: owner.clone(),
                role: Role::Owner,
                joined_at: now,
                email: None,
            }
            .to_item(shards)?,
        );
        items.push(
            MembershipItem {
                user_id: owner,
                org_id,
                role: Role::Owner,
                joined_at: now,
            }
            .to_item(shards)?,
        );
        Ok(())
    };
    org_with_owner(BENCH_ORG, BENCH_ORG_OWNER)?;
    for i in (0..FIXTURE_CALLS).step_by(INVITATIONS_PER_INVITING_ORG) {
        org_with_owner(&inviting_org(i), BENCH_ORG_OWNER)?;
    }
    for i in 0..FIXTURE_CALLS {
        org_with_owner(&deletable_org(i), &deletable_org_owner(i))?;
    }
    let expires_at = now.plus_seconds(i64::from(DEFAULT_INVITATION_DAYS) * 86_400);
    for i in 0..FIXTURE_CALLS {
        for kind in [ACCEPTED, REVOKED] {
            items.push(
                InvitationItem {
                    org_id: OrgId::parse(BENCH_ORG)?,
                    invitation_id: bench_code(kind, i).invitation_id(),
                    role: Role::Viewer,
                    created_by: person(BENCH_ORG_OWNER)?,
                    created_at: now,
                    expires_at,
                    ttl: expires_at.epoch_seconds(),
                }
                .to_item(shards)?,
            );
        }
    }
    put_fixtures(table, items).await?;
    let owner = person(BENCH_ORG_OWNER)?;
    for i in 0..FIXTURE_CALLS {
        let registration = shared::ops::devices::register::DeviceRegistration {
            offline_detection: Default::default(),
            report_every_seconds: None,
            device_id: shared::model::ids::DeviceId::parse(movable_device(i))?,
            name: "Movable".into(),
            device_type: shared::model::ids::DeviceType::parse("thermostat")?,
            tags: Vec::new(),
        };
        shared::ops::devices::register::register_device(table, &owner, registration).await?;
    }
    Ok(())
}

/// The device the `i`-th AP-M1 call moves from the bench organization's owner's own fleet
/// into the organization.
pub(super) fn movable_device(i: usize) -> String {
    format!("ref-move-{i:03}")
}
