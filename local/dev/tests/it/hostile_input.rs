//! Hostile input through the dev server's own HTTP/1 front: byte-level requests (what
//! schemathesis against `make dev` would send). The route-level fuzz through the handlers is
//! `tests/it/hostile_input.rs`; `make hostile` runs both.

use fleet_tests::*;
use serde_json::Value;

/// Sends raw bytes as one HTTP/1.1 request and returns the status and body of the answer.
async fn raw_http(addr: std::net::SocketAddr, request: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.read_to_end(&mut answer),
    )
    .await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Byte-level requests through the dev server (what schemathesis against `make dev` would
/// send): undecodable percent-encoding, encoded delimiters, dot-segments, non-UTF-8 bodies,
/// oversized request lines, wrong media types. Never a 5xx, never a dropped connection, always
/// a JSON answer.
#[tokio::test]
async fn raw_http_through_the_dev_server_never_5xx() {
    use std::sync::Arc;
    let (table, devices) = demo_table().await;
    let server = Arc::new(fleet_dev::dev_server::DevServer::new(template(), &table));
    let alice = server
        .authorizer
        .issue("demo-alice", "alice@example.com", false);
    let kitchen = devices
        .iter()
        .find(|d| d.device_id == "thermo-kitchen")
        .unwrap()
        .token
        .clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(fleet_dev::dev_server::serve(
        listener,
        server,
        std::future::pending(),
    ));
    let before = table_contents(&table).await;
    let get = |target: &str| -> Vec<u8> {
        format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {alice}\r\nConnection: close\r\n\r\n").into_bytes()
    };
    let with_body = |method: &str,
                     target: &str,
                     auth: &str,
                     content_type: &str,
                     body: &[u8]|
     -> Vec<u8> {
        let mut r = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {auth}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    };
    let mut deep = b"{\"events\":".to_vec();
    deep.extend(std::iter::repeat_n(b'[', 5000));
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (get("/me/devices/%E0%A4%A"), 400),
        (get("/me/devices/%23"), 400),
        (get("/me/devices/USER%23demo-bob"), 400),
        (get("/me/devices/a%2Fb"), 400),
        (get("/me/devices/%00"), 400),
        (get("/me/devices/%FF%FE"), 400),
        (get("/me/devices/.."), 400),
        (get("/me/devices/%2e%2e"), 400),
        (get("/me/devices/thermo%E2%80%90kitchen"), 400),
        (get("/me/devices?limit=%ZZ"), 400),
        (get("/me/devices?cursor=%E0%A4"), 400),
        (get("/me/devices?tag=a%23b"), 400),
        (get("/me/events?from=2024%2D13%2D01T00:00:00Z"), 400),
        // Repeated parameters: the first counts (lambda_http reads rawQueryString).
        (get("/me/events?limit=1&limit=2"), 200),
        (get(&format!("/me/devices/{}", "a".repeat(20_000))), 431),
        (
            get(&format!("/me/events?cursor={}", "A".repeat(5_000))),
            400,
        ),
        (get("/admin/events?type=temperature"), 403),
        (
            with_body(
                "POST",
                "/me/devices",
                &alice,
                "application/json",
                &[0xff, 0xfe, 0x00, 0x80],
            ),
            400,
        ),
        (
            with_body("PUT", "/me", &alice, "text/plain", b"{\"name\":\"x\"}"),
            415,
        ),
        (
            with_body(
                "PUT",
                "/me",
                &alice,
                "application/json",
                b"{\"name\":\"x\",\"name\":\"y\"}",
            ),
            400,
        ),
        (
            with_body(
                "POST",
                "/devices/thermo-kitchen/events",
                &kitchen,
                "application/json",
                &deep,
            ),
            400,
        ),
        (
            with_body(
                "POST",
                "/devices/thermo-kitchen/events",
                &kitchen,
                "application/json",
                &vec![b' '; 70_000],
            ),
            413,
        ),
        (
            with_body(
                "POST",
                "/devices/thermo-kitchen/events",
                "x\u{7f}y",
                "application/json",
                b"{}",
            ),
            400, // hyper refuses a header with a control character
        ),
        (
            b"TRACE /me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            404,
        ),
        (
            b"GET /me/devices/\x01\x02 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            400,
        ),
    ];
    let mut tried = 0;
    for (request, expected) in cases {
        let (status, body) = raw_http(addr, &request).await;
        let shown = String::from_utf8_lossy(&request[..request.len().min(120)]).into_owned();
        assert_eq!(status, expected, "{shown}: {body}");
        if status != 400 || !body.is_empty() {
            assert!(
                serde_json::from_str::<Value>(&body).is_ok() || body.is_empty(),
                "{shown}: {body}"
            );
        }
        tried += 1;
    }
    assert_eq!(table_contents(&table).await, before);
    println!("hostile_input: {tried} raw HTTP requests through the dev server, none a 5xx");
}
