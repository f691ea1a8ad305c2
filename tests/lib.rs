//! Test harness: one DynamoDB Local per test process (or `FLEET_DYNAMODB_ENDPOINT`), a fresh
//! table per test created from `template.yaml`, and requests shaped exactly like API Gateway's
//! HTTP API payload 2.0 events.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use fleet_testkit::api_event::ApiEvent;
use fleet_testkit::dynamodb_local::{default_install_dir, DynamoDbLocal};
use fleet_testkit::stack::{create_table, local_table};
use fleet_testkit::template::{default_template_path, Template};
use lambda_http::{Body, Request, Response};
use serde_json::{json, Value};
use shared::http::gateway::Metered;
use shared::model::entities::{EntityType, ItemKey};
use shared::ops::limits::RegistrationLimit;
use shared::store::metrics::{MeterSnapshot, RequestMeter};
use shared::FleetTable;

pub mod api_doc;
pub mod gateway;

/// The template, read once.
pub fn template() -> &'static Template {
    static TEMPLATE: OnceLock<Template> = OnceLock::new();
    TEMPLATE.get_or_init(|| Template::load(&default_template_path()).expect("template.yaml"))
}

/// The DynamoDB Local endpoint for this test process.
pub fn endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        if let Ok(endpoint) = std::env::var("FLEET_DYNAMODB_ENDPOINT") {
            return endpoint;
        }
        let local = DynamoDbLocal::start(&default_install_dir()).unwrap_or_else(|e| panic!("{e}"));
        let endpoint = local.endpoint().to_string();
        // Lives until the process exits; its guard then stops the JVM.
        Box::leak(Box::new(local));
        endpoint
    })
}

/// A new, empty table with the template's schema but no stream (see
/// `TableDefinition::without_stream`: a streamed table per test slows DynamoDB Local down for
/// every later test).
pub async fn fresh_table() -> FleetTable {
    new_table(&template().table.without_stream()).await
}

/// A new, empty table with the template's schema and its stream, for tests that read the
/// alarm notifications off the stream.
pub async fn fresh_table_with_stream() -> FleetTable {
    new_table(&template().table).await
}

async fn new_table(definition: &fleet_testkit::template::TableDefinition) -> FleetTable {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "test-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let table = local_table(endpoint(), &name).await;
    create_table(&table.client, definition, &name)
        .await
        .expect("create table from template.yaml");
    table
}

/// A fresh table with the demo data of `make dev`; returns the device tokens too.
pub async fn demo_table() -> (FleetTable, Vec<fleet_testkit::demo::DemoDevice>) {
    let table = fresh_table().await;
    let devices = fleet_testkit::demo::seed(&table)
        .await
        .expect("seed demo data");
    (table, devices)
}

/// A fresh table holding the reference dataset (`fleet_testkit::reference`), with the
/// retention its fixed timestamps need; returns its device tokens too.
pub async fn reference_table() -> (FleetTable, fleet_testkit::reference::Tokens) {
    let mut table = fresh_table().await;
    table.config.retention_days = fleet_testkit::reference::REFERENCE_RETENTION_DAYS;
    let tokens = fleet_testkit::reference::seed(&table)
        .await
        .expect("reference dataset");
    (table, tokens)
}

/// The reference dataset seeded once per test process, for tests that only read it (seeding
/// it takes seconds; a dozen read-only tests each seeding their own was minutes of the suite).
/// Each caller gets a client of its own runtime on the shared table: a client's connections
/// belong to the runtime that made them, and every test has its own.
pub async fn read_only_reference_table() -> FleetTable {
    static SEEDED: OnceLock<String> = OnceLock::new();
    let name = SEEDED.get_or_init(|| {
        std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to seed the reference dataset in")
                .block_on(async { reference_table().await.0.name().to_string() })
        })
        .join()
        .expect("seed the reference dataset")
    });
    let mut table = local_table(endpoint(), name).await;
    table.config.retention_days = fleet_testkit::reference::REFERENCE_RETENTION_DAYS;
    table
}

/// One stored item, attributes in name order, for comparing table contents.
pub use shared::model::schema::Item;

/// Every item in the table, sorted by key (a test-only Scan).
pub async fn table_contents(table: &FleetTable) -> Vec<Item> {
    fleet_testkit::pricing::snapshot(table)
        .await
        .expect("scan")
        .into_values()
        .collect()
}

/// The key a stored item sits at (it must be one of the table's key shapes).
pub fn key_of(item: &Item) -> ItemKey {
    let attributes = item.clone().into_iter().collect();
    ItemKey::of(&attributes).expect("a Device Fleet key")
}

