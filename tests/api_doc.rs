//! `docs/openapi.yaml`, read once: its operations, and validators for request and response
//! bodies (an OpenAPI 3.1 schema is a JSON Schema 2020-12 schema).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};

/// The HTTP methods an OpenAPI path item may hold that this API uses.
pub const METHODS: [&str; 5] = ["get", "put", "post", "patch", "delete"];

/// The parsed document with a cache of compiled validators.
pub struct ApiDoc {
    /// The document as JSON.
    pub doc: Value,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

/// One operation: a method on a path.
#[derive(Clone, Copy)]
pub struct Operation<'a> {
    /// Upper-case method.
    pub method: &'a str,
    /// Path template (`/me/devices/{deviceId}`).
    pub path: &'a str,
    /// The path item (for path-level parameters).
    pub path_item: &'a Value,
    /// The operation object.
    pub spec: &'a Value,
}

impl Operation<'_> {
    /// API Gateway's route key for this operation.
    pub fn route_key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// `docs/openapi.yaml`, parsed once.
pub fn api_doc() -> &'static ApiDoc {
    static DOC: OnceLock<ApiDoc> = OnceLock::new();
    DOC.get_or_init(|| {
        let path = fleet_testkit::repo_root().join("docs/openapi.yaml");
        let text = std::fs::read_to_string(&path).expect("docs/openapi.yaml");
        let doc: Value = yaml_serde::from_str(&text).expect("docs/openapi.yaml is YAML");
        ApiDoc {
            doc,
            validators: Mutex::new(HashMap::new()),
        }
    })
}

fn upper(method: &str) -> &'static str {
    match method {
        "get" => "GET",
        "put" => "PUT",
        "post" => "POST",
        "patch" => "PATCH",
        _ => "DELETE",
    }
}

impl ApiDoc {
    /// Every operation, in document order.
    pub fn operations(&self) -> Vec<Operation<'_>> {
        let mut ops = Vec::new();
        for (path, item) in self.doc["paths"].as_object().expect("paths") {
            for method in METHODS {
                if let Some(spec) = item.get(method) {
                    ops.push(Operation {
                        method: upper(method),
                        path,
                        path_item: item,
                        spec,
                    });
                }
            }
        }
        ops
    }

    /// The operation for a route key (`GET /me/devices/{deviceId}`).
    pub fn operation(&self, route_key: &str) -> Option<Operation<'_>> {
        self.operations()
            .into_iter()
            .find(|op| op.route_key() == route_key)
    }

    /// `value`, with `$ref`s to this document followed.
    pub fn resolve<'a>(&'a self, mut value: &'a Value) -> &'a Value {
        while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
            let pointer = reference.strip_prefix('#').expect("local $ref");
            value = self
                .doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("dangling $ref {reference}"));
        }
        value
    }

    /// `components.schemas.<name>`.
    pub fn schema(&self, name: &str) -> &Value {
        &self.doc["components"]["schemas"][name]
    }

    /// The parameters of `op` (path-level and its own), resolved.
    pub fn parameters<'a>(&'a self, op: &Operation<'a>) -> Vec<&'a Value> {
        [op.path_item.get("parameters"), op.spec.get("parameters")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .map(|p| self.resolve(p))
            .collect()
    }

    /// The parameter `name` in `location` (`path`, `query`, `header`) of `op`.
    pub fn parameter<'a>(
        &'a self,
        op: &Operation<'a>,
        location: &str,
        name: &str,
    ) -> Option<&'a Value> {
        self.parameters(op)
            .into_iter()
            .find(|p| p["in"] == location && p["name"] == name)
    }

    /// The security requirements in force for `op` (its own, else the document's).
    pub fn security<'a>(&'a self, op: &Operation<'a>) -> &'a Value {
        op.spec.get("security").unwrap_or(&self.doc["security"])
    }

    /// The JSON request body schema of `route_key`, if it takes a body.
    pub fn request_schema(&self, route_key: &str) -> Option<&Value> {
        let op = self.operation(route_key)?;
        op.spec
            .get("requestBody")
            .map(|b| &b["content"]["application/json"]["schema"])
    }

    /// Whether `route_key`'s request body may be left out (`requestBody.required: false`).
    pub fn request_body_optional(&self, route_key: &str) -> bool {
        self.operation(route_key)
            .is_some_and(|op| op.spec["requestBody"]["required"] == false)
    }

    /// The documented body limit of `route_key` (`x-max-body-bytes`).
    pub fn max_body_bytes(&self, route_key: &str) -> Option<usize> {
        let op = self.operation(route_key)?;
        op.spec["requestBody"]["x-max-body-bytes"]
            .as_u64()
            .map(|n| n as usize)
    }

    /// Validates `instance` against `schema` (which may `$ref` this document's components).
    pub fn validate(&self, schema: &Value, instance: &Value) -> Result<(), String> {
        let key = schema.to_string();
        let validator = {
            let mut cache = self.validators.lock().expect("validator cache");
            cache
                .entry(key)
                .or_insert_with(|| {
                    let root = json!({
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "components": self.doc["components"],
                        "allOf": [schema],
                    });
                    Arc::new(
                        jsonschema::options()
                            .with_draft(jsonschema::Draft::Draft202012)
                            .should_validate_formats(true)
                            .build(&root)
                            .unwrap_or_else(|e| panic!("bad schema {schema}: {e}")),
                    )
                })
                .clone()
        };
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Checks that `status` is documented for `route_key` and that `body` (Null for none) is
    /// what the document says that answer carries.
    pub fn check_response(&self, route_key: &str, status: u16, body: &Value) -> Result<(), String> {
        let op = self
            .operation(route_key)
            .ok_or_else(|| format!("{route_key} is not in docs/openapi.yaml"))?;
        self.check_answer(&op.spec["responses"], route_key, status, body)
    }

    /// Checks an answer to a method and path that match no route against the document's
    /// `x-unmatched-route` responses (API Gateway's own 404).
    pub fn check_unmatched_route(&self, status: u16, body: &Value) -> Result<(), String> {
        self.check_answer(
            &self.doc["x-unmatched-route"],
            "unmatched route",
            status,
            body,
        )
    }

    fn check_answer(
        &self,
        responses: &Value,
        route_key: &str,
        status: u16,
        body: &Value,
    ) -> Result<(), String> {
        let response = responses
            .get(status.to_string())
            .map(|r| self.resolve(r))
            .ok_or_else(|| format!("{route_key}: status {status} is not documented"))?;
        match response.get("content") {
            None if body.is_null() => Ok(()),
            None => Err(format!(
                "{route_key} {status}: documented without a body, got {body}"
            )),
            Some(content) => self
                .validate(&content["application/json"]["schema"], body)
                .map_err(|e| format!("{route_key} {status}: {e}; body {body}")),
        }
    }
}
