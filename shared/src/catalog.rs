//! The access-pattern catalog: every way the system reads or writes the table, with the
//! operation(s) that serve it and its budget. A pattern is named by its [`PatternId`]; its
//! [`AccessPattern`] definition sits beside the function that implements it in
//! [`crate::ops`], and [`CATALOG`] collects them. Tests run each pattern on DynamoDB Local
//! (one case per pattern in the local tooling) and check what it issued against
//! [`AccessPattern::check`]; the budgets live with the definitions, not in the tests.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::metrics::MeterSnapshot;
use crate::ops;

/// Which access pattern: the typed id every definition, cursor, contract run and bench case
/// names. `AP-xx` text exists only here (its [`Display`](fmt::Display) and
/// [`FromStr`]); cursors carry that text, so their wire format does not depend on this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PatternId {
    /// AP-01: user profile.
    Ap01,
    /// AP-02: a user's devices, paged.
    Ap02,
    /// AP-03: one device.
    Ap03,
    /// AP-04: a device's events in a time range.
    Ap04,
    /// AP-05: a user's events across all devices.
    Ap05,
    /// AP-DASH: the dashboard.
    ApDash,
    /// AP-06: update a device.
    Ap06,
    /// AP-07: register a device.
    Ap07,
    /// AP-08: delete a device.
    Ap08,
    /// AP-09: events of a type, all users.
    Ap09,
    /// AP-10: device count by status.
    Ap10,
    /// AP-11: active users in the last 30 days.
    Ap11,
    /// AP-12: a user's devices with a tag.
    Ap12,
    /// AP-13: devices with a status seen since a time.
    Ap13,
    /// AP-14: ingest a batch of events.
    Ap14,
    /// AP-15: the daily report.
    Ap15,
    /// AP-16: create or update the caller's profile.
    Ap16,
    /// AP-17: rotate a device's token.
    Ap17,
    /// AP-18: revoke a device's tokens.
    Ap18,
}

impl PatternId {
    /// Every pattern, in catalog order.
    pub const ALL: [PatternId; 19] = [
        PatternId::Ap01,
        PatternId::Ap02,
        PatternId::Ap03,
        PatternId::Ap04,
        PatternId::Ap05,
        PatternId::ApDash,
        PatternId::Ap06,
        PatternId::Ap07,
        PatternId::Ap08,
        PatternId::Ap09,
        PatternId::Ap10,
        PatternId::Ap11,
        PatternId::Ap12,
        PatternId::Ap13,
        PatternId::Ap14,
        PatternId::Ap15,
        PatternId::Ap16,
        PatternId::Ap17,
        PatternId::Ap18,
    ];

    /// The stable text id (`AP-04`), as docs, logs and cursors spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            PatternId::Ap01 => "AP-01",
            PatternId::Ap02 => "AP-02",
            PatternId::Ap03 => "AP-03",
            PatternId::Ap04 => "AP-04",
            PatternId::Ap05 => "AP-05",
            PatternId::ApDash => "AP-DASH",
            PatternId::Ap06 => "AP-06",
            PatternId::Ap07 => "AP-07",
            PatternId::Ap08 => "AP-08",
            PatternId::Ap09 => "AP-09",
            PatternId::Ap10 => "AP-10",
            PatternId::Ap11 => "AP-11",
            PatternId::Ap12 => "AP-12",
            PatternId::Ap13 => "AP-13",
            PatternId::Ap14 => "AP-14",
            PatternId::Ap15 => "AP-15",
            PatternId::Ap16 => "AP-16",
            PatternId::Ap17 => "AP-17",
            PatternId::Ap18 => "AP-18",
        }
    }
}

impl fmt::Display for PatternId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no access pattern.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an access pattern id")]
pub struct UnknownPattern(pub String);

impl FromStr for PatternId {
    type Err = UnknownPattern;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PatternId::ALL
            .into_iter()
            .find(|id| id.as_str() == text)
            .ok_or_else(|| UnknownPattern(text.to_string()))
    }
}

/// Serialized as its text id, so reports keep `"id": "AP-04"`.
impl Serialize for PatternId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

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

