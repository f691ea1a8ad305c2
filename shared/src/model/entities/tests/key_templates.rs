//! The key templates (docs/model.json) match the builders and name their entity types.

use crate::model::entities::checkpoint::*;
use crate::model::entities::command::*;
use crate::model::entities::desired_state::*;
use crate::model::entities::device::*;
use crate::model::entities::device_state::*;
use crate::model::entities::event::*;
use crate::model::entities::fleet::*;
use crate::model::entities::profile::*;
use crate::model::entities::purge_marker::*;
use crate::model::entities::registration::*;
use crate::model::entities::report::*;
use crate::model::entities::reported_state::*;
use crate::model::entities::rollout::*;
use crate::model::entities::rollout_slots::ROLLOUT_SLOTS_SK;
use crate::model::entities::running_rollout::*;
use crate::model::entities::tag_link::*;
use crate::model::entities::type_mark::*;
use crate::model::entities::EntityType;
use crate::model::ids::{DeviceId, EventId, EventType, RolloutId, Tag, UserId};
use crate::model::keys::*;
use crate::model::status::DeviceStatus;
use crate::model::timestamp::{Day, Timestamp};
use strum::IntoEnumIterator;

fn fill(template: &str, values: &[(&str, &str)]) -> String {
    values
        .iter()
        .fold(template.to_string(), |t, (name, value)| {
            t.replace(&format!("${{{name}}}"), value)
        })
}

#[test]
fn every_template_names_its_entity_type() {
    for entity in EntityType::iter() {
        if let Some(t) = entity.key_template() {
            assert_eq!(t.entity_type, entity.as_str());
        }
    }
    assert_eq!(EntityType::key_templates().count(), 33);
    assert_eq!(
        EntityType::ReleasedRegistration.as_str(),
        "releasedRegistration"
    );
    assert_eq!(EntityType::DeviceState.as_str(), "deviceState");
}

#[test]
fn templates_match_the_builders() {
    let user = UserId::parse("u").unwrap();
    let device = DeviceId::parse("d").unwrap();
    let tag = Tag::parse("t").unwrap();
    let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
    let event = EventId::parse("e").unwrap();
    let kind = EventType::parse("temp").unwrap();
    let day = Day::parse_field("day", "2024-04-10").unwrap();
    let directory = directory_gsi2pk(&user);
    let directory_shard = directory.trim_start_matches("DIRECTORY#");
    let v = [
        ("userId", "u"),
        ("deviceId", "d"),
        ("tag", "t"),
        ("at", "2024-04-10T10:00:00.000Z"),
        ("eventId", "e"),
        ("type", "temp"),
        ("day", "2024-04-10"),
        ("shard", "3"),
        ("ownerShard", "2"),
        ("directoryShard", directory_shard),
        ("status", "active"),
        ("seenBucket", "2024-04-10T10:00:00.000Z"),
        ("window", "2024-04-10T10:00:00.000Z"),
        ("segment", "0007"),
        ("seq", "0000000042"),
        ("rolloutId", "r-1"),
    ];
    // The part of a template before a parenthesised note.
    let main = |t: &'static str| t.split(" (").next().unwrap();
    let built = [
        (user_pk(&user), PROFILE_SK.to_string()),
        (user_pk(&user), FLEET_SK.to_string()),
        (user_pk(&user), device_sk(&device)),
        (state_pk(&user, 2), state_sk(&device)),
        (user_pk(&user), tag_link_sk(&tag, &device)),
        (registration_pk(&device), REGISTRATION_SK.to_string()),
        (event_pk(&user, &device), event_sk(&at, &event)),
        (event_pk(&user, &device), type_mark_sk(&kind, &at)),
        (report_pk(&day), REPORT_SK.to_string()),
        (checkpoint_pk(&day, 7), CHECKPOINT_SK.to_string()),
        (purge_pk(&user, &device), PURGE_SK.to_string()),
    ];
    let templates: Vec<KeyTemplate> = EntityType::key_templates().collect();
    let template = |name: &str| *templates.iter().find(|t| t.entity_type == name).unwrap();
    let order = [
        "profile",
        "fleet",
        "device",
        "deviceState",
        "tagLink",
        "registration",
        "event",
        "typeMark",
        "report",
        "checkpoint",
        "purgeMarker",
    ];
    for (t, (pk, sk)) in order.map(template).iter().zip(built) {
        assert_eq!(fill(main(t.pk), &v), pk, "{}", t.entity_type);
        assert_eq!(fill(t.sk, &v), sk, "{}", t.entity_type);
    }
    // The device twin's entities, by name.
    let twin = [
        (
            "desiredState",
            event_pk(&user, &device),
            DESIRED_SK.to_string(),
        ),
        (
            "reportedState",
            event_pk(&user, &device),
            REPORTED_SK.to_string(),
        ),
        ("command", event_pk(&user, &device), command_sk(42)),
        (
            "rollout",
            user_pk(&user),
            rollout_sk(&RolloutId::parse("r-1").unwrap()),
        ),
        (
            "runningRollout",
            RUNNING_ROLLOUTS_PK.to_string(),
            "u#r-1".to_string(),
        ),
        ("rolloutSlots", user_pk(&user), ROLLOUT_SLOTS_SK.to_string()),
        (
            "deviceMove",
            crate::model::entities::device_move::RUNNING_MOVES_PK.to_string(),
            "d".to_string(),
        ),
    ];
    for (name, pk, sk) in twin {
        let t = template(name);
        assert_eq!(fill(main(t.pk), &v), pk, "{name}");
        assert_eq!(fill(t.sk, &v), sk, "{name}");
    }
    let (g2pk, g2sk) = template("profile").gsi2.unwrap();
    let profile = IndexKeys::directory(&user, DirectoryEntry::Profile);
    assert_eq!(Some(fill(g2pk, &v)), profile.gsi2pk);
    assert_eq!(Some(fill(g2sk, &v)), profile.gsi2sk);
    let (_, g2sk) = template("fleet").gsi2.unwrap();
    let fleet = IndexKeys::directory(&user, DirectoryEntry::Fleet);
    assert_eq!(Some(fill(g2sk, &v)), fleet.gsi2sk);
    let (g1pk, g1sk) = template("deviceState").gsi1.unwrap();
    assert_eq!(fill(g1pk, &v), status_gsi1pk(DeviceStatus::Active, 3));
    assert_eq!(fill(g1sk, &v), seen_gsi1sk(&at, &device));
    let (g1pk, g1sk) = template("event").gsi1.unwrap();
    assert_eq!(
        fill(main(g1pk), &v),
        device_type_gsi1pk(&user, &device, &kind)
    );
    assert_eq!(fill(g1sk, &v), event_index_sk(&at, &device, &event));
    let (g1pk, g1sk) = template("typeMark").gsi1.unwrap();
    assert_eq!(fill(g1pk, &v), type_gsi1pk(&kind, &day, 3));
    assert_eq!(fill(g1sk, &v), type_mark_gsi1sk(&at, &user, &device));
}