/// The keys of stored items by the names tests use for them: every key is built by
/// `shared::model::keys`, never spelled in a test.
pub mod key {
    use shared::model::entities::ItemKey;
    use shared::model::ids::{DeviceId, Tag, UserId};

    /// A user id that must be valid.
    pub fn user(id: &str) -> UserId {
        UserId::parse(id).expect("a valid user id")
    }

    /// A device id that must be valid.
    pub fn device_id(id: &str) -> DeviceId {
        DeviceId::parse(id).expect("a valid device id")
    }

    /// `user`'s profile.
    pub fn profile(user_id: &str) -> ItemKey {
        ItemKey::Profile {
            user: user(user_id),
        }
    }

    /// `device` in `user_id`'s partition.
    pub fn device(user_id: &str, device: &str) -> ItemKey {
        ItemKey::Device {
            user: user(user_id),
            device: device_id(device),
        }
    }

    /// The live state of `user_id`'s `device`, placed on the owner's partition `shard`.
    pub fn state(user_id: &str, shard: u32, device: &str) -> ItemKey {
        ItemKey::DeviceState {
            user: user(user_id),
            partition: shard,
            device: device_id(device),
        }
    }

    /// The purge marker of `user_id`'s deleted `device`.
    pub fn purge_marker(user_id: &str, device: &str) -> ItemKey {
        ItemKey::PurgeMarker {
            user: user(user_id),
            device: device_id(device),
        }
    }

    /// The fleet item of `user_id`.
    pub fn fleet(user_id: &str) -> ItemKey {
        ItemKey::Fleet {
            user: user(user_id),
        }
    }

    /// The table-wide registration of `device`.
    pub fn registration(device: &str) -> ItemKey {
        ItemKey::Registration {
            device: device_id(device),
        }
    }

    /// The link of `device` to `tag` in `user_id`'s partition.
    pub fn tag_link(user_id: &str, tag: &str, device: &str) -> ItemKey {
        ItemKey::TagLink {
            user: user(user_id),
            tag: Tag::parse(tag).expect("a valid tag"),
            device: device_id(device),
        }
    }

    /// The partition key of `user_id`'s events of `device`.
    pub fn event_partition(user_id: &str, device: &str) -> String {
        shared::model::keys::event_pk(&user(user_id), &device_id(device))
    }
}

/// The item `key` addresses, if any (consistent read, not metered).
pub async fn item(table: &FleetTable, key: &ItemKey) -> Option<Item> {
    table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(key.attributes()))
        .consistent_read(true)
        .send()
        .await
        .expect("get_item")
        .item
        .map(|i| i.into_iter().collect())
}

/// Stores `entity` as it is, bypassing the API (for states a test sets up directly).
pub async fn put_entity(table: &FleetTable, entity: &impl shared::model::entities::Entity) {
    put_item(table, entity.to_item(&table.config.shards).unwrap()).await;
}

/// Stores `item`, attribute by attribute as given, bypassing the API (for items in a form
/// the code no longer writes).
pub async fn put_item(
    table: &FleetTable,
    item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) {
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
}

/// An ingest request for `device` with its bearer `token` and `events` (a JSON array).
pub fn ingest_request(device: &str, token: &str, events: Value) -> ApiRequest {
    ApiRequest::post(&format!("/devices/{device}/events"))
        .header("Authorization", &format!("Bearer {token}"))
        .json(json!({ "events": events }))
}

/// The timestamp `seconds` before now, as events carry it.
pub fn ago(seconds: i64) -> String {
    shared::model::timestamp::Timestamp::now()
        .plus_seconds(-seconds)
        .to_string()
}

/// An item's `entityType`.
pub fn entity_type(item: &Item) -> Option<EntityType> {
    EntityType::of(item)
}

/// A function's Router served as its Lambda serves it (the test is its execution environment).
pub fn gateway(router: axum::Router) -> Metered<axum::Router> {
    shared::http::gateway::app(router)
}

/// A request to `route_key` (`PATCH /me/devices/{deviceId}`) at a concrete path, built on the
/// project's one event builder ([`ApiEvent`]) with the template's routing.
#[derive(Clone)]
pub struct ApiRequest {
    event: ApiEvent,
}

impl ApiRequest {
    /// A request for `route_key` at `path`.
    pub fn new(route_key: &str, path: &str) -> Self {
        Self {
            event: ApiEvent::new(route_key, path),
        }
    }

    /// A `method` request to the concrete `path` (`/me/devices/d-1/events`, query string not
    /// included): the route key and path parameters are those of the template route the path
    /// matches, as API Gateway derives them (parameters percent-decoded; a literal segment
    /// wins over a parameter). Panics when no route of `template.yaml` matches: for a request
    /// no route serves, give the route key by hand with [`ApiRequest::new`].
    pub fn to(method: &str, path: &str) -> Self {
        let route = match_route(method, path)
            .unwrap_or_else(|| panic!("no route of template.yaml serves {method} {path}"));
        let mut request = Self::new(&route.route_key, path);
        for (name, value) in route.parameters {
            request = request.param(&name, &value);
        }
        request
    }

