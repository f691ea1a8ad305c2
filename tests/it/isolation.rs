//! Isolation: users A and B each own a profile, devices, tags and events (created through the
//! handlers). B tries every route with A's device ids, tags, event ids, cursors (taken from
//! A's real answers) and device tokens, and the operator routes without the admin group. Every
//! attempt is a 4xx, or B's own data only where that is the defined answer; no answer carries
//! anything of A's; the 4xx change nothing. Key-shaped and delimiter-carrying values in every
//! path, query and body id field are 400s naming the field.

use fleet_tests::gateway::{check_answer, Gateway};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::keys;
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;
use shared::FleetTable;

const A: &str = "user-a";
const B: &str = "user-b";

/// What A owns, and the credentials and cursors A was given.
struct World {
    table: FleetTable,
    gateway: Gateway,
    a_token: String,
    a_other_token: String,
    b_token: String,
    /// A's cursors by listing: AP-02, AP-12, AP-04, AP-05, AP-DASH.
    a_cursors: Vec<(PatternId, String)>,
}

/// Strings only A's data contains: none may appear in an answer to B.
fn secrets_of_a(world: &World) -> Vec<String> {
    let mut s: Vec<String> = [
        A,
        "Ada Secretname",
        "user-a@example.com",
        "a-thermo-1",
        "a-door-2",
        "A private thermostat",
        "A private door",
        "a-tag-private",
        "a-evt-",
        "a-type-secret",
        "a-value-secret",
        "1234.5",
    ]
    .iter()
    .map(|v| v.to_string())
    .collect();
    s.push(world.a_token.clone());
    s.push(world.a_other_token.clone());
    s
}

async fn register(gateway: &Gateway, user: &str, body: Value) -> String {
    let answer = gateway
        .send(
            "POST /me/devices",
            ApiRequest::post("/me/devices").caller(user).json(body),
        )
        .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer.body["token"].as_str().unwrap().to_string()
}

async fn send_ok(gateway: &Gateway, route: &str, request: ApiRequest) -> Value {
    let answer = gateway.send(route, request).await;
    assert!(
        answer.status < 300,
        "{route}: {} {}",
        answer.status,
        answer.body
    );
    answer.body
}

async fn world() -> World {
    let table = fresh_table().await;
    let gateway = Gateway::new(&table);
    for (user, name) in [(A, "Ada Secretname"), (B, "Bob Plain")] {
        send_ok(
            &gateway,
            "PUT /me",
            ApiRequest::put("/me")
                .caller(user)
                .json(json!({ "name": name })),
        )
        .await;
    }
    let a_token = register(
        &gateway,
        A,
        json!({"deviceId": "a-thermo-1", "name": "A private thermostat", "type": "thermostat",
               "tags": ["a-tag-private", "shared-tag"]}),
    )
    .await;
    let a_other_token = register(
        &gateway,
        A,
        json!({"deviceId": "a-door-2", "name": "A private door", "type": "door",
               "tags": ["shared-tag"]}),
    )
    .await;
    let b_token = register(
        &gateway,
        B,
        json!({"deviceId": "b-thermo-1", "name": "B thermostat", "type": "thermostat",
               "tags": ["shared-tag", "b-tag"]}),
    )
    .await;
    let a_events: Vec<Value> = (0..4)
        .map(|i| {
            json!({"id": format!("a-evt-{i}"), "type": "a-type-secret",
                        "value": if i % 2 == 0 { json!("a-value-secret") } else { json!(1234.5) },
                        "at": ago(600 + i * 60)})
        })
        .collect();
    send_ok(
        &gateway,
        "POST /devices/{deviceId}/events",
        ingest_request("a-thermo-1", &a_token, json!(a_events)),
    )
    .await;
    send_ok(
        &gateway,
        "POST /devices/{deviceId}/events",
        ingest_request(
            "a-door-2",
            &a_other_token,
            json!([{"id": "a-evt-door", "type": "a-type-secret", "value": true, "at": ago(300)}]),
        ),
    )
    .await;
    send_ok(
        &gateway,
        "POST /devices/{deviceId}/events",
        ingest_request(
            "b-thermo-1",
            &b_token,
            json!([{"id": "b-evt-0", "type": "temperature", "value": 20.5, "at": ago(400)},
                   {"id": "b-evt-1", "type": "temperature", "value": 21.0, "at": ago(200)}]),
        ),
    )
    .await;

    // A's real cursors, each from A's own first page of one.
    let mut a_cursors = Vec::new();
    for (pattern, route, path, query, param) in [
        (
            PatternId::ListDevices,
            "GET /me/devices",
            "/me/devices",
            vec![("limit", "1")],
            None,
        ),
        (
            PatternId::DevicesByTag,
            "GET /me/devices",
            "/me/devices",
            vec![("limit", "1"), ("tag", "shared-tag")],
            None,
        ),
        (
            PatternId::DeviceEvents,
            "GET /me/devices/{deviceId}/events",
            "/me/devices/a-thermo-1/events",
            vec![("limit", "1")],
            Some("a-thermo-1"),
        ),
        (
            PatternId::UserEvents,
            "GET /me/events",
            "/me/events",
            vec![("limit", "1")],
            None,
        ),
    ] {
        let mut request = ApiRequest::new(route, path).caller(A);
        for (k, v) in query {
            request = request.query(k, v);
        }
        if let Some(id) = param {
            request = request.param("deviceId", id);
        }
        let body = send_ok(&gateway, route, request).await;
        let cursor = body["cursor"]
            .as_str()
            .unwrap_or_else(|| panic!("{pattern}: A's first page has a cursor: {body}"));
        a_cursors.push((pattern, cursor.to_string()));
    }
    // A dashboard cursor appears only past 1 MB of devices: build the one A would get.
    let dash = shared::model::cursor::encode(
        PatternId::Dashboard,
        vec![Some(
            key::device("user-a", "a-thermo-1")
                .attributes()
                .into_iter()
                .map(|(name, value)| (name, value.as_s().unwrap().clone()))
                .collect(),
        )],
    );
    a_cursors.push((PatternId::Dashboard, dash));
    World {
        table,
        gateway,
        a_token,
        a_other_token,
        b_token,
        a_cursors,
    }
}

