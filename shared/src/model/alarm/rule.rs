//! Alarm rules: what an owner asks to be told about (which devices, which readings, how
//! urgent), and how a request body becomes one (a 400 naming the field otherwise).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_path_to_error::Segment;

use super::ids::RuleId;
use super::severity::Severity;
use super::{MAX_EQUALS_TEXT, MAX_RULE_NAME, MAX_RULE_SECONDS, MIN_REMINDER_SECONDS};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, DeviceType, EventType, Tag};
use crate::model::readings::{storable_number, EventValue};
use crate::model::timestamp::Timestamp;

/// Which devices a rule watches: one device, every device of a type, or every device with a tag.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    /// One device.
    DeviceId(DeviceId),
    /// Every device of this type.
    DeviceType(DeviceType),
    /// Every device carrying this tag.
    Tag(Tag),
}

impl Scope {
    /// Whether a device with this id, type and tags is in scope.
    pub fn covers(&self, device: &DeviceId, device_type: &DeviceType, tags: &[Tag]) -> bool {
        match self {
            Scope::DeviceId(d) => d == device,
            Scope::DeviceType(t) => t == device_type,
            Scope::Tag(t) => tags.contains(t),
        }
    }
}

/// A test of one reading's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ValueCondition {
    /// A number strictly above.
    Above(f64),
    /// A number strictly below.
    Below(f64),
    /// A number strictly outside `[low, high]`.
    Outside([f64; 2]),
    /// Exactly this text, flag or number.
    Equals(EventValue),
}

impl ValueCondition {
    /// Whether `value` meets the condition (a text never meets a numeric one).
    pub fn holds(&self, value: &EventValue) -> bool {
        match (self, value) {
            (ValueCondition::Above(limit), EventValue::Number(v)) => v > limit,
            (ValueCondition::Below(limit), EventValue::Number(v)) => v < limit,
            (ValueCondition::Outside([low, high]), EventValue::Number(v)) => v < low || v > high,
            (ValueCondition::Equals(expected), v) => expected == v,
            _ => false,
        }
    }

    /// Whether some value meets both this condition and `other`. Each numeric condition is a
    /// union of open rays (`above a`: (a, +inf); `below b`: (-inf, b); `outside [l, h]`: both)
    /// or a single point (`equals n`); two sets meet if any of their pieces do.
    pub fn meets_any_value_of(&self, other: &ValueCondition) -> bool {
        let (mine, theirs) = (self.pieces(), other.pieces());
        mine.iter().any(|a| theirs.iter().any(|b| a.meets(b)))
    }

    fn pieces(&self) -> Vec<Piece<'_>> {
        match self {
            ValueCondition::Above(a) => vec![Piece::Above(*a)],
            ValueCondition::Below(b) => vec![Piece::Below(*b)],
            ValueCondition::Outside([low, high]) => vec![Piece::Below(*low), Piece::Above(*high)],
            ValueCondition::Equals(EventValue::Number(n)) => vec![Piece::Point(*n)],
            ValueCondition::Equals(v) => vec![Piece::Exactly(v)],
        }
    }

    /// Parses `{"above": n} | {"below": n} | {"outside": [lo, hi]} | {"equals": v}` under `field`.
    pub fn parse_field(field: &str, json: &Value) -> Result<Self, ValidationError> {
        let shape = || {
            ValidationError::new(
                field,
                "must be one of {\"above\": n}, {\"below\": n}, {\"outside\": [low, high]}, {\"equals\": text, flag or number}",
            )
        };
        let object = json
            .as_object()
            .filter(|o| o.len() == 1)
            .ok_or_else(shape)?;
        let (name, value) = object.iter().next().expect("one entry");
        let number = |v: &Value, at: String| storable_number(&at, v.as_f64());
        match name.as_str() {
            "above" => Ok(Self::Above(number(value, format!("{field}.above"))?)),
            "below" => Ok(Self::Below(number(value, format!("{field}.below"))?)),
            "outside" => {
                let at = format!("{field}.outside");
                let pair = value
                    .as_array()
                    .filter(|a| a.len() == 2)
                    .ok_or_else(|| ValidationError::new(&at, "must be [low, high]"))?;
                let (low, high) = (number(&pair[0], at.clone())?, number(&pair[1], at.clone())?);
                if low > high {
                    return Err(ValidationError::new(at, "low must not be above high"));
                }
                Ok(Self::Outside([low, high]))
            }
            "equals" => {
                let at = format!("{field}.equals");
                match value {
                    Value::Bool(b) => Ok(Self::Equals(EventValue::Flag(*b))),
                    Value::Number(_) => Ok(Self::Equals(EventValue::Number(number(value, at)?))),
                    Value::String(s) if s.chars().count() <= MAX_EQUALS_TEXT => {
                        Ok(Self::Equals(EventValue::Text(s.clone())))
                    }
                    Value::String(_) => Err(ValidationError::new(
                        at,
                        format!("must be at most {MAX_EQUALS_TEXT} characters"),
                    )),
                    _ => Err(ValidationError::new(at, "must be a text, flag or number")),
                }
            }
            _ => Err(shape()),
        }
    }
}

