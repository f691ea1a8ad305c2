//! Webhooks (issue 41), end to end on DynamoDB Local, moto's SQS and a receiver on a loopback
//! port: the API puts each delivery on the queue, the delivery worker (run as Lambda's SQS
//! event source would run it) signs and sends it, and the signatures are verified with the
//! Standard Webhooks reference library (PyPI `standardwebhooks`, `make webhook-verifier`),
//! never with the project's own code.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fleet_testkit::alarm_events::{lambda_event, AlarmStream};
use fleet_testkit::moto_server::MotoServer;
use fleet_testkit::webhook_queue::{create_queue, pump, sqs_client};
use fleet_testkit::webhook_receiver::{Received, WebhookReceiver};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::webhook::WebhookItem;
use shared::model::entities::webhook_delivery::{
    DeliveryState, WebhookDeliveryItem, DELIVERY_LOG_SHARDS,
};
use shared::model::entities::{Entity, ItemKey};
use shared::model::ids::UserId;
use shared::model::timestamp::Timestamp;
use shared::model::webhook::target::TargetPolicy;
use shared::model::webhook::{DeliveryId, WebhookId};
use shared::ops::webhooks::deliveries::RetrySchedule;
use shared::ops::webhooks::DeliveryQueue;
use shared::FleetTable;
use webhooks::worker::DeliveryWorker;
use webhooks::WebhooksState;

const ALICE: &str = "wh-alice";
const BOB: &str = "wh-bob";

/// A table, moto's queue, a receiver and the function's router and worker on them.
struct Stack {
    table: FleetTable,
    queue: DeliveryQueue,
    receiver: WebhookReceiver,
    worker: DeliveryWorker,
    policy: TargetPolicy,
    _moto: MotoServer,
}

impl Stack {
    /// `statuses`: what the receiver answers in turn (then 200); `echo`: whether a 2xx
    /// answer echoes the body (so the confirmation confirms).
    async fn start(statuses: &[u16], echo: bool) -> Self {
        Self::start_on(fresh_table().await, statuses, echo).await
    }

    /// Like [`Stack::start`], on `table`.
    async fn start_on(table: FleetTable, statuses: &[u16], echo: bool) -> Self {
        Self::start_allowing(table, statuses, echo, &[]).await
    }

    /// Like [`Stack::start_on`], with more loopback targets allowed (`host:port`).
    async fn start_allowing(
        table: FleetTable,
        statuses: &[u16],
        echo: bool,
        also: &[String],
    ) -> Self {
        let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
        let queue = create_queue(&sqs_client(moto.endpoint()), "webhook-deliveries")
            .await
            .expect("queue");
        let receiver = WebhookReceiver::start(statuses, echo).await.unwrap();
        let mut targets = vec![receiver.target()];
        targets.extend(also.iter().cloned());
        let policy = TargetPolicy::local(&targets.join(","));
        let worker = DeliveryWorker::new(
            table.clone(),
            queue.clone(),
            policy.clone(),
            RetrySchedule {
                base_seconds: 1,
                cap_seconds: 2,
            },
        )
        .unwrap();
        Self {
            table,
            queue,
            receiver,
            worker,
            policy,
            _moto: moto,
        }
    }

    async fn call(&self, request: ApiRequest) -> Answer {
        let state = WebhooksState {
            table: self.table.clone(),
            queue: self.queue.clone(),
            policy: self.policy.clone(),
        };
        let (response, used) = metered(Box::pin(
            gateway(webhooks::router(state)).handle(request.build()),
        ))
        .await;
        answer(response, used)
    }

    /// Creates an endpoint at the receiver for `owner`; returns (id, secret).
    async fn create(&self, owner: &str, events: Value) -> (String, String) {
        let a = self
            .call(ApiRequest::post("/me/webhooks").caller(owner).json(
                json!({"url": self.receiver.url("/hook"), "events": events, "description": "ops"}),
            ))
            .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        (
            a.body["webhookId"].as_str().unwrap().to_string(),
            a.body["secret"].as_str().unwrap().to_string(),
        )
    }

    /// Runs the worker over the queue until the receiver has `count` requests (or 20 s).
    async fn deliver_until(&self, count: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.receiver.received().len() < count && Instant::now() < deadline {
            pump(&self.worker, &self.queue, 1).await.unwrap();
        }
        self.receiver.received()
    }

    /// Runs the worker until the queue has been empty for two seconds.
    async fn drain(&self) {
        let mut idle = 0;
        while idle < 2 {
            if pump(&self.worker, &self.queue, 1).await.unwrap() == 0 {
                idle += 1;
            } else {
                idle = 0;
            }
        }
    }

    /// `owner`'s delivery `delivery` of endpoint `id`, as its log item holds it.
    async fn worker_delivery(&self, owner: &str, id: &str, delivery: &str) -> WebhookDeliveryItem {
        let message = shared::ops::webhooks::DeliveryMessage {
            owner: UserId::parse(owner).unwrap(),
            webhook_id: WebhookId::parse(id).unwrap(),
            delivery_id: DeliveryId::parse(delivery).unwrap(),
        };
        shared::ops::webhooks::deliveries::read_delivery(&self.table, &message)
            .await
            .unwrap()
            .expect("the delivery's log item")
    }

    async fn webhook(&self, owner: &str, id: &str) -> Value {
        let a = self
            .call(ApiRequest::get(&format!("/me/webhooks/{id}")).caller(owner))
            .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        a.body["webhook"].clone()
    }
}

/// What the Standard Webhooks reference library says of each delivery under `secret`.
fn reference_verdicts(secret: &str, deliveries: &[Received]) -> Vec<String> {
    let python = fleet_testkit::repo_root().join(".venv-webhooks/bin/python");
    assert!(
        python.is_file(),
        "the reference library is not installed: run `make webhook-verifier`"
    );
    let input = json!({
        "secret": secret,
        "deliveries": deliveries.iter().map(|d| json!({
            "headers": {
                "webhook-id": d.header("webhook-id"),
                "webhook-timestamp": d.header("webhook-timestamp"),
                "webhook-signature": d.header("webhook-signature"),
            },
            "body": d.body,
        })).collect::<Vec<_>>(),
    });
    let mut child = Command::new(python)
        .arg(fleet_testkit::repo_root().join("tools/webhooks/verify.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "verify.py failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn body(d: &Received) -> Value {
    serde_json::from_str(&d.body).unwrap()
}

#[tokio::test]
async fn a_new_endpoint_gets_a_signed_confirmation_and_answering_with_its_token_confirms_it() {
    let stack = Stack::start(&[], true).await;
    let (id, secret) = stack.create(ALICE, json!(["alarm.raised"])).await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(stack.webhook(ALICE, &id).await["confirmed"], false);
    // The secret is shown once: no read answers it.
    let listed = stack
        .call(ApiRequest::get("/me/webhooks").caller(ALICE))
        .await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1);
    assert!(!listed.body.to_string().contains(&secret));

    let received = stack.deliver_until(1).await;
    assert_eq!(received.len(), 1);
    let confirm = &received[0];
    assert_eq!(body(confirm)["type"], "webhook.confirm");
    assert!(body(confirm)["data"]["confirmationToken"]
        .as_str()
        .unwrap()
        .starts_with("whconf_"));
    assert!(confirm.header("webhook-id").unwrap().starts_with("msg_"));
    assert_eq!(reference_verdicts(&secret, &received), ["ok"]);
    // Another secret does not verify it: the check can fail.
    let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert_ne!(reference_verdicts(other, &received), ["ok"]);
    assert_eq!(stack.webhook(ALICE, &id).await["confirmed"], true);

    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 202, "{:?}", test.body);
    let received = stack.deliver_until(2).await;
    assert_eq!(body(&received[1])["type"], "webhook.test");
    assert_eq!(body(&received[1])["ownerId"], ALICE);
    assert_eq!(
        received[1].header("webhook-id"),
        test.body["deliveryId"].as_str()
    );
    assert_eq!(reference_verdicts(&secret, &received[1..]), ["ok"]);
}

#[tokio::test]
async fn an_unconfirmed_endpoint_receives_nothing_but_its_confirmation() {
    // The receiver answers 200 without the token: delivered, but not confirmed.
    let stack = Stack::start(&[], false).await;
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    let received = stack.deliver_until(1).await;
    stack.drain().await;
    assert_eq!(stack.webhook(ALICE, &id).await["confirmed"], false);

    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 409, "{:?}", test.body);
    assert_eq!(test.body["error"]["code"], "webhook_unconfirmed");
    stack.drain().await;
    assert_eq!(stack.receiver.received().len(), 1, "only the confirmation");

    // The owner confirms with the token instead: a wrong one is a 400 naming `token`.
    let wrong = stack
        .call(
            ApiRequest::post(&format!("/me/webhooks/{id}/confirm"))
                .caller(ALICE)
                .json(json!({"token": "whconf_nope"})),
        )
        .await;
    assert_eq!(wrong.status, 400, "{:?}", wrong.body);
    assert_eq!(wrong.body["error"]["field"], "token");
    let token = body(&received[0])["data"]["confirmationToken"].clone();
    let right = stack
        .call(
            ApiRequest::post(&format!("/me/webhooks/{id}/confirm"))
                .caller(ALICE)
                .json(json!({"token": token})),
        )
        .await;
    assert_eq!(right.status, 200, "{:?}", right.body);
    assert_eq!(right.body["webhook"]["confirmed"], true);
    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 202, "{:?}", test.body);
    assert_eq!(stack.deliver_until(2).await.len(), 2);
}

