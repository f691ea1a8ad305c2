//! One function shape for the HTTP functions: an axum [`Router`] with typed extractors, under
//! [`MeteringLayer`], a tower layer that serves it as API Gateway would: the Lambda bootstrap
//! (`lambda_http::run(gateway::app(router))`), the dev server and the tests all call the same
//! Router through it.
//!
//! API Gateway has already routed the request: its route key and decoded path parameters are
//! what the function must act on. The URI lambda_http builds can differ (a stage prefix such
//! as `/prod/me`, `.`/`..` segments normalised away), so the layer routes on the path API
//! Gateway matched, rebuilt from the route key and the path parameters, each percent-encoded
//! so a parameter such as `..` stays one segment (the dot-segment guard); outside API Gateway
//! (no route key) the URI is routed as it is.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::{DefaultBodyLimit, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::Router;
use lambda_http::http::Uri;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde::de::DeserializeOwned;
use tower::{Layer, Service, ServiceExt};

use crate::http::api::{self, ApiError, Caller};
use crate::model::ids::DeviceId;
use crate::observe::emf::{self, RequestFigures};
use crate::observe::served::{serve_observed, Served};
use crate::observe::trace::TraceHeader;
use crate::store::metrics::{RequestMeter, DEPENDENCY_UNREACHABLE};

/// A function's Router as `lambda_http::run` serves it: a route or method the function does
/// not serve is the `no_route` 404 of the error contract, body limits are each route's own
/// (413 in the contract; API Gateway caps payloads before the function), and every request
/// goes through [`MeteringLayer`].
pub fn app(router: Router) -> Metered<Router> {
    let router = router
        .fallback(no_route)
        .method_not_allowed_fallback(no_route)
        .layer(DefaultBodyLimit::disable());
    MeteringLayer.layer(router)
}

/// Metering and tracing of API Gateway requests, as a tower layer over a function's Router:
/// each request is routed on the route key API Gateway matched, its DynamoDB work metered,
/// its X-Ray segment written, and it writes one EMF document ([`crate::observe::emf`]) and logs
/// one JSON line (route, status, latency, DynamoDB requests, attempts and consumed capacity).
/// Nothing from headers or bodies is logged, so tokens never are.
#[derive(Clone, Copy, Debug, Default)]
pub struct MeteringLayer;

impl<S> Layer<S> for MeteringLayer {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Metered<S> {
        Metered { inner }
    }
}

/// A service under [`MeteringLayer`]: takes the Lambda's request, answers the Lambda's response.
#[derive(Clone, Debug)]
pub struct Metered<S> {
    inner: S,
}

impl<S> Metered<S>
where
    S: Service<Request, Response = axum::response::Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    /// One API Gateway request (what [`Service::call`] does, without its `Result`: it never
    /// fails, errors are answers in the contract).
    pub fn handle(&self, req: Request) -> impl Future<Output = Response<Body>> + Send + 'static {
        metered(self.inner.clone(), req)
    }
}

/// [`Metered::handle`]: `req` through `inner`, metered, traced and logged.
async fn metered<S>(inner: S, req: Request) -> Response<Body>
where
    S: Service<Request, Response = axum::response::Response, Error = Infallible> + Send,
    S::Future: Send,
{
    let route = api::route_key(&req);
    let trace = req
        .lambda_context_ref()
        .and_then(|c| c.xray_trace_id.as_deref())
        .and_then(TraceHeader::parse);
    let request_id = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.request_id.clone(),
        _ => None,
    };
    // An id, so a property of the metrics document, never a dimension.
    let device_id = req
        .path_parameters_ref()
        .and_then(|p| p.first("deviceId").map(String::from));
    let meter = RequestMeter::current().unwrap_or_default();
    let work = async move {
        let response = inner
            .oneshot(as_routed(req))
            .await
            .unwrap_or_else(|never| match never {});
        into_lambda_response(response).await
    };
    let Served {
        outcome: response,
        used,
        latency_ms,
        ..
    } = serve_observed(meter, trace.as_ref(), &route, work, |r| r.status().as_u16()).await;
    emf::emit(&emf::request_document(
        &RequestFigures {
            route: &route,
            status: response.status().as_u16(),
            latency_ms,
            used: &used,
            request_id: request_id.as_deref(),
            device_id: device_id.as_deref(),
            trace_id: trace.as_ref().map(|t| t.root.as_str()),
        },
        emf::take_cold_start(),
    ));
    tracing::info!(
        route = %route,
        status = response.status().as_u16(),
        latency_ms,
        ddb_requests = used.requests(),
        ddb_attempts = used.attempts,
        rcu = used.read_units,
        wcu = used.write_units,
        request_id = request_id.as_deref().unwrap_or(""),
        // Only on a request that gave up because DynamoDB could not be reached.
        dependency_unreachable = used
            .figures
            .contains_key(DEPENDENCY_UNREACHABLE)
            .then_some(true),
        "request"
    );
    response
}

