//! The isolation proof of organizations (issue 33): every route of template.yaml, personal and
//! organization, sent by every kind of caller (A's owner, admin, operator and viewer, a removed
//! member of A, a member of organization B only, a non-member), with valid inputs aimed at
//! organization A's data (and, on `/me/...`, at another person's ids).
//!
//! Each answer must be the status the caller's role implies (ORGS_DESIGN.md: 2xx when the
//! role includes the route's need, 403 `role_required` naming the role for a member without
//! it, 404 `not_found` for a removed member, another organization's member and a non-member),
//! documented by docs/openapi.yaml, and carry nothing of a fleet the caller may not see
//! (device ids and names, rule, alarm, rollout and invitation ids, member ids and e-mails).
//! A refusal leaves the table exactly as it was; a success changes no item of another fleet.
//!
//! The routes come from the template; the role each needs from [`NEEDS`], which must name
//! every template route (a new route without an entry fails the run). Successful changes run
//! on throwaway devices, rules, members and invitations made for them, or are undone, so the
//! matrix stays valid in any order; `DELETE /orgs/{orgId}` runs last, the owner last of all.
//!
//! `cargo test -p fleet-tests --test it -- org_matrix:: --nocapture` prints the matrix and the
//! revocation delay.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use base64::Engine as _;
use fleet_testkit::moto_server::{create_versioned_bucket, local_firmware_images, MotoServer};
use fleet_testkit::webhook_queue::{create_queue, sqs_client};
use fleet_tests::api_doc::api_doc;
use fleet_tests::gateway::{check_answer, Gateway};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::webhook::WebhookItem;
use shared::model::entities::{Entity, ItemKey};
use shared::model::ids::{OrgId, UserId};
use shared::model::org::Role;
use shared::model::timestamp::Timestamp;
use shared::model::webhook::target::TargetPolicy;
use shared::model::webhook::WebhookId;
use shared::FleetTable;

/// The people of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Person {
    Owner,
    Admin,
    Operator,
    Viewer,
    /// Was A's admin, then removed.
    Removed,
    /// Owns organization B; never in A.
    BMember,
    /// In no organization.
    Outsider,
}

impl Person {
    const ALL: [Person; 7] = [
        Person::Owner,
        Person::Admin,
        Person::Operator,
        Person::Viewer,
        Person::Removed,
        Person::BMember,
        Person::Outsider,
    ];

    /// Their user id (no id is a substring of another's).
    fn id(self) -> &'static str {
        match self {
            Person::Owner => "mx-owner",
            Person::Admin => "mx-admin",
            Person::Operator => "mx-operator",
            Person::Viewer => "mx-viewer",
            Person::Removed => "mx-removed",
            Person::BMember => "mx-bmember",
            Person::Outsider => "mx-outsider",
        }
    }

    /// Their role in organization A.
    fn role_in_a(self) -> Option<Role> {
        match self {
            Person::Owner => Some(Role::Owner),
            Person::Admin => Some(Role::Admin),
            Person::Operator => Some(Role::Operator),
            Person::Viewer => Some(Role::Viewer),
            Person::Removed | Person::BMember | Person::Outsider => None,
        }
    }

    /// The person whose personal ids this one's `/me/...` requests aim at.
    fn next(self) -> Person {
        let i = Person::ALL.iter().position(|p| *p == self).unwrap();
        Person::ALL[(i + 1) % Person::ALL.len()]
    }
}

/// Whose data something is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fleet {
    Personal(Person),
    OrgA,
    OrgB,
}

/// What a route needs of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Any signed-in person, acting on their own fleet or profile (`/me...`).
    OwnFleet,
    /// Any signed-in person (their organizations; accepting an invitation).
    SignedIn,
    /// At least this role in the organization of the path.
    Role(Role),
    /// A fleet operator (the `admin` group; `/admin/...`).
    FleetOperator,
    /// The device's own token (what devices send).
    DeviceToken,
}

