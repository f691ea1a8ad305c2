//! Validation of a submitted batch: every field checked, ids derived where absent.

use std::collections::HashSet;

use serde::Deserialize;

use std::time::Duration;

use crate::model::error::ValidationError;
use crate::model::ids::{EventId, EventType};
use crate::model::readings::{derive_event_id, storable_number, EventValue};
use crate::model::timestamp::Timestamp;

/// Most events in one request.
pub const MAX_EVENTS_PER_BATCH: usize = 100;
/// Longest text value of an event, in characters (it is also kept on the device's live
/// state, whose size it bounds).
pub const MAX_TEXT_VALUE: usize = 64;

/// One event as a device sends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmittedEvent {
    /// Optional id; derived from the content when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// A JSON number, string or boolean.
    pub value: serde_json::Value,
    /// RFC 3339 time.
    pub at: String,
}

/// A validated event, ready to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// Given or derived id.
    pub id: EventId,
    /// Type.
    pub event_type: EventType,
    /// Value.
    pub value: EventValue,
    /// Time, UTC milliseconds.
    pub at: Timestamp,
}

/// Validates a batch: 1..=100 events, each field checked, `at` normalized and within
/// [now - retention, now + skew]. Errors name the offending index and field
/// (`events[3].at`). Events with the same time and id collapse to the first.
pub fn validate_batch(
    events: Vec<SubmittedEvent>,
    now: Timestamp,
    retention_days: u32,
    max_clock_skew: Duration,
) -> Result<Vec<NewEvent>, ValidationError> {
    if events.is_empty() || events.len() > MAX_EVENTS_PER_BATCH {
        return Err(ValidationError::new(
            "events",
            format!("send 1 to {MAX_EVENTS_PER_BATCH} events per request"),
        ));
    }
    let oldest = now.plus_seconds(-i64::from(retention_days) * 86_400);
    let newest = now.plus_seconds(max_clock_skew.as_secs() as i64);
    let mut seen = HashSet::new();
    let mut valid = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        let field = |name: &str| format!("events[{i}].{name}");
        let event_type = EventType::parse_field(&field("type"), event.event_type)?;
        let value = event_value(&field("value"), event.value)?;
        let at = Timestamp::parse_field(&field("at"), &event.at)?;
        if at > newest {
            return Err(ValidationError::new(
                field("at"),
                format!("is more than {}s in the future", max_clock_skew.as_secs()),
            ));
        }
        if at < oldest {
            return Err(ValidationError::new(
                field("at"),
                format!("is older than the {retention_days}-day retention window"),
            ));
        }
        let id = match event.id {
            Some(id) => EventId::parse_field(&field("id"), id)?,
            None => derive_event_id(&event_type, &value, &at),
        };
        if seen.insert((at, id.clone())) {
            valid.push(NewEvent {
                id,
                event_type,
                value,
                at,
            });
        }
    }
    Ok(valid)
}

fn event_value(field: &str, value: serde_json::Value) -> Result<EventValue, ValidationError> {
    match value {
        serde_json::Value::Bool(b) => Ok(EventValue::Flag(b)),
        serde_json::Value::Number(n) => storable_number(field, n.as_f64()).map(EventValue::Number),
        serde_json::Value::String(t) if t.chars().count() > MAX_TEXT_VALUE => Err(
            ValidationError::new(field, format!("text is over {MAX_TEXT_VALUE} characters")),
        ),
        serde_json::Value::String(t) if t.chars().any(char::is_control) => Err(
            ValidationError::new(field, "text must not contain control characters"),
        ),
        serde_json::Value::String(t) => Ok(EventValue::Text(t)),
        _ => Err(ValidationError::new(
            field,
            "must be a JSON number, string or boolean",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::parse_field("now", "2024-04-10T12:00:00Z").unwrap()
    }

    fn submitted(id: Option<&str>, t: &str, value: serde_json::Value, at: &str) -> SubmittedEvent {
        SubmittedEvent {
            id: id.map(str::to_string),
            event_type: t.into(),
            value,
            at: at.into(),
        }
    }

    fn validate(events: Vec<SubmittedEvent>) -> Result<Vec<NewEvent>, ValidationError> {
        validate_batch(events, now(), 90, Duration::from_secs(300))
    }

    #[test]
    fn validates_each_field_and_names_the_index() {
        let ok = validate(vec![submitted(
            Some("e-1"),
            "temperature",
            serde_json::json!(21.5),
            "2024-04-10T13:00:00+02:00",
        )])
        .unwrap();
        assert_eq!(ok[0].at.to_string(), "2024-04-10T11:00:00.000Z");
        let cases = [
            (
                submitted(None, "a#b", serde_json::json!(1), "2024-04-10T10:00:00Z"),
                "events[1].type",
            ),
            (
                submitted(None, "t", serde_json::json!([1]), "2024-04-10T10:00:00Z"),
                "events[1].value",
            ),
            (
                submitted(None, "t", serde_json::json!(null), "2024-04-10T10:00:00Z"),
                "events[1].value",
            ),
            (
                submitted(
                    None,
                    "t",
                    serde_json::json!({"a": 1}),
                    "2024-04-10T10:00:00Z",
                ),
                "events[1].value",
            ),
            (
                submitted(
                    None,
                    "t",
                    serde_json::json!("x".repeat(257)),
                    "2024-04-10T10:00:00Z",
                ),
                "events[1].value",
            ),
            (
                submitted(None, "t", serde_json::json!(1), "yesterday"),
                "events[1].at",
            ),
            (
                submitted(None, "t", serde_json::json!(1), "2024-04-10T12:05:01Z"),
                "events[1].at",
            ),
            (
                submitted(None, "t", serde_json::json!(1), "2024-01-10T11:59:59Z"),
                "events[1].at",
            ),
            (
                submitted(
                    Some("USER#x"),
                    "t",
                    serde_json::json!(1),
                    "2024-04-10T10:00:00Z",
                ),
                "events[1].id",
            ),
        ];
        for (bad, field) in cases {
            let good = submitted(None, "t", serde_json::json!(true), "2024-04-10T10:00:00Z");
            let err = validate(vec![good, bad]).unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
        assert_eq!(validate(vec![]).unwrap_err().field, "events");
        let many = (0..101)
            .map(|i| {
                submitted(
                    Some(&format!("e{i}")),
                    "t",
                    serde_json::json!(i),
                    "2024-04-10T10:00:00Z",
                )
            })
            .collect();
        assert_eq!(validate(many).unwrap_err().field, "events");
    }

    #[test]
    fn derived_ids_are_deterministic_and_duplicates_collapse() {
        let e = || {
            submitted(
                None,
                "door",
                serde_json::json!("open"),
                "2024-04-10T10:00:00Z",
            )
        };
        let a = validate(vec![e()]).unwrap();
        let b = validate(vec![e(), e()]).unwrap();
        assert_eq!(b.len(), 1, "same time and id: one event");
        assert_eq!(a[0].id, b[0].id);
        assert!(a[0].id.as_str().starts_with("d-"));
        let other = validate(vec![submitted(
            None,
            "door",
            serde_json::json!("closed"),
            "2024-04-10T10:00:00Z",
        )])
        .unwrap();
        assert_ne!(other[0].id, a[0].id);
    }
}
