//! The dev server of `make dev`: routes come from template.yaml, the stand-in authorizer answers
//! like API Gateway's, and requests reach the same handler code as the Lambdas.

use std::sync::Arc;

use fleet_dev::dev_server::{serve, DevServer};
use fleet_testkit::template::Template;
use fleet_tests::*;
use serde_json::{json, Value};

async fn start(template: &Template) -> (String, Arc<DevServer>, shared::FleetTable) {
    let table = fresh_table().await;
    let server = Arc::new(DevServer::new(template, &table));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, server.clone(), std::future::pending()));
    (url, server, table)
}

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn serves_template_routes_behind_the_stand_in_authorizer() {
    let (url, server, table) = start(template()).await;
    let http = reqwest::Client::new();
    let token = server
        .authorizer
        .issue("user-dev", "dev@example.com", false);

    let (status, body) = send(http.put(format!("{url}/me")).json(&json!({"name": "Dev"}))).await;
    assert_eq!((status, body), (401, json!({"message": "Unauthorized"})));
    let (status, _) = send(
        http.put(format!("{url}/me"))
            .bearer_auth("forged-token")
            .json(&json!({"name": "Dev"})),
    )
    .await;
    assert_eq!(status, 401);
    assert!(table_contents(&table).await.is_empty());

    let (status, body) = send(
        http.put(format!("{url}/me"))
            .bearer_auth(&token)
            .json(&json!({"name": "Dev"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["profile"]["userId"], "user-dev",
        "the caller comes from the token's claims"
    );

    let (status, body) = send(
        http.post(format!("{url}/me/devices"))
            .bearer_auth(&token)
            .json(&json!({"deviceId": "dev-1", "name": "Dev", "type": "thermostat"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(
        http.patch(format!("{url}/me/devices/dev-1"))
            .bearer_auth(&token)
            .header("If-Match", "1")
            .json(&json!({"status": "inactive"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // A percent-encoded delimiter is decoded into the path parameter and rejected.
    let (status, body) = send(
        http.delete(format!("{url}/me/devices/a%23b"))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "deviceId");

    let (status, body) = send(http.get(format!("{url}/nowhere")).bearer_auth(&token)).await;
    fleet_tests::api_doc::api_doc()
        .check_unmatched_route(status, &body)
        .unwrap();
    assert_eq!((status, body), (404, json!({"message": "Not Found"})));
}

#[tokio::test]
async fn a_route_added_to_the_template_is_served_without_touching_the_server() {
    let mut template = template().clone();
    let mut extra = template.routes[0].clone();
    extra.method = "POST".into();
    extra.path = "/me/rename".into();
    template.routes.push(extra);
    let (url, server, _) = start(&template).await;
    let token = server
        .authorizer
        .issue("user-dev", "dev@example.com", false);
    let (status, body) = send(
        reqwest::Client::new()
            .post(format!("{url}/me/rename"))
            .bearer_auth(&token)
            .json(&json!({})),
    )
    .await;
    // The request reached the function, which has no code for it yet.
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "no_route", "{body}");
}

/// The console beside the API: its files where no route is, the stand-in sign-in, and nothing
/// outside its folder; API routes stay the API's.
#[tokio::test]
async fn serves_the_console_and_its_stand_in_sign_in_beside_the_api() {
    use fleet_dev::console::{with_console, Console, StandInUser};
    let dir = std::env::temp_dir().join(format!("fleet-console-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("index.html"), "<title>console</title>").unwrap();
    std::fs::write(dir.join("assets/app-1.js"), "console.log(1)").unwrap();
    let table = fresh_table().await;
    let server = Arc::new(DevServer::new(template(), &table));
    let console = Arc::new(Console {
        dir: Some(dir.clone()),
        users: vec![StandInUser {
            sub: "demo-op".into(),
            email: "op@example.com".into(),
            name: "Op".into(),
            admin: true,
        }],
        security_headers: template()
            .console_headers
            .as_ref()
            .expect("template.yaml's ConsoleSecurityHeaders")
            .local_headers(),
    });
    let app = with_console(server.clone().app(), server.clone(), console);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fleet_dev::dev_server::serve_app(
        listener,
        app,
        std::future::pending(),
    ));
    let http = reqwest::Client::new();

    let page = http.get(format!("{url}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    // CloudFront's security headers, from template.yaml, on the console's files.
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(policy.starts_with("default-src 'self';"), "{policy}");
    assert!(policy.contains("connect-src 'self';"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert_eq!(page.text().await.unwrap(), "<title>console</title>");
    // The console's configuration says local: no 404 in the browser's console, and no
    // console falls back to local sign-in by itself (web/src/auth.ts fails closed).
    let config = http.get(format!("{url}/config.json")).send().await.unwrap();
    assert_eq!(config.status(), 200);
    assert_eq!(config.headers()["content-security-policy"], policy.as_str());
    assert_eq!(
        config.json::<Value>().await.unwrap(),
        json!({"mode": "local"})
    );
    let script = http
        .get(format!("{url}/assets/app-1.js"))
        .send()
        .await
        .unwrap();
    assert!(script.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("immutable"));
    for escape in [
        "/assets/../../etc/passwd",
        "/%2e%2e/Cargo.toml",
        "/nothing.js",
    ] {
        let (status, _) = send(http.get(format!("{url}{escape}"))).await;
        assert_eq!(status, 404, "{escape}");
    }

    let (status, body) = send(http.get(format!("{url}/local/users"))).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"users": [{"userId": "demo-op", "name": "Op", "admin": true}]})
    );
    let (status, body) = send(http.post(format!("{url}/local/users/demo-op/token"))).await;
    assert_eq!(status, 200);
    let token = body["token"].as_str().unwrap().to_string();
    let (status, _) = send(http.post(format!("{url}/local/users/nobody/token"))).await;
    assert_eq!(status, 404);

    // The token it hands out is one the stand-in authorizer admits; API routes are the API's.
    let (status, body) = send(
        http.get(format!("{url}/admin/devices?status=active"))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(http.get(format!("{url}/me/dashboard"))).await;
    assert_eq!((status, body), (401, json!({"message": "Unauthorized"})));
    std::fs::remove_dir_all(dir).ok();
}

/// `make dev` delivers webhooks for real: an endpoint registered through the API at a local
/// receiver (allowed by `WEBHOOK_ALLOWED_LOCAL_TARGETS`) confirms itself by answering, and an
/// alarm raised by a reading sent through the API reaches it, signed, within seconds, through
/// DynamoDB Local's stream, moto's SQS and the delivery worker, as `fleet-dev serve` wires them.
#[tokio::test]
async fn an_alarm_raised_through_the_api_reaches_a_local_receiver_within_seconds() {
    use fleet_testkit::webhook_receiver::WebhookReceiver;
    let receiver = WebhookReceiver::start(&[], true).await.unwrap();
    // Before the functions are built: they read these once (the other tests here use neither).
    std::env::set_var("WEBHOOK_ALLOWED_LOCAL_TARGETS", receiver.target());
    let aws = fleet_dev::local_aws::start_local_aws().await.unwrap();
    let table = fresh_table_with_stream().await;
    let server = Arc::new(DevServer::new(template(), &table));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, server.clone(), std::future::pending()));
    let worker = fleet_dev::local_aws::start_deliveries(&table, &aws).unwrap();
    tokio::spawn(fleet_dev::alarms::watch_alarms(
        table.clone(),
        endpoint().to_string(),
        Some(worker),
    ));
    let http = reqwest::Client::new();
    let token = server
        .authorizer
        .issue("user-hooks", "hooks@example.com", false);
    let (status, body) = send(
        http.post(format!("{url}/me/webhooks"))
            .bearer_auth(&token)
            .json(&json!({"url": receiver.url("/alarms"), "events": ["alarm.raised"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let hook = body["webhookId"].as_str().unwrap().to_string();
    let (status, body) = send(
        http.post(format!("{url}/me/devices"))
            .bearer_auth(&token)
            .json(&json!({"deviceId": "freezer-1", "name": "Freezer", "type": "thermostat"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let device_token = body["token"].as_str().unwrap().to_string();
    let (status, body) = send(
        http.post(format!("{url}/me/rules"))
            .bearer_auth(&token)
            .json(&json!({"name": "Thawing", "eventType": "temperature",
                "scope": {"deviceType": "thermostat"}, "condition": {"above": -10},
                "severity": "critical"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let waited = std::time::Instant::now();
    let confirmed = loop {
        let (_, body) = send(
            http.get(format!("{url}/me/webhooks/{hook}"))
                .bearer_auth(&token),
        )
        .await;
        if body["webhook"]["confirmed"] == true || waited.elapsed().as_secs() > 20 {
            break body["webhook"]["confirmed"] == true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(confirmed, "the endpoint confirmed itself by answering");
    let sent = std::time::Instant::now();
    let (status, body) = send(
        http.post(format!("{url}/devices/freezer-1/events"))
            .bearer_auth(&device_token)
            .json(&json!({"events": [{"type": "temperature", "value": -2.5,
                "at": shared::model::timestamp::Timestamp::now()}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let alarm = loop {
        let found = receiver
            .received()
            .into_iter()
            .find(|r| r.body.contains("\"alarm.raised\""));
        if found.is_some() || sent.elapsed().as_secs() > 30 {
            break found;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let alarm = alarm.expect("the alarm reached the receiver within 30 s");
    let body: Value = serde_json::from_str(&alarm.body).unwrap();
    assert_eq!(body["data"]["deviceId"], "freezer-1");
    assert_eq!(body["data"]["ruleName"], "Thawing");
    assert!(alarm
        .header("webhook-signature")
        .unwrap()
        .starts_with("v1,"));
    eprintln!(
        "alarm reached the local receiver {:.1} s after the reading was sent",
        sent.elapsed().as_secs_f64()
    );
}