/// The need of every route of the template (ORGS_DESIGN.md, "Roles"): the one table of who
/// may do what. A template route missing here fails [`every_template_route_has_a_need`].
const NEEDS: &[(&str, Need)] = &[
    // The personal fleet and profile.
    ("GET /me", Need::OwnFleet),
    ("PUT /me", Need::OwnFleet),
    ("GET /me/dashboard", Need::OwnFleet),
    ("GET /me/devices", Need::OwnFleet),
    ("POST /me/devices", Need::OwnFleet),
    ("GET /me/devices/{deviceId}", Need::OwnFleet),
    ("PATCH /me/devices/{deviceId}", Need::OwnFleet),
    ("DELETE /me/devices/{deviceId}", Need::OwnFleet),
    ("POST /me/devices/{deviceId}/token", Need::OwnFleet),
    ("DELETE /me/devices/{deviceId}/token", Need::OwnFleet),
    ("GET /me/devices/{deviceId}/events", Need::OwnFleet),
    ("GET /me/devices/{deviceId}/series", Need::OwnFleet),
    ("GET /me/devices/{deviceId}/commands", Need::OwnFleet),
    ("POST /me/devices/{deviceId}/commands", Need::OwnFleet),
    ("PUT /me/devices/{deviceId}/desired", Need::OwnFleet),
    ("GET /me/devices/{deviceId}/alarms", Need::OwnFleet),
    ("POST /me/devices/{deviceId}/move", Need::OwnFleet),
    ("GET /me/events", Need::OwnFleet),
    ("POST /me/rollouts", Need::OwnFleet),
    ("GET /me/rollouts/{rolloutId}", Need::OwnFleet),
    ("POST /me/rollouts/{rolloutId}/cancel", Need::OwnFleet),
    ("POST /me/rollouts/{rolloutId}/pause", Need::OwnFleet),
    ("POST /me/rollouts/{rolloutId}/resume", Need::OwnFleet),
    ("GET /me/rollouts", Need::OwnFleet),
    ("GET /me/devices/{deviceId}/firmware", Need::OwnFleet),
    ("GET /me/rules", Need::OwnFleet),
    ("POST /me/rules", Need::OwnFleet),
    ("PATCH /me/rules/{ruleId}", Need::OwnFleet),
    ("DELETE /me/rules/{ruleId}", Need::OwnFleet),
    ("GET /me/alarms", Need::OwnFleet),
    ("POST /me/alarms/{alarmId}/ack", Need::OwnFleet),
    ("GET /me/retention", Need::OwnFleet),
    ("PUT /me/retention", Need::OwnFleet),
    ("POST /me/firmware", Need::OwnFleet),
    ("GET /me/firmware", Need::OwnFleet),
    ("GET /me/firmware/{firmwareId}", Need::OwnFleet),
    ("DELETE /me/firmware/{firmwareId}", Need::OwnFleet),
    ("PUT /me/firmware-keys/{deviceType}", Need::OwnFleet),
    ("GET /me/webhooks", Need::OwnFleet),
    ("POST /me/webhooks", Need::OwnFleet),
    ("GET /me/webhooks/{webhookId}", Need::OwnFleet),
    ("PATCH /me/webhooks/{webhookId}", Need::OwnFleet),
    ("DELETE /me/webhooks/{webhookId}", Need::OwnFleet),
    (
        "POST /me/webhooks/{webhookId}/rotate-secret",
        Need::OwnFleet,
    ),
    ("POST /me/webhooks/{webhookId}/confirm", Need::OwnFleet),
    ("POST /me/webhooks/{webhookId}/test", Need::OwnFleet),
    ("GET /me/webhooks/{webhookId}/deliveries", Need::OwnFleet),
    (
        "POST /me/webhooks/{webhookId}/deliveries/{deliveryId}/retry",
        Need::OwnFleet,
    ),
    // Organizations: management.
    ("POST /orgs", Need::SignedIn),
    ("GET /orgs", Need::SignedIn),
    ("POST /invitations/{code}/accept", Need::SignedIn),
    ("GET /orgs/{orgId}", Need::Role(Role::Viewer)),
    ("PATCH /orgs/{orgId}", Need::Role(Role::Admin)),
    ("DELETE /orgs/{orgId}", Need::Role(Role::Owner)),
    ("GET /orgs/{orgId}/members", Need::Role(Role::Viewer)),
    (
        "PATCH /orgs/{orgId}/members/{userId}",
        Need::Role(Role::Admin),
    ),
    (
        "DELETE /orgs/{orgId}/members/{userId}",
        Need::Role(Role::Admin),
    ),
    ("POST /orgs/{orgId}/invitations", Need::Role(Role::Admin)),
    ("GET /orgs/{orgId}/invitations", Need::Role(Role::Admin)),
    (
        "DELETE /orgs/{orgId}/invitations/{invitationId}",
        Need::Role(Role::Admin),
    ),
    // Organizations: the fleet (the twins of /me).
    ("GET /orgs/{orgId}/dashboard", Need::Role(Role::Viewer)),
    ("GET /orgs/{orgId}/devices", Need::Role(Role::Viewer)),
    ("POST /orgs/{orgId}/devices", Need::Role(Role::Admin)),
    (
        "GET /orgs/{orgId}/devices/{deviceId}",
        Need::Role(Role::Viewer),
    ),
    (
        "PATCH /orgs/{orgId}/devices/{deviceId}",
        Need::Role(Role::Admin),
    ),
    (
        "DELETE /orgs/{orgId}/devices/{deviceId}",
        Need::Role(Role::Admin),
    ),
    (
        "POST /orgs/{orgId}/devices/{deviceId}/token",
        Need::Role(Role::Admin),
    ),
    (
        "DELETE /orgs/{orgId}/devices/{deviceId}/token",
        Need::Role(Role::Admin),
    ),
    (
        "GET /orgs/{orgId}/devices/{deviceId}/events",
        Need::Role(Role::Viewer),
    ),
    (
        "GET /orgs/{orgId}/devices/{deviceId}/series",
        Need::Role(Role::Viewer),
    ),
    (
        "GET /orgs/{orgId}/devices/{deviceId}/commands",
        Need::Role(Role::Viewer),
    ),
    (
        "POST /orgs/{orgId}/devices/{deviceId}/commands",
        Need::Role(Role::Operator),
    ),
    (
        "PUT /orgs/{orgId}/devices/{deviceId}/desired",
        Need::Role(Role::Operator),
    ),
    (
        "GET /orgs/{orgId}/devices/{deviceId}/alarms",
        Need::Role(Role::Viewer),
    ),
    (
        "POST /orgs/{orgId}/devices/{deviceId}/move",
        Need::Role(Role::Admin),
    ),
    ("GET /orgs/{orgId}/events", Need::Role(Role::Viewer)),
    ("POST /orgs/{orgId}/rollouts", Need::Role(Role::Admin)),
    (
        "GET /orgs/{orgId}/rollouts/{rolloutId}",
        Need::Role(Role::Viewer),
    ),
    // Stopping a change is the safe direction: an operator may (starting one is an admin's).
    (
        "POST /orgs/{orgId}/rollouts/{rolloutId}/cancel",
        Need::Role(Role::Operator),
    ),
    // Pausing stops offers (an operator's, as cancel); resuming offers firmware again (an
    // admin's, as starting).
    (
        "POST /orgs/{orgId}/rollouts/{rolloutId}/pause",
        Need::Role(Role::Operator),
    ),
    (
        "POST /orgs/{orgId}/rollouts/{rolloutId}/resume",
        Need::Role(Role::Admin),
    ),
    ("GET /orgs/{orgId}/rollouts", Need::Role(Role::Viewer)),
    (
        "GET /orgs/{orgId}/devices/{deviceId}/firmware",
        Need::Role(Role::Viewer),
    ),
    ("GET /orgs/{orgId}/rules", Need::Role(Role::Viewer)),
    ("POST /orgs/{orgId}/rules", Need::Role(Role::Admin)),
    (
        "PATCH /orgs/{orgId}/rules/{ruleId}",
        Need::Role(Role::Admin),
    ),
    (
        "DELETE /orgs/{orgId}/rules/{ruleId}",
        Need::Role(Role::Admin),
    ),
    ("GET /orgs/{orgId}/alarms", Need::Role(Role::Viewer)),
    (
        "POST /orgs/{orgId}/alarms/{alarmId}/ack",
        Need::Role(Role::Operator),
    ),
    ("GET /orgs/{orgId}/retention", Need::Role(Role::Viewer)),
    ("PUT /orgs/{orgId}/retention", Need::Role(Role::Admin)),
    // Firmware (design.md 15): viewers read; admins create, delete and set keys.
    ("POST /orgs/{orgId}/firmware", Need::Role(Role::Admin)),
    ("GET /orgs/{orgId}/firmware", Need::Role(Role::Viewer)),
    (
        "GET /orgs/{orgId}/firmware/{firmwareId}",
        Need::Role(Role::Viewer),
    ),
    (
        "DELETE /orgs/{orgId}/firmware/{firmwareId}",
        Need::Role(Role::Admin),
    ),
    (
        "PUT /orgs/{orgId}/firmware-keys/{deviceType}",
        Need::Role(Role::Admin),
    ),
    // Webhooks (design.md 16): viewers read; admins manage.
    ("GET /orgs/{orgId}/webhooks", Need::Role(Role::Viewer)),
    ("POST /orgs/{orgId}/webhooks", Need::Role(Role::Admin)),
    (
        "GET /orgs/{orgId}/webhooks/{webhookId}",
        Need::Role(Role::Viewer),
    ),
    (
        "PATCH /orgs/{orgId}/webhooks/{webhookId}",
        Need::Role(Role::Admin),
    ),
    (
        "DELETE /orgs/{orgId}/webhooks/{webhookId}",
        Need::Role(Role::Admin),
    ),
    (
        "POST /orgs/{orgId}/webhooks/{webhookId}/rotate-secret",
        Need::Role(Role::Admin),
    ),
    (
        "POST /orgs/{orgId}/webhooks/{webhookId}/confirm",
        Need::Role(Role::Admin),
    ),
    (
        "POST /orgs/{orgId}/webhooks/{webhookId}/test",
        Need::Role(Role::Admin),
    ),
    (
        "GET /orgs/{orgId}/webhooks/{webhookId}/deliveries",
        Need::Role(Role::Viewer),
    ),
    (
        "POST /orgs/{orgId}/webhooks/{webhookId}/deliveries/{deliveryId}/retry",
        Need::Role(Role::Admin),
    ),
    // Operators and devices.
    ("GET /admin/events", Need::FleetOperator),
    ("GET /admin/devices", Need::FleetOperator),
    ("GET /admin/reports/{date}", Need::FleetOperator),
    ("GET /admin/alarms", Need::FleetOperator),
    ("POST /devices/{deviceId}/events", Need::DeviceToken),
    ("POST /devices/{deviceId}/sync", Need::DeviceToken),
];

fn need_of(route: &str) -> Option<Need> {
    NEEDS.iter().find(|(r, _)| *r == route).map(|(_, n)| *n)
}

#[test]
fn every_template_route_has_a_need() {
    let routes: BTreeSet<String> = template().routes.iter().map(|r| r.route_key()).collect();
    let missing: Vec<&String> = routes.iter().filter(|r| need_of(r).is_none()).collect();
    assert!(
        missing.is_empty(),
        "template routes without an entry in org_matrix::NEEDS: {missing:?}"
    );
    let stale: Vec<&str> = NEEDS
        .iter()
        .map(|(r, _)| *r)
        .filter(|r| !routes.contains(*r))
        .collect();
    assert!(stale.is_empty(), "NEEDS names no template route: {stale:?}");
    let names: BTreeSet<&str> = NEEDS.iter().map(|(r, _)| *r).collect();
    assert_eq!(names.len(), NEEDS.len(), "a route twice in NEEDS");
}

/// The fixture: two organizations, seven people, and what each fleet holds.
struct World {
    table: FleetTable,
    gateway: Gateway,
    org_a: String,
    org_b: String,
    /// A's device the read routes aim at, its rule, alarm and rollout.
    a_device: String,
    a_alarm: String,
    a_rollout: String,
    /// A's firmware package (its image uploaded: the first read checks it on S3) and webhook.
    a_firmware: String,
    a_webhook: String,
    /// Each person's personal device, its token, and their personal rule, firmware package
    /// and webhook.
    personal_device: BTreeMap<Person, String>,
    personal_token: BTreeMap<Person, String>,
    personal_rule: BTreeMap<Person, String>,
    personal_firmware: BTreeMap<Person, String>,
    personal_webhook: BTreeMap<Person, String>,
    /// moto's server: the firmware bucket and the webhook delivery queue (kept alive).
    _moto: MotoServer,
    /// Strings only answers about one fleet may carry.
    secrets: BTreeMap<Fleet, BTreeSet<String>>,
    /// Names throwaway things.
    counter: usize,
}

const A_NAME: &str = "Acme Matrix Org";
const B_NAME: &str = "Bravo Matrix Org";
const A_TAG: &str = "acme-zone";

fn email(user: &str) -> String {
    // The address `ApiRequest::caller` puts in the JWT.
    format!("{user}@example.com")
}

/// Sends through the gateway, boxed (handler futures are large in debug builds).
async fn send(gateway: &Gateway, route: &str, request: ApiRequest) -> Answer {
    Box::pin(gateway.send(route, request)).await
}

