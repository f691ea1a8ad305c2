//! What a case is ([`PatternCase`], [`RouteCall`]) and what the cases share: the dataset's
//! names, the reference day, the functions' routes. A leaf, so the cases by concern and the
//! ordered list in `mod.rs` do not use each other.

use std::future::Future;
use std::pin::Pin;

use shared::model::alarm::severity::Severity;
use shared::model::alarm::status::AlarmState;
use shared::model::entities::alarm::AlarmItem;
use shared::model::ids::{DeviceId, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::schema::Item;
use shared::model::shard::ShardCounts;
use shared::model::timestamp::Timestamp;
use shared::ops::events::TimeRange;
use shared::ops::pattern::BudgetScale;
use shared::{FleetError, FleetTable};

use crate::api_event::ApiEvent;
pub(super) use crate::reference::dataset::{now, Tokens, ALICE, BOB};

/// The operator who reads the `/admin` routes.
pub(super) const OPERATOR: &str = "ref-operator";
/// The reference day, as the read patterns ask for it.
pub(super) const DAY: (&str, &str) = ("2026-11-20T00:00:00.000Z", "2026-11-20T23:59:59.999Z");
/// Fixtures the bench's calls consume one per call (alarms, rules, invitations,
/// organizations): enough for `make bench`'s warm-up and calls.
pub(super) const FIXTURE_CALLS: usize = 400;
/// Template logical ids of the functions the calls go to.
pub(super) const DASHBOARD: &str = "DashboardFunction";
pub(super) const DEVICE_UPDATES: &str = "DeviceUpdatesFunction";
pub(super) const INGEST: &str = "IngestFunction";

/// A case's run in progress.
pub type RunFuture<'a> = Pin<Box<dyn Future<Output = Result<(), FleetError>> + Send + 'a>>;

/// Runs a case's workload on the seeded reference table (`tokens` from its seed), metered by
/// the caller; fails when the pattern returns something else than the dataset holds.
pub type Run = for<'a> fn(&'a FleetTable, &'a Tokens) -> RunFuture<'a>;

/// The events of a route call: given the reference tokens and the first timestamp new events
/// may take, the event of the `i`-th call (warm-up calls included).
pub type Events = fn(&Tokens, Timestamp) -> Box<dyn FnMut(usize) -> Vec<u8> + Send>;

/// One access pattern's case on the reference dataset.
pub struct PatternCase {
    /// The pattern.
    pub id: PatternId,
    /// What the run does, for the docs and the budget report.
    pub workload: &'static str,
    /// The run's scale, which turns the pattern's budget into a number of requests.
    pub scale: fn(&ShardCounts) -> BudgetScale,
    /// The run itself, through `shared::ops`.
    pub run: Run,
    /// The same pattern through its function's route (none for the report fields).
    pub call: Option<RouteCall>,
}

/// A pattern's request through the Lambda that serves it, repeatable for the benchmark.
pub struct RouteCall {
    /// The request, for the report.
    pub request: &'static str,
    /// Template logical id of the function that serves it.
    pub function: &'static str,
    /// The status every call must answer.
    pub expected: u16,
    /// The call's events.
    pub events: Events,
}

pub(super) fn one(_: &ShardCounts) -> BudgetScale {
    BudgetScale::one()
}

pub(super) fn alice() -> Result<UserId, FleetError> {
    Ok(UserId::parse(ALICE)?)
}

/// Alice's device `n` (`ref-alice-dev-{n}`).
pub(super) fn device_id(n: u32) -> String {
    format!("{ALICE}-dev-{n}")
}

pub(super) fn alice_device(n: u32) -> Result<DeviceId, FleetError> {
    Ok(DeviceId::parse(device_id(n))?)
}

pub(super) fn day() -> Result<TimeRange, FleetError> {
    Ok(TimeRange::new(
        Timestamp::parse_field("from", DAY.0)?,
        Timestamp::parse_field("to", DAY.1)?,
    )?)
}

/// The route key of `id` (every pattern with a call has one).
pub(super) fn route(id: PatternId) -> &'static str {
    id.definition().route.unwrap_or_default()
}

/// Asks for the reference day (`from` and `to`).
pub(super) trait OverTheDay {
    fn over_the_day(self) -> Self;
}

impl OverTheDay for ApiEvent {
    fn over_the_day(self) -> Self {
        self.query("from", DAY.0).query("to", DAY.1)
    }
}

/// The same event for every call.
pub(super) fn every_call(event: ApiEvent) -> Box<dyn FnMut(usize) -> Vec<u8> + Send> {
    Box::new(move |_| event.to_bytes())
}

/// A read through the dashboard function, answering 200.
pub(super) const fn read(request: &'static str, events: Events) -> Option<RouteCall> {
    Some(RouteCall {
        request,
        function: DASHBOARD,
        expected: 200,
        events,
    })
}

/// A write through the device-updates function.
pub(super) const fn write(
    request: &'static str,
    expected: u16,
    events: Events,
) -> Option<RouteCall> {
    Some(RouteCall {
        request,
        function: DEVICE_UPDATES,
        expected,
        events,
    })
}

/// An active alarm of `owner`'s device `device` (of the owner's first partition, named
/// "Sensor 0") from `source`, raised at `raised_at`, as the alarm fixtures write it directly:
/// not acknowledged, no reading, no reminder.
pub(super) fn active_alarm(
    owner: UserId,
    device: DeviceId,
    source: &str,
    rule_name: Option<String>,
    severity: Severity,
    raised_at: Timestamp,
) -> AlarmItem {
    AlarmItem {
        user_id: owner,
        device_id: device,
        partition: 0,
        device_name: "Sensor 0".into(),
        source: source.into(),
        rule_name,
        severity,
        state: AlarmState::Active,
        raised_at,
        cleared_at: None,
        acknowledged_at: None,
        reading: None,
        clear_reading: None,
        last_seen: None,
        remind_every_seconds: None,
        remind_at: None,
        reminders: 0,
        ttl: None,
    }
}

/// `Ok` when the run found what the dataset holds.
pub(super) fn found(ok: bool, id: PatternId) -> Result<(), FleetError> {
    if ok {
        Ok(())
    } else {
        Err(FleetError::internal(format!(
            "{id} returned an unexpected result on the reference dataset"
        )))
    }
}

/// Puts fixture `items` (written directly, not through the operations), 25 per
/// BatchWriteItem, retrying what DynamoDB leaves unprocessed.
pub(super) async fn put_fixtures(table: &FleetTable, items: Vec<Item>) -> Result<(), FleetError> {
    for chunk in items.chunks(25) {
        let mut pending = chunk
            .iter()
            .map(|item| {
                let put = aws_sdk_dynamodb::types::PutRequest::builder()
                    .set_item(Some(item.clone()))
                    .build()
                    .map_err(FleetError::internal)?;
                Ok(aws_sdk_dynamodb::types::WriteRequest::builder()
                    .put_request(put)
                    .build())
            })
            .collect::<Result<Vec<_>, FleetError>>()?;
        while !pending.is_empty() {
            let out = table
                .client
                .batch_write_item()
                .request_items(table.name(), pending)
                .send()
                .await
                .map_err(shared::store::table::sdk_error)?;
            pending = out
                .unprocessed_items
                .and_then(|mut u| u.remove(table.name()))
                .unwrap_or_default();
        }
    }
    Ok(())
}
