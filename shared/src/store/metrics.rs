//! Per-request accounting of DynamoDB work: how many operations were issued (and of which
//! kind), how many HTTP attempts they took, and the capacity they consumed.
//!
//! A [`RequestMeter`] is installed for the duration of one request with [`RequestMeter::scope`];
//! an SDK interceptor ([`MeteringInterceptor`], added to every client built by
//! [`crate::store::table::dynamodb_client`]) records into the meter of the task it runs in. The
//! interceptor also asks every table operation for `ReturnConsumedCapacity=TOTAL` and reads
//! the capacity from its output, so no call site sets or records capacity itself. Concurrent
//! calls joined inside that task are counted; work moved to another task with `tokio::spawn`
//! must be wrapped in the same meter (`meter.clone().scope(...)`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextMut, BeforeTransmitInterceptorContextRef,
    FinalizerInterceptorContextRef, Input, Output,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

tokio::task_local! {
    static CURRENT: RequestMeter;
}

/// The figure of a request that gave up because DynamoDB could not be reached (connection
/// refused, reset or closed, TLS, no answer in time), as opposed to a busy table: published as
/// its own metric ([`crate::observe::emf::REQUEST_METRICS`]) and logged as
/// `dependency_unreachable` on the request's line.
pub const DEPENDENCY_UNREACHABLE: &str = "DependencyUnreachable";

/// What one request (or one test step) cost in DynamoDB.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeterSnapshot {
    /// Operations issued, by operation name (`GetItem`, `Query`, ...). Retries of one
    /// operation count once here.
    pub operations: BTreeMap<String, u32>,
    /// HTTP attempts, including SDK retries.
    pub attempts: u32,
    /// Read capacity units consumed (table and indexes).
    pub read_units: f64,
    /// Write capacity units consumed (table and indexes).
    pub write_units: f64,
    /// Figures the handler reported for its metrics (`EventsAccepted`, ...; see
    /// [`crate::observe::emf::FIGURE_METRICS`]).
    pub figures: BTreeMap<&'static str, f64>,
    /// Every operation, timed (for the request's trace, [`crate::observe::trace`]).
    pub calls: Vec<DynamoCall>,
}

/// One DynamoDB operation as its trace shows it (retries included in one call).
#[derive(Clone, Debug, PartialEq)]
pub struct DynamoCall {
    /// `GetItem`, `Query`, ...
    pub operation: String,
    /// When the SDK started it.
    pub start: SystemTime,
    /// When it finished (with its last attempt).
    pub end: SystemTime,
    /// HTTP attempts it took.
    pub attempts: u32,
    /// Whether it returned an output (not an error).
    pub ok: bool,
}

/// When an operation started and the attempts counted before it, kept in the operation's
/// config bag from its first interceptor hook to its last.
#[derive(Clone, Debug)]
struct CallStarted {
    at: SystemTime,
    attempts_before: u32,
}

impl Storable for CallStarted {
    type Storer = StoreReplace<Self>;
}

impl MeterSnapshot {
    /// Total operations issued.
    pub fn requests(&self) -> u32 {
        self.operations.values().sum()
    }

    /// How many operations named `name` were issued.
    pub fn count(&self, name: &str) -> u32 {
        self.operations.get(name).copied().unwrap_or(0)
    }
}

/// Collects [`MeterSnapshot`] figures for the task it is scoped to. Cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct RequestMeter {
    inner: Arc<Mutex<MeterSnapshot>>,
}

impl RequestMeter {
    /// A new, empty meter.
    pub fn new() -> Self {
        Self::default()
    }

    /// The meter of the current task, if one is in scope. A request handler joins it instead of
    /// starting its own, so a caller that measures a whole request (a test, the bench) sees
    /// the same figures the request logs.
    pub fn current() -> Option<Self> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Runs `fut` with this meter collecting its DynamoDB work.
    pub async fn scope<F: std::future::Future>(self, fut: F) -> F::Output {
        CURRENT.scope(self, fut).await
    }

    /// The figures so far.
    pub fn snapshot(&self) -> MeterSnapshot {
        self.inner.lock().expect("meter lock").clone()
    }

    /// Adds `value` to the figure `name` of the current task's meter (nothing outside a scope).
    pub fn add_figure(name: &'static str, value: f64) {
        Self::with(|snapshot| *snapshot.figures.entry(name).or_insert(0.0) += value);
    }

    /// Sets a figure of the current task's request to `value`, however often it is set (a
    /// condition of the request, such as [`DEPENDENCY_UNREACHABLE`], not a count of events).
    pub fn set_figure(name: &'static str, value: f64) {
        Self::with(|snapshot| {
            snapshot.figures.insert(name, value);
        });
    }

