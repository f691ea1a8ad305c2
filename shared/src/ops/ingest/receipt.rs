//! What a device's batch comes to (AP-14 with its twin part), as the ingest function answers
//! it: typed, so the answer's JSON is its serde form.

use serde::Serialize;

use crate::model::ids::EventId;
use crate::ops::twin::device::{CommandDelivery, DesiredDelivery, TwinReply};
use crate::ops::twin::firmware_offer::FirmwareDelivery;
use crate::store::table::RETRY_AFTER_SECONDS;

/// A batch stored in full (with the device's twin reply), or in part.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchReceipt {
    /// Every event stored: the 200 answer.
    Stored(StoredBatch),
    /// Some events not stored: the 503 answer naming what to resend.
    Incomplete(IncompleteBatch),
}

/// Every event of a batch stored, and the twin's reply.
///
/// The fields are in alphabetical order because the answer's keys always came out so (it was
/// built as a `serde_json` map, which sorts them); serde writes fields in declaration order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredBatch {
    /// How many events were stored (all of them).
    pub accepted: usize,
    /// See [`TwinReply::acknowledged`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acknowledged: Vec<String>,
    /// See [`TwinReply::commands`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandDelivery>,
    /// See [`TwinReply::desired`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<DesiredDelivery>,
    /// The stored events' ids (derived ones included), in the batch's order.
    pub event_ids: Vec<EventId>,
    /// See [`TwinReply::firmware`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwareDelivery>,
}

impl StoredBatch {
    /// The answer for `accepted` events and the device's twin `reply`.
    pub fn new(accepted: Vec<EventId>, reply: TwinReply) -> Self {
        Self {
            accepted: accepted.len(),
            acknowledged: reply.acknowledged,
            commands: reply.commands,
            desired: reply.desired,
            event_ids: accepted,
            firmware: reply.firmware,
        }
    }
}

/// Some events of a batch not stored: the device resends `failed` (idempotent) after
/// [`IncompleteBatch::RETRY_AFTER_SECONDS`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IncompleteBatch {
    /// Stored.
    pub accepted: Vec<EventId>,
    /// Not stored: to resend.
    pub failed: Vec<EventId>,
}

impl IncompleteBatch {
    /// The `Retry-After` the answer carries.
    pub const RETRY_AFTER_SECONDS: u32 = RETRY_AFTER_SECONDS;
}
