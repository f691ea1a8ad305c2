//! Reads `template.yaml`: the table definition (so DynamoDB Local gets exactly the schema that
//! deploys) and the HTTP API routes of every function (so the dev server serves exactly the
//! routes API Gateway will).
//!
//! The YAML is read into typed structs mirroring the template (`Raw*`), with one
//! deserializer for CloudFormation values and their intrinsic functions ([`CfnValue`]), then
//! interpreted into what the local stack uses.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use yaml_serde::Value;

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
    /// The stream's view type (`NEW_AND_OLD_IMAGES`), when the table has a stream.
    pub stream_view_type: Option<String>,
}

impl TableDefinition {
    /// The same table without its stream. DynamoDB Local looks up a table's stream on every
    /// write, over all the stream records of every table it holds, so a test process that
    /// creates hundreds of streamed tables slows to a crawl; only tests that read the stream
    /// need one.
    pub fn without_stream(&self) -> Self {
        Self {
            stream_view_type: None,
            ..self.clone()
        }
    }
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
    /// The web console's security headers (its `AWS::CloudFront::ResponseHeadersPolicy`), when
    /// the template has one.
    pub console_headers: Option<ConsoleSecurityHeaders>,
}

/// The security headers CloudFront adds to every file of the web console, as the template's
/// `AWS::CloudFront::ResponseHeadersPolicy` declares them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsoleSecurityHeaders {
    /// The Content-Security-Policy as written, `${...}` substitutions (the AWS origins) included.
    pub content_security_policy: String,
    /// `X-Content-Type-Options: nosniff` is sent.
    pub nosniff: bool,
    /// `X-Frame-Options` (`DENY`).
    pub frame_options: Option<String>,
    /// `Referrer-Policy` (`no-referrer`).
    pub referrer_policy: Option<String>,
}

