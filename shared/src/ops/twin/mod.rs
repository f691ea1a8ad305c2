//! The device twin (issue 25): desired and reported configuration, commands, and fleet-wide
//! changes, each an access pattern beside its operation.
//!
//! - [`owner`]: what an owner does: set the desired state (AP-T1), queue and list commands
//!   (AP-T2, AP-T3), and read the twin's documents for AP-03.
//! - [`device`]: what a device gets: its report and acknowledgements applied, and its pending
//!   work, in the answer to a batch (AP-14) or to a sync of its own (AP-T4).
//! - [`firmware_offer`]: a device's side of a staged firmware rollout: its report moves its
//!   offer on, and the offer rides in its answers.
//! - [`rollout`]: a fleet-wide desired-state change by tag or device type (AP-T5, AP-T6),
//!   carried out by the scheduled worker a page at a time (AP-T7).
//!
//! The versions that decide whether anything is pending are on the device's live state
//! ([`TwinVersions`](crate::model::twin::TwinVersions)); the documents and commands are items of their own in the device's
//! partition (`USER#{userId}#DEVICE#{deviceId}`), so the live state stays one write unit.

pub mod device;
pub mod firmware_offer;
pub mod owner;
pub mod rollout;
mod running;
mod state;

pub use device::{DeviceReport, TwinReply};
pub use state::TwinView;
