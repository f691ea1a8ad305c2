//! Daily reports: `REPORT#{day}` / `REPORT` (AP-15 reads one; the daily analytics run writes it).

use super::analytics::DailyReport;
use crate::model::entities::report::ReportItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::pattern_id::PatternId;
use crate::model::timestamp::Day;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::table::{sdk_error, FleetTable};

/// AP-15, implemented by [`get_report`].
pub const GET_REPORT: AccessPattern = AccessPattern {
    id: PatternId::DailyReport,
    description: "the daily report for a date",
    frequency: Frequency::Analytics,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = REPORT#{day}, SK = REPORT",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("GET /admin/reports/{date}"),
    implemented_by: implemented_by!(get_report),
};

/// AP-15: the report for `day`, or `None` until the daily run has written it. One GetItem.
pub async fn get_report(table: &FleetTable, day: &Day) -> Result<Option<DailyReport>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::Report { day: *day }.attributes()))
        .send()
        .await
        .map_err(sdk_error)?;
    out.item
        .map(|item| -> Result<DailyReport, FleetError> {
            let stored = ReportItem::from_item(item)?;
            serde_json::from_str(&stored.report_json).map_err(FleetError::internal)
        })
        .transpose()
}
