//! The access-pattern catalog: every way the system reads or writes the table, with the
//! operation(s) that serve it and its budget. Tests run each implemented pattern on DynamoDB
//! Local and check what it issued against [`AccessPattern::check`]; the budgets live here,
//! not in the tests.

use std::fmt;

use crate::metrics::MeterSnapshot;
use crate::schema::{GSI1, GSI2};

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

/// One access pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessPattern {
    /// Stable id (`AP-03`).
    pub id: &'static str,
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
    /// The function in `shared::ops` that implements it, once implemented.
    pub implemented_by: Option<&'static str>,
}

/// A pattern that issued more than its budget allows, or an operation it may not use.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetViolation {
    /// The pattern.
    pub pattern: &'static str,
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

use Frequency::{Analytics, Critical, Important};
use Operation::*;

/// Upsert of the caller's profile (`PUT /me`).
pub const PROFILE_UPSERT: AccessPattern = AccessPattern {
    id: "AP-16",
    description: "create or update the caller's profile",
    frequency: Important,
    operations: &[UpdateItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = PROFILE",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    implemented_by: Some("ops::profile::upsert_profile"),
};

/// Every access pattern of the system (DESIGN §2), in id order.
pub const CATALOG: &[AccessPattern] = &[
    AccessPattern {
        id: "AP-01",
        description: "user profile",
        frequency: Critical,
        operations: &[GetItem],
        index: None,
        key_condition: "PK = USER#{userId}, SK = PROFILE",
        budget: RequestBudget::Fixed(1),
        max_read_units: Some(0.5),
        implemented_by: Some("ops::profile::get_profile"),
    },
    AccessPattern {
        id: "AP-02",
        description: "a user's devices, paged",
        frequency: Critical,
        operations: &[Query],
        index: None,
        key_condition: "PK = USER#{userId} AND begins_with(SK, DEVICE#)",
        budget: RequestBudget::PerPage(1),
        max_read_units: None,
        implemented_by: Some("ops::dashboard::list_devices"),
    },
    AccessPattern {
        id: "AP-03",
        description: "one device",
        frequency: Critical,
        operations: &[GetItem],
        index: None,
        key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}",
        budget: RequestBudget::Fixed(1),
        max_read_units: Some(1.0),
        implemented_by: Some("ops::devices::get_device"),
    },
    AccessPattern {
        id: "AP-04",
        description: "a device's events in a time range, newest first, paged",
        frequency: Critical,
        operations: &[Query, GetItem],
        index: None,
        key_condition: "PK = USER#{userId}#DEVICE#{deviceId} AND SK BETWEEN EVENT#{from} AND EVENT#{to}~",
        budget: RequestBudget::PerPagePlusEmptyCheck(1),
        max_read_units: None,
        implemented_by: Some("ops::events::device_events"),
    },
    AccessPattern {
        id: "AP-05",
        description: "a user's events across all devices in a time range",
        frequency: Important,
        operations: &[Query],
        index: Some(GSI2),
        key_condition: "GSI2PK = OWNER#{userId}#{shard} AND GSI2SK BETWEEN {from} AND {to}~",
        budget: RequestBudget::PerShardPage,
        max_read_units: None,
        implemented_by: Some("ops::events::user_events"),
    },
    AccessPattern {
        id: "AP-DASH",
        description: "dashboard: profile and every device with its latest reading per type and last 10 events",
        frequency: Critical,
        operations: &[Query],
        index: None,
        key_condition: "PK = USER#{userId} AND SK BETWEEN DEVICE# AND PROFILE",
        budget: RequestBudget::Fixed(1),
        max_read_units: Some(2.5),
        implemented_by: Some("ops::dashboard::dashboard"),
    },
    AccessPattern {
        id: "AP-06",
        description: "update a device's status, name or tags (optimistic version, no read first)",
        frequency: Critical,
        operations: &[UpdateItem, TransactWriteItems],
        index: None,
        key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}, version = {If-Match}",
        budget: RequestBudget::FixedPlusSync(1),
        max_read_units: None,
        implemented_by: Some("ops::devices::update_device"),
    },
    AccessPattern {
        id: "AP-07",
        description: "register a device (device id unique across the table)",
        frequency: Important,
        operations: &[TransactWriteItems],
        index: None,
        key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION (attribute_not_exists) + device + tag links",
        budget: RequestBudget::Fixed(1),
        max_read_units: None,
        implemented_by: Some("ops::devices::register_device"),
    },
    AccessPattern {
        id: "AP-08",
        description: "delete a device and free its id (events purged by the next daily run)",
        frequency: Important,
        operations: &[UpdateItem, TransactWriteItems],
        index: None,
        key_condition: "PK = USER#{userId}, SK = DEVICE#{deviceId}; PK = DEVICE#{deviceId}, SK = REGISTRATION",
        budget: RequestBudget::Fixed(2),
        max_read_units: None,
        implemented_by: Some("ops::devices::delete_device"),
    },
    AccessPattern {
        id: "AP-09",
        description: "events of a type in a time range, all users (operators)",
        frequency: Analytics,
        operations: &[Query],
        index: Some(GSI1),
        key_condition: "GSI1PK = TYPE#{type}#{day}#{shard} AND GSI1SK BETWEEN {from} AND {to}~",
        budget: RequestBudget::PerDayShard,
        max_read_units: None,
        implemented_by: Some("ops::events::events_by_type"),
    },
    AccessPattern {
        id: "AP-10",
        description: "device count by status",
        frequency: Analytics,
        operations: &[],
        index: None,
        key_condition: "daily report",
        budget: RequestBudget::ZeroAtReadTime,
        max_read_units: None,
        implemented_by: Some("ops::analytics::run_daily_report"),
    },
    AccessPattern {
        id: "AP-11",
        description: "active users in the last 30 days",
        frequency: Analytics,
        operations: &[],
        index: None,
        key_condition: "daily report",
        budget: RequestBudget::ZeroAtReadTime,
        max_read_units: None,
        implemented_by: Some("ops::analytics::run_daily_report"),
    },
    AccessPattern {
        id: "AP-12",
        description: "a user's devices with a tag",
        frequency: Important,
        operations: &[Query],
        index: None,
        key_condition: "PK = USER#{userId} AND begins_with(SK, TAG#{tag}#)",
        budget: RequestBudget::PerPage(1),
        max_read_units: None,
        implemented_by: Some("ops::dashboard::devices_with_tag"),
    },
    AccessPattern {
        id: "AP-13",
        description: "devices with a status seen since a time (operators)",
        frequency: Analytics,
        operations: &[Query],
        index: Some(GSI1),
        key_condition: "GSI1PK = STATUS#{status}#{shard} AND GSI1SK >= SEEN#{since}",
        budget: RequestBudget::PerShardPage,
        max_read_units: None,
        implemented_by: Some("ops::fleet::devices_by_status"),
    },
    AccessPattern {
        id: "AP-14",
        description: "ingest a batch of up to 100 events for one device",
        frequency: Critical,
        operations: &[GetItem, BatchWriteItem, UpdateItem],
        index: None,
        key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION; events; device item",
        budget: RequestBudget::BatchOf25Plus(3),
        max_read_units: None,
        implemented_by: Some("ops::ingest::Ingestor::ingest"),
    },
    AccessPattern {
        id: "AP-15",
        description: "the daily report for a date",
        frequency: Analytics,
        operations: &[GetItem],
        index: None,
        key_condition: "PK = REPORT#{day}, SK = REPORT",
        budget: RequestBudget::Fixed(1),
        max_read_units: None,
        implemented_by: Some("ops::reports::get_report"),
    },
    PROFILE_UPSERT,
];