#[tokio::test]
async fn a_receiver_answering_500_then_200_gets_the_same_webhook_id_twice_and_the_log_shows_2_attempts(
) {
    let stack = Stack::start(&[500], true).await;
    let (id, secret) = stack.create(ALICE, json!(["alarm.raised"])).await;
    let received = stack.deliver_until(2).await;
    stack.drain().await;
    let received_after = stack.receiver.received();
    assert_eq!(received_after.len(), 2, "one failure, one success, no more");
    assert_eq!(
        received[0].header("webhook-id"),
        received[1].header("webhook-id")
    );
    assert_eq!(received[0].body, received[1].body);
    assert_eq!(reference_verdicts(&secret, &received), ["ok", "ok"]);

    let delivery_id = DeliveryId::parse(received[0].header("webhook-id").unwrap()).unwrap();
    let log = item(
        &stack.table,
        &ItemKey::WebhookDelivery {
            user: UserId::parse(ALICE).unwrap(),
            webhook: WebhookId::parse(&id).unwrap(),
            delivery: delivery_id,
        },
    )
    .await
    .expect("the delivery's log item");
    let log = WebhookDeliveryItem::from_item(log).unwrap();
    assert_eq!(log.attempts, 2);
    assert_eq!(log.last_status, Some(200));
    assert_eq!(log.state, DeliveryState::Delivered);
    assert!(log.latency_ms.is_some());
    assert_eq!(log.next_retry_at, None);
    assert_eq!(stack.webhook(ALICE, &id).await["confirmed"], true);
}

/// Issue 41 item 5: every attempt writes one EMF document (the operations dashboard's
/// per-endpoint success rate, latency and lag come from them): a valid document of the
/// `Function` totals naming the endpoint, its owner and the delivery as properties, with the
/// attempt's status, success and latency.
#[tokio::test]
async fn each_attempt_writes_a_metrics_document_naming_its_endpoint() {
    let stack = Stack::start(&[500], true).await;
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    let (received, docs) = shared::observe::emf::capture(stack.deliver_until(2)).await;
    assert_eq!(received.len(), 2, "a failure, then the success");
    let attempts: Vec<&Value> = docs
        .iter()
        .filter(|d| d.get("WebhookAttempts").is_some())
        .collect();
    assert_eq!(attempts.len(), 2, "one document an attempt: {docs:?}");
    for (doc, (status, delivered)) in attempts.iter().zip([(500, 0.0), (200, 1.0)]) {
        let (dimensions, metrics) = crate::metrics_emf::validate_emf(doc).unwrap();
        assert_eq!(dimensions, [vec!["Function".to_string()]]);
        assert_eq!(
            metrics,
            shared::observe::emf::DELIVERY_METRICS
                .map(|(name, _)| name.to_string())
                .into_iter()
                .collect()
        );
        assert_eq!(doc["webhookId"], id.as_str());
        assert_eq!(doc["ownerId"], ALICE);
        assert_eq!(doc["event"], "webhook.confirm");
        assert_eq!(doc["deliveryId"], received[0].header("webhook-id").unwrap());
        assert_eq!(doc["status"], status);
        assert_eq!(doc["WebhookDelivered"], delivered);
        assert!(doc["WebhookLatency"].as_f64().unwrap() >= 0.0);
    }
    assert!(
        attempts[1]["WebhookLag"].as_f64().unwrap() >= attempts[0]["WebhookLag"].as_f64().unwrap(),
        "the retry waited longer than the first attempt"
    );
}

#[tokio::test]
async fn unsafe_urls_and_unknown_events_are_a_400_naming_them_and_change_nothing() {
    let stack = Stack::start(&[], true).await;
    let before = table_contents(&stack.table).await;
    let allowed_port = stack.receiver.addr().port();
    let other_port = allowed_port.wrapping_add(1).max(1024);
    for url in [
        format!("http://127.0.0.1:{other_port}/"),
        format!("http://localhost:{allowed_port}/"),
        "https://169.254.169.254/latest/meta-data/".to_string(),
        "https://10.0.0.1/".to_string(),
        "http://2130706433/".to_string(),
        "https://0x7f.1/".to_string(),
        format!("http://[::ffff:127.0.0.1]:{other_port}/"),
        "https://[fd00:ec2::254]/".to_string(),
        "https://100.64.0.1/".to_string(),
        "ftp://example.com/".to_string(),
        "javascript:alert(1)".to_string(),
    ] {
        let a = stack
            .call(
                ApiRequest::post("/me/webhooks")
                    .caller(ALICE)
                    .json(json!({"url": url, "events": ["alarm.raised"]})),
            )
            .await;
        assert_eq!(a.status, 400, "{url}: {:?}", a.body);
        assert_eq!(a.body["error"]["field"], "url", "{url}");
    }
    for events in [json!(["alarm.exploded"]), json!([]), json!("alarm.raised")] {
        let a = stack
            .call(
                ApiRequest::post("/me/webhooks")
                    .caller(ALICE)
                    .json(json!({"url": stack.receiver.url("/"), "events": events})),
            )
            .await;
        assert_eq!(a.status, 400, "{events}: {:?}", a.body);
        assert_eq!(a.body["error"]["field"], "events");
    }
    for rate in [json!(0), json!(1001), json!(2.5), json!("fast"), json!(-1)] {
        let a = stack
            .call(ApiRequest::post("/me/webhooks").caller(ALICE).json(
                json!({"url": stack.receiver.url("/"), "events": ["alarm.raised"], "rateLimit": rate}),
            ))
            .await;
        assert_eq!(a.status, 400, "{rate}: {:?}", a.body);
        assert_eq!(a.body["error"]["field"], "rateLimit", "{rate}");
    }
    assert_eq!(table_contents(&stack.table).await, before);
    stack.drain().await;
    assert!(stack.receiver.received().is_empty());
}

/// Runs the worker over the queue for `seconds` (an endpoint that never succeeds is retried
/// for a day: [`Stack::drain`] would not end).
async fn pump_for(stack: &Stack, seconds: u64) {
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        pump(&stack.worker, &stack.queue, 1).await.unwrap();
    }
}

