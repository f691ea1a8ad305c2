//! Alarms (docs/design.md, "Alarms"): an owner's rules, the alarms their devices' readings
//! and silences raise, the writes that record a transition, the scheduled offline detector
//! and reminders, and the notifications of transitions.
//!
//! Rules and alarm statuses are evaluated by [`crate::model::alarm::evaluation::evaluate`]; ingestion
//! reads an owner's rules with a device's live state and records transitions in the
//! transaction that writes the state ([`record::transition_actions`]). [`watch`] is the
//! scheduled run (offline detection, reminders); [`notify`] turns the stream records of alarm
//! items into EventBridge events. [`withdraw`] clears the open alarms of a deleted device or
//! rule.

pub mod lifecycle;
pub mod notify;
pub mod record;
pub mod rules;
pub mod watch;
pub mod withdraw;

pub use record::{transition_actions, AlarmDevice};
