//! One case per access pattern on the reference dataset: what it runs (the workload), at what
//! scale its budget applies, how to run it through `shared::ops`, and the request that reaches
//! it through its function's route. The same table feeds the budget contract test
//! (`tests/it/budgets.rs`), `make docs` (`fleet_perf::model_docs`) and `make bench`
//! (`fleet_perf::bench::patterns`).
//!
//! The cases run in table order on one seeded table: reads first, then the writes, whose
//! versions and devices follow from the ones before (AP-06 changes the status at version 1,
//! then the tags at version 2; AP-08 deletes the device AP-07 registered).
//!
//! Each case sits in the module of its concern ([`devices`], [`events`], [`reports`],
//! [`profile`], [`credentials`], [`twin`], [`alarms`], [`series`], [`retention`], [`orgs`],
//! [`webhooks`], [`firmware`]) with the fixtures only it uses; [`common`] holds what they share, and this module
//! [`CASES`], the one list that fixes their order.

pub mod alarms;
mod common;
pub mod credentials;
pub mod devices;
pub mod events;
pub mod firmware;
pub mod orgs;
pub mod profile;
pub mod reports;
pub mod retention;
pub mod series;
pub mod twin;
pub mod webhooks;

pub use common::{Events, PatternCase, RouteCall, Run, RunFuture};

use shared::model::pattern_id::PatternId;
use shared::ops::pattern::BudgetScale;
use shared::store::metrics::{MeterSnapshot, RequestMeter};
use shared::{FleetError, FleetTable};

use crate::reference::dataset::Tokens;

/// This file, relative to the workspace root, for the docs' links.
pub const CASES_SOURCE: &str = file!();

/// Every case, in the order they run: reads, then writes that can follow one another.
pub static CASES: &[PatternCase] = &[
    profile::GET_PROFILE,
    devices::LIST_DEVICES,
    devices::GET_DEVICE,
    events::DEVICE_EVENTS,
    events::USER_EVENTS,
    devices::OWNER_DASHBOARD,
    series::DEVICE_SERIES,
    events::EVENTS_BY_TYPE,
    devices::DEVICES_BY_TAG,
    devices::DEVICES_BY_STATUS,
    reports::DAILY_REPORT,
    reports::DEVICE_COUNT_BY_STATUS,
    reports::ACTIVE_USERS,
    // Organizations' reads, on the reference organization.
    orgs::MEMBER_ROLE,
    orgs::MY_ORGS,
    orgs::GET_ORG,
    orgs::ORG_MEMBERS,
    orgs::ORG_INVITATIONS,
    profile::PUT_PROFILE,
    // The runs change device 0; the calls change devices 9 and 7, both at version 1 after the
    // seed. Device 9 leaves `active` for good on the first call (AP-13 then always finds 11);
    // device 7 has only the tag `home` and never gets `kitchen` (AP-12 always finds 5).
    devices::UPDATE_STATUS,
    devices::UPDATE_TAGS,
    devices::REGISTER_DEVICE,
    twin::SYNC_NOTHING_PENDING,
    // The device twin's owner patterns work on Alice's device 3 (the calls: on the `bench-{i}`
    // device the AP-07 call of the same round registered, before AP-08's deletes it); its
    // device side (AP-T4) first syncs with nothing pending, then gets this work.
    twin::SET_DESIRED,
    twin::QUEUE_COMMAND,
    twin::LIST_COMMANDS,
    devices::DELETE_DEVICE,
    // Token rotation and revocation work on Alice's device 8, which no other case ingests for.
    credentials::ROTATE_TOKEN,
    credentials::REVOKE_TOKEN,
    // The device side with work pending (the AP-T1 and AP-T2 cases set it on device 3): it
    // syncs (delivery), then reports and acknowledges.
    twin::SYNC_DELIVERS_PENDING,
    twin::SYNC_REPORTS_AND_ACKS,
    twin::START_ROLLOUT,
    twin::GET_ROLLOUT,
    twin::ADVANCE_ROLLOUTS,
    events::INGEST_EVENTS,
    // Alarms: a rule on Alice's device 2, changed, then an alarm of it acknowledged and the
    // lists read, then the rule deleted. Looking up the rule's id is outside the meter.
    alarms::CREATE_RULE,
    alarms::LIST_RULES,
    alarms::UPDATE_RULE,
    alarms::ACKNOWLEDGE_ALARM,
    alarms::OWNER_ALARMS,
    alarms::DEVICE_ALARMS,
    alarms::OPEN_ALARMS,
    alarms::DELETE_RULE,
    // The alarm watch's scheduled parts, last: they raise and remind on their own fixtures
    // (a device registered with an interval, an alarm with a due reminder), set up outside the
    // meter, and change nothing an earlier case reads.
    alarms::OFFLINE_CHECK,
    alarms::ALARM_REMINDERS,
    // Retention per device type, on Bob's thermostats (kept at the reference retention, so
    // nothing after them would notice), then read back.
    retention::SET_RETENTION,
    retention::GET_RETENTION,
    // Organizations' writes, last, leaving the reference organization's members as they were:
    // an invitation made then revoked; a newcomer who accepts one, has their role changed and
    // is removed; the admin's rename; an organization created then deleted.
    orgs::INVITE,
    orgs::REVOKE_INVITATION,
    orgs::ACCEPT_INVITATION,
    orgs::CHANGE_MEMBER_ROLE,
    orgs::REMOVE_MEMBER,
    orgs::RENAME_ORG,
    orgs::CREATE_ORG,
    orgs::DELETE_ORG,
    // A device registered outside the meter moves to an organization, last: nothing after it
    // reads Alice's fleet. Its call needs the route (device-updates) and an organization
    // Alice administers in the dataset.
    devices::MOVE_DEVICE,
    // Webhooks, on owners and endpoints of their own: the reads, then the changes, the log, a
    // test delivery and a redelivery, the worker's attempt and an alarm's fan-out.
    webhooks::CREATE_WEBHOOK,
    webhooks::LIST_WEBHOOKS,
    webhooks::GET_WEBHOOK,
    webhooks::UPDATE_WEBHOOK,
    webhooks::ROTATE_WEBHOOK_SECRET,
    webhooks::CONFIRM_WEBHOOK,
    // The log before the test delivery adds one of a random id (its partition, and so the
    // page's requests, would vary).
    webhooks::WEBHOOK_DELIVERIES,
    webhooks::TEST_WEBHOOK,
    webhooks::REDELIVER_WEBHOOK,
    webhooks::DELIVERY_ATTEMPT,
    webhooks::ALARM_WEBHOOKS,
    webhooks::DELETE_WEBHOOK,
    // Firmware, on owners of its own, after the rollout worker's case (AP-T7), which must not
    // walk their rollouts: an owner's package read and listed, a key set, a rollout of the
    // package started, paused, resumed, listed and cancelled, then the package deleted; and a
    // device's firmware. Their calls' rollouts come from `firmware::seed_rollout_fixtures`.
    firmware::CREATE_FIRMWARE,
    firmware::GET_FIRMWARE,
    firmware::LIST_FIRMWARE,
    firmware::SET_SIGNING_KEY,
    firmware::START_FIRMWARE_ROLLOUT,
    firmware::PAUSE_ROLLOUT,
    firmware::RESUME_ROLLOUT,
    firmware::LIST_ROLLOUTS,
    firmware::CANCEL_ROLLOUT,
    firmware::DELETE_FIRMWARE,
    firmware::DEVICE_FIRMWARE,
    // The worker's walk of devices gone silent, last of all: it rolls every seeded device to
    // the day after the reference day, after which a batch at the reference time is a late
    // one (a block read more than AP-14's budget).
    series::SILENT_ROLLS,
];