/// How often a pattern runs (seed 000's prioritisation).
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
    /// One per shard per page.
    PerShardPage,
    /// This many per page, plus one BatchGetItem per page that holds devices whose live state
    /// is placed on another of their owner's partitions (large fleets only).
    PerPagePlusPlacedStates(u32),
    /// This many, plus one GetItem when the device's live state is placed on another of its
    /// owner's partitions (large fleets only).
    FixedPlusPlacedState(u32),
    /// Per page: one Query listing a group of the owner's devices, plus one Query per device
    /// of the group (`shards` in the scale counts the devices).
    PerDeviceGroupPage,
    /// One per (day, shard).
    PerDayShard,
    /// ceil(n/25) BatchWriteItem calls plus this many (registration read, device update, ...).
    BatchOf25Plus(u32),
    /// Served from the daily report: nothing at read time.
    ZeroAtReadTime,
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
    /// Whether the pattern's documented extra request applies: name, type or tags changed
    /// (FixedPlusSync), or the first page was empty (PerPagePlusEmptyCheck).
    pub follow_up: bool,
}

impl BudgetScale {
    /// A single-page, single-shard run.
    pub fn one() -> Self {
        Self {
            pages: 1,
            shards: 1,
            days: 1,
            batch_items: 0,
            follow_up: false,
        }
    }
}

