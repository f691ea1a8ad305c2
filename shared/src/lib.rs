//! Device Fleet's key-design crate: everything that knows about DynamoDB, in layers. Each
//! folder may use the ones listed before it, never one after it (a unit test,
//! `layers::no_module_imports_upward_and_none_in_a_circle`, checks every `crate::` path):
//!
//! 1. [`model`]: what is stored and how it is keyed: validated ids and values, timestamps,
//!    key builders and parsers, the entities and their items, the compact live readings,
//!    cursors, pattern ids, settings. No I/O.
//! 2. [`store`]: the metered DynamoDB client and its plumbing: error mapping, the one retry
//!    policy, deadlines, multi-request calls, per-request accounting.
//! 3. [`observe`]: what a request or run reports: the JSON log, EMF documents, X-Ray segments.
//! 4. [`ops`]: the access patterns: one operation per pattern beside its definition and
//!    budget; [`ops::catalog`] collects them.
//! 5. [`http`]: the API functions' HTTP shape: caller, bodies, the error contract, the
//!    API Gateway front.

pub mod http;
pub mod model;
pub mod observe;
pub mod ops;
pub mod store;

pub use model::error::{FleetError, ValidationError};
pub use model::settings::FleetConfig;
pub use store::table::FleetTable;

#[cfg(test)]
mod layers;
