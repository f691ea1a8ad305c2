//! Every key shape round-trips, has its documented spelling and rejects lookalikes.

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
        ItemKey::RolloutSlots { user: user() },
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