    /// `GET path`, routed as [`ApiRequest::to`] does.
    pub fn get(path: &str) -> Self {
        Self::to("GET", path)
    }

    /// `POST path`, routed as [`ApiRequest::to`] does.
    pub fn post(path: &str) -> Self {
        Self::to("POST", path)
    }

    /// `PUT path`, routed as [`ApiRequest::to`] does.
    pub fn put(path: &str) -> Self {
        Self::to("PUT", path)
    }

    /// `PATCH path`, routed as [`ApiRequest::to`] does.
    pub fn patch(path: &str) -> Self {
        Self::to("PATCH", path)
    }

    /// `DELETE path`, routed as [`ApiRequest::to`] does.
    pub fn delete(path: &str) -> Self {
        Self::to("DELETE", path)
    }

    fn with(self, change: impl FnOnce(ApiEvent) -> ApiEvent) -> Self {
        Self {
            event: change(self.event),
        }
    }

    /// Authenticated as `sub`.
    pub fn caller(self, sub: &str) -> Self {
        self.with(|e| e.caller(sub))
    }

    /// Authenticated as `sub`, a member of the `admin` group (as API Gateway flattens it).
    pub fn admin(self, sub: &str) -> Self {
        self.with(|e| e.operator(sub))
    }

    /// One more JWT claim (e.g. `cognito:groups`), after `caller` or `admin`.
    pub fn claim(self, name: &str, value: &str) -> Self {
        self.with(|e| e.claim(name, value))
    }

    /// A query string parameter.
    pub fn query(self, name: &str, value: &str) -> Self {
        self.with(|e| e.query(name, value))
    }

    /// A path parameter.
    pub fn param(self, name: &str, value: &str) -> Self {
        self.with(|e| e.param(name, value))
    }

    /// A header.
    pub fn header(self, name: &str, value: &str) -> Self {
        self.with(|e| e.header(name, value))
    }

    /// A JSON body.
    pub fn json(self, body: Value) -> Self {
        self.with(|e| e.json(&body))
    }

    /// A raw body.
    pub fn body(self, body: &str) -> Self {
        self.with(|e| e.body(body))
    }

    /// Without the header `name` (e.g. no `content-type`).
    pub fn without_header(self, name: &str) -> Self {
        self.with(|e| e.without_header(name))
    }

    /// A binary body, base64-encoded as API Gateway sends non-text payloads.
    pub fn binary_body(self, bytes: &[u8]) -> Self {
        self.with(|e| e.binary_body(bytes))
    }

    /// The event as API Gateway sends it (JSON), e.g. for another runtime's handler.
    pub fn event(&self) -> Value {
        self.event.to_json()
    }

    /// The lambda_http request the runtime would hand the function.
    pub fn build(&self) -> Request {
        self.event.to_request()
    }
}

/// A template route a concrete path matched.
struct RouteMatch {
    route_key: String,
    /// Path parameters, decoded.
    parameters: Vec<(String, String)>,
    /// Literal segments of the route's path.
    literals: usize,
}

/// The template route serving `method path`. The route with the most literal segments wins,
/// as in API Gateway.
fn match_route(method: &str, path: &str) -> Option<RouteMatch> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut best: Option<RouteMatch> = None;
    for route in &template().routes {
        if route.method != method && route.method != "ANY" {
            continue;
        }
        let pattern: Vec<&str> = route.path.trim_start_matches('/').split('/').collect();
        if pattern.len() != segments.len() {
            continue;
        }
        let mut parameters = Vec::new();
        let mut literals = 0;
        let matched = pattern.iter().zip(&segments).all(|(p, s)| {
            match p.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(name) if !s.is_empty() => {
                    let value = percent_encoding::percent_decode_str(s).decode_utf8_lossy();
                    parameters.push((name.to_string(), value.into_owned()));
                    true
                }
                Some(_) => false,
                None => {
                    literals += 1;
                    p == s
                }
            }
        });
        if matched && best.as_ref().is_none_or(|b| literals > b.literals) {
            best = Some(RouteMatch {
                route_key: route.route_key(),
                parameters,
                literals,
            });
        }
    }
    best
}

/// A response, decoded.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// JSON body (Null when empty).
    pub body: Value,
    /// Headers.
    pub headers: lambda_http::http::HeaderMap,
    /// DynamoDB work the request did.
    pub used: MeterSnapshot,
}

