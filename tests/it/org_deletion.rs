//! Deleting an organization (issue 39 item 2) on DynamoDB Local: a deletion interrupted after
//! any step leaves an organization that admits nobody (no accept, no registration into its
//! fleet, no move into it) and that the scheduled worker finishes; an accept, a registration
//! or a move-in racing a deletion leaves no member and no device behind. On moto's S3 (issue
//! 40): the organization's firmware (signing keys, packages, their images) goes too, whether
//! one request or the worker finishes the deletion.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::{Signer, SigningKey};
use fleet_testkit::moto_server::{create_versioned_bucket, local_firmware_images, MotoServer};
use fleet_tests::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use shared::model::entities::firmware::firmware_pk;
use shared::model::entities::org_deletion::DELETING_ORGS_PK;
use shared::model::entities::organization::org_pk;
use shared::model::entities::ItemKey;
use shared::model::ids::{DeviceId, DeviceType, OrgId, UserId};
use shared::model::keys::user_pk;
use shared::ops::devices::r#move::move_device;
use shared::ops::devices::register::{register_device as register, DeviceRegistration};
use shared::ops::orgs::manage::{
    continue_org_deletions, delete_org, delete_org_within, my_orgs, DeletionLimit,
    OrgDeletionProgress,
};
use shared::store::firmware_images::FirmwareImages;
use shared::{FleetError, FleetTable};

const ALICE: &str = "del-alice";
const BOB: &str = "del-bob";
const CAROL: &str = "del-carol";

/// The image bucket of organizations without firmware: a closed port, never asked.
fn no_bucket() -> FirmwareImages {
    fleet_testkit::moto_server::firmware_images_from_env()
}

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn to(route_key: &str, path: &str, params: &[(&str, &str)]) -> ApiRequest {
    params
        .iter()
        .fold(ApiRequest::new(route_key, path), |r, (name, value)| {
            r.param(name, value)
        })
}

