//! What one staged firmware rollout (issue 40) costs in DynamoDB requests: a healthy device's
//! write units (priced on the real items by the simulator, `simulate::firmware`), its marked
//! check-ins' reads and the worker's walks' reads, for each profile that has a rollout.

use std::fmt::Write as _;

use crate::simulate::{group, hours, Simulation};

use super::prices::{RRU_USD, WRU_USD};

/// The DynamoDB cost of one rollout of `sim`'s profile, USD: (write units, read units, USD),
/// or `None` when the profile has no rollout.
pub fn rollout_cost(sim: &Simulation) -> Option<(f64, f64, f64)> {
    let f = sim.firmware.as_ref()?;
    let devices = f.devices as f64;
    let writes = devices * f.all_write_units_per_device();
    let reads = devices * (f.check_in_read_units + f.walk_read_units);
    Some((writes, reads, writes * WRU_USD + reads * RRU_USD))
}

/// The cost model's section.
pub fn section(sims: &[Simulation]) -> String {
    let mut out = String::from(
        "## Firmware rollouts (issue 40)\n\n\
         One staged firmware rollout of a profile's largest fleet, every device healthy, as the \
         engine is built (docs/key-distribution.md gives its timing and keys): each device's write \
         units priced on the real items and its share of the walks' checkpoints (a write of the \
         rollout item every few seconds of a walk), the reads of its check-ins while its part is open (the \
         rollout item, consistent) and of the worker's walks (its live state, consistent, once a \
         walk). Lambda time is left out (the worker's runs and the check-ins' extra request are \
         milliseconds each).\n\n\
         | profile | devices | write units a device (its own + the checkpoints' share) | write units | read units | walks | start to done | DynamoDB USD a rollout |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for sim in sims {
        let (Some(f), Some((writes, reads, usd))) = (&sim.firmware, rollout_cost(sim)) else {
            continue;
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} + {:.4} | {} | {} | {:.1} | {} | {usd:.2} |",
            sim.profile.name,
            group(f.devices),
            f.write_units_per_device(),
            f.checkpoint_write_units,
            group(writes.round() as u64),
            group(reads.round() as u64),
            f.walks,
            hours(f.completion_seconds),
        );
    }
    out.push('\n');
    out
}
