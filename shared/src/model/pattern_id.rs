//! Which access pattern: the typed id that definitions, cursors, contract runs and bench cases
//! name. Below the catalog, so cursors (model) and the operations (ops) can name a pattern.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// Which access pattern: the typed id every definition, cursor, contract run and bench case
/// names. `AP-xx` text exists only here (its [`Display`](fmt::Display) and
/// [`FromStr`]); cursors carry that text, so their wire format does not depend on this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PatternId {
    /// AP-01: user profile.
    GetProfile,
    /// AP-02: a user's devices, paged.
    ListDevices,
    /// AP-03: one device.
    GetDevice,
    /// AP-04: a device's events in a time range.
    DeviceEvents,
    /// AP-05: a user's events across all devices.
    UserEvents,
    /// AP-DASH: the dashboard.
    Dashboard,
    /// AP-06: update a device.
    UpdateDevice,
    /// AP-07: register a device.
    RegisterDevice,
    /// AP-08: delete a device.
    DeleteDevice,
    /// AP-09: events of a type, all users.
    EventsByType,
    /// AP-10: device count by status.
    DeviceCountByStatus,
    /// AP-11: active users in the last 30 days.
    ActiveUsers,
    /// AP-12: a user's devices with a tag.
    DevicesByTag,
    /// AP-13: devices with a status seen since a time.
    DevicesByStatus,
    /// AP-14: ingest a batch of events.
    IngestEvents,
    /// AP-15: the daily report.
    DailyReport,
    /// AP-16: create or update the caller's profile.
    PutProfile,
    /// AP-17: rotate a device's token.
    RotateToken,
    /// AP-18: revoke a device's tokens.
    RevokeToken,
    /// AP-T1: set a device's desired state.
    SetDesired,
    /// AP-T2: queue a command for a device.
    QueueCommand,
    /// AP-T3: a device's commands.
    ListCommands,
    /// AP-T4: a device asks for its pending work (and reports, acknowledges).
    SyncDevice,
    /// AP-T5: start a fleet-wide desired-state change.
    StartRollout,
    /// AP-T6: a fleet-wide change's progress.
    GetRollout,
    /// AP-T7: the scheduled worker carries running rollouts forward.
    AdvanceRollouts,
    /// AP-19: create an alarm rule.
    CreateRule,
    /// AP-20: an owner's alarm rules.
    ListRules,
    /// AP-21: change an alarm rule.
    UpdateRule,
    /// AP-22: delete an alarm rule.
    DeleteRule,
    /// AP-23: an owner's alarms, open first.
    OwnerAlarms,
    /// AP-24: one device's alarm history.
    DeviceAlarms,
    /// AP-25: acknowledge an alarm.
    AcknowledgeAlarm,
    /// AP-26: open alarms across owners by severity (operators).
    OpenAlarms,
    /// AP-27: the schedule's offline check.
    OfflineCheck,
    /// AP-28: the schedule's alarm reminders.
    AlarmReminders,
}

impl PatternId {
    /// Every pattern, in catalog order.
    pub const ALL: [PatternId; 36] = [
        PatternId::GetProfile,
        PatternId::ListDevices,
        PatternId::GetDevice,
        PatternId::DeviceEvents,
        PatternId::UserEvents,
        PatternId::Dashboard,
        PatternId::UpdateDevice,
        PatternId::RegisterDevice,
        PatternId::DeleteDevice,
        PatternId::EventsByType,
        PatternId::DeviceCountByStatus,
        PatternId::ActiveUsers,
        PatternId::DevicesByTag,
        PatternId::DevicesByStatus,
        PatternId::IngestEvents,
        PatternId::DailyReport,
        PatternId::PutProfile,
        PatternId::RotateToken,
        PatternId::RevokeToken,
        PatternId::SetDesired,
        PatternId::QueueCommand,
        PatternId::ListCommands,
        PatternId::SyncDevice,
        PatternId::StartRollout,
        PatternId::GetRollout,
        PatternId::AdvanceRollouts,
        PatternId::CreateRule,
        PatternId::ListRules,
        PatternId::UpdateRule,
        PatternId::DeleteRule,
        PatternId::OwnerAlarms,
        PatternId::DeviceAlarms,
        PatternId::AcknowledgeAlarm,
        PatternId::OpenAlarms,
        PatternId::OfflineCheck,
        PatternId::AlarmReminders,
    ];

    /// The stable text id (`AP-04`), as docs, logs and cursors spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            PatternId::GetProfile => "AP-01",
            PatternId::ListDevices => "AP-02",
            PatternId::GetDevice => "AP-03",
            PatternId::DeviceEvents => "AP-04",
            PatternId::UserEvents => "AP-05",
            PatternId::Dashboard => "AP-DASH",
            PatternId::UpdateDevice => "AP-06",
            PatternId::RegisterDevice => "AP-07",
            PatternId::DeleteDevice => "AP-08",
            PatternId::EventsByType => "AP-09",
            PatternId::DeviceCountByStatus => "AP-10",
            PatternId::ActiveUsers => "AP-11",
            PatternId::DevicesByTag => "AP-12",
            PatternId::DevicesByStatus => "AP-13",
            PatternId::IngestEvents => "AP-14",
            PatternId::DailyReport => "AP-15",
            PatternId::PutProfile => "AP-16",
            PatternId::RotateToken => "AP-17",
            PatternId::RevokeToken => "AP-18",
            PatternId::SetDesired => "AP-T1",
            PatternId::QueueCommand => "AP-T2",
            PatternId::ListCommands => "AP-T3",
            PatternId::SyncDevice => "AP-T4",
            PatternId::StartRollout => "AP-T5",
            PatternId::GetRollout => "AP-T6",
            PatternId::AdvanceRollouts => "AP-T7",
            PatternId::CreateRule => "AP-19",
            PatternId::ListRules => "AP-20",
            PatternId::UpdateRule => "AP-21",
            PatternId::DeleteRule => "AP-22",
            PatternId::OwnerAlarms => "AP-23",
            PatternId::DeviceAlarms => "AP-24",
            PatternId::AcknowledgeAlarm => "AP-25",
            PatternId::OpenAlarms => "AP-26",
            PatternId::OfflineCheck => "AP-27",
            PatternId::AlarmReminders => "AP-28",
        }
    }
}

impl fmt::Display for PatternId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no access pattern.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an access pattern id")]
pub struct UnknownPattern(pub String);

impl FromStr for PatternId {
    type Err = UnknownPattern;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PatternId::ALL
            .into_iter()
            .find(|id| id.as_str() == text)
            .ok_or_else(|| UnknownPattern(text.to_string()))
    }
}

/// Serialized as its text id, so reports keep `"id": "AP-04"`.
impl Serialize for PatternId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}
