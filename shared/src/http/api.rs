//! HTTP plumbing shared by the API functions: the caller from the JWT authorizer's claims,
//! JSON bodies with limits and the error contract.

use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::RequestExt;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::model::error::{FleetError, ValidationError};
use crate::model::ids::UserId;
use crate::store::metrics::{RequestMeter, DEPENDENCY_UNREACHABLE};

/// Largest JSON body the owner routes accept.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// An error answer: `{"error":{"code","message","field"?}}` with its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable message; never internals.
    pub message: String,
    /// The offending request field, for 400s.
    pub field: Option<String>,
    /// Seconds for `Retry-After`, for 429/503.
    pub retry_after: Option<u32>,
    /// The role a 403 `role_required` names.
    pub required_role: Option<&'static str>,
}

impl ApiError {
    /// The same error, telling the client to retry after `seconds` (429, 503).
    fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            required_role: None,
        }
    }

    /// 400 naming `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let mut err = Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("{field}: {}", message.into()),
        );
        err.field = Some(field);
        err
    }

    /// 401: no or unusable credentials.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "authentication required",
        )
    }

    /// 403: authenticated but not allowed.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404 for a missing resource.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    /// 404 for a route this function does not serve.
    pub fn no_route(route: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "no_route",
            format!("no route {route}"),
        )
    }

    /// 413: body over `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body is over {limit} bytes"),
        )
    }

    /// 415: a body declared as something other than JSON.
    pub fn unsupported_media_type() -> Self {
        let mut err = Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as application/json",
        );
        err.field = Some("Content-Type".into());
        err
    }

    /// 428: a conditional update without `If-Match`.
    pub fn precondition_required() -> Self {
        let mut err = Self::new(
            StatusCode::PRECONDITION_REQUIRED,
            "precondition_required",
            "send If-Match with the device version you last read",
        );
        err.field = Some("If-Match".into());
        err
    }

    /// 500; `detail` goes to the log only.
    pub fn internal(detail: &str) -> Self {
        tracing::error!(error = detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }

    /// The JSON response for this error (the contract of docs/openapi.yaml's `Error`).
    fn json(self) -> axum::response::Response {
        #[derive(Serialize)]
        struct Envelope<'a> {
            error: Detail<'a>,
        }
        #[derive(Serialize)]
        struct Detail<'a> {
            code: &'a str,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            field: Option<&'a str>,
            #[serde(rename = "requiredRole", skip_serializing_if = "Option::is_none")]
            required_role: Option<&'a str>,
        }
        let mut response = json_response(
            self.status,
            &Envelope {
                error: Detail {
                    code: self.code,
                    message: &self.message,
                    field: self.field.as_deref(),
                    required_role: self.required_role,
                },
            },
        );
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<ValidationError> for ApiError {
    fn from(err: ValidationError) -> Self {
        Self::invalid(err.field, err.reason)
    }
}

impl From<FleetError> for ApiError {
    fn from(err: FleetError) -> Self {
        match err {
            FleetError::Invalid(v) => v.into(),
            FleetError::Unauthorized => Self::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "unknown device or wrong token",
            ),
            FleetError::NotFound(what) => Self::not_found(what),
            FleetError::DeviceIdTaken(_) => Self::new(
                StatusCode::CONFLICT,
                "device_id_taken",
                "this device id is already registered",
            ),
            FleetError::StaleVersion { .. } | FleetError::StaleRule { .. } => Self::new(
                StatusCode::PRECONDITION_FAILED,
                "version_mismatch",
                err.to_string(),
            ),
            FleetError::Conflict { code, message } => {
                Self::new(StatusCode::CONFLICT, code, message)
            }
            FleetError::Throttled {
                retry_after_seconds,
            } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the service is busy, retry later",
            )
            .retry_after(retry_after_seconds),
            FleetError::Unreachable {
                retry_after_seconds,
            } => {
                RequestMeter::set_figure(DEPENDENCY_UNREACHABLE, 1.0);
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "dependency_unreachable",
                    "the database could not be reached, retry later",
                )
                .retry_after(retry_after_seconds)
            }
            FleetError::RateLimited {
                retry_after_seconds,
            } => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many requests, retry later",
            )
            .retry_after(retry_after_seconds),
            FleetError::StaleDesired { .. } => Self::new(
                StatusCode::PRECONDITION_FAILED,
                "version_mismatch",
                err.to_string(),
            ),
            FleetError::CommandQueueFull { .. } => {
                Self::new(StatusCode::CONFLICT, "command_queue_full", err.to_string())
            }
            FleetError::RoleRequired { needed, .. } => {
                let mut denied = Self::new(StatusCode::FORBIDDEN, "role_required", err.to_string());
                denied.required_role = Some(needed);
                denied
            }
            FleetError::Internal(detail) => Self::internal(&detail),
        }
    }
}

impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        self.json()
    }
}

