//! The routes, one module per resource: packages, signing keys and a rollout's cancel.

pub(crate) mod keys;
pub(crate) mod packages;
pub(crate) mod rollouts;

/// What a route answers: its response, or an error in the contract.
pub(crate) type Answer = Result<axum::response::Response, shared::http::api::ApiError>;