/// One piece of the set of values a condition holds for.
enum Piece<'a> {
    /// The numbers strictly above.
    Above(f64),
    /// The numbers strictly below.
    Below(f64),
    /// One number.
    Point(f64),
    /// One text or flag.
    Exactly(&'a EventValue),
}

impl Piece<'_> {
    fn meets(&self, other: &Piece<'_>) -> bool {
        use Piece::*;
        match (self, other) {
            (Above(_), Above(_)) | (Below(_), Below(_)) => true,
            (Above(a), Below(b)) | (Below(b), Above(a)) => a < b,
            (Point(p), Above(a)) | (Above(a), Point(p)) => p > a,
            (Point(p), Below(b)) | (Below(b), Point(p)) => p < b,
            (Point(p), Point(q)) => p == q,
            (Exactly(x), Exactly(y)) => x == y,
            _ => false,
        }
    }
}

/// What an owner asks to be told about (the rule without its id, version and times).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleDefinition {
    /// Shown in lists and notifications.
    pub name: String,
    /// The event type whose readings the rule tests.
    pub event_type: EventType,
    /// Which devices.
    pub scope: Scope,
    /// Raises the alarm (once it has held for `for_seconds`).
    pub condition: ValueCondition,
    /// Clears it (hysteresis); `None`: clears once `condition` stops holding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<ValueCondition>,
    /// How long the condition must hold across readings before the alarm is raised.
    #[serde(default)]
    pub for_seconds: u64,
    /// How urgent.
    pub severity: Severity,
    /// Notify again this often while the alarm is active and unacknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_every_seconds: Option<u64>,
}

/// The fields of a rule body, for a 400 that names an unknown one.
const RULE_FIELDS: [&str; 8] = [
    "name",
    "eventType",
    "scope",
    "condition",
    "clear",
    "forSeconds",
    "severity",
    "remindEverySeconds",
];

/// A rule body as a client sends it, whole (POST) or in part (PATCH). serde reads which fields
/// were sent and refuses any other (`deny_unknown_fields`); the fields the server sets are
/// taken as a client read them, and ignored. Each value is kept as sent (`null` apart from
/// absent: in a PATCH it clears an optional field) and checked by the parsers below, because
/// the contract's 400s say "must be a string", "is required" or name the inner field
/// (`condition.above`), where serde's would say "invalid type: integer `5`, expected a string"
/// or "missing field" at the body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleBody {
    #[serde(default, deserialize_with = "sent")]
    name: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    event_type: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    scope: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    condition: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    clear: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    for_seconds: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    severity: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    remind_every_seconds: Option<Value>,
    // Set by the server; a client may send them back as it read them.
    #[serde(default, deserialize_with = "sent")]
    rule_id: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    version: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    created_at: Option<Value>,
    #[serde(default, deserialize_with = "sent")]
    updated_at: Option<Value>,
}