/// One case's run.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Pattern id.
    pub id: PatternId,
    /// What it issued.
    pub used: MeterSnapshot,
    /// The run's scale, for the budget.
    pub scale: BudgetScale,
    /// What was measured.
    pub workload: &'static str,
}

/// Runs every case once, in order, on the reference dataset (seeded by
/// [`seed`](super::seed), which gave `tokens`), each under its own meter.
pub async fn measure_patterns(
    table: &FleetTable,
    tokens: &Tokens,
) -> Result<Vec<Measurement>, FleetError> {
    let mut measurements = Vec::with_capacity(CASES.len());
    for case in CASES {
        let meter = RequestMeter::new();
        meter.clone().scope((case.run)(table, tokens)).await?;
        measurements.push(Measurement {
            id: case.id,
            used: meter.snapshot(),
            scale: (case.scale)(&table.config.shards),
            workload: case.workload,
        });
    }
    Ok(measurements)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::cases::common::{device_id, now, route};

    #[test]
    fn every_pattern_has_a_case_and_every_routed_pattern_a_call_on_its_route() {
        for id in PatternId::all() {
            let cases: Vec<_> = CASES.iter().filter(|c| c.id == id).collect();
            assert!(!cases.is_empty(), "{id} has no case");
            let routed = id.definition().route.is_some();
            for case in cases {
                assert_eq!(
                    case.call.is_some(),
                    routed,
                    "{id} ({}): a call exactly when the pattern has a route",
                    case.workload
                );
            }
        }
    }

    #[test]
    fn calls_go_to_the_route_of_their_pattern() {
        let tokens = Tokens::from([(device_id(1), "token".to_string())]);
        let from = now();
        for case in CASES {
            let Some(call) = &case.call else { continue };
            let event: serde_json::Value =
                serde_json::from_slice(&(call.events)(&tokens, from)(0)).expect("event JSON");
            assert_eq!(
                event["routeKey"],
                route(case.id),
                "{} {}",
                case.id,
                call.request
            );
        }
    }
}
