//! Alarm rules and their evaluation, without I/O: what an owner asks to be told about, and
//! the transitions (raised, cleared) a batch of readings causes on one device.
//!
//! Evaluation is a pure function of the device's alarm status (kept on its live state, which
//! ingestion rewrites per batch anyway), the owner's rules and the batch. It looks only at
//! readings newer than the device's latest reading of the type before the batch, so a replayed
//! or late batch causes no transition, and a batch of 100 readings over a threshold raises one
//! alarm.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, DeviceType, EventId, EventType, Tag};
use crate::model::readings::{storable_number, EventValue};
use crate::model::timestamp::Timestamp;

/// Most rules one owner may keep. Bounded by one transaction: a batch that moves every rule
/// of a device writes its live state and at most three alarm writes per rule (a batch nets
/// out per rule, see [`evaluate`]) in one TransactWriteItems, which DynamoDB caps at 100
/// actions.
pub const MAX_RULES_PER_OWNER: usize = 32;
/// Longest rule name, in characters.
pub const MAX_RULE_NAME: usize = 100;
/// Longest duration a condition may be required to hold, and longest reminder interval.
pub const MAX_RULE_SECONDS: u64 = 7 * 86_400;
/// Shortest reminder interval (the detector that sends reminders runs once a minute).
pub const MIN_REMINDER_SECONDS: u64 = 60;
/// Longest text a rule compares a reading with.
pub const MAX_EQUALS_TEXT: usize = 64;
/// The source of an offline alarm, where a threshold alarm names its rule.
pub const OFFLINE: &str = "offline";

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

impl RuleDefinition {
    /// Validates a whole rule body (POST).
    pub fn parse(body: &Value) -> Result<Self, ValidationError> {
        let object = body
            .as_object()
            .ok_or_else(|| ValidationError::new("body", "must be a JSON object"))?;
        check_fields(object)?;
        let required = |name: &str| {
            object
                .get(name)
                .filter(|v| !v.is_null())
                .ok_or_else(|| ValidationError::new(name, "is required"))
        };
        // `null` clears an optional field in a PATCH; a new rule has nothing to clear.
        if let Some(field) = ["clear", "forSeconds", "remindEverySeconds"]
            .into_iter()
            .find(|f| object.get(*f).is_some_and(Value::is_null))
        {
            return Err(ValidationError::new(
                field,
                crate::model::optional::NULL_REFUSED,
            ));
        }
        let mut rule = RuleDefinition {
            name: parse_name(required("name")?)?,
            event_type: parse_event_type(required("eventType")?)?,
            scope: parse_scope(required("scope")?)?,
            condition: ValueCondition::parse_field("condition", required("condition")?)?,
            clear: None,
            for_seconds: 0,
            severity: parse_severity(required("severity")?)?,
            remind_every_seconds: None,
        };
        rule.apply_optional(object)?;
        rule.check()?;
        Ok(rule)
    }

    /// This rule with the fields of a PATCH body changed (a `null` clears an optional field).
    pub fn patched(&self, body: &Value) -> Result<Self, ValidationError> {
        let object = body
            .as_object()
            .ok_or_else(|| ValidationError::new("body", "must be a JSON object"))?;
        check_fields(object)?;
        if object.is_empty() {
            return Err(ValidationError::new("body", "names no field to change"));
        }
        let mut rule = self.clone();
        for (name, value) in object {
            let required = || {
                (!value.is_null())
                    .then_some(value)
                    .ok_or_else(|| ValidationError::new(name, "must not be null"))
            };
            match name.as_str() {
                "name" => rule.name = parse_name(required()?)?,
                "eventType" => rule.event_type = parse_event_type(required()?)?,
                "scope" => rule.scope = parse_scope(required()?)?,
                "condition" => rule.condition = ValueCondition::parse_field(name, required()?)?,
                "severity" => rule.severity = parse_severity(required()?)?,
                _ => {}
            }
        }
        rule.apply_optional(object)?;
        rule.check()?;
        Ok(rule)
    }

