//! Property-based hostile input over every route of template.yaml, through the real handlers
//! on DynamoDB Local (demo data): random and oversized bodies, JSON nested past any sane depth,
//! huge strings, unicode and control characters, bad percent-encoding, weird query values,
//! limits and cursors (real ones, edited ones, forged ones), wrong content types, key-shaped
//! ids, wrong callers and device tokens.
//!
//! Every answer must: not be a 5xx (a panic fails the run), be a status docs/openapi.yaml
//! documents for the route with the body it documents (4xx: the error contract); a request
//! the document says is invalid must be a 4xx; and a 4xx must leave the table unchanged.
//!
//! Fixed seed (`FLEET_FUZZ_SEED` varies it), bounded count (`FLEET_FUZZ_CASES`, default 4000:
//! under a minute in a debug build on this 2-core machine). `cargo test -p fleet-tests --test hostile_input -- --nocapture`
//! prints the number of requests tried.

use std::sync::Mutex;

use fleet_testkit::demo_orgs::{
    DEMO_INVITATION_SECRET, DEMO_ORG_ID, DEMO_REVOKED_INVITATION_SECRET, EMPTY_ORG_ID,
};
use fleet_tests::api_doc::{api_doc, Operation};
use fleet_tests::gateway::{check_answer, Gateway};
use fleet_tests::*;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Value};
use shared::model::ids::{OrgId, Tag};
use shared::model::keys;
use shared::model::org::InvitationCode;
use shared::model::pattern_id::PatternId;
use shared::model::status::DeviceStatus;
use shared::model::timestamp::{Day, Timestamp};

const SEED: &[u8; 32] = b"device-fleet-hostile-input-seed!";

/// API Gateway HTTP API's limit on request line plus headers, in bytes.
const GATEWAY_HEADER_LIMIT: usize = 10_240;

fn cases() -> u32 {
    std::env::var("FLEET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000)
}

/// The fixed seed, or `FLEET_FUZZ_SEED` (any text, for exploring beyond the fixed run).
fn seed() -> [u8; 32] {
    let mut seed = *SEED;
    if let Ok(text) = std::env::var("FLEET_FUZZ_SEED") {
        for (i, b) in text.bytes().enumerate() {
            seed[i % 32] ^= b;
        }
    }
    seed
}

/// Ids that exist in the demo data (Alice's, Bob's), so hostile requests also hit real items.
const KNOWN: &[&str] = &[
    "thermo-kitchen",
    "door-front",
    "meter-garage",
    "thermo-office",
    "demo-alice",
    "demo-bob",
    "home",
    "office",
    "temperature",
    "humidity",
    "active",
    "maintenance",
    "2026-11-21",
    "demo-3",
];

/// Key-shaped and delimiter-carrying values: the keys of the demo data's own items (built by
/// `shared::model::keys`, so they follow the key design), then other hostile text.
fn injections() -> Vec<String> {
    let (alice, bob) = (key::user("demo-alice"), key::user("demo-bob"));
    let (kitchen, office) = (
        key::device_id("thermo-kitchen"),
        key::device_id("thermo-office"),
    );
    let day = Day::parse_field("day", "2026-11-21").unwrap();
    let office_tag = Tag::parse("office").unwrap();
    let key_shaped = [
        keys::user_pk(&bob),
        keys::event_pk(&alice, &kitchen),
        shared::model::entities::registration::registration_pk(&office),
        shared::model::entities::event::EVENT_PREFIX.to_string(),
        shared::model::entities::profile::PROFILE_SK.to_string(),
        shared::model::entities::registration::REGISTRATION_SK.to_string(),
        shared::model::entities::report::report_pk(&day),
        shared::model::entities::tag_link::tag_link_sk(&office_tag, &office),
        shared::model::entities::device_state::status_gsi1pk(DeviceStatus::Active, 0),
        shared::model::entities::device_state::state_pk(&bob, 1),
        shared::model::entities::device_state::state_sk(&office),
        keys::directory_gsi2pk(&bob),
    ];
    key_shaped
        .into_iter()
        .chain(OTHER_INJECTIONS.iter().map(|s| s.to_string()))
        .collect()
}

/// Delimiter-carrying and other hostile values that are not keys of ours.
const OTHER_INJECTIONS: &[&str] = &[
    // An organization's owner key as a caller: refused at the door (no person acts as one).
    "org:o0000000000000000ac3e",
    "#",
    "%23",
    "%2523",
    "thermo-office#x",
    "..",
    ".",
    "../..",
    "..%2F..",
    "%2e%2e",
    "thermo\u{2010}kitchen",
    "therm\u{043E}-kitchen",
    "\u{FF03}",
    "\u{FE5F}",
    "a\u{0}b",
    "a\u{202E}b",
    "\u{FEFF}thermo-kitchen",
    " thermo-kitchen",
    "thermo-kitchen ",
    "*",
    "%",
    "\\",
    "'\"",
    "${jndi:x}",
    "<script>",
];

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "100",
    "101",
    "50",
    "+5",
    " 5",
    "5 ",
    "05",
    "1e2",
    "1.5",
    "0x10",
    "NaN",
    "Infinity",
    "99999999999999999999999",
    "4294967297",
    "-0",
    "\u{0661}\u{0660}",
    "",
];

const TIMESTAMPS: &[&str] = &[
    "9999-12-31T23:59:59-01:00",
    "9999-12-31T23:59:59.999Z",
    "9999-12-30T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "0000-01-01T00:00:00+01:00",
    "0000-01-01T00:30:00-23:59",
    "2024-02-29T00:00:00Z",
    "2023-02-29T00:00:00Z",
    "2024-04-10T24:00:00Z",
    "2024-04-10T23:59:60Z",
    "2024-04-10T10:00:00.123456789123Z",
    "2024-04-10t10:00:00z",
    "2024-04-10T10:00:00+24:00",
    "2024-04-10",
    "10:00:00Z",
    "+12024-04-10T10:00:00Z",
];

const QUERY_NAMES: &[&str] = &[
    "limit",
    "cursor",
    "from",
    "to",
    "tag",
    "type",
    "status",
    "seenSince",
    "deviceId",
    "userId",
];

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "application/vnd.fleet+json",
    "text/plain",
    "text/json",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=xyz",
    "application/jsonp",
    "application/xml",
    "*/*",
    "",
];

#[derive(Clone, Debug)]
enum Who {
    Nobody,
    Alice,
    Bob,
    Operator,
    Sub(String),
}

#[derive(Clone, Debug)]
enum DeviceAuth {
    Missing,
    /// The path device's own token (when it is a demo device).
    Own,
    /// Another demo device's token.
    Other(usize),
    /// A header value.
    Raw(String),
}

#[derive(Clone, Debug)]
enum BodyKind {
    None,
    Text(String),
    Binary(Vec<u8>),
}

#[derive(Clone, Debug)]
struct Hostile {
    route: usize,
    who: Who,
    path: Vec<String>,
    query: Vec<(String, String)>,
    content_type: Option<String>,
    if_match: Option<String>,
    auth: DeviceAuth,
    body: BodyKind,
}

fn timestamp() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(TIMESTAMPS).prop_map(String::from),
        3 => (-100i64 * 86_400..86_400).prop_map(|s| Timestamp::now().plus_seconds(s).to_string()),
        1 => "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,12})?(Z|[+-][0-9]{2}:[0-9]{2})",
    ]
    .boxed()
}

