//! Organizations end to end on DynamoDB Local (issue 33): create, invite and accept, roles
//! refusing with the role they need, a non-member's 404, the device path unchanged for an
//! organization's device, ownership handed over, leaving, and deleting (refused while devices
//! remain). The route-by-role matrix is `org_matrix`.

use std::sync::Arc;

use fleet_tests::*;
use serde_json::{json, Value};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

const ALICE: &str = "org-test-alice";
const BOB: &str = "org-test-bob";
const CAROL: &str = "org-test-carol";

/// A request to `route_key` at `path` with `params`, as API Gateway routes it.
fn to(route_key: &str, path: &str, params: &[(&str, &str)]) -> ApiRequest {
    params
        .iter()
        .fold(ApiRequest::new(route_key, path), |r, (name, value)| {
            r.param(name, value)
        })
}

async fn create_org(table: &FleetTable, owner: &str, name: &str) -> String {
    let a = device_updates(
        table,
        to("POST /orgs", "/orgs", &[])
            .caller(owner)
            .json(json!({ "name": name })),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    assert_eq!(a.body["org"]["role"], "owner");
    assert_eq!(a.body["org"]["memberCount"], 1);
    a.body["org"]["orgId"].as_str().unwrap().to_string()
}

async fn invite(table: &FleetTable, org: &str, by: &str, role: &str) -> Value {
    let path = format!("/orgs/{org}/invitations");
    device_updates(
        table,
        to("POST /orgs/{orgId}/invitations", &path, &[("orgId", org)])
            .caller(by)
            .json(json!({ "role": role })),
    )
    .await
    .body
}

async fn accept(table: &FleetTable, code: &str, by: &str) -> Answer {
    let path = format!("/invitations/{code}/accept");
    device_updates(
        table,
        to("POST /invitations/{code}/accept", &path, &[("code", code)]).caller(by),
    )
    .await
}

/// `caller`'s request to the organization twin `route` (`/devices/{deviceId}`, with
/// `params` besides the organization) of a `/me` route.
fn org_route(method: &str, org: &str, route: &str, params: &[(&str, &str)]) -> ApiRequest {
    let mut path = format!("/orgs/{org}{route}");
    for (name, value) in params {
        path = path.replace(&format!("{{{name}}}"), value);
    }
    let mut all = vec![("orgId", org)];
    all.extend_from_slice(params);
    to(&format!("{method} /orgs/{{orgId}}{route}"), &path, &all)
}

#[tokio::test]
async fn a_team_runs_an_organization_fleet_with_roles() {
    let table = fresh_table().await;
    let org = create_org(&table, ALICE, "Acme Water").await;

    // Bob joins as an operator with a one-time code.
    let invitation = invite(&table, &org, ALICE, "operator").await;
    let code = invitation["invitation"]["code"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(invitation["invitation"]["role"], "operator");
    let joined = accept(&table, &code, BOB).await;
    assert_eq!(joined.status, 200, "{:?}", joined.body);
    assert_eq!(joined.body["org"]["role"], "operator");
    assert_eq!(joined.body["org"]["memberCount"], 2);
    // The code admits nobody else, and Bob is not admitted twice.
    let again = accept(&table, &code, CAROL).await;
    assert_eq!((again.status, again.error_code()), (404, "not_found"));
    let second = invite(&table, &org, ALICE, "viewer").await;
    let twice = accept(&table, second["invitation"]["code"].as_str().unwrap(), BOB).await;
    assert_eq!((twice.status, twice.error_code()), (409, "already_member"));

    // Bob lists his organizations with his role.
    let mine = dashboard(&table, to("GET /orgs", "/orgs", &[]).caller(BOB)).await;
    assert_eq!(mine.status, 200);
    assert_eq!(mine.body["orgs"][0]["orgId"], org.as_str());
    assert_eq!(mine.body["orgs"][0]["role"], "operator");

    // Alice (owner) registers a device in the organization's fleet; its token ingests as any.
    let registered = device_updates(
        &table,
        org_route("POST", &org, "/devices", &[])
            .caller(ALICE)
            .json(json!({"deviceId": "acme-meter-1", "name": "Meter 1", "type": "meter"})),
    )
    .await;
    assert_eq!(registered.status, 201, "{:?}", registered.body);
    let token = registered.body["token"].as_str().unwrap().to_string();
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let sent = ingest(
        &ingestor,
        ingest_request(
            "acme-meter-1",
            &token,
            json!([{"type": "flow", "value": 3.5, "at": ago(60)}]),
        ),
    )
    .await;
    assert_eq!(sent.status, 200, "{:?}", sent.body);

    // Bob, an operator, reads the fleet and its events, but may not register.
    let devices = dashboard(&table, org_route("GET", &org, "/devices", &[]).caller(BOB)).await;
    assert_eq!(devices.status, 200, "{:?}", devices.body);
    assert_eq!(devices.body["devices"][0]["deviceId"], "acme-meter-1");
    let events = dashboard(
        &table,
        org_route(
            "GET",
            &org,
            "/devices/{deviceId}/events",
            &[("deviceId", "acme-meter-1")],
        )
        .caller(BOB),
    )
    .await;
    assert_eq!(events.status, 200, "{:?}", events.body);
    assert_eq!(events.body["events"].as_array().unwrap().len(), 1);
    let before = table_contents(&table).await;
    let refused = device_updates(
        &table,
        org_route("POST", &org, "/devices", &[])
            .caller(BOB)
            .json(json!({"deviceId": "acme-meter-2", "name": "Meter 2", "type": "meter"})),
    )
    .await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.error_code(), "role_required");
    assert_eq!(refused.body["error"]["requiredRole"], "admin");
    assert!(refused.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("yours is operator"));
    assert_eq!(
        table_contents(&table).await,
        before,
        "a refusal changes nothing"
    );
    // The organization's device is not in Bob's (or Alice's) personal fleet.
    let personal = dashboard(&table, ApiRequest::get("/me/devices").caller(ALICE)).await;
    assert_eq!(personal.body["devices"], json!([]));

    // Carol, a stranger, learns nothing: the same 404 as an organization that does not exist.
    let stranger = dashboard(
        &table,
        org_route("GET", &org, "/devices", &[]).caller(CAROL),
    )
    .await;
    let nowhere = dashboard(
        &table,
        org_route("GET", "o00000000000000000000", "/devices", &[]).caller(CAROL),
    )
    .await;
    assert_eq!((stranger.status, stranger.error_code()), (404, "not_found"));
    assert_eq!(stranger.body, nowhere.body);

    // Lowered to viewer, Bob may no longer set desired state (operator).
    let members_path = format!("/orgs/{org}/members/{BOB}");
    let lowered = device_updates(
        &table,
        to(
            "PATCH /orgs/{orgId}/members/{userId}",
            &members_path,
            &[("orgId", &org), ("userId", BOB)],
        )
        .caller(ALICE)
        .json(json!({"role": "viewer"})),
    )
    .await;
    assert_eq!(lowered.status, 200, "{:?}", lowered.body);
    assert_eq!(lowered.body["member"]["role"], "viewer");
    let desired = device_updates(
        &table,
        org_route(
            "PUT",
            &org,
            "/devices/{deviceId}/desired",
            &[("deviceId", "acme-meter-1")],
        )
        .caller(BOB)
        .header("if-match", "0")
        .json(json!({"desired": {"interval": 60}})),
    )
    .await;
    assert_eq!(desired.status, 403, "{:?}", desired.body);
    assert_eq!(desired.body["error"]["requiredRole"], "operator");

    // Alice hands ownership to Bob; she is an admin then, and may not delete it.
    let handed = device_updates(
        &table,
        to(
            "PATCH /orgs/{orgId}/members/{userId}",
            &members_path,
            &[("orgId", &org), ("userId", BOB)],
        )
        .caller(ALICE)
        .json(json!({"role": "owner"})),
    )
    .await;
    assert_eq!(handed.status, 200, "{:?}", handed.body);
    let org_path = format!("/orgs/{org}");
    let delete_org =
        |by: &str| to("DELETE /orgs/{orgId}", &org_path, &[("orgId", &org)]).caller(by);
    let by_admin = device_updates(&table, delete_org(ALICE)).await;
    assert_eq!(by_admin.status, 403);
    assert_eq!(by_admin.body["error"]["requiredRole"], "owner");
    // The owner cannot leave; Alice can.
    let leave = |who: &str, by: &str| {
        let path = format!("/orgs/{org}/members/{who}");
        to(
            "DELETE /orgs/{orgId}/members/{userId}",
            &path,
            &[("orgId", &org), ("userId", who)],
        )
        .caller(by)
    };
    let owner_leaves = device_updates(&table, leave(BOB, BOB)).await;
    assert_eq!(
        (owner_leaves.status, owner_leaves.error_code()),
        (409, "owner_must_stay")
    );
    assert_eq!(
        device_updates(&table, leave(ALICE, ALICE)).await.status,
        204
    );
    let gone = dashboard(
        &table,
        org_route("GET", &org, "/devices", &[]).caller(ALICE),
    )
    .await;
    assert_eq!(gone.status, 404, "a member who left is refused at once");

    // Deleting is refused while the organization has a device, and works once it has none.
    let not_empty = device_updates(&table, delete_org(BOB)).await;
    assert_eq!(
        (not_empty.status, not_empty.error_code()),
        (409, "org_not_empty")
    );
    let removed = device_updates(
        &table,
        org_route(
            "DELETE",
            &org,
            "/devices/{deviceId}",
            &[("deviceId", "acme-meter-1")],
        )
        .caller(BOB),
    )
    .await;
    assert_eq!(removed.status, 204, "{:?}", removed.body);
    assert_eq!(device_updates(&table, delete_org(BOB)).await.status, 204);
    let after = dashboard(&table, to("GET /orgs", "/orgs", &[]).caller(BOB)).await;
    assert_eq!(after.body["orgs"], json!([]));
    let deleted = dashboard(
        &table,
        to("GET /orgs/{orgId}", &org_path, &[("orgId", &org)]).caller(BOB),
    )
    .await;
    assert_eq!(deleted.status, 404);
}

#[tokio::test]
async fn nobody_signs_in_as_an_organization_fleet() {
    let table = fresh_table().await;
    let org = create_org(&table, ALICE, "Acme").await;
    let as_fleet = format!("org:{org}");
    let a = dashboard(&table, ApiRequest::get("/me/devices").caller(&as_fleet)).await;
    assert_eq!((a.status, a.error_code()), (401, "unauthorized"));
}
