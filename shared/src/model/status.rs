//! A device's status: what its owner says of it, and the GSI1 partition its live state is on.

use serde::{Deserialize, Serialize};

use crate::model::error::ValidationError;

/// Device status; `STATUS#{status}#{shard}` on GSI1 (on the device's live state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceStatus {
    /// In service (the status of a new device).
    Active,
    /// Switched off or retired.
    Inactive,
    /// Being serviced.
    Maintenance,
    /// Reporting a fault.
    Error,
}

impl DeviceStatus {
    /// Every status, in a stable order.
    pub const ALL: [DeviceStatus; 4] = [
        DeviceStatus::Active,
        DeviceStatus::Inactive,
        DeviceStatus::Maintenance,
        DeviceStatus::Error,
    ];

    /// The stored and API spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            DeviceStatus::Active => "active",
            DeviceStatus::Inactive => "inactive",
            DeviceStatus::Maintenance => "maintenance",
            DeviceStatus::Error => "error",
        }
    }

    /// Parses the API spelling; anything else is a 400 on `field`.
    pub fn parse_field(field: &str, value: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| {
                ValidationError::new(field, "must be one of active, inactive, maintenance, error")
            })
    }
}
