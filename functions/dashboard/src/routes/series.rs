//! A device's series of readings (AP-29).

use crate::adapters::{ok, Answer, ReadQuery};
use axum::extract::State;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::{DeviceIdPath, QueryParams};
use shared::model::timestamp::Timestamp;
use shared::ops::series;
use shared::ops::series::SeriesRequest;
use shared::FleetTable;

/// `GET /me/devices/{deviceId}/series` (AP-29).
pub(crate) async fn device_series(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let request = SeriesRequest::parse(
        &table.config,
        Timestamp::now(),
        q.event_type.as_deref(),
        q.from.as_deref(),
        q.to.as_deref(),
        q.resolution.as_deref(),
    )?;
    let found = series::device_series(&table, &fleet.owner, &id, &request).await?;
    ok(&found)
}
