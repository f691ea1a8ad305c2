//! Tests over every entity: each key shape round-trips and has its documented spelling, the
//! key templates match the builders, and every entity's declared attributes are exactly the
//! ones serde stores.

mod key_shapes {
    use crate::model::entities::device::*;
    use crate::model::entities::device_state::*;
    use crate::model::entities::event::*;
    use crate::model::entities::fleet::*;
    use crate::model::entities::profile::*;
    use crate::model::entities::registration::*;
    use crate::model::entities::report::*;
    use crate::model::entities::tag_link::*;
    use crate::model::entities::type_mark::*;
    use crate::model::entities::ItemKey;
    use crate::model::ids::{DeviceId, EventId, EventType, RolloutId, Tag, UserId};
    use crate::model::keys::*;
    use crate::model::offline::{seen_bucket, SEEN_GRANULARITY_SECONDS};
    use crate::model::shard::ShardCounts;
    use crate::model::status::DeviceStatus;
    use crate::model::timestamp::{Day, Timestamp};

    fn user() -> UserId {
        UserId::parse("u-1").unwrap()
    }
    fn device() -> DeviceId {
        DeviceId::parse("thermo-1").unwrap()
    }
    fn at() -> Timestamp {
        Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap()
    }
    fn day() -> Day {
        Day::parse_field("day", "2024-04-10").unwrap()
    }

    #[test]
    fn every_key_round_trips() {
        let keys = [
            ItemKey::Profile { user: user() },
            ItemKey::Device {
                user: user(),
                device: device(),
            },
            ItemKey::TagLink {
                user: user(),
                tag: Tag::parse("home").unwrap(),
                device: device(),
            },
            ItemKey::Registration { device: device() },
            ItemKey::Fleet { user: user() },
            ItemKey::DeviceState {
                user: user(),
                partition: 0,
                device: device(),
            },
            ItemKey::DeviceState {
                user: user(),
                partition: 12,
                device: device(),
            },
            ItemKey::Event {
                user: user(),
                device: device(),
                at: at(),
                event: EventId::parse("e-1").unwrap(),
            },
            ItemKey::TypeMark {
                user: user(),
                device: device(),
                event_type: EventType::parse("fault").unwrap(),
                window: at(),
            },
            ItemKey::Report { day: day() },
            ItemKey::Checkpoint {
                day: day(),
                segment: 7,
            },
            ItemKey::PurgeMarker {
                user: user(),
                device: device(),
            },
            ItemKey::Desired {
                user: user(),
                device: device(),
            },
            ItemKey::Reported {
                user: user(),
                device: device(),
            },
            ItemKey::Command {
                user: user(),
                device: device(),
                seq: 42,
            },
            ItemKey::Rollout {
                user: user(),
                rollout: RolloutId::parse("r-1").unwrap(),
            },
            ItemKey::RunningRollout {
                user: user(),
                rollout: RolloutId::parse("r-1").unwrap(),
            },
        ];
        for key in keys {
            let PrimaryKey { pk, sk } = key.primary_key();
            assert_eq!(ItemKey::parse(&pk, &sk).unwrap(), key, "{pk} / {sk}");
        }
    }

    #[test]
    fn keys_have_the_documented_shapes() {
        let e = EventId::parse("e-1").unwrap();
        let t = EventType::parse("temperature").unwrap();
        assert_eq!(user_pk(&user()), "USER#u-1");
        assert_eq!(device_sk(&device()), "DEVICE#thermo-1");
        assert_eq!(
            tag_link_sk(&Tag::parse("home").unwrap(), &device()),
            "TAG#home#thermo-1"
        );
        assert_eq!(registration_pk(&device()), "DEVICE#thermo-1");
        assert_eq!(event_pk(&user(), &device()), "USER#u-1#DEVICE#thermo-1");
        assert_eq!(event_sk(&at(), &e), "EVENT#2024-04-10T10:00:00.000Z#e-1");
        assert_eq!(type_gsi1pk(&t, &day(), 3), "TYPE#temperature#2024-04-10#3");
        assert_eq!(state_pk(&user(), 0), "USER#u-1");
        assert_eq!(state_pk(&user(), 3), "USER#u-1#SHARD#3");
        assert_eq!(state_sk(&device()), "DEVICE#thermo-1#STATE");
        assert!(directory_gsi2pk(&user()).starts_with("DIRECTORY#"));
        assert_eq!(
            event_index_sk(&at(), &device(), &e),
            "2024-04-10T10:00:00.000Z#thermo-1#e-1"
        );
        assert_eq!(
            status_gsi1pk(DeviceStatus::Maintenance, 0),
            "STATUS#maintenance#0"
        );
        assert_eq!(
            seen_gsi1sk(&at(), &device()),
            "SEEN#2024-04-10T10:00:00.000Z#thermo-1"
        );
        assert_eq!(report_pk(&day()), "REPORT#2024-04-10");
    }

