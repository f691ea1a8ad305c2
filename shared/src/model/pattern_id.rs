//! Which access pattern: the typed id that definitions, cursors, contract runs and bench cases
//! name. Below the catalog, so cursors (model) and the operations (ops) can name a pattern.

use serde::{Serialize, Serializer};
use strum::{Display, EnumIter, EnumString, IntoEnumIterator, IntoStaticStr};

/// Which access pattern: the typed id every definition, cursor, contract run and bench case
/// names. `AP-xx` text exists only here (its [`Display`](std::fmt::Display) and
/// [`FromStr`](std::str::FromStr), derived with strum from each variant's `serialize`); cursors carry that text, so their wire format does not depend on this type.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    EnumIter,
    IntoStaticStr,
    EnumString,
    Display,
)]
#[strum(parse_err_ty = UnknownPattern, parse_err_fn = UnknownPattern::of)]
pub enum PatternId {
    /// AP-01: user profile.
    #[strum(serialize = "AP-01")]
    GetProfile,
    /// AP-02: a user's devices, paged.
    #[strum(serialize = "AP-02")]
    ListDevices,
    /// AP-03: one device.
    #[strum(serialize = "AP-03")]
    GetDevice,
    /// AP-04: a device's events in a time range.
    #[strum(serialize = "AP-04")]
    DeviceEvents,
    /// AP-05: a user's events across all devices.
    #[strum(serialize = "AP-05")]
    UserEvents,
    /// AP-DASH: the dashboard.
    #[strum(serialize = "AP-DASH")]
    Dashboard,
    /// AP-06: update a device.
    #[strum(serialize = "AP-06")]
    UpdateDevice,
    /// AP-07: register a device.
    #[strum(serialize = "AP-07")]
    RegisterDevice,
    /// AP-08: delete a device.
    #[strum(serialize = "AP-08")]
    DeleteDevice,
    /// AP-09: events of a type, all users.
    #[strum(serialize = "AP-09")]
    EventsByType,
    /// AP-10: device count by status.
    #[strum(serialize = "AP-10")]
    DeviceCountByStatus,
    /// AP-11: active users in the last 30 days.
    #[strum(serialize = "AP-11")]
    ActiveUsers,
    /// AP-12: a user's devices with a tag.
    #[strum(serialize = "AP-12")]
    DevicesByTag,
    /// AP-13: devices with a status seen since a time.
    #[strum(serialize = "AP-13")]
    DevicesByStatus,
    /// AP-14: ingest a batch of events.
    #[strum(serialize = "AP-14")]
    IngestEvents,
    /// AP-15: the daily report.
    #[strum(serialize = "AP-15")]
    DailyReport,
    /// AP-16: create or update the caller's profile.
    #[strum(serialize = "AP-16")]
    PutProfile,
    /// AP-17: rotate a device's token.
    #[strum(serialize = "AP-17")]
    RotateToken,
    /// AP-18: revoke a device's tokens.
    #[strum(serialize = "AP-18")]
    RevokeToken,
    /// AP-T1: set a device's desired state.
    #[strum(serialize = "AP-T1")]
    SetDesired,
    /// AP-T2: queue a command for a device.
    #[strum(serialize = "AP-T2")]
    QueueCommand,
    /// AP-T3: a device's commands.
    #[strum(serialize = "AP-T3")]
    ListCommands,
    /// AP-T4: a device asks for its pending work (and reports, acknowledges).
    #[strum(serialize = "AP-T4")]
    SyncDevice,
    /// AP-T5: start a fleet-wide desired-state change.
    #[strum(serialize = "AP-T5")]
    StartRollout,
    /// AP-T6: a fleet-wide change's progress.
    #[strum(serialize = "AP-T6")]
    GetRollout,
    /// AP-T7: the scheduled worker carries running rollouts forward.
    #[strum(serialize = "AP-T7")]
    AdvanceRollouts,
    /// AP-19: create an alarm rule.
    #[strum(serialize = "AP-19")]
    CreateRule,
    /// AP-20: an owner's alarm rules.
    #[strum(serialize = "AP-20")]
    ListRules,
    /// AP-21: change an alarm rule.
    #[strum(serialize = "AP-21")]
    UpdateRule,
    /// AP-22: delete an alarm rule.
    #[strum(serialize = "AP-22")]
    DeleteRule,
    /// AP-23: an owner's alarms, open first.
    #[strum(serialize = "AP-23")]
    OwnerAlarms,
    /// AP-24: one device's alarm history.
    #[strum(serialize = "AP-24")]
    DeviceAlarms,
    /// AP-25: acknowledge an alarm.
    #[strum(serialize = "AP-25")]
    AcknowledgeAlarm,
    /// AP-26: open alarms across owners by severity (operators).
    #[strum(serialize = "AP-26")]
    OpenAlarms,
    /// AP-27: the schedule's offline check.
    #[strum(serialize = "AP-27")]
    OfflineCheck,
    /// AP-28: the schedule's alarm reminders.
    #[strum(serialize = "AP-28")]
    AlarmReminders,
    /// AP-29: one event type of a device summarised per 5 minutes, hour or day.
    #[strum(serialize = "AP-29")]
    DeviceSeries,
    /// AP-30: the scheduled worker rolls the summaries of devices gone silent.
    #[strum(serialize = "AP-30")]
    SilentRolls,
    /// AP-R1: shorten (or restore) the raw retention of the owner's devices of one type.
    #[strum(serialize = "AP-R1")]
    SetRetention,
    /// AP-R2: the owner's retentions.
    #[strum(serialize = "AP-R2")]
    GetRetention,
    /// AP-M1: move a device to another owner key (a person's fleet or an organization's).
    #[strum(serialize = "AP-M1")]
    MoveDevice,