fn hostile_string() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[A-Za-z0-9_.:@+-]{1,70}",
        3 => prop::sample::select(KNOWN).prop_map(String::from),
        3 => prop::sample::select(injections()),
        2 => ("[a-z0-9-]{0,8}", prop::sample::select(injections()), "[a-z0-9-]{0,8}")
            .prop_map(|(a, i, b)| format!("{a}{i}{b}")),
        2 => ".{0,40}",
        1 => "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{2028}\\u{202e}]{1,4}",
        1 => "(%[0-9A-Fa-f]{0,2}|%[G-Zg-z]{2}|%u[0-9a-f]{4}|%C0%AE|%E0%A4%A){1,6}",
        1 => (1usize..20_000, prop::sample::select(vec!['a', '#', '\u{e9}', '\u{FF03}', '0', '.']))
            .prop_map(|(n, c)| std::iter::repeat_n(c, n).collect()),
        2 => timestamp(),
        1 => prop::sample::select(NUMBERS).prop_map(String::from),
    ]
    .boxed()
}

/// Printable ASCII, as HTTP header values are.
fn header_value() -> BoxedStrategy<String> {
    prop_oneof!["[ -~]{0,40}", (1usize..9000).prop_map(|n| "x".repeat(n)),].boxed()
}

/// Cursors: real ones from the demo data, edited ones, forged ones naming other partitions.
fn cursor(real: Vec<String>) -> BoxedStrategy<String> {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    let edited = real.clone();
    prop_oneof![
        2 => prop::sample::select(real),
        2 => (prop::sample::select(edited), any::<prop::sample::Index>(), "[A-Za-z0-9_-]")
            .prop_map(|(c, i, ch)| {
                let mut chars: Vec<char> = c.chars().collect();
                let at = i.index(chars.len());
                chars[at] = ch.chars().next().unwrap_or('A');
                chars.into_iter().collect()
            }),
        2 => (
            prop::sample::select(
                [
                    PatternId::ListDevices,
                    PatternId::DeviceEvents,
                    PatternId::UserEvents,
                    PatternId::DevicesByTag,
                    PatternId::Dashboard,
                    PatternId::EventsByType,
                ]
                .iter()
                .map(PatternId::to_string)
                .chain([String::new()])
                .collect::<Vec<_>>(),
            ),
            prop::collection::vec(
                prop::option::of(prop::collection::btree_map(
                    prop::sample::select(vec!["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "x"]),
                    hostile_string(),
                    0..5,
                )),
                0..4,
            ),
        )
            .prop_map(|(p, k)| URL_SAFE_NO_PAD.encode(json!({"p": p, "k": k}).to_string())),
        1 => ".{0,20}".prop_map(|s| URL_SAFE_NO_PAD.encode(s)),
        1 => (4000usize..6000).prop_map(|n| "A".repeat(n)),
        1 => hostile_string(),
    ]
    .boxed()
}

/// Numbers at and past DynamoDB's edges (magnitudes 1e-130 to below 1e126): valid JSON
/// that a table refuses unless the edge checks it.
fn edge_number() -> BoxedStrategy<Value> {
    prop::sample::select(vec![
        1e200,
        -1e200,
        1e-200,
        -1e-200,
        1e126,
        -1e126,
        9.999_999_999_999_99e125,
        1e-130,
        -1e-130,
        1e-131,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        0.0,
    ])
    .prop_map(|f| json!(f))
    .boxed()
}

/// A JSON value: mostly scalars and short containers of hostile strings.
fn json_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        edge_number(),
        hostile_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// A field value: usually plausible, sometimes hostile.
fn field(valid: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![
        4 => valid,
        1 => hostile_string().prop_map(Value::from),
        1 => json_value(),
    ]
    .boxed()
}

fn tags() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => prop::collection::vec(prop::sample::select(vec!["home", "office", "x"]), 0..4)
            .prop_map(|t| json!(t)),
        1 => prop::collection::vec(hostile_string(), 0..14).prop_map(|t| json!(t)),
    ]
    .boxed()
}

fn name_value() -> BoxedStrategy<Value> {
    field(
        prop_oneof!["[A-Za-z ]{1,20}", ".{0,120}"]
            .prop_map(Value::from)
            .boxed(),
    )
}

fn id_value() -> BoxedStrategy<Value> {
    field(
        prop_oneof![
            "[a-z0-9-]{1,20}",
            prop::sample::select(KNOWN).prop_map(String::from)
        ]
        .prop_map(Value::from)
        .boxed(),
    )
}

fn with_extra(body: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    (
        body,
        prop::option::weighted(0.2, ("[a-zA-Z]{1,10}", json_value())),
    )
        .prop_map(|(mut body, extra)| {
            if let (Some((k, v)), Some(map)) = (extra, body.as_object_mut()) {
                map.insert(k, v);
            }
            body
        })
        .boxed()
}

fn profile_body() -> BoxedStrategy<Value> {
    with_extra(name_value().prop_map(|n| json!({"name": n})).boxed())
}

/// A member's new role, or an invitation's role and days.
fn role_body() -> BoxedStrategy<Value> {
    let role = field(
        prop::sample::select(vec![
            "viewer", "operator", "admin", "owner", "Admin", "root",
        ])
        .prop_map(Value::from)
        .boxed(),
    );
    let days = prop::option::weighted(0.5, field(edge_number()));
    with_extra(
        (role, days)
            .prop_map(|(role, days)| {
                let mut body = json!({"role": role});
                if let Some(days) = days {
                    body["expiresInDays"] = days;
                }
                body
            })
            .boxed(),
    )
}

/// Where a device moves: an organization, or `null` for the caller's own fleet.
fn move_body() -> BoxedStrategy<Value> {
    let to = prop_oneof![
        3 => prop::sample::select(vec![DEMO_ORG_ID, EMPTY_ORG_ID]).prop_map(Value::from),
        1 => Just(Value::Null),
        1 => field(id_value()),
    ];
    with_extra(to.prop_map(|to| json!({"toOrgId": to})).boxed())
}

fn register_body() -> BoxedStrategy<Value> {
    with_extra(
        (id_value(), name_value(), id_value(), tags())
            .prop_map(|(d, n, t, g)| json!({"deviceId": d, "name": n, "type": t, "tags": g}))
            .boxed(),
    )
}

fn patch_body() -> BoxedStrategy<Value> {
    let status = field(
        prop::sample::select(vec!["active", "inactive", "maintenance", "error", "broken"])
            .prop_map(Value::from)
            .boxed(),
    );
    with_extra(
        (
            prop::option::of(status),
            prop::option::of(name_value()),
            prop::option::of(tags()),
        )
            .prop_map(|(s, n, t)| {
                let mut body = json!({});
                if let Some(s) = s {
                    body["status"] = s;
                }
                if let Some(n) = n {
                    body["name"] = n;
                }
                if let Some(t) = t {
                    body["tags"] = t;
                }
                body
            })
            .boxed(),
    )
}

fn ingest_body() -> BoxedStrategy<Value> {
    let event = (
        prop::option::of(id_value()),
        field(
            prop::sample::select(vec!["temperature", "door", "t"])
                .prop_map(Value::from)
                .boxed(),
        ),
        field(
            prop_oneof![
                any::<f64>().prop_map(|f| json!(f)),
                edge_number(),
                any::<bool>().prop_map(Value::from),
                ".{0,300}".prop_map(Value::from)
            ]
            .boxed(),
        ),
        field(timestamp().prop_map(Value::from).boxed()),
    )
        .prop_map(|(id, t, v, at)| {
            let mut e = json!({"type": t, "value": v, "at": at});
            if let Some(id) = id {
                e["id"] = id;
            }
            e
        });
    let events = prop_oneof![
        6 => prop::collection::vec(event.clone(), 1..5),
        1 => prop::collection::vec(event.clone(), 0..1),
        1 => prop::collection::vec(event, 95..130),
    ];
    with_extra(events.prop_map(|e| json!({"events": e})).boxed())
}

