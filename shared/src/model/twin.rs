//! A device's twin: what its owner wants it configured as (desired), what it reported it
//! applied (reported), the commands queued for it, and fleet-wide changes (rollouts). The
//! documents are bounded JSON objects; the versions a device's delivery decision needs are
//! four small numbers on its live state ([`TwinVersions`]), so ingestion learns whether anything
//! is pending from the live-state update it sends anyway (docs/design.md, "Device twin").

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::error::ValidationError;
use crate::model::expression::Attribute;
use crate::model::ids::{DeviceId, DeviceType, Tag};

/// Largest desired or reported document, in bytes of compact JSON: an item of its own under
/// 4 KB (4 write units at most; a typical configuration of a few settings is one).
pub const MAX_DOCUMENT_BYTES: usize = 4096;
/// Deepest nesting of a document (the object itself is depth 1).
pub const MAX_DOCUMENT_DEPTH: usize = 5;
/// Longest key of a document, in characters.
pub const MAX_DOCUMENT_KEY: usize = 64;
/// Largest command parameters or result, in bytes of compact JSON.
pub const MAX_COMMAND_PARAMETERS_BYTES: usize = 1024;
/// Commands a device may have queued or delivered and not finished: past it, a new one is a
/// 409 `command_queue_full`.
pub const MAX_OPEN_COMMANDS: u64 = 16;
/// Longest command expiry, in seconds (7 days).
pub const MAX_COMMAND_EXPIRY_SECONDS: i64 = 7 * 86_400;
/// Expiry of a command that names none, in seconds.
pub const DEFAULT_COMMAND_EXPIRY_SECONDS: i64 = 3600;
/// How long a finished or expired command stays listed, in seconds after its expiry (TTL).
pub const COMMAND_KEPT_SECONDS: i64 = 30 * 86_400;
/// Rollouts one owner may have running: past it, a new one is a 409 `rollout_limit`. The
/// worker applies an owner's rollouts one after another (creation order), so more would only
/// wait, and the running list every run pages through stays bounded by owners, not requests.
pub const MAX_RUNNING_ROLLOUTS: usize = 10;
/// Per-device failures a rollout keeps for its owner to read (the first ones; the count
/// covers them all): bounds the rollout item well under DynamoDB's 400 KB.
pub const MAX_RECORDED_FAILURES: usize = 20;

/// A desired or reported document: a JSON object of at most [`MAX_DOCUMENT_BYTES`] and
/// [`MAX_DOCUMENT_DEPTH`] levels, keys non-empty and at most [`MAX_DOCUMENT_KEY`] characters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct TwinDocument(Map<String, Value>);

impl TwinDocument {
    /// Validates `value` under `field` (`desired`, `reported.state`), bounded by `max_bytes`.
    pub fn parse(field: &str, value: Value, max_bytes: usize) -> Result<Self, ValidationError> {
        let Value::Object(map) = value else {
            return Err(ValidationError::new(field, "must be a JSON object"));
        };
        check_depth(field, &map, 1)?;
        let size = serde_json::to_string(&map)
            .map_err(|e| ValidationError::new(field, e.to_string()))?
            .len();
        if size > max_bytes {
            return Err(ValidationError::new(
                field,
                format!("must be at most {max_bytes} bytes of JSON, is {size}"),
            ));
        }
        Ok(Self(map))
    }

    /// The document as compact JSON text (how it is stored).
    pub fn to_text(&self) -> String {
        serde_json::to_string(&self.0).expect("a JSON map serializes")
    }

    /// A stored document read back (stored documents were validated when written).
    pub fn from_text(text: &str) -> Result<Self, crate::model::error::FleetError> {
        serde_json::from_str(text)
            .map(Self)
            .map_err(|e| crate::model::error::FleetError::internal(format!("twin document: {e}")))
    }

