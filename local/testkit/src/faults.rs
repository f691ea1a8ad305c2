//! Fault injection around the real SDK client, for tests on DynamoDB Local: an interceptor that
//! holds back chosen BatchWriteItem items and reports them as `UnprocessedItems` (they are
//! never sent), and one that answers chosen calls with a throttling error after DynamoDB Local
//! has processed them (a response lost in transit).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput};
use aws_sdk_dynamodb::types::{AttributeValue, WriteRequest};
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextMut, BeforeSerializationInterceptorContextMut,
    FinalizerInterceptorContextMut,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::{HttpResponse, Metadata};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

/// Decides which items of a BatchWriteItem are held back: gets the item, returns true to
/// report it unprocessed.
pub type HoldBack = Arc<dyn Fn(&HashMap<String, AttributeValue>) -> bool + Send + Sync>;

/// What to break, and how often.
#[derive(Clone, Default)]
pub struct FaultPlan {
    /// Items to report as unprocessed, while `unprocessed_rounds` lasts.
    pub hold_back: Option<HoldBack>,
    /// How many BatchWriteItem calls hold items back (then they go through); `u32::MAX` for
    /// ever.
    pub unprocessed_rounds: Arc<AtomicU32>,
    /// How many calls of `throttle_operation` get a throttling error instead of their answer.
    pub throttles: Arc<AtomicU32>,
    /// The operation to throttle (`BatchWriteItem`, `UpdateItem`, ...).
    pub throttle_operation: &'static str,
    /// How many throttling errors were injected.
    pub throttled: Arc<AtomicU32>,
    /// How many items were held back in all.
    pub held_back: Arc<AtomicU32>,
}

#[derive(Debug, Clone)]
struct Withheld(Vec<WriteRequest>);

impl Storable for Withheld {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug, Clone)]
struct NothingSent;

impl Storable for NothingSent {
    type Storer = StoreReplace<Self>;
}

fn replace_response(
    context: &mut BeforeDeserializationInterceptorContextMut<'_>,
    status: u16,
    body: &'static str,
) {
    let mut response = HttpResponse::new(
        StatusCode::try_from(status).expect("a valid status"),
        SdkBody::from(body),
    );
    response
        .headers_mut()
        .insert("content-type", "application/x-amz-json-1.0");
    *context.response_mut() = response;
}

/// The interceptor carrying out a [`FaultPlan`].
pub struct FaultInjector {
    plan: FaultPlan,
    // The table name of the last batch, to put withheld items back under it.
    table: Mutex<Option<String>>,
}

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultInjector")
    }
}

fn operation(cfg: &ConfigBag) -> String {
    cfg.load::<Metadata>()
        .map(|m| m.name().to_string())
        .unwrap_or_default()
}

/// Decrements `counter` unless it is 0; `u32::MAX` never runs out.
fn take(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            0 => None,
            u32::MAX => Some(u32::MAX),
            n => Some(n - 1),
        })
        .is_ok()
}

impl Intercept for FaultInjector {
    fn name(&self) -> &'static str {
        "FaultInjector"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(hold_back) = &self.plan.hold_back else {
            return Ok(());
        };
        let Some(input) = context.input_mut().downcast_mut::<BatchWriteItemInput>() else {
            return Ok(());
        };
        if !take(&self.plan.unprocessed_rounds) {
            return Ok(());
        }
        let mut withheld = Vec::new();
        for (table, requests) in input.request_items.iter_mut().flatten() {
            *self.table.lock().unwrap() = Some(table.clone());
            let (held, sent): (Vec<_>, Vec<_>) = requests
                .drain(..)
                .partition(|w| w.put_request.as_ref().is_some_and(|p| hold_back(&p.item)));
            *requests = sent;
            withheld.extend(held);
        }
        if let Some(items) = input.request_items.as_mut() {
            items.retain(|_, requests| !requests.is_empty());
            if items.is_empty() {
                // DynamoDB rejects an empty batch; its answer is replaced by an empty success
                // (modify_before_deserialization) and every item reported unprocessed.
                cfg.interceptor_state().store_put(NothingSent);
            }
        }
        self.plan
            .held_back
            .fetch_add(withheld.len() as u32, Ordering::SeqCst);
        cfg.interceptor_state().store_put(Withheld(withheld));
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<NothingSent>().is_some() {
            replace_response(context, 200, r#"{"UnprocessedItems":{}}"#);
            return Ok(());
        }
        if operation(cfg) != self.plan.throttle_operation || !take(&self.plan.throttles) {
            return Ok(());
        }
        self.plan.throttled.fetch_add(1, Ordering::SeqCst);
        replace_response(
            context,
            400,
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"injected throttling"}"#,
        );
        Ok(())
    }

    fn modify_before_completion(
        &self,
        context: &mut FinalizerInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Withheld(withheld)) = cfg.load::<Withheld>().cloned() else {
            return Ok(());
        };
        if withheld.is_empty() {
            return Ok(());
        }
        let table = self.table.lock().unwrap().clone().unwrap_or_default();
        if let Some(Ok(output)) = context.output_or_error_mut() {
            if let Some(output) = output.downcast_mut::<BatchWriteItemOutput>() {
                output
                    .unprocessed_items
                    .get_or_insert_with(HashMap::new)
                    .entry(table)
                    .or_default()
                    .extend(withheld);
            }
        }
        Ok(())
    }
}

/// `client` with `plan`'s faults injected (the metering interceptor stays in place).
pub fn faulty_client(client: &Client, plan: FaultPlan) -> Client {
    let conf = client
        .config()
        .to_builder()
        .interceptor(FaultInjector {
            plan,
            table: Mutex::new(None),
        })
        .build();
    Client::from_conf(conf)
}