    /// AP-O1: create an organization (the caller its owner).
    #[strum(serialize = "AP-O1")]
    CreateOrg,
    /// AP-O2: the caller's organizations, with their role in each.
    #[strum(serialize = "AP-O2")]
    MyOrgs,
    /// AP-O3: one organization.
    #[strum(serialize = "AP-O3")]
    GetOrg,
    /// AP-O4: rename an organization.
    #[strum(serialize = "AP-O4")]
    RenameOrg,
    /// AP-O5: delete an organization without devices.
    #[strum(serialize = "AP-O5")]
    DeleteOrg,
    /// AP-O6: an organization's members.
    #[strum(serialize = "AP-O6")]
    OrgMembers,
    /// AP-O7: change a member's role (or hand ownership over).
    #[strum(serialize = "AP-O7")]
    ChangeMemberRole,
    /// AP-O8: remove a member, or leave.
    #[strum(serialize = "AP-O8")]
    RemoveMember,
    /// AP-O9: invite someone with a role (a one-time code).
    #[strum(serialize = "AP-O9")]
    Invite,
    /// AP-O10: an organization's open invitations.
    #[strum(serialize = "AP-O10")]
    OrgInvitations,
    /// AP-O11: revoke an invitation.
    #[strum(serialize = "AP-O11")]
    RevokeInvitation,
    /// AP-O12: accept an invitation.
    #[strum(serialize = "AP-O12")]
    AcceptInvitation,
    /// AP-O13: the caller's role in an organization (every `/orgs/{orgId}/...` request).
    #[strum(serialize = "AP-O13")]
    MemberRole,

