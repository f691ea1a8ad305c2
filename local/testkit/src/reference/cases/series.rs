//! The case of summaries (AP-29): a month at hours of Bob's device 0, whose `power` the
//! fixture lays out as a meter reporting every minute would have it ([`MinuteMeter`]). Bob's,
//! so Alice's dashboard (AP-DASH's case) stays the reference workload it was.

use shared::model::ids::{DeviceId, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::series::Resolution;
use shared::ops::ingest::silent::roll_silent_devices;
use shared::ops::pattern::BudgetScale;
use shared::ops::series::{device_series, SeriesRequest};
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use super::common::{every_call, found, one, read, route, PatternCase};
use crate::api_event::ApiEvent;
use crate::minute_meter::MinuteMeter;
use crate::reference::dataset::{now, BOB};

/// The device the fixture lays out.
const METER: &str = "ref-bob-dev-0";

fn bob_meter() -> Result<(UserId, DeviceId), FleetError> {
    Ok((UserId::parse(BOB)?, DeviceId::parse(METER)?))
}

/// The month the case reads: 30 days up to the reference time.
const MONTH: (&str, &str) = ("2026-10-21T12:00:00.000Z", "2026-11-20T12:00:00.000Z");

/// DeviceSeries: a month at hours of a device reporting every minute.
pub(super) const DEVICE_SERIES: PatternCase = PatternCase {
    id: PatternId::DeviceSeries,
    workload: "30 days of a device reporting every minute, at hours (720 buckets; auto)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let request = SeriesRequest::parse(
                &table.config,
                shared::model::timestamp::Timestamp::now(),
                Some("power"),
                Some(MONTH.0),
                Some(MONTH.1),
                None,
            )?;
            let (user, device) = bob_meter()?;
            let series = device_series(table, &user, &device, &request).await?;
            found(series.buckets.len() == 720, PatternId::DeviceSeries)
        })
    },
    call: read(
        "GET /me/devices/{deviceId}/series?type=power (30 days: 720 hours)",
        |_, _| {
            every_call(
                ApiEvent::new(
                    route(PatternId::DeviceSeries),
                    format!("/me/devices/{METER}/series"),
                )
                .caller(BOB)
                .param("deviceId", METER)
                .query("type", "power")
                .query("from", MONTH.0)
                .query("to", MONTH.1),
            )
        },
    ),
};

/// Lays out 40 days of Bob's device 0's `power` summaries up to the reference time (its
/// live state keeps the open part; its latest readings stay the seed's).
pub async fn seed_series_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    let (user, device) = bob_meter()?;
    MinuteMeter::new(now().epoch_millis(), 40, false)
        .store(table, &user, &device, false)
        .await
}

/// SilentRolls: the worker's walk the day after the reference day, once every device seen
/// before that day was walked: every `SEEN#` partition, and every device that reported on the
/// reference day rolled (its open buckets into blocks, its day rolled): the seeded devices
/// and the offline check's watched device.
pub(super) const SILENT_ROLLS: PatternCase = PatternCase {
    id: PatternId::SilentRolls,
    workload: "the walk the day after the reference day: every SEEN# partition, each device seen that day rolled (its buckets and its day)",
    scale: |shards| {
        let partitions = shared::model::entities::device_state::seen_partitions(shards).len();
        let reported = reported_on_the_reference_day();
        BudgetScale {
            shards: partitions as u32,
            // At most a page per device's partition: each partition holds under a page.
            batch_items: reported,
            devices: reported,
            ..BudgetScale::one()
        }
    },
    run: |table, _| {
        Box::pin(async move {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            // The walk up to the reference day, outside the meter: what runs before it did.
            RequestMeter::new()
                .scope(roll_silent_devices(table, now(), until))
                .await?;
            let next_day = now().plus_millis(Resolution::Day.millis() + 2 * 3_600_000);
            let run = roll_silent_devices(table, next_day, until).await?;
            found(
                run.finished
                    && run.devices_seen == reported_on_the_reference_day()
                    && run.devices_rolled == run.devices_seen,
                PatternId::SilentRolls,
            )
        })
    },
    call: None,
};

/// Devices that reported on the reference day: the dataset's seeded devices (each sent its
/// events at the reference time) and the offline check's watched device.
fn reported_on_the_reference_day() -> u32 {
    let seeded: usize = crate::reference::dataset::SEEDED_FLEETS
        .iter()
        .map(|(_, _, devices, _)| *devices)
        .sum();
    seeded as u32 + 1
}
