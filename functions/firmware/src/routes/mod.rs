//! The routes, one module per resource: packages and signing keys.

pub(crate) mod keys;
pub(crate) mod packages;

/// What a route answers: its response, or an error in the contract.
pub(crate) type Answer = Result<axum::response::Response, shared::http::api::ApiError>;
