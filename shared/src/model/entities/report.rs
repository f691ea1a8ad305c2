//! A daily report: `REPORT#{day}` / `REPORT`.

use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Day;

/// A daily report: `REPORT#{day}` / `REPORT`, written by the daily run, read by AP-15.
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

/// Sort key of a daily report item.
pub const REPORT_SK: &str = "REPORT";

/// `REPORT#{day}`.
pub fn report_pk(day: &Day) -> String {
    format!("REPORT#{day}")
}

/// `REPORT#{day}` / `REPORT`.
pub fn primary_key(day: &Day) -> PrimaryKey {
    PrimaryKey {
        pk: report_pk(day),
        sk: REPORT_SK.to_string(),
    }
}

/// A report's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["REPORT", day], ["REPORT"]) => {
            Some(Day::parse_field("day", day).map(|day| ItemKey::Report { day }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "report",
    pk: "REPORT#${day}",
    sk: "REPORT",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
