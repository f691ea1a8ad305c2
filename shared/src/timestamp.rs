//! Timestamps as stored in keys: RFC 3339 UTC with fixed millisecond precision
//! (`2024-04-10T10:00:00.000Z`), so that string order is time order.

use std::fmt;

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Duration, OffsetDateTime, UtcOffset};

use crate::error::ValidationError;

/// An instant with millisecond precision, always rendered in UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

const KEY_FORMAT: &[time::format_description::BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
const DAY_FORMAT: &[time::format_description::BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]");

impl Timestamp {
    /// The current time, truncated to milliseconds.
    pub fn now() -> Self {
        Self::from_datetime(OffsetDateTime::now_utc())
    }

    fn from_datetime(at: OffsetDateTime) -> Self {
        let at = at.to_offset(UtcOffset::UTC);
        let millis = at.millisecond();
        Self(
            at.replace_millisecond(millis)
                .expect("a millisecond taken from a valid time is valid"),
        )
    }

    /// Parses any RFC 3339 timestamp (any offset, any sub-second precision) and normalizes it
    /// to UTC milliseconds. Years outside 0000..=9999 are rejected so the string form keeps a
    /// fixed width.
    pub fn parse_field(field: &str, value: &str) -> Result<Self, ValidationError> {
        let at = OffsetDateTime::parse(value, &Rfc3339).map_err(|_| {
            ValidationError::new(
                field,
                "must be an RFC 3339 timestamp such as 2024-04-10T10:00:00.000Z",
            )
        })?;
        let at = Self::from_datetime(at);
        if !(0..=9999).contains(&at.0.year()) {
            return Err(ValidationError::new(field, "year must be 0000..9999"));
        }
        Ok(at)
    }

    /// Seconds since the Unix epoch (the format DynamoDB TTL expects).
    pub fn epoch_seconds(&self) -> i64 {
        self.0.unix_timestamp()
    }

    /// Builds a timestamp from Unix epoch milliseconds.
    pub fn from_epoch_millis(millis: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000)
            .ok()
            .map(Self::from_datetime)
    }

    /// The UTC day, `YYYY-MM-DD`.
    pub fn day(&self) -> String {
        self.0
            .format(DAY_FORMAT)
            .expect("a valid date always formats")
    }

    /// This instant moved by `seconds` (negative moves back).
    pub fn plus_seconds(&self, seconds: i64) -> Self {
        Self(self.0 + Duration::seconds(seconds))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self
            .0
            .format(KEY_FORMAT)
            .expect("a UTC time in 0000..9999 always formats");
        f.write_str(&text)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse_field("timestamp", &raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_offsets_and_precision_to_utc_millis() {
        let cases = [
            ("2024-04-10T10:00:00Z", "2024-04-10T10:00:00.000Z"),
            (
                "2024-04-10T12:00:00.123456+02:00",
                "2024-04-10T10:00:00.123Z",
            ),
            ("2024-04-10T10:00:00.5Z", "2024-04-10T10:00:00.500Z"),
            ("2024-04-09T23:30:00-01:00", "2024-04-10T00:30:00.000Z"),
        ];
        for (input, expected) in cases {
            let at = Timestamp::parse_field("at", input).unwrap();
            assert_eq!(at.to_string(), expected, "{input}");
        }
    }

    #[test]
    fn string_order_is_time_order() {
        let a = Timestamp::parse_field("at", "2024-04-10T09:59:59.999Z").unwrap();
        let b = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        assert!(a < b);
        assert!(a.to_string() < b.to_string());
    }

    #[test]
    fn rejects_what_is_not_rfc3339() {
        for bad in [
            "",
            "yesterday",
            "2024-04-10",
            "2024-04-10 10:00:00",
            "2024-13-01T00:00:00Z",
        ] {
            let err = Timestamp::parse_field("events[0].at", bad).unwrap_err();
            assert_eq!(err.field, "events[0].at");
        }
    }

    #[test]
    fn day_epoch_and_arithmetic() {
        let at = Timestamp::parse_field("at", "2024-04-10T23:59:59.999Z").unwrap();
        assert_eq!(at.day(), "2024-04-10");
        assert_eq!(at.plus_seconds(1).day(), "2024-04-11");
        assert_eq!(at.epoch_seconds(), 1_712_793_599);
        assert_eq!(Timestamp::from_epoch_millis(1_712_793_599_999), Some(at));
    }
}
