//! The rest of the stack: list prices (us-east-1) with their date and source, and the monthly
//! lines every profile adds beside DynamoDB's request units, storage and Lambda.

use std::fmt::Write as _;

use serde_json::Value;
use shared::store::metrics::MeterSnapshot;

use super::prices::{MonthlyCost, DAYS_PER_MONTH, GB, RRU_USD, SECONDS_PER_MONTH, WRU_USD};
use crate::simulate::{group, Simulation};

fn count(v: f64) -> String {
    group(v.round() as u64)
}

/// When and where the prices below were read.
pub const PRICES_SOURCE: &str = "us-east-1 list prices as published on AWS's pricing pages \
    (aws.amazon.com/api-gateway/pricing, /cognito/pricing, /dynamodb/pricing/on-demand, \
    /cloudwatch/pricing), read 23 November 2026; free tiers left out";
/// API Gateway HTTP API, per million requests (first 300 million a month).
pub const HTTP_API_PER_MILLION_USD: f64 = 1.00;
/// API Gateway HTTP API, per million requests beyond 300 million a month.
pub const HTTP_API_OVER_300M_PER_MILLION_USD: f64 = 0.90;
/// Cognito user pools, Essentials tier (the default of a pool created without
/// `UserPoolTier`, as ours is), per monthly active user.
pub const COGNITO_ESSENTIALS_MAU_USD: f64 = 0.015;
/// DynamoDB point-in-time recovery (continuous backups), per GB-month of table size.
pub const PITR_GB_MONTH_USD: f64 = 0.20;
/// CloudWatch Contributor Insights for DynamoDB, per rule-month.
pub const CONTRIBUTOR_INSIGHTS_RULE_USD: f64 = 0.50;
/// CloudWatch Contributor Insights for DynamoDB, per million DynamoDB events processed.
pub const CONTRIBUTOR_INSIGHTS_PER_MILLION_EVENTS_USD: f64 = 0.03;
/// CloudWatch Logs (Standard class), per GB ingested.
pub const LOGS_INGESTED_GB_USD: f64 = 0.50;
/// CloudWatch Logs, per GB-month stored (archived, compressed; billed as ingested here).
pub const LOGS_STORED_GB_MONTH_USD: f64 = 0.03;
/// CloudWatch custom metrics, per metric-month (first 10,000 metrics).
pub const METRIC_MONTH_USD: f64 = 0.30;
/// The template's log retention default (`LogRetentionDays`).
pub const LOG_RETENTION_DAYS: f64 = 30.0;
/// Contributor Insights rules: 2 (most accessed, most throttled) per table and per GSI
/// with it enabled (`template.yaml`: the table, GSI1, GSI2).
pub const CONTRIBUTOR_INSIGHTS_RULES: f64 = 6.0;
/// API routes (`template.yaml`'s HTTP API events), each a `Route` dimension value.
pub const API_ROUTES: f64 = 30.0;
/// API functions publishing request metrics (dashboard, ingest, device-updates).
pub const API_FUNCTIONS: f64 = 3.0;
/// Lambda's own START, END and REPORT lines per invocation: an assumption (about 330
/// bytes with the X-Ray REPORT fields), not measured here.
pub const PLATFORM_LOG_BYTES: f64 = 330.0;

/// Bytes of one API request's log lines written by our code, measured by rendering the
/// EMF document `shared::observe::emf::request_document` writes for a dashboard request (the
/// route, status, a 36-character request id, a trace id and the meter of a 1-Query
/// request), plus the tracing line of `shared::http::api` with the same fields (its fields as
/// `tracing_subscriber`'s JSON format writes them: timestamp, level, target, fields).
pub fn request_log_bytes() -> f64 {
    let mut used = MeterSnapshot::default();
    used.operations.insert("Query".into(), 1);
    used.attempts = 1;
    used.read_units = 1.5;
    let request_id = "4f0c2a3e-8a0b-4a0e-9f5e-0c1d2e3f4a5b";
    let trace_id = "1-6741a2b3-0123456789abcdef01234567";
    let emf = shared::observe::emf::request_document(
        &shared::observe::emf::RequestFigures {
            route: "GET /me/dashboard",
            status: 200,
            latency_ms: 4.09,
            used: &used,
            request_id: Some(request_id),
            device_id: None,
            trace_id: Some(trace_id),
        },
        false,
    );
    let tracing = serde_json::json!({
        "timestamp": "2026-11-23T06:34:16.123456Z",
        "level": "INFO",
        "fields": {
            "message": "request", "route": "GET /me/dashboard", "status": 200,
            "latency_ms": 4.09, "ddb_requests": 1, "ddb_attempts": 1, "rcu": 1.5,
            "wcu": 0.0, "request_id": request_id,
        },
        "target": "shared::http::api",
    });
    (emf.to_string().len() + 1 + tracing.to_string().len() + 1) as f64
}

