//! The local HTTP API, one axum server: API Gateway's part as two layers (the routes of
//! `template.yaml` with their limits and route keys, then a stand-in for the JWT authorizer),
//! and behind them the functions' own Routers merged, served through the same [`gateway::app`] as
//! the Lambdas. Each request reaches them as the API Gateway HTTP API (payload 2.0) event the
//! function would receive. The stand-in authorizer admits tokens it issued itself; it lives in
//! this crate, which no Lambda depends on, so it can never ship.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use serde_json::json;
use shared::http::gateway::{self, Metered};
use shared::FleetTable;
use tokio::net::TcpListener;

use fleet_testkit::api_event::ApiEvent;
use fleet_testkit::functions::router_for;
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
            shared::model::token::random_id().unwrap_or_else(|_| "fallback".into())
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

/// The dev server: the template's routes, the stand-in authorizer and the functions' Routers.
pub struct DevServer {
    routes: Vec<HttpRoute>,
    /// The `CodeUri`s that have a Router; a template route of another function is a 501.
    served: BTreeSet<String>,
    functions: Metered<Router>,
    /// The stand-in JWT authorizer.
    pub authorizer: LocalAuthorizer,
    request_counter: AtomicU64,
}

/// The template route a request matched, with its decoded path parameters (what API Gateway
/// knows after routing).
#[derive(Clone)]
struct MatchedRoute {
    route: HttpRoute,
    params: Claims,
}

impl DevServer {
    /// Serves every HttpApi route of `template` with its function's Router on `table`.
    pub fn new(template: &Template, table: &FleetTable) -> Self {
        let mut served = BTreeSet::new();
        let mut functions = Router::new();
        for route in &template.routes {
            if served.contains(&route.code_uri) {
                continue;
            }
            if let Some(router) = router_for(&route.code_uri, table) {
                functions = functions.merge(router);
                served.insert(route.code_uri.clone());
            }
        }
        Self {
            routes: template.routes.clone(),
            served,
            functions: gateway::app(functions),
            authorizer: LocalAuthorizer::default(),
            request_counter: AtomicU64::new(0),
        }
    }

    /// The routes served, for the start-up banner.
    pub fn routes(&self) -> impl Iterator<Item = &HttpRoute> {
        self.routes.iter()
    }

    /// Whether a template route serves `method` `path` (the console's files are served only
    /// where none does).
    pub fn has_route(&self, method: &str, path: &str) -> bool {
        self.find(method, path).is_some()
    }

    fn find(&self, method: &str, path: &str) -> Option<MatchedRoute> {
        // Exact paths win over templated ones, as in API Gateway.
        let mut best: Option<(usize, MatchedRoute)> = None;
        for route in &self.routes {
            if route.method != method && route.method != "ANY" {
                continue;
            }
            if let Some(params) = match_path(&route.path, path) {
                let score = params.len();
                if best.as_ref().is_none_or(|(s, _)| score < *s) {
                    let route = route.clone();
                    best = Some((score, MatchedRoute { route, params }));
                }
            }
        }
        best.map(|(_, matched)| matched)
    }

    /// The server: API Gateway's routing, then the authorizer, then the functions.
    pub fn app(self: Arc<Self>) -> Router {
        Router::new()
            .fallback(to_function)
            .layer(middleware::from_fn_with_state(self.clone(), authorize))
            .layer(middleware::from_fn_with_state(
                self.clone(),
                route_in_template,
            ))
            .with_state(self)
    }
}

/// API Gateway's routing: the request line and headers within limits, a route of the
/// template, a function that has code for it.
async fn route_in_template(
    State(server): State<Arc<DevServer>>,
    mut req: Request,
    next: Next,
) -> Response {
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
    let Some(matched) = server.find(req.method().as_str(), req.uri().path()) else {
        return gateway_message(StatusCode::NOT_FOUND, "Not Found");
    };
    if !server.served.contains(&matched.route.code_uri) {
        return gateway_message(
            StatusCode::NOT_IMPLEMENTED,
            &format!("{} has no local handler yet", matched.route.function),
        );
    }
    req.extensions_mut().insert(matched);
    next.run(req).await
}

/// The stand-in JWT authorizer: on a route that needs one, a token it issued, whose claims go
/// on to the function; anything else is API Gateway's 401.
async fn authorize(State(server): State<Arc<DevServer>>, mut req: Request, next: Next) -> Response {
    let Some(matched) = req.extensions().get::<MatchedRoute>() else {
        return next.run(req).await;
    };
    if matched.route.authorized {
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match server.authorizer.verify(header) {
            Some(claims) => {
                req.extensions_mut().insert(VerifiedClaims(claims));
            }
            None => return gateway_message(StatusCode::UNAUTHORIZED, "Unauthorized"),
        }
    }
    next.run(req).await
}

/// Claims the stand-in authorizer verified for this request.
#[derive(Clone)]
struct VerifiedClaims(Claims);

/// The request as the payload 2.0 event API Gateway sends, through the functions' Routers.
async fn to_function(
    State(server): State<Arc<DevServer>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let Some(matched) = parts.extensions.get::<MatchedRoute>().cloned() else {
        return gateway_message(StatusCode::NOT_FOUND, "Not Found");
    };
    let claims = parts
        .extensions
        .get::<VerifiedClaims>()
        .map(|c| c.0.clone());
    let Ok(body) = axum::body::to_bytes(body, MAX_PAYLOAD_BYTES).await else {
        return gateway_message(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large");
    };
    let n = server.request_counter.fetch_add(1, Ordering::Relaxed);
    let event = api_gateway_event(
        &matched.route,
        &parts,
        &body,
        matched.params,
        claims,
        peer,
        n,
    );
    let request = match lambda_http::request::from_str(&event.to_json().to_string()) {
        Ok(r) => r,
        Err(e) => {
            return gateway_message(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("event conversion failed: {e}"),
            )
        }
    };
    let (parts, body) = server.functions.handle(request).await.into_parts();
    Response::from_parts(parts, Body::from(body.to_vec()))
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

/// The API Gateway event of one HTTP request, as API Gateway builds it after the route
/// matched and the authorizer admitted `claims` (the project's one event builder).
fn api_gateway_event(
    route: &HttpRoute,
    parts: &axum::http::request::Parts,
    body: &Bytes,
    path_params: Claims,
    claims: Option<Claims>,
    peer: SocketAddr,
    n: u64,
) -> ApiEvent {
    let now = time_now_seconds();
    let mut event = ApiEvent::new(route.route_key(), parts.uri.path())
        .without_headers()
        .raw_query(parts.uri.query().unwrap_or(""))
        .bytes(body)
        .received(
            &peer.ip().to_string(),
            &format!("local-{now}-{n}"),
            now * 1000,
        );
    for (name, value) in &parts.headers {
        event = event.append_header(name.as_str(), value.to_str().unwrap_or(""));
    }
    for (name, value) in path_params {
        event = event.param(&name, &value);
    }
    if let Some(claims) = claims {
        event = event.claims(claims.into_iter().collect());
    }
    event
}

fn gateway_message(status: StatusCode, message: &str) -> Response {
    let mut response = Response::new(Body::from(json!({ "message": message }).to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Serves `server` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    server: Arc<DevServer>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_app(listener, server.app(), shutdown).await
}

/// Serves `app` (the dev server's, possibly with more in front, as the console) on `listener`
/// until `shutdown` completes.
pub async fn serve_app(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
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