/// A redirect is never followed, not even to a receiver the policy allows: the delivery is a
/// failed attempt with the 3xx status in the log, retried, and the redirect's target never
/// hears of it.
#[tokio::test]
async fn a_redirect_is_never_followed_even_to_an_allowed_receiver() {
    let elsewhere = WebhookReceiver::start(&[], true).await.unwrap();
    let stack = Stack::start_allowing(
        fresh_table().await,
        &[200, 307, 302, 301, 308],
        true,
        &[elsewhere.target()],
    )
    .await;
    stack.receiver.redirect_to(&elsewhere.url("/taken"));
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    assert_eq!(stack.webhook(ALICE, &id).await["confirmed"], true);
    let a = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let delivery = a.body["deliveryId"].as_str().unwrap().to_string();
    // The test delivery and its retries, each answered with a redirect.
    let received = stack.deliver_until(4).await;
    assert!(received.len() >= 3, "{} requests", received.len());
    assert!(elsewhere.received().is_empty(), "a redirect was followed");
    let item = stack.worker_delivery(ALICE, &id, &delivery).await;
    assert_eq!(item.state, DeliveryState::Pending, "{item:?}");
    assert!(
        [307, 302, 301, 308].contains(&item.last_status.unwrap_or(0)),
        "{item:?}"
    );
    assert!(item.attempts >= 2, "{item:?}");
}

/// A host name passes at creation (it is not resolved then), and every address it resolves
/// to is checked at send time: this machine's own name resolves to a loopback (or private)
/// address, here at the port of a receiver the policy does not allow. Nothing reaches it, not
/// even the confirmation, and the log says why.
#[tokio::test]
async fn a_name_that_resolves_to_a_forbidden_address_is_refused_at_send_time() {
    let hidden = WebhookReceiver::start(&[], true).await.unwrap();
    let stack = Stack::start(&[], true).await;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let port = hidden.addr().port();
    let resolved: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .unwrap()
        .collect();
    assert!(
        !resolved.is_empty()
            && resolved
                .iter()
                .all(|a| stack.policy.refusal(a.ip(), a.port()).is_some()),
        "{host} resolves to {resolved:?}: the test needs a name of a loopback or private address"
    );
    let a =
        stack
            .call(ApiRequest::post("/me/webhooks").caller(ALICE).json(
                json!({"url": format!("http://{host}:{port}/hook"), "events": ["alarm.raised"]}),
            ))
            .await;
    assert_eq!(
        a.status, 201,
        "a name is not resolved at creation: {:?}",
        a.body
    );
    let id = a.body["webhookId"].as_str().unwrap().to_string();
    pump_for(&stack, 4).await;
    assert!(
        hidden.received().is_empty(),
        "a forbidden address was sent to"
    );
    assert!(stack.receiver.received().is_empty());
    let log = log_page(&stack, ALICE, &id, &[]).await;
    let confirmation = &log["items"][0];
    assert_eq!(confirmation["event"], "webhook.confirm", "{log}");
    assert!(confirmation["attempts"].as_u64().unwrap() >= 1, "{log}");
    assert_eq!(confirmation["lastStatus"], Value::Null, "{log}");
    let why = confirmation["lastError"].as_str().unwrap_or_default();
    assert!(
        why.contains("resolved to a loopback address")
            || why.contains("resolved to a private address"),
        "{why}"
    );
    assert_eq!(stack.webhook(ALICE, &id).await["confirmed"], false);
}

#[tokio::test]
async fn another_owners_endpoint_is_a_404_for_every_route() {
    let stack = Stack::start(&[], true).await;
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    stack.drain().await;
    let before = table_contents(&stack.table).await;
    let path = format!("/me/webhooks/{id}");
    for request in [
        ApiRequest::get(&path),
        ApiRequest::patch(&path).json(json!({"enabled": false})),
        ApiRequest::delete(&path),
        ApiRequest::post(&format!("{path}/rotate-secret")),
        ApiRequest::post(&format!("{path}/test")),
        ApiRequest::post(&format!("{path}/confirm")).json(json!({"token": "whconf_x"})),
    ] {
        let a = stack.call(request.caller(BOB)).await;
        assert_eq!(a.status, 404, "{:?}", a.body);
    }
    let bobs = stack
        .call(ApiRequest::get("/me/webhooks").caller(BOB))
        .await;
    assert_eq!(bobs.body["items"], json!([]));
    assert_eq!(table_contents(&stack.table).await, before);
}

#[tokio::test]
async fn after_a_rotation_both_secrets_verify_during_the_overlap_and_only_the_new_one_after() {
    let stack = Stack::start(&[], true).await;
    let (id, old) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    let rotated = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/rotate-secret")).caller(ALICE))
        .await;
    assert_eq!(rotated.status, 200, "{:?}", rotated.body);
    let new = rotated.body["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 202);
    let during = stack.deliver_until(2).await;
    assert_eq!(
        during[1]
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        2
    );
    assert_eq!(reference_verdicts(&old, &during[1..]), ["ok"]);
    assert_eq!(reference_verdicts(&new, &during[1..]), ["ok"]);

    // The overlap ends (moved into the past on the stored item).
    let key = ItemKey::Webhook {
        user: UserId::parse(ALICE).unwrap(),
        webhook: WebhookId::parse(&id).unwrap(),
    };
    let mut endpoint = WebhookItem::from_item(item(&stack.table, &key).await.unwrap()).unwrap();
    endpoint.previous_secret_until = Some(Timestamp::now().plus_seconds(-1));
    put_entity(&stack.table, &endpoint).await;
    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 202);
    let after = stack.deliver_until(3).await;
    assert_eq!(
        after[2]
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        1
    );
    assert_eq!(reference_verdicts(&new, &after[2..]), ["ok"]);
    assert_ne!(reference_verdicts(&old, &after[2..]), ["ok"]);
}

/// Registers `device` for `owner` with a rule "temperature above 8" and returns its token.
async fn device_with_a_rule(table: &FleetTable, owner: &str, device: &str) -> String {
    let a = device_updates(
        table,
        ApiRequest::post("/me/devices")
            .caller(owner)
            .json(json!({"deviceId": device, "name": "Cold room", "type": "thermostat"})),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let rule = device_updates(
        table,
        ApiRequest::post("/me/rules").caller(owner).json(json!({
            "name": "Too warm", "eventType": "temperature",
            "scope": {"deviceType": "thermostat"}, "condition": {"above": 8},
            "clear": {"below": 6}, "severity": "critical"})),
    )
    .await;
    assert_eq!(rule.status, 201, "{:?}", rule.body);
    a.body["token"].as_str().unwrap().to_string()
}

/// Sends one temperature reading for `device`, answered 200.
async fn report(table: &FleetTable, device: &str, token: &str, value: f64) {
    let ingestor = std::sync::Arc::new(shared::ops::ingest::Ingestor::new(
        table.clone(),
        shared::ops::ingest::IngestConfig::default(),
    ));
    let body = json!([{"type": "temperature", "value": value, "at": Timestamp::now()}]);
    let answer = ingest(&ingestor, ingest_request(device, token, body)).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
}

#[tokio::test]
async fn an_alarm_raised_on_a_device_reaches_its_fleets_subscribed_endpoint_once_signed() {
    let stack = Stack::start_on(fresh_table_with_stream().await, &[], true).await;
    let (hook, secret) = stack
        .create(ALICE, json!(["alarm.raised", "alarm.cleared"]))
        .await;
    // Alice's endpoint for another event, and Bob's for this one: neither gets it.
    let (_, offline_secret) = stack.create(ALICE, json!(["device.offline"])).await;
    let (_, bob_secret) = stack.create(BOB, json!(["alarm.raised"])).await;
    // An endpoint that never confirmed (its answer is not echoed): nothing but its confirmation.
    let confirmations = stack.deliver_until(3).await.len();
    assert_eq!(confirmations, 3);
    assert_eq!(stack.webhook(ALICE, &hook).await["confirmed"], true);
    let mut stream = AlarmStream::open(&stack.table, endpoint()).await.unwrap();
    let token = device_with_a_rule(&stack.table, ALICE, "cold-1").await;
    report(&stack.table, "cold-1", &token, 9.5).await;
    let records = stream.read().await.unwrap();
    assert_eq!(records.len(), 1, "one alarm item written: {records:?}");
    let answer = stack.worker.handle(lambda_event(&records)).await.unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]));
    // Lambda retries a batch (at least once): the same records make no second delivery.
    let again = stack.worker.handle(lambda_event(&records)).await.unwrap();
    assert_eq!(again["batchItemFailures"], json!([]));
    stack.drain().await;
    let received = stack.receiver.received();
    let alarms = &received[confirmations..];
    assert_eq!(
        alarms.len(),
        1,
        "{:?}",
        alarms.iter().map(body).collect::<Vec<_>>()
    );
    let delivered = body(&alarms[0]);
    assert_eq!(delivered["type"], "alarm.raised");
    assert_eq!(delivered["ownerId"], ALICE);
    assert_eq!(delivered["data"]["deviceId"], "cold-1");
    assert_eq!(delivered["data"]["transition"], "raised");
    assert_eq!(delivered["data"]["ruleName"], "Too warm");
    assert_eq!(delivered["data"]["severity"], "critical");
    assert_eq!(reference_verdicts(&secret, alarms), ["ok"]);
    // Signed with Alice's subscribed endpoint's secret, not the others'.
    assert_ne!(reference_verdicts(&offline_secret, alarms), ["ok"]);
    assert_ne!(reference_verdicts(&bob_secret, alarms), ["ok"]);
    // One log item, delivered in one attempt.
    let delivery_id = DeliveryId::parse(alarms[0].header("webhook-id").unwrap()).unwrap();
    let log = item(
        &stack.table,
        &ItemKey::WebhookDelivery {
            user: UserId::parse(ALICE).unwrap(),
            webhook: WebhookId::parse(&hook).unwrap(),
            delivery: delivery_id,
        },
    )
    .await
    .expect("the delivery's log item");
    let item = WebhookDeliveryItem::from_item(log).unwrap();
    assert_eq!((item.state, item.attempts), (DeliveryState::Delivered, 1));

    // The clear reaches it too, as its own delivery.
    report(&stack.table, "cold-1", &token, 5.0).await;
    let records = stream.read().await.unwrap();
    let answer = stack.worker.handle(lambda_event(&records)).await.unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]));
    let received = stack.deliver_until(confirmations + 2).await;
    stack.drain().await;
    assert_eq!(stack.receiver.received().len(), confirmations + 2);
    let cleared = body(&received[confirmations + 1]);
    assert_eq!(cleared["type"], "alarm.cleared");
    assert_eq!(cleared["data"]["alarmId"], delivered["data"]["alarmId"]);
    assert_ne!(
        received[confirmations + 1].header("webhook-id"),
        alarms[0].header("webhook-id")
    );
}