/// Custom metrics we publish (`shared::observe::emf`): per route and per API function the 10
/// request metrics (12 on ingest, with its 2 figures), and the daily run's 5.
pub fn published_metrics() -> f64 {
    let request = shared::observe::emf::REQUEST_METRICS.len() as f64;
    let figures = shared::observe::emf::FIGURE_METRICS.len() as f64;
    (API_ROUTES + API_FUNCTIONS) * request
        + 2.0 * figures
        + shared::observe::emf::RUN_METRICS.len() as f64
}

/// One line of the whole-stack bill.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// What is billed.
    pub item: &'static str,
    /// The month's quantity, as text with its unit.
    pub quantity: String,
    /// USD a month.
    pub usd: f64,
    /// Measured (and where) or assumed.
    pub basis: String,
}

/// The write and read units of a device change, as `make docs` priced them in
/// docs/model.json (write units by DynamoDB's rules from the items the case changed):
/// (pattern, workload substring) -> (wcu, rcu).
fn pattern_units(model: &Value, id: &str, workload: &str) -> Option<(f64, f64)> {
    let pattern = model["patterns"]
        .as_array()?
        .iter()
        .find(|p| p["id"] == id)?;
    let m = pattern["measured"]
        .as_array()?
        .iter()
        .find(|m| m["workload"].as_str().is_some_and(|w| w.contains(workload)))?;
    Some((m["wcu"].as_f64()?, m["rcu"].as_f64()?))
}