/// For `#[serde(default, deserialize_with = "sent")]`: absent is `None`, anything sent
/// (`null` included) is `Some`.
fn sent<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl RuleBody {
    /// The fields `body` sends; a 400 naming the first field that is not a rule's.
    fn read(body: &Value) -> Result<Self, ValidationError> {
        // serde would also read the struct from a JSON array.
        if !body.is_object() {
            return Err(ValidationError::new("body", "must be a JSON object"));
        }
        serde_path_to_error::deserialize(body).map_err(|err| {
            // Every field takes any JSON value: the one error left is a field of no rule.
            let field = match err.path().iter().next() {
                Some(Segment::Map { key }) => key.clone(),
                _ => "body".to_string(),
            };
            ValidationError::new(
                field,
                format!("is not a rule field (fields: {})", RULE_FIELDS.join(", ")),
            )
        })
    }

    /// Whether the body sends no field at all.
    fn is_empty(&self) -> bool {
        [
            &self.name,
            &self.event_type,
            &self.scope,
            &self.condition,
            &self.clear,
            &self.for_seconds,
            &self.severity,
            &self.remind_every_seconds,
            &self.rule_id,
            &self.version,
            &self.created_at,
            &self.updated_at,
        ]
        .iter()
        .all(|field| field.is_none())
    }
}

impl RuleDefinition {
    /// Validates a whole rule body (POST).
    pub fn parse(body: &Value) -> Result<Self, ValidationError> {
        let body = RuleBody::read(body)?;
        // `null` clears an optional field in a PATCH; a new rule has nothing to clear.
        for (field, value) in [
            ("clear", &body.clear),
            ("forSeconds", &body.for_seconds),
            ("remindEverySeconds", &body.remind_every_seconds),
        ] {
            if value.as_ref().is_some_and(Value::is_null) {
                return Err(ValidationError::new(
                    field,
                    crate::model::optional::NULL_REFUSED,
                ));
            }
        }
        let mut rule = RuleDefinition {
            name: parse_name(required("name", &body.name)?)?,
            event_type: parse_event_type(required("eventType", &body.event_type)?)?,
            scope: parse_scope(required("scope", &body.scope)?)?,
            condition: ValueCondition::parse_field(
                "condition",
                required("condition", &body.condition)?,
            )?,
            clear: None,
            for_seconds: 0,
            severity: parse_severity(required("severity", &body.severity)?)?,
            remind_every_seconds: None,
        };
        rule.apply_optional(&body)?;
        rule.check()?;
        Ok(rule)
    }

    /// This rule with the fields of a PATCH body changed (a `null` clears an optional field).
    pub fn patched(&self, body: &Value) -> Result<Self, ValidationError> {
        let body = RuleBody::read(body)?;
        if body.is_empty() {
            return Err(ValidationError::new("body", "names no field to change"));
        }
        let mut rule = self.clone();
        // In the fields' alphabetical order, as they were always checked: a body with two bad
        // fields names the same one.
        if let Some(v) = changed("condition", &body.condition)? {
            rule.condition = ValueCondition::parse_field("condition", v)?;
        }
        if let Some(v) = changed("eventType", &body.event_type)? {
            rule.event_type = parse_event_type(v)?;
        }
        if let Some(v) = changed("name", &body.name)? {
            rule.name = parse_name(v)?;
        }
        if let Some(v) = changed("scope", &body.scope)? {
            rule.scope = parse_scope(v)?;
        }
        if let Some(v) = changed("severity", &body.severity)? {
            rule.severity = parse_severity(v)?;
        }
        rule.apply_optional(&body)?;
        rule.check()?;
        Ok(rule)
    }

