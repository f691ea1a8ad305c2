//! The case of summaries (AP-29): a month at hours of Alice's device 0, whose `power` the
//! fixture lays out as a meter reporting every minute would have it ([`MinuteMeter`]).

use shared::model::pattern_id::PatternId;
use shared::ops::series::{device_series, SeriesRequest};
use shared::{FleetError, FleetTable};

use super::{
    alice, alice_device, device_id, every_call, found, now, one, read, route, PatternCase,
};
use crate::api_event::ApiEvent;
use crate::minute_meter::MinuteMeter;

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
            let series = device_series(table, &alice()?, &alice_device(0)?, &request).await?;
            found(series.buckets.len() == 720, PatternId::DeviceSeries)
        })
    },
    call: read(
        "GET /me/devices/{deviceId}/series?type=power (30 days: 720 hours)",
        |_, _| {
            let device = device_id(0);
            every_call(
                ApiEvent::new(
                    route(PatternId::DeviceSeries),
                    format!("/me/devices/{device}/series"),
                )
                .caller(super::ALICE)
                .param("deviceId", &device)
                .query("type", "power")
                .query("from", MONTH.0)
                .query("to", MONTH.1),
            )
        },
    ),
};

/// Lays out 40 days of Alice's device 0's `power` summaries up to the reference time (its
/// live state keeps the open part; its latest readings stay the seed's).
pub async fn seed_series_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    MinuteMeter::new(now().epoch_millis(), 40, false)
        .store(table, &alice()?, &alice_device(0)?, false)
        .await
}