impl ConsoleSecurityHeaders {
    /// The policy as the dev server sends it: every source with a `${...}` substitution
    /// dropped. Those name the API's and Cognito's origins on AWS; locally the API is the
    /// console's own origin (`'self'`) and sign-in is the dev server's.
    pub fn local_content_security_policy(&self) -> String {
        self.content_security_policy
            .split(';')
            .map(|directive| {
                directive
                    .split_whitespace()
                    .filter(|source| !source.contains("${"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|directive| !directive.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The headers the dev server sends with each console file, names in lower case. No
    /// `Strict-Transport-Security`: browsers ignore it over `http://127.0.0.1`.
    pub fn local_headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![(
            "content-security-policy",
            self.local_content_security_policy(),
        )];
        if self.nosniff {
            headers.push(("x-content-type-options", "nosniff".into()));
        }
        if let Some(v) = &self.frame_options {
            headers.push(("x-frame-options", v.clone()));
        }
        if let Some(v) = &self.referrer_policy {
            headers.push(("referrer-policy", v.clone()));
        }
        headers
    }
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
    /// `!Ref` of another resource (a queue: its URL); locally [`local_resource_ref`].
    Resource(String),
    /// `!Sub` of the pseudo parameters `AWS::Region` and `AWS::URLSuffix` only (resolved for
    /// the local region, `us-east-1`).
    Sub(String),
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
                    EnvValue::Resource(id) => local_resource_ref(id),
                    EnvValue::Sub(text) => text
                        .replace("${AWS::Region}", LOCAL_REGION)
                        .replace("${AWS::URLSuffix}", "amazonaws.com"),
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

/// What a `!Ref` of resource `id` (other than the table) is locally, where it has no twin:
/// `local:{id}`, which no AWS client can reach (the local stack's stand-ins record the calls).
pub fn local_resource_ref(id: &str) -> String {
    format!("local:{id}")
}

/// The region every local run uses (the SDK client of the local stack, the bootstraps'
/// `AWS_REGION`): DynamoDB Local keeps tables apart by region and access key.
pub const LOCAL_REGION: &str = "us-east-1";

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
        let raw: RawTemplate = yaml_serde::from_str(text)?;
        let globals = raw.globals.function;
        let resources = raw
            .resources
            .ok_or_else(|| shape("no Resources"))?
            .0
            .into_iter()
            .map(|(id, resource)| Resource::read(&id, resource).map(|r| (id, r)))
            .collect::<Result<Vec<_>, _>>()?;
        let table_ids: Vec<&str> = resources
            .iter()
            .filter(|(_, r)| matches!(r, Resource::Table(_)))
            .map(|(id, _)| id.as_str())
            .collect();
        let resource_ids: Vec<&str> = resources.iter().map(|(id, _)| id.as_str()).collect();
        let mut tables = Vec::new();
        let mut routes = Vec::new();
        let mut functions = BTreeMap::new();
        let mut function_definitions = BTreeMap::new();
        let mut console_headers = Vec::new();
        for (id, resource) in &resources {
            match resource {
                Resource::ResponseHeaders(props) => {
                    console_headers.push(response_headers(id, props)?);
                }
                Resource::Table(props) => tables.push(table_definition(id, props)),
                Resource::Function(function) => {
                    let definition =
                        function_definition(id, function, &globals, &table_ids, &resource_ids)?;
                    functions.insert(id.clone(), definition.code_uri.clone());
                    routes.extend(function_routes(
                        id,
                        &definition.code_uri,
                        &function.properties,
                    )?);
                    function_definitions.insert(id.clone(), definition);
                }
                Resource::Other => {}
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
        let parameter_defaults = raw
            .parameters
            .0
            .into_iter()
            .filter_map(|(name, p)| match p.default? {
                CfnValue::Literal(value) => Some((name, value)),
                _ => None,
            })
            .collect();
        if console_headers.len() > 1 {
            return Err(shape(
                "expected at most one AWS::CloudFront::ResponseHeadersPolicy (the console's)",
            ));
        }
        Ok(Self {
            table,
            routes,
            functions,
            function_definitions,
            parameter_defaults,
            console_headers: console_headers.pop(),
        })
    }
}

/// A CloudFormation value: a literal (strings, numbers and booleans, as CloudFormation
/// passes them on, as text) or an intrinsic function, in short form (`!Ref X`,
/// `!GetAtt X.Arn`, `!Sub "..."`) or long form (`{Ref: X}`, `{"Fn::GetAtt": [X, Arn]}`).
#[derive(Clone, Debug, PartialEq)]
pub enum CfnValue {
    /// A scalar.
    Literal(String),
    /// `Ref`: a parameter or a resource.
    Ref(String),
    /// `Fn::GetAtt`.
    GetAtt {
        /// The resource's logical id.
        resource: String,
        /// The attribute (`Arn`).
        attribute: String,
    },
    /// `Fn::Sub` with its template string.
    Sub(String),
    /// Another intrinsic function (`Fn::If`, `Fn::Join`, ...), or a list or map: not
    /// interpreted by the local stack.
    Other(String),
}

impl CfnValue {
    fn from_yaml(value: Value) -> Self {
        match value {
            Value::String(s) => CfnValue::Literal(s),
            Value::Number(n) => CfnValue::Literal(n.to_string()),
            Value::Bool(b) => CfnValue::Literal(b.to_string()),
            Value::Tagged(tagged) => {
                let name = tagged.tag.to_string();
                let name = name.trim_start_matches('!');
                Self::intrinsic(name, tagged.value)
            }
            Value::Mapping(map) if map.len() == 1 => {
                let Some((Value::String(key), argument)) = map.into_iter().next() else {
                    return CfnValue::Other("a map".into());
                };
                match key.as_str() {
                    "Ref" => Self::intrinsic("Ref", argument),
                    _ => match key.strip_prefix("Fn::") {
                        Some(name) => Self::intrinsic(name, argument),
                        None => CfnValue::Other(format!("a map of {key}")),
                    },
                }
            }
            other => CfnValue::Other(format!("{other:?}")),
        }
    }

    /// `name` (without `Fn::` or `!`) applied to `argument`.
    fn intrinsic(name: &str, argument: Value) -> Self {
        match (name, argument) {
            ("Ref", Value::String(target)) => CfnValue::Ref(target),
            ("GetAtt", Value::String(path)) => match path.split_once('.') {
                Some((resource, attribute)) => CfnValue::GetAtt {
                    resource: resource.into(),
                    attribute: attribute.into(),
                },
                None => CfnValue::Other(format!("GetAtt {path}")),
            },
            ("GetAtt", Value::Sequence(parts)) => match parts.as_slice() {
                [Value::String(resource), Value::String(attribute)] => CfnValue::GetAtt {
                    resource: resource.clone(),
                    attribute: attribute.clone(),
                },
                _ => CfnValue::Other("GetAtt".into()),
            },
            ("Sub", Value::String(text)) => CfnValue::Sub(text),
            (name, _) => CfnValue::Other(name.to_string()),
        }
    }

    fn literal(&self) -> Option<&str> {
        match self {
            CfnValue::Literal(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for CfnValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(CfnValue::from_yaml)
    }
}

/// A YAML mapping in template order (routes are served, and listed, in that order).
#[derive(Clone, Debug)]
struct Ordered<T>(Vec<(String, T)>);

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for OrderedVisitor<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(OrderedVisitor(PhantomData))
    }
}

/// One value or a list of them (`Action: dynamodb:Query` or `Action: [...]`).
#[derive(Clone, Debug)]
struct OneOrMany<T>(Vec<T>);

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = match Value::deserialize(deserializer)? {
            Value::Sequence(items) => items,
            one => vec![one],
        };
        items
            .into_iter()
            .map(|item| yaml_serde::from_value(item).map_err(de::Error::custom))
            .collect::<Result<_, _>>()
            .map(OneOrMany)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawTemplate {
    #[serde(default)]
    parameters: Ordered<RawParameter>,
    #[serde(default)]
    globals: RawGlobals,
    resources: Option<Ordered<RawResource>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawParameter {
    default: Option<CfnValue>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawGlobals {
    #[serde(default)]
    function: RawFunctionProperties,
}

/// A resource as written; its `Properties` are read by `Type` ([`Resource::read`]), since
/// they hold intrinsic-function tags that serde's tagged enums cannot buffer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawResource {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(default)]
    properties: Value,
    #[serde(default)]
    metadata: Value,
}

enum Resource {
    Table(RawTableProperties),
    Function(RawFunction),
    ResponseHeaders(RawResponseHeadersProperties),
    Other,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawResponseHeadersProperties {
    response_headers_policy_config: RawResponseHeadersConfig,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawResponseHeadersConfig {
    security_headers_config: Option<RawSecurityHeaders>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawSecurityHeaders {
    content_security_policy: Option<RawCsp>,
    content_type_options: Option<Value>,
    frame_options: Option<RawFrameOptions>,
    referrer_policy: Option<RawReferrerPolicy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawCsp {
    content_security_policy: CfnValue,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawFrameOptions {
    frame_option: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawReferrerPolicy {
    referrer_policy: String,
}

fn response_headers(
    id: &str,
    props: &RawResponseHeadersProperties,
) -> Result<ConsoleSecurityHeaders, TemplateError> {
    let security = props
        .response_headers_policy_config
        .security_headers_config
        .as_ref()
        .ok_or_else(|| shape(format!("{id}: no SecurityHeadersConfig")))?;
    let policy = match security
        .content_security_policy
        .as_ref()
        .map(|c| &c.content_security_policy)
    {
        Some(CfnValue::Literal(text) | CfnValue::Sub(text)) => text.clone(),
        _ => {
            return Err(shape(format!(
                "{id}: ContentSecurityPolicy must be a string or a !Sub"
            )))
        }
    };
    Ok(ConsoleSecurityHeaders {
        content_security_policy: policy,
        nosniff: security.content_type_options.is_some(),
        frame_options: security
            .frame_options
            .as_ref()
            .map(|f| f.frame_option.clone()),
        referrer_policy: security
            .referrer_policy
            .as_ref()
            .map(|r| r.referrer_policy.clone()),
    })
}

impl Resource {
    fn read(id: &str, raw: RawResource) -> Result<Self, TemplateError> {
        fn properties<T: DeserializeOwned>(id: &str, value: Value) -> Result<T, TemplateError> {
            if value.is_null() {
                return Err(shape(format!("{id}: no Properties")));
            }
            yaml_serde::from_value(value).map_err(|e| shape(format!("{id}: {e}")))
        }
        Ok(match raw.kind.as_str() {
            "AWS::DynamoDB::Table" => Resource::Table(properties(id, raw.properties)?),
            "AWS::CloudFront::ResponseHeadersPolicy" => {
                Resource::ResponseHeaders(properties(id, raw.properties)?)
            }
            "AWS::Serverless::Function" => Resource::Function(RawFunction {
                properties: properties(id, raw.properties)?,
                metadata: yaml_serde::from_value(raw.metadata)
                    .map_err(|e| shape(format!("{id}: Metadata: {e}")))?,
            }),
            _ => Resource::Other,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawTableProperties {
    attribute_definitions: Vec<RawAttribute>,
    key_schema: Vec<RawKey>,
    #[serde(default)]
    global_secondary_indexes: Vec<RawIndex>,
    time_to_live_specification: Option<RawTtl>,
    billing_mode: Option<String>,
    stream_specification: Option<RawStream>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawStream {
    stream_view_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawAttribute {
    attribute_name: String,
    attribute_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawKey {
    attribute_name: String,
    key_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawIndex {
    index_name: String,
    key_schema: Vec<RawKey>,
    projection: Option<RawProjection>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawProjection {
    projection_type: Option<String>,
    #[serde(default)]
    non_key_attributes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawTtl {
    attribute_name: Option<String>,
    #[serde(default)]
    enabled: bool,
}

struct RawFunction {
    properties: RawFunctionProperties,
    metadata: Option<RawMetadata>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawFunctionProperties {
    code_uri: Option<CfnValue>,
    memory_size: Option<u32>,
    timeout: Option<u32>,
    environment: Option<RawEnvironment>,
    #[serde(default)]
    policies: OneOrMany<RawPolicy>,
    #[serde(default)]
    events: Ordered<RawEvent>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawEnvironment {
    #[serde(default)]
    variables: Ordered<CfnValue>,
}

/// A policy document with statements; SAM policy templates and managed policy names have
/// none and grant nothing the local recorder checks.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawPolicy {
    #[serde(default)]
    statement: OneOrMany<RawStatement>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawStatement {
    effect: Option<String>,
    #[serde(default)]
    action: OneOrMany<CfnValue>,
    #[serde(default)]
    resource: OneOrMany<CfnValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawMetadata {
    build_properties: Option<RawBuildProperties>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawBuildProperties {
    binary: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawEvent {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(default)]
    properties: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawHttpApiEvent {
    method: String,
    path: String,
    auth: Option<RawAuth>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawAuth {
    authorizer: Option<String>,
}

fn env_value(
    id: &str,
    name: &str,
    value: &CfnValue,
    table_ids: &[&str],
    resource_ids: &[&str],
) -> Result<EnvValue, TemplateError> {
    match value {
        CfnValue::Literal(literal) => Ok(EnvValue::Literal(literal.clone())),
        CfnValue::Ref(target) if table_ids.contains(&target.as_str()) => Ok(EnvValue::TableName),
        CfnValue::Ref(target) if resource_ids.contains(&target.as_str()) => {
            Ok(EnvValue::Resource(target.clone()))
        }
        CfnValue::Ref(target) => Ok(EnvValue::Parameter(target.clone())),
        CfnValue::Sub(text)
            if text
                .replace("${AWS::Region}", "")
                .replace("${AWS::URLSuffix}", "")
                .contains("${") =>
        {
            Err(shape(format!(
                "{id}: environment variable {name}: a !Sub may use only AWS::Region and AWS::URLSuffix"
            )))
        }
        CfnValue::Sub(text) => Ok(EnvValue::Sub(text.clone())),
        _ => Err(shape(format!(
            "{id}: environment variable {name} must be a literal, a !Ref or a !Sub of the region"
        ))),
    }
}

/// A policy resource rendered as `Table`, `Table/index/*`, `Table.StreamArn` (an attribute
/// other than the ARN keeps its name) or `Table/stream/*`.
fn policy_resource(value: &CfnValue) -> String {
    match value {
        CfnValue::GetAtt {
            resource,
            attribute,
        } if attribute != "Arn" => {
            format!("{resource}.{attribute}")
        }
        CfnValue::GetAtt { resource, .. } => resource.clone(),
        CfnValue::Sub(text) => text
            .replace(".Arn}", "}")
            .replace("${", "")
            .replace('}', ""),
        CfnValue::Literal(text) => text.clone(),
        other => format!("{other:?}"),
    }
}

fn function_definition(
    id: &str,
    function: &RawFunction,
    globals: &RawFunctionProperties,
    table_ids: &[&str],
    resource_ids: &[&str],
) -> Result<FunctionDefinition, TemplateError> {
    let props = &function.properties;
    let mut environment = BTreeMap::new();
    for source in [globals, props] {
        for (name, value) in source.environment.iter().flat_map(|e| &e.variables.0) {
            environment.insert(
                name.clone(),
                env_value(id, name, value, table_ids, resource_ids)?,
            );
        }
    }
    let policy = props
        .policies
        .0
        .iter()
        .flat_map(|p| &p.statement.0)
        .map(|statement| PolicyStatement {
            effect: statement.effect.clone().unwrap_or_else(|| "Allow".into()),
            actions: statement
                .action
                .0
                .iter()
                .filter_map(|a| a.literal().map(str::to_string))
                .collect(),
            resources: statement.resource.0.iter().map(policy_resource).collect(),
        })
        .collect();
    let binary = function
        .metadata
        .as_ref()
        .and_then(|m| m.build_properties.as_ref())
        .and_then(|b| b.binary.clone())
        .ok_or_else(|| shape(format!("{id}: Metadata.BuildProperties.Binary missing")))?;
    let code_uri = props
        .code_uri
        .as_ref()
        .and_then(CfnValue::literal)
        .ok_or_else(|| shape(format!("{id}: CodeUri must be a literal path")))?;
    Ok(FunctionDefinition {
        logical_id: id.to_string(),
        code_uri: code_uri.trim_end_matches('/').to_string(),
        binary,
        memory_mb: props.memory_size.or(globals.memory_size).unwrap_or(128),
        timeout_seconds: props.timeout.or(globals.timeout).unwrap_or(3),
        environment,
        policy,
    })
}

fn key_schema(keys: &[RawKey]) -> Vec<KeyElement> {
    keys.iter()
        .map(|k| KeyElement {
            attribute: k.attribute_name.clone(),
            key_type: k.key_type.clone(),
        })
        .collect()
}

fn table_definition(id: &str, props: &RawTableProperties) -> TableDefinition {
    let ttl = props.time_to_live_specification.as_ref();
    TableDefinition {
        logical_id: id.to_string(),
        attributes: props
            .attribute_definitions
            .iter()
            .map(|a| (a.attribute_name.clone(), a.attribute_type.clone()))
            .collect(),
        key_schema: key_schema(&props.key_schema),
        indexes: props
            .global_secondary_indexes
            .iter()
            .map(|gsi| IndexDefinition {
                name: gsi.index_name.clone(),
                key_schema: key_schema(&gsi.key_schema),
                projection_type: gsi
                    .projection
                    .as_ref()
                    .and_then(|p| p.projection_type.clone())
                    .unwrap_or_else(|| "ALL".into()),
                non_key_attributes: gsi
                    .projection
                    .as_ref()
                    .map(|p| p.non_key_attributes.clone())
                    .unwrap_or_default(),
            })
            .collect(),
        ttl_attribute: ttl
            .filter(|t| t.enabled)
            .and_then(|t| t.attribute_name.clone()),
        billing_mode: props
            .billing_mode
            .clone()
            .unwrap_or_else(|| "PROVISIONED".into()),
        stream_view_type: props
            .stream_specification
            .as_ref()
            .map(|s| s.stream_view_type.clone()),
    }
}

fn function_routes(
    id: &str,
    code_uri: &str,
    props: &RawFunctionProperties,
) -> Result<Vec<HttpRoute>, TemplateError> {
    let mut routes = Vec::new();
    for (name, event) in &props.events.0 {
        if event.kind != "HttpApi" {
            continue;
        }
        let api: RawHttpApiEvent = yaml_serde::from_value(event.properties.clone())
            .map_err(|e| shape(format!("{id}.{name}: {e}")))?;
        let authorizer = api.auth.and_then(|a| a.authorizer);
        routes.push(HttpRoute {
            function: id.to_string(),
            code_uri: code_uri.to_string(),
            method: api.method.to_ascii_uppercase(),
            path: api.path,
            authorized: authorizer.as_deref() != Some("NONE"),
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
    fn the_console_policy_runs_locally_with_the_aws_origins_dropped() {
        let t = Template::load(&default_template_path()).unwrap();
        let headers = t
            .console_headers
            .expect("template.yaml declares the console's headers");
        let local = headers.local_content_security_policy();
        let directives: BTreeMap<&str, &str> = local
            .split("; ")
            .map(|d| d.split_once(' ').unwrap_or((d, "")))
            .collect();
        assert_eq!(directives["default-src"], "'self'");
        assert_eq!(
            directives["connect-src"], "'self'",
            "locally the API is the console's origin"
        );
        assert_eq!(directives["frame-ancestors"], "'none'");
        assert_eq!(directives["base-uri"], "'none'");
        assert_eq!(directives["object-src"], "'none'");
        assert!(
            !local.contains("unsafe"),
            "no unsafe-inline or unsafe-eval: {local}"
        );
        // On AWS connect-src names the API's, the regional S3 endpoint's (the firmware image
        // upload's presigned PUT) and Cognito's origins, and only them.
        assert!(headers
            .content_security_policy
            .contains("connect-src 'self' https://*.execute-api.${AWS::Region}.${AWS::URLSuffix} https://*.s3.${AWS::Region}.${AWS::URLSuffix} https://${UserPoolDomain}.auth.${AWS::Region}.amazoncognito.com;"));
        let names: Vec<&str> = headers.local_headers().iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "content-security-policy",
                "x-content-type-options",
                "x-frame-options",
                "referrer-policy"
            ]
        );
    }

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

    #[test]
    fn reads_intrinsic_functions_in_short_and_long_form_alike() {
        let read = |yaml: &str| yaml_serde::from_str::<CfnValue>(yaml).unwrap();
        assert_eq!(read("!Ref T"), CfnValue::Ref("T".into()));
        assert_eq!(read("{Ref: T}"), CfnValue::Ref("T".into()));
        let arn = CfnValue::GetAtt {
            resource: "T".into(),
            attribute: "Arn".into(),
        };
        assert_eq!(read("!GetAtt T.Arn"), arn);
        assert_eq!(read("{\"Fn::GetAtt\": [T, Arn]}"), arn);
        assert_eq!(
            read("!Sub \"${T.Arn}/index/*\""),
            CfnValue::Sub("${T.Arn}/index/*".into())
        );
        assert_eq!(
            read("{\"Fn::Sub\": \"${T.Arn}/index/*\"}"),
            CfnValue::Sub("${T.Arn}/index/*".into())
        );
        assert_eq!(read("90"), CfnValue::Literal("90".into()));
        assert_eq!(read("true"), CfnValue::Literal("true".into()));
        assert_eq!(read("!If [On, true, false]"), CfnValue::Other("If".into()));
    }
}