/// `request` to the route `path` matches, which must succeed.
async fn ok(gateway: &Gateway, path_route: (&str, &str), who: &str, body: Option<Value>) -> Value {
    let (method, path) = path_route;
    let mut request = ApiRequest::to(method, path).caller(who);
    let route = request.event()["routeKey"].as_str().unwrap().to_string();
    if let Some(body) = body {
        request = request.json(body);
    }
    let answer = send(gateway, &route, request).await;
    assert!(
        (200..300).contains(&answer.status),
        "setup {method} {path} as {who}: {} {}",
        answer.status,
        answer.body
    );
    answer.body
}

/// The image of every matrix package (1000 bytes), uploaded for each organization's package.
fn firmware_image() -> Vec<u8> {
    (0..1000u32).map(|i| (i * 31 % 251) as u8).collect()
}

/// A valid package declaration of [`firmware_image`] (its device type has no signing key).
fn firmware_body() -> Value {
    let sha256: String = <sha2::Sha256 as sha2::Digest>::digest(firmware_image())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"deviceType": "thermostat", "version": "1.2.3", "sha256": sha256, "size": 1000})
}

/// The device type whose signing key the matrix sets (not the packages' type, so a key set by
/// one cell never makes a later package need a signature).
const KEYED_TYPE: &str = "gateway";

/// A valid Ed25519 public key, base64.
fn signing_public_key() -> String {
    base64::engine::general_purpose::STANDARD.encode(
        ed25519_dalek::SigningKey::from_bytes(&[3u8; 32])
            .verifying_key()
            .to_bytes(),
    )
}

/// A valid webhook endpoint at `url` (public https: the strict policy, as on AWS).
fn webhook_body(url: &str) -> Value {
    json!({"url": url, "events": ["alarm.raised"], "description": "Matrix hook"})
}

/// The confirmation token of `owner`'s webhook `webhook`, as stored (the receiver would have
/// got it in its `webhook.confirm` delivery).
/// A delivery of `webhook` that is done (its newest, marked delivered), so a redelivery of it
/// is allowed: its id.
async fn finished_delivery(table: &FleetTable, owner: UserId, webhook: &str) -> String {
    use shared::model::entities::webhook_delivery::{DeliveryState, WebhookDeliveryItem};
    let webhook = WebhookId::parse(webhook).unwrap();
    let page =
        shared::ops::webhooks::delivery_log::list_deliveries(table, &owner, &webhook, 1, None)
            .await
            .unwrap();
    let delivery = page.items.first().expect("a delivery").delivery_id.clone();
    let key = ItemKey::WebhookDelivery {
        user: owner,
        webhook,
        delivery: delivery.clone(),
    };
    let mut stored = WebhookDeliveryItem::from_item(item(table, &key).await.unwrap()).unwrap();
    stored.state = DeliveryState::Delivered;
    put_entity(table, &stored).await;
    delivery.to_string()
}

async fn confirmation_token(table: &FleetTable, owner: UserId, webhook: &str) -> String {
    let key = ItemKey::Webhook {
        user: owner,
        webhook: WebhookId::parse(webhook).unwrap(),
    };
    let stored = item(table, &key).await.expect("the webhook item");
    WebhookItem::from_item(stored)
        .unwrap()
        .confirmation_token
        .clone()
}

fn rule_body(name: &str, device: &str, above: f64) -> Value {
    json!({"name": name, "eventType": "temperature", "scope": {"deviceId": device},
           "condition": {"above": above}, "severity": "major"})
}

