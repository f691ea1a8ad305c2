//! Every request logs exactly one JSON line with route, status, latency, DynamoDB requests and
//! consumed capacity, and never the secrets that passed through it.

use std::io::Write;
use std::sync::{Arc, Mutex};

use fleet_tests::*;
use serde_json::{json, Value};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("every log line is JSON"))
            .collect()
    }
    fn raw(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// The JSON log lines this thread writes while the returned guards live.
fn capture_logs() -> (
    Captured,
    (tracing::Dispatch, tracing::subscriber::DefaultGuard),
) {
    // With exactly one Dispatch in the process, tracing-core 0.1.36 decides a callsite's
    // cached interest from the default of whichever thread registers it first: a sibling
    // test without a subscriber would cache `never` for the request-log line and this test
    // would see nothing (tokio-rs/tracing#3611). A second live Dispatch makes it take the
    // interest of every registered dispatcher instead.
    let second_dispatch = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let captured = Captured::default();
    let writer = captured.clone();
    let guard =
        tracing::subscriber::set_default(shared::observe::telemetry::json_subscriber(move || {
            writer.clone()
        }));
    (captured, (second_dispatch, guard))
}

// current_thread runtime: the thread-local subscriber sees everything the handler logs.
#[tokio::test(flavor = "current_thread")]
async fn one_json_line_per_request_without_secrets() {
    let table = fresh_table().await;
    let (captured, _logging) = capture_logs();

    let a = device_updates(
        &table,
        ApiRequest::post("/me/devices")
            .caller("user-log")
            .header("Authorization", "Bearer secret-jwt-value")
            .json(json!({"deviceId": "log-1", "name": "Log", "type": "thermostat"})),
    )
    .await;
    assert_eq!(a.status, 201);
    let token = a.body["token"].as_str().unwrap().to_string();
    let b = device_updates(
        &table,
        ApiRequest::put("/me")
            .caller("user-log")
            .json(json!({"name": "x".repeat(200)})),
    )
    .await;
    assert_eq!(b.status, 400);

    let lines = captured.lines();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let first = &lines[0];
    assert_eq!(first["route"], "POST /me/devices");
    assert_eq!(first["status"], 201);
    assert_eq!(
        first["ddb_requests"], 2,
        "the fleet item, then the transaction"
    );
    assert!(first["wcu"].as_f64().unwrap() > 0.0, "{first}");
    assert!(first["latency_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(lines[1]["route"], "PUT /me");
    assert_eq!(lines[1]["status"], 400);
    assert_eq!(lines[1]["ddb_requests"], 0);
    let raw = captured.raw();
    assert!(!raw.contains(&token), "device token logged");
    assert!(
        !raw.contains("secret-jwt-value"),
        "authorization header logged"
    );
}

/// DynamoDB unreachable (the fault proxy closes every connection before forwarding it) is its
/// own answer, not throttling: 503 `dependency_unreachable` with Retry-After after the same
/// retries, the `DependencyUnreachable` metric at 1 and `dependency_unreachable` on the log
/// line. A throttled table through the same proxy stays 503 `unavailable`, metric 0, no field.
#[tokio::test(flavor = "current_thread")]
async fn an_unreachable_table_is_answered_logged_and_counted_apart_from_throttling() {
    use fleet_testkit::fault_proxy::{
        through_proxy, ClientTimeouts, FaultProxy, FaultRates, ProxyConfig,
    };
    use shared::observe::emf;

    let table = fresh_table().await;
    let (captured, _logging) = capture_logs();
    let closed = FaultRates {
        drop_before_forward: 1.0,
        ..FaultRates::none()
    };
    let throttled = FaultRates {
        throttling: 1.0,
        ..FaultRates::none()
    };
    for (rates, code, unreachable) in [
        (closed, "dependency_unreachable", 1.0),
        (throttled, "unavailable", 0.0),
    ] {
        let proxy = FaultProxy::start(endpoint(), ProxyConfig::new(7, rates))
            .await
            .expect("start the fault proxy");
        let faulty = through_proxy(&table, proxy.endpoint(), ClientTimeouts::default()).await;
        let (a, docs) = emf::capture(dashboard(
            &faulty,
            ApiRequest::get("/me/devices/anything").caller("someone"),
        ))
        .await;
        assert_eq!(a.status, 503, "{}", a.body);
        assert_eq!(a.error_code(), code);
        assert_eq!(
            a.headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1")
        );
        // The retry policy is unchanged: every attempt went to the proxy and failed.
        assert_eq!(
            proxy.stats().total_faults(),
            u64::from(shared::store::table::MAX_ATTEMPTS)
        );
        assert_eq!(docs.len(), 1, "{docs:#?}");
        assert_eq!(docs[0]["DependencyUnreachable"], unreachable, "{}", docs[0]);
        assert_eq!(docs[0]["Status5xx"], 1.0);
        let lines = captured.lines();
        let line = lines.last().expect("the request's log line");
        assert_eq!(line["status"], 503);
        if unreachable > 0.0 {
            assert_eq!(line["dependency_unreachable"], true, "{line}");
        } else {
            assert!(line.get("dependency_unreachable").is_none(), "{line}");
        }
    }
}

// An invitation code admits its holder: it is in the answer to its creator and in the path of
// its acceptance, and in no log line of either.
#[tokio::test(flavor = "current_thread")]
async fn an_invitation_code_is_never_logged() {
    let table = fresh_table().await;
    let (captured, _logging) = capture_logs();
    let created = device_updates(
        &table,
        ApiRequest::new("POST /orgs", "/orgs")
            .caller("log-owner")
            .json(json!({"name": "Logged Org"})),
    )
    .await;
    let org = created.body["org"]["orgId"].as_str().unwrap().to_string();
    let invited = device_updates(
        &table,
        ApiRequest::new(
            "POST /orgs/{orgId}/invitations",
            &format!("/orgs/{org}/invitations"),
        )
        .param("orgId", &org)
        .caller("log-owner")
        .json(json!({"role": "viewer"})),
    )
    .await;
    let code = invited.body["invitation"]["code"]
        .as_str()
        .unwrap()
        .to_string();
    let accepted = device_updates(
        &table,
        ApiRequest::new(
            "POST /invitations/{code}/accept",
            &format!("/invitations/{code}/accept"),
        )
        .param("code", &code)
        .caller("log-invitee"),
    )
    .await;
    assert_eq!(accepted.status, 200, "{:?}", accepted.body);
    let secret = code.rsplit_once('.').unwrap().1;
    let logged = captured.raw();
    assert_eq!(captured.lines().len(), 3, "{logged}");
    assert!(!logged.contains(secret), "{logged}");
}