/// The pattern with `id`.
pub fn pattern(id: &str) -> Option<&'static AccessPattern> {
    CATALOG.iter().find(|p| p.id == id)
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
        }
    }

    #[test]
    fn ids_are_unique_and_every_design_pattern_is_listed() {
        let mut ids: Vec<_> = CATALOG.iter().map(|p| p.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), CATALOG.len());
        for id in [
            "AP-01", "AP-02", "AP-03", "AP-04", "AP-05", "AP-DASH", "AP-06", "AP-07", "AP-08",
            "AP-09", "AP-10", "AP-11", "AP-12", "AP-13", "AP-14", "AP-15",
        ] {
            assert!(pattern(id).is_some(), "{id} missing");
        }
    }

    #[test]
    fn budgets_scale_as_documented() {
        let ingest = pattern("AP-14").unwrap();
        let scale = |n| BudgetScale {
            batch_items: n,
            ..BudgetScale::one()
        };
        assert_eq!(ingest.max_requests(&scale(1)), 4);
        assert_eq!(ingest.max_requests(&scale(25)), 4);
        assert_eq!(ingest.max_requests(&scale(26)), 5);
        assert_eq!(ingest.max_requests(&scale(100)), 7);
        let by_type = pattern("AP-09").unwrap();
        let s = BudgetScale {
            days: 3,
            shards: 8,
            ..BudgetScale::one()
        };
        assert_eq!(by_type.max_requests(&s), 24);
        let update = pattern("AP-06").unwrap();
        assert_eq!(update.max_requests(&BudgetScale::one()), 1);
        let sync = BudgetScale {
            follow_up: true,
            ..BudgetScale::one()
        };
        assert_eq!(update.max_requests(&sync), 2);
    }

    #[test]
    fn check_rejects_extra_requests_wrong_operations_and_excess_capacity() {
        let dash = pattern("AP-DASH").unwrap();
        assert!(dash
            .check(&used(&[("Query", 1)], 2.0), &BudgetScale::one())
            .is_ok());
        let err = dash
            .check(&used(&[("Query", 2)], 2.0), &BudgetScale::one())
            .unwrap_err();
        assert!(err.reason.contains("budget 1"), "{err}");
        let err = dash
            .check(&used(&[("Scan", 1)], 2.0), &BudgetScale::one())
            .unwrap_err();
        assert!(err.reason.contains("Scan"), "{err}");
        let err = dash
            .check(&used(&[("Query", 1)], 15.0), &BudgetScale::one())
            .unwrap_err();
        assert!(err.reason.contains("RCU"), "{err}");
    }
}
