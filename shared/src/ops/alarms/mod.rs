//! Alarms (docs/design.md, "Alarms"): an owner's rules, the alarms their devices' readings
//! and silences raise, and the writes that record a transition.
//!
//! Rules and alarm statuses are evaluated by [`crate::model::alarm::evaluate`]; ingestion
//! reads an owner's rules with a device's live state and records transitions in the
//! transaction that writes the state ([`record::transition_actions`]).

pub mod lifecycle;
pub mod record;
pub mod rules;

pub use record::{transition_actions, AlarmDevice};
