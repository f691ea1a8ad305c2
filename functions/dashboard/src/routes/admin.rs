//! Operator reads across users (`GET /admin/...`, admin group only).

use super::alarms::AlarmsPage;
use crate::adapters::{limit, ok, required, time_range, Answer, ReadQuery, DEFAULT_RANGE_SECONDS};
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shared::http::api::ApiError;
use shared::http::gateway::{Operator, PathParams, QueryParams};
use shared::model::alarm::severity::Severity;
use shared::model::ids::EventType;
use shared::model::status::DeviceStatus;
use shared::model::timestamp::{Day, Timestamp};
use shared::ops::alarms::lifecycle;
use shared::ops::{devices, events, reports};
use shared::FleetTable;

/// `{"devices": [...]}`: a listing without paging.
#[derive(Serialize)]
struct DevicesAnswer<T> {
    devices: Vec<T>,
}

/// `GET /admin/events?type=`.
pub(crate) async fn events_by_type(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let event_type = EventType::parse_field("type", required("type", q.event_type.clone())?)?;
    let found = events::events_by_type(&table, &event_type, time_range(&q)?, limit(&q)?).await?;
    ok(&found)
}

/// `GET /admin/devices?status=`.
pub(crate) async fn devices_by_status(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let status = DeviceStatus::parse_field("status", &required("status", q.status.clone())?)?;
    let since = match &q.seen_since {
        Some(t) => Timestamp::parse_field("seenSince", t)?,
        None => Timestamp::now().plus_seconds(-DEFAULT_RANGE_SECONDS),
    };
    let list = devices::by_status::devices_by_status(&table, status, since, limit(&q)?).await?;
    ok(&DevicesAnswer { devices: list })
}

#[derive(Deserialize)]
pub(crate) struct ReportPath {
    date: String,
}

/// `GET /admin/reports/{date}`.
pub(crate) async fn get_report(
    _: Operator,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<ReportPath>,
) -> Answer {
    let day = Day::parse_field("date", &path.date)?;
    let report = reports::get_report(&table, &day)
        .await?
        .ok_or(ApiError::not_found("report"))?;
    ok(&report)
}

/// `GET /admin/alarms?severity=`: open alarms of one severity across owners.
pub(crate) async fn open_alarms(
    _: Operator,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let severity = Severity::parse_field("severity", &required("severity", q.severity.clone())?)?;
    let page = lifecycle::open_alarms(&table, severity, limit(&q)?, q.cursor.as_deref()).await?;
    ok(&AlarmsPage {
        alarms: page.items,
        cursor: page.cursor,
    })
}