    #[test]
    fn seen_buckets_hold_last_seen_and_are_offset_per_device() {
        let g = SEEN_GRANULARITY_SECONDS;
        let t = Timestamp::parse_field("at", "2024-04-10T10:29:59.999Z").unwrap();
        let mut starts = std::collections::BTreeSet::new();
        for i in 0..200 {
            let d = DeviceId::parse(format!("meter-{i}")).unwrap();
            let start = seen_bucket(&t, &d);
            assert!(start <= t, "a bucket starts at or before lastSeen");
            assert!(t.epoch_seconds() - start.epoch_seconds() < g, "{start}");
            // Every time in the bucket maps to the same start: the entry moves once per bucket.
            let end = Timestamp::from_epoch_millis((start.epoch_seconds() + g) * 1000 - 1).unwrap();
            assert_eq!(seen_bucket(&end, &d), start);
            assert_eq!(seen_bucket(&start, &d), start);
            starts.insert(start.epoch_seconds().rem_euclid(g));
        }
        assert!(
            starts.len() > 150,
            "boundaries spread over the interval, not one shared instant: {}",
            starts.len()
        );
        let start = seen_bucket(&t, &device());
        assert_eq!(
            device_seen_key(&t, &device()),
            format!("SEEN#{start}#thermo-1")
        );
        // `seen_since` admits every device seen since `t` and none seen a whole bucket earlier.
        let since = seen_since(&t);
        assert!(device_seen_key(&t, &device()) >= since);
        let early = Timestamp::from_epoch_millis((t.epoch_seconds() - g) * 1000).unwrap();
        assert!(seen_gsi1sk(&early, &device()) < since);
    }

    #[test]
    fn index_and_partition_keys_parse_back() {
        let e = EventId::parse("e-1").unwrap();
        assert_eq!(
            parse_event_pk(&event_pk(&user(), &device())).unwrap(),
            (user(), device())
        );
        assert!(event_pk(&user(), &device()).starts_with(&event_pk_prefix(&user())));
        assert_eq!(
            parse_seen_gsi1sk(&device_seen_key(&at(), &device())).unwrap(),
            seen_bucket(&at(), &device())
        );
        assert_eq!(
            parse_event_index_sk(&event_index_sk(&at(), &device(), &e)).unwrap(),
            e
        );
        for bad in [
            "USER#u",
            "USER#u#DEVICE#",
            "DEVICE#d#USER#u",
            "USER#u#DEVICE#d#x",
        ] {
            assert!(parse_event_pk(bad).is_err(), "{bad}");
        }
        for bad in ["SEEN#", "SEEN#notatime#d", "2024-04-10T10:00:00.000Z#d"] {
            assert!(parse_seen_gsi1sk(bad).is_err(), "{bad}");
        }
        assert!(parse_event_index_sk("no-separator").is_err());
    }

    #[test]
    fn type_windows_are_whole_hours_of_the_events_day() {
        let t = |text| Timestamp::parse_field("at", text).unwrap();
        assert_eq!(
            type_window(&t("2024-04-10T10:59:59.999Z")),
            t("2024-04-10T10:00:00Z")
        );
        assert_eq!(
            type_window(&t("2024-04-10T00:00:00Z")),
            t("2024-04-10T00:00:00Z")
        );
        assert_eq!(type_window(&t("2024-04-10T23:30:00Z")).day(), day());
    }

