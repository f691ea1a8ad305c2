//! `docs/openapi.yaml` against the code: the same routes as template.yaml's HttpApi events,
//! the same authorization, the same limits, and the sample events in `events/` replayed
//! through the handlers match what it documents for their requests and answers.

use std::collections::BTreeSet;

use fleet_testkit::functions::invoke;
use fleet_tests::api_doc::api_doc;
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::ids::{DeviceId, DeviceType, EventId, EventType, OrgId, Tag, UserId};
use shared::model::org::{self, Role};

#[test]
fn documents_exactly_the_template_routes() {
    let documented: BTreeSet<String> = api_doc()
        .operations()
        .iter()
        .map(|op| op.route_key())
        .collect();
    let deployed: BTreeSet<String> = template().routes.iter().map(|r| r.route_key()).collect();
    assert_eq!(
        documented, deployed,
        "docs/openapi.yaml and template.yaml's HttpApi routes differ"
    );
    assert_eq!(
        api_doc().doc["openapi"].as_str().map(|v| &v[..2]),
        Some("3.")
    );
}

#[test]
fn each_route_declares_the_authorization_the_template_configures() {
    let doc = api_doc();
    assert_eq!(doc.doc["security"], json!([{"userJwt": []}]));
    assert_eq!(
        doc.doc["components"]["securitySchemes"]["userJwt"]["bearerFormat"],
        "JWT"
    );
    for route in &template().routes {
        let op = doc.operation(&route.route_key()).unwrap();
        let security = doc.security(&op);
        let expected = if route.authorized {
            json!([{"userJwt": []}])
        } else {
            // Authorizer: NONE in the template: the device token is the only credential.
            json!([{"deviceToken": []}])
        };
        assert_eq!(security, &expected, "{}", route.route_key());
        let responses = &op.spec["responses"];
        assert!(responses.get("401").is_some(), "{}: 401", route.route_key());
        let admin = route.path.starts_with("/admin/");
        assert_eq!(
            op.spec.get("x-required-group").and_then(Value::as_str) == Some("admin"),
            admin,
            "{}: x-required-group",
            route.route_key()
        );
        let org_role = op.spec.get("x-required-role").is_some();
        assert_eq!(
            responses.get("403").is_some(),
            admin || org_role,
            "{}: 403 documented exactly on operator routes and routes that need an organization role",
            route.route_key()
        );
        for status in responses.as_object().unwrap().keys() {
            let code: u16 = status.parse().expect("numeric status");
            if code >= 400 && code != 401 {
                let response = doc.resolve(&responses[status]);
                let schema = &response["content"]["application/json"]["schema"];
                // Every error answer carries the error contract.
                let probe = json!({"error": {"code": "internal", "message": "m", "field": "f",
                    "requiredRole": "admin"}});
                assert!(
                    doc.validate(schema, &probe).is_ok(),
                    "{} {status}: the error contract body must validate",
                    route.route_key()
                );
            }
        }
    }
}

