//! The integration tests: one binary (one link of the AWS SDK, one DynamoDB Local per run),
//! one module per area. Run one area with `cargo test -p fleet-tests --test it <module>::`.

mod alarm_watch;
mod alarms;
mod budgets;
mod credentials;
mod daily_analytics;
mod dashboard;
mod device_move;
mod device_updates;
mod emulator;
mod faults;
mod hostile_input;
mod ingest;
mod ingest_limits;
mod isolation;
mod least_privilege;
mod metrics_emf;
mod openapi_contract;
mod org_cost;
mod org_deletion;
mod org_matrix;
mod orgs;
mod python_peer;
mod replay;
mod request_log;
mod retention;
mod rie;
mod rollouts;
mod scale;
mod series;
mod series_read;
mod template_contract;
mod traces;
mod twin;
mod type_index;