impl World {
    async fn new() -> World {
        let table = fresh_table().await;
        // The firmware and webhooks functions on moto's S3 bucket and SQS queue.
        let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
        let images = local_firmware_images(moto.endpoint(), "matrix-firmware");
        create_versioned_bucket(&images).await.unwrap();
        let queue = create_queue(&sqs_client(moto.endpoint()), "matrix-webhooks")
            .await
            .unwrap();
        let gateway = Gateway::with_routers(
            &table,
            BTreeMap::from([
                (
                    "functions/firmware",
                    firmware::router(firmware::FirmwareState {
                        table: table.clone(),
                        images: images.clone(),
                    }),
                ),
                // Deleting A deletes its firmware images from the same bucket.
                (
                    "functions/device-updates",
                    device_updates::router(
                        table.clone(),
                        shared::ops::limits::RegistrationLimit::from_env().unwrap_or_default(),
                        images,
                    ),
                ),
                (
                    "functions/webhooks",
                    webhooks::router(webhooks::WebhooksState {
                        table: table.clone(),
                        queue,
                        policy: TargetPolicy::strict(),
                    }),
                ),
            ]),
        );
        let mut secrets: BTreeMap<Fleet, BTreeSet<String>> = BTreeMap::new();
        let (mut personal_device, mut personal_token, mut personal_rule) =
            (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        let (mut personal_firmware, mut personal_webhook) = (BTreeMap::new(), BTreeMap::new());

        // Everyone's personal fleet: a profile, a device, a rule.
        for p in Person::ALL {
            let id = p.id();
            ok(
                &gateway,
                ("PUT", "/me"),
                id,
                Some(json!({"name": format!("Profile of {id}")})),
            )
            .await;
            let device = format!("pd-{id}");
            let registered = ok(
                &gateway,
                ("POST", "/me/devices"),
                id,
                Some(
                    json!({"deviceId": device, "name": format!("Personal device of {id}"),
                            "type": "thermostat", "tags": [format!("pt-{id}")]}),
                ),
            )
            .await;
            let rule = ok(
                &gateway,
                ("POST", "/me/rules"),
                id,
                Some(rule_body(&format!("Personal rule of {id}"), &device, 80.0)),
            )
            .await;
            let rule_id = rule["rule"]["ruleId"].as_str().unwrap().to_string();
            let package = ok(
                &gateway,
                ("POST", "/me/firmware"),
                id,
                Some(firmware_body()),
            )
            .await["firmwareId"]
                .as_str()
                .unwrap()
                .to_string();
            let hook = ok(
                &gateway,
                ("POST", "/me/webhooks"),
                id,
                Some(webhook_body(&format!("https://hooks.example.com/{id}"))),
            )
            .await;
            let hook_id = hook["webhookId"].as_str().unwrap().to_string();
            secrets.entry(Fleet::Personal(p)).or_default().extend([
                package.clone(),
                hook_id.clone(),
                hook["secret"].as_str().unwrap().to_string(),
                id.to_string(),
                email(id),
                device.clone(),
                format!("Personal device of {id}"),
                format!("pt-{id}"),
                format!("Profile of {id}"),
                rule_id.clone(),
                format!("Personal rule of {id}"),
            ]);
            personal_token.insert(p, registered["token"].as_str().unwrap().to_string());
            personal_device.insert(p, device);
            personal_rule.insert(p, rule_id);
            personal_firmware.insert(p, package);
            personal_webhook.insert(p, hook_id);
        }

        // The two organizations.
        let org_a = ok(
            &gateway,
            ("POST", "/orgs"),
            Person::Owner.id(),
            Some(json!({"name": A_NAME})),
        )
        .await["org"]["orgId"]
            .as_str()
            .unwrap()
            .to_string();
        let org_b = ok(
            &gateway,
            ("POST", "/orgs"),
            Person::BMember.id(),
            Some(json!({"name": B_NAME})),
        )
        .await["org"]["orgId"]
            .as_str()
            .unwrap()
            .to_string();
        secrets.entry(Fleet::OrgA).or_default().extend([
            org_a.clone(),
            A_NAME.to_string(),
            A_TAG.to_string(),
        ]);
        secrets.entry(Fleet::OrgB).or_default().extend([
            org_b.clone(),
            B_NAME.to_string(),
            "bravo-zone".to_string(),
            Person::BMember.id().to_string(),
            email(Person::BMember.id()),
        ]);

        // A's members, one of each role, and one removed.
        for (p, role) in [
            (Person::Admin, "admin"),
            (Person::Operator, "operator"),
            (Person::Viewer, "viewer"),
            (Person::Removed, "admin"),
        ] {
            let invitation = ok(
                &gateway,
                ("POST", &format!("/orgs/{org_a}/invitations")),
                Person::Owner.id(),
                Some(json!({"role": role})),
            )
            .await;
            let code = invitation["invitation"]["code"].as_str().unwrap();
            ok(
                &gateway,
                ("POST", &format!("/invitations/{code}/accept")),
                p.id(),
                None,
            )
            .await;
        }
        ok(
            &gateway,
            (
                "DELETE",
                &format!("/orgs/{org_a}/members/{}", Person::Removed.id()),
            ),
            Person::Owner.id(),
            None,
        )
        .await;
        for p in [
            Person::Owner,
            Person::Admin,
            Person::Operator,
            Person::Viewer,
        ] {
            secrets
                .entry(Fleet::OrgA)
                .or_default()
                .extend([p.id().to_string(), email(p.id())]);
        }

        // Each organization's devices, rule, alarm, rollout and an open invitation.
        let mut world = World {
            table,
            gateway,
            org_a: org_a.clone(),
            org_b: org_b.clone(),
            a_device: "acme-dev-1".into(),
            a_alarm: String::new(),
            a_rollout: String::new(),
            a_firmware: String::new(),
            a_webhook: String::new(),
            personal_device,
            personal_token,
            personal_rule,
            personal_firmware,
            personal_webhook,
            _moto: moto,
            secrets,
            counter: 0,
        };
        let mut alarms = Vec::new();
        let mut rollouts = Vec::new();
        let mut packages = Vec::new();
        let mut hooks = Vec::new();
        for (fleet, org, who, prefix, tag) in [
            (Fleet::OrgA, &org_a, Person::Owner, "acme", A_TAG),
            (Fleet::OrgB, &org_b, Person::BMember, "bravo", "bravo-zone"),
        ] {
            let mut tokens = Vec::new();
            for n in 1..=2 {
                let device = format!("{prefix}-dev-{n}");
                let name = format!("{prefix} device {n}");
                let registered = ok(
                    &world.gateway,
                    ("POST", &format!("/orgs/{org}/devices")),
                    who.id(),
                    Some(
                        json!({"deviceId": device, "name": name, "type": "thermostat",
                                "tags": [tag]}),
                    ),
                )
                .await;
                tokens.push(registered["token"].as_str().unwrap().to_string());
                world.secret(&fleet, [device, name]);
            }
            let rule = ok(
                &world.gateway,
                ("POST", &format!("/orgs/{org}/rules")),
                who.id(),
                Some(rule_body(
                    &format!("{prefix} hot rule"),
                    &format!("{prefix}-dev-1"),
                    80.0,
                )),
            )
            .await;
            world.secret(
                &fleet,
                [
                    rule["rule"]["ruleId"].as_str().unwrap().to_string(),
                    format!("{prefix} hot rule"),
                ],
            );
            let hot = send(
                &world.gateway,
                "POST /devices/{deviceId}/events",
                ingest_request(
                    &format!("{prefix}-dev-1"),
                    &tokens[0],
                    json!([{"id": format!("{prefix}-evt-1"), "type": "temperature",
                            "value": 85.5, "at": ago(120)}]),
                ),
            )
            .await;
            assert_eq!(hot.status, 200, "{}", hot.body);
            let listed = ok(
                &world.gateway,
                ("GET", &format!("/orgs/{org}/alarms")),
                who.id(),
                None,
            )
            .await;
            let alarm = listed["alarms"][0]["alarmId"]
                .as_str()
                .unwrap_or_else(|| panic!("{prefix}'s alarm: {listed}"))
                .to_string();
            let rollout = ok(
                &world.gateway,
                ("POST", &format!("/orgs/{org}/rollouts")),
                who.id(),
                Some(json!({"tag": tag, "desired": {"mode": "eco"}})),
            )
            .await["rollout"]["rolloutId"]
                .as_str()
                .unwrap()
                .to_string();
            let invitation = ok(
                &world.gateway,
                ("POST", &format!("/orgs/{org}/invitations")),
                who.id(),
                Some(json!({"role": "viewer"})),
            )
            .await;
            world.secret(
                &fleet,
                [
                    alarm.clone(),
                    rollout.clone(),
                    format!("{prefix}-evt-1"),
                    invitation["invitation"]["invitationId"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                ],
            );
            alarms.push(alarm);
            rollouts.push(rollout);

            // A firmware package whose image is uploaded (its first read checks it on S3) and
            // a webhook.
            let created = ok(
                &world.gateway,
                ("POST", &format!("/orgs/{org}/firmware")),
                who.id(),
                Some(firmware_body()),
            )
            .await;
            let put = reqwest::Client::new()
                .put(created["uploadUrl"].as_str().unwrap())
                .body(firmware_image())
                .send()
                .await
                .unwrap();
            assert_eq!(put.status(), 200, "{prefix}'s presigned PUT");
            let url = format!("https://hooks.example.com/{prefix}-hook");
            let hook = ok(
                &world.gateway,
                ("POST", &format!("/orgs/{org}/webhooks")),
                who.id(),
                Some(webhook_body(&url)),
            )
            .await;
            let package = created["firmwareId"].as_str().unwrap().to_string();
            let hook_id = hook["webhookId"].as_str().unwrap().to_string();
            world.secret(
                &fleet,
                [
                    package.clone(),
                    hook_id.clone(),
                    hook["secret"].as_str().unwrap().to_string(),
                    url,
                ],
            );
            packages.push(package);
            hooks.push(hook_id);
        }
        world.a_alarm = alarms[0].clone();
        world.a_rollout = rollouts[0].clone();
        world.a_firmware = packages[0].clone();
        world.a_webhook = hooks[0].clone();
        world
    }

    fn secret(&mut self, fleet: &Fleet, values: impl IntoIterator<Item = String>) {
        self.secrets
            .entry(fleet.clone())
            .or_default()
            .extend(values);
    }

    fn next_name(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}-{:03}", self.counter)
    }

    /// Sends as A's owner, which must succeed.
    async fn as_owner(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        ok(&self.gateway, (method, path), Person::Owner.id(), body).await
    }

    /// A new device of A's, to be changed or deleted.
    async fn throwaway_device(&mut self) -> String {
        let device = self.next_name("acme-tmp");
        self.as_owner(
            "POST",
            &format!("/orgs/{}/devices", self.org_a),
            Some(
                json!({"deviceId": device, "name": "Acme spare", "type": "thermostat",
                        "tags": [A_TAG]}),
            ),
        )
        .await;
        self.secret(&Fleet::OrgA, [device.clone()]);
        device
    }

    /// A new rule of A's, to be changed or deleted.
    async fn throwaway_rule(&mut self) -> String {
        let rule = self
            .as_owner(
                "POST",
                &format!("/orgs/{}/rules", self.org_a),
                Some(rule_body("Acme spare rule", &self.a_device.clone(), 99.0)),
            )
            .await["rule"]["ruleId"]
            .as_str()
            .unwrap()
            .to_string();
        self.secret(&Fleet::OrgA, [rule.clone()]);
        rule
    }

    /// A new firmware package of A's (pending), to be deleted.
    async fn throwaway_firmware(&mut self) -> String {
        let package = self
            .as_owner(
                "POST",
                &format!("/orgs/{}/firmware", self.org_a),
                Some(firmware_body()),
            )
            .await["firmwareId"]
            .as_str()
            .unwrap()
            .to_string();
        self.secret(&Fleet::OrgA, [package.clone()]);
        package
    }

    /// A new running rollout of A's, to be cancelled (its slot comes back with the cancel).
    async fn throwaway_rollout(&mut self) -> String {
        let rollout = self
            .as_owner(
                "POST",
                &format!("/orgs/{}/rollouts", self.org_a),
                Some(json!({"tag": A_TAG, "desired": {"mode": "eco"}})),
            )
            .await["rollout"]["rolloutId"]
            .as_str()
            .unwrap()
            .to_string();
        self.secret(&Fleet::OrgA, [rollout.clone()]);
        rollout
    }

    /// A new webhook of A's (confirmed when `confirmed`), to be changed or deleted. Removed
    /// after its cell (an owner keeps at most 16 endpoints).
    async fn throwaway_webhook(&mut self, confirmed: bool) -> String {
        let created = self
            .as_owner(
                "POST",
                &format!("/orgs/{}/webhooks", self.org_a),
                Some(webhook_body("https://hooks.example.com/acme-spare")),
            )
            .await;
        let id = created["webhookId"].as_str().unwrap().to_string();
        self.secret(
            &Fleet::OrgA,
            [id.clone(), created["secret"].as_str().unwrap().to_string()],
        );
        if confirmed {
            let token = confirmation_token(&self.table, self.fleet_owner(None), &id).await;
            self.as_owner(
                "POST",
                &format!("/orgs/{}/webhooks/{id}/confirm", self.org_a),
                Some(json!({ "token": token })),
            )
            .await;
        }
        id
    }

    /// The owner key of A's fleet (`None`) or of a person's.
    fn fleet_owner(&self, person: Option<Person>) -> UserId {
        match person {
            None => UserId::org_fleet(&OrgId::parse(self.org_a.as_str()).unwrap()),
            Some(p) => UserId::parse(p.id()).unwrap(),
        }
    }

    /// A new invitation into A (role viewer): its id and code.
    async fn throwaway_invitation(&mut self) -> (String, String) {
        let answer = self
            .as_owner(
                "POST",
                &format!("/orgs/{}/invitations", self.org_a),
                Some(json!({"role": "viewer"})),
            )
            .await;
        let id = answer["invitation"]["invitationId"]
            .as_str()
            .unwrap()
            .to_string();
        self.secret(&Fleet::OrgA, [id.clone()]);
        (
            id,
            answer["invitation"]["code"].as_str().unwrap().to_string(),
        )
    }

    /// A new operator of A's, to be changed or removed.
    async fn throwaway_member(&mut self) -> String {
        let user = self.next_name("mx-tmp");
        let answer = self
            .as_owner(
                "POST",
                &format!("/orgs/{}/invitations", self.org_a),
                Some(json!({"role": "operator"})),
            )
            .await;
        let code = answer["invitation"]["code"].as_str().unwrap();
        ok(
            &self.gateway,
            ("POST", &format!("/invitations/{code}/accept")),
            &user,
            None,
        )
        .await;
        self.secret(
            &Fleet::OrgA,
            [
                user.clone(),
                email(&user),
                answer["invitation"]["invitationId"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ],
        );
        user
    }

    /// Deletes every device of A (before A's owner deletes A).
    async fn empty_org_a(&self) {
        loop {
            let listed = self
                .as_owner("GET", &format!("/orgs/{}/devices", self.org_a), None)
                .await;
            let devices = listed["devices"].as_array().unwrap().clone();
            if devices.is_empty() {
                break;
            }
            for d in devices {
                let id = d["deviceId"].as_str().unwrap();
                self.as_owner(
                    "DELETE",
                    &format!("/orgs/{}/devices/{id}", self.org_a),
                    None,
                )
                .await;
            }
        }
    }

    /// The fleets whose secrets an answer to `caller` about `targets` may carry.
    fn visible(&self, caller: Person, targets: &[Fleet]) -> BTreeSet<String> {
        let mut seen: BTreeSet<String> = self.secrets[&Fleet::Personal(caller)].clone();
        for t in targets {
            seen.extend(self.secrets.get(t).cloned().unwrap_or_default());
        }
        seen
    }

    /// Markers of a fleet's items: its owner key's partitions, its organization items, its
    /// devices (registrations and shared index entries name the device).
    fn markers(&self, fleet: &Fleet) -> Vec<String> {
        let mut markers = match fleet {
            Fleet::Personal(p) => vec![
                format!("USER#{}\"", p.id()),
                format!("USER#{}#", p.id()),
                format!("FIRMWARE#{}\"", p.id()),
            ],
            Fleet::OrgA => vec![format!("ORG#{}", self.org_a), format!("org:{}", self.org_a)],
            Fleet::OrgB => vec![format!("ORG#{}", self.org_b), format!("org:{}", self.org_b)],
        };
        match fleet {
            Fleet::Personal(p) => markers.push(self.personal_device[p].clone()),
            Fleet::OrgA => markers.extend(["acme-dev-1".into(), "acme-dev-2".into()]),
            Fleet::OrgB => markers.extend(["bravo-dev-1".into(), "bravo-dev-2".into()]),
        }
        markers
    }

    /// The secrets in `text` that are not `visible` (nor in what the request itself `sent`).
    fn foreign_secrets(&self, visible: &BTreeSet<String>, sent: &str, text: &str) -> Vec<String> {
        let mut found = Vec::new();
        for (fleet, secrets) in &self.secrets {
            for s in secrets {
                if !visible.contains(s) && !sent.contains(s.as_str()) && text.contains(s.as_str()) {
                    found.push(format!("{fleet:?}'s {s:?}"));
                }
            }
        }
        found
    }

    /// The changed items (`diff`) that belong to a fleet not `allowed`.
    fn foreign_changes(&self, allowed: &[Fleet], diff: &[String]) -> Vec<String> {
        let mut found = Vec::new();
        for fleet in self.fleets().into_iter().filter(|f| !allowed.contains(f)) {
            for marker in self.markers(&fleet) {
                if let Some(item) = diff.iter().find(|i| i.contains(&marker)) {
                    found.push(format!("changed {fleet:?}'s item: {item}"));
                }
            }
        }
        found
    }

    fn fleets(&self) -> Vec<Fleet> {
        Person::ALL
            .iter()
            .map(|p| Fleet::Personal(*p))
            .chain([Fleet::OrgA, Fleet::OrgB])
            .collect()
    }
}

/// What the matrix expects of one request.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    Success,
    /// 403 `role_required` naming the role.
    RoleRequired(Role),
    /// 404 `not_found`.
    NotFound,
    /// Another refusal: status and error code.
    Refused(u16, &'static str),
}

/// What to undo after a success, so the matrix stays valid.
enum Undo {
    Nothing,
    /// The caller joined A: the owner removes them again.
    LeaveA(Person),
    /// The caller created an organization: they delete it.
    DeleteOrg(Person),
    /// A device moved from A to the caller's personal fleet.
    Moved(Person, String),
}

/// One cell of the matrix, ready to send.
struct Plan {
    request: ApiRequest,
    /// What the request itself names (an answer may echo it).
    sent: String,
    /// The fleets a success may change and show.
    targets: Vec<Fleet>,
    expect: Expect,
    undo: Undo,
    /// A throwaway webhook of A's (its path), deleted after the cell whatever the answer.
    throwaway_webhook: Option<String>,
}

/// The path and fleet part of a route: `/me/devices/{deviceId}` and
/// `/orgs/{orgId}/devices/{deviceId}` are both `/devices/{deviceId}`.
fn fleet_path(path: &str) -> &str {
    path.strip_prefix("/orgs/{orgId}")
        .or_else(|| path.strip_prefix("/me"))
        .unwrap_or(path)
}

fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}

/// The valid body of a route (twins share theirs).
fn body_for(
    world: &World,
    route: &str,
    caller: Person,
    on_org: bool,
    fresh: &str,
) -> Option<Value> {
    let (method, path) = route.split_once(' ').unwrap();
    let own_device = &world.personal_device[&caller];
    let (device, tag) = if on_org {
        (world.a_device.as_str(), A_TAG.to_string())
    } else {
        (own_device.as_str(), format!("pt-{}", caller.id()))
    };
    Some(match (method, route, fleet_path(path)) {
        (_, "PUT /me", _) => json!({"name": format!("Profile of {}", caller.id())}),
        (_, "POST /orgs", _) => json!({"name": "Matrix scratch org"}),
        (_, "PATCH /orgs/{orgId}", _) => json!({"name": A_NAME}),
        ("POST", _, "/devices") => {
            json!({"deviceId": fresh, "name": "Matrix new device", "type": "thermostat"})
        }
        ("PATCH", _, "/devices/{deviceId}") => json!({"name": "Matrix renamed"}),
        ("PUT", _, "/devices/{deviceId}/desired") => json!({"desired": {"mode": "eco"}}),
        ("POST", _, "/devices/{deviceId}/commands") => json!({"name": "reboot"}),
        // From a person's fleet into A (for A's admins another person's device is a 404, for
        // A's other members the target's role is refused, for strangers A is a 404); from A's
        // fleet into the caller's own.
        (_, "POST /me/devices/{deviceId}/move", _) => json!({"toOrgId": world.org_a}),
        ("POST", _, "/devices/{deviceId}/move") => json!({"toOrgId": null}),
        ("POST", _, "/rollouts") => json!({"tag": tag, "desired": {"mode": "eco"}}),
        ("POST", _, "/rules") => rule_body("Matrix new rule", device, 90.0),
        ("PATCH", _, "/rules/{ruleId}") => json!({"condition": {"above": 95}}),
        ("PUT", _, "/retention") => json!({"deviceType": "thermostat", "rawDays": null}),
        ("POST", _, "/firmware") => firmware_body(),
        ("PUT", _, "/firmware-keys/{deviceType}") => json!({"publicKey": signing_public_key()}),
        ("POST", _, "/webhooks") => webhook_body(&format!("https://hooks.example.com/{fresh}")),
        ("PATCH", _, "/webhooks/{webhookId}") => json!({"description": "Matrix changed"}),
        ("PATCH", _, "/members/{userId}") => json!({"role": "viewer"}),
        ("POST", _, "/invitations") => json!({"role": "viewer"}),
        ("POST", "POST /devices/{deviceId}/events", _) => {
            json!({"events": [{"type": "temperature", "value": 20, "at": ago(5)}]})
        }
        ("POST", "POST /devices/{deviceId}/sync", _) => json!({}),
        ("GET" | "DELETE", _, _) => return None,
        // A confirmation's token is the webhook's own: `plan` reads it from the table.
        ("POST", _, p)
            if p.ends_with("/token")
                || p.ends_with("/ack")
                || p.ends_with("/accept")
                || p.ends_with("/rotate-secret")
                || p.ends_with("/confirm")
                || p.ends_with("/cancel")
                || p.ends_with("/pause")
                || p.ends_with("/resume")
                || p.ends_with("/test")
                || p.ends_with("/retry") =>
        {
            return None
        }
        _ => panic!("org_matrix: no valid body for {route}: add one to body_for"),
    })
}

/// A required query parameter's valid value.
fn query_value(route: &str, name: &str) -> String {
    match name {
        "type" => "temperature".into(),
        "severity" => "major".into(),
        "status" => "active".into(),
        "from" => ago(86_400),
        "to" => Timestamp::now().to_string(),
        _ => panic!("org_matrix: no value for the required query parameter {name} of {route}"),
    }
}

impl World {
    /// Builds the request of `route` for `caller`, making the throwaway things it changes.
    async fn plan(&mut self, route: &str, caller: Person) -> Plan {
        let need = need_of(route).expect("a need");
        let (method, template_path) = route.split_once(' ').unwrap();
        let on_org = template_path.starts_with("/orgs/{orgId}");
        let mutating = method != "GET";
        let mut path = template_path.to_string();
        let mut token = None;
        let mut if_match = None;
        let mut undo = Undo::Nothing;
        let mut aims_at_others = false;
        let mut throwaway_webhook = None;
        // The webhook aimed at: its owner and id (for a confirmation's token).
        let mut webhook = None;
        for name in path_params(template_path) {
            let value = match (name, on_org) {
                ("orgId", _) => self.org_a.clone(),
                ("deviceId", true) if mutating => self.throwaway_device().await,
                ("deviceId", true) => self.a_device.clone(),
                ("deviceId", false) if need == Need::DeviceToken => {
                    token = Some(self.personal_token[&caller].clone());
                    self.a_device.clone()
                }
                ("deviceId", false) => {
                    aims_at_others = true;
                    self.personal_device[&caller.next()].clone()
                }
                ("ruleId", true) => self.throwaway_rule().await,
                ("ruleId", false) => {
                    aims_at_others = true;
                    self.personal_rule[&caller.next()].clone()
                }
                ("alarmId", _) => {
                    aims_at_others |= !on_org;
                    self.a_alarm.clone()
                }
                // A cancel that succeeds ends its rollout: each gets one of its own (a
                // refused one changes nothing, so it may aim at A's shared rollout).
                ("rolloutId", true)
                    if mutating
                        && route.ends_with("/cancel")
                        && caller
                            .role_in_a()
                            .is_some_and(|held| held.includes(Role::Operator)) =>
                {
                    self.throwaway_rollout().await
                }
                ("rolloutId", _) => {
                    aims_at_others |= !on_org;
                    self.a_rollout.clone()
                }
                ("firmwareId", true) if mutating => self.throwaway_firmware().await,
                ("firmwareId", true) => self.a_firmware.clone(),
                ("firmwareId", false) => {
                    aims_at_others = true;
                    self.personal_firmware[&caller.next()].clone()
                }
                ("webhookId", true) => {
                    let id = if mutating {
                        let id = self.throwaway_webhook(route.ends_with("/test")).await;
                        throwaway_webhook = Some(format!("/orgs/{}/webhooks/{id}", self.org_a));
                        id
                    } else {
                        self.a_webhook.clone()
                    };
                    webhook = Some((self.fleet_owner(None), id.clone()));
                    id
                }
                ("webhookId", false) => {
                    aims_at_others = true;
                    let id = self.personal_webhook[&caller.next()].clone();
                    webhook = Some((self.fleet_owner(Some(caller.next())), id.clone()));
                    id
                }
                ("deliveryId", _) => {
                    let (owner, id) = webhook.clone().expect("a webhook in the path");
                    finished_delivery(&self.table, owner, &id).await
                }
                ("deviceType", _) => KEYED_TYPE.to_string(),
                ("userId", _) => self.throwaway_member().await,
                ("invitationId", _) => self.throwaway_invitation().await.0,
                ("code", _) => self.throwaway_invitation().await.1,
                ("date", _) => Timestamp::now().day().to_string(),
                _ => panic!("org_matrix: no value for the path parameter {name} of {route}"),
            };
            path = path.replace(&format!("{{{name}}}"), &value);
        }
        match (method, fleet_path(template_path)) {
            ("PATCH", "/devices/{deviceId}") | ("PATCH", "/rules/{ruleId}") => if_match = Some("1"),
            ("PUT", "/devices/{deviceId}/desired") => if_match = Some("0"),
            _ => {}
        }
        let fresh = if on_org {
            self.next_name("acme-new")
        } else {
            self.next_name(&format!("pd2-{}", caller.id()))
        };
        let mut body = body_for(self, route, caller, on_org, &fresh);
        if route.ends_with("/confirm") {
            // The right token (another person's own, on /me): only the role or the owner
            // can make it a refusal.
            let (owner, id) = webhook.clone().expect("a webhook in the path");
            body = Some(json!({"token": confirmation_token(&self.table, owner, &id).await}));
        }

        let mut request = ApiRequest::new(route, &path).caller(caller.id());
        for (name, value) in template_path
            .split('/')
            .zip(path.split('/'))
            .filter_map(|(t, v)| Some((t.strip_prefix('{')?.strip_suffix('}')?, v)))
        {
            request = request.param(name, value);
        }
        let doc = api_doc();
        let op = doc
            .operation(route)
            .unwrap_or_else(|| panic!("{route} is not in docs/openapi.yaml"));
        for p in doc.parameters(&op) {
            if p["in"] == "query" && p["required"] == true {
                let name = p["name"].as_str().unwrap();
                request = request.query(name, &query_value(route, name));
            }
        }
        if let Some(v) = if_match {
            request = request.header("if-match", v);
        }
        if let Some(t) = &token {
            request = request.header("authorization", &format!("Bearer {t}"));
        }
        if let Some(b) = &body {
            request = request.json(b.clone());
        }

        let a_member = caller.role_in_a();
        let expect = match need {
            Need::OwnFleet if aims_at_others && route == "POST /me/devices/{deviceId}/move" => {
                match a_member {
                    Some(held) if held.includes(Role::Admin) => Expect::NotFound,
                    Some(_) => Expect::RoleRequired(Role::Admin),
                    None => Expect::NotFound,
                }
            }
            Need::OwnFleet if aims_at_others => Expect::NotFound,
            Need::OwnFleet => Expect::Success,
            Need::SignedIn if route.ends_with("/accept") && a_member.is_some() => {
                Expect::Refused(409, "already_member")
            }
            Need::SignedIn => Expect::Success,
            Need::Role(needed) => match a_member {
                Some(held) if held.includes(needed) => Expect::Success,
                Some(_) => Expect::RoleRequired(needed),
                None => Expect::NotFound,
            },
            Need::FleetOperator => Expect::Refused(403, ""),
            Need::DeviceToken => Expect::Refused(401, ""),
        };
        // The matrix's rollouts change desired state: a caller allowed to pause or resume one
        // is told it is no firmware rollout (409, nothing changed); the pauses and resumes that
        // succeed are tested in tests/it/firmware_rollouts.rs.
        let expect = match expect {
            Expect::Success if route.ends_with("/pause") || route.ends_with("/resume") => {
                Expect::Refused(409, "rollout_not_firmware")
            }
            other => other,
        };
        let targets = match need {
            _ if route == "GET /orgs" => match a_member {
                Some(_) => vec![Fleet::OrgA],
                None if caller == Person::BMember => vec![Fleet::OrgB],
                None => vec![],
            },
            _ if route.ends_with("/accept") => vec![Fleet::OrgA],
            Need::OwnFleet | Need::SignedIn => vec![],
            _ if route.ends_with("/move") => vec![Fleet::OrgA, Fleet::Personal(caller)],
            _ => vec![Fleet::OrgA],
        };
        if expect == Expect::Success {
            undo = match route {
                "POST /orgs" => Undo::DeleteOrg(caller),
                r if r.ends_with("/accept") => Undo::LeaveA(caller),
                r if r.ends_with("/move") => {
                    let device = path.split('/').nth(4).unwrap().to_string();
                    Undo::Moved(caller, device)
                }
                _ => Undo::Nothing,
            };
        }
        Plan {
            sent: format!("{path} {}", body.map(|b| b.to_string()).unwrap_or_default()),
            request,
            targets,
            expect,
            undo,
            throwaway_webhook,
        }
    }

