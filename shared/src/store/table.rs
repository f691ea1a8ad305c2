//! The table handle every operation runs against, the SDK client behind it, and the mapping of
//! SDK failures to [`FleetError`].

use std::time::Duration;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::CancellationReason;
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use crate::model::error::FleetError;
use crate::model::settings::FleetConfig;
use crate::store::metrics::MeteringInterceptor;

/// Attempts per operation, first one included. The SDK's standard mode backs off
/// exponentially with full jitter between them and retries throttling and transient faults.
pub const MAX_ATTEMPTS: u32 = 4;

/// What a client should wait before retrying after throttling.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// The single table, with the client and configuration every operation needs.
#[derive(Clone, Debug)]
pub struct FleetTable {
    /// SDK client (metered, with bounded retries).
    pub client: Client,
    /// Table name, retention, shard counts.
    pub config: FleetConfig,
}

impl FleetTable {
    /// A table handle from an existing client and configuration.
    pub fn new(client: Client, config: FleetConfig) -> Self {
        Self { client, config }
    }

    /// Configuration and client from the environment (`TABLE_NAME`, `RETENTION_DAYS`, shard
    /// counts, and the standard AWS variables such as `AWS_REGION` and
    /// `AWS_ENDPOINT_URL_DYNAMODB`).
    pub async fn from_env() -> Result<Self, FleetError> {
        let config = FleetConfig::from_env()?;
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Ok(Self::new(dynamodb_client(&sdk), config))
    }

    /// The table name.
    pub fn name(&self) -> &str {
        &self.config.table_name
    }
}

/// A DynamoDB client with the metering interceptor, bounded retries and timeouts, so no call
/// can hang a Lambda until its own timeout.
pub fn dynamodb_client(sdk: &aws_config::SdkConfig) -> Client {
    let conf = aws_sdk_dynamodb::config::Builder::from(sdk)
        .interceptor(MeteringInterceptor)
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(MAX_ATTEMPTS)
                .with_initial_backoff(Duration::from_millis(25))
                .with_max_backoff(Duration::from_secs(1)),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(2))
                .operation_attempt_timeout(Duration::from_secs(3))
                .operation_timeout(Duration::from_secs(10))
                .build(),
        )
        .build();
    Client::from_conf(conf)
}

/// Error codes DynamoDB uses for throttling.
const THROTTLING_CODES: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "ThrottlingError",
];

/// Why a request that may succeed unchanged later failed: what a caller is told when the
/// retries run out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transient {
    /// DynamoDB answered and refused for now: throttling, or a 5xx of its own.
    Busy,
    /// DynamoDB did not answer: the connection was refused, reset or closed before the answer,
    /// the TLS handshake failed, or no answer came within the timeouts.
    Unreachable,
}

impl Transient {
    /// The 503 a caller gets when the retries ran out on this failure:
    /// [`FleetError::Throttled`] or [`FleetError::Unreachable`].
    pub fn error(self) -> FleetError {
        match self {
            Transient::Busy => FleetError::Throttled {
                retry_after_seconds: RETRY_AFTER_SECONDS,
            },
            Transient::Unreachable => FleetError::Unreachable {
                retry_after_seconds: RETRY_AFTER_SECONDS,
            },
        }
    }
}

/// Maps an SDK failure that no pattern-specific rule claimed: a transient failure that
/// survived the retries ([`transient`]) becomes a 503 with Retry-After (busy or unreachable,
/// as it was), the rest a 500.
pub fn sdk_error<E>(err: SdkError<E, HttpResponse>) -> FleetError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if let Some(kind) = transient(&err) {
        return kind.error();
    }
    FleetError::internal(format!(
        "{}: {}",
        err.code().unwrap_or("unknown"),
        aws_smithy_types::error::display::DisplayErrorContext(&err)
    ))
}

/// Whether a failure is worth retrying later, because the request may succeed unchanged:
/// throttling, a DynamoDB 5xx (`InternalServerError`, `ServiceUnavailable`), a timeout, a
/// connection that failed or closed before the answer, or an answer that could not be read.
/// Whether the request was applied is unknown for the last three, so only idempotent or
/// conditional writes may be retried on them (every write in this crate is one).
pub fn is_transient<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    transient(err).is_some()
}

/// What kind of transient failure `err` is ([`is_transient`]), if it is one. A DynamoDB answer
/// (throttling, a 5xx) is [`Transient::Busy`]; no answer at all (a dispatch failure: refused,
/// reset, TLS; a timeout; an answer cut off) is [`Transient::Unreachable`].
pub fn transient<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Option<Transient> {
    match err {
        SdkError::ServiceError(service)
            if is_throttling(service.err().code()) || service.raw().status().as_u16() >= 500 =>
        {
            Some(Transient::Busy)
        }
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Some(Transient::Unreachable)
        }
        _ => None,
    }
}

/// Whether `code` is one of DynamoDB's throttling error codes.
pub fn is_throttling(code: Option<&str>) -> bool {
    code.is_some_and(|c| THROTTLING_CODES.contains(&c))
}

/// A named action of a transaction: an enum whose variants are the actions in the order they
/// are sent, so a cancellation is read by name, not by position.
pub trait TransactionSlot: Copy {
    /// The action's place in the transaction.
    fn position(self) -> usize;
}

/// The outcome of a conditional write whose failed condition means "already done" (a newer
/// copy is there, a concurrent request got there first): `Ok` either way; any other failure
/// through [`sdk_error`].
pub fn done_unless_failed<T, E>(
    sent: Result<T, SdkError<E, HttpResponse>>,
) -> Result<(), FleetError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match sent {
        Ok(_) => Ok(()),
        Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(()),
        Err(err) => Err(sdk_error(err)),
    }
}

/// Whether the transaction was cancelled because the condition of the action at `slot` failed.
pub fn condition_failed(reasons: &[CancellationReason], slot: impl TransactionSlot) -> bool {
    reasons
        .get(slot.position())
        .and_then(CancellationReason::code)
        .is_some_and(|c| c == "ConditionalCheckFailed")
}

/// Whether any action of a cancelled transaction was throttled or conflicted with another
/// transaction (worth retrying, unlike a failed condition).
pub fn cancelled_transiently(reasons: &[CancellationReason]) -> bool {
    reasons
        .iter()
        .filter_map(CancellationReason::code)
        .any(|c| c == "TransactionConflict" || is_throttling(Some(c)))
}
