//! What is stored and how it is keyed; no I/O. Bottom layer: uses nothing else of the crate.

pub mod alarm;
pub mod cursor;
pub mod entities;
pub mod error;
pub mod expression;
pub mod firmware;
pub mod ids;
pub mod keys;
pub mod offline;
pub mod optional;
pub mod org;
pub mod pattern_id;
pub mod readings;
pub mod rollout_health;
pub mod rollout_progress;
pub mod rollout_stages;
pub mod schema;
pub mod series;
pub mod settings;
pub mod shard;
pub mod status;
pub mod timestamp;
pub mod token;
pub mod twin;
pub mod webhook;
