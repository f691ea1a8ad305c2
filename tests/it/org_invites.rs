//! Issue 39, items 1 and 6 (organizations), on DynamoDB Local: an invitation admits nobody once
//! its maker's authority is gone; the open invitations are capped and paged; the per-person
//! organization limit holds on accept; `GET /orgs` pages; an unreadable organization path is
//! a 400, never the personal fleet; an invitation of a deleted organization is a 404; a
//! member's e-mail is shown only when verified.

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::invitation::InvitationItem;
use shared::model::entities::membership::MembershipItem;
use shared::model::entities::org_member::OrgMemberItem;
use shared::model::entities::organization::OrganizationItem;
use shared::model::entities::ItemKey;
use shared::model::ids::{OrgId, UserId};
use shared::model::org::{InvitationCode, Role, MAX_ORGS_PER_USER};
use shared::model::timestamp::Timestamp;
use shared::ops::orgs::invitations::MAX_OPEN_INVITATIONS;
use shared::FleetTable;

const OWNER: &str = "inv-test-owner";
const ADMIN: &str = "inv-test-admin";
const NEWCOMER: &str = "inv-test-newcomer";
const OTHER: &str = "inv-test-other";

async fn create_org(table: &FleetTable, owner: &str) -> String {
    let a = device_updates(
        table,
        ApiRequest::post("/orgs")
            .caller(owner)
            .json(json!({ "name": "Acme" })),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["org"]["orgId"].as_str().unwrap().to_string()
}

async fn invite(table: &FleetTable, org: &str, by: &str, role: &str) -> Answer {
    device_updates(
        table,
        ApiRequest::post(&format!("/orgs/{org}/invitations"))
            .caller(by)
            .json(json!({ "role": role })),
    )
    .await
}

async fn code_of(table: &FleetTable, org: &str, by: &str, role: &str) -> String {
    let a = invite(table, org, by, role).await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["invitation"]["code"].as_str().unwrap().to_string()
}

async fn accept(table: &FleetTable, code: &str, by: &str) -> Answer {
    device_updates(
        table,
        ApiRequest::post(&format!("/invitations/{code}/accept")).caller(by),
    )
    .await
}

async fn set_role(table: &FleetTable, org: &str, by: &str, member: &str, role: &str) -> Answer {
    device_updates(
        table,
        ApiRequest::patch(&format!("/orgs/{org}/members/{member}"))
            .caller(by)
            .json(json!({ "role": role })),
    )
    .await
}

async fn remove(table: &FleetTable, org: &str, by: &str, member: &str) -> Answer {
    device_updates(
        table,
        ApiRequest::delete(&format!("/orgs/{org}/members/{member}")).caller(by),
    )
    .await
}

/// Every open invitation `by` sees, page by page: (the ids, the number of pages).
async fn all_invitations(table: &FleetTable, org: &str, by: &str) -> (Vec<Value>, usize) {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut request = ApiRequest::get(&format!("/orgs/{org}/invitations")).caller(by);
        if let Some(c) = &cursor {
            request = request.query("cursor", c);
        }
        let a = dashboard(table, request).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        // The caller's role (AP-O13) and one Query (AP-O10), whatever the page.
        assert_eq!(a.used.requests(), 2, "{:?}", a.used);
        pages += 1;
        all.extend(a.body["invitations"].as_array().unwrap().iter().cloned());
        match a.body["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (all, pages),
        }
        assert!(pages < 50, "the invitation pages never end");
    }
}

async fn is_member(table: &FleetTable, org: &str, user: &str) -> bool {
    item(
        table,
        &ItemKey::Membership {
            member: UserId::parse(user).unwrap(),
            org: OrgId::parse(org).unwrap(),
        },
    )
    .await
    .is_some()
}

/// An invitation by `maker` written directly (as one left behind by a revocation that was
/// interrupted, or made before it was there), and its code.
async fn seed_invitation(
    table: &FleetTable,
    org: &str,
    maker: &str,
    role: Role,
    expires_in: i64,
) -> String {
    let org = OrgId::parse(org).unwrap();
    let code = InvitationCode::generate(&org);
    let now = Timestamp::now();
    let expires_at = now.plus_seconds(expires_in);
    put_entity(
        table,
        &InvitationItem {
            org_id: org,
            invitation_id: code.invitation_id(),
            role,
            created_by: UserId::parse(maker).unwrap(),
            created_at: now,
            expires_at,
            ttl: expires_at.epoch_seconds(),
        },
    )
    .await;
    code.reveal()
}

