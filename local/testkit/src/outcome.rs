//! What a function answered to one invocation, whichever emulator ran it (`aws-lambda-rie`,
//! or the benchmark's own Runtime API in `fleet-perf`).

use serde_json::Value;

/// What a bootstrap answered to one invocation.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The function's result (`/response`), as JSON when it parses, else as a string.
    Response(Value),
    /// The function failed (`/error`): Lambda's `errorType` and `errorMessage`.
    Error {
        /// `errorType`.
        error_type: String,
        /// `errorMessage`.
        message: String,
    },
}

impl Outcome {
    /// The status API Gateway would answer: the payload's `statusCode` for an HTTP response;
    /// 200 for any other successful result (daily-analytics); 502 when the function failed,
    /// which is what API Gateway makes of a Lambda error.
    pub fn status(&self) -> u16 {
        match self {
            Outcome::Response(v) => v
                .get("statusCode")
                .and_then(Value::as_u64)
                .map(|s| s as u16)
                .unwrap_or(200),
            Outcome::Error { .. } => 502,
        }
    }
}
