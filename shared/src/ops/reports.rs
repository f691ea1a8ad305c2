//! Daily reports: `REPORT#{day}` / `REPORT` (AP-15 reads one; the daily analytics run writes it).

use serde::{Deserialize, Serialize};

use super::s;
use crate::catalog::{
    implemented_by, AccessPattern, Frequency, Operation, PatternId, RequestBudget,
};
use crate::error::{FleetError, ValidationError};
use crate::items::EntityType;
use crate::keys::{is_day, report_pk, REPORT_SK};
use crate::schema::{PK, SK};
use crate::table::{sdk_error, FleetTable};

/// The stored report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportItem {
    /// `REPORT#{day}`.
    #[serde(rename = "PK")]
    pub pk: String,
    /// `REPORT`.
    #[serde(rename = "SK")]
    pub sk: String,
    /// Always [`EntityType::Report`].
    pub entity_type: EntityType,
    /// `YYYY-MM-DD`.
    pub day: String,
    /// The report as the API returns it, as JSON text: opaque to DynamoDB, and read back
    /// exactly as written (a DynamoDB number would turn `7.0` into `7`).
    pub report_json: String,
}

/// Validates a report date (`YYYY-MM-DD`, a real calendar day).
pub fn parse_day(field: &str, value: &str) -> Result<String, ValidationError> {
    if is_day(value) {
        Ok(value.to_string())
    } else {
        Err(ValidationError::new(
            field,
            "must be a date such as 2024-04-10",
        ))
    }
}

/// Stores the report for `day` (replacing an earlier run's: reports are idempotent per day).
pub async fn put_report(
    table: &FleetTable,
    day: &str,
    report: serde_json::Value,
) -> Result<(), FleetError> {
    let item = ReportItem {
        pk: report_pk(day),
        sk: REPORT_SK.to_string(),
        entity_type: EntityType::Report,
        day: day.to_string(),
        report_json: report.to_string(),
    };
    super::put_item(table, &item).await
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
pub async fn get_report(
    table: &FleetTable,
    day: &str,
) -> Result<Option<serde_json::Value>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .key(PK, s(report_pk(day)))
        .key(SK, s(REPORT_SK))
        .send()
        .await
        .map_err(sdk_error)?;
    out.item
        .map(|item| -> Result<serde_json::Value, FleetError> {
            let r: ReportItem = serde_dynamo::from_item(item)?;
            serde_json::from_str(&r.report_json).map_err(FleetError::internal)
        })
        .transpose()
}
