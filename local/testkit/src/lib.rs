//! The test kit: what the end-to-end tests and the local tools (`fleet-dev`, `fleet-perf`)
//! stand on. DynamoDB Local, the table created from `template.yaml`, demo and reference data,
//! the sample events, typed API Gateway events, the four functions in-process, the fault
//! proxy, the IAM grant recorder, and a local Lambda Runtime API with a release-bootstrap
//! runner. Never a dependency of a Lambda.

pub mod alarm_events;
pub mod api_event;
pub mod bootstrap;
pub mod cpu_quota;
pub mod demo;
pub mod dynamodb_local;
pub mod fault_proxy;
pub mod functions;
pub mod http_server;
pub mod iam;
pub mod minute_meter;
pub mod reference;
pub mod rie;
pub mod runtime_api;
pub mod samples;
pub mod stack;
pub mod template;
pub mod tls_endpoint;

use std::path::{Path, PathBuf};

/// The repository root (this crate lives in `local/testkit/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}
