//! Events: a device's and the owner's.

use crate::adapters::{limit, ok, time_range, Answer, ReadQuery};
use axum::extract::State;
use serde::Serialize;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::{DeviceIdPath, QueryParams};
use shared::ops::events;
use shared::FleetTable;

/// `{"events": [...], "cursor": ...}`: one page of events.
#[derive(Serialize)]
struct EventsPage<T> {
    events: Vec<T>,
    cursor: Option<String>,
}

/// `GET /me/devices/{deviceId}/events`.
pub(crate) async fn device_events(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let range = time_range(&q)?;
    let page = events::device_events(
        &table,
        &fleet.owner,
        &id,
        range,
        limit(&q)?,
        q.cursor.as_deref(),
    )
    .await?;
    ok(&EventsPage {
        events: page.items,
        cursor: page.cursor,
    })
}

/// `GET /me/events`.
pub(crate) async fn user_events(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let range = time_range(&q)?;
    let page =
        events::user_events(&table, &fleet.owner, range, limit(&q)?, q.cursor.as_deref()).await?;
    ok(&EventsPage {
        events: page.items,
        cursor: page.cursor,
    })
}
