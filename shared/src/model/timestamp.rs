//! Timestamps as stored in keys: RFC 3339 UTC with fixed millisecond precision
//! (`2024-04-10T10:00:00.000Z`), so that string order is time order.

use std::fmt;

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, Duration, OffsetDateTime, UtcOffset};

use crate::model::error::ValidationError;

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
        Self::from_datetime(OffsetDateTime::now_utc()).expect("the clock is within 0000..9999")
    }

    /// The earliest instant a key can hold (keys have fixed-width four-digit years).
    pub fn min() -> Self {
        Self(time::macros::datetime!(0000-01-01 0:00 UTC))
    }

    /// The latest instant a key can hold.
    pub fn max() -> Self {
        Self(time::macros::datetime!(9999-12-31 23:59:59.999 UTC))
    }

    /// `at` in UTC, truncated to milliseconds; `None` outside the years 0000..=9999. The
    /// conversion is checked: `9999-12-31T23:59:59-01:00` is in year 10000 in UTC, which the
    /// `time` crate cannot represent (an unchecked conversion panics; found by fuzzing).
    fn from_datetime(at: OffsetDateTime) -> Option<Self> {
        let at = at.checked_to_offset(UtcOffset::UTC)?;
        let at = at.replace_millisecond(at.millisecond()).ok()?;
        (0..=9999).contains(&at.year()).then_some(Self(at))
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
        Self::from_datetime(at)
            .ok_or_else(|| ValidationError::new(field, "year must be 0000..9999 in UTC"))
    }

    /// Seconds since the Unix epoch (the format DynamoDB TTL expects).
    pub fn epoch_seconds(&self) -> i64 {
        self.0.unix_timestamp()
    }

    /// Milliseconds since the Unix epoch (the compact form the live state stores).
    pub fn epoch_millis(&self) -> i64 {
        (self.0.unix_timestamp_nanos() / 1_000_000) as i64
    }

    /// Builds a timestamp from Unix epoch milliseconds (`None` outside 0000..=9999).
    pub fn from_epoch_millis(millis: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000)
            .ok()
            .and_then(Self::from_datetime)
    }

    /// The UTC day.
    pub fn day(&self) -> Day {
        Day(self.0.date())
    }

    /// This instant moved by `seconds` (negative moves back), saturating at [`Timestamp::min`]
    /// and [`Timestamp::max`] so that arithmetic on client-given times can never overflow.
    pub fn plus_seconds(&self, seconds: i64) -> Self {
        self.plus(Duration::seconds(seconds))
    }

    /// This time plus `millis` milliseconds (clamped like [`Timestamp::plus_seconds`]).
    pub fn plus_millis(&self, millis: i64) -> Self {
        self.plus(Duration::milliseconds(millis))
    }

    fn plus(&self, span: Duration) -> Self {
        match self.0.checked_add(span) {
            Some(at) if at > Self::max().0 => Self::max(),
            Some(at) if at < Self::min().0 => Self::min(),
            Some(at) => Self(at),
            None if span.is_negative() => Self::min(),
            None => Self::max(),
        }
    }

    /// The UTC calendar date.
    pub fn date(&self) -> Date {
        self.0.date()
    }

    /// Whole UTC days from `self`'s date to `later`'s date (0 for the same day, negative when
    /// `later` is earlier).
    pub fn days_until(&self, later: &Timestamp) -> i64 {
        (later.date() - self.date()).whole_days()
    }
}

/// A UTC calendar day, `YYYY-MM-DD`: a report's date and the day in event-type index keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(Date);

impl Day {
    /// Parses `YYYY-MM-DD` (a real calendar day); anything else is a 400 on `field`.
    pub fn parse_field(field: &str, value: &str) -> Result<Self, ValidationError> {
        // Only the one spelling a key holds: `time`'s parser also takes e.g. a `+` sign.
        let canonical = value.len() == 10
            && value.bytes().enumerate().all(|(i, b)| match i {
                4 | 7 => b == b'-',
                _ => b.is_ascii_digit(),
            });
        Date::parse(value, DAY_FORMAT)
            .ok()
            .filter(|_| canonical)
            .map(Day)
            .ok_or_else(|| ValidationError::new(field, "must be a date such as 2024-04-10"))
    }

    /// The first instant of the day.
    pub fn start(&self) -> Timestamp {
        Timestamp(self.0.midnight().assume_utc())
    }

    /// The day before (saturating at the first representable day).
    pub fn previous(&self) -> Day {
        Day(self.0.previous_day().unwrap_or(self.0))
    }

    /// The day after, if representable.
    pub fn next(&self) -> Option<Day> {
        self.0.next_day().map(Day)
    }
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self
            .0
            .format(DAY_FORMAT)
            .expect("a valid date always formats");
        f.write_str(&text)
    }
}

impl PartialEq<&str> for Day {
    fn eq(&self, other: &&str) -> bool {
        Day::parse_field("day", other).is_ok_and(|day| day == *self)
    }
}

impl Serialize for Day {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse_field("day", &raw).map_err(serde::de::Error::custom)
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
    fn a_day_has_exactly_one_spelling() {
        let day = Day::parse_field("date", "2024-02-29").unwrap();
        assert_eq!(day.to_string(), "2024-02-29");
        assert_eq!(day.start().to_string(), "2024-02-29T00:00:00.000Z");
        assert_eq!(day.previous(), "2024-02-28");
        assert_eq!(day.next().unwrap(), "2024-03-01");
        for bad in [
            "2023-02-29",
            "2024-2-29",
            "+2024-02-29",
            "02024-02-29",
            "2024-02-29T00:00:00Z",
            " 2024-02-29",
            "",
        ] {
            let err = Day::parse_field("date", bad).unwrap_err();
            assert_eq!(err.field, "date", "{bad}");
        }
    }

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
    fn offsets_that_leave_the_key_years_are_400s_not_panics() {
        for bad in [
            "9999-12-31T23:59:59-01:00",
            "9999-12-31T23:59:59.999-23:59",
            "0000-01-01T00:00:00+00:01",
        ] {
            let err = Timestamp::parse_field("at", bad).unwrap_err();
            assert_eq!(err.field, "at", "{bad}");
        }
        let edge = Timestamp::parse_field("at", "9999-12-31T23:59:59.999+00:00").unwrap();
        assert_eq!(edge, Timestamp::max());
        let edge = Timestamp::parse_field("at", "0000-01-01T01:00:00+01:00").unwrap();
        assert_eq!(edge, Timestamp::min());
    }

    #[test]
    fn arithmetic_saturates_at_the_key_years() {
        assert_eq!(Timestamp::max().plus_seconds(86_400), Timestamp::max());
        assert_eq!(Timestamp::min().plus_seconds(-86_400), Timestamp::min());
        assert_eq!(Timestamp::max().plus_seconds(i64::MAX), Timestamp::max());
        assert_eq!(Timestamp::min().plus_seconds(i64::MIN), Timestamp::min());
        assert_eq!(Timestamp::min().to_string(), "0000-01-01T00:00:00.000Z");
        assert_eq!(Timestamp::max().to_string(), "9999-12-31T23:59:59.999Z");
        assert_eq!(Timestamp::min().days_until(&Timestamp::max()), 3_652_424);
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
