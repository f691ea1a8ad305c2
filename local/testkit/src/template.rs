//! Reads `template.yaml`: the table definition (so DynamoDB Local gets exactly the schema that
//! deploys) and the HTTP API routes of every function (so the dev server serves exactly the
//! routes API Gateway will).

use std::collections::BTreeMap;
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
    /// Every function's deployment settings, by logical id.
    pub function_definitions: BTreeMap<String, FunctionDefinition>,
    /// Every parameter's default value (as a string), by name.
    pub parameter_defaults: BTreeMap<String, String>,
}

/// A value the template gives an environment variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvValue {
    /// A literal.
    Literal(String),
    /// `!Ref` of a template parameter.
    Parameter(String),
    /// `!Ref` of the table: its name.
    TableName,
}

/// One IAM policy statement of a function, resources rendered as `FleetTable` (the table's
/// ARN) or `FleetTable/index/*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyStatement {
    /// `Allow` or `Deny`.
    pub effect: String,
    /// `dynamodb:Query`, ...
    pub actions: Vec<String>,
    /// The resources, rendered as above.
    pub resources: Vec<String>,
}

/// What the template says about one `AWS::Serverless::Function` (Globals applied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionDefinition {
    /// Logical id.
    pub logical_id: String,
    /// `CodeUri`.
    pub code_uri: String,
    /// The Cargo binary `rust-cargolambda` builds (`Metadata.BuildProperties.Binary`).
    pub binary: String,
    /// `MemorySize` in MB.
    pub memory_mb: u32,
    /// `Timeout` in seconds.
    pub timeout_seconds: u32,
    /// Environment variables, Globals first, then the function's own.
    pub environment: BTreeMap<String, EnvValue>,
    /// The inline policy statements.
    pub policy: Vec<PolicyStatement>,
}

impl Template {
    /// The environment of `function` as Lambda would set it: parameters at their defaults
    /// unless `overrides` names them (like `--parameter-overrides`), the table's `!Ref` as
    /// `table_name`.
    pub fn function_environment(
        &self,
        function: &str,
        table_name: &str,
        overrides: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, TemplateError> {
        let definition = self
            .function_definitions
            .get(function)
            .ok_or_else(|| shape(format!("no function {function}")))?;
        definition
            .environment
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    EnvValue::Literal(v) => v.clone(),
                    EnvValue::TableName => table_name.to_string(),
                    EnvValue::Parameter(p) => overrides
                        .get(p)
                        .or_else(|| self.parameter_defaults.get(p))
                        .cloned()
                        .ok_or_else(|| {
                            shape(format!("{function}: {name}: parameter {p} has no default"))
                        })?,
                };
                Ok((name.clone(), value))
            })
            .collect()
    }
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
        let mut function_definitions = BTreeMap::new();
        let globals = doc.get("Globals").and_then(|g| g.get("Function"));
        let table_ids: Vec<&str> = resources
            .iter()
            .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some("AWS::DynamoDB::Table"))
            .filter_map(|(id, _)| id.as_str())
            .collect();
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
                    function_definitions.insert(
                        id.to_string(),
                        function_definition(id, resource, globals, &table_ids)?,
                    );
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
        let parameter_defaults = doc
            .get("Parameters")
            .and_then(Value::as_mapping)
            .map(|params| {
                params
                    .iter()
                    .filter_map(|(name, p)| {
                        Some((name.as_str()?.to_string(), scalar(p.get("Default")?)?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            table,
            routes,
            functions,
            function_definitions,
            parameter_defaults,
        })
    }
}

/// A scalar as a string (numbers and booleans as CloudFormation passes them to Lambda).
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `(tag, value)` of an intrinsic function written with a short-form tag (`!Ref X`).
fn intrinsic(value: &Value) -> Option<(String, &Value)> {
    match value {
        Value::Tagged(tagged) => Some((tagged.tag.to_string(), &tagged.value)),
        _ => None,
    }
}

fn env_value(
    id: &str,
    name: &str,
    value: &Value,
    table_ids: &[&str],
) -> Result<EnvValue, TemplateError> {
    if let Some(literal) = scalar(value) {
        return Ok(EnvValue::Literal(literal));
    }
    match intrinsic(value) {
        Some((tag, Value::String(target))) if tag.trim_start_matches('!') == "Ref" => {
            Ok(if table_ids.contains(&target.as_str()) {
                EnvValue::TableName
            } else {
                EnvValue::Parameter(target.clone())
            })
        }
        _ => Err(shape(format!(
            "{id}: environment variable {name} must be a literal or a !Ref"
        ))),
    }
}

/// A policy resource rendered as `Table` or `Table/index/*`.
fn policy_resource(value: &Value) -> String {
    match intrinsic(value) {
        Some((tag, Value::String(target))) if tag.trim_start_matches('!') == "GetAtt" => {
            target.trim_end_matches(".Arn").to_string()
        }
        Some((tag, Value::String(text))) if tag.trim_start_matches('!') == "Sub" => text
            .replace(".Arn}", "}")
            .replace("${", "")
            .replace('}', ""),
        _ => scalar(value).unwrap_or_else(|| format!("{value:?}")),
    }
}

fn one_or_many(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Sequence(items)) => items.iter().collect(),
        Some(other) => vec![other],
        None => Vec::new(),
    }
}

