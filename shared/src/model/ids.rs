//! Validated identifiers. Every value that ends up inside a key goes through one of these
//! types first, so a key can never contain the `#` delimiter, a control character, or an
//! unbounded string: such input is a [`ValidationError`] (a 400), never a key.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::error::ValidationError;

/// Characters allowed in ids, tags and event types besides ASCII letters and digits.
/// Deliberately excludes `#` (the key delimiter), `/` and whitespace, so an id is also
/// safe in a URL path segment without encoding.
const ID_PUNCTUATION: &[char] = &['-', '_', '.', ':', '@', '+'];

fn check_token(field: &str, value: &str, max_len: usize) -> Result<(), ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if value.chars().count() > max_len {
        return Err(ValidationError::new(
            field,
            format!("must be at most {max_len} characters"),
        ));
    }
    if value.contains('#') {
        return Err(ValidationError::new(field, "must not contain '#'"));
    }
    if value.chars().any(char::is_control) {
        return Err(ValidationError::new(
            field,
            "must not contain control characters",
        ));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || ID_PUNCTUATION.contains(c)))
    {
        return Err(ValidationError::new(
            field,
            format!("must not contain {bad:?}: use letters, digits and - _ . : @ +"),
        ));
    }
    // `.` and `..` are URL dot-segments: `/me/devices/..` is `/me` to every client, so such an
    // id could be registered but never addressed again.
    if value.chars().all(|c| c == '.') {
        return Err(ValidationError::new(
            field,
            "must not be only dots (a URL path segment '.' or '..')",
        ));
    }
    Ok(())
}

