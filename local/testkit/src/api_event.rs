//! API Gateway HTTP API (payload 2.0) events, built as `aws_lambda_events`'
//! [`ApiGatewayV2httpRequest`]: what API Gateway would hand a function after its JWT
//! authorizer admitted the caller. The one event builder: the dev server turns each HTTP
//! request into one, the tests' `ApiRequest` is built on it, the benchmark sends them to the
//! release bootstraps (and the Python peer) as bytes, and the throughput and fault runs hand
//! them to the handlers in-process as a [`lambda_http::Request`].

use std::collections::HashMap;

use aws_lambda_events::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
    ApiGatewayV2httpRequest, ApiGatewayV2httpRequestContext,
    ApiGatewayV2httpRequestContextHttpDescription,
};
use aws_lambda_events::http::{HeaderName, HeaderValue, Method};
use aws_lambda_events::query_map::QueryMap;
use serde_json::Value;

/// One request, built up and rendered as the event.
#[derive(Clone, Debug)]
pub struct ApiEvent {
    route_key: String,
    path: String,
    path_parameters: HashMap<String, String>,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    claims: Option<HashMap<String, String>>,
    body: Option<String>,
    body_is_base64: bool,
    raw_query: Option<String>,
    source_ip: String,
    request_id: String,
    time_epoch_millis: i64,
}

impl ApiEvent {
    /// A request for `route_key` (`GET /me/devices/{deviceId}`) at the concrete `path`.
    pub fn new(route_key: impl Into<String>, path: impl Into<String>) -> Self {
        Self {
            route_key: route_key.into(),
            path: path.into(),
            path_parameters: HashMap::new(),
            query: Vec::new(),
            headers: vec![("content-type".into(), "application/json".into())],
            claims: None,
            body: None,
            body_is_base64: false,
            raw_query: None,
            source_ip: "127.0.0.1".into(),
            request_id: "local".into(),
            time_epoch_millis: 0,
        }
    }

    /// Signed in as `sub` (the authorizer's claims of a Cognito ID token).
    pub fn caller(mut self, sub: &str) -> Self {
        self.claims = Some(HashMap::from([
            ("sub".to_string(), sub.to_string()),
            ("email".to_string(), format!("{sub}@example.com")),
            ("email_verified".to_string(), "true".to_string()),
            (
                "iss".to_string(),
                "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example".to_string(),
            ),
            ("aud".to_string(), "example-client".to_string()),
            ("token_use".to_string(), "id".to_string()),
            ("iat".to_string(), "1712743200".to_string()),
            ("exp".to_string(), "1712746800".to_string()),
        ]));
        self
    }

    /// Signed in with exactly these authorizer claims (as a JWT authorizer passes them).
    pub fn claims(mut self, claims: HashMap<String, String>) -> Self {
        self.claims = Some(claims);
        self
    }

    /// One more claim, after [`ApiEvent::caller`] or [`ApiEvent::operator`].
    pub fn claim(mut self, name: &str, value: &str) -> Self {
        self.claims
            .get_or_insert_with(HashMap::new)
            .insert(name.into(), value.into());
        self
    }

    /// Signed in as `sub`, a member of the `admin` group (as API Gateway flattens the claim).
    pub fn operator(self, sub: &str) -> Self {
        let mut event = self.caller(sub);
        if let Some(claims) = event.claims.as_mut() {
            claims.insert("cognito:groups".into(), "[admin]".into());
        }
        event
    }

    /// A device's own request: its token as the bearer (ingest has no JWT authorizer).
    pub fn device_token(self, token: &str) -> Self {
        self.header("authorization", &format!("Bearer {token}"))
    }

    /// A path parameter.
    pub fn param(mut self, name: &str, value: &str) -> Self {
        self.path_parameters.insert(name.into(), value.into());
        self
    }