fn function_definition(
    id: &str,
    resource: &Value,
    globals: Option<&Value>,
    table_ids: &[&str],
) -> Result<FunctionDefinition, TemplateError> {
    let props = resource
        .get("Properties")
        .ok_or_else(|| shape(format!("{id}: no Properties")))?;
    let setting = |name: &str| {
        props
            .get(name)
            .or_else(|| globals.and_then(|g| g.get(name)))
    };
    let number = |name: &str, default: u32| {
        setting(name)
            .and_then(Value::as_u64)
            .map_or(default, |n| n as u32)
    };
    let mut environment = BTreeMap::new();
    for source in [globals, Some(props)].into_iter().flatten() {
        if let Some(vars) = source
            .get("Environment")
            .and_then(|e| e.get("Variables"))
            .and_then(Value::as_mapping)
        {
            for (name, value) in vars {
                let name = name
                    .as_str()
                    .ok_or_else(|| shape(format!("{id}: environment name")))?;
                environment.insert(name.to_string(), env_value(id, name, value, table_ids)?);
            }
        }
    }
    let mut policy = Vec::new();
    for entry in one_or_many(props.get("Policies")) {
        for statement in one_or_many(entry.get("Statement")) {
            policy.push(PolicyStatement {
                effect: statement
                    .get("Effect")
                    .and_then(Value::as_str)
                    .unwrap_or("Allow")
                    .to_string(),
                actions: one_or_many(statement.get("Action"))
                    .into_iter()
                    .filter_map(scalar)
                    .collect(),
                resources: one_or_many(statement.get("Resource"))
                    .into_iter()
                    .map(policy_resource)
                    .collect(),
            });
        }
    }
    let binary = resource
        .get("Metadata")
        .and_then(|m| m.get("BuildProperties"))
        .and_then(|b| b.get("Binary"))
        .and_then(Value::as_str)
        .ok_or_else(|| shape(format!("{id}: Metadata.BuildProperties.Binary missing")))?;
    Ok(FunctionDefinition {
        logical_id: id.to_string(),
        code_uri: literal(props.get("CodeUri").unwrap_or(&Value::Null), "CodeUri")?
            .trim_end_matches('/')
            .to_string(),
        binary: binary.to_string(),
        memory_mb: number("MemorySize", 128),
        timeout_seconds: number("Timeout", 3),
        environment,
        policy,
    })
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
Parameters:
  Days: {Type: Number, Default: 90}
Globals:
  Function:
    MemorySize: 128
    Environment:
      Variables: {TABLE_NAME: !Ref T, RETENTION_DAYS: !Ref Days, RUST_LOG: info}
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
    Metadata: {BuildMethod: rust-cargolambda, BuildProperties: {Binary: f}}
    Properties:
      CodeUri: functions/f/
      Timeout: 900
      Environment:
        Variables: {RUST_LOG: debug}
      Policies:
        - Statement:
            - Effect: Allow
              Action: [dynamodb:Query]
              Resource: [!GetAtt T.Arn, !Sub "${T.Arn}/index/*"]
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
    fn resolves_function_settings_environment_and_policy() {
        let t = Template::parse(SAMPLE).unwrap();
        let f = &t.function_definitions["F"];
        assert_eq!(
            (f.binary.as_str(), f.memory_mb, f.timeout_seconds),
            ("f", 128, 900)
        );
        assert_eq!(f.policy[0].actions, ["dynamodb:Query"]);
        assert_eq!(f.policy[0].resources, ["T", "T/index/*"]);
        let env = t
            .function_environment("F", "my-table", &BTreeMap::new())
            .unwrap();
        assert_eq!(env["TABLE_NAME"], "my-table");
        assert_eq!(env["RETENTION_DAYS"], "90");
        assert_eq!(env["RUST_LOG"], "debug", "the function's own value wins");
        let overridden = t
            .function_environment("F", "t", &BTreeMap::from([("Days".into(), "7".into())]))
            .unwrap();
        assert_eq!(overridden["RETENTION_DAYS"], "7");
    }

    #[test]
    fn rejects_a_template_without_exactly_one_table() {
        let err = Template::parse("Resources: {}").unwrap_err();
        assert!(err.to_string().contains("found 0"));
    }
}
