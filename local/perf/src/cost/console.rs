//! What one open web console dashboard costs: it polls `GET /me/dashboard` (AP-DASH) with
//! `If-None-Match` every [`POLL_SECONDS`] while its tab is visible. A 304 saves the body and
//! the browser's work, not the read: the function reads the fleet to know whether it changed,
//! so every poll is one AP-DASH read, one Lambda invocation and one API Gateway request.

use std::fmt::Write as _;

use serde_json::Value;

use super::prices::{LambdaBilling, LAMBDA_ARM_GB_SECOND_USD, LAMBDA_REQUEST_USD, RRU_USD};
use super::stack::HTTP_API_PER_MILLION_USD;

/// The console's poll interval (`POLL_SECONDS` in web/src/pages/Dashboard.tsx; a test keeps
/// the two equal).
pub const POLL_SECONDS: f64 = 5.0;

/// One visible dashboard's hour.
#[derive(Clone, Debug, PartialEq)]
pub struct DashboardHour {
    /// Polls (API requests, Lambda invocations, AP-DASH reads) an hour.
    pub requests: f64,
    /// Read units of one AP-DASH read, measured (docs/model.json).
    pub rcu_per_read: f64,
    /// Which measured workload that is.
    pub workload: String,
    pub dynamodb_usd: f64,
    pub lambda_usd: f64,
    pub api_usd: f64,
}

impl DashboardHour {
    pub fn total_usd(&self) -> f64 {
        self.dynamodb_usd + self.lambda_usd + self.api_usd
    }
}

/// The hour of one open dashboard at AP-DASH's measured units in `model` (docs/model.json) and
/// the read functions' billing.
pub fn open_dashboard_hour(model: &Value, billing: &LambdaBilling) -> Option<DashboardHour> {
    let measured = model["patterns"]
        .as_array()?
        .iter()
        .find(|p| p["id"] == "AP-DASH")?["measured"]
        .as_array()?
        .first()?;
    let rcu_per_read = measured["rcu"].as_f64()?;
    let requests = 3600.0 / POLL_SECONDS;
    let gb_seconds =
        requests * billing.read_ms / 1000.0 * f64::from(billing.read_memory_mb) / 1024.0;
    Some(DashboardHour {
        requests,
        rcu_per_read,
        workload: measured["workload"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        dynamodb_usd: requests * rcu_per_read * RRU_USD,
        lambda_usd: requests * LAMBDA_REQUEST_USD + gb_seconds * LAMBDA_ARM_GB_SECOND_USD,
        api_usd: requests / 1e6 * HTTP_API_PER_MILLION_USD,
    })
}

/// The report's section on the console.
pub fn section(model: &Value, billing: &LambdaBilling) -> String {
    let Some(h) = open_dashboard_hour(model, billing) else {
        return String::new();
    };
    let mut out = String::from("\n## One open web console dashboard\n\n");
    let _ = writeln!(
        out,
        "The console (`web/`) polls `GET /me/dashboard` every {POLL_SECONDS:.0} s with \
         `If-None-Match` while its tab is visible, and not at all while it is hidden. An \
         unchanged fleet answers `304` without a body, but the function still reads the fleet \
         to know that (AP-DASH, {rcu} RCU for {workload}, measured), so every poll is one read, \
         one Lambda invocation ({ms:.0} ms at {mb} MB) and one API request.\n\n\
         | per open dashboard | requests | read units | DynamoDB | Lambda | API Gateway | total |\n\
         |---|---|---|---|---|---|---|\n\
         | an hour | {req:.0} | {units:.0} | ${ddb:.6} | ${lambda:.6} | ${api:.6} | ${total:.6} |\n\
         | a month of office hours (8 h x 22 days) | {mreq:.0} | {munits:.0} | ${mddb:.4} | ${mlambda:.4} | ${mapi:.4} | ${mtotal:.4} |",
        rcu = h.rcu_per_read,
        workload = h.workload,
        ms = billing.read_ms,
        mb = billing.read_memory_mb,
        req = h.requests,
        units = h.requests * h.rcu_per_read,
        ddb = h.dynamodb_usd,
        lambda = h.lambda_usd,
        api = h.api_usd,
        total = h.total_usd(),
        mreq = h.requests * 176.0,
        munits = h.requests * h.rcu_per_read * 176.0,
        mddb = h.dynamodb_usd * 176.0,
        mlambda = h.lambda_usd * 176.0,
        mapi = h.api_usd * 176.0,
        mtotal = h.total_usd() * 176.0,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_interval_is_the_consoles() {
        let source = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../web/src/pages/Dashboard.tsx"),
        )
        .expect("the console's dashboard page");
        let line = source
            .lines()
            .find(|l| l.contains("export const POLL_SECONDS"))
            .expect("POLL_SECONDS in Dashboard.tsx");
        let value: f64 = line
            .split('=')
            .nth(1)
            .and_then(|v| v.trim().trim_end_matches(';').parse().ok())
            .expect("a number");
        assert_eq!(value, POLL_SECONDS);
    }

    #[test]
    fn every_poll_is_one_read_of_the_measured_units() {
        let model = serde_json::json!({"patterns": [{"id": "AP-DASH", "measured": [
            {"workload": "w", "rcu": 1.0, "requests": 1}]}]});
        let h = open_dashboard_hour(&model, &LambdaBilling::assumed()).unwrap();
        assert_eq!(h.requests, 720.0);
        assert!((h.dynamodb_usd - 720.0 * 0.125 / 1e6).abs() < 1e-12);
        assert!((h.api_usd - 720.0 / 1e6).abs() < 1e-12);
    }
}