    /// AP-W1: add a webhook endpoint (and queue its confirmation).
    #[strum(serialize = "AP-W1")]
    CreateWebhook,
    /// AP-W2: the owner's webhook endpoints.
    #[strum(serialize = "AP-W2")]
    ListWebhooks,
    /// AP-W3: one webhook endpoint.
    #[strum(serialize = "AP-W3")]
    GetWebhook,
    /// AP-W4: change a webhook endpoint (enable, disable, events, URL).
    #[strum(serialize = "AP-W4")]
    UpdateWebhook,
    /// AP-W5: delete a webhook endpoint.
    #[strum(serialize = "AP-W5")]
    DeleteWebhook,
    /// AP-W6: rotate an endpoint's signing secret.
    #[strum(serialize = "AP-W6")]
    RotateWebhookSecret,
    /// AP-W7: confirm an endpoint with its token.
    #[strum(serialize = "AP-W7")]
    ConfirmWebhook,
    /// AP-W8: send an endpoint a `webhook.test` delivery.
    #[strum(serialize = "AP-W8")]
    TestWebhook,
    /// AP-W9: an endpoint's delivery log, newest first.
    #[strum(serialize = "AP-W9")]
    WebhookDeliveries,
    /// AP-W10: redeliver one delivery.
    #[strum(serialize = "AP-W10")]
    RedeliverWebhook,
    /// AP-W11: the delivery worker's attempt (its reads before and its record after).
    #[strum(serialize = "AP-W11")]
    DeliveryAttempt,
    /// AP-W12: an alarm stream batch fanned out to its fleets' endpoints.
    #[strum(serialize = "AP-W12")]
    AlarmWebhooks,

    /// AP-F1: register a firmware package (and presign its image's upload).
    #[strum(serialize = "AP-F1")]
    CreateFirmware,
    /// AP-F2: one firmware package (a pending one checked first).
    #[strum(serialize = "AP-F2")]
    GetFirmware,
    /// AP-F3: the owner's firmware packages, newest first.
    #[strum(serialize = "AP-F3")]
    ListFirmware,
    /// AP-F4: delete a firmware package (and its image).
    #[strum(serialize = "AP-F4")]
    DeleteFirmware,
    /// AP-F5: set a device type's Ed25519 signing key.
    #[strum(serialize = "AP-F5")]
    SetSigningKey,
    /// AP-F6: start a staged firmware rollout.
    #[strum(serialize = "AP-F6")]
    StartFirmwareRollout,
    /// AP-F7: pause a firmware rollout.
    #[strum(serialize = "AP-F7")]
    PauseRollout,
    /// AP-F8: resume a paused firmware rollout.
    #[strum(serialize = "AP-F8")]
    ResumeRollout,
    /// AP-F9: cancel a rollout (either kind).
    #[strum(serialize = "AP-F9")]
    CancelRollout,
    /// AP-F10: the owner's rollouts, newest first.
    #[strum(serialize = "AP-F10")]
    ListRollouts,
    /// AP-F11: a device's part in the last firmware rollout that offered it something.
    #[strum(serialize = "AP-F11")]
    DeviceFirmware,
}

impl PatternId {
    /// Every pattern, in catalog order.
    pub fn all() -> impl Iterator<Item = PatternId> {
        PatternId::iter()
    }

    /// The stable text id (`AP-04`), as docs, logs and cursors spell it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Text that names no access pattern.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an access pattern id")]
pub struct UnknownPattern(pub String);

impl UnknownPattern {
    fn of(text: &str) -> Self {
        UnknownPattern(text.to_string())
    }
}

/// Serialized as its text id, so reports keep `"id": "AP-04"`.
impl Serialize for PatternId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_has_an_ap_text_id_of_its_own() {
        let texts: std::collections::BTreeSet<&str> =
            PatternId::all().map(PatternId::as_str).collect();
        assert_eq!(texts.len(), PatternId::all().count());
        assert!(texts.iter().all(|t| t.starts_with("AP-")), "{texts:?}");
        assert_eq!("AP-28".parse::<PatternId>(), Ok(PatternId::AlarmReminders));
        assert_eq!(
            "AP-99".parse::<PatternId>(),
            Err(UnknownPattern("AP-99".to_string()))
        );
    }
}
