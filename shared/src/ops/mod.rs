//! Table operations: one function per access pattern (see [`crate::catalog`]).

pub mod devices;
pub mod ingest;
pub mod profile;

use aws_sdk_dynamodb::types::AttributeValue;

/// A string attribute value.
pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute value.
pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}
