//! The local stack: DynamoDB Local, the table created from `template.yaml`, demo data, the dev
//! HTTP server with its stand-in JWT authorizer, and `invoke`. Used by `make dev`, `make test`
//! and the end-to-end tests; never a dependency of a Lambda.

pub mod bench;
pub mod bootstrap;
pub mod capacity;
pub mod cold_start;
pub mod cost;
pub mod demo;
pub mod dev_server;
pub mod dynamodb_local;
pub mod fault_proxy;
pub mod fault_run;
pub mod faults;
pub mod functions;
pub mod iam;
pub mod load;
pub mod model_docs;
pub mod reference;
pub mod runtime_api;
pub mod samples;
pub mod simulate;
pub mod stack;
pub mod template;
pub mod throughput;

use std::path::PathBuf;

/// The repository root (this crate lives in `local/`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}