/// `org` with `owner`, written directly, and `member`'s membership of it.
async fn seed_membership(table: &FleetTable, org: &OrgId, member: &str) {
    let user = UserId::parse(member).unwrap();
    let now = Timestamp::now();
    put_entity(
        table,
        &OrganizationItem {
            org_id: org.clone(),
            name: "Seeded".into(),
            owner: user.clone(),
            created_by: user.clone(),
            created_at: now,
            member_count: 1,
            deleting_at: None,
        },
    )
    .await;
    put_entity(
        table,
        &OrgMemberItem {
            org_id: org.clone(),
            user_id: user.clone(),
            role: Role::Owner,
            joined_at: now,
            email: None,
        },
    )
    .await;
    put_entity(
        table,
        &MembershipItem {
            user_id: user,
            org_id: org.clone(),
            role: Role::Owner,
            joined_at: now,
        },
    )
    .await;
}

/// An admin who mints invitations and is then removed gets nobody in: the invitations are
/// revoked with the removal, and one left behind (a revocation interrupted) admits nobody
/// either, since accepting checks the maker's current role.
#[tokio::test]
async fn an_admin_removed_after_minting_invitations_gets_nobody_in() {
    let table = fresh_table().await;
    let org = create_org(&table, OWNER).await;
    let code = code_of(&table, &org, OWNER, "admin").await;
    assert_eq!(accept(&table, &code, ADMIN).await.status, 200);
    let minted = [
        code_of(&table, &org, ADMIN, "admin").await,
        code_of(&table, &org, ADMIN, "viewer").await,
    ];
    let owners = code_of(&table, &org, OWNER, "viewer").await;
    let invited = invite(&table, &org, OWNER, "viewer").await;
    // The owner's role (AP-O13); AP-O9: the count of the open ones and the put.
    assert_eq!(invited.used.requests(), 3, "{:?}", invited.used);

    let removed = remove(&table, &org, OWNER, ADMIN).await;
    assert_eq!(removed.status, 204, "{:?}", removed.body);
    // The owner's role (AP-O13); AP-O8: the member read, the transaction, the Query of the
    // admin's invitations and one BatchWriteItem deleting both.
    assert_eq!(removed.used.requests(), 5, "{:?}", removed.used);
    // Left behind by an interrupted revocation.
    let leftover = seed_invitation(&table, &org, ADMIN, Role::Admin, 86_400).await;

    let (open, _) = all_invitations(&table, &org, OWNER).await;
    let leftover_id = InvitationCode::parse(&leftover)
        .unwrap()
        .invitation_id()
        .to_string();
    let by_admin: Vec<&Value> = open.iter().filter(|i| i["createdBy"] == ADMIN).collect();
    assert!(
        by_admin.len() == 1 && by_admin[0]["invitationId"] == leftover_id.as_str(),
        "the removed admin's invitations are revoked with them, all but the one seeded after: {open:?}"
    );
    for code in minted.iter().chain([&leftover]) {
        let a = accept(&table, code, NEWCOMER).await;
        assert_eq!(
            (a.status, a.error_code()),
            (404, "not_found"),
            "a removed admin's invitation admitted someone: {:?}",
            a.body
        );
        assert!(!is_member(&table, &org, NEWCOMER).await);
    }
    // The owner's own invitation still admits: AP-O12's read, count, transaction and read.
    let joined = accept(&table, &owners, NEWCOMER).await;
    assert_eq!(joined.status, 200, "{:?}", joined.body);
    assert_eq!(joined.used.requests(), 4, "{:?}", joined.used);
}