macro_rules! key_token {
    ($(#[$doc:meta])* $name:ident, field = $field:literal, max = $max:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Longest accepted value, in characters.
            pub const MAX_LEN: usize = $max;
            /// The request field this value is reported under when it is rejected.
            pub const FIELD: &'static str = $field;

            /// Validates `value`, reporting errors under the default field name.
            pub fn parse(value: impl Into<String>) -> Result<Self, ValidationError> {
                Self::parse_field(Self::FIELD, value)
            }

            /// Validates `value`, reporting errors under `field` (e.g. `events[3].type`).
            pub fn parse_field(
                field: &str,
                value: impl Into<String>,
            ) -> Result<Self, ValidationError> {
                let value = value.into();
                check_token(field, &value, Self::MAX_LEN)?;
                Ok(Self(value))
            }

            /// The validated value.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        // Items read back from the table are validated too: a corrupt or foreign item is an
        // error, not a silently accepted key part.
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::parse(raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

key_token!(
    /// The owner of profiles and devices: the JWT `sub` claim (a Cognito user id).
    UserId, field = "userId", max = 128
);
key_token!(
    /// A device id, chosen by the user at registration and unique across the whole table.
    DeviceId, field = "deviceId", max = 64
);
key_token!(
    /// A device tag (`home`, `floor-2`), used in tag-link keys.
    Tag, field = "tags", max = 32
);
key_token!(
    /// An event type (`temperature`, `door.open`), used in GSI1 keys.
    EventType, field = "type", max = 32
);
key_token!(
    /// A device type (`thermostat`); copied onto events at ingest.
    DeviceType, field = "type", max = 32
);
key_token!(
    /// An event id: given by the device or derived from the event's content.
    EventId, field = "id", max = 64
);
key_token!(
    /// A command's name (`reboot`, `open-valve`): what the owner asks a device to do.
    CommandName, field = "name", max = 32
);
key_token!(
    /// A fleet-wide desired-state change (a rollout), generated when it is created.
    RolloutId, field = "rolloutId", max = 64
);

impl RolloutId {
    /// A new id for a rollout created at `created`: `r-{epoch millis, 15 digits}-{16 random
    /// hex digits}`, so ids (and the running list's `{userId}#{rolloutId}` keys) sort by
    /// creation, and the worker applies an owner's rollouts oldest first: a newer rollout's
    /// value is the one a device keeps. Two created in the same millisecond sort by their
    /// random part (both exist; either order is a creation order).
    pub fn generate(created: crate::model::timestamp::Timestamp) -> Self {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("the OS has a random source");
        Self(format!(
            "r-{:015}-{:016x}",
            created.epoch_millis().max(0),
            u64::from_be_bytes(bytes)
        ))
    }

    /// `text` if it has the shape [`RolloutId::generate`] gives (`r-`, 15 digits, `-`, 16
    /// lowercase hex digits): what a listing's cursor must be.
    pub fn parse_generated(text: &str) -> Option<Self> {
        let rest = text.strip_prefix("r-")?;
        let (millis, random) = rest.split_once('-')?;
        let shaped = millis.len() == 15
            && millis.bytes().all(|b| b.is_ascii_digit())
            && random.len() == 16
            && random
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        shaped.then(|| Self(text.to_string()))
    }
}

key_token!(
    /// An organization: generated when it is created (`o` and 20 hex digits); a path's value is
    /// validated like any id, and an unknown one is a 404 like a non-member's.
    OrgId, field = "orgId", max = 64
);

/// How an organization's fleet is named where every fleet item names its owner: the owner key
/// `org:{orgId}`. People never have it: [`UserId::is_org_fleet`] callers are refused at the
/// door (`http::api::Caller`).
pub const ORG_FLEET_PREFIX: &str = "org:";

impl OrgId {
    /// A new random id: `o` and 20 lowercase hex digits (80 random bits).
    pub fn generate() -> Self {
        let mut bytes = [0u8; 10];
        getrandom::fill(&mut bytes).expect("the OS has a random source");
        Self(format!(
            "o{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ))
    }
}

impl UserId {
    /// The owner key of `org`'s fleet (`org:{orgId}`): every fleet operation takes it where it
    /// takes a person's id, so an organization's devices, rules, alarms and rollouts are keyed,
    /// sharded and budgeted exactly as a person's.
    pub fn org_fleet(org: &OrgId) -> Self {
        Self(format!("{ORG_FLEET_PREFIX}{org}"))
    }

    /// Whether this owner key is an organization's fleet (never a person).
    pub fn is_org_fleet(&self) -> bool {
        self.0.starts_with(ORG_FLEET_PREFIX)
    }

    /// The organization whose fleet this owner key is, if it is one.
    pub fn fleet_org(&self) -> Option<OrgId> {
        self.0
            .strip_prefix(ORG_FLEET_PREFIX)
            .and_then(|org| OrgId::parse(org).ok())
    }
}

/// Most tags one device may carry (each one is a tag-link item in the registration
/// transaction, which DynamoDB caps at 100 actions).
pub const MAX_TAGS_PER_DEVICE: usize = 10;

/// Validates a tag list: each tag, at most [`MAX_TAGS_PER_DEVICE`], duplicates removed, sorted.
pub fn parse_tags(values: Vec<String>) -> Result<Vec<Tag>, ValidationError> {
    if values.len() > MAX_TAGS_PER_DEVICE {
        return Err(ValidationError::new(
            "tags",
            format!("at most {MAX_TAGS_PER_DEVICE} tags per device"),
        ));
    }
    let mut tags = values
        .into_iter()
        .enumerate()
        .map(|(i, t)| Tag::parse_field(&format!("tags[{i}]"), t))
        .collect::<Result<Vec<_>, _>>()?;
    tags.sort();
    tags.dedup();
    Ok(tags)
}

/// Validates free text that is stored but never part of a key (device and profile names).
pub fn parse_display_name(
    field: &str,
    value: &str,
    max_len: usize,
) -> Result<String, ValidationError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if trimmed.chars().count() > max_len {
        return Err(ValidationError::new(
            field,
            format!("must be at most {max_len} characters"),
        ));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(ValidationError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_ids_sort_by_creation() {
        use crate::model::timestamp::Timestamp;
        let at = |millis| Timestamp::from_epoch_millis(millis).unwrap();
        let ids: Vec<RolloutId> = [999, 1_000, 1_732_561_234_567, 1_732_561_234_568]
            .into_iter()
            .map(|m| RolloutId::generate(at(m)))
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
        for id in &ids {
            assert_eq!(RolloutId::parse(id.as_str()).unwrap(), *id);
        }
        for id in &ids {
            assert_eq!(RolloutId::parse_generated(id.as_str()).as_ref(), Some(id));
        }
        for other in [
            "r-1",
            "x-000000000000999-0000000000000000",
            "r-00000000000099a-0000000000000000",
            "r-000000000000999-000000000000000G",
        ] {
            assert_eq!(RolloutId::parse_generated(other), None, "{other}");
        }
    }

    #[test]
    fn an_organization_fleet_key_names_its_organization_and_no_person() {
        let org = OrgId::generate();
        assert_eq!(org.as_str().len(), 21);
        assert_eq!(OrgId::parse(org.as_str()).unwrap(), org);
        let fleet = UserId::org_fleet(&org);
        assert_eq!(fleet.as_str(), format!("org:{org}"));
        assert!(fleet.is_org_fleet());
        assert_eq!(fleet.fleet_org(), Some(org));
        let person = UserId::parse("4f1c-user").unwrap();
        assert!(!person.is_org_fleet());
        assert_eq!(person.fleet_org(), None);
    }

    #[test]
    fn accepts_ordinary_ids() {
        for ok in [
            "thermo-1",
            "a",
            "sensor_2.b",
            "c3f1:9",
            "x@y+z",
            "..a",
            "a..",
        ] {
            assert_eq!(DeviceId::parse(ok).unwrap().as_str(), ok);
        }
        assert!(DeviceId::parse("d".repeat(64)).is_ok());
    }

    #[test]
    fn rejects_delimiter_control_empty_and_long_values_with_the_field() {
        let cases = [
            ("USER#x", "must not contain '#'"),
            ("", "must not be empty"),
            ("a\u{0}b", "control characters"),
            ("a\nb", "control characters"),
            ("a b", "must not contain ' '"),
            ("a/b", "must not contain '/'"),
            ("%23", "must not contain '%'"),
            ("é", "must not contain 'é'"),
            ("..", "must not be only dots"),
            (".", "must not be only dots"),
            ("\u{FF03}x", "must not contain"),
            ("therm\u{043E}", "must not contain"),
        ];
        for (input, reason) in cases {
            let err = DeviceId::parse(input).unwrap_err();
            assert_eq!(err.field, "deviceId", "{input:?}");
            assert!(err.reason.contains(reason), "{input:?}: {}", err.reason);
        }
        let err = DeviceId::parse("d".repeat(65)).unwrap_err();
        assert!(err.reason.contains("at most 64"));
        let err = EventType::parse_field("events[2].type", "a#b").unwrap_err();
        assert_eq!(err.field, "events[2].type");
    }

    #[test]
    fn tags_are_validated_sorted_deduplicated_and_bounded() {
        let tags = parse_tags(vec!["home".into(), "attic".into(), "home".into()]).unwrap();
        assert_eq!(
            tags.iter().map(Tag::as_str).collect::<Vec<_>>(),
            ["attic", "home"]
        );
        let err = parse_tags(vec!["ok".into(), "bad#tag".into()]).unwrap_err();
        assert_eq!(err.field, "tags[1]");
        let err = parse_tags((0..11).map(|i| format!("t{i}")).collect()).unwrap_err();
        assert_eq!(err.field, "tags");
    }

    #[test]
    fn deserializing_validates_too() {
        let bad: Result<DeviceId, _> = serde_json::from_str("\"a#b\"");
        assert!(bad.is_err());
        let good: DeviceId = serde_json::from_str("\"ab\"").unwrap();
        assert_eq!(good.as_str(), "ab");
    }

    #[test]
    fn display_names_are_trimmed_and_bounded() {
        assert_eq!(
            parse_display_name("name", "  Kitchen ", 100).unwrap(),
            "Kitchen"
        );
        assert_eq!(
            parse_display_name("name", "Küche #2", 100).unwrap(),
            "Küche #2"
        );
        assert!(parse_display_name("name", "   ", 100).is_err());
        assert!(parse_display_name("name", "a\u{7}", 100).is_err());
        assert!(parse_display_name("name", &"n".repeat(101), 100).is_err());
    }
}