    /// The document as a JSON value.
    pub fn as_value(&self) -> Value {
        Value::Object(self.0.clone())
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// This document with `patch` merged in (JSON Merge Patch, RFC 7386): a `null` removes a
    /// key, an object merges into an object, anything else replaces.
    pub fn merged(&self, patch: &TwinDocument) -> TwinDocument {
        fn merge(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
            for (key, value) in patch {
                match value {
                    Value::Null => {
                        target.remove(key);
                    }
                    Value::Object(inner) => {
                        let slot = target
                            .entry(key.clone())
                            .or_insert_with(|| Value::Object(Map::new()));
                        if !slot.is_object() {
                            *slot = Value::Object(Map::new());
                        }
                        if let Value::Object(t) = slot {
                            merge(t, inner);
                        }
                    }
                    other => {
                        target.insert(key.clone(), other.clone());
                    }
                }
            }
        }
        let mut next = self.0.clone();
        merge(&mut next, &patch.0);
        TwinDocument(next)
    }

    /// What `self` (desired) asks that `reported` does not show: every desired key whose value
    /// differs, objects compared key by key (AWS IoT's shadow delta). Empty when in sync.
    pub fn delta(&self, reported: &TwinDocument) -> TwinDocument {
        fn diff(desired: &Map<String, Value>, reported: &Map<String, Value>) -> Map<String, Value> {
            let mut out = Map::new();
            for (key, want) in desired {
                match (want, reported.get(key)) {
                    (Value::Object(w), Some(Value::Object(r))) => {
                        let inner = diff(w, r);
                        if !inner.is_empty() {
                            out.insert(key.clone(), Value::Object(inner));
                        }
                    }
                    (w, Some(r)) if w == r => {}
                    (w, _) => {
                        out.insert(key.clone(), w.clone());
                    }
                }
            }
            out
        }
        TwinDocument(diff(&self.0, &reported.0))
    }
}

fn check_depth(field: &str, map: &Map<String, Value>, depth: usize) -> Result<(), ValidationError> {
    if depth > MAX_DOCUMENT_DEPTH {
        return Err(ValidationError::new(
            field,
            format!("must nest at most {MAX_DOCUMENT_DEPTH} objects deep"),
        ));
    }
    for (key, value) in map {
        let path = format!("{field}.{key}");
        if key.is_empty() || key.chars().count() > MAX_DOCUMENT_KEY {
            return Err(ValidationError::new(
                path,
                format!("keys must be 1 to {MAX_DOCUMENT_KEY} characters"),
            ));
        }
        if key.chars().any(char::is_control) {
            return Err(ValidationError::new(
                path,
                "keys must not contain control characters",
            ));
        }
        check_value_depth(&path, value, depth + 1)?;
    }
    Ok(())
}

fn check_value_depth(field: &str, value: &Value, depth: usize) -> Result<(), ValidationError> {
    match value {
        Value::Object(map) => check_depth(field, map, depth),
        Value::Array(items) => {
            if depth > MAX_DOCUMENT_DEPTH {
                return Err(ValidationError::new(
                    field,
                    format!("must nest at most {MAX_DOCUMENT_DEPTH} levels deep"),
                ));
            }
            items
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| check_value_depth(&format!("{field}[{i}]"), v, depth + 1))
        }
        _ => Ok(()),
    }
}

/// The twin's versions kept on a device's live state: what ingestion's own live-state update
/// returns, so it knows without a read whether anything is pending for the device. Absent
/// (zero) on a device that never had a desired state or a command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TwinVersions {
    /// Version of the owner's desired document (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub desired_version: u64,
    /// The desired version the device last reported it applied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reported_version: u64,
    /// Sequence number of the newest command queued.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub command_seq: u64,
    /// Every command up to this sequence number is finished or expired.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub commands_done: u64,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TwinVersions {
    /// `desiredVersion` on the live state.
    pub const DESIRED_VERSION: Attribute = Attribute::named("desiredVersion");
    /// `reportedVersion` on the live state.
    pub const REPORTED_VERSION: Attribute = Attribute::named("reportedVersion");
    /// `commandSeq` on the live state.
    pub const COMMAND_SEQ: Attribute = Attribute::named("commandSeq");
    /// `commandsDone` on the live state.
    pub const COMMANDS_DONE: Attribute = Attribute::named("commandsDone");
    /// The four, as the live state declares them.
    pub const ATTRIBUTES: [Attribute; 4] = [
        Self::DESIRED_VERSION,
        Self::REPORTED_VERSION,
        Self::COMMAND_SEQ,
        Self::COMMANDS_DONE,
    ];

    /// Whether the device has a desired state it has not reported applying.
    pub fn desired_pending(&self) -> bool {
        self.desired_version > self.reported_version
    }

    /// Whether some command may still be waiting for the device or its acknowledgement.
    pub fn commands_pending(&self) -> bool {
        self.command_seq > self.commands_done
    }

    /// Commands queued and not yet known to be finished or expired.
    pub fn open_commands(&self) -> u64 {
        self.command_seq.saturating_sub(self.commands_done)
    }

    /// The newest of two readings of the same state (each number only grows).
    pub fn newest(self, other: TwinVersions) -> TwinVersions {
        TwinVersions {
            desired_version: self.desired_version.max(other.desired_version),
            reported_version: self.reported_version.max(other.reported_version),
            command_seq: self.command_seq.max(other.command_seq),
            commands_done: self.commands_done.max(other.commands_done),
        }
    }
}

/// Where a command is in its life. `expired` is never stored: a queued or delivered command
/// past its expiry reads as expired ([`crate::model::entities::command::CommandItem::status_at`]) and is never delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CommandStatus {
    /// Waiting for the device's next request.
    Queued,
    /// Sent to the device at least once; waiting for its acknowledgement.
    Delivered,
    /// The device acknowledged it as done.
    Succeeded,
    /// The device acknowledged it as failed.
    Failed,
    /// Its expiry passed before the device finished it.
    Expired,
}

