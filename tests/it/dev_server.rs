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
