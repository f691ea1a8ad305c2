//! What a request or a run reports: one JSON log line, one EMF document, X-Ray segments.
//! Uses [`crate::store`] (the request's DynamoDB accounting) and below.

pub mod emf;
pub mod served;
pub mod telemetry;
pub mod trace;
