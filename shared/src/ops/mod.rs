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

/// A listing route's `limit` query parameter: a whole number from 1 to [`MAX_LIMIT`],
/// [`DEFAULT_LIMIT`] when absent; anything else is a 400 naming `limit`.
pub fn page_limit(raw: Option<&str>) -> Result<u32, crate::ValidationError> {
    match raw {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| crate::ValidationError::new("limit", format!("must be 1..{MAX_LIMIT}"))),
    }
}
