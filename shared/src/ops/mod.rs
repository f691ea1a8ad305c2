//! Table operations: one function per access pattern (see [`crate::ops::catalog`]).

pub mod alarms;
pub mod analytics;
pub mod catalog;
pub mod credentials;
pub mod dashboard;
pub mod devices;
pub mod events;
pub mod firmware;
pub mod ingest;
pub mod limits;
pub mod orgs;
pub mod ownership;
pub mod pattern;
pub mod profile;
pub mod reports;
pub mod retention;
pub mod series;
pub mod twin;
pub mod webhooks;
pub mod worker;

/// Default and largest page sizes of the listing routes.
pub const DEFAULT_LIMIT: u32 = 50;
/// Largest page size a caller may ask for.
pub const MAX_LIMIT: u32 = 100;
