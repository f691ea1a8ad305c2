//! The cases of the daily report (AP-15) and the figures read from it (AP-10, AP-11).

use shared::model::pattern_id::PatternId;
use shared::ops::analytics::DailyReport;
use shared::ops::reports;
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use super::common::{day, every_call, found, one, read, route, PatternCase, OPERATOR};
use crate::api_event::ApiEvent;

/// DailyReport: the day's report.
pub(super) const DAILY_REPORT: PatternCase = PatternCase {
    id: PatternId::DailyReport,
    workload: "the day's report",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let report = reports::get_report(table, &day()?.from.day()).await?;
            let active = report.is_some_and(|r| r.devices.by_status.get("active") == Some(&12));
            found(active, PatternId::DailyReport)
        })
    },
    call: read("GET /admin/reports/{date}", |_, _| {
        every_call(
            ApiEvent::new(route(PatternId::DailyReport), "/admin/reports/2026-11-20")
                .operator(OPERATOR)
                .param("date", "2026-11-20"),
        )
    }),
};

/// DeviceCountByStatus: devices.byStatus of the AP-15 report (computed by the daily run).
pub(super) const DEVICE_COUNT_BY_STATUS: PatternCase = PatternCase {
    id: PatternId::DeviceCountByStatus,
    workload: "devices.byStatus of the AP-15 report (computed by the daily run)",
    scale: one,
    run: |table, _| {
        Box::pin(report_field(table, PatternId::DeviceCountByStatus, |r| {
            !r.devices.by_status.is_empty()
        }))
    },
    call: None,
};

/// ActiveUsers: users.active30d of the AP-15 report (computed by the daily run).
pub(super) const ACTIVE_USERS: PatternCase = PatternCase {
    id: PatternId::ActiveUsers,
    workload: "users.active30d of the AP-15 report (computed by the daily run)",
    scale: one,
    run: |table, _| {
        Box::pin(report_field(table, PatternId::ActiveUsers, |r| {
            r.users.active_30d > 0
        }))
    },
    call: None,
};

/// AP-10 and AP-11 are fields of the AP-15 report: they cost nothing of their own at read
/// time. The report is read outside the case's meter (that read is AP-15's, measured there).
async fn report_field(
    table: &FleetTable,
    id: PatternId,
    figure: fn(&DailyReport) -> bool,
) -> Result<(), FleetError> {
    let day = day()?.from.day();
    let report = RequestMeter::new()
        .scope(reports::get_report(table, &day))
        .await?;
    found(report.as_ref().is_some_and(figure), id)
}
