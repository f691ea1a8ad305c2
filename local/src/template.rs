//! Reads `template.yaml`: the table definition (so DynamoDB Local gets exactly the schema that
//! deploys) and the HTTP API routes of every function (so the dev server serves exactly the
//! routes API Gateway will).

use std::path::{Path, PathBuf};

use yaml_serde::{Mapping, Value};

/// A failure to read or understand the template.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The template path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The YAML is malformed.
    #[error("template.yaml is not valid YAML: {0}")]
    Yaml(#[from] yaml_serde::Error),
    /// The YAML lacks something the local stack needs.
    #[error("template.yaml: {0}")]
    Shape(String),
}

fn shape(msg: impl Into<String>) -> TemplateError {
    TemplateError::Shape(msg.into())
}

/// A key attribute of the table or an index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyElement {
    /// Attribute name.
    pub attribute: String,
    /// `HASH` or `RANGE`.
    pub key_type: String,
}

/// A global secondary index as declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDefinition {
    /// Index name.
    pub name: String,
    /// Key schema.
    pub key_schema: Vec<KeyElement>,
    /// `ALL`, `KEYS_ONLY` or `INCLUDE`.
    pub projection_type: String,
    /// Projected non-key attributes (INCLUDE).
    pub non_key_attributes: Vec<String>,
}

/// The `AWS::DynamoDB::Table` resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDefinition {
    /// Logical id in the template.
    pub logical_id: String,
    /// `(name, type)` of every declared attribute.
    pub attributes: Vec<(String, String)>,
    /// Base table key schema.
    pub key_schema: Vec<KeyElement>,
    /// Global secondary indexes.
    pub indexes: Vec<IndexDefinition>,
    /// TTL attribute, when TTL is enabled.
    pub ttl_attribute: Option<String>,
    /// `PAY_PER_REQUEST` or `PROVISIONED`.
    pub billing_mode: String,
}

/// One HttpApi route of one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRoute {
    /// Function logical id (`DeviceUpdatesFunction`).
    pub function: String,
    /// The function's `CodeUri` (`functions/device-updates`).
    pub code_uri: String,
    /// Upper-case method, or `ANY`.
    pub method: String,
    /// Path template (`/me/devices/{deviceId}`).
    pub path: String,
    /// Whether the API's default JWT authorizer applies (not `Authorizer: NONE`).
    pub authorized: bool,
}

impl HttpRoute {
    /// API Gateway's route key: `PATCH /me/devices/{deviceId}`.
    pub fn route_key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// The parts of `template.yaml` the local stack uses.
#[derive(Clone, Debug)]
pub struct Template {
    /// The table.
    pub table: TableDefinition,
    /// Every HttpApi route, in template order.
    pub routes: Vec<HttpRoute>,
    /// Every function: logical id -> `CodeUri`.
    pub functions: std::collections::BTreeMap<String, String>,
}

/// `template.yaml` at the repository root.
pub fn default_template_path() -> PathBuf {
    crate::repo_root().join("template.yaml")
}

impl Template {
    /// Reads and interprets the template at `path`.
    pub fn load(path: &Path) -> Result<Self, TemplateError> {
        let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Interprets template text.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let doc: Value = yaml_serde::from_str(text)?;
        let resources = doc
            .get("Resources")
            .and_then(Value::as_mapping)
            .ok_or_else(|| shape("no Resources"))?;
        let mut tables = Vec::new();
        let mut routes = Vec::new();
        let mut functions = std::collections::BTreeMap::new();
        for (id, resource) in resources {
            let id = id
                .as_str()
                .ok_or_else(|| shape("resource id is not a string"))?;
            match resource.get("Type").and_then(Value::as_str) {
                Some("AWS::DynamoDB::Table") => tables.push(table_definition(id, resource)?),
                Some("AWS::Serverless::Function") => {
                    let code_uri = resource
                        .get("Properties")
                        .and_then(|p| p.get("CodeUri"))
                        .and_then(Value::as_str)
                        .ok_or_else(|| shape(format!("{id}: CodeUri must be a literal path")))?;
                    functions.insert(id.to_string(), code_uri.trim_end_matches('/').to_string());
                    routes.extend(function_routes(id, resource)?);
                }
                _ => {}
            }
        }
        let table = match tables.len() {
            1 => tables.remove(0),
            n => {
                return Err(shape(format!(
                    "expected one AWS::DynamoDB::Table, found {n}"
                )))
            }
        };
        Ok(Self {
            table,
            routes,
            functions,
        })
    }
}

fn literal<'a>(value: &'a Value, what: &str) -> Result<&'a str, TemplateError> {
    value
        .as_str()
        .ok_or_else(|| shape(format!("{what} must be a literal string")))
}

fn key_schema(value: Option<&Value>, owner: &str) -> Result<Vec<KeyElement>, TemplateError> {
    value
        .and_then(Value::as_sequence)
        .ok_or_else(|| shape(format!("{owner}: KeySchema missing")))?
        .iter()
        .map(|k| {
            Ok(KeyElement {
                attribute: literal(
                    k.get("AttributeName").unwrap_or(&Value::Null),
                    "AttributeName",
                )?
                .to_string(),
                key_type: literal(k.get("KeyType").unwrap_or(&Value::Null), "KeyType")?.to_string(),
            })
        })
        .collect()
}