/// The month's lines beyond DynamoDB's API/ingest traffic and Lambda for `sim`, given its
/// DynamoDB month `dynamo` and `model` (docs/model.json).
pub fn lines(sim: &Simulation, dynamo: &MonthlyCost, model: &Value) -> Vec<Line> {
    let w = &sim.workload;
    let changes = &sim.profile.device_changes;
    let devices = w.devices as f64;
    let mut out = Vec::new();

    // Device lifecycle.
    let registrations = devices * changes.registered_per_month;
    let renames = devices * changes.renamed_per_month;
    let deletions = devices * changes.deleted_per_month;
    let units = [
        (registrations, pattern_units(model, "AP-07", "register")),
        (renames, pattern_units(model, "AP-06", "tag change")),
        (deletions, pattern_units(model, "AP-08", "delete")),
    ];
    let wcu: f64 = units.iter().map(|(n, u)| n * u.map_or(0.0, |u| u.0)).sum();
    let rcu: f64 = units.iter().map(|(n, u)| n * u.map_or(0.0, |u| u.1)).sum();
    out.push(Line {
        item: "DynamoDB: device registrations, renames, deletions",
        quantity: format!(
            "{:.0} + {:.0} + {:.0} a month: {:.0} WRU, {:.0} RRU",
            registrations, renames, deletions, wcu, rcu
        ),
        usd: wcu * WRU_USD + rcu * RRU_USD,
        basis: format!(
            "rates assumed (profile `device_changes`: {:.0}% / {:.0}% / {:.0}% of the fleet a \
             month); units measured by `make docs` (docs/model.json: AP-07, AP-06 tag change, \
             AP-08, transactions priced by DynamoDB's rules from the items they wrote)",
            changes.registered_per_month * 100.0,
            changes.renamed_per_month * 100.0,
            changes.deleted_per_month * 100.0
        ),
    });

    // The device twin (docs/design.md section 12).
    let twin = &sim.profile.twin;
    let desired = devices * twin.desired_changes_per_device_per_month;
    let commands = devices * twin.commands_per_device_per_month;
    let rollout_devices = devices * twin.rollouts_per_month;
    let zero = (0.0, 0.0);
    let set = pattern_units(model, "AP-T1", "desired state").unwrap_or(zero);
    let queue = pattern_units(model, "AP-T2", "queue a command").unwrap_or(zero);
    let delivered = pattern_units(model, "AP-T4", "pending: delivered").unwrap_or(zero);
    let reported = pattern_units(model, "AP-T4", "report the desired").unwrap_or(zero);
    // The worker's case changes 4 devices.
    let rollout =
        pattern_units(model, "AP-T7", "rollout worker").map_or(zero, |(w, r)| (w / 4.0, r / 4.0));
    // Conservative: every desired change, rollout and command counts a device-side delivery
    // and a report or acknowledgement of its own (the measured cases cover one of each
    // together).
    let exchanges = desired + rollout_devices + commands;
    let device_side = (delivered.0 + reported.0, delivered.1 + reported.1);
    let twin_wcu = desired * set.0
        + commands * queue.0
        + rollout_devices * rollout.0
        + exchanges * device_side.0;
    let twin_rcu = desired * set.1
        + commands * queue.1
        + rollout_devices * rollout.1
        + exchanges * device_side.1;
    out.push(Line {
        item: "DynamoDB: device twin (desired changes, commands, fleet-wide changes)",
        quantity: format!(
            "{:.0} + {:.0} + {:.0} device changes a month: {:.0} WRU, {:.0} RRU",
            desired, commands, rollout_devices, twin_wcu, twin_rcu
        ),
        usd: twin_wcu * WRU_USD + twin_rcu * RRU_USD,
        basis: format!(
            "rates assumed (profile `twin`: {} desired change(s), {} command(s) per device and {} \
             fleet-wide change(s) a month); units measured by `make docs` (docs/model.json: \
             AP-T1, AP-T2, AP-T7 per device, AP-T4 delivery and report/acknowledgement, \
             transactions priced by DynamoDB's rules)",
            twin.desired_changes_per_device_per_month,
            twin.commands_per_device_per_month,
            twin.rollouts_per_month
        ),
    });

    // API Gateway.
    let api_requests =
        (w.dashboard_per_second + w.other_reads_per_second + w.ingest_requests_per_second)
            * SECONDS_PER_MONTH
            + registrations
            + renames
            + deletions
            + desired
            + commands;
    let first = api_requests.min(300e6);
    out.push(Line {
        item: "API Gateway HTTP API",
        quantity: format!("{} M requests", count(api_requests / 1e6)),
        usd: first / 1e6 * HTTP_API_PER_MILLION_USD
            + (api_requests - first) / 1e6 * HTTP_API_OVER_300M_PER_MILLION_USD,
        basis: "requests from the profile (simulated); price per request".into(),
    });

    // Cognito.
    out.push(Line {
        item: "Cognito user pool (Essentials)",
        quantity: format!("{} monthly active users", group(w.users)),
        usd: w.users as f64 * COGNITO_ESSENTIALS_MAU_USD,
        basis: "assumed: every user of the profile signs in each month (the Lite tier would \
                    be $0.0055 per MAU up to 100,000)"
            .into(),
    });

    // PITR on the table's size (indexes are not backed up).
    out.push(Line {
        item: "DynamoDB point-in-time recovery",
        quantity: format!("{} GB table", count(dynamo.storage_gb[0])),
        usd: dynamo.storage_gb[0] * PITR_GB_MONTH_USD,
        basis: "table size from the simulated steady state (the storage line)".into(),
    });

    // Contributor Insights: one event per item read or written; request units stand in.
    let ci_events = dynamo.write_units + dynamo.read_units + wcu + rcu + twin_wcu + twin_rcu;
    out.push(Line {
        item: "Contributor Insights (table, GSI1, GSI2)",
        quantity: format!(
            "{:.0} rules, {:.1} M events",
            CONTRIBUTOR_INSIGHTS_RULES,
            ci_events / 1e6
        ),
        usd: CONTRIBUTOR_INSIGHTS_RULES * CONTRIBUTOR_INSIGHTS_RULE_USD
            + ci_events / 1e6 * CONTRIBUTOR_INSIGHTS_PER_MILLION_EVENTS_USD,
        basis: "assumed: one event per API/ingest request unit (items of under 1 KB); the \
                analytics scan's reads left out"
            .into(),
    });

    // CloudWatch Logs.
    let line_bytes = request_log_bytes() + PLATFORM_LOG_BYTES;
    let ingested_gb = api_requests * line_bytes / GB;
    out.push(Line {
        item: "CloudWatch Logs",
        quantity: format!(
            "{:.0} bytes a request, {:.1} GB ingested, {:.1} GB kept",
            line_bytes,
            ingested_gb,
            ingested_gb * LOG_RETENTION_DAYS / (DAYS_PER_MONTH)
        ),
        usd: ingested_gb * LOGS_INGESTED_GB_USD
            + ingested_gb * LOG_RETENTION_DAYS / DAYS_PER_MONTH * LOGS_STORED_GB_MONTH_USD,
        basis: format!(
            "our lines measured ({:.0} bytes: the EMF document and the request line, \
             rendered by the code); Lambda's platform lines assumed ({PLATFORM_LOG_BYTES:.0} \
             bytes); kept {LOG_RETENTION_DAYS:.0} days (template default)",
            request_log_bytes()
        ),
    });

    // CloudWatch metrics.
    let metrics = published_metrics();
    out.push(Line {
        item: "CloudWatch custom metrics (EMF)",
        quantity: format!("{metrics:.0} metrics"),
        usd: metrics * METRIC_MONTH_USD,
        basis:
            "counted from shared::observe::emf (routes x request metrics, per function, the daily \
                run's)"
                .into(),
    });
    out
}