    /// Sets the optional fields `body` sends (`null`: back to the default).
    fn apply_optional(&mut self, body: &RuleBody) -> Result<(), ValidationError> {
        if let Some(v) = &body.clear {
            self.clear = match v {
                Value::Null => None,
                v => Some(ValueCondition::parse_field("clear", v)?),
            };
        }
        if let Some(v) = &body.for_seconds {
            self.for_seconds = match v {
                Value::Null => 0,
                v => parse_seconds("forSeconds", v, 0)?,
            };
        }
        if let Some(v) = &body.remind_every_seconds {
            self.remind_every_seconds = match v {
                Value::Null => None,
                v => Some(parse_seconds(
                    "remindEverySeconds",
                    v,
                    MIN_REMINDER_SECONDS,
                )?),
            };
        }
        Ok(())
    }

    /// Checks across fields: a clear condition of the same kind of value as the condition,
    /// and one that holds for no value where the condition holds. A value in both sets would
    /// raise the alarm and clear it again on every reading (`outside [0, 10]` with `below 100`
    /// flaps at -5), so the two sets must be disjoint, compared as sets of numbers.
    fn check(&self) -> Result<(), ValidationError> {
        let numeric = |c: &ValueCondition| !matches!(c, ValueCondition::Equals(_));
        if let Some(clear) = &self.clear {
            if numeric(clear) != numeric(&self.condition) {
                return Err(ValidationError::new(
                    "clear",
                    "must test the same kind of value as condition",
                ));
            }
            if self.condition.meets_any_value_of(clear) {
                return Err(ValidationError::new(
                    "clear",
                    "holds for a value where condition holds: the alarm would raise and clear again on every such reading",
                ));
            }
        }
        Ok(())
    }

    /// Whether `value` clears an active alarm of this rule.
    pub fn clears(&self, value: &EventValue) -> bool {
        match &self.clear {
            Some(clear) => clear.holds(value),
            None => !self.condition.holds(value),
        }
    }
}

/// A field a new rule must have: sent, and not `null`.
fn required<'a>(field: &str, value: &'a Option<Value>) -> Result<&'a Value, ValidationError> {
    value
        .as_ref()
        .filter(|v| !v.is_null())
        .ok_or_else(|| ValidationError::new(field, "is required"))
}

/// A field a change may set: `None` when not sent; `null` refused (it has nothing to go back
/// to).
fn changed<'a>(
    field: &str,
    value: &'a Option<Value>,
) -> Result<Option<&'a Value>, ValidationError> {
    match value {
        Some(Value::Null) => Err(ValidationError::new(field, "must not be null")),
        other => Ok(other.as_ref()),
    }
}

fn parse_name(v: &Value) -> Result<String, ValidationError> {
    let name = v
        .as_str()
        .ok_or_else(|| ValidationError::new("name", "must be a string"))?;
    crate::model::ids::parse_display_name("name", name, MAX_RULE_NAME)
}

fn parse_event_type(v: &Value) -> Result<EventType, ValidationError> {
    let t = v
        .as_str()
        .ok_or_else(|| ValidationError::new("eventType", "must be a string"))?;
    EventType::parse_field("eventType", t)
}

fn parse_severity(v: &Value) -> Result<Severity, ValidationError> {
    let s = v
        .as_str()
        .ok_or_else(|| ValidationError::new("severity", "must be a string"))?;
    Severity::parse_field("severity", s)
}

fn parse_seconds(field: &str, v: &Value, min: u64) -> Result<u64, ValidationError> {
    v.as_u64()
        .filter(|s| (min..=MAX_RULE_SECONDS).contains(s))
        .ok_or_else(|| {
            ValidationError::new(
                field,
                format!("must be a whole number of seconds from {min} to {MAX_RULE_SECONDS}"),
            )
        })
}