    #[test]
    fn index_keys_place_items_by_their_own_fields() {
        let shards = ShardCounts {
            searchable: crate::model::shard::parse_searchable("alarm:5", 8).unwrap(),
            ..ShardCounts::default()
        };
        let alarm = EventType::parse("alarm").unwrap();
        let e = EventId::parse("e-1").unwrap();
        let keys = IndexKeys::event(&user(), &device(), &alarm, &at(), &e, &shards);
        assert_eq!(
            keys.gsi1pk.as_deref(),
            Some("DEVICETYPE#u-1#thermo-1#alarm"),
            "a searchable event is indexed under its own device and type"
        );
        assert_eq!(keys.attributes().count(), 2, "GSI1 only, never GSI2");
        // Its window's mark is what lands on the type's shared partitions.
        let window = type_window(&at());
        let mark = IndexKeys::type_mark(&user(), &device(), &alarm, &window, &shards);
        let gsi1pk = mark.gsi1pk.clone().unwrap();
        assert!(gsi1pk.starts_with("TYPE#alarm#2024-04-10#"), "{gsi1pk}");
        let shard: u16 = gsi1pk.rsplit('#').next().unwrap().parse().unwrap();
        assert!(shard < 5, "the type's own shard count");
        assert_eq!(
            parse_type_mark_gsi1sk(mark.gsi1sk.as_deref().unwrap()).unwrap(),
            (window, user(), device())
        );
        let temperature = EventType::parse("temperature").unwrap();
        let telemetry = IndexKeys::event(&user(), &device(), &temperature, &at(), &e, &shards);
        assert_eq!(
            telemetry.attributes().count(),
            0,
            "a type operators do not search is in no index"
        );
        let never_seen = IndexKeys::device_state(DeviceStatus::Active, &device(), None, &shards);
        let names: Vec<&str> = never_seen.attributes().map(|(n, _)| n.name()).collect();
        assert_eq!(
            names,
            ["GSI1PK"],
            "a device is on GSI1's SEEN range only once seen"
        );
        // Active devices spread over their own (larger) count, other statuses over theirs.
        let active: std::collections::BTreeSet<_> = (0..2000)
            .map(|i| {
                status_shard(
                    &DeviceId::parse(format!("m-{i}")).unwrap(),
                    DeviceStatus::Active,
                    &shards,
                )
            })
            .collect();
        assert_eq!(active.len(), usize::from(shards.active_status));
        assert!(status_shard(&device(), DeviceStatus::Inactive, &shards) < shards.status);
    }

    #[test]
    fn placement_fills_the_newest_half_and_never_moves() {
        assert_eq!(placement(&device(), 1), 0);
        for i in 0..500 {
            let d = DeviceId::parse(format!("meter-{i}")).unwrap();
            let p = placement(&d, 8);
            assert!((4..8).contains(&p), "{p}");
            assert_eq!(placement(&d, 8), p, "stable");
        }
        assert_eq!(placement(&device(), 2), 1);
    }

    #[test]
    fn user_partition_range_holds_devices_and_profile_but_not_tags() {
        // The dashboard reads SK BETWEEN 'DEVICE#' AND 'PROFILE': every device and the profile,
        // never a tag link (and events live in their own partitions).
        let lo = DEVICE_PREFIX;
        let hi = PROFILE_SK;
        for sk in [
            device_sk(&device()),
            state_sk(&device()),
            FLEET_SK.to_string(),
            device_sk(&DeviceId::parse("zzz").unwrap()),
        ] {
            assert!(lo <= sk.as_str() && sk.as_str() <= hi, "{sk}");
        }
        let tag = tag_link_sk(&Tag::parse("a").unwrap(), &device());
        assert!(tag.as_str() > hi);
    }