/// Bodies shaped like one of the routes' bodies, with hostile values, missing and extra fields.
/// An alarm rule, its thresholds often at or past DynamoDB's number edges.
fn rule_body() -> BoxedStrategy<Value> {
    let number = || {
        prop_oneof![
            2 => edge_number(),
            1 => any::<f64>().prop_map(|f| json!(f)),
            1 => (-100i64..100).prop_map(Value::from),
        ]
    };
    let condition = prop_oneof![
        number().prop_map(|n| json!({"above": n})),
        number().prop_map(|n| json!({"below": n})),
        (number(), number()).prop_map(|(lo, hi)| json!({"outside": [lo, hi]})),
        number().prop_map(|n| json!({"equals": n})),
    ];
    let clear = prop::option::of(prop_oneof![
        number().prop_map(|n| json!({"above": n})),
        number().prop_map(|n| json!({"below": n})),
    ]);
    (field(condition.boxed()), clear)
        .prop_map(|(condition, clear)| {
            let mut rule = json!({"name": "edge", "eventType": "temperature",
                "scope": {"deviceId": "thermo-kitchen"}, "condition": condition,
                "severity": "minor"});
            if let Some(clear) = clear {
                rule["clear"] = clear;
            }
            rule
        })
        .boxed()
}

fn near_valid_body() -> BoxedStrategy<Value> {
    prop_oneof![profile_body(), register_body(), patch_body(), ingest_body()].boxed()
}

/// `depth` unclosed or closed levels of arrays or objects.
fn deep_json() -> BoxedStrategy<String> {
    (
        1usize..20_000,
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec!["events", "name", "value"]),
    )
        .prop_map(|(depth, objects, closed, key)| {
            let (open, close) = if objects {
                (format!("{{\"{key}\":"), "}")
            } else {
                ("[".to_string(), "]")
            };
            let mut text = format!("{{\"{key}\":");
            text.push_str(&open.repeat(depth));
            text.push('1');
            if closed {
                text.push_str(&close.repeat(depth));
                text.push('}');
            }
            text
        })
        .boxed()
}

/// Valid JSON just over (or under) the routes' body limits.
fn oversized() -> BoxedStrategy<String> {
    (
        prop::sample::select(vec![16 * 1024, 64 * 1024, 10 * 1024 * 1024 / 16]),
        -40i64..40,
        prop::sample::select(vec!["name", "events", "deviceId"]),
    )
        .prop_map(|(size, delta, key)| {
            let pad = (size as i64 + delta - 12).max(0) as usize;
            format!("{{\"{key}\":\"{}\"}}", "a".repeat(pad))
        })
        .boxed()
}

/// Any body: shaped like `own` (the route's own body, if it takes one) most of the time.
fn body(own: Option<BoxedStrategy<Value>>) -> BoxedStrategy<BodyKind> {
    let own = own.unwrap_or_else(near_valid_body);
    prop_oneof![
        1 => Just(BodyKind::None),
        10 => own.prop_map(|v| BodyKind::Text(v.to_string())),
        2 => near_valid_body().prop_map(|v| BodyKind::Text(v.to_string())),
        2 => json_value().prop_map(|v| BodyKind::Text(v.to_string())),
        1 => deep_json().prop_map(BodyKind::Text),
        1 => ".{0,200}".prop_map(BodyKind::Text),
        1 => prop::collection::vec(any::<u8>(), 0..400).prop_map(BodyKind::Binary),
        1 => oversized().prop_map(BodyKind::Text),
    ]
    .boxed()
}

/// A value for the query parameter `name`: plausible for it, or hostile.
fn query_value(name: &str, cursors: &[String]) -> BoxedStrategy<String> {
    let plausible: BoxedStrategy<String> = match name {
        "limit" => prop_oneof![
            (1u32..=100).prop_map(|n| n.to_string()),
            prop::sample::select(NUMBERS).prop_map(String::from)
        ]
        .boxed(),
        "cursor" => cursor(cursors.to_vec()),
        "from" | "to" | "seenSince" => timestamp(),
        "status" => prop::sample::select(vec![
            "active",
            "inactive",
            "maintenance",
            "error",
            "Active",
            "gone",
        ])
        .prop_map(String::from)
        .boxed(),
        _ => prop::sample::select(KNOWN).prop_map(String::from).boxed(),
    };
    prop_oneof![3 => plausible, 1 => hostile_string()].boxed()
}

/// The id an invitation whose code's secret is `secret` is stored and revoked by.
fn invitation_id(secret: &str) -> String {
    let org = OrgId::parse(DEMO_ORG_ID).expect("demo organization id");
    InvitationCode::parse(&format!("{org}.{secret}"))
        .expect("demo invitation code")
        .invitation_id()
        .to_string()
}