#[tokio::test]
async fn a_stream_batch_of_more_alarms_than_one_sqs_batch_holds_reaches_the_endpoint_once_each() {
    let stack = Stack::start_on(fresh_table_with_stream().await, &[], true).await;
    let (_, secret) = stack.create(ALICE, json!(["alarm.raised"])).await;
    let confirmations = stack.deliver_until(1).await.len();
    let mut stream = AlarmStream::open(&stack.table, endpoint()).await.unwrap();
    // 23 devices raise an alarm each: one stream batch, 23 deliveries, sent 10 to a
    // SendMessageBatch (10, 10 and 3).
    let mut tokens = vec![(
        "warm-00".to_string(),
        device_with_a_rule(&stack.table, ALICE, "warm-00").await,
    )];
    for i in 1..23 {
        let device = format!("warm-{i:02}");
        let a = device_updates(
            &stack.table,
            ApiRequest::post("/me/devices")
                .caller(ALICE)
                .json(json!({"deviceId": device, "name": "Cold room", "type": "thermostat"})),
        )
        .await;
        assert_eq!(a.status, 201, "{:?}", a.body);
        tokens.push((device, a.body["token"].as_str().unwrap().to_string()));
    }
    for (device, token) in &tokens {
        report(&stack.table, device, token, 9.5).await;
    }
    let records = stream.read().await.unwrap();
    assert_eq!(records.len(), 23, "{records:?}");
    let answer = stack.worker.handle(lambda_event(&records)).await.unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]));
    let received = stack.deliver_until(confirmations + 23).await;
    stack.drain().await;
    let alarms = &stack.receiver.received()[confirmations..];
    assert_eq!(alarms.len(), 23, "{}", received.len());
    let mut devices: Vec<String> = alarms
        .iter()
        .map(|d| body(d)["data"]["deviceId"].as_str().unwrap().to_string())
        .collect();
    devices.sort();
    assert_eq!(
        devices,
        tokens.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>()
    );
    let ids: std::collections::BTreeSet<_> =
        alarms.iter().map(|d| d.header("webhook-id")).collect();
    assert_eq!(ids.len(), 23);
    assert!(reference_verdicts(&secret, alarms)
        .iter()
        .all(|v| v == "ok"));
}

#[tokio::test]
async fn a_slack_endpoint_gets_slacks_text_shape_signed_and_confirms_with_the_token_it_shows() {
    // Slack answers "ok", never the token: the owner confirms with the token the message shows.
    let stack = Stack::start(&[], false).await;
    let created = stack
        .call(ApiRequest::post("/me/webhooks").caller(ALICE).json(json!({
            "url": stack.receiver.url("/services/T0/B0/x"), "events": ["alarm.raised"],
            "format": "slack"})))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let id = created.body["webhookId"].as_str().unwrap().to_string();
    let secret = created.body["secret"].as_str().unwrap().to_string();
    let received = stack.deliver_until(1).await;
    let confirm = body(&received[0]);
    assert_eq!(
        confirm.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["text"],
        "Slack's shape only: {confirm}"
    );
    let text = confirm["text"].as_str().unwrap();
    let token = text
        .split_whitespace()
        .find(|w| w.starts_with("whconf_"))
        .unwrap_or_else(|| panic!("the token in {text}"));
    assert_eq!(reference_verdicts(&secret, &received), ["ok"]);
    assert_eq!(stack.webhook(ALICE, &id).await["confirmed"], false);
    let confirmed = stack
        .call(
            ApiRequest::post(&format!("/me/webhooks/{id}/confirm"))
                .caller(ALICE)
                .json(json!({ "token": token })),
        )
        .await;
    assert_eq!(confirmed.status, 200, "{:?}", confirmed.body);
    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 202, "{:?}", test.body);
    let received = stack.deliver_until(2).await;
    assert_eq!(
        body(&received[1]),
        json!({"text": "A test delivery from Device Fleet"})
    );
    assert_eq!(reference_verdicts(&secret, &received[1..]), ["ok"]);
}

/// A receiver that accepts connections and never answers; counts the connections.
async fn silent_receiver() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap().to_string();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(socket);
        }
    });
    (target, accepted)
}

/// Sends `count` tests to `owner`'s endpoint `id`, one after another; their delivery ids.
async fn send_tests(stack: &Stack, owner: &str, id: &str, count: usize) -> Vec<String> {
    let mut sent = Vec::new();
    for _ in 0..count {
        let a = stack
            .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(owner))
            .await;
        assert_eq!(a.status, 202, "{:?}", a.body);
        sent.push(a.body["deliveryId"].as_str().unwrap().to_string());
    }
    sent
}