impl<S> Service<Request> for Metered<S>
where
    S: Service<Request, Response = axum::response::Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The inner service is cloned per request (a Router is always ready).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let response = self.handle(req);
        Box::pin(async move { Ok(response.await) })
    }
}

async fn no_route(req: axum::extract::Request) -> ApiError {
    ApiError::no_route(&api::route_key(&req))
}

/// `req` with the path API Gateway matched: the route key's template with each `{name}` the
/// percent-encoded path parameter (a parameter API Gateway did not send stays as written).
fn as_routed(mut req: Request) -> Request {
    let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() else {
        return req;
    };
    let Some((_, template)) = ctx.route_key.as_deref().and_then(|k| k.split_once(' ')) else {
        return req;
    };
    let params = req.path_parameters();
    let path: Vec<String> = template
        .split('/')
        .map(|segment| {
            let name = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}'));
            match name.and_then(|n| params.first(n.trim_end_matches('+'))) {
                Some(value) => utf8_percent_encode(value, NON_ALPHANUMERIC).to_string(),
                None => segment.to_string(),
            }
        })
        .collect();
    let mut path_and_query = path.join("/");
    if let Some(query) = req.uri().query() {
        path_and_query.push('?');
        path_and_query.push_str(query);
    }
    if let Ok(uri) = path_and_query.parse::<Uri>() {
        *req.uri_mut() = uri;
    }
    req
}

/// The Router's answer as the Lambda returns it: JSON and other text as text, nothing as an
/// empty body.
async fn into_lambda_response(response: axum::response::Response) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let body = if bytes.is_empty() {
        Body::Empty
    } else {
        match String::from_utf8(bytes.to_vec()) {
            Ok(text) => Body::Text(text),
            Err(_) => Body::Binary(bytes.to_vec()),
        }
    };
    Response::from_parts(parts, body)
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Caller::from_context(parts.extensions.get::<RequestContext>())
    }
}

/// A caller in the admin group: 401 without a caller, 403 outside the group.
#[derive(Clone, Debug)]
pub struct Operator(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if !caller.is_admin() {
            return Err(ApiError::forbidden("operator routes need the admin group"));
        }
        Ok(Self(caller))
    }
}

/// The path parameters as `T` (axum's `Path`); a path that does not fit is the project's 400,
/// never axum's plain-text rejection.
#[derive(Clone, Debug)]
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|rejection| ApiError::invalid("path", rejection.body_text()))
    }
}

/// The `{deviceId}` of a device route, validated: a malformed id is the project's 400 naming
/// `deviceId`, before any DynamoDB request.
#[derive(Clone, Debug)]
pub struct DeviceIdPath(pub DeviceId);

#[derive(serde::Deserialize)]
struct DeviceIdSegment {
    #[serde(rename = "deviceId")]
    device_id: String,
}

impl<S: Send + Sync> FromRequestParts<S> for DeviceIdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let PathParams(segment) =
            PathParams::<DeviceIdSegment>::from_request_parts(parts, state).await?;
        Ok(Self(DeviceId::parse(segment.device_id)?))
    }
}

/// The query string as `T`, first value of a repeated name winning (as lambda_http's
/// `QueryMap::first`); names `T` does not know are ignored. A query that does not fit is the
/// project's 400.
#[derive(Clone, Debug)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let mut first = serde_json::Map::new();
        for (name, value) in form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes()) {
            first
                .entry(name.into_owned())
                .or_insert_with(|| value.into_owned().into());
        }
        serde_json::from_value(first.into())
            .map(Self)
            .map_err(|err| ApiError::invalid("query", err.to_string()))
    }
}