    /// Undoes what a success did that would change later cells.
    async fn undo(&mut self, undo: Undo, answer: &Answer) {
        match undo {
            Undo::Nothing => {}
            Undo::LeaveA(p) => {
                self.as_owner(
                    "DELETE",
                    &format!("/orgs/{}/members/{}", self.org_a, p.id()),
                    None,
                )
                .await;
            }
            Undo::DeleteOrg(p) => {
                let org = answer.body["org"]["orgId"].as_str().unwrap();
                ok(
                    &self.gateway,
                    ("DELETE", &format!("/orgs/{org}")),
                    p.id(),
                    None,
                )
                .await;
            }
            Undo::Moved(p, device) => {
                // Moved back into A by the same admin, from their own fleet: the device and
                // its tags are A's again, and the personal fleets stay as the fixture made them.
                ok(
                    &self.gateway,
                    ("POST", &format!("/me/devices/{device}/move")),
                    p.id(),
                    Some(json!({ "toOrgId": self.org_a })),
                )
                .await;
            }
        }
    }
}

/// Ids an answer names (`deviceId`, `ruleId`, ...), to add to the fleet it was about.
fn named_ids(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if matches!(
                    k.as_str(),
                    "deviceId"
                        | "ruleId"
                        | "rolloutId"
                        | "invitationId"
                        | "alarmId"
                        | "commandId"
                        | "firmwareId"
                        | "webhookId"
                        | "deliveryId"
                        | "secret"
                ) {
                    if let Some(s) = v.as_str() {
                        out.push(s.to_string());
                    }
                }
                named_ids(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| named_ids(v, out)),
        _ => {}
    }
}

