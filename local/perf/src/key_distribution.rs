//! `fleet-perf simulate`: docs/key-distribution.md, the simulator's report with the sections
//! the cost models add (the webhook outage storm). Here, above both, so the simulator never
//! uses the cost model that uses it.

use crate::cost::webhooks::storm_section;
use crate::simulate::{render_report, write_or_print, REPORT_PATH};

/// `fleet-perf simulate [--check] [PROFILE...]`: without profiles, all documented ones into
/// docs/key-distribution.md (or, with `check`, verifies it is up to date).
pub fn command(
    profiles: &[std::path::PathBuf],
    check: bool,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    write_or_print(profiles, check, REPORT_PATH, |sims| {
        render_report(sims, &storm_section(sims))
    })
}
