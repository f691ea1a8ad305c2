//! The web console (`web/`, built into `web/dist/`) served beside the API, same origin, and
//! the dev-only sign-in it uses locally: the stand-in users, one stand-in token each on
//! request. On AWS the console signs in with Cognito instead; nothing here ships.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Value};

use crate::dev_server::DevServer;

/// A stand-in user the console offers on its sign-in page.
#[derive(Clone, Debug)]
pub struct StandInUser {
    /// JWT `sub` (`demo-alice`).
    pub sub: String,
    /// E-mail claim.
    pub email: String,
    /// Profile name.
    pub name: String,
    /// Member of the `admin` group.
    pub admin: bool,
}

/// What the console needs from the dev server: where its built files are and who may sign in.
pub struct Console {
    /// `web/dist`; `None` serves only the sign-in endpoints (the console was not built).
    pub dir: Option<PathBuf>,
    /// The stand-in users, in the order the sign-in page lists them.
    pub users: Vec<StandInUser>,
    /// The headers CloudFront adds to every console file (template.yaml's
    /// `ConsoleSecurityHeaders`, AWS origins dropped), so the console runs locally under the
    /// policy it runs under on AWS.
    pub security_headers: Vec<(&'static str, String)>,
}

/// What the console reads at start to know how to sign in: locally, the dev server's stand-in
/// users (`make deploy` uploads the Cognito one beside the console on AWS).
const LOCAL_CONFIG: &str = r#"{"mode":"local"}"#;

/// Prefix of the dev-only endpoints. No template route starts with it, so API Gateway on AWS
/// would answer 404 there, as it should.
const LOCAL_PREFIX: &str = "/local/";

/// `app` with the console in front: `/local/...` sign-in endpoints, and the console's files
/// for a GET no template route matches. Everything else goes to `app` unchanged.
pub fn with_console(app: Router, server: Arc<DevServer>, console: Arc<Console>) -> Router {
    app.layer(middleware::from_fn_with_state(
        (server, console),
        console_or_api,
    ))
}

async fn console_or_api(
    State((server, console)): State<(Arc<DevServer>, Arc<Console>)>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    if let Some(rest) = path.strip_prefix(LOCAL_PREFIX) {
        return local_endpoint(&server, &console, req.method(), rest);
    }
    let is_read = req.method() == Method::GET || req.method() == Method::HEAD;
    if is_read && !server.has_route(req.method().as_str(), &path) {
        if path == "/config.json" {
            let mut response = json_answer(
                StatusCode::OK,
                serde_json::from_str(LOCAL_CONFIG).unwrap_or_default(),
            );
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            return with_security_headers(response, &console);
        }
        if let Some(dir) = &console.dir {
            return with_security_headers(static_file(dir, &path).await, &console);
        }
    }
    next.run(req).await
}

/// `response` with the console's security headers, as CloudFront's response headers policy
/// adds them to every file (404s included).
fn with_security_headers(mut response: Response, console: &Console) -> Response {
    for (name, value) in &console.security_headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert(*name, value);
        }
    }
    response
}

/// `GET /local/users`: the stand-in users; `POST /local/users/{sub}/token`: a stand-in JWT
/// for one of them, what Cognito's sign-in would hand the console.
fn local_endpoint(server: &DevServer, console: &Console, method: &Method, rest: &str) -> Response {
    let parts: Vec<&str> = rest.split('/').collect();
    match (method, parts.as_slice()) {
        (&Method::GET, ["users"]) => {
            let users: Vec<Value> = console
                .users
                .iter()
                .map(|u| json!({ "userId": u.sub, "name": u.name, "admin": u.admin }))
                .collect();
            json_answer(StatusCode::OK, json!({ "users": users }))
        }
        (&Method::POST, ["users", sub, "token"]) => {
            match console.users.iter().find(|u| u.sub == *sub) {
                Some(u) => json_answer(
                    StatusCode::OK,
                    json!({
                        "token": server.authorizer.issue(&u.sub, &u.email, u.admin),
                        "userId": u.sub,
                        "name": u.name,
                        "admin": u.admin,
                    }),
                ),
                None => error(StatusCode::NOT_FOUND, "not_found", "no such stand-in user"),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "no_route", "no such local endpoint"),
    }
}

/// A file of the built console; `/` is `index.html`. Paths that leave `dir` are 404.
async fn static_file(dir: &Path, path: &str) -> Response {
    let relative = match path.trim_start_matches('/') {
        "" => "index.html",
        p => p,
    };
    let relative = Path::new(relative);
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return error(StatusCode::NOT_FOUND, "not_found", "Not Found");
    }
    let file = dir.join(relative);
    let Ok(bytes) = tokio::fs::read(&file).await else {
        return error(StatusCode::NOT_FOUND, "not_found", "Not Found");
    };
    let mut response = Response::new(Body::from(bytes));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&file)),
    );
    // Vite puts a content hash in every asset's name; only index.html must be fetched anew.
    let cache = if file.starts_with(dir.join("assets")) {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

fn content_type(file: &Path) -> &'static str {
    match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

fn json_answer(status: StatusCode, body: Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    json_answer(
        status,
        json!({ "error": { "code": code, "message": message } }),
    )
}