/// The items that differ between two snapshots.
fn changed(before: &[Item], after: &[Item]) -> Vec<String> {
    let gone = before.iter().filter(|i| !after.contains(i));
    let new = after.iter().filter(|i| !before.contains(i));
    gone.chain(new).map(|i| format!("{i:?}")).collect()
}

/// One cell's outcome.
struct Cell {
    status: u16,
    /// An organization route's refusal for the role: read units and operations it cost
    /// (the authorization alone).
    refusal_cost: Option<(f64, u32)>,
    failures: Vec<String>,
    leaks: usize,
}

impl World {
    async fn run_cell(&mut self, route: &str, caller: Person) -> Cell {
        if route == "DELETE /orgs/{orgId}" && caller == Person::Owner {
            // Deleting A needs it empty (409 `org_not_empty` otherwise).
            self.empty_org_a().await;
        }
        let mut plan = self.plan(route, caller).await;
        let throwaway_webhook = plan.throwaway_webhook.take();
        let before = table_contents(&self.table).await;
        let answer = send(&self.gateway, route, plan.request.clone()).await;
        let after = table_contents(&self.table).await;
        let mut failures = Vec::new();
        let mut leaks = 0;
        let who = caller.id();

        if let Err(e) = check_answer(route, &answer) {
            failures.push(format!("{route} as {who}: not as documented: {e}"));
        }
        let success = (200..300).contains(&answer.status);
        let status_ok = match &plan.expect {
            Expect::Success => success,
            Expect::RoleRequired(role) => {
                answer.status == 403
                    && answer.error_code() == "role_required"
                    && answer.body["error"]["requiredRole"] == role.as_str()
            }
            Expect::NotFound => answer.status == 404 && answer.error_code() == "not_found",
            Expect::Refused(status, code) => {
                answer.status == *status && (code.is_empty() || answer.error_code() == *code)
            }
        };
        if !status_ok {
            failures.push(format!(
                "{route} as {who}: expected {:?}, got {} {}",
                plan.expect, answer.status, answer.body
            ));
        }

        // Nothing of a fleet the caller may not see, in the body or a header.
        let visible = self.visible(caller, if success { &plan.targets } else { &[] });
        let mut text = answer.body.to_string();
        for (name, value) in answer.headers.iter() {
            text.push_str(&format!(" {name}: {}", value.to_str().unwrap_or_default()));
        }
        for found in self.foreign_secrets(&visible, &plan.sent, &text) {
            leaks += 1;
            failures.push(format!(
                "LEAK {route} as {who}: the answer carries {found}: {text}"
            ));
        }
        // A created resource's Location is in the fleet it was created in.
        if let (true, Some(location)) = (success, answer.headers.get("location")) {
            let location = location.to_str().unwrap_or_default();
            let prefix = if route.contains(" /orgs/{orgId}") {
                format!("/orgs/{}/", self.org_a)
            } else {
                "/me/".to_string()
            };
            if !location.starts_with(&prefix) {
                failures.push(format!(
                    "{route} as {who}: Location {location} is not under {prefix}"
                ));
            }
        }

        // A refusal changes nothing; a success nothing of another fleet.
        let diff = changed(&before, &after);
        if !success && !diff.is_empty() {
            leaks += 1;
            failures.push(format!(
                "CHANGE {route} as {who}: refused with {} but changed the table: {diff:?}",
                answer.status
            ));
        }
        if success {
            let mut allowed = plan.targets.clone();
            if matches!(need_of(route), Some(Need::OwnFleet)) {
                allowed.push(Fleet::Personal(caller));
            }
            for change in self.foreign_changes(&allowed, &diff) {
                leaks += 1;
                failures.push(format!("CHANGE {route} as {who}: {change}"));
            }
            let mut ids = Vec::new();
            named_ids(&answer.body, &mut ids);
            let fleet = match plan.targets.first() {
                _ if matches!(need_of(route), Some(Need::OwnFleet)) => Fleet::Personal(caller),
                Some(f) => f.clone(),
                None => Fleet::Personal(caller),
            };
            if !route.ends_with("/move") {
                self.secret(&fleet, ids);
            }
            let undo = plan.undo;
            self.undo(undo, &answer).await;
        }
        if let Some(path) = throwaway_webhook {
            // Gone already when the cell deleted it.
            let removed = send(
                &self.gateway,
                "DELETE /orgs/{orgId}/webhooks/{webhookId}",
                ApiRequest::delete(&path).caller(Person::Owner.id()),
            )
            .await;
            assert!(
                [204, 404].contains(&removed.status),
                "removing {path}: {} {}",
                removed.status,
                removed.body
            );
        }
        let refusal_cost = (route.contains("/orgs/{orgId}")
            && matches!(plan.expect, Expect::RoleRequired(_) | Expect::NotFound)
            && status_ok)
            .then(|| (answer.used.read_units, answer.used.requests()));
        if let Some((units, operations)) = refusal_cost {
            if units > 0.5 || operations != 1 {
                failures.push(format!(
                    "{route} as {who}: refused after {operations} operations, {units} read units (the membership read alone is 1 GetItem, 0.5)"
                ));
            }
        }
        Cell {
            refusal_cost,
            status: answer.status,
            failures,
            leaks,
        }
    }
}