    fn apply_optional(
        &mut self,
        object: &serde_json::Map<String, Value>,
    ) -> Result<(), ValidationError> {
        if let Some(v) = object.get("clear") {
            self.clear = match v {
                Value::Null => None,
                v => Some(ValueCondition::parse_field("clear", v)?),
            };
        }
        if let Some(v) = object.get("forSeconds") {
            self.for_seconds = match v {
                Value::Null => 0,
                v => parse_seconds("forSeconds", v, 0)?,
            };
        }
        if let Some(v) = object.get("remindEverySeconds") {
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

fn check_fields(object: &serde_json::Map<String, Value>) -> Result<(), ValidationError> {
    match object
        .keys()
        .find(|k| !RULE_FIELDS.contains(&k.as_str()) && !READ_ONLY_FIELDS.contains(&k.as_str()))
    {
        Some(unknown) => Err(ValidationError::new(
            unknown.as_str(),
            format!("is not a rule field (fields: {})", RULE_FIELDS.join(", ")),
        )),
        None => Ok(()),
    }
}

/// Fields a client may send back as it read them; they are set by the server.
const READ_ONLY_FIELDS: [&str; 4] = ["ruleId", "version", "createdAt", "updatedAt"];

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

/// A change of one device's alarms that a batch (or the offline detector) caused.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// A new alarm.
    Raised {
        /// Its source.
        source: AlarmSource,
        /// Its severity.
        severity: Severity,
        /// When (the reading's time; the detector's time for offline).
        at: Timestamp,
        /// The reading that raised it (none for offline).
        reading: Option<AlarmReading>,
    },
    /// An open alarm cleared.
    Cleared {
        /// Its source.
        source: AlarmSource,
        /// When it was raised (with the source, its key).
        raised_at: Timestamp,
        /// Its severity.
        severity: Severity,
        /// When it cleared.
        at: Timestamp,
        /// The reading that cleared it (none when its rule was deleted).
        reading: Option<AlarmReading>,
    },
}

/// One reading of a batch, as evaluation needs it.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// Event id.
    pub id: &'a EventId,
    /// Type.
    pub event_type: &'a EventType,
    /// Value.
    pub value: &'a EventValue,
    /// Time.
    pub at: Timestamp,
}

/// The device a batch is evaluated for.
pub struct Subject<'a> {
    /// Its id.
    pub device: &'a DeviceId,
    /// Its type.
    pub device_type: &'a DeviceType,
    /// Its tags.
    pub tags: &'a [Tag],
}

/// The most alarm writes (transaction actions) one batch's transitions may take: DynamoDB's
/// 100 actions per transaction less the live state's update that goes with them.
pub const MAX_ALARM_WRITES: usize = 99;

/// The writes that record one source's transitions of one batch (see
/// `ops::alarms::transition_actions`): a clear of the alarm that was open before the batch
/// updates it, a new alarm is one put, and the source's open pointer is put or deleted when the
/// open alarm changes. At most three.
pub fn alarm_writes(transitions: &[Transition]) -> usize {
    let mut clears_earlier = false;
    let mut raised: Option<Timestamp> = None;
    let mut open_at_end = false;
    for t in transitions {
        match t {
            Transition::Raised { at, .. } => {
                raised = Some(*at);
                open_at_end = true;
            }
            Transition::Cleared { raised_at, .. } if Some(*raised_at) == raised => {
                open_at_end = false;
            }
            Transition::Cleared { .. } => clears_earlier = true,
        }
    }
    usize::from(clears_earlier)
        + usize::from(raised.is_some())
        + usize::from(clears_earlier || open_at_end)
}