/// Hostile requests to one route: its own parameters and body shape, mostly plausible values
/// with hostile ones mixed in, plus foreign parameters and bodies.
fn route_strategy(route: usize, route_key: &str, cursors: &[String]) -> BoxedStrategy<Hostile> {
    let doc = api_doc();
    let op = doc.operation(route_key).expect("documented route");
    let admin = op.path.starts_with("/admin/");
    let who = prop_oneof![
        (if admin { 1 } else { 5 }) => Just(Who::Alice),
        1 => Just(Who::Bob),
        (if admin { 5 } else { 1 }) => Just(Who::Operator),
        1 => Just(Who::Nobody),
        1 => hostile_string().prop_map(Who::Sub),
    ];
    let path_value = |name: &str| -> BoxedStrategy<String> {
        match name {
            "date" => prop_oneof![
                2 => (-3i64..3).prop_map(|d| Timestamp::now().plus_seconds(d * 86_400).day().to_string()),
                1 => "[0-9]{4}-[0-9]{2}-[0-9]{2}",
                2 => hostile_string(),
            ]
            .boxed(),
            // The demo organizations (Alice owns both; Bob is a viewer; the operator no member).
            "orgId" => prop_oneof![
                4 => prop::sample::select(vec![DEMO_ORG_ID, EMPTY_ORG_ID, "o00000000000000000000"]).prop_map(String::from),
                2 => hostile_string(),
            ]
            .boxed(),
            "userId" => prop_oneof![
                3 => prop::sample::select(vec!["demo-alice", "demo-bob", "demo-carol", "demo-erin", "demo-operator"]).prop_map(String::from),
                2 => hostile_string(),
            ]
            .boxed(),
            "invitationId" => prop_oneof![
                3 => prop::sample::select(vec![invitation_id(DEMO_REVOKED_INVITATION_SECRET), invitation_id(DEMO_INVITATION_SECRET), "0".repeat(32)]),
                2 => hostile_string(),
            ]
            .boxed(),
            "code" => prop_oneof![
                3 => prop::sample::select(vec![format!("{DEMO_ORG_ID}.{DEMO_INVITATION_SECRET}"), format!("{EMPTY_ORG_ID}.{DEMO_INVITATION_SECRET}"), format!("{DEMO_ORG_ID}.{}", "0".repeat(32))]),
                2 => hostile_string(),
            ]
            .boxed(),
            _ => prop_oneof![
                3 => prop::sample::select(vec!["thermo-kitchen", "door-front", "thermo-office", "meter-garage", "acme-boiler", "acme-pump"]).prop_map(String::from),
                3 => hostile_string(),
            ]
            .boxed(),
        }
    };
    let params = path_params(op.path);
    let path = (
        params
            .first()
            .map_or(Just(String::new()).boxed(), |n| path_value(n)),
        params
            .get(1)
            .map_or(Just(String::new()).boxed(), |n| path_value(n)),
        params
            .get(2)
            .map_or(Just(String::new()).boxed(), |n| path_value(n)),
    )
        .prop_map(|(a, b, c)| vec![a, b, c]);
    let own_query: Vec<BoxedStrategy<Option<(String, String)>>> = doc
        .parameters(&op)
        .into_iter()
        .filter(|p| p["in"] == "query")
        .map(|p| {
            let name = p["name"].as_str().unwrap_or_default().to_string();
            let weight = if p["required"] == true { 0.9 } else { 0.5 };
            prop::option::weighted(
                weight,
                query_value(&name, cursors).prop_map(move |v| (name.clone(), v)),
            )
            .boxed()
        })
        .collect();
    let foreign_query = prop::collection::vec(
        (
            prop_oneof![4 => prop::sample::select(QUERY_NAMES).prop_map(String::from), 1 => "[a-zA-Z%#]{1,8}"],
            prop_oneof![hostile_string(), cursor(cursors.to_vec())],
        ),
        0..2,
    );
    let query = (own_query, foreign_query)
        .prop_map(|(own, foreign)| own.into_iter().flatten().chain(foreign).collect::<Vec<_>>());
    let auth = prop_oneof![
        1 => Just(DeviceAuth::Missing),
        6 => Just(DeviceAuth::Own),
        1 => (0usize..4).prop_map(DeviceAuth::Other),
        1 => header_value().prop_map(DeviceAuth::Raw),
        1 => header_value().prop_map(|t| DeviceAuth::Raw(format!("Bearer {t}"))),
    ];
    let if_match = prop::option::weighted(
        0.85,
        prop_oneof![
            4 => prop::sample::select(vec!["1", "\"1\"", "W/\"1\"", "2", "0", "W/1", "\"\"1\"\"", "1, 2", "*", "+1"]).prop_map(String::from),
            1 => header_value(),
        ],
    );
    let content_type = prop::option::weighted(
        0.9,
        prop_oneof![
            6 => Just("application/json".to_string()),
            2 => prop::sample::select(CONTENT_TYPES).prop_map(String::from),
            1 => header_value(),
        ],
    );
    // An organization's fleet route takes its /me twin's body.
    let fleet_route = route_key.replacen(" /orgs/{orgId}/", " /me/", 1);
    let own_body = match route_key {
        "POST /orgs" | "PATCH /orgs/{orgId}" => Some(profile_body()),
        "PATCH /orgs/{orgId}/members/{userId}" | "POST /orgs/{orgId}/invitations" => {
            Some(role_body())
        }
        _ => match fleet_route.as_str() {
            "PUT /me" => Some(profile_body()),
            "POST /me/devices" => Some(register_body()),
            "PATCH /me/devices/{deviceId}" => Some(patch_body()),
            "POST /devices/{deviceId}/events" => Some(ingest_body()),
            "POST /me/rules" | "PATCH /me/rules/{ruleId}" => Some(rule_body()),
            "POST /me/devices/{deviceId}/move" => Some(move_body()),
            _ => None,
        },
    };
    (
        who,
        path,
        query,
        content_type,
        if_match,
        auth,
        body(own_body),
    )
        .prop_map(
            move |(who, path, query, content_type, if_match, auth, body)| Hostile {
                route,
                who,
                path,
                query,
                content_type,
                if_match,
                auth,
                body,
            },
        )
        .boxed()
}

/// Hostile requests spread evenly over `routes`.
fn hostile(routes: &[String], cursors: &[String]) -> impl Strategy<Value = Hostile> {
    prop::strategy::Union::new(
        routes
            .iter()
            .enumerate()
            .map(|(i, r)| route_strategy(i, r, cursors)),
    )
}

/// What the test knows of the demo data.
struct Fixture {
    tokens: Vec<(String, String)>,
}

fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}

impl Hostile {
    fn request(&self, route_key: &str, fixture: &Fixture) -> ApiRequest {
        let template_path = route_key.split_once(' ').map(|(_, p)| p).unwrap_or("/");
        let mut concrete = template_path.to_string();
        for (i, name) in path_params(template_path).iter().enumerate() {
            concrete = concrete.replace(
                &format!("{{{name}}}"),
                &utf8_percent_encode(&self.path[i], NON_ALPHANUMERIC).to_string(),
            );
        }
        let mut request = ApiRequest::new(route_key, &concrete);
        for (i, name) in path_params(template_path).iter().enumerate() {
            request = request.param(name, &self.path[i]);
        }
        request = match &self.who {
            Who::Nobody => request,
            Who::Alice => request.caller("demo-alice"),
            Who::Bob => request.caller("demo-bob"),
            Who::Operator => request.admin("demo-operator"),
            Who::Sub(sub) => request.caller(sub),
        };
        for (name, value) in &self.query {
            request = request.query(name, value);
        }
        request = match &self.content_type {
            Some(ct) => request.header("content-type", ct),
            None => request.without_header("content-type"),
        };
        if let Some(v) = &self.if_match {
            request = request.header("if-match", v);
        }
        if route_key.starts_with("POST /devices/") {
            let header = match &self.auth {
                DeviceAuth::Missing => None,
                DeviceAuth::Own => fixture
                    .tokens
                    .iter()
                    .find(|(d, _)| *d == self.path[0])
                    .map(|(_, t)| format!("Bearer {t}"))
                    .or_else(|| Some("Bearer dft_unknown".into())),
                DeviceAuth::Other(i) => Some(format!("Bearer {}", fixture.tokens[*i].1)),
                DeviceAuth::Raw(v) => Some(v.clone()),
            };
            if let Some(h) = header {
                request = request.header("authorization", &h);
            }
        }
        match &self.body {
            BodyKind::None => request,
            BodyKind::Text(t) => request.body(t),
            BodyKind::Binary(b) => request.binary_body(b),
        }
    }

