//! The local HTTP API: routes read from `template.yaml`, each request turned into the API
//! Gateway HTTP API (payload 2.0) event the function would receive, and handled by the same
//! handler code. A stand-in for the JWT authorizer admits tokens it issued itself; it lives in
//! this crate, which no Lambda depends on, so it can never ship.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use base64::Engine as _;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use shared::FleetTable;
use tokio::net::TcpListener;

use fleet_testkit::functions::{handler_for, Handler};
use fleet_testkit::template::{HttpRoute, Template};

/// API Gateway's payload limit.
const MAX_PAYLOAD_BYTES: usize = 10 * 1024 * 1024;

/// API Gateway HTTP APIs' limit on the request line and header values together. Longer
/// requests never reach a function (and lambda_http cannot build a request whose URI is over
/// 64 KiB), so the dev server refuses them too.
const MAX_REQUEST_LINE_AND_HEADERS: usize = 10_240;

/// Claims the stand-in authorizer puts in the request context, as API Gateway would from a
/// verified JWT.
pub type Claims = HashMap<String, String>;

/// Stand-in for API Gateway's JWT authorizer: opaque tokens it issued, mapped to claims.
#[derive(Default)]
pub struct LocalAuthorizer {
    tokens: RwLock<HashMap<String, Claims>>,
}

impl LocalAuthorizer {
    /// Issues a token for `sub` (optionally in the `admin` group), as Cognito would after
    /// sign-in.
    pub fn issue(&self, sub: &str, email: &str, admin: bool) -> String {
        let token = format!(
            "local-{sub}-{}",
            shared::token::random_id().unwrap_or_else(|_| "fallback".into())
        );
        let now = time_now_seconds();
        let mut claims = Claims::from([
            ("sub".into(), sub.to_string()),
            ("email".into(), email.to_string()),
            ("iss".into(), "http://127.0.0.1/local-authorizer".into()),
            ("aud".into(), "device-fleet-local".into()),
            ("token_use".into(), "id".into()),
            ("iat".into(), now.to_string()),
            ("exp".into(), (now + 12 * 3600).to_string()),
        ]);
        if admin {
            claims.insert("cognito:groups".into(), "[admin]".into());
        }
        self.tokens
            .write()
            .expect("authorizer lock")
            .insert(token.clone(), claims);
        token
    }

    /// The claims for an `Authorization: Bearer <token>` header value, if valid.
    fn verify(&self, authorization: Option<&str>) -> Option<Claims> {
        let token = authorization?.strip_prefix("Bearer ")?.trim();
        self.tokens.read().ok()?.get(token).cloned()
    }
}

fn time_now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The dev server's routing table and authorizer.
pub struct DevServer {
    routes: Vec<(HttpRoute, Option<Handler>)>,
    /// The stand-in JWT authorizer.
    pub authorizer: LocalAuthorizer,
    request_counter: AtomicU64,
}

impl DevServer {
    /// Routes every HttpApi route of `template` to its function's handler on `table`.
    pub fn new(template: &Template, table: &FleetTable) -> Self {
        let routes = template
            .routes
            .iter()
            .map(|r| (r.clone(), handler_for(&r.code_uri, table)))
            .collect();
        Self {
            routes,
            authorizer: LocalAuthorizer::default(),
            request_counter: AtomicU64::new(0),
        }
    }

    /// The routes served, for the start-up banner.
    pub fn routes(&self) -> impl Iterator<Item = &HttpRoute> {
        self.routes.iter().map(|(r, _)| r)
    }

    fn find(&self, method: &str, path: &str) -> Option<(&HttpRoute, &Option<Handler>, Claims)> {
        // Exact paths win over templated ones, as in API Gateway.
        let mut best: Option<(usize, &HttpRoute, &Option<Handler>, Claims)> = None;
        for (route, handler) in &self.routes {
            if route.method != method && route.method != "ANY" {
                continue;
            }
            if let Some(params) = match_path(&route.path, path) {
                let score = params.len();
                if best.as_ref().is_none_or(|(s, ..)| score < *s) {
                    best = Some((score, route, handler, params));
                }
            }
        }
        best.map(|(_, r, h, p)| (r, h, p))
    }

    async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        let method = req.method().as_str().to_string();
        let path = req.uri().path().to_string();
        let head_size = req.uri().to_string().len()
            + req
                .headers()
                .iter()
                .map(|(k, v)| k.as_str().len() + v.len())
                .sum::<usize>();
        if head_size > MAX_REQUEST_LINE_AND_HEADERS {
            return gateway_message(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "Request Header Fields Too Large",
            );
        }
        let Some((route, handler, path_params)) = self.find(&method, &path) else {
            return gateway_message(StatusCode::NOT_FOUND, "Not Found");
        };
        let claims = if route.authorized {
            let header = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            match self.authorizer.verify(header) {
                Some(claims) => Some(claims),
                None => return gateway_message(StatusCode::UNAUTHORIZED, "Unauthorized"),
            }
        } else {
            None
        };
        let Some(handler) = handler else {
            return gateway_message(
                StatusCode::NOT_IMPLEMENTED,
                &format!("{} has no local handler yet", route.function),
            );
        };
        let (parts, body) = req.into_parts();
        let body = match Limited::new(body, MAX_PAYLOAD_BYTES).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => {
                return gateway_message(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large")
            }
        };
        let n = self.request_counter.fetch_add(1, Ordering::Relaxed);
        let event = api_gateway_event(route, &parts, &body, path_params, claims, peer, n);
        let request = match lambda_http::request::from_str(&event.to_string()) {
            Ok(r) => r,
            Err(e) => {
                return gateway_message(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("event conversion failed: {e}"),
                )
            }
        };
        into_hyper(handler(request).await)
    }
}

