//! What an organization request costs over its personal twin (issue 33: "at most one extra
//! 0.5-unit read for the caller's membership"): the same fleet, owned once by a person and
//! once by an organization, read and changed through `/me/...` and `/orgs/{orgId}/...`. Each
//! organization request issues exactly the personal request's work plus one GetItem of the
//! caller's membership (AP-O13), 0.5 read units.

use std::sync::Arc;

use fleet_tests::*;
use serde_json::json;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::store::metrics::MeterSnapshot;

/// The person whose fleet is the organization's twin: an id as long as the organization's
/// owner key (`org:` and the 21-character id), so both fleets' items are the same size.
const PERSON: &str = "twin-person-0000000000000";
/// Who creates the organization.
const OWNER: &str = "twin-org-owner";
const DEVICES: usize = 3;
const EVENTS: usize = 5;

/// Registers `DEVICES` devices at `collection` (`/me/devices` or its organization twin) and
/// stores `EVENTS` events for each; the devices are `{prefix}{d}`.
async fn fleet(table: &shared::FleetTable, register: impl Fn(&str) -> ApiRequest, prefix: &str) {
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    for d in 0..DEVICES {
        let device = format!("{prefix}{d}");
        let a = device_updates(
            table,
            register(&device).json(
                json!({"deviceId": device, "name": "Boiler room", "type": "thermostat",
                       "tags": ["plant"]}),
            ),
        )
        .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        let token = a.body["token"].as_str().unwrap().to_string();
        let events: Vec<_> = (0..EVENTS)
            .map(|i| json!({"type": "temperature", "value": 20 + i, "at": ago(600 - i as i64)}))
            .collect();
        let a = ingest(&ingestor, ingest_request(&device, &token, json!(events))).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
    }
}

fn show(used: &MeterSnapshot) -> String {
    format!(
        "{} requests {:?}, {} read units, {} write units",
        used.requests(),
        used.operations,
        used.read_units,
        used.write_units
    )
}

#[tokio::test]
async fn an_organization_request_costs_its_personal_twin_plus_one_half_unit_read() {
    let table = fresh_table().await;
    let created = device_updates(
        &table,
        ApiRequest::new("POST /orgs", "/orgs")
            .caller(OWNER)
            .json(json!({"name": "Twin Works"})),
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let org = created.body["org"]["orgId"].as_str().unwrap().to_string();
    assert_eq!(PERSON.len(), format!("org:{org}").len());

    fleet(
        &table,
        |_| ApiRequest::new("POST /me/devices", "/me/devices").caller(PERSON),
        "twin-p-",
    )
    .await;
    fleet(
        &table,
        |_| {
            ApiRequest::new(
                "POST /orgs/{orgId}/devices",
                &format!("/orgs/{org}/devices"),
            )
            .param("orgId", &org)
            .caller(OWNER)
        },
        "twin-o-",
    )
    .await;

    // Reads: the route below `/me` or `/orgs/{orgId}`, and the device it names (if any).
    let reads = [
        ("/dashboard", None),
        ("/devices", None),
        ("/devices/{deviceId}", Some(1)),
    ];
    for (route, device) in reads {
        let path = |prefix: &str| match device {
            Some(d) => route.replace("{deviceId}", &format!("{prefix}{d}")),
            None => route.to_string(),
        };
        let mut personal = ApiRequest::new(
            &format!("GET /me{route}"),
            &format!("/me{}", path("twin-p-")),
        )
        .caller(PERSON);
        let mut organization = ApiRequest::new(
            &format!("GET /orgs/{{orgId}}{route}"),
            &format!("/orgs/{org}{}", path("twin-o-")),
        )
        .param("orgId", &org)
        .caller(OWNER);
        if let Some(d) = device {
            personal = personal.param("deviceId", &format!("twin-p-{d}"));
            organization = organization.param("deviceId", &format!("twin-o-{d}"));
        }
        let mine = dashboard(&table, personal).await;
        let theirs = dashboard(&table, organization).await;
        assert_eq!((mine.status, theirs.status), (200, 200), "{route}");
        compare(&format!("GET {route}"), &mine.used, &theirs.used);
        if route == "/dashboard" {
            assert_eq!(mine.body["devices"].as_array().unwrap().len(), DEVICES);
            assert_eq!(theirs.body["devices"].as_array().unwrap().len(), DEVICES);
        }
    }

    // A write: a status change of device 2 at version 1 (a device's twin in the other fleet).
    let patch = json!({"status": "maintenance"});
    let mine = device_updates(
        &table,
        ApiRequest::new("PATCH /me/devices/{deviceId}", "/me/devices/twin-p-2")
            .param("deviceId", "twin-p-2")
            .caller(PERSON)
            .header("If-Match", "1")
            .json(patch.clone()),
    )
    .await;
    let theirs = device_updates(
        &table,
        ApiRequest::new(
            "PATCH /orgs/{orgId}/devices/{deviceId}",
            &format!("/orgs/{org}/devices/twin-o-2"),
        )
        .param("orgId", &org)
        .param("deviceId", "twin-o-2")
        .caller(OWNER)
        .header("If-Match", "1")
        .json(patch),
    )
    .await;
    assert_eq!(
        (mine.status, theirs.status),
        (200, 200),
        "{:?}",
        theirs.body
    );
    compare("PATCH /devices/{deviceId}", &mine.used, &theirs.used);
}

/// The organization request did the personal one's work and one GetItem of 0.5 units more.
fn compare(what: &str, personal: &MeterSnapshot, org: &MeterSnapshot) {
    println!(
        "{what}\n  personal:     {}\n  organization: {}",
        show(personal),
        show(org)
    );
    assert_eq!(org.requests(), personal.requests() + 1, "{what}");
    let mut expected = personal.operations.clone();
    *expected.entry("GetItem".into()).or_default() += 1;
    assert_eq!(org.operations, expected, "{what}");
    assert!(
        (org.read_units - personal.read_units - 0.5).abs() < 1e-9,
        "{what}: {} vs {} read units",
        org.read_units,
        personal.read_units
    );
    assert!(
        (org.write_units - personal.write_units).abs() < 1e-9,
        "{what}: {} vs {} write units",
        org.write_units,
        personal.write_units
    );
}