    /// Whether API Gateway itself would refuse the request: HTTP APIs accept at most 10,240
    /// bytes of request line and headers, so longer URLs never reach a function (and
    /// lambda_http cannot even build a request for a URI over 64 KiB).
    fn over_gateway_limit(request: &ApiRequest) -> bool {
        let event = request.event();
        let line = event["rawPath"].as_str().map_or(0, str::len)
            + event["rawQueryString"].as_str().map_or(0, str::len);
        let headers: usize = event["headers"]
            .as_object()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len) + 4)
                    .sum()
            })
            .unwrap_or(0);
        line + headers > GATEWAY_HEADER_LIMIT
    }

    fn body_bytes(&self) -> Option<&[u8]> {
        match &self.body {
            BodyKind::None => None,
            BodyKind::Text(t) => Some(t.as_bytes()),
            BodyKind::Binary(b) => Some(b),
        }
    }

    /// Why docs/openapi.yaml says this request cannot succeed, if it does.
    fn documented_invalid(&self, op: &Operation<'_>, fixture: &Fixture) -> Option<String> {
        let doc = api_doc();
        let route_key = op.route_key();
        // Device routes (`POST /devices/...`: events, sync) authenticate with the device's
        // token, not a user's JWT.
        let user_route = !route_key.starts_with("POST /devices/");
        if user_route {
            match &self.who {
                Who::Nobody => return Some("no caller".into()),
                Who::Sub(sub) if doc.validate(doc.schema("UserId"), &json!(sub)).is_err() => {
                    return Some("unusable sub claim".into())
                }
                _ => {}
            }
            if op.path.starts_with("/admin/") && !matches!(self.who, Who::Operator) {
                return Some("not an operator".into());
            }
        }
        let mut query: Vec<(&str, &str)> = Vec::new();
        for (name, value) in &self.query {
            query.retain(|(n, _)| n != name);
            query.push((name, value));
        }
        for p in doc.parameters(op) {
            let name = p["name"].as_str().unwrap_or_default();
            let value = match p["in"].as_str() {
                Some("path") => {
                    let i = path_params(op.path).iter().position(|n| *n == name)?;
                    Some(self.path[i].clone())
                }
                Some("query") => query
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string()),
                _ => self.if_match.clone().filter(|_| name == "If-Match"),
            };
            match value {
                None if p["required"] == true => return Some(format!("{name} missing")),
                None => {}
                Some(v) => {
                    let typed = match p["schema"]["type"].as_str() {
                        Some("integer") => v.parse::<i64>().map(Value::from).unwrap_or(json!(v)),
                        _ => json!(v),
                    };
                    if let Err(e) = doc.validate(&p["schema"], &typed) {
                        return Some(format!("{name}: {e}"));
                    }
                }
            }
        }
        if !user_route {
            let device = &self.path[0];
            let own = fixture.tokens.iter().any(|(d, _)| d == device);
            if !(own && matches!(self.auth, DeviceAuth::Own)) {
                return Some("not the device's token".into());
            }
        }
        let no_body = self
            .body_bytes()
            .is_none_or(|b| b.iter().all(u8::is_ascii_whitespace));
        if no_body && doc.request_body_optional(&route_key) {
            return None;
        }
        if let Some(schema) = doc.request_schema(&route_key) {
            if let Some(ct) = &self.content_type {
                if !shared::http::api::is_json_media_type(ct) {
                    return Some("not JSON".into());
                }
            }
            let bytes = self.body_bytes().unwrap_or_default();
            if bytes.len() > doc.max_body_bytes(&route_key).unwrap_or(usize::MAX) {
                return Some("body over the limit".into());
            }
            let Ok(body) = serde_json::from_slice::<Value>(bytes) else {
                return Some("body is not JSON".into());
            };
            if let Err(e) = doc.validate(schema, &body) {
                return Some(format!("body: {e}"));
            }
        }
        None
    }
}

#[test]
fn hostile_requests_on_every_route_never_5xx_and_4xx_change_nothing() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (table, devices) = runtime.block_on(demo_table());
    let fixture = Fixture {
        tokens: devices
            .iter()
            .map(|d| (d.device_id.to_string(), d.token.clone()))
            .collect(),
    };
    let gateway = Gateway::new(&table);
    let routes = gateway.route_keys();
    assert_eq!(routes.len(), template().routes.len());

    // Real cursors of Alice's and Bob's listings, to replay, edit and cross.
    let cursors: Vec<String> = runtime.block_on(async {
        let mut found = Vec::new();
        for (user, route, path, param) in [
            ("demo-alice", "GET /me/devices", "/me/devices", None),
            ("demo-bob", "GET /me/devices", "/me/devices", None),
            ("demo-alice", "GET /me/events", "/me/events", None),
            (
                "demo-alice",
                "GET /me/devices/{deviceId}/events",
                "/me/devices/thermo-kitchen/events",
                Some("thermo-kitchen"),
            ),
            (
                "demo-bob",
                "GET /me/devices/{deviceId}/events",
                "/me/devices/thermo-office/events",
                Some("thermo-office"),
            ),
        ] {
            let mut request = ApiRequest::new(route, path)
                .caller(user)
                .query("limit", "1");
            if let Some(id) = param {
                request = request.param("deviceId", id);
            }
            let answer = gateway.send(route, request).await;
            if let Some(c) = answer.body["cursor"].as_str() {
                found.push(c.to_string());
            }
        }
        found
    });
    assert!(cursors.len() >= 4, "real cursors: {cursors:?}");

    let config = Config {
        cases: cases(),
        failure_persistence: None,
        // No shrinking: a case that changed the table leaves it changed, so every shrunk case
        // would "fail" too and the report would name a harmless one; the original is the one.
        max_shrink_iters: 0,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed()));
    let setup = gateway.sent();
    let setup_statuses = gateway.statuses();
    let snapshot = Mutex::new(runtime.block_on(table_contents(&table)));
    let doc = api_doc();
    let at_gateway = Mutex::new(0usize);
    let result = runner.run(&hostile(&routes, &cursors), |h| {
        let route_key = &routes[h.route];
        let op = doc.operation(route_key).expect("documented");
        let request = h.request(route_key, &fixture);
        if Hostile::over_gateway_limit(&request) {
            *at_gateway.lock().unwrap() += 1;
            return Ok(());
        }
        let invalid = h.documented_invalid(&op, &fixture);
        runtime.block_on(async {
            let answer = gateway.send(route_key, request).await;
            check_answer(route_key, &answer).map_err(TestCaseError::fail)?;
            if let Some(why) = &invalid {
                prop_assert!(
                    (400..500).contains(&answer.status),
                    "{route_key}: invalid ({why}) but answered {} {}",
                    answer.status,
                    answer.body
                );
            }
            let after = table_contents(&table).await;
            let mut before = snapshot.lock().unwrap();
            if (400..500).contains(&answer.status) {
                prop_assert!(
                    *before == after,
                    "{route_key}: {} {} changed the table: {}",
                    answer.status,
                    answer.body,
                    changed_items(&before, &after)
                );
            } else {
                *before = after;
            }
            Ok(())
        })
    });
    let mut statuses = gateway.statuses();
    for (status, n) in setup_statuses {
        *statuses.entry(status).or_default() -= n;
    }
    println!(
        "hostile_input: {} hostile requests through the handlers over {} routes ({} more stopped by API Gateway's 10 KB request-line limit; fixed seed, {} cases); answers by status: {statuses:?}",
        gateway.sent() - setup,
        routes.len(),
        at_gateway.lock().unwrap(),
        cases()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The run must reach the handlers' deeper paths, not only bounce off authentication.
    for status in [200u16, 400, 401, 403, 404] {
        assert!(
            statuses.contains_key(&status),
            "no {status} in {statuses:?}"
        );
    }
}