/// Matches a template path (`/me/devices/{deviceId}`, `{proxy+}`) against a request path;
/// returns the decoded path parameters.
pub fn match_path(template: &str, path: &str) -> Option<Claims> {
    let want: Vec<&str> = template.trim_matches('/').split('/').collect();
    let got: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut params = Claims::new();
    for (i, segment) in want.iter().enumerate() {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            if let Some(greedy) = name.strip_suffix('+') {
                let rest = got.get(i..)?.join("/");
                if rest.is_empty() {
                    return None;
                }
                params.insert(greedy.to_string(), decode(&rest));
                return Some(params);
            }
            let value = got.get(i)?;
            if value.is_empty() {
                return None;
            }
            params.insert(name.to_string(), decode(value));
        } else if got.get(i) != Some(segment) {
            return None;
        }
    }
    (want.len() == got.len()).then_some(params)
}

fn decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

/// The API Gateway HTTP API payload 2.0 event for a request.
fn api_gateway_event(
    route: &HttpRoute,
    parts: &hyper::http::request::Parts,
    body: &Bytes,
    path_params: Claims,
    claims: Option<Claims>,
    peer: SocketAddr,
    n: u64,
) -> Value {
    let mut headers: serde_json::Map<String, Value> = serde_json::Map::new();
    for (name, value) in &parts.headers {
        let value = value.to_str().unwrap_or("").to_string();
        let entry = headers
            .entry(name.as_str().to_ascii_lowercase())
            .or_insert_with(|| Value::String(String::new()));
        // API Gateway joins repeated headers with commas.
        let joined = match entry.as_str() {
            Some("") | None => value,
            Some(prev) => format!("{prev},{value}"),
        };
        *entry = Value::String(joined);
    }
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let mut query: serde_json::Map<String, Value> = serde_json::Map::new();
    for (k, v) in form_urlencoded::parse(raw_query.as_bytes()) {
        let joined = match query.get(k.as_ref()).and_then(Value::as_str) {
            Some(prev) => format!("{prev},{v}"),
            None => v.into_owned(),
        };
        query.insert(k.into_owned(), Value::String(joined));
    }
    let (body_text, is_base64) = match std::str::from_utf8(body) {
        _ if body.is_empty() => (Value::Null, false),
        Ok(text) => (Value::String(text.to_string()), false),
        Err(_) => (
            Value::String(base64::engine::general_purpose::STANDARD.encode(body)),
            true,
        ),
    };
    let now = time_now_seconds();
    let mut context = json!({
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": "127.0.0.1",
        "domainPrefix": "local",
        "http": {
            "method": parts.method.as_str(),
            "path": parts.uri.path(),
            "protocol": "HTTP/1.1",
            "sourceIp": peer.ip().to_string(),
            "userAgent": parts.headers.get(hyper::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or(""),
        },
        "requestId": format!("local-{now}-{n}"),
        "routeKey": route.route_key(),
        "stage": "$default",
        "time": "",
        "timeEpoch": now * 1000,
    });
    if let Some(claims) = claims {
        context["authorizer"] = json!({ "jwt": { "claims": claims, "scopes": null } });
    }
    let mut event = json!({
        "version": "2.0",
        "routeKey": route.route_key(),
        "rawPath": parts.uri.path(),
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": context,
        "isBase64Encoded": is_base64,
    });
    if !query.is_empty() {
        event["queryStringParameters"] = Value::Object(query);
    }
    if !path_params.is_empty() {
        event["pathParameters"] = json!(path_params);
    }
    if !body_text.is_null() {
        event["body"] = body_text;
    }
    event
}

fn gateway_message(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(
        json!({ "message": message }).to_string(),
    )));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn into_hyper(response: lambda_http::Response<lambda_http::Body>) -> Response<Full<Bytes>> {
    let (parts, body) = response.into_parts();
    let bytes = Bytes::copy_from_slice(body.as_ref());
    Response::from_parts(parts, Full::new(bytes))
}

/// Serves `server` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    server: Arc<DevServer>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => {
                let (stream, peer) = accepted?;
                let server = server.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let server = server.clone();
                        async move { Ok::<_, Infallible>(server.handle(req, peer).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_template_paths_and_decodes_parameters() {
        assert_eq!(match_path("/me", "/me"), Some(Claims::new()));
        assert_eq!(match_path("/me", "/me/"), Some(Claims::new()));
        assert_eq!(match_path("/me", "/you"), None);
        let p = match_path("/me/devices/{deviceId}", "/me/devices/a%23b").unwrap();
        assert_eq!(p["deviceId"], "a#b");
        assert_eq!(match_path("/me/devices/{deviceId}", "/me/devices"), None);
        assert_eq!(
            match_path("/me/devices/{deviceId}", "/me/devices/a/b"),
            None
        );
        let p = match_path("/files/{path+}", "/files/a/b").unwrap();
        assert_eq!(p["path"], "a/b");
    }

    #[test]
    fn authorizer_admits_only_tokens_it_issued() {
        let auth = LocalAuthorizer::default();
        let token = auth.issue("u-1", "u@example.com", true);
        let claims = auth.verify(Some(&format!("Bearer {token}"))).unwrap();
        assert_eq!(claims["sub"], "u-1");
        assert_eq!(claims["cognito:groups"], "[admin]");
        assert!(auth.verify(Some("Bearer nope")).is_none());
        assert!(auth.verify(Some(&token)).is_none(), "scheme required");
        assert!(auth.verify(None).is_none());
    }
}
