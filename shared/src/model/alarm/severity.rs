//! How urgent an alarm is.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::error::ValidationError;

/// How urgent an alarm is. Ordered: `Critical` is the highest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Warning,
    /// Look at it soon.
    Minor,
    /// Look at it today.
    Major,
    /// Look at it now.
    Critical,
}

impl Severity {
    /// Every severity, highest first.
    pub const ALL: [Severity; 4] = [
        Severity::Critical,
        Severity::Major,
        Severity::Minor,
        Severity::Warning,
    ];

    /// The JSON and stored spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Major => "major",
            Severity::Minor => "minor",
            Severity::Warning => "warning",
        }
    }

    /// Parses a severity, reporting a bad one under `field`.
    pub fn parse_field(field: &str, value: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| {
                ValidationError::new(field, "must be one of critical, major, minor, warning")
            })
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
