//! The routes, one module per resource: packages, signing keys, rollouts (the list, cancel,
//! pause, resume) and a device's firmware.

pub(crate) mod devices;
pub(crate) mod keys;
pub(crate) mod packages;
pub(crate) mod rollouts;

/// What a route answers: its response, or an error in the contract.
pub(crate) type Answer = Result<axum::response::Response, shared::http::api::ApiError>;

/// A list route's query: `cursor` and `limit` (the packages' and the rollouts' pages).
#[derive(serde::Deserialize)]
pub(crate) struct PageQuery {
    pub(crate) cursor: Option<String>,
    pub(crate) limit: Option<String>,
}
