//! Optional fields of request bodies: a field may be left out, but `null` is not "left out".
//! docs/openapi.yaml allows `null` only where it means something (a PATCH clearing a value);
//! everywhere else a `null` is a 400 naming the field, so the contract and the handlers agree.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// For `#[serde(default, deserialize_with = "not_null")]` on an `Option<T>` field: absent is
/// `None`, a value is `Some`, and `null` is an error at the field's path (a 400
/// `invalid_request` whose `field` names it, through `http::api::parse_json_body`).
pub fn not_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_option(NotNull(PhantomData))
}

/// What a field sent as `null` is told.
pub const NULL_REFUSED: &str = "must not be null: leave the field out instead";

struct NotNull<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for NotNull<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value (not null)")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(E::custom(NULL_REFUSED))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(E::custom(NULL_REFUSED))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        // The inner value's own errors keep their path (`tags[1]`).
        T::deserialize(deserializer).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Body {
        #[serde(default, deserialize_with = "not_null")]
        limit: Option<u32>,
    }

    #[test]
    fn absent_is_none_a_value_is_some_and_null_is_refused() {
        assert_eq!(
            serde_json::from_str::<Body>("{}").unwrap(),
            Body { limit: None }
        );
        assert_eq!(
            serde_json::from_str::<Body>(r#"{"limit": 3}"#).unwrap(),
            Body { limit: Some(3) }
        );
        let err = serde_json::from_str::<Body>(r#"{"limit": null}"#).unwrap_err();
        assert!(err.to_string().contains(NULL_REFUSED), "{err}");
        let err = serde_json::from_str::<Body>(r#"{"limit": "x"}"#).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