    #[test]
    fn rejects_foreign_and_malformed_keys() {
        for (pk, sk) in [
            ("USER#a#b", "PROFILE"),
            ("USER#", "PROFILE"),
            ("USER#u", "DEVICE#"),
            ("USER#u", "DEVICE#a#b"),
            ("DEVICE#d", "PROFILE"),
            ("USER#u#DEVICE#d", "EVENT#notatime#e"),
            ("USER#u#SHARD#0", "DEVICE#d#STATE"),
            ("USER#u#SHARD#01", "DEVICE#d#STATE"),
            ("USER#u#SHARD#x", "DEVICE#d#STATE"),
            ("USER#u", "DEVICE#d#STATUS"),
            ("REPORT#2024-02-30", "REPORT"),
            ("ANALYTICS#2024-02-01", "SEGMENT#7"),
            ("ANALYTICS#2024-02-01#7", "CHECKPOINT"),
            ("ANALYTICS#2024-02-01#+007", "CHECKPOINT"),
            ("PURGE#u", "PURGE"),
            ("OTHER#x", "Y"),
        ] {
            assert!(ItemKey::parse(pk, sk).is_err(), "{pk} / {sk}");
        }
    }
}

mod key_templates {
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
        assert_eq!(EntityType::key_templates().count(), 19);
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
}

mod items {
    use crate::model::alarm::severity::Severity;
    use crate::model::alarm::status::{AlarmReading, AlarmState};
    use crate::model::entities::alarm::AlarmItem;
    use crate::model::entities::device::DeviceItem;
    use crate::model::entities::device_state::DeviceStateItem;
    use crate::model::entities::event::EventItem;
    use crate::model::entities::fleet::FleetItem;
    use crate::model::entities::open_alarm::OpenAlarmItem;
    use crate::model::entities::profile::ProfileItem;
    use crate::model::entities::purge_marker::PurgeMarkerItem;
    use crate::model::entities::registration::RegistrationItem;
    use crate::model::entities::released_registration::ReleasedRegistrationItem;
    use crate::model::entities::rule_set::RuleSetItem;
    use crate::model::entities::tag_link::TagLinkItem;
    use crate::model::entities::type_mark::TypeMarkItem;
    use crate::model::entities::{Entity, ItemKey};
    use crate::model::expression::Attribute;
    use crate::model::ids::{DeviceId, DeviceType, EventId, EventType, Tag, UserId};
    use crate::model::readings::{EventValue, StoredEvent, StoredReading};
    use crate::model::schema::{Item, ENTITY_TYPE};
    use crate::model::shard::ShardCounts;
    use crate::model::status::DeviceStatus;
    use crate::model::timestamp::Timestamp;
    use crate::model::twin::TwinVersions;
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::collections::{BTreeMap, BTreeSet};