    /// A query string parameter (replacing one of that name).
    pub fn query(mut self, name: &str, value: &str) -> Self {
        self.query.retain(|(n, _)| n != name);
        self.query.push((name.into(), value.into()));
        self.raw_query = None;
        self
    }

    /// A header (names are lower-cased, as API Gateway sends them), replacing one of that name.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.to_string()));
        self
    }

    /// One more value of a header (a repeated header, joined with commas in the event).
    pub fn append_header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_string()));
        self
    }

    /// Without the header `name` (e.g. no `content-type`).
    pub fn without_header(mut self, name: &str) -> Self {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != name);
        self
    }

    /// Without any header (the dev server passes on the client's own).
    pub fn without_headers(mut self) -> Self {
        self.headers.clear();
        self
    }

    /// A JSON body.
    pub fn json(mut self, body: &Value) -> Self {
        self.body = Some(body.to_string());
        self
    }

    /// A text body, as it is.
    pub fn body(mut self, body: &str) -> Self {
        self.body = Some(body.to_string());
        self.body_is_base64 = false;
        self
    }

    /// A body of any bytes: as text when it is UTF-8, else base64-encoded as API Gateway sends
    /// binary payloads. Empty: no body.
    pub fn bytes(mut self, bytes: &[u8]) -> Self {
        use base64::Engine as _;
        match std::str::from_utf8(bytes) {
            _ if bytes.is_empty() => self.body = None,
            Ok(text) => return self.body(text),
            Err(_) => {
                self.body = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
                self.body_is_base64 = true;
            }
        }
        self
    }

    /// A binary body, base64-encoded as API Gateway sends non-text payloads.
    pub fn binary_body(mut self, bytes: &[u8]) -> Self {
        use base64::Engine as _;
        self.body = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        self.body_is_base64 = true;
        self
    }

    /// The query string exactly as the client sent it (its parameters are parsed from it).
    pub fn raw_query(mut self, raw: &str) -> Self {
        self.query = form_urlencoded::parse(raw.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        self.raw_query = Some(raw.to_string());
        self
    }

    /// The client's address, the request id and the time API Gateway received the request.
    pub fn received(mut self, source_ip: &str, request_id: &str, epoch_millis: i64) -> Self {
        self.source_ip = source_ip.to_string();
        self.request_id = request_id.to_string();
        self.time_epoch_millis = epoch_millis;
        self
    }

    /// The typed event.
    pub fn event(&self) -> ApiGatewayV2httpRequest {
        let method = self.route_key.split(' ').next().unwrap_or("GET");
        let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
        http.method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
        http.path = Some(self.path.clone());
        http.protocol = Some("HTTP/1.1".into());
        http.source_ip = Some(self.source_ip.clone());
        http.user_agent = self
            .headers
            .iter()
            .find(|(n, _)| n == "user-agent")
            .map_or_else(|| Some("fleet-testkit".into()), |(_, v)| Some(v.clone()));
        let mut context = ApiGatewayV2httpRequestContext::default();
        context.route_key = Some(self.route_key.clone());
        context.account_id = Some("123456789012".into());
        context.apiid = Some("local".into());
        context.stage = Some("$default".into());
        context.request_id = Some(self.request_id.clone());
        context.time = Some(String::new());
        context.time_epoch = self.time_epoch_millis;
        context.http = http;
        if let Some(claims) = &self.claims {
            let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
            jwt.claims = claims.clone();
            let mut authorizer = ApiGatewayRequestAuthorizer::default();
            authorizer.jwt = Some(jwt);
            context.authorizer = Some(authorizer);
        }
        let mut event = ApiGatewayV2httpRequest::default();
        event.version = Some("2.0".into());
        event.route_key = Some(self.route_key.clone());
        event.raw_path = Some(self.path.clone());
        event.raw_query_string = Some(self.raw_query.clone().unwrap_or_else(|| {
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&self.query)
                .finish()
        }));
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                // API Gateway joins a repeated header with commas.
                let joined = match event.headers.get(&name).and_then(|v| v.to_str().ok()) {
                    Some(previous) => HeaderValue::from_str(&format!(
                        "{previous},{}",
                        value.to_str().unwrap_or("")
                    ))
                    .unwrap_or(value),
                    None => value,
                };
                event.headers.insert(name, joined);
            }
        }
        let mut query: HashMap<String, Vec<String>> = HashMap::new();
        for (name, value) in &self.query {
            query.entry(name.clone()).or_default().push(value.clone());
        }
        event.query_string_parameters = QueryMap::from(query);
        event.path_parameters = self.path_parameters.clone();
        event.request_context = context;
        event.body = self.body.clone();
        event.is_base64_encoded = self.body_is_base64;
        event
    }

    /// The event as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.event()).expect("an API Gateway event serializes")
    }

    /// The event JSON, as bytes for the Runtime API.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.event()).expect("an API Gateway event serializes")
    }

    /// The request `lambda_http` makes of the event, for a handler called in-process.
    pub fn to_request(&self) -> lambda_http::Request {
        lambda_http::request::from_str(&String::from_utf8_lossy(&self.to_bytes()))
            .expect("lambda_http reads an API Gateway v2 event")
    }
}

