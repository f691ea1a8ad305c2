//! Every entity stores exactly the attributes it declares and reads back what it stored.

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
                raw_retention: [(kind.clone(), 30)].into(),
                retention_version: Some(2),
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
                series: crate::model::series::SeriesState(BTreeMap::from([(
                    "temp".to_string(),
                    crate::model::series::OpenSeries::starting_at(at.epoch_millis()),
                )])),
                moving_from: Some(user.clone()),
                firmware: Some(crate::model::rollout_progress::FirmwareProgress::offered(
                    crate::model::ids::RolloutId::parse("r-000001700000000-0123456789abcdef")
                        .unwrap(),
                    (
                        crate::model::firmware::FirmwareId::parse(
                            "f-000001700000000-0123456789abcdef",
                        )
                        .unwrap(),
                        "2.0.0".to_string(),
                    ),
                    1,
                    1,
                    at,
                )),
                firmware_seq: 3,
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
                raw_retention_days: Some(30),
                retention_version: Some(2),
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
                registered_at: Some(1_790_000_000_000),
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
        series: Default::default(),
        moving_from: None,
        firmware: None,
        firmware_seq: 0,
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