    /// Every attribute an entity declares is one serde stores, and every one serde stores
    /// (beside the keys and `entityType`) is declared: expressions name only real attributes.
    #[test]
    fn declared_attributes_are_exactly_the_stored_ones() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let user = UserId::parse("u").unwrap();
        let device = DeviceId::parse("d").unwrap();
        let kind = DeviceType::parse("thermostat").unwrap();
        let tag = Tag::parse("home").unwrap();
        let shards = ShardCounts::default();
        let stored = |item: Item| -> BTreeSet<String> {
            let keys = crate::model::schema::KEY_ATTRIBUTES.map(|a| a.name());
            item.into_keys()
                .filter(|n| !keys.contains(&n.as_str()) && n != ENTITY_TYPE.name())
                .collect()
        };
        let declared = |names: &[Attribute]| {
            names
                .iter()
                .map(|a| a.name().to_string())
                .collect::<BTreeSet<_>>()
        };
        let reading = AlarmReading {
            id: EventId::parse("e").unwrap(),
            event_type: EventType::parse("temperature").unwrap(),
            value: EventValue::Number(90.0),
            at,
        };
        let alarm = AlarmItem {
            user_id: user.clone(),
            device_id: device.clone(),
            partition: 0,
            device_name: "K".into(),
            source: "r00000000000000ff".into(),
            rule_name: Some("hot".into()),
            severity: Severity::Major,
            state: AlarmState::Acknowledged,
            raised_at: at,
            cleared_at: Some(at),
            acknowledged_at: Some(at),
            reading: Some(reading.clone()),
            clear_reading: Some(reading),
            last_seen: Some(at),
            remind_every_seconds: Some(600),
            remind_at: Some(at),
            reminders: 1,
            ttl: Some(1),
        };
        let cases: Vec<(&str, Item, &[Attribute])> = vec![
            (
                "profile",
                ProfileItem {
                    user_id: user.clone(),
                    name: Some("A".into()),
                    email: Some("a@example.com".into()),
                    created_at: at,
                    updated_at: at,
                }
                .to_item(&shards)
                .unwrap(),
                ProfileItem::ATTRIBUTES,
            ),
            (
                "device",
                DeviceItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    name: "K".into(),
                    device_type: kind.clone(),
                    status: DeviceStatus::Active,
                    tags: vec![tag.clone()],
                    version: 1,
                    sync_version: 1,
                    linked_tags: vec![tag.clone()],
                    partition: 0,
                    created_at: at,
                    updated_at: at,
                    deleting_at: Some(at),
                    report_every_seconds: Some(60),
                    offline_detection: crate::model::offline::OfflineDetection::Tight,
                }
                .to_item(&shards)
                .unwrap(),
                DeviceItem::ATTRIBUTES,
            ),
            (
                "fleet",
                FleetItem {
                    user_id: user.clone(),
                    partitions: 1,
                    devices: 1,
                }
                .to_item(&shards)
                .unwrap(),
                FleetItem::ATTRIBUTES,
            ),
            (
                "state",
                DeviceStateItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    partition: 0,
                    status: DeviceStatus::Active,
                    name: "K".into(),
                    device_type: kind.clone(),
                    last_seen: Some(at),
                    latest: BTreeMap::new(),
                    recent: Vec::new(),
                    ingest_seq: 1,
                    device_version: 1,
                    twin: TwinVersions {
                        desired_version: 2,
                        reported_version: 1,
                        command_seq: 3,
                        commands_done: 2,
                    },
                    tags: vec![Tag::parse("home").unwrap()],
                    alarms: BTreeMap::from([(
                        "offline".to_string(),
                        crate::model::alarm::status::AlarmStatus::default(),
                    )]),
                    report_every_seconds: Some(60),
                    offline_detection: crate::model::offline::OfflineDetection::Tight,
                    learned_every_seconds: Some(61),
                    learned_jitter_seconds: Some(2),
                    indexed_due: None,
                }
                .to_item(&shards)
                .unwrap(),
                DeviceStateItem::ATTRIBUTES,
            ),
            (
                "tag link",
                TagLinkItem {
                    user_id: user.clone(),
                    tag: tag.clone(),
                    device_id: device.clone(),
                    name: "K".into(),
                    device_type: kind.clone(),
                }
                .to_item(&shards)
                .unwrap(),
                TagLinkItem::ATTRIBUTES,
            ),
            (
                "registration",
                RegistrationItem {
                    device_id: device.clone(),
                    user_id: user.clone(),
                    token_sha256: "x".into(),
                    previous_token_sha256: Some("y".into()),
                    previous_token_until: Some(at),
                    revoked_at: Some(at),
                    device_name: "K".into(),
                    device_type: kind.clone(),
                    partition: 0,
                    created_at: at,
                }
                .to_item(&shards)
                .unwrap(),
                RegistrationItem::ATTRIBUTES,
            ),
            (
                "released registration",
                ReleasedRegistrationItem::new(device.clone(), at)
                    .to_item(&shards)
                    .unwrap(),
                ReleasedRegistrationItem::ATTRIBUTES,
            ),
            (
                "event",
                EventItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    id: EventId::parse("e").unwrap(),
                    event_type: EventType::parse("alarm").unwrap(),
                    value: EventValue::Number(1.0),
                    at,
                    device_name: "K".into(),
                    device_type: kind.clone(),
                    ttl: 1,
                }
                .to_item(&shards)
                .unwrap(),
                EventItem::ATTRIBUTES,
            ),
            (
                "type mark",
                TypeMarkItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    event_type: EventType::parse("alarm").unwrap(),
                    window: at,
                    device_name: "K".into(),
                    ttl: 1,
                }
                .to_item(&shards)
                .unwrap(),
                TypeMarkItem::ATTRIBUTES,
            ),
            (
                "purge marker",
                PurgeMarkerItem {
                    user_id: user.clone(),
                    device_id: device.clone(),
                    deleted_at: at,
                }
                .to_item(&shards)
                .unwrap(),
                PurgeMarkerItem::ATTRIBUTES,
            ),
            (
                "rule set",
                RuleSetItem {
                    user_id: user.clone(),
                    rules: BTreeMap::new(),
                    version: 1,
                }
                .to_item(&shards)
                .unwrap(),
                RuleSetItem::ATTRIBUTES,
            ),
            (
                "alarm",
                alarm.to_item(&shards).unwrap(),
                AlarmItem::ATTRIBUTES,
            ),
            (
                "open alarm",
                OpenAlarmItem::of(&alarm).to_item(&shards).unwrap(),
                OpenAlarmItem::ATTRIBUTES,
            ),
        ];
        let mut all_declared = BTreeSet::new();
        for (entity, item, names) in cases {
            assert_eq!(stored(item), declared(names), "{entity}");
            all_declared.extend(declared(names));
        }
        // What the indexes project is what some entity stores.
        for index in crate::model::schema::INDEXES {
            for projected in index.projected {
                assert!(
                    *projected == ENTITY_TYPE || all_declared.contains(projected.name()),
                    "{} projects {projected}, which no entity declares",
                    index.name
                );
            }
        }
    }

    #[test]
    fn device_item_round_trips_through_dynamodb_attributes() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let item = DeviceItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            name: "Kitchen".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            status: DeviceStatus::Active,
            tags: vec![Tag::parse("home").unwrap()],
            version: 1,
            sync_version: 1,
            linked_tags: vec![Tag::parse("home").unwrap()],
            partition: 3,
            created_at: at,
            updated_at: at,
            deleting_at: None,
            report_every_seconds: None,
            offline_detection: Default::default(),
        };
        let shards = ShardCounts::default();
        let attrs = item.to_item(&shards).unwrap();
        assert_eq!(attrs["entityType"], AttributeValue::S("device".into()));
        assert_eq!(attrs["type"], AttributeValue::S("thermostat".into()));
        assert_eq!(attrs["version"], AttributeValue::N("1".into()));
        assert!(
            !attrs.contains_key("GSI1PK"),
            "the status index is on the live state"
        );
        let key = ItemKey::of(&attrs).unwrap();
        assert_eq!(key, item.item_key(), "the stored key is the derived one");
        let back = DeviceItem::from_item(attrs.clone()).unwrap();
        assert_eq!(back, item);
        // Another type's item is refused, not misread.
        assert!(ProfileItem::from_item(attrs).is_err());
    }

    #[test]
    fn device_state_reads_its_owner_device_and_shard_back_from_its_key() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let state = DeviceStateItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            partition: 5,
            status: DeviceStatus::Active,
            name: "Kitchen".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
            last_seen: Some(at),
            latest: BTreeMap::from([(
                "temperature".to_string(),
                StoredReading(at.epoch_millis(), EventValue::Number(21.5)),
            )]),
            recent: vec![StoredEvent(
                at.epoch_millis(),
                EventId::parse("e").unwrap(),
                EventType::parse("door").unwrap(),
                EventValue::Flag(true),
            )],
            ingest_seq: 4,
            device_version: 2,
            twin: TwinVersions::default(),
            tags: Vec::new(),
            alarms: BTreeMap::new(),
            report_every_seconds: None,
            offline_detection: Default::default(),
            learned_every_seconds: None,
            learned_jitter_seconds: None,
            indexed_due: None,
        };
        let shards = ShardCounts::default();
        let attrs = state.to_item(&shards).unwrap();
        for stored_once in ["userId", "deviceId", "shard"] {
            assert!(
                !attrs.contains_key(stored_once),
                "{stored_once} is in the key"
            );
        }
        assert_eq!(attrs["PK"], AttributeValue::S("USER#u#SHARD#5".into()));
        let index = state.index_keys(&shards);
        assert_eq!(
            attrs["GSI1PK"].as_s().unwrap(),
            index.gsi1pk.as_deref().unwrap()
        );
        assert_eq!(
            attrs["GSI1SK"].as_s().unwrap(),
            index.gsi1sk.as_deref().unwrap()
        );
        assert_eq!(DeviceStateItem::from_item(attrs).unwrap(), state);
        assert_eq!(state.recent[0].recent_event().at, at);
        assert_eq!(state.latest["temperature"].reading().at, at);
        let never_seen = DeviceStateItem {
            last_seen: None,
            ..state
        }
        .to_item(&shards)
        .unwrap();
        assert!(never_seen.contains_key("GSI1PK"));
        assert!(!never_seen.contains_key("GSI1SK"), "sparse until seen");
    }

    #[test]
    fn a_tag_link_reads_its_owner_back_from_its_key() {
        let link = TagLinkItem {
            user_id: UserId::parse("u").unwrap(),
            tag: Tag::parse("home").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            name: "Kitchen".into(),
            device_type: DeviceType::parse("thermostat").unwrap(),
        };
        let attrs = link.to_item(&ShardCounts::default()).unwrap();
        assert!(
            !attrs.contains_key("userId"),
            "the owner is stored once, in PK"
        );
        assert_eq!(ItemKey::of(&attrs).unwrap(), link.item_key());
        assert_eq!(TagLinkItem::from_item(attrs).unwrap(), link);
    }

    #[test]
    fn event_values_keep_their_json_type() {
        for (json, expected) in [
            ("21.5", EventValue::Number(21.5)),
            ("\"open\"", EventValue::Text("open".into())),
            ("true", EventValue::Flag(true)),
        ] {
            let v: EventValue = serde_json::from_str(json).unwrap();
            assert_eq!(v, expected);
            let attr: AttributeValue = serde_dynamo::to_attribute_value(&v).unwrap();
            let back: EventValue = serde_dynamo::from_attribute_value(attr).unwrap();
            assert_eq!(back, expected);
        }
        assert!(serde_json::from_str::<EventValue>("[1]").is_err());
        assert!(serde_json::from_str::<EventValue>("null").is_err());
    }

    #[test]
    fn status_parses_only_known_values() {
        assert_eq!(
            DeviceStatus::parse_field("status", "maintenance").unwrap(),
            DeviceStatus::Maintenance
        );
        let err = DeviceStatus::parse_field("status", "broken").unwrap_err();
        assert_eq!(err.field, "status");
    }
}