/// An admin lowered to viewer after minting invitations gets nobody in at any role: a viewer
/// cannot invite, so what they made is revoked, and a leftover is refused at accept.
#[tokio::test]
async fn an_admin_lowered_after_minting_invitations_gets_nobody_in() {
    let table = fresh_table().await;
    let org = create_org(&table, OWNER).await;
    let code = code_of(&table, &org, OWNER, "admin").await;
    assert_eq!(accept(&table, &code, ADMIN).await.status, 200);
    let minted = code_of(&table, &org, ADMIN, "admin").await;

    let lowered = set_role(&table, &org, OWNER, ADMIN, "viewer").await;
    assert_eq!(lowered.status, 200, "{:?}", lowered.body);
    let leftover = seed_invitation(&table, &org, ADMIN, Role::Operator, 86_400).await;

    for code in [&minted, &leftover] {
        let a = accept(&table, code, NEWCOMER).await;
        assert_eq!(
            (a.status, a.error_code()),
            (404, "not_found"),
            "a lowered admin's invitation admitted someone: {:?}",
            a.body
        );
        assert!(!is_member(&table, &org, NEWCOMER).await);
    }
    let (open, _) = all_invitations(&table, &org, OWNER).await;
    assert_eq!(
        open.len(),
        1,
        "only the leftover is open (the accept refused it but does not consume it): {open:?}"
    );

    // Raised again, they invite again (a new invitation, made with the role they hold now).
    assert_eq!(
        set_role(&table, &org, OWNER, ADMIN, "admin").await.status,
        200
    );
    let again = code_of(&table, &org, ADMIN, "operator").await;
    assert_eq!(accept(&table, &again, NEWCOMER).await.status, 200);
}

/// The open invitations are capped (409 naming the limit, nothing written) and paged: the
/// owner sees every open one (expired ones left out, however many) and revokes them all.
#[tokio::test]
async fn the_owner_pages_through_every_open_invitation_and_revokes_them() {
    let table = fresh_table().await;
    let org = create_org(&table, OWNER).await;
    // Expired ones the TTL has not removed yet: neither listed nor counted.
    for _ in 0..60 {
        seed_invitation(&table, &org, OWNER, Role::Viewer, -60).await;
    }
    for _ in 0..MAX_OPEN_INVITATIONS {
        assert_eq!(invite(&table, &org, OWNER, "viewer").await.status, 201);
    }
    let before = table_contents(&table).await;
    let over = invite(&table, &org, OWNER, "viewer").await;
    assert_eq!(
        (over.status, over.error_code()),
        (409, "invitation_limit"),
        "{:?}",
        over.body
    );
    assert!(
        over.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&MAX_OPEN_INVITATIONS.to_string()),
        "the 409 names the limit: {:?}",
        over.body
    );
    assert_eq!(
        table_contents(&table).await,
        before,
        "the 409 wrote nothing"
    );

    let (open, pages) = all_invitations(&table, &org, OWNER).await;
    assert_eq!(open.len(), MAX_OPEN_INVITATIONS as usize);
    assert!(pages > 1, "more than one page: {pages}");
    let mut ids: Vec<&str> = open
        .iter()
        .map(|i| i["invitationId"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        MAX_OPEN_INVITATIONS as usize,
        "no invitation twice"
    );
    for id in &ids {
        let a = device_updates(
            &table,
            ApiRequest::delete(&format!("/orgs/{org}/invitations/{id}")).caller(OWNER),
        )
        .await;
        assert_eq!(a.status, 204, "{:?}", a.body);
    }
    let (open, pages) = all_invitations(&table, &org, OWNER).await;
    assert_eq!((open.len(), pages), (0, 1));
    // Room again.
    assert_eq!(invite(&table, &org, OWNER, "viewer").await.status, 201);
}

/// A person in [`MAX_ORGS_PER_USER`] organizations cannot join one more by accepting (409
/// `org_limit`, nothing written), as they cannot create one.
#[tokio::test]
async fn accepting_beyond_the_per_person_org_limit_is_refused() {
    let table = fresh_table().await;
    let org = create_org(&table, OWNER).await;
    for i in 0..MAX_ORGS_PER_USER {
        seed_membership(
            &table,
            &OrgId::parse(format!("o{:020x}", 0x5_0000 + i)).unwrap(),
            OTHER,
        )
        .await;
    }
    let code = code_of(&table, &org, OWNER, "viewer").await;
    let before = table_contents(&table).await;
    let a = accept(&table, &code, OTHER).await;
    assert_eq!(
        (a.status, a.error_code()),
        (409, "org_limit"),
        "{:?}",
        a.body
    );
    assert_eq!(
        table_contents(&table).await,
        before,
        "the 409 wrote nothing"
    );
}

