//! A live state's readings (`latest` and `recent`) as the state item stores them: one binary
//! attribute, `readings`, in a compact form (postcard: varints, no attribute names).
//!
//! Why: every dashboard reads each device's live state, and DynamoDB bills a Query by the
//! bytes it reads (4 KB per read unit). As DynamoDB lists, ten recent events took about 510
//! bytes of an 860-byte state (a 26-character derived id, an 11-character type and a 13-digit
//! time each); here they take about 150. So ten ordinary devices fit one 8 KB dashboard read
//! (1 RCU, was 1.5), and the state stays one write unit with longer values.
//!
//! The form: times as differences from the newest one; each event type once, referred to by
//! position; numbers in the fewest bytes that give the same `f64` back; an event id left out
//! when it is the one ingestion derives from the event's type, value and time
//! ([`derive_event_id`]). Decoding gives back exactly what was encoded.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::error::{FleetError, ValidationError};
use crate::model::ids::{EventId, EventType};

use crate::model::timestamp::Timestamp;

/// A live state's readings, as ingestion keeps them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveReadings {
    /// Latest reading per event type.
    pub latest: BTreeMap<String, StoredReading>,
    /// The newest events, newest first.
    pub recent: Vec<StoredEvent>,
}

/// The stored form. An enum, so a later form can be told apart by its first byte.
#[derive(Serialize, Deserialize)]
enum StoredForm {
    V1(FormV1),
}

#[derive(Serialize, Deserialize)]
struct FormV1 {
    /// The newest time of all (epoch ms); every time below is stored as `newest - at`.
    newest: i64,
    /// Every event type, once.
    types: Vec<String>,
    /// (type position, newest - at, value).
    latest: Vec<(u32, i64, CompactValue)>,
    /// (type position, newest - at, value, id; `None` for the derived id).
    recent: Vec<(u32, i64, CompactValue, Option<String>)>,
}

/// A reading in the fewest bytes that give it back exactly.
#[derive(Serialize, Deserialize)]
enum CompactValue {
    Flag(bool),
    /// A whole number (as a zigzag varint).
    Whole(i64),
    /// A number a 4-byte float holds exactly.
    Single(f32),
    Double(f64),
    Text(String),
}

/// Whole numbers below 2^53 convert to and from `f64` exactly.
const EXACT_WHOLE: f64 = 9_007_199_254_740_992.0;

impl CompactValue {
    fn of(value: &EventValue) -> Self {
        match value {
            EventValue::Flag(b) => Self::Flag(*b),
            EventValue::Text(t) => Self::Text(t.clone()),
            EventValue::Number(v) => {
                let v = *v;
                // -0.0 is whole but would come back as 0.0: it stays a float.
                if v.fract() == 0.0 && v.abs() < EXACT_WHOLE && !(v == 0.0 && v.is_sign_negative())
                {
                    Self::Whole(v as i64)
                } else if f64::from(v as f32).to_bits() == v.to_bits() {
                    Self::Single(v as f32)
                } else {
                    Self::Double(v)
                }
            }
        }
    }

    fn value(self) -> EventValue {
        match self {
            Self::Flag(b) => EventValue::Flag(b),
            Self::Text(t) => EventValue::Text(t),
            Self::Whole(w) => EventValue::Number(w as f64),
            Self::Single(f) => EventValue::Number(f64::from(f)),
            Self::Double(d) => EventValue::Number(d),
        }
    }
}

/// The newest time (epoch ms) among `latest` readings and `recent` events, if any.
pub fn newest_millis(
    latest: &BTreeMap<String, StoredReading>,
    recent: &[StoredEvent],
) -> Option<i64> {
    latest
        .values()
        .map(|r| r.0)
        .chain(recent.iter().map(|e| e.0))
        .max()
}

/// The bytes the state item stores in its `readings` attribute for `latest` and `recent`.
pub fn encode(latest: &BTreeMap<String, StoredReading>, recent: &[StoredEvent]) -> Vec<u8> {
    let newest = newest_millis(latest, recent).unwrap_or(0);
    let mut types: Vec<String> = Vec::new();
    let mut position = |t: &str| -> u32 {
        let i = types
            .iter()
            .position(|known| known == t)
            .unwrap_or_else(|| {
                types.push(t.to_string());
                types.len() - 1
            });
        i as u32
    };
    let latest = latest
        .iter()
        .map(|(t, r)| (position(t), newest - r.0, CompactValue::of(&r.1)))
        .collect();
    let recent = recent
        .iter()
        .map(|e| {
            let derived = Timestamp::from_epoch_millis(e.0)
                .is_some_and(|at| derive_event_id(&e.2, &e.3, &at) == e.1);
            (
                position(e.2.as_str()),
                newest - e.0,
                CompactValue::of(&e.3),
                (!derived).then(|| e.1.to_string()),
            )
        })
        .collect();
    let form = StoredForm::V1(FormV1 {
        newest,
        types,
        latest,
        recent,
    });
    postcard::to_allocvec(&form).expect("readings encode into memory")
}

