//! What an access pattern is: its operations, frequency, request budget and read-capacity
//! ceiling, and the check of what a run issued against them. Each pattern's definition sits
//! beside the function that implements it in [`crate::ops`]; [`crate::ops::catalog`] collects them.

use std::fmt;

use crate::model::pattern_id::PatternId;
use crate::store::metrics::MeterSnapshot;

/// A DynamoDB operation, spelled as the SDK's operation metadata names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// GetItem.
    GetItem,
    /// Query.
    Query,
    /// Scan (analytics only).
    Scan,
    /// PutItem.
    PutItem,
    /// UpdateItem.
    UpdateItem,
    /// DeleteItem.
    DeleteItem,
    /// BatchWriteItem.
    BatchWriteItem,
    /// BatchGetItem.
    BatchGetItem,
    /// TransactWriteItems.
    TransactWriteItems,
}

impl Operation {
    /// The operation name as the SDK reports it.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::GetItem => "GetItem",
            Operation::Query => "Query",
            Operation::Scan => "Scan",
            Operation::PutItem => "PutItem",
            Operation::UpdateItem => "UpdateItem",
            Operation::DeleteItem => "DeleteItem",
            Operation::BatchWriteItem => "BatchWriteItem",
            Operation::BatchGetItem => "BatchGetItem",
            Operation::TransactWriteItems => "TransactWriteItems",
        }
    }
}

/// How often a pattern runs (docs/design.md, "Access patterns").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frequency {
    /// Most frequent, latency-sensitive.
    Critical,
    /// Frequent, less latency-sensitive.
    Important,
    /// Operators and reports.
    Analytics,
}

/// How many DynamoDB requests a pattern may issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestBudget {
    /// At most this many, always.
    Fixed(u32),
    /// This many, plus one when name, type or tags change (the copies on tag links and the
    /// registration are then brought in step).
    FixedPlusSync(u32),
    /// This many per page of results.
    PerPage(u32),
    /// This many per page, plus one GetItem when the first page is empty (to tell "nothing in
    /// range" from "no such device").
    PerPagePlusEmptyCheck(u32),
    /// This many per page, plus one GetItem on the first page (run beside its Query: the
    /// device must exist, so a deleted device's events are never answered).
    PerPagePlusFirstPageCheck(u32),
    /// One per shard per page.
    PerShardPage,
    /// One per shard per page, plus this many (a read that finds the shards).
    PerShardPagePlus(u32),
    /// This many per page, plus one BatchGetItem per page that holds devices whose live state
    /// is placed on another of their owner's partitions (large fleets only).
    PerPagePlusPlacedStates(u32),
    /// This many, plus one GetItem when the device's live state is placed on another of its
    /// owner's partitions (large fleets only).
    FixedPlusPlacedState(u32),
    /// Per page: one Query listing a group of the owner's devices, plus one Query per device
    /// of the group (`shards` in the scale counts the devices).
    PerDeviceGroupPage,
    /// One per (day, shard), plus one per device read (`devices` in the scale).
    PerDayShardPlusDevices,
    /// ceil(n/25) BatchWriteItem calls plus this many (registration read, device update, ...).
    BatchOf25Plus(u32),
    /// [`RequestBudget::BatchOf25Plus`], plus the device's twin work (`twin` in the scale): none
    /// when nothing is pending and the device reports and acknowledges nothing.
    BatchOf25PlusTwin(u32),
    /// This many, plus the device's twin work (`twin` in the scale).
    FixedPlusTwin(u32),
    /// [`RequestBudget::FixedPlusPlacedState`], plus the twin's documents (`twin` in the scale:
    /// one Query for a device that has a twin, none otherwise).
    FixedPlusPlacedStateAndTwin(u32),
    /// The rollout worker: one Query of the running list, three per rollout (`shards` in the
    /// scale: read, marked done, taken off the list), four per page of devices (`pages`), and
    /// one transaction per device changed (`devices`).
    RolloutPages,
    /// The alarm watch's scheduled parts: one Query per shard and page (`shards` x `pages`),
    /// one BatchGetItem per page that found entries (`batch_items`), and one write per entry
    /// acted on (`devices`): the reads follow what is due, never the fleet.
    DueShardPages,
    /// This many, plus one Query per shard and page (`shards` x `pages`), plus a read and a
    /// transaction per alarm cleared (`devices`).
    FixedPlusShardPagesAndAlarms(u32),
    /// The silent devices' roll: the checkpoint's read and last write (2), one Query per page
    /// of a `SEEN#` partition (`shards`: the pages listed, empty ones included), per page that
    /// listed devices one BatchGetItem of their states and device items and one checkpoint
    /// write (`batch_items`), and per transaction (`devices`: one per device rolled, one per
    /// type when its types do not fit one) two BatchGetItems (the blocks its buckets go into,
    /// then the days' blocks and items it rolls) and the transaction.
    SilentRollPages,
    /// Served from the daily report: nothing at read time.
    ZeroAtReadTime,
    /// This many, plus one Query per page of the owner's devices (`pages`), plus one write
    /// per device changed (`devices`).
    FixedPlusPagesAndDevices(u32),
    /// A log spread over partitions, read newest first: per page one GetItem (the log's
    /// owner item), one Query per partition (`shards`), and at most one more per partition
    /// whose share of the page ran out while it could still hold the page's next entry.
    PartitionedLogPages,
    /// An alarm stream batch's webhooks: one Query of the endpoints per fleet with a
    /// transition (`shards`), one UpdateItem per endpoint reserving its send slots
    /// (`batch_items`; two when a racing reservation beat the first), one PutItem per
    /// delivery (`devices`).
    FleetsEndpointsDeliveries,
}