async fn create_org(table: &FleetTable, owner: &str) -> String {
    let a = device_updates(
        table,
        to("POST /orgs", "/orgs", &[])
            .caller(owner)
            .json(json!({ "name": "Doomed" })),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["org"]["orgId"].as_str().unwrap().to_string()
}

async fn invite(table: &FleetTable, org: &str, by: &str, role: &str) -> String {
    let path = format!("/orgs/{org}/invitations");
    let a = device_updates(
        table,
        to("POST /orgs/{orgId}/invitations", &path, &[("orgId", org)])
            .caller(by)
            .json(json!({ "role": role })),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["invitation"]["code"].as_str().unwrap().to_string()
}

async fn accept(table: &FleetTable, code: &str, by: &str) -> Answer {
    let path = format!("/invitations/{code}/accept");
    device_updates(
        table,
        to("POST /invitations/{code}/accept", &path, &[("code", code)]).caller(by),
    )
    .await
}

fn registration(id: &str) -> DeviceRegistration {
    DeviceRegistration {
        device_id: DeviceId::parse(id).unwrap(),
        name: "Meter".into(),
        device_type: DeviceType::parse("thermostat").unwrap(),
        tags: vec![],
        report_every_seconds: None,
        offline_detection: Default::default(),
    }
}

/// An organization of Alice (owner) and Bob (admin), with open invitations, a device that was
/// registered and deleted (its fleet item stays) and a rule set: returns it and the open codes.
async fn doomed_org(table: &FleetTable) -> (OrgId, Vec<String>) {
    let org = create_org(table, ALICE).await;
    let code = invite(table, &org, ALICE, "admin").await;
    assert_eq!(accept(table, &code, BOB).await.status, 200);
    let mut codes = Vec::new();
    for role in ["admin", "viewer", "operator"] {
        codes.push(invite(table, &org, BOB, role).await);
    }
    let org = OrgId::parse(&org).unwrap();
    let fleet = UserId::org_fleet(&org);
    register(table, &fleet, registration("doomed-1"))
        .await
        .unwrap();
    shared::ops::devices::delete::delete_device(
        table,
        &fleet,
        &DeviceId::parse("doomed-1").unwrap(),
    )
    .await
    .unwrap();
    let path = format!("/orgs/{org}/rules");
    let rule = device_updates(
        table,
        to("POST /orgs/{orgId}/rules", &path, &[("orgId", org.as_str())])
            .caller(ALICE)
            .json(json!({"name": "hot", "eventType": "temperature", "scope": {"deviceType": "thermostat"}, "condition": {"above": 80}, "clear": {"below": 75}, "severity": "major"})),
    )
    .await;
    assert_eq!(rule.status, 201, "{:?}", rule.body);
    (org, codes)
}

async fn partition(table: &FleetTable, pk: &str) -> Vec<Item> {
    let out = table
        .client
        .query()
        .table_name(table.name())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(pk.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    out.items.unwrap_or_default()
}

async fn is_member(table: &FleetTable, org: &OrgId, who: &str) -> bool {
    let membership = ItemKey::Membership {
        member: user(who),
        org: org.clone(),
    };
    let entry = ItemKey::OrgMember {
        org: org.clone(),
        member: user(who),
    };
    item(table, &membership).await.is_some() || item(table, &entry).await.is_some()
}

/// Nothing of `org` is left: its partition, its fleet's, its memberships, its worker entry.
async fn assert_all_gone(table: &FleetTable, org: &OrgId, context: &str) {
    assert!(
        partition(table, &org_pk(org)).await.is_empty(),
        "{context}: the organization's partition"
    );
    assert!(
        partition(table, &user_pk(&UserId::org_fleet(org)))
            .await
            .is_empty(),
        "{context}: its fleet's partition"
    );
    for who in [ALICE, BOB, CAROL] {
        assert!(!is_member(table, org, who).await, "{context}: {who}");
    }
    let listed = partition(table, DELETING_ORGS_PK).await;
    assert!(
        !listed
            .iter()
            .any(|i| i["SK"].as_s().unwrap() == org.as_str()),
        "{context}: still on the worker's list"
    );
}

/// Issue 39 item 2: interrupted after each of its steps (its pages counted: 0 is right after
/// the mark), a deletion leaves an organization that admits nobody, and a worker run finishes
/// it. Before the fix the first step deleted the memberships (the owner's too) and nothing
/// else: an invitation still admitted Carol into an organization nobody owned.
/// One scheduled worker run carrying on deletions (30 s; no firmware in these tests).
async fn worker_run(table: &FleetTable) -> Vec<OrgDeletionProgress> {
    continue_org_deletions(
        table,
        &no_bucket(),
        Instant::now() + Duration::from_secs(30),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn an_organization_whose_deletion_is_interrupted_after_any_step_admits_nobody_and_the_worker_finishes_it(
) {
    let table = fresh_table().await;
    let mut finished_at = None;
    for pages in 0..10u32 {
        let (org, codes) = doomed_org(&table).await;
        let finished = delete_org_within(&table, &no_bucket(), &org, DeletionLimit::Pages(pages))
            .await
            .unwrap();
        let context = format!("interrupted after {pages} pages");
        if finished {
            assert_all_gone(&table, &org, &context).await;
            finished_at = Some(pages);
            break;
        }
        // Nobody gets in: by an invitation, by a registration, by a move.
        for code in &codes {
            // While its invitation is stored, the organization's mark refuses it; once the
            // invitations' step ran, the code is unknown.
            let stored = partition(&table, &org_pk(&org))
                .await
                .iter()
                .any(|i| i["SK"].as_s().unwrap().starts_with("INVITATION#"));
            let a = accept(&table, code, CAROL).await;
            let expected = if stored {
                "organization not found"
            } else {
                "invitation not found"
            };
            assert_eq!(
                (a.status, a.body["error"]["message"].clone()),
                (404, json!(expected)),
                "{context}: {:?}",
                a.body
            );
        }
        assert!(!is_member(&table, &org, CAROL).await, "{context}");
        let fleet = UserId::org_fleet(&org);
        let registered = register(&table, &fleet, registration("ghost-1")).await;
        assert!(
            matches!(registered, Err(FleetError::NotFound("organization"))),
            "{context}: {:?}",
            registered.map(|r| r.device)
        );
        let own = format!("own-{pages}");
        register(&table, &user(ALICE), registration(&own))
            .await
            .unwrap();
        let own = DeviceId::parse(&own).unwrap();
        let moved = move_device(&table, &own, &user(ALICE), &fleet).await;
        assert!(
            matches!(moved, Err(FleetError::NotFound("organization"))),
            "{context}: {:?}",
            moved.map(|m| m.history)
        );
        assert!(item(&table, &key::device(ALICE, own.as_str()))
            .await
            .is_some());
        // Nobody lists it any more.
        for who in [ALICE, BOB] {
            let listed = my_orgs(&table, &user(who), None).await.unwrap().items;
            assert!(
                listed.iter().all(|o| o.org_id != org.as_str()),
                "{context}: {who}"
            );
        }
        // The worker finishes it.
        let run = worker_run(&table).await;
        assert!(
            run.iter().any(|p| p.org_id == org.as_str() && p.finished),
            "{context}: {run:?}"
        );
        assert_all_gone(&table, &org, &context).await;
    }
    let steps = finished_at.expect("a deletion finishes within 10 pages");
    println!("an organization's deletion: {steps} pages after its mark");
}

/// Issue 39 item 2: an accept committing while a deletion runs leaves no member: either it
/// commits before the mark (and the deletion removes the member) or it is refused.
#[tokio::test]
async fn an_accept_racing_a_deletion_leaves_no_member() {
    let table = fresh_table().await;
    let images = no_bucket();
    for round in 0..4 {
        let (org, codes) = doomed_org(&table).await;
        let (deleted, accepted) = tokio::join!(
            delete_org(&table, &images, &org),
            accept(&table, &codes[0], CAROL)
        );
        deleted.unwrap();
        assert!(
            accepted.status == 200 || accepted.status == 404,
            "round {round}: {:?}",
            accepted.body
        );
        worker_run(&table).await;
        assert_all_gone(&table, &org, &format!("round {round}")).await;
        assert!(my_orgs(&table, &user(CAROL), None)
            .await
            .unwrap()
            .items
            .is_empty());
    }
}

/// Issue 39 item 2: a registration into the organization's fleet or a move into it racing
/// the deletion: one of the two wins, never both (no device in a deleted organization).
#[tokio::test]
async fn a_registration_or_move_in_racing_a_deletion_leaves_no_device() {
    let table = fresh_table().await;
    let images = no_bucket();
    for round in 0..4 {
        let (org, _) = doomed_org(&table).await;
        let fleet = UserId::org_fleet(&org);
        let new_id = format!("race-new-{round}");
        let own_id = format!("race-own-{round}");
        register(&table, &user(ALICE), registration(&own_id))
            .await
            .unwrap();
        let own = DeviceId::parse(&own_id).unwrap();
        let alice = user(ALICE);
        let (deleted, registered, moved) = tokio::join!(
            delete_org(&table, &images, &org),
            register(&table, &fleet, registration(&new_id)),
            move_device(&table, &own, &alice, &fleet),
        );
        worker_run(&table).await;
        let context = format!(
            "round {round}: deletion {deleted:?}, registration {:?}, move {:?}",
            registered.as_ref().map(|_| ()),
            moved.as_ref().map(|_| ())
        );
        let in_org = |id: &str| {
            let id = id.to_string();
            let fleet = fleet.clone();
            let table = table.clone();
            async move {
                item(&table, &key::registration(&id))
                    .await
                    .is_some_and(|r| {
                        r["userId"] == aws_sdk_dynamodb::types::AttributeValue::S(fleet.to_string())
                    })
            }
        };
        match deleted {
            Ok(()) => {
                assert_all_gone(&table, &org, &context).await;
                assert!(registered.is_err(), "{context}");
                assert!(moved.is_err(), "{context}");
                assert!(!in_org(&new_id).await, "{context}");
                assert!(!in_org(&own_id).await, "{context}");
                assert!(item(&table, &key::device(ALICE, &own_id)).await.is_some());
            }
            Err(FleetError::Conflict {
                code: "org_not_empty",
                ..
            }) => {
                assert!(registered.is_ok() || moved.is_ok(), "{context}");
                let org_item = item(&table, &ItemKey::Organization { org: org.clone() }).await;
                assert!(
                    org_item.is_some_and(|o| !o.contains_key("deletingAt")),
                    "{context}: a refused deletion leaves the organization as it was"
                );
            }
            Err(other) => panic!("{context}: {other:?}"),
        }
    }
}

/// The answer to `DELETE /orgs/{orgId}` stays 204, and a second DELETE of an organization
/// already gone is a 404 (its owner's membership went first).
#[tokio::test]
async fn deleting_an_organization_answers_as_before() {
    let table = fresh_table().await;
    let (org, _) = doomed_org(&table).await;
    let path = format!("/orgs/{org}");
    let delete = || to("DELETE /orgs/{orgId}", &path, &[("orgId", org.as_str())]).caller(ALICE);
    let a = device_updates(&table, delete()).await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    assert_all_gone(&table, &org, "one request").await;
    let again = device_updates(&table, delete()).await;
    assert_eq!(again.status, 404, "{:?}", again.body);
    let _: Value = again.body;
}

/// Sends `request` through the firmware function on `images`.
async fn firmware_route(
    table: &FleetTable,
    images: &FirmwareImages,
    request: ApiRequest,
) -> Answer {
    let state = firmware::FirmwareState {
        table: table.clone(),
        images: images.clone(),
    };
    let (response, used) = metered(Box::pin(
        gateway(firmware::router(state)).handle(request.build()),
    ))
    .await;
    answer(response, used)
}

/// An organization of Alice's with firmware, through the firmware routes: a signing key for
/// thermostats, a package whose image was uploaded and checked (`ready`) and one whose image
/// was uploaded but never checked (`pending`). Returns it and the images' object keys.
async fn org_with_firmware(table: &FleetTable, images: &FirmwareImages) -> (OrgId, Vec<String>) {
    let org = create_org(table, ALICE).await;
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let public = STANDARD.encode(key.verifying_key().to_bytes());
    let a = firmware_route(
        table,
        images,
        ApiRequest::put(&format!("/orgs/{org}/firmware-keys/thermostat"))
            .caller(ALICE)
            .json(json!({ "publicKey": public })),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let mut objects = Vec::new();
    for (seed, check) in [(1u8, true), (2u8, false)] {
        let bytes: Vec<u8> = (0..4_096u32).map(|i| (i as u8) ^ seed).collect();
        let digest = Sha256::digest(&bytes);
        let sha256: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let a = firmware_route(
            table,
            images,
            ApiRequest::post(&format!("/orgs/{org}/firmware"))
                .caller(ALICE)
                .json(json!({
                    "deviceType": "thermostat",
                    "version": format!("1.{seed}.0"),
                    "sha256": sha256,
                    "size": bytes.len(),
                    "signature": STANDARD.encode(key.sign(&digest).to_bytes()),
                })),
        )
        .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let id = a.body["firmwareId"].as_str().unwrap().to_string();
        let put = reqwest::Client::new()
            .put(a.body["uploadUrl"].as_str().unwrap())
            .body(bytes)
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 200, "presigned PUT");
        if check {
            let a = firmware_route(
                table,
                images,
                ApiRequest::get(&format!("/orgs/{org}/firmware/{id}")).caller(ALICE),
            )
            .await;
            assert_eq!(a.body["status"], "ready", "{:?}", a.body);
        }
        objects.push(format!(
            "firmware/{}/{id}",
            UserId::org_fleet(&OrgId::parse(&org).unwrap())
        ));
    }
    (OrgId::parse(&org).unwrap(), objects)
}

/// What is left of `org`'s firmware: the items of its firmware partition, and each image of
/// `objects` that a GET still finds (a GET of the current version is a 404 once deleted: the
/// bucket is versioned, so the delete leaves a marker and the lifecycle expires the version).
async fn firmware_left(
    table: &FleetTable,
    images: &FirmwareImages,
    org: &OrgId,
    objects: &[String],
) -> Vec<String> {
    let mut left: Vec<String> = partition(table, &firmware_pk(&UserId::org_fleet(org)))
        .await
        .iter()
        .map(|i| format!("item {}", i["SK"].as_s().unwrap()))
        .collect();
    for key in objects {
        let got = images
            .client
            .get_object()
            .bucket(&images.bucket)
            .key(key)
            .send()
            .await;
        match got {
            Ok(_) => left.push(format!("image {key}")),
            Err(e) => {
                let status = e.raw_response().map(|r| r.status().as_u16());
                assert_eq!(status, Some(404), "GET {key}: {e:?}");
            }
        }
    }
    left
}

/// A table and a versioned image bucket on moto's S3 (kept alive by the returned handle).
async fn with_bucket() -> (FleetTable, FirmwareImages, MotoServer) {
    let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
    let images = local_firmware_images(moto.endpoint(), "org-deletion-firmware");
    create_versioned_bucket(&images).await.unwrap();
    (fresh_table().await, images, moto)
}

/// Issue 40 and AP-O5: `DELETE /orgs/{orgId}` of an organization with firmware leaves none of
/// it: no package, no signing keys, no image a GET finds.
#[tokio::test]
async fn deleting_an_organization_deletes_its_firmware_packages_keys_and_images() {
    let (table, images, _moto) = with_bucket().await;
    let (org, objects) = org_with_firmware(&table, &images).await;
    assert_eq!(
        firmware_left(&table, &images, &org, &objects).await.len(),
        5,
        "the fixture: the keys, two packages, two images"
    );
    let path = format!("/orgs/{org}");
    let a = device_updates_on(
        &table,
        &images,
        to("DELETE /orgs/{orgId}", &path, &[("orgId", org.as_str())]).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    assert_all_gone(&table, &org, "one request").await;
    let left = firmware_left(&table, &images, &org, &objects).await;
    assert!(left.is_empty(), "left after the deletion: {left:?}");
}

/// The same when the deletion is interrupted after any of its pages and the scheduled worker
/// finishes it.
#[tokio::test]
async fn an_interrupted_deletion_finished_by_the_worker_deletes_the_organizations_firmware() {
    let (table, images, _moto) = with_bucket().await;
    for pages in 0..16u32 {
        let (org, objects) = org_with_firmware(&table, &images).await;
        let finished = delete_org_within(&table, &images, &org, DeletionLimit::Pages(pages))
            .await
            .unwrap();
        if !finished {
            let run =
                continue_org_deletions(&table, &images, Instant::now() + Duration::from_secs(30))
                    .await
                    .unwrap();
            assert!(
                run.iter().any(|p| p.org_id == org.as_str() && p.finished),
                "after {pages} pages: {run:?}"
            );
        }
        let context = format!("interrupted after {pages} pages");
        assert_all_gone(&table, &org, &context).await;
        let left = firmware_left(&table, &images, &org, &objects).await;
        assert!(left.is_empty(), "{context}: left {left:?}");
        if finished {
            return;
        }
    }
    panic!("a deletion finishes within 16 pages");
}