impl Answer {
    /// The error code of an error body.
    pub fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// The field of an error body.
    pub fn error_field(&self) -> &str {
        self.body["error"]["field"].as_str().unwrap_or("")
    }
}

/// Decodes a handler response.
pub fn answer(response: Response<Body>, used: MeterSnapshot) -> Answer {
    let bytes: &[u8] = response.body().as_ref();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(bytes).expect("JSON body")
    };
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body,
        used,
    }
}

/// Runs `fut` and returns its output with the DynamoDB work it did.
pub async fn metered<F: std::future::Future>(fut: F) -> (F::Output, MeterSnapshot) {
    let meter = RequestMeter::new();
    let out = meter.clone().scope(fut).await;
    (out, meter.snapshot())
}

/// Sends `request` through the dashboard handler.
pub async fn dashboard(table: &FleetTable, request: ApiRequest) -> Answer {
    // Boxed: a handler future is large in debug builds, and a test awaiting many of them
    // inline can overflow its thread's stack.
    let (response, used) = metered(Box::pin(
        gateway(dashboard::router(FleetTable::clone(table))).handle(request.build()),
    ))
    .await;
    answer(response, used)
}

/// Registers `device` (a thermostat) for `owner` through the handler; returns its token.
pub async fn register_device(table: &FleetTable, owner: &str, device: &str) -> String {
    let a = device_updates(
        table,
        ApiRequest::post("/me/devices")
            .caller(owner)
            .json(json!({"deviceId": device, "name": "Boiler room", "type": "thermostat"})),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    a.body["token"].as_str().unwrap().to_string()
}

/// Sends `request` through the ingest handler of `ingestor`.
pub async fn ingest(
    ingestor: &std::sync::Arc<shared::ops::ingest::Ingestor>,
    request: ApiRequest,
) -> Answer {
    let (response, used) = metered(Box::pin(
        gateway(ingest::router(std::sync::Arc::clone(ingestor))).handle(request.build()),
    ))
    .await;
    answer(response, used)
}

/// Sends `request` through the device-updates handler (its image bucket from the
/// environment, as in-process runs get it: asked only when a deleted organization has
/// firmware).
pub async fn device_updates(table: &FleetTable, request: ApiRequest) -> Answer {
    device_updates_on(
        table,
        &fleet_testkit::moto_server::firmware_images_from_env(),
        request,
    )
    .await
}

/// Sends `request` through the device-updates handler with `images` as its firmware image
/// bucket.
pub async fn device_updates_on(
    table: &FleetTable,
    images: &shared::store::firmware_images::FirmwareImages,
    request: ApiRequest,
) -> Answer {
    let (response, used) = metered(Box::pin(
        gateway(device_updates::router(
            FleetTable::clone(table),
            RegistrationLimit::default(),
            images.clone(),
        ))
        .handle(request.build()),
    ))
    .await;
    answer(response, used)
}

pub use fleet_testkit::samples::{events_dir, sample_events, SampleEvent, SAMPLE_RETENTION_DAYS};

/// `used` is exactly `requests` DynamoDB requests and within the budget of pattern `id` at the
/// scale of one call: each request of an operation the pattern allows, no more than it may
/// issue.
pub fn spent(id: shared::model::pattern_id::PatternId, used: &MeterSnapshot, requests: u32) {
    let pattern = id.definition();
    if let Err(violation) = pattern.check(used, &shared::ops::pattern::BudgetScale::one()) {
        panic!("{}: {violation}", pattern.route.unwrap_or(id.as_str()));
    }
    assert_eq!(
        used.requests(),
        requests,
        "{id} ({}): {:?}",
        pattern.route.unwrap_or_default(),
        used.operations
    );
}

#[cfg(test)]
mod request_builder {
    use super::*;

    #[test]
    fn the_route_key_and_decoded_path_parameters_come_from_the_template() {
        let request = ApiRequest::delete("/me/devices/a%23b");
        assert_eq!(request.event()["routeKey"], "DELETE /me/devices/{deviceId}");
        assert_eq!(request.event()["pathParameters"]["deviceId"], "a#b");
        let request = ApiRequest::get("/me/devices/d-1/events");
        assert_eq!(
            request.event()["routeKey"],
            "GET /me/devices/{deviceId}/events"
        );
        assert_eq!(request.event()["rawPath"], "/me/devices/d-1/events");
        // A literal segment wins over a parameter.
        let request = ApiRequest::get("/me/dashboard");
        assert_eq!(request.event()["routeKey"], "GET /me/dashboard");
        assert!(match_route("GET", "/me/nothing/here").is_none());
        assert!(match_route("DELETE", "/me").is_none());
    }
}
