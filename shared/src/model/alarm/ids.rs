//! The ids of alarm things: a rule's id, where an alarm comes from (a rule or the device's
//! silence), and an alarm's id as the API shows it.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::OFFLINE;
use crate::model::error::ValidationError;
use crate::model::ids::DeviceId;
use crate::model::timestamp::Timestamp;

/// A rule's id: generated when the rule is created (`r` and 16 hex digits).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct RuleId(String);

impl RuleId {
    /// A new random id.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("the OS has a random source");
        Self(format!("r{:016x}", u64::from_be_bytes(bytes)))
    }

    /// Validates an id from a path or a stored item: `r` and 16 lowercase hex digits.
    pub fn parse(value: &str) -> Result<Self, ValidationError> {
        let ok = value.len() == 17
            && value.starts_with('r')
            && value[1..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(Self(value.to_string()))
        } else {
            Err(ValidationError::new("ruleId", "not a rule id"))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RuleId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// Where a device's alarm comes from: a rule, or its silence.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlarmSource {
    /// A threshold rule.
    Rule(RuleId),
    /// The device stopped reporting.
    Offline,
}

impl AlarmSource {
    /// The stored spelling: the rule id, or `offline`.
    pub fn as_str(&self) -> &str {
        match self {
            AlarmSource::Rule(id) => id.as_str(),
            AlarmSource::Offline => OFFLINE,
        }
    }

    /// Parses the stored spelling.
    pub fn parse(value: &str) -> Result<Self, ValidationError> {
        if value == OFFLINE {
            Ok(AlarmSource::Offline)
        } else {
            RuleId::parse(value).map(AlarmSource::Rule)
        }
    }

    /// `threshold` or `offline`.
    pub fn kind(&self) -> AlarmKind {
        match self {
            AlarmSource::Rule(_) => AlarmKind::Threshold,
            AlarmSource::Offline => AlarmKind::Offline,
        }
    }
}

/// What raised an alarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlarmKind {
    /// A reading met a rule's condition.
    Threshold,
    /// The device stopped reporting.
    Offline,
}

/// An alarm's id as the API shows it: `{raisedAt epoch ms}.{source}.{deviceId}`. It names the
/// alarm's key, so acknowledging one needs no index (the owner comes from the caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlarmId {
    /// The device.
    pub device: DeviceId,
    /// Its rule, or offline.
    pub source: AlarmSource,
    /// When it was raised.
    pub raised_at: Timestamp,
}

impl AlarmId {
    /// Parses the API's spelling; anything else is a 404 to the caller (see the route).
    pub fn parse(value: &str) -> Result<Self, ValidationError> {
        let bad = || ValidationError::new("alarmId", "not an alarm id");
        let mut parts = value.splitn(3, '.');
        let (millis, source, device) = (
            parts.next().ok_or_else(bad)?,
            parts.next().ok_or_else(bad)?,
            parts.next().ok_or_else(bad)?,
        );
        let millis: i64 = millis
            .parse()
            .ok()
            .filter(|m: &i64| m.to_string() == millis)
            .ok_or_else(bad)?;
        Ok(Self {
            device: DeviceId::parse_field("alarmId", device)?,
            source: AlarmSource::parse(source).map_err(|_| bad())?,
            raised_at: Timestamp::from_epoch_millis(millis).ok_or_else(bad)?,
        })
    }
}

impl fmt::Display for AlarmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}",
            self.raised_at.epoch_millis(),
            self.source.as_str(),
            self.device
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alarm_ids_round_trip_and_reject_other_text() {
        let id = AlarmId {
            device: DeviceId::parse("meter.7-a").unwrap(),
            source: AlarmSource::Rule(RuleId::parse("r00000000000000ff").unwrap()),
            raised_at: Timestamp::from_epoch_millis(1_700_000_000_123).unwrap(),
        };
        assert_eq!(AlarmId::parse(&id.to_string()).unwrap(), id);
        let offline = AlarmId {
            source: AlarmSource::Offline,
            ..id
        };
        assert_eq!(AlarmId::parse(&offline.to_string()).unwrap(), offline);
        for bad in [
            "",
            "1.offline",
            "01.offline.d",
            "x.offline.d",
            "1.rX.d",
            "1.offline.a#b",
        ] {
            assert!(AlarmId::parse(bad).is_err(), "{bad}");
        }
    }
}