/// The controls: B's real answer, as if it were an answer to A's viewer, is a leak; B's real
/// change, as if made on A's behalf, a change of another's data. (Otherwise a matrix of 0
/// leaks could be a blind scanner's.)
async fn detectors_catch_a_planted_leak_and_change(world: &mut World) {
    let b_devices = ok(
        &world.gateway,
        ("GET", &format!("/orgs/{}/devices", world.org_b)),
        Person::BMember.id(),
        None,
    )
    .await
    .to_string();
    let visible = world.visible(Person::Viewer, &[Fleet::OrgA]);
    let found = world.foreign_secrets(&visible, "", &b_devices);
    assert!(
        found.iter().any(|f| f.contains("bravo-dev-1")),
        "the leak detector misses B's device in an answer to A's viewer: {found:?}"
    );
    let before = table_contents(&world.table).await;
    ok(
        &world.gateway,
        ("POST", &format!("/orgs/{}/rules", world.org_b)),
        Person::BMember.id(),
        Some(rule_body("bravo control rule", "bravo-dev-2", 70.0)),
    )
    .await;
    let diff = changed(&before, &table_contents(&world.table).await);
    assert!(
        !world
            .foreign_changes(&[Fleet::OrgA, Fleet::Personal(Person::Viewer)], &diff)
            .is_empty(),
        "the change detector misses a change of B's rules: {diff:?}"
    );
}

/// The order of callers for `route`: A's owner last where a success ends the organization.
fn callers_for(route: &str) -> Vec<Person> {
    let mut callers = Person::ALL.to_vec();
    if route == "DELETE /orgs/{orgId}" {
        callers.retain(|p| *p != Person::Owner);
        callers.push(Person::Owner);
    }
    callers
}