/// `x-required-role` names the least organization role of every `/orgs/{orgId}/...` route and
/// of the device move (the target organization's), and of no other route.
#[test]
fn exactly_the_organization_routes_name_the_role_they_need() {
    let doc = api_doc();
    let roles: Vec<&Value> = doc.schema("Role")["enum"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    for op in doc.operations() {
        let needs_role =
            op.path.starts_with("/orgs/{orgId}") || op.path == "/me/devices/{deviceId}/move";
        let role = op.spec.get("x-required-role");
        assert_eq!(role.is_some(), needs_role, "{}", op.route_key());
        if let Some(role) = role {
            assert!(roles.contains(&role), "{}: {role}", op.route_key());
        }
    }
}

/// Every `/me/...` fleet route has its `/orgs/{orgId}/...` twin documented with the same
/// operation (parameters, request body, answers), plus the `orgId` path parameter and the
/// organization's refusals: 403 `role_required`, 404 for a non-member (and 400 for a malformed
/// `orgId`) where the `/me` route does not document them already.
#[test]
fn every_me_fleet_route_has_its_org_twin_documented_alike() {
    let doc = api_doc();
    let org_path = json!({"$ref": "#/components/parameters/OrgIdPath"});
    let refusals = [
        ("400", json!({"$ref": "#/components/responses/BadRequest"})),
        (
            "403",
            json!({"$ref": "#/components/responses/RoleRequired"}),
        ),
        ("404", json!({"$ref": "#/components/responses/NotFound"})),
    ];
    let mut twins = 0;
    for me in doc.operations() {
        let Some(rest) = me.path.strip_prefix("/me/") else {
            continue;
        };
        let route = format!("{} /orgs/{{orgId}}/{rest}", me.method);
        let twin = doc
            .operation(&route)
            .unwrap_or_else(|| panic!("{}: no twin {route}", me.route_key()));
        let mut path_parameters = vec![org_path.clone()];
        if let Some(own) = me.path_item.get("parameters").and_then(Value::as_array) {
            path_parameters.extend(own.iter().cloned());
        }
        assert_eq!(
            twin.path_item["parameters"],
            json!(path_parameters),
            "{route}"
        );
        for field in ["parameters", "requestBody", "tags"] {
            assert_eq!(twin.spec.get(field), me.spec.get(field), "{route}: {field}");
        }
        let mut expected = me.spec["responses"].as_object().unwrap().clone();
        for (status, response) in &refusals {
            if *status == "403" {
                // A route that needs a role refuses a member without it; the move's /me route
                // refuses one without the role in the target organization already.
                expected.insert(status.to_string(), response.clone());
            } else {
                expected
                    .entry(status.to_string())
                    .or_insert(response.clone());
            }
        }
        assert_eq!(
            twin.spec["responses"].as_object().unwrap(),
            &expected,
            "{route}: answers"
        );
        twins += 1;
    }
    assert!(twins >= 26, "only {twins} twins");
    // And no organization fleet route without its /me route.
    for op in doc.operations() {
        if let Some(rest) = op.path.strip_prefix("/orgs/{orgId}/") {
            let management = ["members", "invitations"]
                .iter()
                .any(|m| rest == *m || rest.starts_with(&format!("{m}/")));
            if !management {
                assert!(
                    doc.operation(&format!("{} /me/{rest}", op.method))
                        .is_some(),
                    "{}: no /me route",
                    op.route_key()
                );
            }
        }
    }
}

#[test]
fn documented_limits_are_the_codes_limits() {
    let doc = api_doc();
    let max_len = |name: &str| doc.schema(name)["maxLength"].as_u64().unwrap() as usize;
    assert_eq!(max_len("UserId"), UserId::MAX_LEN);
    assert_eq!(max_len("DeviceId"), DeviceId::MAX_LEN);
    assert_eq!(max_len("EventId"), EventId::MAX_LEN);
    assert_eq!(max_len("Tag"), Tag::MAX_LEN);
    assert_eq!(max_len("EventType"), EventType::MAX_LEN);
    assert_eq!(max_len("DeviceType"), DeviceType::MAX_LEN);
    assert_eq!(max_len("DeviceName"), shared::ops::devices::MAX_DEVICE_NAME);
    assert_eq!(
        max_len("ProfileName"),
        shared::ops::profile::MAX_PROFILE_NAME
    );
    assert_eq!(
        doc.schema("TagList")["maxItems"].as_u64().unwrap() as usize,
        shared::model::ids::MAX_TAGS_PER_DEVICE
    );
    assert_eq!(
        doc.schema("EventValue")["oneOf"][2]["maxLength"]
            .as_u64()
            .unwrap() as usize,
        shared::ops::ingest::MAX_TEXT_VALUE
    );
    let limit = &doc.doc["components"]["parameters"]["Limit"]["schema"];
    assert_eq!(limit["maximum"], shared::ops::MAX_LIMIT);
    assert_eq!(limit["default"], shared::ops::DEFAULT_LIMIT);
    let cursor = &doc.doc["components"]["parameters"]["Cursor"]["schema"];
    assert_eq!(cursor["maxLength"], shared::model::cursor::MAX_CURSOR);

    assert_eq!(max_len("OrgId"), OrgId::MAX_LEN);
    assert_eq!(max_len("OrgName"), org::MAX_ORG_NAME);
    assert_eq!(
        doc.schema("Org")["properties"]["memberCount"]["maximum"],
        org::MAX_MEMBERS_PER_ORG
    );
    let mine = doc.operation("GET /orgs").unwrap();
    assert_eq!(
        mine.spec["responses"]["200"]["content"]["application/json"]["schema"]["properties"]
            ["orgs"]["maxItems"],
        org::MAX_ORGS_PER_USER
    );
    let members = doc.operation("GET /orgs/{orgId}/members").unwrap();
    assert_eq!(
        members.spec["responses"]["200"]["content"]["application/json"]["schema"]["properties"]
            ["members"]["maxItems"],
        shared::ops::orgs::members::MEMBERS_PAGE
    );
    let days = &doc
        .request_schema("POST /orgs/{orgId}/invitations")
        .unwrap()["properties"]["expiresInDays"];
    assert_eq!(days["maximum"], org::MAX_INVITATION_DAYS);
    assert_eq!(days["default"], org::DEFAULT_INVITATION_DAYS);
    // The documented roles are the code's, in the order of their rights.
    let roles: Vec<Role> = doc.schema("Role")["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Role::parse_field("role", r.as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(
        roles,
        [Role::Viewer, Role::Operator, Role::Admin, Role::Owner]
    );

    let ingest = "POST /devices/{deviceId}/events";
    assert_eq!(
        doc.max_body_bytes(ingest),
        Some(ingest::MAX_INGEST_BODY_BYTES)
    );
    assert_eq!(
        doc.request_schema(ingest).unwrap()["properties"]["events"]["maxItems"],
        shared::ops::ingest::MAX_EVENTS_PER_BATCH
    );
    for route in [
        "PUT /me",
        "POST /me/devices",
        "PATCH /me/devices/{deviceId}",
    ] {
        assert_eq!(
            doc.max_body_bytes(route),
            Some(shared::http::api::MAX_BODY_BYTES),
            "{route}"
        );
    }
    // Every route with a body documents its limit; no other route takes one.
    for op in doc.operations() {
        assert_eq!(
            op.spec.get("requestBody").is_some(),
            doc.max_body_bytes(&op.route_key()).is_some(),
            "{}",
            op.route_key()
        );
    }
}

#[test]
fn the_id_schemas_accept_exactly_what_the_code_accepts() {
    let doc = api_doc();
    let samples = [
        "thermo-1".to_string(),
        "x@y+z".into(),
        "a.b:c_d".into(),
        "..a".into(),
        "".into(),
        ".".into(),
        "..".into(),
        "a#b".into(),
        shared::model::keys::user_pk(&shared::model::ids::UserId::parse("x").unwrap()),
        "%23".into(),
        "a b".into(),
        "a/b".into(),
        "é".into(),
        "\u{FF03}".into(),
        "therm\u{043E}".into(),
        "a\u{0}b".into(),
        "d".repeat(32),
        "d".repeat(33),
        "d".repeat(64),
        "d".repeat(65),
        "d".repeat(128),
        "d".repeat(129),
    ];
    type Accepts = fn(&str) -> bool;
    let cases: [(&str, Accepts); 7] = [
        ("UserId", |v| UserId::parse(v).is_ok()),
        ("DeviceId", |v| DeviceId::parse(v).is_ok()),
        ("EventId", |v| EventId::parse(v).is_ok()),
        ("Tag", |v| Tag::parse(v).is_ok()),
        ("EventType", |v| EventType::parse(v).is_ok()),
        ("DeviceType", |v| DeviceType::parse(v).is_ok()),
        ("OrgId", |v| OrgId::parse(v).is_ok()),
    ];
    for (name, code_accepts) in cases {
        for sample in &samples {
            assert_eq!(
                doc.validate(doc.schema(name), &json!(sample)).is_ok(),
                code_accepts(sample),
                "{name}: {sample:?}"
            );
        }
    }
    // Display names are trimmed before they are checked: the document may not refuse a name
    // the code takes, and agrees with it on names without surrounding white space.
    let names = [
        "W".to_string(),
        "W\t".into(),
        "\tW".into(),
        " W ".into(),
        "\u{85}W".into(),
        "W\u{2003}".into(),
        "W\tX".into(),
        "W\u{7f}".into(),
        "Zoë's".into(),
        "\u{feff}W".into(),
        "".into(),
        "a".repeat(100),
        "a".repeat(101),
    ];
    let display_names = [
        ("DeviceName", shared::ops::devices::MAX_DEVICE_NAME),
        ("ProfileName", shared::ops::profile::MAX_PROFILE_NAME),
        ("OrgName", org::MAX_ORG_NAME),
    ];
    for (name, max) in display_names {
        for sample in &names {
            let code_accepts = shared::model::ids::parse_display_name("name", sample, max).is_ok();
            let documented = doc.validate(doc.schema(name), &json!(sample)).is_ok();
            if sample.trim() == sample {
                assert_eq!(documented, code_accepts, "{name}: {sample:?}");
            } else {
                assert!(documented || !code_accepts, "{name}: {sample:?}");
            }
        }
    }
    let timestamp = doc.schema("Timestamp");
    for ok in ["2024-04-10T10:00:00Z", "2024-04-10T12:00:00.123456+02:00"] {
        assert!(doc.validate(timestamp, &json!(ok)).is_ok(), "{ok}");
    }
    for bad in ["2024-04-10", "yesterday", "2024-04-10 10:00:00"] {
        assert!(doc.validate(timestamp, &json!(bad)).is_err(), "{bad}");
    }
}

/// A query or path value as the schema sees it: integers are numbers.
fn typed(schema: &Value, raw: &str) -> Value {
    match schema["type"].as_str() {
        Some("integer") => raw.parse::<i64>().map(Value::from).unwrap_or(json!(raw)),
        _ => json!(raw),
    }
}

/// Replays the samples (as tests/it/replay.rs does) and checks each against the document: a
/// sample the API accepts must be a documented request, and every answer must be documented.
#[tokio::test]
async fn sample_events_and_their_answers_match_the_document() {
    let doc = api_doc();
    let dir = fleet_testkit::repo_root().join("events");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let (mut table, _) = demo_table().await;
    table.config.retention_days = 3650;
    let mut checked = 0;
    for sample in manifest["events"].as_array().unwrap() {
        let file = sample["file"].as_str().unwrap();
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let event: Value = serde_json::from_str(&text).unwrap();
        let function = sample["function"].as_str().unwrap();
        let Some(route_key) = event["routeKey"].as_str() else {
            // The scheduled daily-analytics event is not HTTP; later samples read its report.
            invoke(template(), &table, function, &text).await.unwrap();
            continue;
        };
        let op = doc
            .operation(route_key)
            .unwrap_or_else(|| panic!("{file}: {route_key} undocumented"));
        let expected = sample["status"].as_u64().unwrap() as u16;
        if (200..300).contains(&expected) {
            for p in doc.parameters(&op) {
                let name = p["name"].as_str().unwrap();
                let (values, header) = match p["in"].as_str().unwrap() {
                    "path" => (&event["pathParameters"], false),
                    "query" => (&event["queryStringParameters"], false),
                    _ => (&event["headers"], true),
                };
                let key = if header {
                    name.to_ascii_lowercase()
                } else {
                    name.to_string()
                };
                match values.get(&key).and_then(Value::as_str) {
                    Some(raw) => doc
                        .validate(&p["schema"], &typed(&p["schema"], raw))
                        .unwrap_or_else(|e| panic!("{file}: parameter {name}: {e}")),
                    None => assert!(p["required"] != true, "{file}: {name} is required"),
                }
            }
            if let Some(schema) = doc.request_schema(route_key) {
                let body: Value = serde_json::from_str(event["body"].as_str().unwrap()).unwrap();
                doc.validate(schema, &body)
                    .unwrap_or_else(|e| panic!("{file}: request body: {e}"));
            }
        }
        let response = invoke(template(), &table, function, &text).await.unwrap();
        let status = response["statusCode"].as_u64().unwrap() as u16;
        assert_eq!(status, expected, "{file}");
        let body = match response["body"].as_str() {
            Some(text) => serde_json::from_str(text).unwrap(),
            None => Value::Null,
        };
        doc.check_response(route_key, status, &body)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} samples checked");
}

/// The documented `If-Match` pattern admits exactly the values the handler takes as a version:
/// each sample is sent to a device at version 1, so a value the handler reads is a 412 (or 200
/// for "1"), and one it refuses is a 400 on `If-Match`.
#[tokio::test]
async fn the_if_match_pattern_accepts_exactly_what_the_handler_accepts() {
    let doc = api_doc();
    let route = "PATCH /me/devices/{deviceId}";
    let op = doc.operation(route).unwrap();
    let schema = &doc.parameter(&op, "header", "If-Match").unwrap()["schema"];
    let table = fresh_table().await;
    let registered = device_updates(
        &table,
        ApiRequest::post("/me/devices")
            .caller("user-alice")
            .json(json!({"deviceId": "thermo-1", "name": "Kitchen", "type": "thermostat"})),
    )
    .await;
    assert_eq!(registered.status, 201, "{:?}", registered.body);
    let samples = [
        "0",
        "\"0\"",
        "W/\"0\"",
        "00",
        "2",
        "\"2\"",
        "W/\"2\"",
        " 2 ",
        "02",
        "007",
        "9999999999999999999",
        "99999999999999999999",
        "-1",
        "+2",
        "2.0",
        "1e3",
        "W/2",
        "\"2",
        "W/\"\"",
        "\"\"",
        "",
        "abc",
        "0x2",
    ];
    for sample in samples {
        let a = device_updates(
            &table,
            ApiRequest::patch("/me/devices/thermo-1")
                .caller("user-alice")
                .header("If-Match", sample)
                .json(json!({"name": "Hall"})),
        )
        .await;
        let refused = a.status == 400;
        if refused {
            assert_eq!(a.error_field(), "If-Match", "{sample:?}: {:?}", a.body);
        } else {
            assert_eq!(a.status, 412, "{sample:?}: {:?}", a.body);
        }
        assert_eq!(
            doc.validate(schema, &json!(sample)).is_ok(),
            !refused,
            "If-Match {sample:?}: the document and the handler disagree"
        );
        doc.check_response(route, a.status, &a.body)
            .unwrap_or_else(|e| panic!("{sample:?}: {e}"));
    }
}

#[test]
fn an_unmatched_route_is_documented_as_the_gateway_404() {
    let doc = api_doc();
    doc.check_unmatched_route(404, &json!({"message": "Not Found"}))
        .unwrap();
    // Our own error contract is not what API Gateway sends for an unmatched route.
    assert!(doc
        .check_unmatched_route(
            404,
            &json!({"error": {"code": "not_found", "message": "m"}})
        )
        .is_err());
    assert!(doc
        .check_unmatched_route(400, &json!({"message": "Not Found"}))
        .is_err());
}

/// API Gateway's route throttling (template `DefaultRouteSettings`) answers 429 on every route,
/// so every operation documents it, with both bodies it can carry.
#[test]
fn every_route_documents_the_429_of_throttling() {
    let doc = api_doc();
    for op in doc.operations() {
        let route = op.route_key();
        doc.check_response(&route, 429, &json!({"message": "Too Many Requests"}))
            .unwrap_or_else(|e| panic!("{route}: {e}"));
        doc.check_response(
            &route,
            429,
            &json!({"error": {"code": "rate_limited", "message": "m"}}),
        )
        .unwrap_or_else(|e| panic!("{route}: {e}"));
    }
}

/// The error codes a handler can answer, read from the source: `ApiError`'s constructors
/// (`StatusCode::X, "code"`), `FleetError::Conflict { code: "..." }` and literal error bodies
/// (`"code": "..."`) in shared/src and functions/*/src.
fn error_codes_in_the_code() -> BTreeSet<String> {
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    /// The `[a-z_]+` literal that starts right after `at` (past whitespace and one `"`).
    fn literal_after(text: &str) -> Option<String> {
        let rest = text.trim_start().strip_prefix('"')?;
        let end = rest.find('"')?;
        let code = &rest[..end];
        (!code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .then(|| code.to_string())
    }
    let root = fleet_testkit::repo_root();
    let mut files = Vec::new();
    rust_files(&root.join("shared/src"), &mut files);
    rust_files(&root.join("functions"), &mut files);
    let mut codes = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Tests build bodies of their own; only the code before `#[cfg(test)]` answers.
        let text = text.split("#[cfg(test)]").next().unwrap();
        for marker in ["code: ", "\"code\": "] {
            for (at, _) in text.match_indices(marker) {
                codes.extend(literal_after(&text[at + marker.len()..]));
            }
        }
        for (at, _) in text.match_indices("StatusCode::") {
            let rest = &text[at + "StatusCode::".len()..];
            let name_end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                .unwrap_or(rest.len());
            if let Some(after_comma) = rest[name_end..].trim_start().strip_prefix(',') {
                codes.extend(literal_after(after_comma));
            }
        }
    }
    codes
}

#[test]
fn every_error_code_the_handlers_answer_is_in_the_contract() {
    let doc = api_doc();
    let mut documented: BTreeSet<String> = doc.schema("Error")["properties"]["error"]["properties"]
        ["code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    documented.insert(
        doc.schema("PartialIngest")["properties"]["error"]["properties"]["code"]["const"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let answered = error_codes_in_the_code();
    // The scan finds each way a code is written (so it cannot silently find nothing).
    for known in [
        "invalid_request",
        "command_queue_full",
        "rule_limit",
        "partially_stored",
    ] {
        assert!(
            answered.contains(known),
            "the scan missed {known}: {answered:?}"
        );
    }
    let missing: Vec<&String> = answered.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "error codes the handlers answer that docs/openapi.yaml's Error.code does not list: {missing:?}"
    );
}

/// The role `x-required-role` documents is the one the handler requires: each organization
/// route's sample, sent by a member whose role is one below it, is a 403 `role_required` naming
/// exactly the documented role (and, for a route every member may use, a non-member's 404).
/// The refusals change nothing, so one demo table serves every route.
#[tokio::test]
async fn each_documented_role_is_the_role_the_handler_requires() {
    use fleet_testkit::demo_orgs::DEMO_ORG_MEMBERS;
    let doc = api_doc();
    let (mut table, _) = demo_table().await;
    table.config.retention_days = fleet_testkit::samples::SAMPLE_RETENTION_DAYS;
    let samples = fleet_testkit::samples::sample_events();
    let member_with = |role: Role| {
        DEMO_ORG_MEMBERS
            .iter()
            .find(|(_, r)| *r == role)
            .map(|(user, _)| *user)
            .unwrap()
    };
    let before = table_contents(&table).await;
    let mut checked = 0;
    for op in doc.operations() {
        let Some(role) = op.spec.get("x-required-role").and_then(Value::as_str) else {
            continue;
        };
        let needed = Role::parse_field("role", role).unwrap();
        let route = op.route_key();
        let sample = samples
            .iter()
            .find(|s| serde_json::from_str::<Value>(&s.text).unwrap()["routeKey"] == route)
            .unwrap_or_else(|| panic!("{route}: no sample"));
        let mut event: Value = serde_json::from_str(&sample.text).unwrap();
        // One role below the documented one; below viewer is no member at all. The move's
        // /me route needs the role in the target organization: Bob is a viewer there.
        let caller = match needed {
            _ if op.path == "/me/devices/{deviceId}/move" => "demo-bob",
            Role::Viewer => "demo-operator",
            Role::Operator => member_with(Role::Viewer),
            Role::Admin => member_with(Role::Operator),
            Role::Owner => member_with(Role::Admin),
        };
        if op.path == "/me/devices/{deviceId}/move" {
            event["pathParameters"]["deviceId"] = json!("thermo-office");
        }
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(caller);
        let response = invoke(template(), &table, &sample.function, &event.to_string())
            .await
            .unwrap();
        let status = response["statusCode"].as_u64().unwrap();
        let body: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
        if needed == Role::Viewer && op.path.starts_with("/orgs/{orgId}") {
            assert_eq!(status, 404, "{route} by a non-member: {body}");
            assert_eq!(body["error"]["code"], "not_found", "{route}");
        } else {
            assert_eq!(status, 403, "{route} by {caller}: {body}");
            assert_eq!(body["error"]["code"], "role_required", "{route}");
            assert_eq!(
                body["error"]["requiredRole"], role,
                "{route}: documented {role}, the handler requires another"
            );
        }
        doc.check_response(&route, status as u16, &body)
            .unwrap_or_else(|e| panic!("{e}"));
        checked += 1;
    }
    assert!(checked >= 36, "only {checked} routes checked");
    assert!(
        table_contents(&table).await == before,
        "a refused request changed the table"
    );
}
