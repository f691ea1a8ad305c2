//! Where an alarm is in its life, and a device's alarm statuses as its live state keeps them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::severity::Severity;
use crate::model::ids::{EventId, EventType};
use crate::model::readings::EventValue;
use crate::model::timestamp::Timestamp;

/// Where an alarm is in its life: active -> acknowledged -> cleared, or active -> cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlarmState {
    /// Raised; nobody has acknowledged it.
    Active,
    /// Someone said they are on it; still not cleared.
    Acknowledged,
    /// The condition cleared (or the device reported again).
    Cleared,
}

impl AlarmState {
    /// The stored and JSON spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            AlarmState::Active => "active",
            AlarmState::Acknowledged => "acknowledged",
            AlarmState::Cleared => "cleared",
        }
    }
}

/// One reading as an alarm shows it (the one that raised or cleared it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlarmReading {
    /// Event id.
    pub id: EventId,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// Value.
    pub value: EventValue,
    /// When it was taken.
    pub at: Timestamp,
}

/// A device's alarm status for one source, kept on its live state while it matters: the alarm
/// is open, or the condition holds but not yet for the rule's duration. Compact names: the
/// live state is rewritten on every batch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AlarmStatus {
    /// When the open alarm was raised (epoch ms); `None`: no open alarm.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub raised_at: Option<i64>,
    /// The open alarm's severity.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Since when the condition has held without the alarm being raised yet (epoch ms).
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub pending_since: Option<i64>,
}

impl AlarmStatus {
    /// Whether this status says anything (otherwise it is not kept).
    pub fn matters(&self) -> bool {
        self.raised_at.is_some() || self.pending_since.is_some()
    }
}

/// A device's alarm statuses by source (`offline` or a rule id).
pub type AlarmStatuses = BTreeMap<String, AlarmStatus>;

/// The open alarms of a device's statuses: how many, and the highest severity.
pub fn open_summary(statuses: &AlarmStatuses) -> (usize, Option<Severity>) {
    let open: Vec<Severity> = statuses
        .values()
        .filter(|s| s.raised_at.is_some())
        .filter_map(|s| s.severity)
        .collect();
    (open.len(), open.iter().max().copied())
}