/// The inputs fuzzing found (panics in time arithmetic, a 3.6-million-day range) stay 400s.
#[tokio::test]
async fn regressions_found_by_fuzzing_are_400s() {
    let (table, devices) = demo_table().await;
    let gateway = Gateway::new(&table);
    let before = table_contents(&table).await;
    let kitchen = &devices
        .iter()
        .find(|d| d.device_id == "thermo-kitchen")
        .unwrap()
        .token;
    let admin_events = |from: &str, to: &str| {
        ApiRequest::get("/admin/events")
            .admin("demo-operator")
            .query("type", "alarm")
            .query("from", from)
            .query("to", to)
    };
    let cases = [
        (
            "GET /admin/events",
            admin_events("9999-12-30T00:00:00Z", "9999-12-31T23:00:00Z"),
            200,
            "",
        ),
        (
            "GET /admin/events",
            admin_events("0000-01-01T00:00:00Z", "9999-12-31T23:00:00Z"),
            400,
            "from",
        ),
        (
            "GET /admin/events",
            admin_events("2024-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00"),
            400,
            "to",
        ),
        (
            "GET /me/events",
            ApiRequest::get("/me/events")
                .caller("demo-alice")
                .query("to", "0000-01-01T00:00:00Z"),
            200,
            "",
        ),
        (
            "POST /devices/{deviceId}/events",
            ApiRequest::post("/devices/thermo-kitchen/events")
            .header("authorization", &format!("Bearer {kitchen}"))
            .json(
                json!({"events": [{"type": "t", "value": 1, "at": "9999-12-31T23:59:59-01:00"}]}),
            ),
            400,
            "events[0].at",
        ),
        (
            "POST /me/devices",
            ApiRequest::post("/me/devices")
                .caller("demo-alice")
                .json(json!({"deviceId": "..", "name": "dots", "type": "t"})),
            400,
            "deviceId",
        ),
        (
            "PUT /me",
            ApiRequest::put("/me")
                .caller("demo-alice")
                .header("content-type", "text/plain")
                .json(json!({"name": "plain"})),
            415,
            "Content-Type",
        ),
        (
            "PATCH /me/devices/{deviceId}",
            ApiRequest::patch("/me/devices/thermo-kitchen")
                .caller("demo-alice")
                .param("deviceId", "thermo-kitchen")
                .header("if-match", "\"\"1\"\"")
                .json(json!({"status": "error"})),
            400,
            "If-Match",
        ),
    ];
    for (route, request, status, field) in cases {
        let answer = gateway.send(route, request).await;
        check_answer(route, &answer).unwrap();
        assert_eq!(answer.status, status, "{route}: {}", answer.body);
        if status >= 400 {
            assert_eq!(answer.error_field(), field, "{route}: {}", answer.body);
        }
    }

    // Alice's own cursors with a sort key edited out of the query's range (still her
    // partition, so the cursor check passes and DynamoDB refuses the start key).
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    for (route, path, device, sort_key) in [
        ("GET /me/events", "/me/events", None, "SK"),
        (
            "GET /me/devices/{deviceId}/events",
            "/me/devices/thermo-kitchen/events",
            Some("thermo-kitchen"),
            "SK",
        ),
    ] {
        let page = |cursor: Option<&str>| {
            let mut r = ApiRequest::new(route, path)
                .caller("demo-alice")
                .query("limit", "1");
            if let Some(id) = device {
                r = r.param("deviceId", id);
            }
            if let Some(c) = cursor {
                r = r.query("cursor", c);
            }
            r
        };
        let first = gateway.send(route, page(None)).await;
        let cursor = first.body["cursor"].as_str().unwrap();
        let mut envelope: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(cursor).unwrap()).unwrap();
        let key = envelope["k"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|k| k.get(sort_key).is_some())
            .unwrap();
        let edited = key[sort_key].as_str().unwrap().replacen("20", "2 ", 1);
        key[sort_key] = json!(edited);
        let forged = URL_SAFE_NO_PAD.encode(envelope.to_string());
        let answer = gateway.send(route, page(Some(&forged))).await;
        check_answer(route, &answer).unwrap();
        assert_eq!(
            (answer.status, answer.error_field()),
            (400, "cursor"),
            "{route}: {}",
            answer.body
        );
    }
    assert_eq!(table_contents(&table).await, before);
    println!(
        "hostile_input: {} regression requests (inputs fuzzing found), all 4xx or the documented 200",
        gateway.sent() - 2
    );
}