#[test]
fn organization_templates_match_their_builders_and_parse_back() {
    use crate::model::entities::{invitation, membership, org_member, organization, ItemKey};
    use crate::model::ids::OrgId;
    use crate::model::org::InvitationId;
    let org = OrgId::parse("o1").unwrap();
    let user = UserId::parse("u").unwrap();
    let invite = InvitationId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let v = [
        ("orgId", "o1"),
        ("userId", "u"),
        ("invitationId", invite.as_str()),
    ];
    let keys = [
        (
            organization::KEY_TEMPLATE,
            ItemKey::Organization { org: org.clone() },
        ),
        (
            org_member::KEY_TEMPLATE,
            ItemKey::OrgMember {
                org: org.clone(),
                member: user.clone(),
            },
        ),
        (
            membership::KEY_TEMPLATE,
            ItemKey::Membership {
                member: user.clone(),
                org: org.clone(),
            },
        ),
        (
            invitation::KEY_TEMPLATE,
            ItemKey::Invitation {
                org: org.clone(),
                invitation: invite.clone(),
            },
        ),
    ];
    for (template, key) in keys {
        let built = key.primary_key();
        assert_eq!(fill(template.pk, &v), built.pk, "{}", template.entity_type);
        assert_eq!(fill(template.sk, &v), built.sk, "{}", template.entity_type);
        assert_eq!(ItemKey::parse(&built.pk, &built.sk).unwrap(), key);
    }
}

#[test]
fn webhook_templates_match_their_builders_and_parse_back() {
    use crate::model::entities::{deleted_webhook_log, webhook, webhook_delivery, ItemKey};
    use crate::model::webhook::{DeliveryId, WebhookId};
    let user = UserId::parse("org:o1").unwrap();
    let hook = WebhookId::generate().unwrap();
    let message = DeliveryId::generate().unwrap();
    let shard = webhook_delivery::log_shard(&message).to_string();
    let v = [
        ("userId", user.as_str()),
        ("webhookId", hook.as_str()),
        ("deliveryId", message.as_str()),
        ("shard", shard.as_str()),
    ];
    let keys = [
        (
            webhook::KEY_TEMPLATE,
            ItemKey::Webhook {
                user: user.clone(),
                webhook: hook.clone(),
            },
        ),
        (
            webhook_delivery::KEY_TEMPLATE,
            ItemKey::WebhookDelivery {
                user: user.clone(),
                webhook: hook.clone(),
                delivery: message.clone(),
            },
        ),
        (
            deleted_webhook_log::KEY_TEMPLATE,
            ItemKey::DeletedWebhookLog {
                user: user.clone(),
                webhook: hook.clone(),
            },
        ),
    ];
    for (template, key) in keys {
        let built = key.primary_key();
        assert_eq!(fill(template.pk, &v), built.pk, "{}", template.entity_type);
        assert_eq!(fill(template.sk, &v), built.sk, "{}", template.entity_type);
        assert_eq!(ItemKey::parse(&built.pk, &built.sk).unwrap(), key);
    }
}

#[test]
fn an_endpoints_deliveries_spread_over_its_log_partitions_and_a_key_in_the_wrong_one_is_refused() {
    use crate::model::entities::{webhook_delivery, ItemKey};
    use crate::model::webhook::{DeliveryId, WebhookId};
    let user = UserId::parse("u1").unwrap();
    let hook = WebhookId::generate().unwrap();
    let mut per_shard = vec![0u32; usize::from(webhook_delivery::DELIVERY_LOG_SHARDS)];
    for _ in 0..3_200 {
        let id = DeliveryId::generate().unwrap();
        per_shard[usize::from(webhook_delivery::log_shard(&id))] += 1;
    }
    // 200 a partition on average: none empty, none with twice its share.
    assert!(
        per_shard.iter().all(|n| (100..400).contains(n)),
        "{per_shard:?}"
    );
    let delivery = DeliveryId::generate().unwrap();
    let key = ItemKey::WebhookDelivery {
        user: user.clone(),
        webhook: hook.clone(),
        delivery: delivery.clone(),
    }
    .primary_key();
    let other =
        (webhook_delivery::log_shard(&delivery) + 1) % webhook_delivery::DELIVERY_LOG_SHARDS;
    let moved = webhook_delivery::log_partition(&user, &hook, other);
    assert!(ItemKey::parse(&moved, &key.sk).is_err());
    assert!(ItemKey::parse(&key.pk, &key.sk).is_ok());
}