impl CommandStatus {
    /// The stored and shown spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandStatus::Queued => "queued",
            CommandStatus::Delivered => "delivered",
            CommandStatus::Succeeded => "succeeded",
            CommandStatus::Failed => "failed",
            CommandStatus::Expired => "expired",
        }
    }

    /// Whether nothing more happens to it.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            CommandStatus::Succeeded | CommandStatus::Failed | CommandStatus::Expired
        )
    }
}

/// The API's id of the command with sequence number `seq`.
pub fn command_id(seq: u64) -> String {
    format!("cmd-{seq}")
}

/// The sequence number of the command id `text` (`cmd-7`), or a 400 naming `field`.
pub fn parse_command_id(field: &str, text: &str) -> Result<u64, ValidationError> {
    text.strip_prefix("cmd-")
        .filter(|d| !d.is_empty() && d.len() <= 10 && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|seq| *seq >= 1)
        .ok_or_else(|| ValidationError::new(field, "must be a command id like cmd-1"))
}

/// Which of an owner's devices a rollout changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RolloutTarget {
    /// Every device carrying this tag.
    Tag(Tag),
    /// Every device of this type.
    Type(DeviceType),
}

/// Where a rollout is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RolloutStatus {
    /// The scheduled worker is applying it, page after page.
    Running,
    /// Every targeted device has it.
    Done,
    /// Its owner cancelled it: the devices it reached keep what they got, no more are reached.
    Cancelled,
    /// A firmware rollout stopped, by itself (a stage's failures reached its abort rule) or by
    /// its owner: nothing is offered until it is resumed; devices already on it still report.
    Paused,
}

impl RolloutStatus {
    /// The stored and shown spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutStatus::Running => "running",
            RolloutStatus::Done => "done",
            RolloutStatus::Cancelled => "cancelled",
            RolloutStatus::Paused => "paused",
        }
    }
}

/// A device a rollout did not change, and why (shown on `GET /me/rollouts/{rolloutId}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutFailure {
    /// The device.
    pub device_id: DeviceId,
    /// Why its desired state was left as it was.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(v: Value) -> TwinDocument {
        TwinDocument::parse("desired", v, MAX_DOCUMENT_BYTES).unwrap()
    }

    #[test]
    fn documents_are_bounded_objects_and_errors_name_the_field() {
        let err = TwinDocument::parse("desired", json!([1]), MAX_DOCUMENT_BYTES).unwrap_err();
        assert_eq!(err.field, "desired");
        let deep = json!({"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}});
        let err = TwinDocument::parse("desired", deep, MAX_DOCUMENT_BYTES).unwrap_err();
        assert_eq!(err.field, "desired.a.b.c.d.e", "{err}");
        let ok = json!({"a": {"b": {"c": {"d": 1}}}});
        TwinDocument::parse("desired", ok, MAX_DOCUMENT_BYTES).unwrap();
        let big = json!({ "blob": "x".repeat(MAX_DOCUMENT_BYTES) });
        let err = TwinDocument::parse("desired", big, MAX_DOCUMENT_BYTES).unwrap_err();
        assert_eq!(err.field, "desired");
        assert!(err.reason.contains("at most 4096 bytes"), "{err}");
        let err = TwinDocument::parse("desired", json!({"": 1}), MAX_DOCUMENT_BYTES).unwrap_err();
        assert_eq!(err.field, "desired.");
    }

    #[test]
    fn delta_names_what_reported_does_not_show_and_merge_patch_follows_rfc_7386() {
        let desired =
            doc(json!({"interval": 60, "led": {"color": "red", "on": true}, "mode": "eco"}));
        let reported =
            doc(json!({"interval": 60, "led": {"color": "blue", "on": true}, "extra": 1}));
        assert_eq!(
            desired.delta(&reported).as_value(),
            json!({"led": {"color": "red"}, "mode": "eco"})
        );
        assert!(desired.delta(&desired).is_empty());
        let patched = desired.merged(&doc(json!({"mode": null, "led": {"on": false}, "new": 2})));
        assert_eq!(
            patched.as_value(),
            json!({"interval": 60, "led": {"color": "red", "on": false}, "new": 2})
        );
    }

    #[test]
    fn versions_say_what_is_pending() {
        let mut v = TwinVersions::default();
        assert!(!v.desired_pending() && !v.commands_pending());
        v.desired_version = 2;
        v.reported_version = 1;
        v.command_seq = 3;
        v.commands_done = 3;
        assert!(v.desired_pending() && !v.commands_pending());
        let newer = TwinVersions {
            reported_version: 2,
            command_seq: 4,
            ..TwinVersions::default()
        };
        let both = v.newest(newer);
        assert!(!both.desired_pending() && both.commands_pending());
        assert_eq!(both.open_commands(), 1);
    }
}
