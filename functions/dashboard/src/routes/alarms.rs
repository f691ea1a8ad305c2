//! Alarms: the owner's and a device's.

use crate::adapters::{limit, ok, Answer, ReadQuery};
use axum::extract::State;
use serde::Serialize;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::{DeviceIdPath, QueryParams};
use shared::ops::alarms::lifecycle;
use shared::FleetTable;

/// `{"alarms": [...], "cursor": ...}`: one page of alarms.
#[derive(Serialize)]
pub(crate) struct AlarmsPage<T> {
    pub(crate) alarms: Vec<T>,
    pub(crate) cursor: Option<String>,
}

/// `GET /me/alarms`: open first, then cleared, newest first within each.
pub(crate) async fn owner_alarms(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page =
        lifecycle::owner_alarms(&table, &fleet.owner, limit(&q)?, q.cursor.as_deref()).await?;
    ok(&AlarmsPage {
        alarms: page.items,
        cursor: page.cursor,
    })
}

/// `GET /me/devices/{deviceId}/alarms`: the device's alarm history, newest first.
pub(crate) async fn device_alarms(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let page = lifecycle::device_alarms(&table, &fleet.owner, &id, limit(&q)?, q.cursor.as_deref())
        .await?;
    ok(&AlarmsPage {
        alarms: page.items,
        cursor: page.cursor,
    })
}
