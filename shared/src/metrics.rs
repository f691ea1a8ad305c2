//! Per-request accounting of DynamoDB work: how many operations were issued (and of which
//! kind), how many HTTP attempts they took, and the capacity they consumed.
//!
//! A [`RequestMeter`] is installed for the duration of one request with [`RequestMeter::scope`];
//! an SDK interceptor ([`MeteringInterceptor`], added to every client built by
//! [`crate::table::dynamodb_client`]) records into the meter of the task it runs in. Concurrent
//! calls joined inside that task are counted; work moved to another task with `tokio::spawn`
//! must be wrapped in the same meter (`meter.clone().scope(...)`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::ConsumedCapacity;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

tokio::task_local! {
    static CURRENT: RequestMeter;
}

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

/// Adds the read capacity an operation reported (`ReturnConsumedCapacity::Total`, which every
/// table operation in this crate asks for) to the current meter.
pub fn record_read<'a>(capacity: impl IntoIterator<Item = &'a ConsumedCapacity>) {
    let units = total_units(capacity);
    RequestMeter::with(|m| m.read_units += units);
}

/// Adds the write capacity an operation reported to the current meter.
pub fn record_write<'a>(capacity: impl IntoIterator<Item = &'a ConsumedCapacity>) {
    let units = total_units(capacity);
    RequestMeter::with(|m| m.write_units += units);
}

/// SDK interceptor counting operations and attempts into the current [`RequestMeter`].
#[derive(Debug, Default)]
pub struct MeteringInterceptor;

impl Intercept for MeteringInterceptor {
    fn name(&self) -> &'static str {
        "DeviceFleetMetering"
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
        _context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let name = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_string())
            .unwrap_or_else(|| "unknown".to_string());
        RequestMeter::with(|m| *m.operations.entry(name).or_default() += 1);
        Ok(())
    }
}