/// Sends `request` and checks the answer: documented, its status `expect`ed, nothing of A's in
/// it, and for a 4xx, the table unchanged.
async fn attempt(world: &World, route: &str, request: ApiRequest, expect: &[u16]) -> Answer {
    let before = table_contents(&world.table).await;
    let answer = world.gateway.send(route, request).await;
    check_answer(route, &answer).unwrap();
    assert!(
        expect.contains(&answer.status),
        "{route}: expected {expect:?}, got {} {}",
        answer.status,
        answer.body
    );
    let text = answer.body.to_string();
    for secret in secrets_of_a(world) {
        assert!(
            !text.contains(&secret),
            "{route}: answer to B carries A's {secret:?}: {text}"
        );
    }
    for (name, value) in answer.headers.iter() {
        let value = value.to_str().unwrap_or_default();
        for secret in secrets_of_a(world) {
            assert!(
                !value.contains(&secret),
                "{route}: header {name} carries {secret:?}"
            );
        }
    }
    if answer.status >= 400 {
        assert_eq!(
            table_contents(&world.table).await,
            before,
            "{route}: {} changed the table",
            answer.status
        );
    }
    answer
}

fn as_b(route: &str, path: &str) -> ApiRequest {
    ApiRequest::new(route, path).caller(B)
}

