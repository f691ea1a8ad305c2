//! The access-pattern catalog: every way the system reads or writes the table, with the
//! operation(s) that serve it and its budget. A pattern is named by its [`PatternId`]; its
//! [`AccessPattern`] definition sits beside the function that implements it in
//! [`crate::ops`], and [`CATALOG`] collects them. Tests run each pattern on DynamoDB Local
//! (one case per pattern in the local tooling) and check what it issued against
//! [`AccessPattern::check`]; the budgets live with the definitions, not in the tests.

use crate::model::pattern_id::PatternId;
use crate::ops;
use crate::ops::pattern::AccessPattern;

/// Every access pattern of the system (docs/design.md, "Access patterns"), in id order. Each definition sits beside
/// the function that implements it in [`crate::ops`]; this list only collects them.
pub const CATALOG: &[AccessPattern] = &[
    ops::profile::GET_PROFILE,
    ops::dashboard::LIST_DEVICES,
    ops::devices::read::GET_DEVICE,
    ops::events::DEVICE_EVENTS,
    ops::events::USER_EVENTS,
    ops::dashboard::DASHBOARD,
    ops::devices::update::UPDATE_DEVICE,
    ops::devices::register::REGISTER_DEVICE,
    ops::devices::delete::DELETE_DEVICE,
    ops::events::EVENTS_BY_TYPE,
    ops::analytics::DEVICE_COUNT_BY_STATUS,
    ops::analytics::ACTIVE_USERS,
    ops::dashboard::DEVICES_WITH_TAG,
    ops::devices::by_status::DEVICES_BY_STATUS,
    ops::ingest::INGEST_BATCH,
    ops::reports::GET_REPORT,
    ops::profile::UPSERT_PROFILE,
    ops::credentials::ROTATE_TOKEN,
    ops::credentials::REVOKE_TOKEN,
    ops::twin::owner::SET_DESIRED,
    ops::twin::owner::QUEUE_COMMAND,
    ops::twin::owner::LIST_COMMANDS,
    ops::twin::device::SYNC_DEVICE,
    ops::twin::rollout::START_ROLLOUT,
    ops::twin::rollout::GET_ROLLOUT,
    ops::twin::rollout::ADVANCE_ROLLOUTS,
    ops::alarms::rules::CREATE_RULE,
    ops::alarms::rules::LIST_RULES,
    ops::alarms::rules::UPDATE_RULE,
    ops::alarms::rules::DELETE_RULE,
    ops::alarms::lifecycle::OWNER_ALARMS,
    ops::alarms::lifecycle::DEVICE_ALARMS,
    ops::alarms::lifecycle::ACKNOWLEDGE_ALARM,
    ops::alarms::lifecycle::OPEN_ALARMS,
    ops::alarms::watch::OFFLINE_CHECK,
    ops::alarms::watch::ALARM_REMINDERS,
    ops::series::DEVICE_SERIES,
    ops::ingest::silent::SILENT_ROLLS,
    ops::retention::SET_RETENTION,
    ops::retention::GET_RETENTION,
    ops::devices::r#move::MOVE_DEVICE,
    ops::orgs::manage::CREATE_ORG,
    ops::orgs::manage::MY_ORGS,
    ops::orgs::manage::GET_ORG,
    ops::orgs::manage::RENAME_ORG,
    ops::orgs::manage::DELETE_ORG,
    ops::orgs::members::ORG_MEMBERS,
    ops::orgs::members::CHANGE_MEMBER_ROLE,
    ops::orgs::members::REMOVE_MEMBER,
    ops::orgs::invitations::INVITE,
    ops::orgs::invitations::ORG_INVITATIONS,
    ops::orgs::invitations::REVOKE_INVITATION,
    ops::orgs::invitations::ACCEPT_INVITATION,
    ops::orgs::access::MEMBER_ROLE,
    ops::webhooks::endpoints::CREATE_WEBHOOK,
    ops::webhooks::endpoints::LIST_WEBHOOKS,
    ops::webhooks::endpoints::GET_WEBHOOK,
    ops::webhooks::endpoints::UPDATE_WEBHOOK,
    ops::webhooks::endpoints::DELETE_WEBHOOK,
    ops::webhooks::endpoints::ROTATE_WEBHOOK_SECRET,
    ops::webhooks::endpoints::CONFIRM_WEBHOOK,
    ops::webhooks::endpoints::TEST_WEBHOOK,
    ops::webhooks::delivery_log::WEBHOOK_DELIVERIES,
    ops::webhooks::delivery_log::REDELIVER_WEBHOOK,
    ops::webhooks::deliveries::DELIVERY_ATTEMPT,
    ops::webhooks::alarm_notices::ALARM_WEBHOOKS,
    ops::firmware::CREATE_FIRMWARE,
    ops::firmware::GET_FIRMWARE,
    ops::firmware::LIST_FIRMWARE,
    ops::firmware::DELETE_FIRMWARE,
    ops::firmware::keys::SET_SIGNING_KEY,
    ops::twin::rollout::START_FIRMWARE_ROLLOUT,
    ops::twin::rollout::PAUSE_ROLLOUT,
    ops::twin::rollout::RESUME_ROLLOUT,
    ops::twin::rollout::CANCEL_ROLLOUT,
    ops::twin::rollout::LIST_ROLLOUTS,
    ops::twin::firmware_offer::DEVICE_FIRMWARE,
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

    use crate::ops::pattern::BudgetScale;
    use crate::store::metrics::MeterSnapshot;

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
        for id in PatternId::all() {
            let definitions = CATALOG.iter().filter(|p| p.id == id).count();
            assert_eq!(definitions, 1, "{id} has {definitions} definitions");
            assert_eq!(id.definition().id, id);
        }
        let ids: Vec<_> = CATALOG.iter().map(|p| p.id).collect();
        assert_eq!(
            ids,
            PatternId::all().collect::<Vec<_>>(),
            "CATALOG lists the patterns in id order"
        );
    }

    #[test]
    fn ids_read_back_from_their_text() {
        for id in PatternId::all() {
            assert_eq!(id.to_string().parse::<PatternId>(), Ok(id));
            assert_eq!(serde_json::to_value(id).unwrap(), id.to_string());
        }
        assert_eq!(PatternId::Dashboard.to_string(), "AP-DASH");
        assert_eq!(PatternId::DeviceEvents.to_string(), "AP-04");
        assert!("AP-99".parse::<PatternId>().is_err());
        assert!("ap-04".parse::<PatternId>().is_err());
    }

    #[test]
    fn each_definition_names_the_function_and_file_that_implement_it() {
        let events = PatternId::DeviceEvents.definition().implemented_by;
        assert_eq!(events.path(), "shared::ops::events::device_events");
        assert_eq!(events.file, "shared/src/ops/events.rs");
        let ingest = PatternId::IngestEvents.definition().implemented_by;
        assert_eq!(ingest.path(), "shared::ops::ingest::Ingestor::ingest");
        for p in CATALOG {
            let source = p.implemented_by;
            assert!(source.module.starts_with("shared::ops::"), "{}", p.id);
            // A module named by a keyword (`r#move`) is its file without the `r#`.
            let file = source
                .module
                .replace("r#", "")
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
        let ingest = PatternId::IngestEvents.definition();
        let scale = |n| BudgetScale {
            batch_items: n,
            ..BudgetScale::one()
        };
        assert_eq!(ingest.max_requests(&scale(1)), 4);
        assert_eq!(ingest.max_requests(&scale(25)), 4);
        assert_eq!(ingest.max_requests(&scale(26)), 5);
        assert_eq!(ingest.max_requests(&scale(100)), 7);
        let by_type = PatternId::EventsByType.definition();
        let s = BudgetScale {
            days: 3,
            shards: 8,
            devices: 5,
            ..BudgetScale::one()
        };
        assert_eq!(by_type.max_requests(&s), 29);
        let update = PatternId::UpdateDevice.definition();
        assert_eq!(update.max_requests(&BudgetScale::one()), 2);
        let sync = BudgetScale {
            follow_up: true,
            ..BudgetScale::one()
        };
        assert_eq!(update.max_requests(&sync), 3);
        // The dashboard: one Query per page, plus one BatchGetItem on pages holding devices
        // placed on another of their owner's partitions.
        let dash = PatternId::Dashboard.definition();
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
        assert_eq!(PatternId::UserEvents.definition().max_requests(&group), 11);
    }

    #[test]
    fn check_rejects_extra_requests_wrong_operations_and_excess_capacity() {
        let dash = PatternId::Dashboard.definition();
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
            .check(&used(&[("Query", 1)], 2.0), &BudgetScale::one())
            .unwrap_err();
        assert!(err.reason.contains("RCU"), "{err}");
    }
}
