//! Every entity, registered once: how each [`ItemKey`] shape is built and parsed (by its
//! entity's `primary_key` and `parse_key`) and each [`EntityType`]'s key template (its
//! `KEY_TEMPLATE`). Above the entities' files, which never use it, so keys and entities stay
//! free of circles; matches are exhaustive, so a new variant cannot be left out.

use crate::model::entities::{
    alarm, checkpoint, command, deleted_webhook_log, desired_state, device, device_move,
    device_state, event, firmware, firmware_keys, fleet, invitation, membership, open_alarm,
    org_deletion, org_member, organization, profile, purge_marker, registration, report,
    reported_state, rollout, rollout_slots, rule_set, running_rollout, series, silent_roll,
    tag_link, type_mark, webhook, webhook_delivery, EntityType, ItemKey,
};
use crate::model::error::ValidationError;
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use strum::IntoEnumIterator;

/// Every key shape's parser, in the order a stored key is tried: an open alarm's before an
/// alarm's (an alarm's sort key `{raisedAt}#{source}` has the shape of `OPEN#{source}`).
type ParseKey = fn(&KeyParts) -> Option<Result<ItemKey, ValidationError>>;
const PARSERS: [ParseKey; 33] = [
    profile::parse_key,
    device::parse_key,
    fleet::parse_key,
    device_state::parse_key,
    tag_link::parse_key,
    registration::parse_key,
    event::parse_key,
    type_mark::parse_key,
    report::parse_key,
    checkpoint::parse_key,
    purge_marker::parse_key,
    desired_state::parse_key,
    reported_state::parse_key,
    command::parse_key,
    rollout::parse_key,
    running_rollout::parse_key,
    rollout_slots::parse_key,
    rule_set::parse_key,
    open_alarm::parse_key,
    alarm::parse_key,
    series::parse_key,
    device_move::parse_key,
    organization::parse_key,
    org_member::parse_key,
    membership::parse_key,
    invitation::parse_key,
    org_deletion::parse_key,
    firmware::parse_key,
    firmware_keys::parse_key,
    webhook::parse_key,
    webhook_delivery::parse_key,
    deleted_webhook_log::parse_key,
    silent_roll::parse_key,
];

impl ItemKey {
    /// The primary key of this item.
    pub fn primary_key(&self) -> PrimaryKey {
        match self {
            ItemKey::Profile { user } => profile::primary_key(user),
            ItemKey::Device { user, device } => device::primary_key(user, device),
            ItemKey::Fleet { user } => fleet::primary_key(user),
            ItemKey::DeviceState {
                user,
                partition,
                device,
            } => device_state::primary_key(user, partition, device),
            ItemKey::TagLink { user, tag, device } => tag_link::primary_key(user, tag, device),
            ItemKey::Registration { device } => registration::primary_key(device),
            ItemKey::Event {
                user,
                device,
                at,
                event,
            } => event::primary_key(user, device, at, event),
            ItemKey::TypeMark {
                user,
                device,
                event_type,
                window,
            } => type_mark::primary_key(user, device, event_type, window),
            ItemKey::Report { day } => report::primary_key(day),
            ItemKey::Checkpoint { day, segment } => checkpoint::primary_key(day, segment),
            ItemKey::PurgeMarker { user, device } => purge_marker::primary_key(user, device),
            ItemKey::Desired { user, device } => desired_state::primary_key(user, device),
            ItemKey::Reported { user, device } => reported_state::primary_key(user, device),
            ItemKey::Command { user, device, seq } => command::primary_key(user, device, seq),
            ItemKey::Rollout { user, rollout } => rollout::primary_key(user, rollout),
            ItemKey::RunningRollout { user, rollout } => {
                running_rollout::primary_key(user, rollout)
            }
            ItemKey::RuleSet { user } => rule_set::primary_key(user),
            ItemKey::RolloutSlots { user } => rollout_slots::primary_key(user),
            ItemKey::OpenAlarm {
                user,
                device,
                source,
            } => open_alarm::primary_key(user, device, source),
            ItemKey::Alarm {
                user,
                device,
                raised_at,
                source,
            } => alarm::primary_key(user, device, raised_at, source),
            ItemKey::Series {
                user,
                device,
                event_type,
                resolution,
                start,
            } => series::primary_key(user, device, event_type, *resolution, start),
            ItemKey::DeviceMove { device } => device_move::primary_key(device),
            ItemKey::Organization { org } => organization::primary_key(org),
            ItemKey::OrgMember { org, member } => org_member::primary_key(org, member),
            ItemKey::Membership { member, org } => membership::primary_key(member, org),
            ItemKey::Invitation { org, invitation } => invitation::primary_key(org, invitation),
            ItemKey::OrgDeletion { org } => org_deletion::primary_key(org),
            ItemKey::Firmware { user, firmware } => firmware::primary_key(user, firmware),
            ItemKey::FirmwareKeys { user } => firmware_keys::primary_key(user),
            ItemKey::Webhook { user, webhook } => webhook::primary_key(user, webhook),
            ItemKey::WebhookDelivery {
                user,
                webhook,
                delivery,
            } => webhook_delivery::primary_key(user, webhook, delivery),
            ItemKey::DeletedWebhookLog { user, webhook } => {
                deleted_webhook_log::primary_key(user, webhook)
            }
            ItemKey::SilentRoll {} => silent_roll::primary_key(),
        }
    }