/// Evaluates `readings` (one device's batch) against `rules`: the statuses after it and the
/// transitions, in time order. Only readings newer than `newest_before` for their type (the
/// device's latest reading of the type before this batch) count, so a replayed or late batch
/// changes nothing. An open alarm of a rule that no longer exists or no longer covers the
/// device clears with no reading. An open offline alarm clears on the batch's newest reading
/// (the device reports again); only the detector raises one.
///
/// A batch's alarm work is bounded whatever its readings: per rule it nets out to at most a
/// clear of the alarm open before the batch and one new alarm, raised at the batch's first
/// crossing and, if the batch ends clear, cleared at its last clearing reading (a sensor that
/// flaps across a threshold within one batch is one alarm, not one per crossing; its id,
/// `{raisedAt}.{rule}`, is unique because only readings newer than the state's count). The
/// writes stay within [`MAX_ALARM_WRITES`]: the offline clear first, then the rules, then
/// clears of rules that went away; a clear that does not fit keeps its status and happens on
/// a later batch (only possible after many rules were deleted at once).
pub fn evaluate(
    subject: &Subject<'_>,
    rules: &[Rule],
    statuses: &AlarmStatuses,
    readings: &[Observed<'_>],
    newest_before: impl Fn(&EventType) -> Option<i64>,
) -> (AlarmStatuses, Vec<Transition>) {
    let mut next = statuses.clone();
    let mut transitions = Vec::new();
    let mut writes = 0;
    let applicable: Vec<&Rule> = rules
        .iter()
        .filter(|r| {
            r.definition
                .scope
                .covers(subject.device, subject.device_type, subject.tags)
        })
        .collect();
    if let Some(offline) = statuses.get(OFFLINE) {
        if let (Some(raised), Some(severity), Some(last)) = (
            offline.raised_at,
            offline.severity,
            readings.iter().max_by_key(|r| r.at),
        ) {
            let cleared = [Transition::Cleared {
                source: AlarmSource::Offline,
                raised_at: Timestamp::from_epoch_millis(raised).unwrap_or_else(Timestamp::min),
                severity,
                at: last.at,
                reading: Some(AlarmReading {
                    id: last.id.clone(),
                    event_type: last.event_type.clone(),
                    value: last.value.clone(),
                    at: last.at,
                }),
            }];
            writes += alarm_writes(&cleared);
            transitions.extend(cleared);
            next.remove(OFFLINE);
        }
    }
    let mut ordered: Vec<&Observed<'_>> = readings
        .iter()
        .filter(|r| newest_before(r.event_type).is_none_or(|before| r.at.epoch_millis() > before))
        .collect();
    ordered.sort_by_key(|r| (r.at, r.id.as_str()));
    for rule in &applicable {
        let key = rule.rule_id.as_str().to_string();
        let before = next.remove(&key).unwrap_or_default();
        let (status, netted) = evaluate_rule(rule, &before, &ordered);
        let needed = alarm_writes(&netted);
        if writes + needed > MAX_ALARM_WRITES {
            // Unreachable within MAX_RULES_PER_OWNER; kept so no rule set can overflow.
            if before.matters() {
                next.insert(key, before);
            }
            continue;
        }
        writes += needed;
        transitions.extend(netted);
        if status.matters() {
            next.insert(key, status);
        }
    }
    // Open alarms whose rule went away clear, as far as the transaction has room.
    for (source, status) in statuses {
        let Ok(AlarmSource::Rule(id)) = AlarmSource::parse(source) else {
            continue;
        };
        if applicable.iter().any(|r| r.rule_id == id) {
            continue;
        }
        if let (Some(raised), Some(severity)) = (status.raised_at, status.severity) {
            let raised_at = Timestamp::from_epoch_millis(raised).unwrap_or_else(Timestamp::min);
            let cleared = [Transition::Cleared {
                source: AlarmSource::Rule(id),
                raised_at,
                severity,
                at: newest(readings).unwrap_or(raised_at),
                reading: None,
            }];
            if writes + alarm_writes(&cleared) > MAX_ALARM_WRITES {
                continue;
            }
            writes += alarm_writes(&cleared);
            transitions.extend(cleared);
        }
        next.remove(source);
    }
    (next, transitions)
}

/// One rule over a batch's new readings (time order): its status after them and its netted
/// transitions (see [`evaluate`]).
fn evaluate_rule(
    rule: &Rule,
    before: &AlarmStatus,
    ordered: &[&Observed<'_>],
) -> (AlarmStatus, Vec<Transition>) {
    let def = &rule.definition;
    let source = || AlarmSource::Rule(rule.rule_id.clone());
    let mut status = before.clone();
    let mut earlier_cleared: Option<Transition> = None;
    let mut raised: Option<Transition> = None;
    let mut raised_cleared: Option<Transition> = None;
    for r in ordered.iter().filter(|r| *r.event_type == def.event_type) {
        let at = r.at.epoch_millis();
        let reading = || AlarmReading {
            id: r.id.clone(),
            event_type: r.event_type.clone(),
            value: r.value.clone(),
            at: r.at,
        };
        match status.raised_at {
            Some(open) => {
                if def.clears(r.value) {
                    let raised_at =
                        Timestamp::from_epoch_millis(open).unwrap_or_else(Timestamp::min);
                    let cleared = Transition::Cleared {
                        source: source(),
                        raised_at,
                        severity: status.severity.unwrap_or(def.severity),
                        at: r.at,
                        reading: Some(reading()),
                    };
                    if raised.is_some() {
                        raised_cleared = Some(cleared);
                    } else {
                        earlier_cleared = Some(cleared);
                    }
                    status = AlarmStatus::default();
                }
            }
            None if def.condition.holds(r.value) => {
                let since = *status.pending_since.get_or_insert(at);
                if at - since >= (def.for_seconds as i64) * 1000 {
                    // The batch's first raise is its one new alarm; a later raise reopens it.
                    let first = raised.get_or_insert_with(|| Transition::Raised {
                        source: source(),
                        severity: def.severity,
                        at: r.at,
                        reading: Some(reading()),
                    });
                    let Transition::Raised { at: first_at, .. } = first else {
                        unreachable!("a raise")
                    };
                    raised_cleared = None;
                    status = AlarmStatus {
                        raised_at: Some(first_at.epoch_millis()),
                        severity: Some(def.severity),
                        pending_since: None,
                    };
                }
            }
            None => status.pending_since = None,
        }
    }
    let netted = earlier_cleared
        .into_iter()
        .chain(raised)
        .chain(raised_cleared)
        .collect();
    (status, netted)
}

fn newest(readings: &[Observed<'_>]) -> Option<Timestamp> {
    readings.iter().map(|r| r.at).max()
}

/// The open alarms of a device's statuses: how many, and the highest severity.
pub fn open_summary(statuses: &AlarmStatuses) -> (usize, Option<Severity>) {
    let open: Vec<Severity> = statuses
        .values()
        .filter(|s| s.raised_at.is_some())
        .filter_map(|s| s.severity)
        .collect();
    (open.len(), open.iter().max().copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(body: Value) -> Rule {
        Rule {
            rule_id: RuleId::generate(),
            version: 1,
            definition: RuleDefinition::parse(&body).unwrap(),
            created_at: Timestamp::min(),
            updated_at: Timestamp::min(),
        }
    }

    fn temp_rule(extra: Value) -> Rule {
        let mut body = json!({"name": "hot", "eventType": "temperature",
            "scope": {"deviceType": "thermostat"}, "condition": {"above": 80},
            "clear": {"below": 75}, "severity": "major"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        rule(body)
    }

    struct Batch {
        ids: Vec<EventId>,
        types: Vec<EventType>,
        values: Vec<EventValue>,
        ats: Vec<Timestamp>,
    }

    fn batch(values: &[(f64, i64)]) -> Batch {
        Batch {
            ids: (0..values.len())
                .map(|i| EventId::parse(format!("e{i}-{}", values[i].1)).unwrap())
                .collect(),
            types: values
                .iter()
                .map(|_| EventType::parse("temperature").unwrap())
                .collect(),
            values: values.iter().map(|(v, _)| EventValue::Number(*v)).collect(),
            ats: values
                .iter()
                .map(|(_, s)| Timestamp::from_epoch_millis(1_700_000_000_000 + s * 1000).unwrap())
                .collect(),
        }
    }

    impl Batch {
        fn observed(&self) -> Vec<Observed<'_>> {
            (0..self.ids.len())
                .map(|i| Observed {
                    id: &self.ids[i],
                    event_type: &self.types[i],
                    value: &self.values[i],
                    at: self.ats[i],
                })
                .collect()
        }
    }

    fn run(
        rules: &[Rule],
        statuses: &AlarmStatuses,
        values: &[(f64, i64)],
        before: Option<i64>,
    ) -> (AlarmStatuses, Vec<Transition>) {
        let device = DeviceId::parse("d").unwrap();
        let device_type = DeviceType::parse("thermostat").unwrap();
        let subject = Subject {
            device: &device,
            device_type: &device_type,
            tags: &[],
        };
        let b = batch(values);
        evaluate(&subject, rules, statuses, &b.observed(), |_| before)
    }

    fn raised(t: &[Transition]) -> usize {
        t.iter()
            .filter(|t| matches!(t, Transition::Raised { .. }))
            .count()
    }
    fn cleared(t: &[Transition]) -> usize {
        t.iter()
            .filter(|t| matches!(t, Transition::Cleared { .. }))
            .count()
    }

    #[test]
    fn a_hundred_readings_over_the_threshold_raise_one_alarm_and_hysteresis_clears_it_once() {
        let rules = [temp_rule(json!({}))];
        let hot: Vec<(f64, i64)> = (0..100).map(|i| (90.0, i)).collect();
        let (s, t) = run(&rules, &AlarmStatuses::new(), &hot, None);
        assert_eq!((raised(&t), cleared(&t)), (1, 0));
        // Between the thresholds nothing changes; below the clear threshold it clears once.
        let (s2, t) = run(&rules, &s, &[(78.0, 200), (81.0, 201), (79.0, 202)], None);
        assert!(t.is_empty(), "{t:?}");
        assert_eq!(s2, s);
        let (s3, t) = run(&rules, &s2, &[(74.0, 300), (70.0, 301), (78.0, 302)], None);
        assert_eq!((raised(&t), cleared(&t)), (0, 1));
        assert!(s3.is_empty(), "a cleared rule keeps no status");
    }

    fn writes_per_source(t: &[Transition]) -> BTreeMap<String, usize> {
        let mut by_source: BTreeMap<String, Vec<Transition>> = BTreeMap::new();
        for tr in t {
            let (Transition::Raised { source, .. } | Transition::Cleared { source, .. }) = tr;
            by_source
                .entry(source.as_str().to_string())
                .or_default()
                .push(tr.clone());
        }
        by_source
            .into_iter()
            .map(|(k, v)| (k, alarm_writes(&v)))
            .collect()
    }

    fn alarm_keys(t: &[Transition]) -> Vec<(String, Timestamp)> {
        t.iter()
            .filter_map(|tr| match tr {
                Transition::Raised { source, at, .. } => Some((source.as_str().to_string(), *at)),
                Transition::Cleared { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_flapping_batch_across_two_rules_nets_to_one_alarm_per_rule() {
        let hot = temp_rule(json!({}));
        let cold =
            temp_rule(json!({"name": "cold", "condition": {"below": 10}, "clear": {"above": 15}}));
        let rules = [hot.clone(), cold.clone()];
        // 100 readings alternating 90, 0, 90, ...: every reading crosses both rules.
        let flapping: Vec<(f64, i64)> = (0..100)
            .map(|i| (if i % 2 == 0 { 90.0 } else { 0.0 }, i))
            .collect();
        let (s, t) = run(&rules, &AlarmStatuses::new(), &flapping, None);
        // One new alarm per rule, raised at its first crossing; the batch ends on 0.0 (cold open,
        // hot cleared by it), so hot's alarm is raised and cleared, cold's stays open.
        assert_eq!((raised(&t), cleared(&t)), (2, 1), "{t:?}");
        let first = |n: i64| Timestamp::from_epoch_millis(1_700_000_000_000 + n * 1000).unwrap();
        let mut keys = alarm_keys(&t);
        keys.sort();
        let mut expected = vec![
            (hot.rule_id.as_str().to_string(), first(0)),
            (cold.rule_id.as_str().to_string(), first(1)),
        ];
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(
            s[cold.rule_id.as_str()].raised_at,
            Some(first(1).epoch_millis())
        );
        assert!(!s.contains_key(hot.rule_id.as_str()));
        let writes: usize = writes_per_source(&t).values().sum();
        assert!(writes <= 6, "{writes} writes for two rules");
        // The next flapping batch clears the open alarm and nets to one new one per rule.
        let later: Vec<(f64, i64)> = (100..200)
            .map(|i| (if i % 2 == 0 { 90.0 } else { 0.0 }, i))
            .collect();
        let (_, t) = run(&rules, &s, &later, None);
        assert!(writes_per_source(&t).values().all(|w| *w <= 3), "{t:?}");
        let keys = alarm_keys(&t);
        let unique: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "alarm keys repeat: {keys:?}");
    }

    #[test]
    fn readings_sharing_one_time_raise_one_alarm_per_rule() {
        let rules = [temp_rule(json!({}))];
        // Four readings at the same instant, flapping: ids differ, the time does not.
        let same: Vec<(f64, i64)> = vec![(90.0, 5), (70.0, 5), (91.0, 5), (60.0, 5)];
        let (s, t) = run(&rules, &AlarmStatuses::new(), &same, None);
        assert_eq!(alarm_keys(&t).len(), 1, "{t:?}");
        assert_eq!(writes_per_source(&t).values().sum::<usize>(), 1);
        assert!(s.is_empty());
    }

    #[test]
    fn every_rule_moving_at_once_stays_within_one_transaction() {
        // An owner's full rule set flapping while as many deleted rules' alarms are open: the
        // writes stay within one transaction; clears that do not fit wait for a later batch.
        let rules: Vec<Rule> = (0..MAX_RULES_PER_OWNER)
            .map(|i| temp_rule(json!({"name": format!("r{i}")})))
            .collect();
        let mut open = AlarmStatuses::new();
        for i in 0..40 {
            let gone = RuleId::parse(&format!("r{:016x}", i + 1)).unwrap();
            open.insert(
                gone.as_str().to_string(),
                AlarmStatus {
                    raised_at: Some(1_600_000_000_000),
                    severity: Some(Severity::Minor),
                    pending_since: None,
                },
            );
        }
        open.insert(
            OFFLINE.into(),
            AlarmStatus {
                raised_at: Some(1_600_000_000_000),
                severity: Some(Severity::Major),
                pending_since: None,
            },
        );
        let flapping: Vec<(f64, i64)> = (0..100)
            .map(|i| (if i % 2 == 0 { 90.0 } else { 0.0 }, i))
            .collect();
        let (s, t) = run(&rules, &open, &flapping, None);
        let writes: usize = writes_per_source(&t).values().sum();
        assert!(writes <= MAX_ALARM_WRITES, "{writes} writes");
        assert_eq!(
            raised(&t),
            MAX_RULES_PER_OWNER,
            "every rule's crossing recorded"
        );
        let still_open = s.values().filter(|st| st.raised_at.is_some()).count();
        assert!(still_open > 0, "deferred clears keep their status");
        // A later quiet batch clears what waited.
        let (s2, t2) = run(&rules, &s, &[(78.0, 500)], None);
        assert!(cleared(&t2) > 0);
        assert!(s2.len() < s.len());
    }

    #[test]
    fn a_replayed_or_late_batch_changes_nothing() {
        let rules = [temp_rule(json!({}))];
        let (s, _) = run(&rules, &AlarmStatuses::new(), &[(90.0, 10)], None);
        let (s, _) = run(&rules, &s, &[(70.0, 20)], Some(10_000));
        let newest = 1_700_000_000_000 + 20_000;
        let (again, t) = run(&rules, &s, &[(90.0, 10)], Some(newest));
        assert!(t.is_empty());
        assert_eq!(again, s);
    }

    #[test]
    fn a_duration_rule_ignores_a_single_spike() {
        let rules = [temp_rule(json!({"forSeconds": 300}))];
        let (s, t) = run(
            &rules,
            &AlarmStatuses::new(),
            &[(90.0, 0), (70.0, 60), (90.0, 120)],
            None,
        );
        assert!(t.is_empty());
        assert!(s.values().all(|s| s.raised_at.is_none()));
        // Holding across readings for the duration raises it, at the reading that completed it.
        let (_, t) = run(&rules, &s, &[(91.0, 300), (92.0, 420)], None);
        assert_eq!(raised(&t), 1);
        match &t[0] {
            Transition::Raised { reading, .. } => {
                assert_eq!(reading.as_ref().unwrap().value, EventValue::Number(92.0))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_open_alarm_of_a_deleted_rule_clears() {
        let rules = [temp_rule(json!({}))];
        let (s, _) = run(&rules, &AlarmStatuses::new(), &[(90.0, 0)], None);
        let (s, t) = run(&[], &s, &[(90.0, 10)], None);
        assert_eq!(cleared(&t), 1);
        assert!(s.is_empty());
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
