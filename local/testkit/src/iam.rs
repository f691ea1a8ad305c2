//! What IAM would be asked to allow: an SDK interceptor that records, for every DynamoDB call
//! a client makes, the `(action, resource)` pairs IAM evaluates. A transaction needs its
//! inner actions too, and a Query or Scan of an index needs that index's ARN. The
//! least-privilege test compares these with each function's policy in `template.yaml`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::query::QueryInput;
use aws_sdk_dynamodb::operation::scan::ScanInput;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, Input,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::config_bag::ConfigBag;

/// An IAM action on a resource: `("dynamodb:Query", "table/index/GSI1")` or
/// `("dynamodb:GetItem", "table")`.
pub type Grant = (String, String);

/// The resource name of the table itself.
pub const TABLE: &str = "table";
/// The resource name of every index of the table (a policy's wildcard).
pub const INDEXES: &str = "table/index/*";

/// The resource name of the index `name`.
pub fn index(name: &str) -> String {
    format!("{TABLE}/index/{name}")
}

/// Records the grants the calls of a client need.
#[derive(Clone, Debug, Default)]
pub struct GrantRecorder {
    seen: Arc<Mutex<BTreeSet<Grant>>>,
}

impl GrantRecorder {
    /// A copy of `client` whose calls are recorded here.
    pub fn client(&self, client: &Client) -> Client {
        Client::from_conf(
            client
                .config()
                .to_builder()
                .interceptor(self.clone())
                .build(),
        )
    }

    /// Every grant needed so far.
    pub fn grants(&self) -> BTreeSet<Grant> {
        self.seen.lock().expect("grants lock").clone()
    }
}

/// The DynamoDB operation whose input `input` is.
fn operation_of(input: &Input) -> Option<&'static str> {
    macro_rules! by_input {
        ($($module:ident :: $input:ident => $name:literal),+ $(,)?) => {
            $(if input.downcast_ref::<aws_sdk_dynamodb::operation::$module::$input>().is_some() {
                return Some($name);
            })+
        };
    }
    by_input!(
        get_item::GetItemInput => "GetItem",
        put_item::PutItemInput => "PutItem",
        update_item::UpdateItemInput => "UpdateItem",
        delete_item::DeleteItemInput => "DeleteItem",
        query::QueryInput => "Query",
        scan::ScanInput => "Scan",
        batch_get_item::BatchGetItemInput => "BatchGetItem",
        batch_write_item::BatchWriteItemInput => "BatchWriteItem",
        transact_write_items::TransactWriteItemsInput => "TransactWriteItems",
        transact_get_items::TransactGetItemsInput => "TransactGetItems",
    );
    None
}

fn grant(action: &str, resource: impl Into<String>) -> Grant {
    (format!("dynamodb:{action}"), resource.into())
}

impl Intercept for GrantRecorder {
    fn name(&self) -> &'static str {
        "DeviceFleetGrantRecorder"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let input = context.input();
        // The input's type names the operation (the operation metadata is not always in the
        // config bag at this point).
        let operation = operation_of(input).map_or_else(
            || {
                cfg.load::<Metadata>()
                    .map_or("unknown".to_string(), |m| m.name().to_string())
            },
            str::to_string,
        );
        let on = |name: Option<&str>| name.map_or(TABLE.to_string(), index);
        let mut needed = vec![];
        match operation.as_str() {
            "Query" => {
                let index = input
                    .downcast_ref::<QueryInput>()
                    .and_then(|q| q.index_name());
                needed.push(grant("Query", on(index)));
            }
            "Scan" => {
                let index = input
                    .downcast_ref::<ScanInput>()
                    .and_then(|q| q.index_name());
                needed.push(grant("Scan", on(index)));
            }
            "TransactWriteItems" => {
                needed.push(grant("TransactWriteItems", TABLE));
                // IAM authorizes each item of a transaction as its own action.
                let items = input
                    .downcast_ref::<TransactWriteItemsInput>()
                    .map(|t| t.transact_items())
                    .unwrap_or_default();
                for item in items {
                    if item.put().is_some() {
                        needed.push(grant("PutItem", TABLE));
                    }
                    if item.update().is_some() {
                        needed.push(grant("UpdateItem", TABLE));
                    }
                    if item.delete().is_some() {
                        needed.push(grant("DeleteItem", TABLE));
                    }
                    if item.condition_check().is_some() {
                        needed.push(grant("ConditionCheckItem", TABLE));
                    }
                }
            }
            other => needed.push(grant(other, TABLE)),
        }
        self.seen.lock().expect("grants lock").extend(needed);
        Ok(())
    }
}