/// `GET /orgs` pages: a person in more organizations than one page (joined before the limit
/// held at accept) sees every one, each once.
#[tokio::test]
async fn get_orgs_pages_past_the_first_hundred() {
    let table = fresh_table().await;
    let count = MAX_ORGS_PER_USER + 1;
    for i in 0..count {
        seed_membership(
            &table,
            &OrgId::parse(format!("o{:020x}", 0x6_0000 + i)).unwrap(),
            OTHER,
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut request = ApiRequest::get("/orgs").caller(OTHER);
        if let Some(c) = &cursor {
            request = request.query("cursor", c);
        }
        let a = dashboard(&table, request).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        pages += 1;
        for org in a.body["orgs"].as_array().unwrap() {
            seen.push(org["orgId"].as_str().unwrap().to_string());
        }
        match a.body["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(pages < 10, "the pages never end");
    }
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen.len(),
        count,
        "every organization, once ({pages} pages)"
    );
    // A cursor of another pattern is a 400.
    let a = dashboard(
        &table,
        ApiRequest::get("/orgs")
            .caller(OTHER)
            .query("cursor", "eyJwIjoiQVAtMDEiLCJrIjpbbnVsbF19"),
    )
    .await;
    assert_eq!((a.status, a.error_field()), (400, "cursor"), "{:?}", a.body);
}

/// An organization path whose id cannot be read (not UTF-8 once decoded) is a 400: the
/// request never falls back to the caller's personal fleet. Behind API Gateway the path is
/// rebuilt from its (UTF-8) parameters, so this is reached where the URI is routed as it is:
/// a route key without a path template, the dev server.
#[tokio::test]
async fn an_unreadable_organization_path_is_a_400_not_the_personal_fleet() {
    let table = fresh_table().await;
    register_device(&table, OWNER, "personal-1").await;
    let read = dashboard(
        &table,
        ApiRequest::new("GET", "/orgs/%FF/devices").caller(OWNER),
    )
    .await;
    assert_eq!(
        (read.status, read.error_field()),
        (400, "path"),
        "{:?}",
        read.body
    );
    let before = table_contents(&table).await;
    let write = device_updates(
        &table,
        ApiRequest::new("POST", "/orgs/%FF/devices")
            .caller(OWNER)
            .json(json!({"deviceId": "stray-1", "name": "Stray", "type": "thermostat"})),
    )
    .await;
    assert_eq!(
        (write.status, write.error_field()),
        (400, "path"),
        "{:?}",
        write.body
    );
    assert_eq!(table_contents(&table).await, before, "nothing written");
}

/// Accepting an invitation of an organization that is gone (a deletion interrupted after
/// the organization item, before this invitation) is the 404 of an organization that does
/// not exist, not a 409 `member_limit`; nobody joins.
#[tokio::test]
async fn accepting_an_invitation_of_a_deleted_organization_is_a_404() {
    let table = fresh_table().await;
    let org = create_org(&table, OWNER).await;
    let code = code_of(&table, &org, OWNER, "viewer").await;
    table
        .client
        .delete_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Organization {
                org: OrgId::parse(&org).unwrap(),
            }
            .attributes(),
        ))
        .send()
        .await
        .unwrap();
    let before = table_contents(&table).await;
    let a = accept(&table, &code, NEWCOMER).await;
    assert_eq!(
        (a.status, a.error_code()),
        (404, "not_found"),
        "{:?}",
        a.body
    );
    assert_eq!(table_contents(&table).await, before, "nobody joined");
}

/// A member's e-mail is shown to the other members only when the identity token says it is
/// verified (`email_verified`); an unverified claim is not shown.
#[tokio::test]
async fn a_members_email_is_shown_only_when_verified() {
    let table = fresh_table().await;
    let org = create_org(&table, OWNER).await;
    let first = code_of(&table, &org, OWNER, "viewer").await;
    let second = code_of(&table, &org, OWNER, "viewer").await;
    let unverified = device_updates(
        &table,
        ApiRequest::post(&format!("/invitations/{first}/accept"))
            .caller(NEWCOMER)
            .claim("email", "ceo@victim.example")
            .claim("email_verified", "false"),
    )
    .await;
    assert_eq!(unverified.status, 200);
    let verified = device_updates(
        &table,
        ApiRequest::post(&format!("/invitations/{second}/accept"))
            .caller(OTHER)
            .claim("email", "other@example.com")
            .claim("email_verified", "true"),
    )
    .await;
    assert_eq!(verified.status, 200);
    let members = dashboard(
        &table,
        ApiRequest::get(&format!("/orgs/{org}/members")).caller(OWNER),
    )
    .await;
    let email_of = |user: &str| {
        members.body["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["userId"] == user)
            .map(|m| m["email"].clone())
            .unwrap()
    };
    assert_eq!(
        email_of(NEWCOMER),
        Value::Null,
        "an unverified e-mail is not shown to others"
    );
    assert_eq!(email_of(OTHER), "other@example.com");
}
