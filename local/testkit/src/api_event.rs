//! API Gateway HTTP API (payload 2.0) events for the benchmark's requests: what API Gateway
//! would hand the function after its JWT authorizer admitted the caller.

use serde_json::{json, Map, Value};

/// One request, built up and rendered as the event JSON.
#[derive(Clone, Debug)]
pub struct ApiEvent {
    route_key: &'static str,
    path: String,
    path_parameters: Map<String, Value>,
    query: Vec<(String, String)>,
    headers: Map<String, Value>,
    claims: Option<Value>,
    body: Option<String>,
}

impl ApiEvent {
    /// A request for `route_key` (`GET /me/devices/{deviceId}`) at the concrete `path`.
    pub fn new(route_key: &'static str, path: impl Into<String>) -> Self {
        let mut headers = Map::new();
        headers.insert("content-type".into(), json!("application/json"));
        Self {
            route_key,
            path: path.into(),
            path_parameters: Map::new(),
            query: Vec::new(),
            headers,
            claims: None,
            body: None,
        }
    }

    /// Signed in as `sub` (the authorizer's claims of a Cognito ID token).
    pub fn caller(mut self, sub: &str) -> Self {
        self.claims = Some(json!({
            "sub": sub,
            "email": format!("{sub}@example.com"),
            "token_use": "id",
        }));
        self
    }

    /// Signed in as `sub`, a member of the `admin` group (as API Gateway flattens the claim).
    pub fn operator(self, sub: &str) -> Self {
        let mut event = self.caller(sub);
        if let Some(claims) = event.claims.as_mut() {
            claims["cognito:groups"] = json!("[admin]");
        }
        event
    }

    /// A path parameter.
    pub fn param(mut self, name: &str, value: &str) -> Self {
        self.path_parameters.insert(name.into(), json!(value));
        self
    }

    /// A query string parameter.
    pub fn query(mut self, name: &str, value: &str) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }

    /// A header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .insert(name.to_ascii_lowercase(), json!(value.to_string()));
        self
    }

    /// A JSON body.
    pub fn json(mut self, body: &Value) -> Self {
        self.body = Some(body.to_string());
        self
    }

    /// The event JSON, as bytes for the Runtime API.
    pub fn to_bytes(&self) -> Vec<u8> {
        let method = self.route_key.split(' ').next().unwrap_or("GET");
        let raw_query = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&self.query)
            .finish();
        let mut context = json!({
            "accountId": "123456789012",
            "apiId": "bench",
            "http": {"method": method, "path": self.path, "protocol": "HTTP/1.1",
                     "sourceIp": "127.0.0.1", "userAgent": "fleet-perf bench"},
            "requestId": "bench",
            "routeKey": self.route_key,
            "stage": "$default",
            "time": "",
            "timeEpoch": 0
        });
        if let Some(claims) = &self.claims {
            context["authorizer"] = json!({"jwt": {"claims": claims, "scopes": null}});
        }
        let mut event = json!({
            "version": "2.0",
            "routeKey": self.route_key,
            "rawPath": self.path,
            "rawQueryString": raw_query,
            "headers": self.headers,
            "requestContext": context,
            "isBase64Encoded": false
        });
        if !self.query.is_empty() {
            let query: Map<String, Value> = self
                .query
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            event["queryStringParameters"] = Value::Object(query);
        }
        if !self.path_parameters.is_empty() {
            event["pathParameters"] = Value::Object(self.path_parameters.clone());
        }
        if let Some(body) = &self.body {
            event["body"] = json!(body);
        }
        event.to_string().into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use lambda_http::RequestExt;

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
}