/// Where a pattern is implemented: the function, its module and its source file, taken by
/// [`implemented_by!`](crate::catalog::implemented_by) from the definition's own module, so the
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
        $crate::catalog::Implementation {
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
            RequestBudget::PerShardPage => scale.shards.max(1) * scale.pages.max(1),
            RequestBudget::PerPagePlusPlacedStates(n) => {
                (n + u32::from(scale.follow_up)) * scale.pages.max(1)
            }
            RequestBudget::FixedPlusPlacedState(n) => n + u32::from(scale.follow_up),
            RequestBudget::PerDeviceGroupPage => (1 + scale.shards) * scale.pages.max(1),
            RequestBudget::PerDayShard => scale.days.max(1) * scale.shards.max(1),
            RequestBudget::BatchOf25Plus(extra) => scale.batch_items.div_ceil(25) + extra,
            RequestBudget::ZeroAtReadTime => 0,
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

/// Every access pattern of the system (DESIGN §2), in id order. Each definition sits beside
/// the function that implements it in [`crate::ops`]; this list only collects them.
pub const CATALOG: &[AccessPattern] = &[
    ops::profile::GET_PROFILE,
    ops::dashboard::LIST_DEVICES,
    ops::devices::GET_DEVICE,
    ops::events::DEVICE_EVENTS,
    ops::events::USER_EVENTS,
    ops::dashboard::DASHBOARD,
    ops::devices::UPDATE_DEVICE,
    ops::devices::REGISTER_DEVICE,
    ops::devices::DELETE_DEVICE,
    ops::events::EVENTS_BY_TYPE,
    ops::analytics::DEVICE_COUNT_BY_STATUS,
    ops::analytics::ACTIVE_USERS,
    ops::dashboard::DEVICES_WITH_TAG,
    ops::fleet::DEVICES_BY_STATUS,
    ops::ingest::Ingestor::INGEST_BATCH,
    ops::reports::GET_REPORT,
    ops::profile::UPSERT_PROFILE,
    ops::credentials::ROTATE_TOKEN,
    ops::credentials::REVOKE_TOKEN,
];

impl PatternId {
    /// This pattern's definition.
    pub fn definition(self) -> &'static AccessPattern {
        CATALOG
            .iter()
            .find(|p| p.id == self)
            .expect("every PatternId has a definition in CATALOG (checked by a unit test)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn used(ops: &[(&str, u32)], rcu: f64) -> MeterSnapshot {
        MeterSnapshot {
            operations: ops
                .iter()
                .map(|(n, c)| (n.to_string(), *c))
                .collect::<BTreeMap<_, _>>(),
            attempts: 0,
            read_units: rcu,
            write_units: 0.0,
            ..MeterSnapshot::default()
        }
    }

    #[test]
    fn every_pattern_id_has_exactly_one_definition_in_id_order() {
        for id in PatternId::ALL {
            let definitions = CATALOG.iter().filter(|p| p.id == id).count();
            assert_eq!(definitions, 1, "{id} has {definitions} definitions");
            assert_eq!(id.definition().id, id);
        }
        let ids: Vec<_> = CATALOG.iter().map(|p| p.id).collect();
        assert_eq!(
            ids,
            PatternId::ALL,
            "CATALOG lists the patterns in id order"
        );
    }

    #[test]
    fn ids_read_back_from_their_text() {
        for id in PatternId::ALL {
            assert_eq!(id.to_string().parse::<PatternId>(), Ok(id));
            assert_eq!(serde_json::to_value(id).unwrap(), id.to_string());
        }
        assert_eq!(PatternId::ApDash.to_string(), "AP-DASH");
        assert_eq!(PatternId::Ap04.to_string(), "AP-04");
        assert!("AP-99".parse::<PatternId>().is_err());
        assert!("ap-04".parse::<PatternId>().is_err());
    }

    #[test]
    fn each_definition_names_the_function_and_file_that_implement_it() {
        let events = PatternId::Ap04.definition().implemented_by;
        assert_eq!(events.path(), "shared::ops::events::device_events");
        assert_eq!(events.file, "shared/src/ops/events.rs");
        let ingest = PatternId::Ap14.definition().implemented_by;
        assert_eq!(ingest.path(), "shared::ops::ingest::Ingestor::ingest");
        for p in CATALOG {
            let source = p.implemented_by;
            assert!(source.module.starts_with("shared::ops::"), "{}", p.id);
            let file = source
                .module
                .replace("shared::", "shared/src/")
                .replace("::", "/");
            assert!(
                source.file == format!("{file}.rs") || source.file == format!("{file}/mod.rs"),
                "{}: {} is not the file of {}",
                p.id,
                source.file,
                source.module
            );
        }
    }

    #[test]
    fn budgets_scale_as_documented() {
        let ingest = PatternId::Ap14.definition();
        let scale = |n| BudgetScale {
            batch_items: n,
            ..BudgetScale::one()
        };
        assert_eq!(ingest.max_requests(&scale(1)), 4);
        assert_eq!(ingest.max_requests(&scale(25)), 4);
        assert_eq!(ingest.max_requests(&scale(26)), 5);
        assert_eq!(ingest.max_requests(&scale(100)), 7);
        let by_type = PatternId::Ap09.definition();
        let s = BudgetScale {
            days: 3,
            shards: 8,
            ..BudgetScale::one()
        };
        assert_eq!(by_type.max_requests(&s), 24);
        let update = PatternId::Ap06.definition();
        assert_eq!(update.max_requests(&BudgetScale::one()), 2);
        let sync = BudgetScale {
            follow_up: true,
            ..BudgetScale::one()
        };
        assert_eq!(update.max_requests(&sync), 3);
        // The dashboard: one Query per page, plus one BatchGetItem on pages holding devices
        // placed on another of their owner's partitions.
        let dash = PatternId::ApDash.definition();
        assert_eq!(dash.max_requests(&BudgetScale::one()), 1);
        let placed = BudgetScale {
            pages: 3,
            follow_up: true,
            ..BudgetScale::one()
        };
        assert_eq!(dash.max_requests(&placed), 6);
        // A user's events: the device group and one Query per device of it, per page.
        let group = BudgetScale {
            shards: 10,
            ..BudgetScale::one()
        };
        assert_eq!(PatternId::Ap05.definition().max_requests(&group), 11);
    }

    #[test]
    fn check_rejects_extra_requests_wrong_operations_and_excess_capacity() {
        let dash = PatternId::ApDash.definition();
        assert!(dash
            .check(&used(&[("Query", 1)], 1.0), &BudgetScale::one())
            .is_ok());
        let err = dash
            .check(&used(&[("Query", 2)], 1.0), &BudgetScale::one())
            .unwrap_err();
        assert!(err.reason.contains("budget 1"), "{err}");
        let err = dash
            .check(&used(&[("Scan", 1)], 1.0), &BudgetScale::one())
            .unwrap_err();
        assert!(err.reason.contains("Scan"), "{err}");
        let err = dash
            .check(&used(&[("Query", 1)], 1.5), &BudgetScale::one())
            .unwrap_err();
        assert!(err.reason.contains("RCU"), "{err}");
    }
}