impl LiveReadings {
    /// The bytes the state item stores for these readings ([`encode`]).
    pub fn encode(&self) -> Vec<u8> {
        encode(&self.latest, &self.recent)
    }

    /// The readings `bytes` hold, checked (types and ids valid, times in range).
    pub fn decode(bytes: &[u8]) -> Result<Self, FleetError> {
        let bad = |why: String| FleetError::internal(format!("unreadable live readings: {why}"));
        let StoredForm::V1(form) = postcard::from_bytes(bytes).map_err(|e| bad(e.to_string()))?;
        let types = form
            .types
            .into_iter()
            .map(|t| EventType::parse(t).map_err(|e| bad(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let type_at = |i: u32| {
            types
                .get(i as usize)
                .cloned()
                .ok_or_else(|| bad(format!("no event type {i}")))
        };
        let time = |delta: i64| {
            form.newest
                .checked_sub(delta)
                .filter(|at| Timestamp::from_epoch_millis(*at).is_some())
                .ok_or_else(|| bad(format!("time out of range: {} - {delta}", form.newest)))
        };
        let mut latest = BTreeMap::new();
        for (t, delta, value) in form.latest {
            latest.insert(
                type_at(t)?.to_string(),
                StoredReading(time(delta)?, value.value()),
            );
        }
        let mut recent = Vec::with_capacity(form.recent.len());
        for (t, delta, value, id) in form.recent {
            let (event_type, at, value) = (type_at(t)?, time(delta)?, value.value());
            let id = match id {
                Some(id) => EventId::parse(id).map_err(|e| bad(e.to_string()))?,
                None => derive_event_id(
                    &event_type,
                    &value,
                    &Timestamp::from_epoch_millis(at).expect("checked above"),
                ),
            };
            recent.push(StoredEvent(at, id, event_type, value));
        }
        Ok(Self { latest, recent })
    }
}

/// The smallest magnitude DynamoDB stores besides 0 (`1E-130`).
pub const MIN_STORABLE_MAGNITUDE: f64 = 1e-130;
/// DynamoDB stores magnitudes below this (its largest is `9.99...E+125`, 38 digits).
pub const STORABLE_MAGNITUDE_LIMIT: f64 = 1e126;

/// `value` as a number DynamoDB can store, or a 400 naming `field`. JSON allows 1e200 and
/// 1e-200; DynamoDB refuses them with a ValidationException, which would otherwise answer a
/// valid request with a 500 (and a device resending it, forever). An `f64` carries at most 17
/// significant digits, within DynamoDB's 38.
pub fn storable_number(field: &str, value: Option<f64>) -> Result<f64, ValidationError> {
    let refused = || {
        ValidationError::new(
            field,
            "must be a number of magnitude from 1e-130 to below 1e126, or 0 (what DynamoDB stores)",
        )
    };
    let value = value.filter(|v| v.is_finite()).ok_or_else(refused)?;
    let magnitude = value.abs();
    if magnitude != 0.0 && !(MIN_STORABLE_MAGNITUDE..STORABLE_MAGNITUDE_LIMIT).contains(&magnitude)
    {
        return Err(refused());
    }
    Ok(value)
}

/// The value of an event: a JSON number, string or boolean.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EventValue {
    /// A boolean reading (`door open`).
    Flag(bool),
    /// A numeric reading.
    Number(f64),
    /// A text reading.
    Text(String),
}

/// The latest reading of one event type on a device (dashboard).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// When it was taken.
    pub at: Timestamp,
    /// What it was.
    pub value: EventValue,
}

/// One of a device's most recent events (dashboard).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecentEvent {
    /// Event id.
    pub id: EventId,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// Value.
    pub value: EventValue,
    /// When it happened.
    pub at: Timestamp,
}

/// The latest reading of one type as the live state stores it: `[at (epoch ms), value]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredReading(pub i64, pub EventValue);

/// A recent event as the live state stores it: `[at (epoch ms), id, type, value]`. A list
/// without attribute names keeps the state item under 1 KB for a typical device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent(pub i64, pub EventId, pub EventType, pub EventValue);

impl StoredReading {
    /// The reading as the API shows it.
    pub fn reading(&self) -> Reading {
        Reading {
            at: Timestamp::from_epoch_millis(self.0).unwrap_or_else(Timestamp::min),
            value: self.1.clone(),
        }
    }
}

impl StoredEvent {
    /// When it happened.
    pub fn at(&self) -> Timestamp {
        Timestamp::from_epoch_millis(self.0).unwrap_or_else(Timestamp::min)
    }

    /// The event as the API shows it.
    pub fn recent_event(&self) -> RecentEvent {
        RecentEvent {
            id: self.1.clone(),
            event_type: self.2.clone(),
            value: self.3.clone(),
            at: self.at(),
        }
    }
}

