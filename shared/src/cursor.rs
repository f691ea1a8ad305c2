//! Opaque page cursors. A cursor carries the pattern it belongs to and DynamoDB's
//! `LastEvaluatedKey`s; it is not signed, but every key in it is checked against the partition
//! the caller is allowed to read before it is used, so an edited cursor can only ever reach
//! the caller's own data (anything else is a 400).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::catalog::PatternId;
use crate::error::ValidationError;

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
    if cursor.len() > MAX_CURSOR {
        return Err(invalid());
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let envelope: Envelope = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if envelope.p != pattern.as_str() || envelope.k.len() != shards {
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
    fixed: &[(&str, &str)],
    prefixed: &[(&str, &str)],
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
    fixed: &[(&str, &str)],
    prefixed: &[(&str, &str)],
) -> Result<(), ValidationError> {
    let expected = fixed.len() + prefixed.len();
    if key.len() != expected {
        return Err(invalid());
    }
    for (name, value) in fixed {
        if key.get(*name).map(String::as_str) != Some(*value) {
            return Err(invalid());
        }
    }
    for (name, prefix) in prefixed {
        if !key.get(*name).is_some_and(|v| v.starts_with(prefix)) {
            return Err(invalid());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pairs: &[(&str, &str)]) -> StartKey {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn round_trips_and_rejects_other_patterns_and_garbage() {
        let k = key(&[("PK", "USER#u#DEVICE#d"), ("SK", "EVENT#x#e")]);
        let c = encode(PatternId::Ap04, vec![Some(k.clone())]);
        assert_eq!(decode(PatternId::Ap04, &c, 1).unwrap(), vec![Some(k)]);
        assert!(decode(PatternId::Ap05, &c, 1).is_err());
        assert!(decode(PatternId::Ap04, &c, 2).is_err());
        assert!(decode(PatternId::Ap04, "not-base64!", 1).is_err());
        assert!(decode(PatternId::Ap04, &URL_SAFE_NO_PAD.encode("{}"), 1).is_err());
        assert_eq!(decode(PatternId::Ap04, "x", 1).unwrap_err().field, "cursor");
    }

    #[test]
    fn the_wire_format_names_the_pattern_by_its_text_id() {
        // Cursors issued before PatternId existed carry {"p":"AP-04","k":[...]}: still valid.
        let k = key(&[("PK", "USER#u#DEVICE#d"), ("SK", "EVENT#x#e")]);
        let c = encode(PatternId::Ap04, vec![Some(k.clone())]);
        let json: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&c).unwrap()).unwrap();
        assert_eq!(json["p"], "AP-04");
        let legacy =
            URL_SAFE_NO_PAD.encode(r#"{"p":"AP-DASH","k":[{"PK":"USER#u","SK":"DEVICE#d"}]}"#);
        assert_eq!(
            decode(PatternId::ApDash, &legacy, 1).unwrap(),
            vec![Some(key(&[("PK", "USER#u"), ("SK", "DEVICE#d")]))]
        );
    }

    #[test]
    fn keys_must_stay_in_the_callers_partition() {
        let mine = key(&[("PK", "USER#u#DEVICE#d"), ("SK", "EVENT#x#e")]);
        assert!(check_key(&mine, &[("PK", "USER#u#DEVICE#d")], &[("SK", "EVENT#")]).is_ok());
        let theirs = key(&[("PK", "USER#v#DEVICE#d"), ("SK", "EVENT#x#e")]);
        assert!(check_key(&theirs, &[("PK", "USER#u#DEVICE#d")], &[("SK", "EVENT#")]).is_err());
        let extra = key(&[
            ("PK", "USER#u#DEVICE#d"),
            ("SK", "EVENT#x"),
            ("GSI1PK", "x"),
        ]);
        assert!(check_key(&extra, &[("PK", "USER#u#DEVICE#d")], &[("SK", "EVENT#")]).is_err());
        let profile = key(&[("PK", "USER#u#DEVICE#d"), ("SK", "PROFILE")]);
        assert!(check_key(&profile, &[("PK", "USER#u#DEVICE#d")], &[("SK", "EVENT#")]).is_err());
    }
}