#[tokio::test]
async fn every_route_for_every_caller_answers_by_role_and_leaks_nothing() {
    let mut world = World::new().await;
    detectors_catch_a_planted_leak_and_change(&mut world).await;
    let mut routes: Vec<String> = template().routes.iter().map(|r| r.route_key()).collect();
    // Deleting A ends its rows of the matrix: last.
    routes.sort_by_key(|r| r == "DELETE /orgs/{orgId}");

    let started = Instant::now();
    let mut cells = 0;
    let mut leaks = 0;
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    let mut refusal_costs = Vec::new();
    for route in &routes {
        let mut row = BTreeMap::new();
        for caller in callers_for(route) {
            let cell = Box::pin(world.run_cell(route, caller)).await;
            cells += 1;
            leaks += cell.leaks;
            refusal_costs.extend(cell.refusal_cost);
            failures.extend(cell.failures);
            row.insert(caller, cell.status);
        }
        rows.push((route.clone(), row));
    }

    // A is gone for everyone (the last cell deleted it), and what of it is left.
    for p in Person::ALL {
        let orgs = ok(&world.gateway, ("GET", "/orgs"), p.id(), None).await;
        if orgs.to_string().contains(&world.org_a) {
            failures.push(format!("GET /orgs as {}: lists deleted A: {orgs}", p.id()));
        }
    }
    let gone = send(
        &world.gateway,
        "GET /orgs/{orgId}",
        ApiRequest::get(&format!("/orgs/{}", world.org_a)).caller(Person::Owner.id()),
    )
    .await;
    if gone.status != 404 {
        failures.push(format!(
            "GET /orgs/{{A}} after its deletion: {} {}",
            gone.status, gone.body
        ));
    }
    let mut residue: BTreeMap<String, usize> = BTreeMap::new();
    for item in table_contents(&world.table).await {
        let text = format!("{item:?}");
        if world.markers(&Fleet::OrgA)[..2]
            .iter()
            .any(|m| text.contains(m.as_str()))
        {
            let kind = entity_type(&item).map_or("unknown".to_string(), |t| format!("{t:?}"));
            *residue.entry(kind).or_default() += 1;
        }
    }
    println!(
        "org_matrix: after DELETE /orgs/{{A}}, items still naming A (events of its deleted devices expire by TTL): {residue:?}"
    );

    println!("org_matrix: route × caller → status");
    println!(
        "{:<52} {}",
        "route",
        Person::ALL.map(|p| format!("{:>8}", &p.id()[3..])).join("")
    );
    for (route, row) in &rows {
        println!(
            "{route:<52} {}",
            Person::ALL.map(|p| format!("{:>8}", row[&p])).join("")
        );
    }
    let refused = rows
        .iter()
        .flat_map(|(_, r)| r.values())
        .filter(|s| **s >= 400)
        .count();
    println!(
        "org_matrix: {cells} requests ({} routes × {} callers) in {:.1} s: {} answered 2xx, {refused} refused; {} wrong, {leaks} leaks or changes of another's data",
        routes.len(),
        Person::ALL.len(),
        started.elapsed().as_secs_f64(),
        cells - refused,
        failures.len(),
    );
    println!(
        "org_matrix: authorization cost: {} organization-route refusals (403 for the role, 404 for non-members) each cost at most {} read units in at most {} DynamoDB operation (the membership GetItem, before any fleet read)",
        refusal_costs.len(),
        refusal_costs.iter().map(|(u, _)| *u).fold(0.0, f64::max),
        refusal_costs.iter().map(|(_, o)| *o).max().unwrap_or(0),
    );
    for f in &failures {
        println!("  {f}");
    }
    assert_eq!(leaks, 0, "leaks: see above");
    assert!(
        failures.is_empty(),
        "{} cells wrong: see above",
        failures.len()
    );
}

/// A removed member, a lowered admin and a member who left are refused on their very next
/// request: authorization reads the membership item every time (no cache).
#[tokio::test]
async fn a_removed_or_lowered_member_is_refused_on_the_next_request() {
    let table = fresh_table().await;
    let gateway = Gateway::new(&table);
    let (owner, admin, viewer, leaver) = ("rv-owner", "rv-admin", "rv-viewer", "rv-leaver");
    let org = ok(
        &gateway,
        ("POST", "/orgs"),
        owner,
        Some(json!({"name": "Revocation"})),
    )
    .await["org"]["orgId"]
        .as_str()
        .unwrap()
        .to_string();
    for (who, role) in [(admin, "admin"), (viewer, "viewer"), (leaver, "operator")] {
        let invitation = ok(
            &gateway,
            ("POST", &format!("/orgs/{org}/invitations")),
            owner,
            Some(json!({"role": role})),
        )
        .await;
        let code = invitation["invitation"]["code"].as_str().unwrap();
        ok(
            &gateway,
            ("POST", &format!("/invitations/{code}/accept")),
            who,
            None,
        )
        .await;
    }
    let devices = format!("/orgs/{org}/devices");
    let register =
        |n: u32| json!({"deviceId": format!("rv-dev-{n}"), "name": "Revoked", "type": "meter"});
    for who in [admin, viewer, leaver] {
        ok(&gateway, ("GET", &devices), who, None).await;
    }
    ok(&gateway, ("POST", &devices), admin, Some(register(1))).await;

    /// Sends until refused (at most 60 s): the requests it took and the time from `since`.
    /// Sends until refused (at most 60 s), nothing in between: the requests it took, the ms
    /// from `since` to the refusal's answer, and the answer. The refused request is then sent
    /// again between two snapshots of the table: a refusal changes nothing.
    async fn first_refusal(
        table: &FleetTable,
        gateway: &Gateway,
        request: impl Fn() -> (String, ApiRequest),
        since: Instant,
    ) -> (usize, f64, Answer) {
        let mut tries = 0;
        loop {
            tries += 1;
            let (route, r) = request();
            let answer = send(gateway, &route, r).await;
            if answer.status >= 400 {
                let delay = since.elapsed().as_secs_f64() * 1000.0;
                let before = table_contents(table).await;
                let (route, r) = request();
                let again = send(gateway, &route, r).await;
                assert_eq!(again.status, answer.status, "{}", again.body);
                assert_eq!(
                    table_contents(table).await,
                    before,
                    "a refusal changed nothing"
                );
                return (tries, delay, answer);
            }
            assert!(since.elapsed().as_secs() < 60, "still served after 60 s");
        }
    }

    // Removed: the next request is a 404.
    ok(
        &gateway,
        ("DELETE", &format!("/orgs/{org}/members/{viewer}")),
        owner,
        None,
    )
    .await;
    let removed_at = Instant::now();
    let (tries, removed_ms, answer) = first_refusal(
        &table,
        &gateway,
        || {
            (
                "GET /orgs/{orgId}/devices".into(),
                ApiRequest::get(&devices).caller(viewer),
            )
        },
        removed_at,
    )
    .await;
    assert_eq!((answer.status, answer.error_code()), (404, "not_found"));
    assert_eq!(tries, 1, "refused on the very next request");

    // Lowered from admin to viewer: the next write is a 403 naming admin; reading still works.
    let lowered = ok(
        &gateway,
        ("PATCH", &format!("/orgs/{org}/members/{admin}")),
        owner,
        Some(json!({"role": "viewer"})),
    )
    .await;
    assert_eq!(lowered["member"]["role"], "viewer");
    let lowered_at = Instant::now();
    let (tries_lowered, lowered_ms, answer) = first_refusal(
        &table,
        &gateway,
        || {
            (
                "POST /orgs/{orgId}/devices".into(),
                ApiRequest::post(&devices).caller(admin).json(register(2)),
            )
        },
        lowered_at,
    )
    .await;
    assert_eq!(
        (
            answer.status,
            answer.error_code(),
            answer.body["error"]["requiredRole"].as_str()
        ),
        (403, "role_required", Some("admin")),
        "{}",
        answer.body
    );
    assert_eq!(tries_lowered, 1, "refused on the very next request");
    ok(&gateway, ("GET", &devices), admin, None).await;

    // Left: their own next request is a 404.
    ok(
        &gateway,
        ("DELETE", &format!("/orgs/{org}/members/{leaver}")),
        leaver,
        None,
    )
    .await;
    let left_at = Instant::now();
    let (tries_left, left_ms, answer) = first_refusal(
        &table,
        &gateway,
        || {
            (
                "GET /orgs/{orgId}/devices".into(),
                ApiRequest::get(&devices).caller(leaver),
            )
        },
        left_at,
    )
    .await;
    assert_eq!((answer.status, answer.error_code()), (404, "not_found"));
    assert_eq!(tries_left, 1);
    println!(
        "org_matrix: revocation takes effect on the next request: removed member refused {removed_ms:.1} ms after the removal's answer ({tries} request), lowered admin {lowered_ms:.1} ms ({tries_lowered}), a member who left {left_ms:.1} ms ({tries_left}); no cache (DynamoDB Local has no replication lag: in AWS add an eventually consistent read's, typically < 1 s)"
    );
}