mod twin_items {
    use crate::model::entities::command::CommandItem;
    use crate::model::entities::desired_state::DesiredStateItem;
    use crate::model::entities::reported_state::ReportedStateItem;
    use crate::model::entities::rollout::RolloutItem;
    use crate::model::entities::running_rollout::RunningRolloutItem;
    use crate::model::entities::Entity;
    use crate::model::expression::Attribute;
    use crate::model::ids::{CommandName, DeviceId, RolloutId, Tag, UserId};
    use crate::model::schema::{Item, ENTITY_TYPE, KEY_ATTRIBUTES};
    use crate::model::shard::ShardCounts;
    use crate::model::timestamp::Timestamp;
    use crate::model::twin::*;
    use std::collections::BTreeSet;

    #[test]
    fn command_ids_round_trip_and_expiry_is_read_not_stored() {
        assert_eq!(
            parse_command_id("acks[0].commandId", &command_id(7)).unwrap(),
            7
        );
        for bad in ["7", "cmd-", "cmd-0", "cmd-x", "cmd-12345678901", "CMD-1"] {
            assert!(parse_command_id("f", bad).is_err(), "{bad}");
        }
        let at = |s: &str| Timestamp::parse_field("at", s).unwrap();
        let command = CommandItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            seq: 1,
            name: CommandName::parse("reboot").unwrap(),
            parameters: "{}".into(),
            status: CommandStatus::Delivered,
            created_at: at("2024-04-10T10:00:00Z"),
            expires_at: at("2024-04-10T11:00:00Z"),
            delivered_at: None,
            finished_at: None,
            result: None,
            ttl: 0,
        };
        assert_eq!(
            command.status_at(at("2024-04-10T10:59:59Z")),
            CommandStatus::Delivered
        );
        assert_eq!(
            command.status_at(at("2024-04-10T11:00:00Z")),
            CommandStatus::Expired
        );
    }

    #[test]
    fn declared_attributes_are_exactly_the_stored_ones_and_keys_read_back() {
        let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
        let user = UserId::parse("u").unwrap();
        let device = DeviceId::parse("d").unwrap();
        let rollout = RolloutId::parse("r-1").unwrap();
        let shards = ShardCounts::default();
        let stored = |item: &Item| -> BTreeSet<String> {
            let keys = KEY_ATTRIBUTES.map(|a| a.name());
            item.keys()
                .filter(|n| !keys.contains(&n.as_str()) && *n != ENTITY_TYPE.name())
                .cloned()
                .collect()
        };
        let declared = |names: &[Attribute]| {
            names
                .iter()
                .map(|a| a.name().to_string())
                .collect::<BTreeSet<_>>()
        };
        let desired = DesiredStateItem {
            user_id: user.clone(),
            device_id: device.clone(),
            document: "{}".into(),
            version: 1,
            updated_at: at,
        };
        let item = desired.to_item(&shards).unwrap();
        assert_eq!(stored(&item), declared(DesiredStateItem::ATTRIBUTES));
        assert_eq!(DesiredStateItem::from_item(item).unwrap(), desired);
        let reported = ReportedStateItem {
            user_id: user.clone(),
            device_id: device.clone(),
            document: "{}".into(),
            version: 1,
            reported_at: at,
        };
        let item = reported.to_item(&shards).unwrap();
        assert_eq!(stored(&item), declared(ReportedStateItem::ATTRIBUTES));
        assert_eq!(ReportedStateItem::from_item(item).unwrap(), reported);
        let command = CommandItem {
            user_id: user.clone(),
            device_id: device.clone(),
            seq: 3,
            name: CommandName::parse("reboot").unwrap(),
            parameters: "{}".into(),
            status: CommandStatus::Succeeded,
            created_at: at,
            expires_at: at,
            delivered_at: Some(at),
            finished_at: Some(at),
            result: Some("{}".into()),
            ttl: 1,
        };
        let item = command.to_item(&shards).unwrap();
        assert_eq!(stored(&item), declared(CommandItem::ATTRIBUTES));
        assert_eq!(CommandItem::from_item(item).unwrap(), command);
        let rollout_item = RolloutItem {
            user_id: user.clone(),
            rollout_id: rollout.clone(),
            target: RolloutTarget::Tag(Tag::parse("meters").unwrap()),
            patch: "{}".into(),
            status: RolloutStatus::Done,
            position: Some(device.clone()),
            devices_updated: 2,
            devices_failed: 1,
            failures: vec![RolloutFailure {
                device_id: device.clone(),
                reason: "too large".into(),
            }],
            created_at: at,
            finished_at: Some(at),
        };
        let item = rollout_item.to_item(&shards).unwrap();
        assert_eq!(stored(&item), declared(RolloutItem::ATTRIBUTES));
        assert_eq!(RolloutItem::from_item(item).unwrap(), rollout_item);
        let running = RunningRolloutItem {
            user_id: user,
            rollout_id: rollout,
        };
        let item = running.to_item(&shards).unwrap();
        assert_eq!(stored(&item), declared(RunningRolloutItem::ATTRIBUTES));
        assert_eq!(RunningRolloutItem::from_item(item).unwrap(), running);
    }
}