fn table_definition(id: &str, resource: &Value) -> Result<TableDefinition, TemplateError> {
    let props = resource
        .get("Properties")
        .ok_or_else(|| shape(format!("{id}: no Properties")))?;
    let attributes = props
        .get("AttributeDefinitions")
        .and_then(Value::as_sequence)
        .ok_or_else(|| shape(format!("{id}: AttributeDefinitions missing")))?
        .iter()
        .map(|a| {
            Ok((
                literal(
                    a.get("AttributeName").unwrap_or(&Value::Null),
                    "AttributeName",
                )?
                .to_string(),
                literal(
                    a.get("AttributeType").unwrap_or(&Value::Null),
                    "AttributeType",
                )?
                .to_string(),
            ))
        })
        .collect::<Result<Vec<_>, TemplateError>>()?;
    let indexes = props
        .get("GlobalSecondaryIndexes")
        .and_then(Value::as_sequence)
        .map(|list| {
            list.iter()
                .map(|gsi| {
                    let name = literal(gsi.get("IndexName").unwrap_or(&Value::Null), "IndexName")?
                        .to_string();
                    let projection = gsi.get("Projection");
                    Ok(IndexDefinition {
                        key_schema: key_schema(gsi.get("KeySchema"), &name)?,
                        projection_type: projection
                            .and_then(|p| p.get("ProjectionType"))
                            .and_then(Value::as_str)
                            .unwrap_or("ALL")
                            .to_string(),
                        non_key_attributes: projection
                            .and_then(|p| p.get("NonKeyAttributes"))
                            .and_then(Value::as_sequence)
                            .map(|attrs| {
                                attrs
                                    .iter()
                                    .map(|a| literal(a, "NonKeyAttributes").map(str::to_string))
                                    .collect::<Result<Vec<_>, _>>()
                            })
                            .transpose()?
                            .unwrap_or_default(),
                        name,
                    })
                })
                .collect::<Result<Vec<_>, TemplateError>>()
        })
        .transpose()?
        .unwrap_or_default();
    let ttl = props.get("TimeToLiveSpecification");
    let ttl_enabled = ttl
        .and_then(|t| t.get("Enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(TableDefinition {
        logical_id: id.to_string(),
        attributes,
        key_schema: key_schema(props.get("KeySchema"), id)?,
        indexes,
        ttl_attribute: ttl_enabled
            .then(|| {
                ttl.and_then(|t| t.get("AttributeName"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .flatten(),
        billing_mode: props
            .get("BillingMode")
            .and_then(Value::as_str)
            .unwrap_or("PROVISIONED")
            .to_string(),
    })
}

fn function_routes(id: &str, resource: &Value) -> Result<Vec<HttpRoute>, TemplateError> {
    let props = resource
        .get("Properties")
        .ok_or_else(|| shape(format!("{id}: no Properties")))?;
    let code_uri = props
        .get("CodeUri")
        .and_then(Value::as_str)
        .ok_or_else(|| shape(format!("{id}: CodeUri must be a literal path")))?
        .trim_end_matches('/')
        .to_string();
    let empty = Mapping::new();
    let events = props
        .get("Events")
        .and_then(Value::as_mapping)
        .unwrap_or(&empty);
    let mut routes = Vec::new();
    for (name, event) in events {
        if event.get("Type").and_then(Value::as_str) != Some("HttpApi") {
            continue;
        }
        let name = name.as_str().unwrap_or("?");
        let p = event
            .get("Properties")
            .ok_or_else(|| shape(format!("{id}.{name}: no Properties")))?;
        let authorizer = p
            .get("Auth")
            .and_then(|a| a.get("Authorizer"))
            .and_then(Value::as_str);
        routes.push(HttpRoute {
            function: id.to_string(),
            code_uri: code_uri.clone(),
            method: literal(p.get("Method").unwrap_or(&Value::Null), "Method")?
                .to_ascii_uppercase(),
            path: literal(p.get("Path").unwrap_or(&Value::Null), "Path")?.to_string(),
            authorized: authorizer != Some("NONE"),
        });
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions: [{AttributeName: PK, AttributeType: S}]
      KeySchema: [{AttributeName: PK, KeyType: HASH}]
      DeletionProtectionEnabled: !If [On, true, false]
      TimeToLiveSpecification: {AttributeName: ttl, Enabled: true}
      BillingMode: PAY_PER_REQUEST
  F:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/f/
      Events:
        Open: {Type: HttpApi, Properties: {ApiId: !Ref Api, Path: /open, Method: post, Auth: {Authorizer: NONE}}}
        Closed: {Type: HttpApi, Properties: {ApiId: !Ref Api, Path: "/x/{id}", Method: GET}}
        Tick: {Type: Schedule, Properties: {Schedule: rate(1 day)}}
"#;

    #[test]
    fn reads_table_and_routes_through_intrinsic_tags() {
        let t = Template::parse(SAMPLE).unwrap();
        assert_eq!(t.table.logical_id, "T");
        assert_eq!(t.table.ttl_attribute.as_deref(), Some("ttl"));
        assert_eq!(t.table.billing_mode, "PAY_PER_REQUEST");
        assert_eq!(t.routes.len(), 2);
        assert_eq!(t.routes[0].route_key(), "POST /open");
        assert!(!t.routes[0].authorized);
        assert_eq!(t.routes[1].route_key(), "GET /x/{id}");
        assert!(t.routes[1].authorized);
        assert_eq!(t.routes[1].code_uri, "functions/f");
    }

    #[test]
    fn rejects_a_template_without_exactly_one_table() {
        let err = Template::parse("Resources: {}").unwrap_err();
        assert!(err.to_string().contains("found 0"));
    }
}
