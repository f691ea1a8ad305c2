//! A table on DynamoDB Local created from `template.yaml`, and the SDK client to reach it.

use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;
use shared::{FleetConfig, FleetTable};

use crate::dynamodb_local::{default_install_dir, DynamoDbLocal};
use crate::template::{default_template_path, KeyElement, TableDefinition, Template};

/// Any failure while creating the local table.
pub type StackError = Box<dyn std::error::Error + Send + Sync>;

/// An SDK configuration for a DynamoDB Local endpoint (fixed region, dummy credentials: DynamoDB
/// Local accepts any).
pub async fn local_sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "local"))
        .load()
        .await
}

/// A metered client (as the Lambdas build it) for a DynamoDB Local endpoint.
pub async fn local_client(endpoint: &str) -> Client {
    shared::store::table::dynamodb_client(&local_sdk_config(endpoint).await)
}

fn key_schema(keys: &[KeyElement]) -> Result<Vec<KeySchemaElement>, StackError> {
    keys.iter()
        .map(|k| {
            Ok(KeySchemaElement::builder()
                .attribute_name(&k.attribute)
                .key_type(KeyType::from(k.key_type.as_str()))
                .build()?)
        })
        .collect()
}

/// Creates table `name` with exactly the key schema, attributes, indexes, projections, billing
/// mode and TTL of `definition`.
pub async fn create_table(
    client: &Client,
    definition: &TableDefinition,
    name: &str,
) -> Result<(), StackError> {
    let mut request = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::from(definition.billing_mode.as_str()))
        .set_key_schema(Some(key_schema(&definition.key_schema)?));
    for (attribute, kind) in &definition.attributes {
        request = request.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(attribute)
                .attribute_type(ScalarAttributeType::from(kind.as_str()))
                .build()?,
        );
    }
    for index in &definition.indexes {
        let mut projection = Projection::builder()
            .projection_type(ProjectionType::from(index.projection_type.as_str()));
        for attribute in &index.non_key_attributes {
            projection = projection.non_key_attributes(attribute);
        }
        request = request.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&index.name)
                .set_key_schema(Some(key_schema(&index.key_schema)?))
                .projection(projection.build())
                .build()?,
        );
    }
    if let Some(view) = &definition.stream_view_type {
        request = request.stream_specification(
            aws_sdk_dynamodb::types::StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(aws_sdk_dynamodb::types::StreamViewType::from(view.as_str()))
                .build()?,
        );
    }
    // A slow CreateTable (a loaded machine) must not be retried by the client's 3 s attempt
    // timeout: the retry would find the table the first attempt created.
    request
        .customize()
        .config_override(
            aws_sdk_dynamodb::config::Builder::default().timeout_config(
                aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(std::time::Duration::from_secs(60))
                    .operation_timeout(std::time::Duration::from_secs(120))
                    .build(),
            ),
        )
        .send()
        .await?;
    if let Some(attribute) = &definition.ttl_attribute {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(attribute)
                    .enabled(true)
                    .build()?,
            )
            .send()
            .await?;
    }
    Ok(())
}

/// A [`FleetTable`] for `name` on `endpoint`, with default configuration.
pub async fn local_table(endpoint: &str, name: &str) -> FleetTable {
    FleetTable::new(local_client(endpoint).await, FleetConfig::for_table(name))
}

/// What a local command runs on: `template.yaml` and a DynamoDB Local started for the
/// command (it stops when this is dropped).
pub struct LocalStack {
    /// The template the tables are created from.
    pub template: Template,
    /// The running DynamoDB Local.
    pub dynamodb: DynamoDbLocal,
}

impl LocalStack {
    /// Reads `template.yaml` and starts DynamoDB Local from `.tools/`.
    pub fn start() -> Result<Self, StackError> {
        let template = Template::load(&default_template_path())?;
        let dynamodb = DynamoDbLocal::start(&default_install_dir())?;
        Ok(Self { template, dynamodb })
    }

    /// DynamoDB Local's endpoint.
    pub fn endpoint(&self) -> &str {
        self.dynamodb.endpoint()
    }

    /// Creates table `name` from the template and returns it with default configuration.
    pub async fn table(&self, name: &str) -> Result<FleetTable, StackError> {
        let table = local_table(self.endpoint(), name).await;
        create_table(&table.client, &self.template.table, name).await?;
        Ok(table)
    }
}