/// `null` for an optional field is not "absent" (the contract fuzzer found five routes that
/// took it so where docs/openapi.yaml allows no null): a 400 naming the field, the documented
/// error body, nothing written. Where the contract gives null a meaning (a PATCH removing a
/// value) it is still taken.
#[tokio::test]
async fn null_for_an_optional_field_is_a_400_naming_it_unless_the_contract_allows_null() {
    let (table, devices) = demo_table().await;
    let gateway = Gateway::new(&table);
    let before = table_contents(&table).await;
    let kitchen = &devices
        .iter()
        .find(|d| d.device_id == "thermo-kitchen")
        .unwrap()
        .token;
    let device = |route: &str, path: &str, body: Value| {
        ApiRequest::new(route, path)
            .param("deviceId", "thermo-kitchen")
            .header("authorization", &format!("Bearer {kitchen}"))
            .json(body)
    };
    let rule = |extra: Value| {
        let mut body = json!({"name": "hot", "eventType": "temperature",
            "scope": {"deviceId": "thermo-kitchen"}, "condition": {"above": 80}, "severity": "major"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        ApiRequest::post("/me/rules")
            .caller("demo-alice")
            .json(body)
    };
    let patch = |body: Value| {
        ApiRequest::patch("/me/devices/thermo-kitchen")
            .caller("demo-alice")
            .param("deviceId", "thermo-kitchen")
            .header("if-match", "1")
            .json(body)
    };
    let command = |body: Value| {
        ApiRequest::post("/me/devices/thermo-kitchen/commands")
            .caller("demo-alice")
            .param("deviceId", "thermo-kitchen")
            .json(body)
    };
    let ack = json!({"commandId": "cmd-1", "status": "succeeded", "result": null});
    let event = json!({"type": "temperature", "value": 21, "at": ago(5)});
    let cases = [
        ("POST /me/rules", rule(json!({"clear": null})), "clear"),
        ("POST /me/rules", rule(json!({"forSeconds": null})), "forSeconds"),
        ("POST /me/rules", rule(json!({"remindEverySeconds": null})), "remindEverySeconds"),
        (
            "POST /me/devices/{deviceId}/commands",
            command(json!({"name": "reboot", "expiresInSeconds": null})),
            "expiresInSeconds",
        ),
        (
            "POST /me/devices/{deviceId}/commands",
            command(json!({"name": "reboot", "parameters": null})),
            "parameters",
        ),
        ("PATCH /me/devices/{deviceId}", patch(json!({"tags": null})), "tags"),
        (
            "PATCH /me/devices/{deviceId}",
            patch(json!({"name": "Kitchen", "status": null})),
            "status",
        ),
        ("PATCH /me/devices/{deviceId}", patch(json!({"name": null})), "name"),
        (
            "POST /me/devices",
            ApiRequest::post("/me/devices").caller("demo-alice").json(
                json!({"deviceId": "porch-1", "name": "Porch", "type": "t", "reportEverySeconds": null}),
            ),
            "reportEverySeconds",
        ),
        (
            "POST /me/rollouts",
            ApiRequest::post("/me/rollouts")
                .caller("demo-alice")
                .json(json!({"tag": "home", "type": null, "desired": {"mode": "eco"}})),
            "type",
        ),
        (
            "POST /me/rollouts",
            ApiRequest::post("/me/rollouts")
                .caller("demo-alice")
                .json(json!({"tag": null, "type": "thermostat", "desired": {"mode": "eco"}})),
            "tag",
        ),
        (
            "POST /devices/{deviceId}/sync",
            device("POST /devices/{deviceId}/sync", "/devices/thermo-kitchen/sync", json!({"acks": [ack]})),
            "acks[0].result",
        ),
        (
            "POST /devices/{deviceId}/sync",
            device("POST /devices/{deviceId}/sync", "/devices/thermo-kitchen/sync", json!({"reported": null})),
            "reported",
        ),
        (
            "POST /devices/{deviceId}/events",
            device(
                "POST /devices/{deviceId}/events",
                "/devices/thermo-kitchen/events",
                json!({"events": [event], "reported": null}),
            ),
            "reported",
        ),
    ];
    for (route, request, field) in cases {
        let answer = gateway.send(route, request).await;
        check_answer(route, &answer).unwrap();
        assert_eq!(
            (answer.status, answer.error_code(), answer.error_field()),
            (400, "invalid_request", field),
            "{route}: {}",
            answer.body
        );
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("must not be null"),
            "{route}: {}",
            answer.body
        );
    }
    assert_eq!(
        table_contents(&table).await,
        before,
        "a refused null wrote nothing"
    );

    // Where the contract documents null (a PATCH removing a declared interval), it is taken.
    let read = gateway
        .send(
            "GET /me/devices/{deviceId}",
            ApiRequest::get("/me/devices/thermo-kitchen")
                .caller("demo-alice")
                .param("deviceId", "thermo-kitchen"),
        )
        .await;
    assert_eq!(read.status, 200, "{}", read.body);
    let version = read.body["device"]["version"].to_string();
    let answer = gateway
        .send(
            "PATCH /me/devices/{deviceId}",
            ApiRequest::patch("/me/devices/thermo-kitchen")
                .caller("demo-alice")
                .param("deviceId", "thermo-kitchen")
                .header("if-match", &version)
                .json(json!({"reportEverySeconds": null})),
        )
        .await;
    check_answer("PATCH /me/devices/{deviceId}", &answer).unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
}

/// The items that differ between two table contents, as `-` (gone or before) and `+` (new or
/// after) lines, so a failure says what changed.
fn changed_items(before: &[Item], after: &[Item]) -> String {
    let gone = before.iter().filter(|i| !after.contains(i));
    let new = after.iter().filter(|i| !before.contains(i));
    gone.map(|i| format!("\n- {i:?}"))
        .chain(new.map(|i| format!("\n+ {i:?}")))
        .collect()
}

/// Organization inputs (issue 33), as the organization's owner (so a refusal is about the
/// input, never the role): hostile organization ids on every `/orgs/{orgId}...` route, hostile
/// member and invitation ids, invitation codes malformed, unknown, expired, revoked and used
/// twice, a JWT `sub` in the organizations' reserved `org:` namespace, and role values that
/// are no role. Each is a 4xx with the documented error body, and nothing is written.
#[tokio::test]
async fn organization_inputs_are_refused_and_change_nothing() {
    use shared::model::entities::invitation::InvitationItem;
    use shared::model::ids::OrgId;
    use shared::model::org::{InvitationCode, Role};

    let table = fresh_table().await;
    let gateway = Gateway::new(&table);
    let owner = "hz-owner";
    let created = gateway
        .send(
            "POST /orgs",
            ApiRequest::post("/orgs")
                .caller(owner)
                .json(json!({"name": "Hostile Inc"})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let org = created.body["org"]["orgId"].as_str().unwrap().to_string();
    let registered = gateway
        .send(
            "POST /orgs/{orgId}/devices",
            ApiRequest::post(&format!("/orgs/{org}/devices"))
                .caller(owner)
                .json(json!({"deviceId": "hz-dev-1", "name": "Hostile meter", "type": "meter"})),
        )
        .await;
    assert_eq!(registered.status, 201, "{}", registered.body);
    let invite = |role: &str| {
        ApiRequest::post(&format!("/orgs/{org}/invitations"))
            .caller(owner)
            .json(json!({ "role": role }))
    };
    let code_of = |a: &Answer| a.body["invitation"]["code"].as_str().unwrap().to_string();
    let viewer_code = code_of(
        &gateway
            .send("POST /orgs/{orgId}/invitations", invite("viewer"))
            .await,
    );
    let accepted = gateway
        .send(
            "POST /invitations/{code}/accept",
            ApiRequest::post(&format!("/invitations/{viewer_code}/accept")).caller("hz-viewer"),
        )
        .await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    // An open invitation, one revoked, and one expired (stored as it would be, a day old).
    let open_code = code_of(
        &gateway
            .send("POST /orgs/{orgId}/invitations", invite("operator"))
            .await,
    );
    let revoked = gateway
        .send("POST /orgs/{orgId}/invitations", invite("admin"))
        .await;
    let revoked_id = revoked.body["invitation"]["invitationId"].as_str().unwrap();
    let revoke = gateway
        .send(
            "DELETE /orgs/{orgId}/invitations/{invitationId}",
            ApiRequest::delete(&format!("/orgs/{org}/invitations/{revoked_id}")).caller(owner),
        )
        .await;
    assert_eq!(revoke.status, 204, "{}", revoke.body);
    let org_id = OrgId::parse(org.as_str()).unwrap();
    let expired = InvitationCode::generate(&org_id);
    let now = Timestamp::now();
    put_entity(
        &table,
        &InvitationItem {
            org_id: org_id.clone(),
            invitation_id: expired.invitation_id(),
            role: Role::Viewer,
            created_by: key::user(owner),
            created_at: now.plus_seconds(-8 * 86_400),
            expires_at: now.plus_seconds(-86_400),
            ttl: now.plus_seconds(86_400).epoch_seconds(),
        },
    )
    .await;

    let mut before = table_contents(&table).await;
    let mut tried = 0usize;
    let mut by_status: std::collections::BTreeMap<u16, usize> = Default::default();
    // Sends `request` to `route`, checks the answer is a documented 4xx, with `expect`ed
    // status and code where given, and that the table is unchanged.
    let mut wrong: Vec<String> = Vec::new();
    macro_rules! refused {
        ($route:expr, $request:expr, $expect:expr) => {{
            let route: &str = $route;
            let answer = gateway.send(route, $request).await;
            if let Err(e) = check_answer(route, &answer) {
                wrong.push(e);
            }
            let expect: &[(u16, &str)] = $expect;
            if !expect.iter().any(|(s, field_or_code)| {
                answer.status == *s
                    && (field_or_code.is_empty()
                        || answer.error_code() == *field_or_code
                        || answer.error_field() == *field_or_code)
            }) {
                wrong.push(format!(
                    "{route}: expected one of {expect:?}, got {} {}",
                    answer.status, answer.body
                ));
            }
            let after = table_contents(&table).await;
            assert!(
                before == after,
                "{route}: {} changed the table: {}",
                answer.status,
                changed_items(&before, &after)
            );
            tried += 1;
            *by_status.entry(answer.status).or_default() += 1;
            answer
        }};
    }

    // 1. Hostile organization ids on every organization route (the caller owns the real one).
    let long_id = format!("o{}", "a".repeat(64));
    let bad_orgs: Vec<(String, String)> = [
        "org:x",
        "..",
        "%23",
        "%2523",
        "ORG%23x",
        "%2E%2E",
        "o%00",
        "*",
        &format!("{org}%23x"),
        &format!("org:{org}"),
        &format!("ORG%23{org}"),
        &format!("{org}%20"),
        &org.to_uppercase(),
        &long_id,
    ]
    .iter()
    .map(|raw| {
        let decoded = percent_encoding::percent_decode_str(raw)
            .decode_utf8_lossy()
            .into_owned();
        (raw.to_string(), decoded)
    })
    .collect();
    let org_routes: Vec<_> = template()
        .routes
        .iter()
        .filter(|r| r.path.starts_with("/orgs/{orgId}"))
        .collect();
    for route in &org_routes {
        let route_key = route.route_key();
        for (raw, decoded) in &bad_orgs {
            let mut path = route.path.replace("{orgId}", raw);
            let mut values = vec![("orgId", decoded.clone())];
            for (name, value) in [
                ("deviceId", "hz-dev-1"),
                ("userId", "hz-viewer"),
                ("ruleId", "01JRULE0000000000000000000"),
                ("alarmId", "01JALARM000000000000000000"),
                ("rolloutId", "01JROLLOUT0000000000000000"),
                ("invitationId", "00000000000000000000000000000000"),
            ] {
                if path.contains(&format!("{{{name}}}")) {
                    path = path.replace(&format!("{{{name}}}"), value);
                    values.push((name, value.to_string()));
                }
            }
            let mut request = ApiRequest::new(&route_key, &path).caller(owner);
            for (name, value) in &values {
                request = request.param(name, value);
            }
            if matches!(route.method.as_str(), "POST" | "PUT" | "PATCH") {
                request = request.header("if-match", "1").json(json!({"name": "x"}));
            }
            refused!(&route_key, request, &[(400, "orgId"), (404, "not_found")]);
        }
    }

    // 2. Hostile member and invitation ids in the real organization.
    for raw in [
        "org:x",
        "..",
        "%23",
        "a%23b",
        &"u".repeat(65),
        &format!("org:{org}"),
    ] {
        let decoded = percent_encoding::percent_decode_str(raw)
            .decode_utf8_lossy()
            .into_owned();
        for (route, body) in [
            (
                "PATCH /orgs/{orgId}/members/{userId}",
                Some(json!({"role": "viewer"})),
            ),
            ("DELETE /orgs/{orgId}/members/{userId}", None),
        ] {
            let mut request = ApiRequest::new(route, &format!("/orgs/{org}/members/{raw}"))
                .caller(owner)
                .param("orgId", &org)
                .param("userId", &decoded);
            if let Some(b) = body {
                request = request.json(b);
            }
            refused!(route, request, &[(400, "userId"), (404, "not_found")]);
        }
        let route = "DELETE /orgs/{orgId}/invitations/{invitationId}";
        refused!(
            route,
            ApiRequest::new(route, &format!("/orgs/{org}/invitations/{raw}"))
                .caller(owner)
                .param("orgId", &org)
                .param("invitationId", &decoded),
            &[(404, "not_found")]
        );
    }
    // The revoked invitation's id again, and an id of the right shape that names nothing.
    for id in [revoked_id, "0123456789abcdef0123456789abcdef"] {
        refused!(
            "DELETE /orgs/{orgId}/invitations/{invitationId}",
            ApiRequest::delete(&format!("/orgs/{org}/invitations/{id}")).caller(owner),
            &[(404, "not_found")]
        );
    }

    // 3. Invitation codes that admit nobody: malformed, unknown, expired, revoked.
    let secret = open_code.rsplit_once('.').unwrap().1.to_string();
    let unknown = InvitationCode::generate(&org_id).reveal();
    let malformed: Vec<String> = vec![
        "abc".into(),
        org.clone(),
        format!("{org}."),
        format!(".{secret}"),
        format!("{org}.{}", &secret[1..]),
        format!("{org}.{secret}0"),
        format!("{org}.{}", secret.to_uppercase()),
        format!("{org}.{}", "g".repeat(32)),
        format!("org:x.{secret}"),
        format!("{long_id}.{secret}"),
        format!("{org}%23.{secret}"),
        format!("..%2F{org}.{secret}"),
        format!("{org}.{secret}%00"),
        format!("{org}..{secret}"),
        unknown,
        expired.reveal(),
    ];
    for raw in &malformed {
        let decoded = percent_encoding::percent_decode_str(raw)
            .decode_utf8_lossy()
            .into_owned();
        let route = "POST /invitations/{code}/accept";
        let answer = refused!(
            route,
            ApiRequest::new(route, &format!("/invitations/{raw}/accept"))
                .caller("hz-joiner")
                .param("code", &decoded),
            &[(404, "not_found")]
        );
        assert!(
            !answer.body.to_string().contains(&org),
            "a refused code reveals nothing of the organization: {}",
            answer.body
        );
    }

    // 4. A JWT whose sub is in the organizations' namespace: 401 everywhere, even with a
    //    valid code (which then still admits its rightful holder).
    for sub in ["org:o123", &format!("org:{org}"), "org:"] {
        for (route, request) in [
            ("GET /me", ApiRequest::get("/me")),
            ("GET /me/devices", ApiRequest::get("/me/devices")),
            (
                "POST /me/devices",
                ApiRequest::post("/me/devices")
                    .json(json!({"deviceId": "hz-dev-9", "name": "As the org", "type": "meter"})),
            ),
            ("GET /orgs", ApiRequest::get("/orgs")),
            (
                "POST /orgs",
                ApiRequest::post("/orgs").json(json!({"name": "x"})),
            ),
            (
                "GET /orgs/{orgId}/devices",
                ApiRequest::get(&format!("/orgs/{org}/devices")),
            ),
            (
                "POST /invitations/{code}/accept",
                ApiRequest::post(&format!("/invitations/{open_code}/accept")),
            ),
        ] {
            refused!(route, request.caller(sub), &[(401, "")]);
        }
    }

    // 5. Role values that are no role (and `owner`, never given by an invitation).
    let member = |body: Value| {
        ApiRequest::patch(&format!("/orgs/{org}/members/hz-viewer"))
            .caller(owner)
            .json(body)
    };
    let invitation = |body: Value| {
        ApiRequest::post(&format!("/orgs/{org}/invitations"))
            .caller(owner)
            .json(body)
    };
    let bad_roles = [
        json!("Owner"),
        json!("ADMIN"),
        json!("root"),
        json!(" viewer"),
        json!("viewer "),
        json!(""),
        json!(7),
        json!(null),
        json!(true),
        json!(["viewer"]),
        json!({"role": "viewer"}),
    ];
    for role in &bad_roles {
        refused!(
            "PATCH /orgs/{orgId}/members/{userId}",
            member(json!({ "role": role })),
            &[(400, "role"), (400, "")]
        );
        refused!(
            "POST /orgs/{orgId}/invitations",
            invitation(json!({ "role": role })),
            &[(400, "role"), (400, "")]
        );
    }
    refused!(
        "PATCH /orgs/{orgId}/members/{userId}",
        member(json!({})),
        &[(400, "role"), (400, "")]
    );
    refused!(
        "POST /orgs/{orgId}/invitations",
        invitation(json!({"role": "owner"})),
        &[(400, "role")]
    );
    for days in [
        json!(0),
        json!(31),
        json!(-1),
        json!(2.5),
        json!("7"),
        json!(null),
        json!(1e300),
    ] {
        refused!(
            "POST /orgs/{orgId}/invitations",
            invitation(json!({"role": "viewer", "expiresInDays": days})),
            &[(400, "expiresInDays")]
        );
    }

    // 6. A code used twice: the second person is refused, the first stays the only member.
    let used = gateway
        .send(
            "POST /invitations/{code}/accept",
            ApiRequest::post(&format!("/invitations/{open_code}/accept")).caller("hz-first"),
        )
        .await;
    assert_eq!(used.status, 200, "the rightful holder: {}", used.body);
    before = table_contents(&table).await;
    for who in ["hz-second", "hz-first"] {
        refused!(
            "POST /invitations/{code}/accept",
            ApiRequest::post(&format!("/invitations/{open_code}/accept")).caller(who),
            &[(404, "not_found"), (409, "already_member")]
        );
    }
    println!(
        "hostile_input: {tried} hostile organization requests (orgId, userId, invitationId, invitation codes, org: subs, roles) over {} organization routes, all refused, nothing written: {by_status:?}",
        org_routes.len() + 1
    );
    assert!(
        wrong.is_empty(),
        "{} wrong answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