/// The prices paragraph of the report.
pub fn prices_paragraph() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Whole-stack prices ({PRICES_SOURCE}): API Gateway HTTP API ${HTTP_API_PER_MILLION_USD:.2} \
         per million requests (first 300 million a month; ${HTTP_API_OVER_300M_PER_MILLION_USD:.2} \
         beyond); Cognito Essentials ${COGNITO_ESSENTIALS_MAU_USD} per monthly active user; \
         DynamoDB PITR ${PITR_GB_MONTH_USD:.2} per GB-month; Contributor Insights \
         ${CONTRIBUTOR_INSIGHTS_RULE_USD:.2} per rule-month and \
         ${CONTRIBUTOR_INSIGHTS_PER_MILLION_EVENTS_USD:.2} per million events; CloudWatch Logs \
         ${LOGS_INGESTED_GB_USD:.2} per GB ingested and ${LOGS_STORED_GB_MONTH_USD:.2} per \
         GB-month stored; custom metrics ${METRIC_MONTH_USD:.2} per metric-month. The \
         Contributor Insights prices are as summarized at usage.ai/blog (rule fee and event \
         fee), the others from AWS's pages; all are list prices to be re-read before a \
         budget is set on them."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metrics_are_counted_from_what_emf_publishes() {
        // 30 routes (16, the alarms' 8, the twin's 6) and 3 HTTP functions x 10 request
        // metrics, ingest's 2 figures on its route and its function, the daily run's 5.
        assert_eq!(published_metrics(), 33.0 * 10.0 + 4.0 + 5.0);
        // A request's own lines: the EMF document is several hundred bytes, never empty.
        let bytes = request_log_bytes();
        assert!((500.0..2000.0).contains(&bytes), "{bytes}");
    }

    #[test]
    fn device_changes_use_the_priced_units_of_model_json() {
        let model = json!({"patterns": [
            {"id": "AP-07", "measured": [{"workload": "register a device", "wcu": 13.0, "rcu": 1.0}]},
            {"id": "AP-06", "measured": [
                {"workload": "status change", "wcu": 4.0, "rcu": 0.0},
                {"workload": "tag change (+ link sync)", "wcu": 9.0, "rcu": 0.0}]},
            {"id": "AP-08", "measured": [{"workload": "delete a device", "wcu": 14.0, "rcu": 0.0}]},
        ]});
        assert_eq!(
            pattern_units(&model, "AP-07", "register"),
            Some((13.0, 1.0))
        );
        assert_eq!(
            pattern_units(&model, "AP-06", "tag change"),
            Some((9.0, 0.0))
        );
        assert_eq!(pattern_units(&model, "AP-08", "delete"), Some((14.0, 0.0)));
    }
}
