//! Alarm rules and their evaluation, without I/O: what an owner asks to be told about, and
//! the transitions (raised, cleared) a batch of readings causes on one device.
//!
//! Evaluation is a pure function of the device's alarm status (kept on its live state, which
//! ingestion rewrites per batch anyway), the owner's rules and the batch. It looks only at
//! readings newer than the device's latest reading of the type before the batch, so a replayed
//! or late batch causes no transition, and a batch of 100 readings over a threshold raises one
//! alarm.
//!
//! - [`rule`]: what an owner asks to be told about, read from a request body.
//! - [`ids`]: rule ids, alarm sources and the alarm ids the API shows.
//! - [`severity`]: how urgent an alarm is.
//! - [`status`]: an alarm's state and a device's alarm statuses on its live state.
//! - [`evaluation`]: the transitions one batch causes, and the writes they take.

pub mod evaluation;
pub mod ids;
pub mod rule;
pub mod severity;
pub mod status;

/// Most rules one owner may keep. Bounded by one transaction: a batch that moves every rule
/// of a device writes its live state and at most three alarm writes per rule (a batch nets
/// out per rule, see [`evaluation::evaluate`]) in one TransactWriteItems, which DynamoDB caps at 100
/// actions.
pub const MAX_RULES_PER_OWNER: usize = 32;
/// Longest rule name, in characters.
pub const MAX_RULE_NAME: usize = 100;
/// Longest duration a condition may be required to hold, and longest reminder interval.
pub const MAX_RULE_SECONDS: u64 = 7 * 86_400;
/// Shortest reminder interval (the detector that sends reminders runs once a minute).
pub const MIN_REMINDER_SECONDS: u64 = 60;
/// Longest text a rule compares a reading with.
pub const MAX_EQUALS_TEXT: usize = 64;
/// The source of an offline alarm, where a threshold alarm names its rule.
pub const OFFLINE: &str = "offline";