    /// Parses a primary key back into the item it addresses. Rejects anything that is not
    /// exactly one of the entities' key shapes.
    pub fn parse(pk: &str, sk: &str) -> Result<Self, ValidationError> {
        let parts = KeyParts::new(pk, sk);
        PARSERS
            .iter()
            .find_map(|parse| parse(&parts))
            .unwrap_or_else(|| Err(parts.bad()))
    }
}

impl EntityType {
    /// This type's key templates, from its file (none for a released registration, which
    /// keeps the registration's key).
    pub fn key_template(self) -> Option<KeyTemplate> {
        Some(match self {
            EntityType::Profile => profile::KEY_TEMPLATE,
            EntityType::Device => device::KEY_TEMPLATE,
            EntityType::Fleet => fleet::KEY_TEMPLATE,
            EntityType::DeviceState => device_state::KEY_TEMPLATE,
            EntityType::TagLink => tag_link::KEY_TEMPLATE,
            EntityType::Registration => registration::KEY_TEMPLATE,
            EntityType::Event => event::KEY_TEMPLATE,
            EntityType::Report => report::KEY_TEMPLATE,
            EntityType::Checkpoint => checkpoint::KEY_TEMPLATE,
            EntityType::PurgeMarker => purge_marker::KEY_TEMPLATE,
            EntityType::ReleasedRegistration => return None,
            EntityType::TypeMark => type_mark::KEY_TEMPLATE,
            EntityType::DesiredState => desired_state::KEY_TEMPLATE,
            EntityType::ReportedState => reported_state::KEY_TEMPLATE,
            EntityType::Command => command::KEY_TEMPLATE,
            EntityType::Rollout => rollout::KEY_TEMPLATE,
            EntityType::RunningRollout => running_rollout::KEY_TEMPLATE,
            EntityType::RuleSet => rule_set::KEY_TEMPLATE,
            EntityType::RolloutSlots => rollout_slots::KEY_TEMPLATE,
            EntityType::Alarm => alarm::KEY_TEMPLATE,
            EntityType::OpenAlarm => open_alarm::KEY_TEMPLATE,
            EntityType::Series => series::KEY_TEMPLATE,
            EntityType::DeviceMove => device_move::KEY_TEMPLATE,
            EntityType::Organization => organization::KEY_TEMPLATE,
            EntityType::OrgMember => org_member::KEY_TEMPLATE,
            EntityType::Membership => membership::KEY_TEMPLATE,
            EntityType::Invitation => invitation::KEY_TEMPLATE,
            EntityType::OrgDeletion => org_deletion::KEY_TEMPLATE,
            EntityType::Firmware => firmware::KEY_TEMPLATE,
            EntityType::FirmwareKeys => firmware_keys::KEY_TEMPLATE,
            EntityType::Webhook => webhook::KEY_TEMPLATE,
            EntityType::WebhookDelivery => webhook_delivery::KEY_TEMPLATE,
            EntityType::DeletedWebhookLog => deleted_webhook_log::KEY_TEMPLATE,
            EntityType::SilentRoll => silent_roll::KEY_TEMPLATE,
        })
    }

    /// Every entity's key templates, for documentation (`docs/model.json`).
    pub fn key_templates() -> impl Iterator<Item = KeyTemplate> {
        EntityType::iter().filter_map(EntityType::key_template)
    }
}
