//! Daily reports: `REPORT#{day}` / `REPORT` (AP-15 reads one; the daily analytics run writes it).

use serde::{Deserialize, Serialize};

use super::analytics::DailyReport;
use crate::model::entity::Entity;
use crate::model::entity::EntityType;
use crate::model::error::FleetError;
use crate::model::keys::ItemKey;
use crate::model::pattern_id::PatternId;
use crate::model::timestamp::Day;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::table::{sdk_error, FleetTable};

/// The stored report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportItem {
    /// The report's day.
    pub day: Day,
    /// The report as the API returns it, as JSON text: opaque to DynamoDB, and read back
    /// exactly as written (a DynamoDB number would turn `7.0` into `7`).
    pub report_json: String,
}

impl Entity for ReportItem {
    const ENTITY_TYPE: EntityType = EntityType::Report;
    fn item_key(&self) -> ItemKey {
        ItemKey::Report { day: self.day }
    }
}

/// Stores the report (replacing an earlier run's for the same day: reports are idempotent
/// per day).
pub async fn put_report(table: &FleetTable, report: &DailyReport) -> Result<(), FleetError> {
    let item = ReportItem {
        day: report.date,
        report_json: serde_json::to_string(report).map_err(FleetError::internal)?,
    };
    crate::store::dynamo::put_item(table, &item).await
}

/// AP-15, implemented by [`get_report`].
pub const GET_REPORT: AccessPattern = AccessPattern {
    id: PatternId::Ap15,
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