/// A JSON response.
pub fn json_response<T: Serialize>(status: StatusCode, body: &T) -> axum::response::Response {
    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".to_string());
    let mut response = axum::response::Response::new(axum::body::Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An empty response (204).
pub fn empty_response(status: StatusCode) -> axum::response::Response {
    let mut response = axum::response::Response::new(axum::body::Body::empty());
    *response.status_mut() = status;
    response
}

/// The authenticated user, from the JWT authorizer's claims in the request context. The
/// path never names the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The `sub` claim.
    pub user_id: UserId,
    /// The `email` claim, if present.
    pub email: Option<String>,
    /// The `email_verified` claim is `true`: the issuer checked that the caller receives
    /// mail there (anyone can put any address in an unverified claim).
    pub email_verified: bool,
    /// The `cognito:groups` claim.
    pub groups: Vec<String>,
}

/// The group whose members may call `/admin/...`.
pub const ADMIN_GROUP: &str = "admin";

impl Caller {
    /// The caller named by an API Gateway request context, or 401.
    pub fn from_context(context: Option<&RequestContext>) -> Result<Self, ApiError> {
        let claims = context
            .and_then(RequestContext::authorizer)
            .and_then(|a| a.jwt.as_ref())
            .map(|jwt| &jwt.claims)
            .ok_or_else(ApiError::unauthorized)?;
        let sub = claims.get("sub").ok_or_else(ApiError::unauthorized)?;
        // A sub that cannot be a key part is not a caller we can serve; it is not the
        // client's input, so it is not a 400 either.
        let user_id = UserId::parse(sub.as_str()).map_err(|_| ApiError::unauthorized())?;
        // `org:` names organizations' fleets where fleet items name their owner: a person
        // with such a subject would act as that organization's owner key.
        if user_id.is_org_fleet() {
            return Err(ApiError::unauthorized());
        }
        Ok(Self {
            user_id,
            email: claims.get("email").cloned(),
            // API Gateway passes claims as text: `true`, or `"true"` from some issuers.
            email_verified: claims
                .get("email_verified")
                .is_some_and(|v| v.trim_matches('"').eq_ignore_ascii_case("true")),
            groups: claims
                .get("cognito:groups")
                .map(|g| parse_groups(g))
                .unwrap_or_default(),
        })
    }

    /// The e-mail other people may be shown as the caller's: only a verified one (an
    /// organization's member list shows it to the other members).
    pub fn verified_email(&self) -> Option<String> {
        self.email.clone().filter(|_| self.email_verified)
    }

    /// Whether the caller is in the admin group.
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == ADMIN_GROUP)
    }
}

/// API Gateway HTTP APIs pass array claims flattened to a string: `[a b]`; a JSON array
/// string is accepted too.
fn parse_groups(raw: &str) -> Vec<String> {
    if let Ok(list) = serde_json::from_str::<Vec<String>>(raw) {
        return list;
    }
    raw.trim_matches(|c| c == '[' || c == ']')
        .split([' ', ','])
        .filter(|g| !g.is_empty())
        .map(str::to_string)
        .collect()
}

/// The API Gateway route key (`PATCH /me/devices/{deviceId}`), or method and path when the
/// event carries none.
pub fn route_key<B>(req: &lambda_http::http::Request<B>) -> String {
    if let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() {
        if let Some(route) = &ctx.route_key {
            return route.clone();
        }
    }
    format!("{} {}", req.method(), req.uri().path())
}

/// Whether a `Content-Type` value declares JSON (`application/json`, `application/x+json`,
/// any parameters). A request without the header is taken as JSON: devices and scripts often
/// omit it.
pub fn is_json_media_type(value: &str) -> bool {
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The JSON body as `T`, from a request's headers and body bytes: 415 when declared as
/// another media type, 413 over `max_bytes`, 400 naming the field for malformed or unexpected
/// content (including JSON nested deeper than serde_json's recursion limit of 128).
pub fn parse_json_body<T: DeserializeOwned>(
    headers: &HeaderMap,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<T, ApiError> {
    if let Some(declared) = headers.get(header::CONTENT_TYPE) {
        if !declared.to_str().is_ok_and(is_json_media_type) {
            return Err(ApiError::unsupported_media_type());
        }
    }
    if bytes.len() > max_bytes {
        return Err(ApiError::too_large(max_bytes));
    }
    // Every body is an object; serde would also fill a struct from an array (`["x"]`).
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid("body", "a JSON object is required"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        // "." is the whole document and "?" a position serde could not name.
        let field = if path == "." || path.starts_with('?') {
            "body".to_string()
        } else {
            path
        };
        ApiError::invalid(field, err.into_inner().to_string())
    })?;
    de.end()
        .map_err(|_| ApiError::invalid("body", "trailing characters after the JSON value"))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_claim_in_both_api_gateway_shapes() {
        assert_eq!(parse_groups("[admin ops]"), ["admin", "ops"]);
        assert_eq!(parse_groups("[admin]"), ["admin"]);
        assert_eq!(parse_groups("[\"admin\",\"ops\"]"), ["admin", "ops"]);
        assert!(parse_groups("[]").is_empty());
    }

    #[test]
    fn json_media_types() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.fleet+json",
        ] {
            assert!(is_json_media_type(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonp",
            "",
        ] {
            assert!(!is_json_media_type(bad), "{bad}");
        }
    }

    async fn body_of(response: axum::response::Response) -> Vec<u8> {
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn errors_render_the_contract() {
        use axum::response::IntoResponse;
        let response = ApiError::from(FleetError::Throttled {
            retry_after_seconds: 2,
        })
        .into_response();
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
        let response = ApiError::invalid("deviceId", "must not contain '#'").into_response();
        let body: serde_json::Value = serde_json::from_slice(&body_of(response).await).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {"code": "invalid_request",
                "message": "deviceId: must not contain '#'", "field": "deviceId"}})
        );
        let response = ApiError::from(FleetError::Internal("secret detail".into())).into_response();
        assert_eq!(response.status(), 500);
        assert!(!String::from_utf8_lossy(&body_of(response).await).contains("secret"));
    }
}