    /// Adds the figures of a nested meter (one scoped inside this task's, e.g. per scanned
    /// page) to the current task's meter, so the outer figures stay the whole invocation's.
    pub fn add_to_current(nested: &MeterSnapshot) {
        Self::with(|outer| {
            for (name, count) in &nested.operations {
                *outer.operations.entry(name.clone()).or_insert(0) += count;
            }
            outer.attempts += nested.attempts;
            outer.read_units += nested.read_units;
            outer.write_units += nested.write_units;
            for (name, value) in &nested.figures {
                *outer.figures.entry(name).or_insert(0.0) += value;
            }
            outer.calls.extend(nested.calls.iter().cloned());
        });
    }

    fn with(f: impl FnOnce(&mut MeterSnapshot)) {
        // Outside a scope (start-up, background work) nothing is recorded.
        let _ = CURRENT.try_with(|meter| f(&mut meter.inner.lock().expect("meter lock")));
    }
}

fn total_units<'a>(capacity: impl IntoIterator<Item = &'a ConsumedCapacity>) -> f64 {
    capacity
        .into_iter()
        .map(|c| c.capacity_units().unwrap_or(0.0))
        .sum()
}

/// Whether an operation's capacity counts as read or write capacity.
#[derive(Clone, Copy)]
enum Units {
    Read,
    Write,
}

/// For every table operation the crate issues: its input and output types and whether its
/// capacity is read or write capacity. Asks for the total consumed capacity on the input
/// (unless the caller asked for something) and records it from the output.
macro_rules! table_operations {
    ($($module:ident :: $input:ident, $output:ident => $units:ident),+ $(,)?) => {
        fn ask_for_capacity(input: &mut Input) {
            $(if let Some(input) = input.downcast_mut::<aws_sdk_dynamodb::operation::$module::$input>() {
                // A caller asking for more (`INDEXES`, the per-index figures) keeps it: the
                // total is in both.
                input.return_consumed_capacity.get_or_insert(ReturnConsumedCapacity::Total);
                return;
            })+
        }

        fn consumed_capacity(output: &Output) -> Option<(Units, f64)> {
            $(if let Some(output) = output.downcast_ref::<aws_sdk_dynamodb::operation::$module::$output>() {
                return Some((Units::$units, total_units(output.consumed_capacity())));
            })+
            None
        }
    };
}

table_operations! {
    get_item::GetItemInput, GetItemOutput => Read,
    query::QueryInput, QueryOutput => Read,
    scan::ScanInput, ScanOutput => Read,
    batch_get_item::BatchGetItemInput, BatchGetItemOutput => Read,
    transact_get_items::TransactGetItemsInput, TransactGetItemsOutput => Read,
    put_item::PutItemInput, PutItemOutput => Write,
    update_item::UpdateItemInput, UpdateItemOutput => Write,
    delete_item::DeleteItemInput, DeleteItemOutput => Write,
    batch_write_item::BatchWriteItemInput, BatchWriteItemOutput => Write,
    transact_write_items::TransactWriteItemsInput, TransactWriteItemsOutput => Write,
}

/// SDK interceptor counting operations, attempts and consumed capacity into the current
/// [`RequestMeter`].
#[derive(Debug, Default)]
pub struct MeteringInterceptor;

impl Intercept for MeteringInterceptor {
    fn name(&self) -> &'static str {
        "DeviceFleetMetering"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        ask_for_capacity(context.input_mut());
        let attempts_before = CURRENT
            .try_with(|m| m.inner.lock().expect("meter lock").attempts)
            .unwrap_or(0);
        cfg.interceptor_state().store_put(CallStarted {
            at: SystemTime::now(),
            attempts_before,
        });
        Ok(())
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        RequestMeter::with(|m| m.attempts += 1);
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let name = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_string())
            .unwrap_or_else(|| "unknown".to_string());
        // Only a successful output carries capacity (a failed condition or a cancelled
        // transaction is not charged here, as DynamoDB's error responses carry none).
        let output = context.output_or_error().and_then(Result::ok);
        let consumed = output.and_then(consumed_capacity);
        let started = cfg.load::<CallStarted>().cloned();
        RequestMeter::with(|m| {
            if let Some(started) = started {
                m.calls.push(DynamoCall {
                    operation: name.clone(),
                    start: started.at,
                    end: SystemTime::now(),
                    attempts: m.attempts.saturating_sub(started.attempts_before),
                    ok: output.is_some(),
                });
            }
            *m.operations.entry(name).or_default() += 1;
            match consumed {
                Some((Units::Read, units)) => m.read_units += units,
                Some((Units::Write, units)) => m.write_units += units,
                None => {}
            }
        });
        Ok(())
    }
}
