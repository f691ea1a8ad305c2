//! Device Fleet's key-design crate: everything that knows about DynamoDB.
//!
//! - [`ids`], [`timestamp`]: validated key parts; bad input is a typed error, never a key.
//! - [`keys`]: builders and parsers for every key of the table and its indexes.
//! - [`items`]: the stored items, one type per `entityType`.
//! - [`schema`]: attribute and index names (checked against `template.yaml` by a test).
//! - [`catalog`]: the access patterns with their request and capacity budgets.
//! - [`ops`]: the table operations implementing the patterns.
//! - [`dynamo`]: the multi-request calls (write all, get all, transact) and scatter-gather.
//! - [`table`], [`metrics`], [`retry`]: the metered client (operations, attempts and consumed
//!   capacity, recorded by one interceptor), error mapping and the one retry policy.
//! - [`api`]: HTTP plumbing shared by the API functions.
//! - [`limits`]: per-key token buckets of one execution environment (ingest rate, ...).
//! - [`trace`]: X-Ray subsegments per request and DynamoDB call, sent to the daemon.
//! - [`emf`]: CloudWatch Embedded Metric Format documents (one per request and per daily run).
//! - [`config`], [`deadline`]: a function's settings from the environment, and when an
//!   invocation must stop (one rule for every function, emulators included).

pub mod api;
pub mod catalog;
pub mod config;
pub mod cursor;
pub mod deadline;
pub mod dynamo;
pub mod emf;
pub mod entity;
pub mod error;
pub mod gateway;
pub mod ids;
pub mod items;
pub mod keys;
pub mod limits;
pub mod metrics;
pub mod ops;
pub mod readings;
pub mod retry;
pub mod schema;
pub mod shard;
pub mod table;
pub mod telemetry;
pub mod timestamp;
pub mod token;
pub mod trace;

pub use config::FleetConfig;
pub use error::{FleetError, ValidationError};
pub use table::FleetTable;