#[cfg(test)]
mod tests {
    use lambda_http::RequestExt;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_runtime_reads_route_caller_parameters_headers_and_body() {
        let bytes = ApiEvent::new("PATCH /me/devices/{deviceId}", "/me/devices/thermo-1")
            .operator("ops-1")
            .param("deviceId", "thermo-1")
            .query("from", "2026-11-20T00:00:00.000Z")
            .query("tag", "a b")
            .header("If-Match", "3")
            .json(&json!({"status": "maintenance"}))
            .to_bytes();
        let event: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            event["rawQueryString"],
            "from=2026-11-20T00%3A00%3A00.000Z&tag=a+b"
        );
        let claims = &event["requestContext"]["authorizer"]["jwt"]["claims"];
        assert_eq!(claims["sub"], "ops-1");
        assert_eq!(claims["cognito:groups"], "[admin]");

        let request = lambda_http::request::from_str(std::str::from_utf8(&bytes).unwrap())
            .expect("an API Gateway v2 event");
        assert_eq!(request.method(), "PATCH");
        assert_eq!(request.uri().path(), "/me/devices/thermo-1");
        assert_eq!(
            request
                .path_parameters_ref()
                .and_then(|p| p.first("deviceId")),
            Some("thermo-1")
        );
        let query = request.query_string_parameters_ref().expect("query");
        assert_eq!(query.first("tag"), Some("a b"));
        assert_eq!(request.headers()["if-match"], "3");
        let body: Value = serde_json::from_slice(request.body().as_ref()).unwrap();
        assert_eq!(body, json!({"status": "maintenance"}));
    }

    #[test]
    fn without_a_caller_there_is_no_authorizer_context() {
        let event: Value =
            serde_json::from_slice(&ApiEvent::new("GET /me", "/me").to_bytes()).unwrap();
        assert!(event["requestContext"].get("authorizer").is_none());
        assert!(event.get("queryStringParameters").is_none());
        assert!(event.get("body").is_none());
    }

    #[test]
    fn a_device_request_reaches_the_handler_with_its_token_parameter_and_body() {
        let request = ApiEvent::new("POST /devices/{deviceId}/events", "/devices/d-1/events")
            .param("deviceId", "d-1")
            .device_token("dft_secret")
            .json(&json!({"events": []}))
            .to_request();
        assert_eq!(request.method(), "POST");
        assert_eq!(request.headers()["authorization"], "Bearer dft_secret");
        assert_eq!(
            request
                .path_parameters_ref()
                .and_then(|p| p.first("deviceId")),
            Some("d-1")
        );
        assert!(request.request_context_ref().is_some());
        let body: Value = serde_json::from_slice(request.body().as_ref()).unwrap();
        assert_eq!(body, json!({"events": []}));
    }
}