#[tokio::test]
async fn user_b_reaches_nothing_of_user_a() {
    let w = world().await;
    let setup = w.gateway.sent();
    let cursor = |pattern: PatternId| {
        w.a_cursors
            .iter()
            .find(|(p, _)| *p == pattern)
            .map(|(_, c)| c.clone())
            .unwrap()
    };

    // B's own views hold only B's data.
    let me = attempt(&w, "GET /me", as_b("GET /me", "/me"), &[200]).await;
    assert_eq!(me.body["profile"]["userId"], B);
    let dash = attempt(
        &w,
        "GET /me/dashboard",
        as_b("GET /me/dashboard", "/me/dashboard"),
        &[200],
    )
    .await;
    let ids: Vec<&str> = dash.body["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["deviceId"].as_str())
        .collect();
    assert_eq!(ids, ["b-thermo-1"]);
    let list = attempt(
        &w,
        "GET /me/devices",
        as_b("GET /me/devices", "/me/devices"),
        &[200],
    )
    .await;
    assert_eq!(list.body["devices"].as_array().unwrap().len(), 1);
    // A tag only A uses: defined as an empty listing for B. A tag both use: B's device only.
    let tagged = attempt(
        &w,
        "GET /me/devices",
        as_b("GET /me/devices", "/me/devices").query("tag", "a-tag-private"),
        &[200],
    )
    .await;
    assert_eq!(tagged.body["devices"], json!([]));
    let shared = attempt(
        &w,
        "GET /me/devices",
        as_b("GET /me/devices", "/me/devices").query("tag", "shared-tag"),
        &[200],
    )
    .await;
    assert_eq!(shared.body["devices"].as_array().unwrap().len(), 1);
    let events = attempt(
        &w,
        "GET /me/events",
        as_b("GET /me/events", "/me/events"),
        &[200],
    )
    .await;
    let ids: Vec<&str> = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(ids, ["b-evt-1", "b-evt-0"]);

    // A's devices by id: as if they did not exist.
    for device in ["a-thermo-1", "a-door-2"] {
        let path = format!("/me/devices/{device}");
        attempt(
            &w,
            "GET /me/devices/{deviceId}",
            as_b("GET /me/devices/{deviceId}", &path).param("deviceId", device),
            &[404],
        )
        .await;
        attempt(
            &w,
            "GET /me/devices/{deviceId}/events",
            as_b(
                "GET /me/devices/{deviceId}/events",
                &format!("{path}/events"),
            )
            .param("deviceId", device),
            &[404],
        )
        .await;
        for version in ["1", "2"] {
            attempt(
                &w,
                "PATCH /me/devices/{deviceId}",
                as_b("PATCH /me/devices/{deviceId}", &path)
                    .param("deviceId", device)
                    .header("If-Match", version)
                    .json(json!({"status": "error", "name": "taken over", "tags": ["b-tag"]})),
                &[404],
            )
            .await;
        }
        attempt(
            &w,
            "DELETE /me/devices/{deviceId}",
            as_b("DELETE /me/devices/{deviceId}", &path).param("deviceId", device),
            &[404],
        )
        .await;
        // A's device tokens: B can neither get a new one nor cut A's devices off.
        for route in [
            "POST /me/devices/{deviceId}/token",
            "DELETE /me/devices/{deviceId}/token",
        ] {
            attempt(
                &w,
                route,
                as_b(route, &format!("{path}/token")).param("deviceId", device),
                &[404],
            )
            .await;
        }
        // Registering A's id: taken (ids are unique table-wide), without saying by whom.
        attempt(
            &w,
            "POST /me/devices",
            as_b("POST /me/devices", "/me/devices")
                .json(json!({"deviceId": device, "name": "mine", "type": "thermostat"})),
            &[409],
        )
        .await;
    }

    // A's cursors, on every listing B can call, with and without A's ids alongside.
    for (pattern, a_cursor) in &w.a_cursors {
        let listings = [
            (
                "GET /me/dashboard",
                as_b("GET /me/dashboard", "/me/dashboard"),
            ),
            ("GET /me/devices", as_b("GET /me/devices", "/me/devices")),
            (
                "GET /me/devices",
                as_b("GET /me/devices", "/me/devices").query("tag", "shared-tag"),
            ),
            (
                "GET /me/devices",
                as_b("GET /me/devices", "/me/devices").query("tag", "a-tag-private"),
            ),
            ("GET /me/events", as_b("GET /me/events", "/me/events")),
            (
                "GET /me/devices/{deviceId}/events",
                as_b(
                    "GET /me/devices/{deviceId}/events",
                    "/me/devices/b-thermo-1/events",
                )
                .param("deviceId", "b-thermo-1"),
            ),
            (
                "GET /me/devices/{deviceId}/events",
                as_b(
                    "GET /me/devices/{deviceId}/events",
                    "/me/devices/a-thermo-1/events",
                )
                .param("deviceId", "a-thermo-1"),
            ),
        ];
        for (route, request) in listings {
            let answer = attempt(&w, route, request.query("cursor", a_cursor), &[400]).await;
            assert_eq!(answer.error_field(), "cursor", "{pattern} on {route}");
        }
    }
    // A's own cursor still works for A (the rejections above are about the caller).
    let mine = w
        .gateway
        .send(
            "GET /me/devices",
            ApiRequest::get("/me/devices")
                .caller(A)
                .query("limit", "1")
                .query("cursor", &cursor(PatternId::ListDevices)),
        )
        .await;
    assert_eq!(mine.status, 200, "{}", mine.body);

    // Device tokens: A's for B's device, B's for A's, A's for A's other device.
    for (device, token) in [
        ("b-thermo-1", w.a_token.clone()),
        ("a-thermo-1", w.b_token.clone()),
        ("a-door-2", w.a_token.clone()),
        ("a-thermo-1", w.a_other_token.clone()),
    ] {
        attempt(
            &w,
            "POST /devices/{deviceId}/events",
            ingest_request(
                device,
                &token,
                json!([{"id": "a-evt-0", "type": "t", "value": 1, "at": ago(60)}]),
            ),
            &[401],
        )
        .await;
    }
    // B's device sending A's event ids stores B's events, and A's stay as they were.
    let a_items: Vec<Item> = table_contents(&w.table)
        .await
        .into_iter()
        .filter(|i| i["PK"].as_s().is_ok_and(|pk| pk.contains("user-a")))
        .collect();
    let answer = w
        .gateway
        .send(
            "POST /devices/{deviceId}/events",
            ingest_request(
                "b-thermo-1",
                &w.b_token,
                json!([{"id": "a-evt-0", "type": "a-type-secret", "value": 0, "at": ago(600)}]),
            ),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    // B's profile change touches B's profile only.
    attempt(
        &w,
        "PUT /me",
        as_b("PUT /me", "/me").json(json!({"name": "Bob Renamed"})),
        &[200],
    )
    .await;
    let a_after: Vec<Item> = table_contents(&w.table)
        .await
        .into_iter()
        .filter(|i| i["PK"].as_s().is_ok_and(|pk| pk.contains("user-a")))
        .collect();
    assert_eq!(a_after, a_items, "B's writes changed A's items");

    // Operator routes without the admin group: 403, with any parameters, any group spelling.
    let today = Timestamp::now().day();
    let admin_calls = [
        (
            "GET /admin/events",
            ApiRequest::get("/admin/events").query("type", "a-type-secret"),
        ),
        (
            "GET /admin/devices",
            ApiRequest::get("/admin/devices").query("status", "active"),
        ),
        (
            "GET /admin/reports/{date}",
            ApiRequest::get(&format!("/admin/reports/{today}")),
        ),
    ];
    for (route, request) in admin_calls {
        for groups in [
            None,
            Some("[]"),
            Some("[Admin]"),
            Some("[administrators]"),
            Some("admins"),
            Some("[\"ops\"]"),
        ] {
            let mut r = request.clone().caller(B);
            if let Some(g) = groups {
                r = r.claim("cognito:groups", g);
            }
            attempt(&w, route, r, &[403]).await;
        }
        attempt(&w, route, request.clone(), &[401]).await;
    }

    // Callers whose sub is key-shaped are not callers at all.
    let a = key::user("user-a");
    let key_shaped_subs = [
        keys::user_pk(&a),
        keys::event_pk(&a, &key::device_id("a-thermo-1")),
    ];
    for sub in key_shaped_subs
        .iter()
        .map(String::as_str)
        .chain(["user-b#", "", "a b"])
    {
        attempt(&w, "GET /me", ApiRequest::get("/me").caller(sub), &[401]).await;
        attempt(
            &w,
            "GET /me/events",
            ApiRequest::get("/me/events").caller(sub),
            &[401],
        )
        .await;
    }

    println!(
        "isolation: {} hostile requests (as user B, without the admin group, with key-shaped subs; after {setup} set-up requests)",
        w.gateway.sent() - setup
    );
}

/// Key-shaped (built by `shared::model::keys` from user A's ids), delimiter-carrying and lookalike
/// values.
fn injections() -> Vec<String> {
    let (a, device) = (key::user("user-a"), key::device_id("a-thermo-1"));
    let key_shaped = [
        keys::user_pk(&key::user("x")),
        keys::user_pk(&a),
        shared::model::entities::registration::registration_pk(&device),
        format!("{device}#{}", shared::model::entities::event::EVENT_PREFIX),
        keys::event_pk(&a, &device),
    ];
    key_shaped
        .into_iter()
        .chain(OTHER_INJECTIONS.iter().map(|s| s.to_string()))
        .collect()
}

/// Delimiter-carrying and lookalike values that are not keys of ours.
const OTHER_INJECTIONS: &[&str] = &[
    "#",
    "%23",
    "a%23b",
    "..",
    ".",
    "../a-thermo-1",
    "\u{FF03}",
    "\u{FE5F}x",
    "a\u{2010}thermo",
    "a-therm\u{043E}-1",
    "a\u{0}b",
    "a\nb",
    "",
];

#[tokio::test]
async fn key_injection_in_every_id_field_is_a_400_naming_the_field() {
    let w = world().await;
    let today = Timestamp::now().day();
    let before = table_contents(&w.table).await;
    let mut tried = 0;
    let injections = injections();
    for bad in &injections {
        let event =
            |id: &str, kind: &str| json!([{"id": id, "type": kind, "value": 1, "at": ago(60)}]);
        // (route, request, field): one id field carrying `bad`, everything else valid.
        let mut cases: Vec<(&str, ApiRequest, String)> = Vec::new();
        if !bad.is_empty() {
            // An empty path segment never reaches a route (API Gateway has no match).
            for (route, path) in [
                ("GET /me/devices/{deviceId}", "/me/devices/x"),
                ("GET /me/devices/{deviceId}/events", "/me/devices/x/events"),
                ("DELETE /me/devices/{deviceId}", "/me/devices/x"),
            ] {
                cases.push((
                    route,
                    ApiRequest::new(route, path)
                        .caller(B)
                        .param("deviceId", bad),
                    "deviceId".into(),
                ));
            }
            cases.push((
                "PATCH /me/devices/{deviceId}",
                ApiRequest::patch("/me/devices/x")
                    .caller(B)
                    .param("deviceId", bad)
                    .header("If-Match", "1")
                    .json(json!({"status": "error"})),
                "deviceId".into(),
            ));
            cases.push((
                "POST /devices/{deviceId}/events",
                ingest_request("x", &w.b_token, event("e-1", "t")).param("deviceId", bad),
                "deviceId".into(),
            ));
            cases.push((
                "GET /admin/reports/{date}",
                ApiRequest::get("/admin/reports/x")
                    .admin("ops")
                    .param("date", &format!("{today}{bad}")),
                "date".into(),
            ));
        }
        cases.push((
            "GET /me/devices",
            as_b("GET /me/devices", "/me/devices").query("tag", bad),
            "tag".into(),
        ));
        cases.push((
            "GET /admin/events",
            ApiRequest::get("/admin/events")
                .admin("ops")
                .query("type", bad),
            "type".into(),
        ));
        cases.push((
            "GET /admin/devices",
            ApiRequest::get("/admin/devices")
                .admin("ops")
                .query("status", bad),
            "status".into(),
        ));
        for (route, path) in [
            ("GET /me/dashboard", "/me/dashboard"),
            ("GET /me/devices", "/me/devices"),
            ("GET /me/events", "/me/events"),
        ] {
            cases.push((
                route,
                as_b(route, path).query("cursor", bad),
                "cursor".into(),
            ));
        }
        cases.push((
            "GET /me/devices/{deviceId}/events",
            as_b(
                "GET /me/devices/{deviceId}/events",
                "/me/devices/b-thermo-1/events",
            )
            .param("deviceId", "b-thermo-1")
            .query("cursor", bad),
            "cursor".into(),
        ));
        let register = |field: &str| {
            let mut body =
                json!({"deviceId": "b-new", "name": "New", "type": "thermostat", "tags": ["ok"]});
            match field {
                "tags[0]" => body["tags"] = json!([bad]),
                other => body[other] = json!(bad),
            }
            as_b("POST /me/devices", "/me/devices").json(body)
        };
        for field in ["deviceId", "type", "tags[0]"] {
            cases.push(("POST /me/devices", register(field), field.into()));
        }
        for (body, field) in [
            (json!({"tags": ["ok", bad]}), "tags[1]"),
            (json!({"status": bad}), "status"),
        ] {
            cases.push((
                "PATCH /me/devices/{deviceId}",
                as_b("PATCH /me/devices/{deviceId}", "/me/devices/b-thermo-1")
                    .param("deviceId", "b-thermo-1")
                    .header("If-Match", "1")
                    .json(body),
                field.into(),
            ));
        }
        cases.push((
            "POST /devices/{deviceId}/events",
            ingest_request("b-thermo-1", &w.b_token, event(bad, "t")),
            "events[0].id".into(),
        ));
        cases.push((
            "POST /devices/{deviceId}/events",
            ingest_request("b-thermo-1", &w.b_token, event("e-1", bad)),
            "events[0].type".into(),
        ));
        for (route, request, field) in cases {
            let answer = attempt(&w, route, request, &[400]).await;
            assert_eq!(
                answer.error_field(),
                field,
                "{route} with {bad:?}: {}",
                answer.body
            );
            tried += 1;
        }
    }
    assert_eq!(table_contents(&w.table).await, before);
    println!(
        "isolation: {tried} key-injection requests ({} values x every id field), all 400s naming the field",
        injections.len()
    );
}
