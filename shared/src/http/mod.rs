//! The HTTP functions' shape: caller from JWT claims, JSON bodies, the error contract, and the
//! API Gateway front that serves an axum Router. Top layer.

pub mod api;
pub mod fleet;
pub mod gateway;
