//! The metered DynamoDB client and the plumbing every operation shares. Uses [`crate::model`].

pub mod deadline;
pub mod dynamo;
pub mod firmware_images;
pub mod metrics;
pub mod retry;
pub mod table;
pub mod with_expressions;
