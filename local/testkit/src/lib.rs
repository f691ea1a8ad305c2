//! The test kit: what the end-to-end tests and the local tools (`fleet-dev`, `fleet-perf`)
//! stand on. DynamoDB Local, the table created from `template.yaml`, demo and reference data,
//! the sample events, typed API Gateway events, the functions in-process, the fault proxy and
//! the fault-run driver, DynamoDB's capacity rules and write pricing, the IAM grant recorder,
//! and release bootstraps under `aws-lambda-rie`. Never a dependency of a Lambda.

pub mod alarm_events;
pub mod api_event;
pub mod bootstrap;
pub mod capacity;
pub mod demo;
pub mod demo_orgs;
mod demo_readings;
pub mod dynamodb_local;
pub mod fault_proxy;
pub mod fault_run;
pub mod functions;
pub mod http_server;
pub mod iam;
pub mod minute_meter;
pub mod moto_server;
pub mod outcome;
pub mod pricing;
pub mod reference;
pub mod rie;
pub mod samples;
pub mod stack;
pub mod template;
pub mod webhook_queue;
pub mod webhook_receiver;

use std::path::{Path, PathBuf};

/// The repository root (this crate lives in `local/testkit/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}