#[tokio::test]
async fn an_endpoint_that_never_answers_opens_its_breaker_and_another_owners_deliveries_still_go() {
    let (silent, accepted) = silent_receiver().await;
    let stack = Stack::start_allowing(
        fresh_table().await,
        &[],
        true,
        std::slice::from_ref(&silent),
    )
    .await;
    let (alice_hook, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    let created = stack
        .call(
            ApiRequest::post("/me/webhooks")
                .caller(BOB)
                .json(json!({"url": format!("http://{silent}/hook"), "events": ["alarm.raised"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let bob_hook = created.body["webhookId"].as_str().unwrap().to_string();
    // Bob confirms by hand (his receiver never answers): the token from his endpoint's item.
    let key = ItemKey::Webhook {
        user: UserId::parse(BOB).unwrap(),
        webhook: WebhookId::parse(&bob_hook).unwrap(),
    };
    let token = WebhookItem::from_item(item(&stack.table, &key).await.unwrap())
        .unwrap()
        .confirmation_token;
    let a = stack
        .call(
            ApiRequest::post(&format!("/me/webhooks/{bob_hook}/confirm"))
                .caller(BOB)
                .json(json!({ "token": token })),
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);

    // Alone: Alice's 5 test deliveries.
    let started = Instant::now();
    send_tests(&stack, ALICE, &alice_hook, 5).await;
    stack.deliver_until(6).await;
    let alone = started.elapsed();
    assert_eq!(stack.receiver.received().len(), 6);

    // Bob's 30 deliveries to a receiver that never answers, queued before Alice's 5 more.
    send_tests(&stack, BOB, &bob_hook, 30).await;
    let started = Instant::now();
    send_tests(&stack, ALICE, &alice_hook, 5).await;
    let received = stack.deliver_until(11).await;
    let beside = started.elapsed();
    assert_eq!(received.len(), 11, "Alice's deliveries all arrived");
    let bob = WebhookItem::from_item(item(&stack.table, &key).await.unwrap()).unwrap();
    let attempts = accepted.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!(
        "Alice's 5 deliveries: {:.1} s alone, {:.1} s beside Bob's 30 to a receiver that never \
         answers; Bob's receiver was tried {attempts} times (his confirmation included), his \
         breaker after {} failures in a row is open until {:?}",
        alone.as_secs_f64(),
        beside.as_secs_f64(),
        bob.consecutive_failures,
        bob.breaker_open_until
    );
    // Bob's breaker opened: past the threshold, his messages wait instead of taking senders.
    assert!(
        bob.consecutive_failures >= shared::ops::webhooks::deliveries::BREAKER_THRESHOLD,
        "{bob:?}"
    );
    assert!(bob
        .breaker_open_until
        .is_some_and(|until| until > Timestamp::now()));
    // At most the threshold, plus one batch in flight when it opened, plus his confirmation.
    assert!(
        attempts <= 1 + shared::ops::webhooks::deliveries::BREAKER_THRESHOLD as usize + 10,
        "{attempts} attempts on Bob's receiver"
    );
}

// The delivery log and redelivery (issue 41, item 5) and the 3-day disable (item 2).

/// One page of `owner`'s log of `id` (`query`: extra parameters), asserting a 200 and its
/// cost: one GetItem of the endpoint, one Query of each of the log's 16 partitions, and at
/// most one more each (a partition whose share of the page ran out is read once more, for
/// all the page still needs).
async fn log_page(stack: &Stack, owner: &str, id: &str, query: &[(&str, &str)]) -> Value {
    let mut request = ApiRequest::get(&format!("/me/webhooks/{id}/deliveries")).caller(owner);
    for (name, value) in query {
        request = request.query(name, value);
    }
    let a = stack.call(request).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let partitions = u32::from(DELIVERY_LOG_SHARDS);
    let queries = a.used.operations.get("Query").copied().unwrap_or(0);
    assert!(
        (partitions..=2 * partitions).contains(&queries),
        "{:?}",
        a.used
    );
    assert_eq!(a.used.operations.get("GetItem"), Some(&1), "{:?}", a.used);
    assert_eq!(a.used.requests(), 1 + queries, "{:?}", a.used);
    a.body
}

#[tokio::test]
async fn an_endpoints_log_spreads_over_its_partitions_and_pages_through_them_exactly() {
    let stack = Stack::start(&[], true).await;
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    let mut made = Vec::new();
    for _ in 0..40 {
        let a = stack
            .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
            .await;
        assert_eq!(a.status, 202, "{:?}", a.body);
        made.push(a.body["deliveryId"].as_str().unwrap().to_string());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Not in the owner's partition: spread over the endpoint's log partitions.
    let partitions: std::collections::BTreeSet<String> = table_contents(&stack.table)
        .await
        .into_iter()
        .filter(|item| matches!(key_of(item), ItemKey::WebhookDelivery { .. }))
        .map(|item| key_of(&item).primary_key().pk)
        .collect();
    assert!(partitions.len() >= 10, "{partitions:?}");
    assert!(
        partitions
            .iter()
            .all(|pk| pk.starts_with(&format!("USER#{ALICE}#WHLOG#{id}#"))),
        "{partitions:?}"
    );
    // Pages of 7, newest first, every delivery once (the confirmation last).
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let mut query = vec![("limit", "7")];
        if let Some(c) = &cursor {
            query.push(("cursor", c.as_str()));
        }
        let page = log_page(&stack, ALICE, &id, &query).await;
        assert!(page["items"].as_array().unwrap().len() <= 7);
        listed.extend(delivery_ids(&page));
        cursor = page["cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(listed.len(), 41, "{listed:?}");
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    assert_eq!(listed[..40], newest_first[..]);
}

fn delivery_ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["deliveryId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_receiver_answering_500_three_times_then_200_gets_the_same_webhook_id_four_times_and_the_log_shows_4_attempts(
) {
    let stack = Stack::start(&[500, 500, 500], true).await;
    let (id, secret) = stack.create(ALICE, json!(["alarm.raised"])).await;
    let received = stack.deliver_until(4).await;
    stack.drain().await;
    assert_eq!(
        stack.receiver.received().len(),
        4,
        "three failures, one success"
    );
    let webhook_id = received[0].header("webhook-id").unwrap();
    assert!(received
        .iter()
        .all(|d| d.header("webhook-id") == Some(webhook_id)));
    assert!(received.iter().all(|d| d.body == received[0].body));
    assert_eq!(reference_verdicts(&secret, &received), ["ok"; 4]);

    let log = log_page(&stack, ALICE, &id, &[]).await;
    assert_eq!(log["cursor"], Value::Null);
    let entries = log["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{log}");
    let entry = &entries[0];
    assert_eq!(entry["deliveryId"], webhook_id);
    assert_eq!(entry["event"], "webhook.confirm");
    assert_eq!(entry["status"], "delivered");
    assert_eq!(entry["attempts"], 4);
    assert_eq!(entry["lastStatus"], 200);
    assert_eq!(entry["lastError"], Value::Null);
    assert!(entry["lastLatencyMs"].is_u64(), "{entry}");
    assert_eq!(entry["nextRetryAt"], Value::Null);
    assert!(entry["createdAt"].is_string());
    // Never the body: the receiver has it, the log says what happened to it.
    assert!(!log.to_string().contains("confirmationToken"), "{log}");
}

#[tokio::test]
async fn the_delivery_log_is_newest_first_and_pages_with_its_cursor() {
    let stack = Stack::start(&[], true).await;
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    let mut made = vec![stack.receiver.received()[0]
        .header("webhook-id")
        .unwrap()
        .to_string()];
    for _ in 0..6 {
        let a = stack
            .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
            .await;
        assert_eq!(a.status, 202, "{:?}", a.body);
        made.push(a.body["deliveryId"].as_str().unwrap().to_string());
        // A millisecond apart at least, so the order made is the order of their times.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Another endpoint's deliveries are not in this log.
    let (other, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.drain().await;

    let first = log_page(&stack, ALICE, &id, &[("limit", "4")]).await;
    let cursor = first["cursor"].as_str().expect("a next page").to_string();
    let second = log_page(&stack, ALICE, &id, &[("limit", "4"), ("cursor", &cursor)]).await;
    assert_eq!(second["cursor"], Value::Null, "{second}");
    let mut listed = delivery_ids(&first);
    listed.extend(delivery_ids(&second));
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    assert_eq!(listed, newest_first);
    let created: Vec<String> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["items"].as_array().unwrap())
        .map(|d| d["createdAt"].as_str().unwrap().to_string())
        .collect();
    assert!(created.windows(2).all(|w| w[0] >= w[1]), "{created:?}");
    assert!(first["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["event"] == "webhook.test" && d["status"] == "delivered"));
    assert_eq!(second["items"][2]["event"], "webhook.confirm");
    // The whole log in one page by default; the other endpoint's log holds its own.
    assert_eq!(
        delivery_ids(&log_page(&stack, ALICE, &id, &[]).await),
        newest_first
    );
    let others = log_page(&stack, ALICE, &other, &[]).await;
    assert_eq!(others["items"].as_array().unwrap().len(), 1);
    assert!(!newest_first.contains(&delivery_ids(&others)[0]));
}

#[tokio::test]
async fn a_redelivery_sends_the_same_webhook_id_again_and_is_refused_while_pending() {
    let stack = Stack::start(&[], true).await;
    let (id, secret) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    let delivery = test.body["deliveryId"].as_str().unwrap().to_string();
    let retry_path = format!("/me/webhooks/{id}/deliveries/{delivery}/retry");

    // Still pending (queued, not yet sent): a redelivery would only race it.
    let before = table_contents(&stack.table).await;
    let early = stack
        .call(ApiRequest::post(&retry_path).caller(ALICE))
        .await;
    assert_eq!(early.status, 409, "{:?}", early.body);
    assert_eq!(early.error_code(), "delivery_pending");
    assert_eq!(table_contents(&stack.table).await, before);

    let received = stack.deliver_until(2).await;
    stack.drain().await;
    let retried = stack
        .call(ApiRequest::post(&retry_path).caller(ALICE))
        .await;
    assert_eq!(retried.status, 202, "{:?}", retried.body);
    assert_eq!(retried.body["delivery"]["deliveryId"], delivery.as_str());
    assert_eq!(retried.body["delivery"]["status"], "pending");
    assert!(retried.body["delivery"]["redeliveredAt"].is_string());
    // A second click before it went: one redelivery, not two.
    let again = stack
        .call(ApiRequest::post(&retry_path).caller(ALICE))
        .await;
    assert_eq!(again.status, 409, "{:?}", again.body);
    assert_eq!(again.error_code(), "delivery_pending");

    let after = stack.deliver_until(3).await;
    stack.drain().await;
    assert_eq!(stack.receiver.received().len(), 3, "one redelivery");
    assert_eq!(after[2].header("webhook-id"), Some(delivery.as_str()));
    assert_eq!(
        after[2].header("webhook-id"),
        received[1].header("webhook-id")
    );
    assert_eq!(after[2].body, received[1].body, "the same message");
    assert_eq!(reference_verdicts(&secret, &after[2..]), ["ok"]);
    let log = log_page(&stack, ALICE, &id, &[]).await;
    let entry = &log["items"][0];
    assert_eq!(entry["deliveryId"], delivery.as_str());
    assert_eq!(entry["attempts"], 2);
    assert_eq!(entry["status"], "delivered");
    assert!(entry["redeliveredAt"].is_string());
}

#[tokio::test]
async fn another_owners_log_and_redelivery_are_a_404_and_change_nothing() {
    let stack = Stack::start(&[], true).await;
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    let received = stack.deliver_until(1).await;
    stack.drain().await;
    let delivery = received[0].header("webhook-id").unwrap().to_string();
    let (bobs, _) = stack.create(BOB, json!(["alarm.raised"])).await;
    stack.deliver_until(2).await;
    stack.drain().await;
    let before = table_contents(&stack.table).await;
    let unknown = "msg_0000000000000000000000000000000";
    for (caller, path) in [
        (BOB, format!("/me/webhooks/{id}/deliveries")),
        (
            BOB,
            format!("/me/webhooks/{id}/deliveries/{delivery}/retry"),
        ),
        // Bob's endpoint with Alice's delivery: not in Bob's log.
        (
            BOB,
            format!("/me/webhooks/{bobs}/deliveries/{delivery}/retry"),
        ),
        (
            ALICE,
            format!("/me/webhooks/{id}/deliveries/{unknown}/retry"),
        ),
        (
            ALICE,
            format!("/me/webhooks/{id}/deliveries/not-an-id/retry"),
        ),
        (ALICE, "/me/webhooks/wh_nope/deliveries".to_string()),
        (ALICE, "/me/webhooks/not-an-id/deliveries".to_string()),
    ] {
        let request = if path.ends_with("/retry") {
            ApiRequest::post(&path)
        } else {
            ApiRequest::get(&path)
        };
        let a = stack.call(request.caller(caller)).await;
        assert_eq!(a.status, 404, "{caller} {path}: {:?}", a.body);
        assert_eq!(a.error_code(), "not_found", "{path}");
        assert!(!a.body.to_string().contains(&delivery), "{path}");
    }
    assert_eq!(table_contents(&stack.table).await, before);
    stack.drain().await;
    assert_eq!(stack.receiver.received().len(), 2, "nothing redelivered");
}

#[tokio::test]
async fn a_bad_limit_or_cursor_is_a_400_naming_it_and_changes_nothing() {
    let stack = Stack::start(&[], true).await;
    let (id, _) = stack.create(ALICE, json!(["alarm.raised"])).await;
    stack.deliver_until(1).await;
    stack.drain().await;
    let before = table_contents(&stack.table).await;
    let long = format!("msg_{}", "a".repeat(44));
    for (name, value) in [
        ("limit", "0"),
        ("limit", "101"),
        ("limit", "-1"),
        ("limit", "ten"),
        ("limit", ""),
        ("cursor", "garbage!"),
        ("cursor", "wh_AAAAAAAAAAAAAAAAAAAAAA"),
        ("cursor", long.as_str()),
        ("cursor", "msg_"),
    ] {
        let a = stack
            .call(
                ApiRequest::get(&format!("/me/webhooks/{id}/deliveries"))
                    .caller(ALICE)
                    .query(name, value),
            )
            .await;
        assert_eq!(a.status, 400, "{name}={value}: {:?}", a.body);
        assert_eq!(a.error_code(), "invalid_request", "{name}={value}");
        assert_eq!(a.error_field(), name, "{name}={value}");
        assert_eq!(
            a.used.requests(),
            0,
            "refused before any read: {name}={value}"
        );
    }
    assert_eq!(table_contents(&stack.table).await, before);
}

#[tokio::test]
async fn an_endpoint_failing_for_3_days_is_disabled_and_its_owner_told() {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;

    // Alice's failing endpoint answers 500 to everything; her other one (the stack's
    // receiver) subscribes to `webhook.disabled`.
    let failing = WebhookReceiver::start(&[500; 100], false).await.unwrap();
    let table = fresh_table().await;
    let mut stack = Stack::start_allowing(table, &[], true, &[failing.target()]).await;
    let days_later = Arc::new(AtomicI64::new(0));
    let offset = days_later.clone();
    stack.worker = DeliveryWorker::new(
        stack.table.clone(),
        stack.queue.clone(),
        stack.policy.clone(),
        RetrySchedule {
            base_seconds: 1,
            cap_seconds: 2,
        },
    )
    .unwrap()
    .with_clock(Arc::new(move || {
        Timestamp::now().plus_seconds(offset.load(Ordering::SeqCst))
    }));
    let (told, told_secret) = stack.create(ALICE, json!(["webhook.disabled"])).await;
    stack.deliver_until(1).await;
    assert_eq!(stack.webhook(ALICE, &told).await["confirmed"], true);

    let created = stack
        .call(
            ApiRequest::post("/me/webhooks")
                .caller(ALICE)
                .json(json!({"url": failing.url("/hook"), "events": ["alarm.raised"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let id = created.body["webhookId"].as_str().unwrap().to_string();
    let key = ItemKey::Webhook {
        user: UserId::parse(ALICE).unwrap(),
        webhook: WebhookId::parse(&id).unwrap(),
    };
    let token = WebhookItem::from_item(item(&stack.table, &key).await.unwrap())
        .unwrap()
        .confirmation_token;
    let confirmed = stack
        .call(
            ApiRequest::post(&format!("/me/webhooks/{id}/confirm"))
                .caller(ALICE)
                .json(json!({"token": token})),
        )
        .await;
    assert_eq!(confirmed.status, 200, "{:?}", confirmed.body);

    // The first failure starts the run.
    let deadline = Instant::now() + Duration::from_secs(20);
    while failing.received().is_empty() && Instant::now() < deadline {
        pump(&stack.worker, &stack.queue, 1).await.unwrap();
    }
    let endpoint = stack.webhook(ALICE, &id).await;
    assert!(endpoint["failingSince"].is_string(), "{endpoint}");
    assert_eq!(endpoint["enabled"], true);
    assert!(endpoint.get("disabledAt").is_none(), "{endpoint}");

    // Three days (and a minute) on, the next failure disables it.
    days_later.store(3 * 86_400 + 60, Ordering::SeqCst);
    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 202, "{:?}", test.body);
    let deadline = Instant::now() + Duration::from_secs(20);
    while stack.receiver.received().len() < 2 && Instant::now() < deadline {
        pump(&stack.worker, &stack.queue, 1).await.unwrap();
    }
    stack.drain().await;
    let attempts_when_disabled = failing.received().len();

    let endpoint = stack.webhook(ALICE, &id).await;
    assert_eq!(endpoint["enabled"], false, "{endpoint}");
    assert!(endpoint["disabledAt"].is_string(), "{endpoint}");
    assert!(
        endpoint["disabledReason"]
            .as_str()
            .unwrap()
            .contains("failed since"),
        "{endpoint}"
    );
    // The owner is told: a signed `webhook.disabled` delivery to her other endpoint...
    let notices = stack.receiver.received();
    assert_eq!(notices.len(), 2, "the confirmation, then the notice");
    let notice = body(&notices[1]);
    assert_eq!(notice["type"], "webhook.disabled");
    assert_eq!(notice["data"]["webhookId"], id.as_str());
    assert_eq!(notice["data"]["url"], failing.url("/hook").as_str());
    assert_eq!(notice["ownerId"], ALICE);
    assert_eq!(reference_verdicts(&told_secret, &notices[1..]), ["ok"]);
    // ... and the entry on top of the disabled endpoint's own log.
    let log = log_page(&stack, ALICE, &id, &[]).await;
    assert_eq!(log["items"][0]["event"], "webhook.disabled", "{log}");
    assert_eq!(log["items"][0]["status"], "abandoned");
    assert_eq!(log["items"][0]["attempts"], 0);

    // Disabled, it receives nothing more: a test and a redelivery are refused.
    let test = stack
        .call(ApiRequest::post(&format!("/me/webhooks/{id}/test")).caller(ALICE))
        .await;
    assert_eq!(test.status, 409);
    assert_eq!(test.error_code(), "webhook_disabled");
    let abandoned = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["event"] == "webhook.test")
        .expect("the test delivery")["deliveryId"]
        .as_str()
        .unwrap()
        .to_string();
    let retry = stack
        .call(
            ApiRequest::post(&format!("/me/webhooks/{id}/deliveries/{abandoned}/retry"))
                .caller(ALICE),
        )
        .await;
    assert_eq!(retry.status, 409, "{:?}", retry.body);
    assert_eq!(retry.error_code(), "webhook_disabled");
    stack.drain().await;
    assert_eq!(failing.received().len(), attempts_when_disabled);

    // Enabled again by its owner: a fresh start, the disable's record cleared.
    let enabled = stack
        .call(
            ApiRequest::patch(&format!("/me/webhooks/{id}"))
                .caller(ALICE)
                .json(json!({"enabled": true})),
        )
        .await;
    assert_eq!(enabled.status, 200, "{:?}", enabled.body);
    let webhook = &enabled.body["webhook"];
    assert_eq!(webhook["enabled"], true);
    for gone in ["disabledAt", "disabledReason", "failingSince"] {
        assert!(webhook.get(gone).is_none(), "{gone}: {webhook}");
    }
}

/// The delivery queue's `maxReceiveCount`: past it, SQS moves a message to the dead-letter
/// queue, whatever the worker meant to do with it.
fn queue_max_receive_count() -> u32 {
    let text = std::fs::read_to_string(fleet_testkit::template::default_template_path()).unwrap();
    let template: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    template["Resources"]["WebhookDeliveryQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"]
        .as_u64()
        .expect("the delivery queue's maxReceiveCount") as u32
}

#[tokio::test]
async fn a_delivery_to_a_dead_endpoint_is_retried_for_24_hours_before_the_dead_letter_queue_could_take_it(
) {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;

    // A port nothing listens on: every attempt is refused at once.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let table = fresh_table().await;
    let mut stack = Stack::start_allowing(table, &[], true, std::slice::from_ref(&dead)).await;
    // The deployed schedule (the default), on a simulated clock: 24 hours take no time.
    let simulated = Arc::new(AtomicI64::new(0));
    let offset = simulated.clone();
    stack.worker = DeliveryWorker::new(
        stack.table.clone(),
        stack.queue.clone(),
        stack.policy.clone(),
        RetrySchedule::default(),
    )
    .unwrap()
    .with_clock(Arc::new(move || {
        Timestamp::now().plus_seconds(offset.load(Ordering::SeqCst))
    }));
    let created = stack
        .call(
            ApiRequest::post("/me/webhooks")
                .caller(ALICE)
                .json(json!({"url": format!("http://{dead}/hook"), "events": ["alarm.raised"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let id = created.body["webhookId"].as_str().unwrap().to_string();
    let key = ItemKey::Webhook {
        user: UserId::parse(ALICE).unwrap(),
        webhook: WebhookId::parse(&id).unwrap(),
    };
    let token = WebhookItem::from_item(item(&stack.table, &key).await.unwrap())
        .unwrap()
        .confirmation_token;
    let confirmed = stack
        .call(
            ApiRequest::post(&format!("/me/webhooks/{id}/confirm"))
                .caller(ALICE)
                .json(json!({"token": token})),
        )
        .await;
    assert_eq!(confirmed.status, 200, "{:?}", confirmed.body);
    // Ten test deliveries at once (a small storm: its messages meet the open breaker), each
    // followed through SQS's receives by hand, in the order their visibility ends.
    let before = delivery_ids(&log_page(&stack, ALICE, &id, &[]).await);
    send_tests(&stack, ALICE, &id, 10).await;
    let deliveries: Vec<String> = delivery_ids(&log_page(&stack, ALICE, &id, &[]).await)
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert_eq!(deliveries.len(), 10);
    let max_receives = queue_max_receive_count();
    // Whatever the schedule's base (1 s at the least), the worst case fits under the redrive.
    for base_seconds in [
        1,
        shared::ops::webhooks::deliveries::DEFAULT_BACKOFF_BASE_SECONDS,
    ] {
        let schedule = RetrySchedule {
            base_seconds,
            ..RetrySchedule::default()
        };
        let most =
            schedule.most_receives_within(shared::ops::webhooks::deliveries::RETRY_FOR_SECONDS);
        assert!(
            most < max_receives,
            "{most} receives at base {base_seconds} s"
        );
    }
    // (visible again at, delivery, receives so far)
    let mut due: std::collections::BinaryHeap<std::cmp::Reverse<(i64, usize, u32)>> = (0
        ..deliveries.len())
        .map(|i| std::cmp::Reverse((0, i, 0)))
        .collect();
    let (mut dead_lettered, mut most_receives) = (Vec::new(), 0);
    // When each was given up, on the worker's clock.
    let mut finished_at = vec![Timestamp::now(); deliveries.len()];
    while let Some(std::cmp::Reverse((at, i, receives))) = due.pop() {
        simulated.store(at, Ordering::SeqCst);
        let receives = receives + 1;
        most_receives = most_receives.max(receives);
        if receives > max_receives {
            // SQS's redrive: the message goes to the dead-letter queue, not to the worker.
            dead_lettered.push((i, at));
            continue;
        }
        let body = json!({"owner": ALICE, "webhookId": id, "deliveryId": deliveries[i]});
        match stack
            .worker
            .deliver_one(&body.to_string(), receives)
            .await
            .unwrap()
        {
            shared::ops::webhooks::deliveries::Verdict::Done => {
                finished_at[i] = Timestamp::now().plus_seconds(at)
            }
            shared::ops::webhooks::deliveries::Verdict::RetryIn(seconds) => {
                due.push(std::cmp::Reverse((at + i64::from(seconds), i, receives)));
            }
        }
    }
    let mut logged = Vec::new();
    for d in &deliveries {
        logged.push(stack.worker_delivery(ALICE, &id, d).await);
    }
    let attempts: Vec<u32> = logged.iter().map(|d| d.attempts).collect();
    eprintln!(
        "10 deliveries to a dead endpoint: {} dead-lettered (after {:?} s), at most {most_receives} \
         receives of one message (the queue allows {max_receives}), attempts {attempts:?}, the \
         last after {:.1} simulated hours",
        dead_lettered.len(),
        dead_lettered.iter().map(|(_, at)| at).collect::<Vec<_>>(),
        simulated.load(Ordering::SeqCst) as f64 / 3600.0
    );
    assert!(
        dead_lettered.is_empty(),
        "SQS would have dead-lettered them first"
    );
    for (d, finished) in logged.iter().zip(&finished_at) {
        assert_eq!(d.state, DeliveryState::Abandoned, "{d:?}");
        let retried_for = finished.epoch_seconds() - d.created_at.epoch_seconds();
        assert!(
            retried_for >= shared::ops::webhooks::deliveries::RETRY_FOR_SECONDS,
            "abandoned after {retried_for} s of retrying: {d:?}"
        );
    }
    // Retried all along, not only held: every delivery was tried at least a dozen times.
    assert!(attempts.iter().all(|a| *a >= 12), "{attempts:?}");
}

#[tokio::test]
async fn deleting_an_organization_deletes_the_delivery_logs_of_its_endpoints_and_of_those_deleted_before(
) {
    let stack = Stack::start(&[], true).await;
    let created = device_updates(
        &stack.table,
        ApiRequest::post("/orgs")
            .caller(ALICE)
            .json(json!({"name": "Short-lived"})),
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let org = created.body["org"]["orgId"].as_str().unwrap().to_string();
    let mut hooks = Vec::new();
    for path in ["/kept", "/deleted"] {
        let hook = stack
            .call(
                ApiRequest::post(&format!("/orgs/{org}/webhooks"))
                    .caller(ALICE)
                    .json(json!({"url": stack.receiver.url(path), "events": ["alarm.raised"]})),
            )
            .await;
        assert_eq!(hook.status, 201, "{:?}", hook.body);
        hooks.push(hook.body["webhookId"].as_str().unwrap().to_string());
    }
    stack.deliver_until(2).await;
    for id in &hooks {
        for _ in 0..10 {
            let a = stack
                .call(ApiRequest::post(&format!("/orgs/{org}/webhooks/{id}/test")).caller(ALICE))
                .await;
            assert_eq!(a.status, 202, "{:?}", a.body);
        }
    }
    let count = |wanted: fn(&ItemKey) -> bool| {
        let table = stack.table.clone();
        async move {
            table_contents(&table)
                .await
                .iter()
                .filter(|item| wanted(&key_of(item)))
                .count()
        }
    };
    let logged = || count(|k| matches!(k, ItemKey::WebhookDelivery { .. }));
    let deleted_logs = || count(|k| matches!(k, ItemKey::DeletedWebhookLog { .. }));
    assert_eq!(logged().await, 22, "two confirmations and 20 tests");

    // One endpoint deleted first: its log stays (to its TTL), out of reach of its routes, and
    // the organization's partition remembers it.
    let gone = &hooks[1];
    let deleted = stack
        .call(ApiRequest::delete(&format!("/orgs/{org}/webhooks/{gone}")).caller(ALICE))
        .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    let log = stack
        .call(ApiRequest::get(&format!("/orgs/{org}/webhooks/{gone}/deliveries")).caller(ALICE))
        .await;
    assert_eq!(log.status, 404, "{:?}", log.body);
    assert_eq!(logged().await, 22);
    assert_eq!(deleted_logs().await, 1);
    let before = table_contents(&stack.table).await;
    let again = stack
        .call(ApiRequest::delete(&format!("/orgs/{org}/webhooks/{gone}")).caller(ALICE))
        .await;
    assert_eq!(again.status, 404, "{:?}", again.body);
    assert_eq!(again.error_code(), "not_found");
    assert_eq!(
        table_contents(&stack.table).await,
        before,
        "a second delete changes nothing"
    );

    let deleted = device_updates(
        &stack.table,
        ApiRequest::delete(&format!("/orgs/{org}")).caller(ALICE),
    )
    .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    assert_eq!(
        logged().await,
        0,
        "both endpoints' logs went with the organization"
    );
    assert_eq!(deleted_logs().await, 0);
}

/// Seconds after `start` at which each of `deliveries` arrived.
fn arrivals(deliveries: &[&Received], start: Instant) -> Vec<f64> {
    deliveries
        .iter()
        .map(|d| d.at.saturating_duration_since(start).as_secs_f64())
        .collect()
}

#[tokio::test]
async fn a_storm_reaches_an_endpoint_at_its_rate_limit_and_another_endpoint_is_not_held_behind_it()
{
    let stack = Stack::start(&[], true).await;
    let created = stack
        .call(ApiRequest::post("/me/webhooks").caller(ALICE).json(
            json!({"url": stack.receiver.url("/alice"), "events": ["alarm.raised"], "rateLimit": 2}),
        ))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["webhook"]["rateLimit"], 2);
    let alice = created.body["webhookId"].as_str().unwrap().to_string();
    let bob = stack
        .call(
            ApiRequest::post("/me/webhooks")
                .caller(BOB)
                .json(json!({"url": stack.receiver.url("/bob"), "events": ["alarm.raised"]})),
        )
        .await;
    assert_eq!(bob.status, 201, "{:?}", bob.body);
    assert_eq!(bob.body["webhook"]["rateLimit"], 50, "the default");
    let bob = bob.body["webhookId"].as_str().unwrap().to_string();
    stack.deliver_until(2).await;

    // Ten of Alice's at once, then one of Bob's.
    let start = Instant::now();
    let started_at = Timestamp::now().epoch_millis();
    let ids = send_tests(&stack, ALICE, &alice, 10).await;
    send_tests(&stack, BOB, &bob, 1).await;
    // Each delivery's send slot, as its item holds it (read before the worker runs): `sendAt`
    // when it was paced to later than its creation, else due at once (its slot was at or
    // before its creation, which stands in for it). The log shows a waiting one's `sendAt`.
    let mut slots = Vec::new();
    for id in &ids {
        let item = stack.worker_delivery(ALICE, &alice, id).await;
        let slot = item.send_at.map(|at| at.epoch_millis());
        slots.push((slot, item.created_at.epoch_millis(), id.clone()));
    }
    let log = log_page(&stack, ALICE, &alice, &[]).await;
    let now = Timestamp::now().epoch_millis();
    let shown: Vec<(&str, Option<&str>)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["deliveryId"].as_str().unwrap(), d["sendAt"].as_str()))
        .collect();
    for (slot, _, id) in &slots {
        let (_, send_at) = shown.iter().find(|(d, _)| d == id).expect("in the log");
        if slot.is_some_and(|slot| slot > now + 50) {
            assert!(send_at.is_some(), "{id} waits for {slot:?}: {log}");
        }
    }
    // In the order sent, each paced slot at least half a second after the one before (never
    // more than 2 in any second), the tenth at least 4.5 s after the first was asked for.
    for pair in slots.windows(2) {
        if let (Some(earlier), Some(later)) = (pair[0].0, pair[1].0) {
            assert!(later - earlier >= 500, "{slots:?}");
        }
    }
    let due = |(slot, created, _): &(Option<i64>, i64, String)| slot.unwrap_or(*created);
    assert!(due(&slots[9]) >= started_at + 4500, "{slots:?}");

    let received = stack.deliver_until(13).await;
    let to = |path: &str| -> Vec<&Received> {
        received
            .iter()
            .filter(|d| d.path == path && body(d)["type"] == "webhook.test")
            .collect()
    };
    let alices = to("/alice");
    let bobs = arrivals(&to("/bob"), start);
    let at = arrivals(&alices, start);
    eprintln!("Alice's 10 at 2 a second arrived after {at:.1?} s; Bob's after {bobs:.1?} s");
    assert_eq!(alices.len(), 10, "{at:?}");
    assert_eq!(bobs.len(), 1);
    // None before its slot (a slot is a lower bound: a worker that falls behind sends the
    // slots that passed together, design.md section 16), so the last not before 4.5 s.
    for delivery in &alices {
        let id = delivery.header("webhook-id").unwrap();
        let slot = due(slots.iter().find(|s| s.2 == id).expect("one of the ten"));
        let arrived = started_at + delivery.at.saturating_duration_since(start).as_millis() as i64;
        assert!(
            arrived + 20 >= slot,
            "{id} at {arrived}, its slot {slot}: {slots:?}"
        );
    }
    let last = at.iter().cloned().fold(0.0, f64::max);
    assert!(last >= 4.4, "{at:?}");
    // Bob's was not queued behind Alice's storm.
    assert!(bobs[0] < last, "{bobs:?} {at:?}");
}
