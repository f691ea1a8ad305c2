//! Errors of the key design and the table operations, each with the HTTP status a caller sees.

use std::fmt;

/// A request value that cannot be accepted; becomes a 400 naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ValidationError {
    /// The offending request field, e.g. `deviceId` or `events[3].type`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ValidationError {
    /// A validation error for `field`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Everything an access-pattern operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// Bad input (400).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// Missing or wrong credentials (401). For devices it never says which: unknown device and
    /// wrong token look the same.
    #[error("unknown device or wrong token")]
    Unauthorized,
    /// The item does not exist for this caller (404). Another user's device is also a 404,
    /// so ids cannot be probed.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The device id is registered already, by anyone (409).
    #[error("device id {0} is already registered")]
    DeviceIdTaken(String),
    /// `If-Match` named a version that is not the current one (412).
    #[error("the device has changed since version {expected}: read it again and retry")]
    StaleVersion {
        /// The version the caller expected.
        expected: u64,
    },
    /// `If-Match` named a version of an alarm rule that is not the current one (412).
    #[error("the rule has changed since version {expected}: read it again and retry")]
    StaleRule {
        /// The version the caller expected.
        expected: u64,
    },
    /// The request contradicts the current state of what it names (409), e.g. a rule over
    /// the owner's limit or acknowledging a cleared alarm.
    #[error("{message}")]
    Conflict {
        /// Machine-readable code.
        code: &'static str,
        /// What the caller should know.
        message: String,
    },
    /// DynamoDB throttled us beyond our retries (503 with Retry-After).
    #[error("the table is busy: retry after {retry_after_seconds}s")]
    Throttled {
        /// Seconds the client should wait.
        retry_after_seconds: u32,
    },
    /// DynamoDB could not be reached beyond our retries (503 with Retry-After): a connection
    /// refused, reset or closed before the answer, a failed TLS handshake, or no answer within
    /// the timeouts. Not throttling: the table's capacity is not the problem, the path to it is.
    #[error("DynamoDB could not be reached: retry after {retry_after_seconds}s")]
    Unreachable {
        /// Seconds the client should wait.
        retry_after_seconds: u32,
    },
    /// The caller sent more than its limit (429 with Retry-After); see [`crate::ops::limits`].
    #[error("too many requests: retry after {retry_after_seconds}s")]
    RateLimited {
        /// Seconds the client should wait.
        retry_after_seconds: u32,
    },
    /// `If-Match` named a desired-state version that is not the current one (412).
    #[error("the desired state has changed since version {expected}: read it again and retry")]
    StaleDesired {
        /// The version the caller expected.
        expected: u64,
    },
    /// A device's command queue is full (409): it has this many commands neither finished
    /// nor expired.
    #[error("the device has {limit} open commands: wait for some to finish or expire")]
    CommandQueueFull {
        /// The queue's bound.
        limit: u64,
    },
    /// A member of the organization whose role does not include what the route needs (403,
    /// naming the role needed). A non-member is [`FleetError::NotFound`] instead.
    #[error("this needs the {needed} role; yours is {held}")]
    RoleRequired {
        /// The least role that may do it (its API name: `model::org::Role`'s, which this
        /// bottom file cannot name).
        needed: &'static str,
        /// The caller's role.
        held: &'static str,
    },
    /// Anything else (500); the detail is logged, never returned.
    #[error("internal error: {0}")]
    Internal(String),
}

impl FleetError {
    /// Wraps an unexpected failure; the message is for logs only.
    pub fn internal(err: impl fmt::Display) -> Self {
        Self::Internal(err.to_string())
    }

    /// Whether the same request may succeed later unchanged: the table was busy
    /// ([`FleetError::Throttled`]) or could not be reached ([`FleetError::Unreachable`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Throttled { .. } | Self::Unreachable { .. })
    }
}

impl From<serde_dynamo::Error> for FleetError {
    fn from(err: serde_dynamo::Error) -> Self {
        Self::internal(format!("item (de)serialization: {err}"))
    }
}