/// What a particular run of a pattern covered, to turn a budget into a number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetScale {
    /// Pages returned.
    pub pages: u32,
    /// Shards scattered over.
    pub shards: u32,
    /// Days covered.
    pub days: u32,
    /// Items in a batch write.
    pub batch_items: u32,
    /// Devices whose own partitions the run read (AP-09: the marked devices, at most 25).
    pub devices: u32,
    /// Whether the pattern's documented extra request applies: name, type or tags changed
    /// (FixedPlusSync), or the first page was empty (PerPagePlusEmptyCheck).
    pub follow_up: bool,
    /// Requests a device's twin work justifies ([`crate::ops::twin::TwinReply::requests`]): one
    /// per acknowledgement, two for a report, one read per pending kind (desired, commands),
    /// one write per command delivered the first time and one for the queue's watermark.
    pub twin: u32,
}

impl BudgetScale {
    /// A single-page, single-shard run.
    pub fn one() -> Self {
        Self {
            pages: 1,
            shards: 1,
            days: 1,
            batch_items: 0,
            devices: 0,
            follow_up: false,
            twin: 0,
        }
    }
}

/// Where a pattern is implemented: the function, its module and its source file, taken by
/// [`implemented_by!`](crate::ops::pattern::implemented_by) from the definition's own module, so the
/// compiler checks the function exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Implementation {
    /// The module (`shared::ops::events`).
    pub module: &'static str,
    /// The function within it (`device_events`, `Ingestor::ingest`).
    pub function: &'static str,
    /// The source file, relative to the workspace root (`shared/src/ops/events.rs`).
    pub file: &'static str,
}

impl Implementation {
    /// The function's full path (`shared::ops::events::device_events`).
    pub fn path(&self) -> String {
        format!("{}::{}", self.module, self.function)
    }
}

/// The [`Implementation`] of a pattern defined beside `$function`, in the same module: names
/// the function (so it must exist) and records the module and file it lives in.
macro_rules! implemented_by {
    ($function:path) => {{
        let _ = $function;
        $crate::ops::pattern::Implementation {
            module: module_path!(),
            function: stringify!($function),
            file: file!(),
        }
    }};
}
pub(crate) use implemented_by;

/// One access pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessPattern {
    /// Stable id.
    pub id: PatternId,
    /// What the caller gets.
    pub description: &'static str,
    /// How often it runs.
    pub frequency: Frequency,
    /// The operations it may issue; anything else (a Scan where a Query is budgeted) fails it.
    pub operations: &'static [Operation],
    /// Index queried, if not the base table.
    pub index: Option<&'static str>,
    /// Key condition, with placeholders.
    pub key_condition: &'static str,
    /// Request budget.
    pub budget: RequestBudget,
    /// Read capacity ceiling on the reference workload, where the design sets one.
    pub max_read_units: Option<f64>,
    /// The HTTP route that serves it, if any (the daily report fields have none of their own).
    pub route: Option<&'static str>,
    /// The function that implements it.
    pub implemented_by: Implementation,
}