fn parse_scope(v: &Value) -> Result<Scope, ValidationError> {
    let shape = || {
        ValidationError::new(
            "scope",
            "must be one of {\"deviceId\": id}, {\"deviceType\": type}, {\"tag\": tag}",
        )
    };
    let object = v.as_object().filter(|o| o.len() == 1).ok_or_else(shape)?;
    let (name, value) = object.iter().next().expect("one entry");
    let field = format!("scope.{name}");
    let text = value
        .as_str()
        .ok_or_else(|| ValidationError::new(&field, "must be a string"));
    match name.as_str() {
        "deviceId" => Ok(Scope::DeviceId(DeviceId::parse_field(&field, text?)?)),
        "deviceType" => Ok(Scope::DeviceType(DeviceType::parse_field(&field, text?)?)),
        "tag" => Ok(Scope::Tag(Tag::parse_field(&field, text?)?)),
        _ => Err(shape()),
    }
}

/// A stored rule: its definition with id, version and times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Its id.
    pub rule_id: RuleId,
    /// Starts at 1; every change adds one (`If-Match`).
    pub version: u64,
    /// What it watches.
    #[serde(flatten)]
    pub definition: RuleDefinition,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    /// A stored rule of `body`, for the tests here and of evaluation.
    pub(in crate::model::alarm) fn rule(body: Value) -> Rule {
        Rule {
            rule_id: RuleId::generate(),
            version: 1,
            definition: RuleDefinition::parse(&body).unwrap(),
            created_at: Timestamp::min(),
            updated_at: Timestamp::min(),
        }
    }

    /// The fields a 400 lists are the fields serde reads, and the server's own are accepted.
    #[test]
    fn every_listed_field_is_read_from_a_body() {
        for field in RULE_FIELDS
            .into_iter()
            .chain(["ruleId", "version", "createdAt", "updatedAt"])
        {
            let body = json!({ field: null });
            assert!(RuleBody::read(&body).is_ok(), "{field}");
        }
        let err = RuleBody::read(&json!({"colour": "red"})).err().unwrap();
        assert_eq!(
            (
                err.field.as_str(),
                err.reason
                    .starts_with("is not a rule field (fields: name, eventType,")
            ),
            ("colour", true)
        );
    }

    #[test]
    fn scopes_and_value_kinds() {
        let door = rule(json!({"name": "door", "eventType": "temperature",
            "scope": {"tag": "cold-room"}, "condition": {"equals": "open"}, "severity": "minor"}));
        let device = DeviceId::parse("d").unwrap();
        let t = DeviceType::parse("x").unwrap();
        let tag = Tag::parse("cold-room").unwrap();
        assert!(door.definition.scope.covers(&device, &t, &[tag]));
        assert!(!door.definition.scope.covers(&device, &t, &[]));
        let c = ValueCondition::Outside([5.0, 80.0]);
        assert!(c.holds(&EventValue::Number(4.0)) && c.holds(&EventValue::Number(81.0)));
        assert!(!c.holds(&EventValue::Number(5.0)) && !c.holds(&EventValue::Text("9".into())));
    }

    /// Every pair of numeric condition and clear over a set of thresholds: the rule is
    /// accepted exactly when no value both raises and clears, found by trying every threshold,
    /// every midpoint between two and a value beyond each end (enough for sets made of open
    /// rays and points with these ends).
    #[test]
    fn a_clear_is_accepted_only_when_no_value_both_raises_and_clears() {
        let thresholds = [-5.0, 0.0, 10.0, 100.0];
        let mut numeric: Vec<Value> = Vec::new();
        for &t in &thresholds {
            numeric.push(json!({"above": t}));
            numeric.push(json!({"below": t}));
            numeric.push(json!({"equals": t}));
            for &h in thresholds.iter().filter(|&&h| h >= t) {
                numeric.push(json!({"outside": [t, h]}));
            }
        }
        let mut samples: Vec<f64> = thresholds.to_vec();
        samples.extend(thresholds.windows(2).map(|w| (w[0] + w[1]) / 2.0));
        samples.extend([-6.0, 101.0]);
        let mut checked = (0, 0);
        for condition in &numeric {
            for clear in &numeric {
                let body = json!({"name": "n", "eventType": "temperature",
                    "scope": {"deviceId": "d-1"}, "condition": condition, "clear": clear,
                    "severity": "major"});
                let outcome = RuleDefinition::parse(&body);
                let kind = |c: &Value| c.get("equals").is_some();
                if kind(condition) != kind(clear) {
                    assert_eq!(outcome.unwrap_err().field, "clear");
                    continue;
                }
                let (c, k) = (
                    ValueCondition::parse_field("condition", condition).unwrap(),
                    ValueCondition::parse_field("clear", clear).unwrap(),
                );
                let both = samples
                    .iter()
                    .find(|&&v| c.holds(&EventValue::Number(v)) && k.holds(&EventValue::Number(v)));
                match (both, outcome) {
                    (None, Ok(_)) => checked.0 += 1,
                    (Some(_), Err(e)) if e.field == "clear" => checked.1 += 1,
                    (both, outcome) => {
                        panic!("{condition} / {clear}: value in both {both:?}, got {outcome:?}")
                    }
                }
            }
        }
        assert!(checked.0 > 20 && checked.1 > 100, "{checked:?}");
        // Texts and flags: only the same value is in both.
        for (condition, clear, accepted) in [
            (json!("open"), json!("closed"), true),
            (json!("open"), json!("open"), false),
            (json!(true), json!(false), true),
            (json!(true), json!(true), false),
            (json!(true), json!("true"), true),
        ] {
            let body = json!({"name": "n", "eventType": "door",
                "scope": {"deviceId": "d-1"}, "condition": {"equals": condition},
                "clear": {"equals": clear}, "severity": "major"});
            let outcome = RuleDefinition::parse(&body);
            assert_eq!(outcome.is_ok(), accepted, "{condition} / {clear}");
            if let Err(e) = outcome {
                assert_eq!(e.field, "clear");
            }
        }
        // The case of the report: -5 is outside [0, 10] and below 100.
        let flapping = json!({"name": "n", "eventType": "temperature",
            "scope": {"deviceId": "d-1"}, "condition": {"outside": [0, 10]},
            "clear": {"below": 100}, "severity": "major"});
        assert_eq!(RuleDefinition::parse(&flapping).unwrap_err().field, "clear");
    }

    #[test]
    fn bad_rule_bodies_name_the_field() {
        let good = json!({"name": "hot", "eventType": "temperature",
            "scope": {"deviceId": "d-1"}, "condition": {"above": 80}, "severity": "major"});
        RuleDefinition::parse(&good).unwrap();
        for (field, value, named) in [
            ("severity", json!("urgent"), "severity"),
            ("condition", json!({"above": "hot"}), "condition.above"),
            ("condition", json!({"over": 1}), "condition"),
            ("condition", json!({"outside": [9, 1]}), "condition.outside"),
            ("scope", json!({"deviceId": "a#b"}), "scope.deviceId"),
            ("scope", json!({"owner": "x"}), "scope"),
            ("forSeconds", json!(-1), "forSeconds"),
            ("remindEverySeconds", json!(5), "remindEverySeconds"),
            ("clear", json!({"below": 90}), "clear"),
            ("clear", json!({"equals": "x"}), "clear"),
            ("name", json!(""), "name"),
            ("colour", json!("red"), "colour"),
        ] {
            let mut body = good.clone();
            body[field] = value;
            let err = RuleDefinition::parse(&body).unwrap_err();
            assert_eq!(err.field, named, "{field}: {}", err.reason);
        }
        let mut missing = good.clone();
        missing.as_object_mut().unwrap().remove("eventType");
        assert_eq!(
            RuleDefinition::parse(&missing).unwrap_err().field,
            "eventType"
        );
    }
}
