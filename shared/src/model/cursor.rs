//! Opaque page cursors. A cursor carries the pattern it belongs to and DynamoDB's
//! `LastEvaluatedKey`s; it is not signed, but every key in it is checked against the partition
//! the caller is allowed to read before it is used, so an edited cursor can only ever reach
//! the caller's own data (anything else is a 400).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::model::error::ValidationError;
use crate::model::expression::Attribute;
use crate::model::pattern_id::PatternId;

/// A DynamoDB key with string attributes only (all of this table's keys are strings).
pub type StartKey = BTreeMap<String, String>;

#[derive(Serialize, Deserialize)]
struct Envelope {
    /// Pattern id, as text (`AP-04`): the wire format predates [`PatternId`].
    p: String,
    /// Start keys; `None` marks an exhausted shard.
    k: Vec<Option<StartKey>>,
}

/// Longest cursor accepted, in characters.
pub const MAX_CURSOR: usize = 4096;

/// The 400 for a cursor this request cannot use.
pub fn invalid() -> ValidationError {
    ValidationError::new("cursor", "is not a cursor this request issued")
}

/// Encodes start keys (one per shard, `None` for exhausted ones) for `pattern`.
pub fn encode(pattern: PatternId, keys: Vec<Option<StartKey>>) -> String {
    let json = serde_json::to_vec(&Envelope {
        p: pattern.as_str().to_string(),
        k: keys,
    })
    .unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a cursor of `pattern` with exactly `shards` entries.
pub fn decode(
    pattern: PatternId,
    cursor: &str,
    shards: usize,
) -> Result<Vec<Option<StartKey>>, ValidationError> {
    let keys = decode_up_to(pattern, cursor, shards)?;
    if keys.len() != shards {
        return Err(invalid());
    }
    Ok(keys)
}

/// Decodes a cursor of `pattern` with at most `max` entries (listings whose cursor length
/// varies, like a device group's).
pub fn decode_up_to(
    pattern: PatternId,
    cursor: &str,
    max: usize,
) -> Result<Vec<Option<StartKey>>, ValidationError> {
    if cursor.len() > MAX_CURSOR {
        return Err(invalid());
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let envelope: Envelope = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if envelope.p != pattern.as_str() || envelope.k.is_empty() || envelope.k.len() > max {
        return Err(invalid());
    }
    Ok(envelope.k)
}

/// A `LastEvaluatedKey` as a [`StartKey`]; `None` if any attribute is not a string.
pub fn start_key(key: &HashMap<String, AttributeValue>) -> Option<StartKey> {
    key.iter()
        .map(|(k, v)| v.as_s().ok().map(|s| (k.clone(), s.clone())))
        .collect()
}

/// A [`StartKey`] as `ExclusiveStartKey`.
pub fn exclusive_start_key(key: &StartKey) -> HashMap<String, AttributeValue> {
    key.iter()
        .map(|(k, v)| (k.clone(), AttributeValue::S(v.clone())))
        .collect()
}

/// Where a single-partition listing resumes: `None` without a cursor; otherwise the one key
/// the cursor of `pattern` carries, checked with [`check_key`], as an `ExclusiveStartKey`.
pub fn resume(
    pattern: PatternId,
    cursor: Option<&str>,
    fixed: &[(Attribute, &str)],
    prefixed: &[(Attribute, &str)],
) -> Result<Option<HashMap<String, AttributeValue>>, ValidationError> {
    let Some(text) = cursor else {
        return Ok(None);
    };
    let key = decode(pattern, text, 1)?
        .into_iter()
        .next()
        .flatten()
        .ok_or_else(invalid)?;
    check_key(&key, fixed, prefixed)?;
    Ok(Some(exclusive_start_key(&key)))
}

/// The cursor of a single-partition listing after a page ending at `last` (its
/// `LastEvaluatedKey`); `None` on the last page.
pub fn after(pattern: PatternId, last: Option<&HashMap<String, AttributeValue>>) -> Option<String> {
    last.and_then(start_key)
        .map(|k| encode(pattern, vec![Some(k)]))
}

/// Checks that `key` has exactly the attributes `expected` lists, that `fixed` attributes have
/// the given values (the caller's partition), and that `prefixed` attributes start with the
/// given prefixes.
pub fn check_key(
    key: &StartKey,
    fixed: &[(Attribute, &str)],
    prefixed: &[(Attribute, &str)],
) -> Result<(), ValidationError> {
    let expected = fixed.len() + prefixed.len();
    if key.len() != expected {
        return Err(invalid());
    }
    for (name, value) in fixed {
        if key.get(name.name()).map(String::as_str) != Some(*value) {
            return Err(invalid());
        }
    }
    for (name, prefix) in prefixed {
        if !key.get(name.name()).is_some_and(|v| v.starts_with(prefix)) {
            return Err(invalid());
        }
    }
    Ok(())
}

/// One page of a listing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page<T> {
    /// The items, in the pattern's order.
    pub items: Vec<T>,
    /// Opaque cursor for the next page; `None` on the last page.
    pub cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::entities::event::EVENT_PREFIX;
    use crate::model::entities::profile::PROFILE_SK;
    use crate::model::entities::ItemKey;
    use crate::model::ids::{DeviceId, EventId, UserId};
    use crate::model::keys::event_pk;
    use crate::model::schema::{GSI1PK, PK, SK};
    use crate::model::timestamp::Timestamp;

    fn key(pairs: &[(Attribute, &str)]) -> StartKey {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    fn device() -> DeviceId {
        DeviceId::parse("d").unwrap()
    }

    /// The start key of one of `owner`'s events of device `d`.
    fn event_key(owner: &str) -> StartKey {
        let k = ItemKey::Event {
            user: user(owner),
            device: device(),
            at: Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap(),
            event: EventId::parse("e").unwrap(),
        }
        .primary_key();
        key(&[(PK, &k.pk), (SK, &k.sk)])
    }

    #[test]
    fn round_trips_and_rejects_other_patterns_and_garbage() {
        let k = event_key("u");
        let c = encode(PatternId::DeviceEvents, vec![Some(k.clone())]);
        assert_eq!(
            decode(PatternId::DeviceEvents, &c, 1).unwrap(),
            vec![Some(k)]
        );
        assert!(decode(PatternId::UserEvents, &c, 1).is_err());
        assert!(decode(PatternId::DeviceEvents, &c, 2).is_err());
        assert!(decode(PatternId::DeviceEvents, "not-base64!", 1).is_err());
        assert!(decode(PatternId::DeviceEvents, &URL_SAFE_NO_PAD.encode("{}"), 1).is_err());
        assert_eq!(
            decode(PatternId::DeviceEvents, "x", 1).unwrap_err().field,
            "cursor"
        );
    }

    #[test]
    fn the_wire_format_names_the_pattern_by_its_text_id() {
        // Cursors issued before PatternId existed carry {"p":"AP-04","k":[...]}: still valid.
        // The text below is a cursor as clients hold it, so it is spelled out on purpose.
        let c = encode(PatternId::DeviceEvents, vec![Some(event_key("u"))]);
        let json: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&c).unwrap()).unwrap();
        assert_eq!(json["p"], "AP-04");
        let legacy =
            URL_SAFE_NO_PAD.encode(r#"{"p":"AP-DASH","k":[{"PK":"USER#u","SK":"DEVICE#d"}]}"#);
        let dashboard_key = ItemKey::Device {
            user: user("u"),
            device: device(),
        }
        .primary_key();
        assert_eq!(
            decode(PatternId::Dashboard, &legacy, 1).unwrap(),
            vec![Some(key(&[
                (PK, &dashboard_key.pk),
                (SK, &dashboard_key.sk)
            ]))]
        );
    }

    #[test]
    fn keys_must_stay_in_the_callers_partition() {
        let partition = event_pk(&user("u"), &device());
        let fixed = [(PK, partition.as_str())];
        let prefixed = [(SK, EVENT_PREFIX)];
        assert!(check_key(&event_key("u"), &fixed, &prefixed).is_ok());
        assert!(check_key(&event_key("v"), &fixed, &prefixed).is_err());
        let mut extra = event_key("u");
        extra.insert(GSI1PK.to_string(), "x".to_string());
        assert!(check_key(&extra, &fixed, &prefixed).is_err());
        let profile = key(&[(PK, &partition), (SK, PROFILE_SK)]);
        assert!(check_key(&profile, &fixed, &prefixed).is_err());
    }
}