/// The id of an event sent without one: a digest of its type, time and value, so a retried
/// batch derives the same ids and overwrites instead of duplicating.
pub fn derive_event_id(event_type: &EventType, value: &EventValue, at: &Timestamp) -> EventId {
    let canonical = serde_json::to_string(value).unwrap_or_default();
    let digest = crate::model::token::sha256_hex(&format!("{event_type}\n{at}\n{canonical}"));
    EventId::parse(format!("d-{}", &digest[..24])).expect("hex digits form a valid id")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> i64 {
        Timestamp::parse_field("at", s).unwrap().epoch_millis()
    }

    fn event(id: Option<&str>, t: &str, value: EventValue, time: &str) -> StoredEvent {
        let event_type = EventType::parse(t).unwrap();
        let millis = at(time);
        let id = match id {
            Some(id) => EventId::parse(id).unwrap(),
            None => derive_event_id(
                &event_type,
                &value,
                &Timestamp::from_epoch_millis(millis).unwrap(),
            ),
        };
        StoredEvent(millis, id, event_type, value)
    }

    fn round_trip(readings: &LiveReadings) -> Vec<u8> {
        let bytes = readings.encode();
        assert_eq!(&LiveReadings::decode(&bytes).unwrap(), readings);
        bytes
    }

    #[test]
    fn every_kind_of_value_id_and_time_comes_back_exactly() {
        let values = [
            EventValue::Number(21.5),
            EventValue::Number(-3.0),
            EventValue::Number(0.1),
            EventValue::Number(-0.0),
            EventValue::Number(1e300),
            EventValue::Number(9_007_199_254_740_993.0),
            EventValue::Number(-9_007_199_254_740_992.0),
            EventValue::Number(f64::MIN_POSITIVE),
            EventValue::Flag(true),
            EventValue::Flag(false),
            EventValue::Text(String::new()),
            EventValue::Text("open ü \u{1F6AA}".into()),
        ];
        let recent: Vec<StoredEvent> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let id = format!("client-id-{i}");
                let time = format!("2024-04-10T10:{:02}:00.{:03}Z", 59 - i, i * 7);
                event(
                    (i % 2 == 0).then_some(id.as_str()),
                    "reading",
                    v.clone(),
                    &time,
                )
            })
            .collect();
        let mut latest = BTreeMap::new();
        // A latest reading older than every recent event (its events dropped out of `recent`),
        // and one at the epoch's start.
        latest.insert(
            "door".into(),
            StoredReading(at("2020-01-01T00:00:00Z"), EventValue::Flag(false)),
        );
        latest.insert(
            "reading".into(),
            StoredReading(recent[0].0, recent[0].3.clone()),
        );
        latest.insert("epoch".into(), StoredReading(0, EventValue::Number(1.0)));
        let readings = LiveReadings { latest, recent };
        round_trip(&readings);
        for (value, stored) in values
            .iter()
            .zip(LiveReadings::decode(&readings.encode()).unwrap().recent)
        {
            if let (EventValue::Number(a), EventValue::Number(b)) = (value, &stored.3) {
                assert_eq!(a.to_bits(), b.to_bits(), "{a} comes back bit for bit");
            }
        }
        round_trip(&LiveReadings::default());
    }

    #[test]
    fn ten_derived_events_and_three_latest_readings_take_under_200_bytes() {
        let types = ["temperature", "humidity", "door"];
        let recent: Vec<StoredEvent> = (0..10)
            .map(|i| {
                event(
                    None,
                    types[i % 3],
                    EventValue::Number(21.5),
                    &format!("2024-04-10T11:{:02}:00Z", 59 - i),
                )
            })
            .collect();
        let latest = types
            .iter()
            .map(|t| {
                let newest = recent.iter().find(|e| e.2.as_str() == *t).unwrap();
                (t.to_string(), StoredReading(newest.0, newest.3.clone()))
            })
            .collect();
        let readings = LiveReadings { latest, recent };
        let bytes = round_trip(&readings);
        // As DynamoDB lists the same readings took 584 bytes (`recent` 510, `latest` 74).
        assert!(bytes.len() <= 195, "{} bytes", bytes.len());
    }

    #[test]
    fn damaged_bytes_are_an_error_not_a_panic() {
        let readings = LiveReadings {
            latest: BTreeMap::new(),
            recent: vec![event(
                Some("e-1"),
                "door",
                EventValue::Flag(true),
                "2024-04-10T10:00:00Z",
            )],
        };
        let bytes = readings.encode();
        for cut in 0..bytes.len() {
            assert!(LiveReadings::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut unknown_form = bytes.clone();
        unknown_form[0] = 9;
        assert!(LiveReadings::decode(&unknown_form).is_err());
        for garbage in [
            vec![0u8, 0, 1, 0xff],
            vec![0, 0x80, 0x80, 0x80],
            vec![0; 64],
        ] {
            let _ = LiveReadings::decode(&garbage);
        }
    }
}
