//! The case of summaries (AP-29): a month at hours of Bob's device 0, whose `power` the
//! fixture lays out as a meter reporting every minute would have it ([`MinuteMeter`]). Bob's,
//! so Alice's dashboard (AP-DASH's case) stays the reference workload it was.

use shared::model::ids::{DeviceId, UserId};
use shared::model::pattern_id::PatternId;
use shared::ops::series::{device_series, SeriesRequest};
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