/// A pattern that issued more than its budget allows, or an operation it may not use.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetViolation {
    /// The pattern.
    pub pattern: PatternId,
    /// What went wrong.
    pub reason: String,
}

impl fmt::Display for BudgetViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} over budget: {}", self.pattern, self.reason)
    }
}

impl AccessPattern {
    /// The most requests this pattern may issue for a run of `scale`.
    pub fn max_requests(&self, scale: &BudgetScale) -> u32 {
        match self.budget {
            RequestBudget::Fixed(n) => n,
            RequestBudget::FixedPlusSync(n) => n + u32::from(scale.follow_up),
            RequestBudget::PerPage(n) => n * scale.pages.max(1),
            RequestBudget::PerPagePlusEmptyCheck(n) => {
                n * scale.pages.max(1) + u32::from(scale.follow_up)
            }
            RequestBudget::PerPagePlusFirstPageCheck(n) => n * scale.pages.max(1) + 1,
            RequestBudget::PerShardPage => scale.shards.max(1) * scale.pages.max(1),
            RequestBudget::PerShardPagePlus(n) => scale.shards.max(1) * scale.pages.max(1) + n,
            RequestBudget::PerPagePlusPlacedStates(n) => {
                (n + u32::from(scale.follow_up)) * scale.pages.max(1)
            }
            RequestBudget::FixedPlusPlacedState(n) => n + u32::from(scale.follow_up),
            RequestBudget::PerDeviceGroupPage => (1 + scale.shards) * scale.pages.max(1),
            RequestBudget::PerDayShardPlusDevices => {
                scale.days.max(1) * scale.shards.max(1) + scale.devices
            }
            RequestBudget::BatchOf25Plus(extra) => scale.batch_items.div_ceil(25) + extra,
            RequestBudget::BatchOf25PlusTwin(extra) => {
                scale.batch_items.div_ceil(25) + extra + scale.twin
            }
            RequestBudget::FixedPlusTwin(n) => n + scale.twin,
            RequestBudget::FixedPlusPlacedStateAndTwin(n) => {
                n + u32::from(scale.follow_up) + scale.twin
            }
            RequestBudget::RolloutPages => 1 + 3 * scale.shards + 4 * scale.pages + scale.devices,
            RequestBudget::DueShardPages => {
                scale.shards.max(1) * scale.pages.max(1) + scale.batch_items + scale.devices
            }
            RequestBudget::FixedPlusShardPagesAndAlarms(n) => {
                n + scale.shards.max(1) * scale.pages.max(1) + 2 * scale.devices
            }
            RequestBudget::SilentRollPages => {
                2 + scale.shards + 2 * scale.batch_items + 3 * scale.devices
            }
            RequestBudget::ZeroAtReadTime => 0,
            RequestBudget::FixedPlusPagesAndDevices(n) => n + scale.pages.max(1) + scale.devices,
            RequestBudget::PartitionedLogPages => scale.pages.max(1) * (1 + 2 * scale.shards),
            RequestBudget::FleetsEndpointsDeliveries => {
                scale.shards + 2 * scale.batch_items + scale.devices
            }
        }
    }

    /// Checks what a run issued (`used`) against the budget: request count, allowed
    /// operations, and the read-capacity ceiling where one is set.
    pub fn check(&self, used: &MeterSnapshot, scale: &BudgetScale) -> Result<(), BudgetViolation> {
        let fail = |reason: String| {
            Err(BudgetViolation {
                pattern: self.id,
                reason,
            })
        };
        for (name, count) in &used.operations {
            if !self.operations.iter().any(|op| op.name() == name) {
                return fail(format!(
                    "issued {count} {name}, allowed only {:?}",
                    self.operations
                ));
            }
        }
        let max = self.max_requests(scale);
        if used.requests() > max {
            return fail(format!(
                "issued {} requests {:?}, budget {max}",
                used.requests(),
                used.operations
            ));
        }
        if let Some(ceiling) = self.max_read_units {
            if used.read_units > ceiling + 1e-9 {
                return fail(format!("read {} RCU, ceiling {ceiling}", used.read_units));
            }
        }
        Ok(())
    }
}
