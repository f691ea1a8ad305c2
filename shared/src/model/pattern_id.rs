//! Which access pattern: the typed id that definitions, cursors, contract runs and bench cases
//! name. Below the catalog, so cursors (model) and the operations (ops) can name a pattern.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// Which access pattern: the typed id every definition, cursor, contract run and bench case
/// names. `AP-xx` text exists only here (its [`Display`](fmt::Display) and
/// [`FromStr`]); cursors carry that text, so their wire format does not depend on this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PatternId {
    /// AP-01: user profile.
    Ap01,
    /// AP-02: a user's devices, paged.
    Ap02,
    /// AP-03: one device.
    Ap03,
    /// AP-04: a device's events in a time range.
    Ap04,
    /// AP-05: a user's events across all devices.
    Ap05,
    /// AP-DASH: the dashboard.
    ApDash,
    /// AP-06: update a device.
    Ap06,
    /// AP-07: register a device.
    Ap07,
    /// AP-08: delete a device.
    Ap08,
    /// AP-09: events of a type, all users.
    Ap09,
    /// AP-10: device count by status.
    Ap10,
    /// AP-11: active users in the last 30 days.
    Ap11,
    /// AP-12: a user's devices with a tag.
    Ap12,
    /// AP-13: devices with a status seen since a time.
    Ap13,
    /// AP-14: ingest a batch of events.
    Ap14,
    /// AP-15: the daily report.
    Ap15,
    /// AP-16: create or update the caller's profile.
    Ap16,
    /// AP-17: rotate a device's token.
    Ap17,
    /// AP-18: revoke a device's tokens.
    Ap18,
}

impl PatternId {
    /// Every pattern, in catalog order.
    pub const ALL: [PatternId; 19] = [
        PatternId::Ap01,
        PatternId::Ap02,
        PatternId::Ap03,
        PatternId::Ap04,
        PatternId::Ap05,
        PatternId::ApDash,
        PatternId::Ap06,
        PatternId::Ap07,
        PatternId::Ap08,
        PatternId::Ap09,
        PatternId::Ap10,
        PatternId::Ap11,
        PatternId::Ap12,
        PatternId::Ap13,
        PatternId::Ap14,
        PatternId::Ap15,
        PatternId::Ap16,
        PatternId::Ap17,
        PatternId::Ap18,
    ];

    /// The stable text id (`AP-04`), as docs, logs and cursors spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            PatternId::Ap01 => "AP-01",
            PatternId::Ap02 => "AP-02",
            PatternId::Ap03 => "AP-03",
            PatternId::Ap04 => "AP-04",
            PatternId::Ap05 => "AP-05",
            PatternId::ApDash => "AP-DASH",
            PatternId::Ap06 => "AP-06",
            PatternId::Ap07 => "AP-07",
            PatternId::Ap08 => "AP-08",
            PatternId::Ap09 => "AP-09",
            PatternId::Ap10 => "AP-10",
            PatternId::Ap11 => "AP-11",
            PatternId::Ap12 => "AP-12",
            PatternId::Ap13 => "AP-13",
            PatternId::Ap14 => "AP-14",
            PatternId::Ap15 => "AP-15",
            PatternId::Ap16 => "AP-16",
            PatternId::Ap17 => "AP-17",
            PatternId::Ap18 => "AP-18",
        }
    }
}

impl fmt::Display for PatternId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no access pattern.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an access pattern id")]
pub struct UnknownPattern(pub String);

impl FromStr for PatternId {
    type Err = UnknownPattern;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PatternId::ALL
            .into_iter()
            .find(|id| id.as_str() == text)
            .ok_or_else(|| UnknownPattern(text.to_string()))
    }
}

/// Serialized as its text id, so reports keep `"id": "AP-04"`.
impl Serialize for PatternId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}
