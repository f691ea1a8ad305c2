//! Builders and parsers for every key of the table and its indexes (DESIGN §3): the one
//! place a key is spelled, built or taken apart. Items get their keys from
//! [`crate::entity::Entity`], which calls these.
//!
//! | item | PK | SK |
//! |---|---|---|
//! | profile | `USER#{userId}` | `PROFILE` |
//! | device | `USER#{userId}` | `DEVICE#{deviceId}` |
//! | tag link | `USER#{userId}` | `TAG#{tag}#{deviceId}` |
//! | registration | `DEVICE#{deviceId}` | `REGISTRATION` |
//! | event | `USER#{userId}#DEVICE#{deviceId}` | `EVENT#{at}#{eventId}` |
//! | daily report | `REPORT#{day}` | `REPORT` |
//! | checkpoint | `ANALYTICS#{day}` | `SEGMENT#{segment}` |
//!
//! Every part is a validated type that cannot contain `#`, so parsing is unambiguous.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::config::ShardCounts;
use crate::error::ValidationError;
use crate::ids::{DeviceId, EventId, EventType, Tag, UserId};
use crate::schema::{GSI1PK, GSI1SK, GSI2PK, GSI2SK, PK, SK};
use crate::shard::shard_of;
use crate::timestamp::{Day, Timestamp};

/// Sort key of the profile item.
pub const PROFILE_SK: &str = "PROFILE";
/// Sort key of the registration item.
pub const REGISTRATION_SK: &str = "REGISTRATION";
/// Sort key of a daily report item.
pub const REPORT_SK: &str = "REPORT";
/// Sort-key prefix of device items in the user partition.
pub const DEVICE_PREFIX: &str = "DEVICE#";
/// Sort-key prefix of tag links in the user partition.
pub const TAG_PREFIX: &str = "TAG#";
/// Sort-key prefix of events in a device-event partition.
pub const EVENT_PREFIX: &str = "EVENT#";
/// Sort-key prefix of a device's GSI1 entry.
const SEEN_PREFIX: &str = "SEEN#";
/// Granularity of the `SEEN#` index key: a device's index entry moves at most once per
/// bucket, however often it reports.
pub const SEEN_GRANULARITY_SECONDS: i64 = 15 * 60;

/// A primary key (PK, SK).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PrimaryKey {
    /// Partition key value.
    pub pk: String,
    /// Sort key value.
    pub sk: String,
}

/// A DynamoDB item (or key) as the SDK holds it.
pub type Attributes = HashMap<String, AttributeValue>;

impl PrimaryKey {
    /// The key as request attributes (`PK`, `SK`).
    pub fn attributes(&self) -> Attributes {
        HashMap::from([
            (PK.to_string(), AttributeValue::S(self.pk.clone())),
            (SK.to_string(), AttributeValue::S(self.sk.clone())),
        ])
    }

    /// The primary key of a stored item (or key), if it has one.
    pub fn of(item: &Attributes) -> Option<PrimaryKey> {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        Some(PrimaryKey {
            pk: text(PK)?,
            sk: text(SK)?,
        })
    }
}

/// The item a primary key addresses, with its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ItemKey {
    /// A user's profile.
    Profile { user: UserId },
    /// A device in its owner's partition.
    Device { user: UserId, device: DeviceId },
    /// A tag link: `device` carries `tag`.
    TagLink {
        user: UserId,
        tag: Tag,
        device: DeviceId,
    },
    /// The table-wide registration of a device id (uniqueness, owner, token hash).
    Registration { device: DeviceId },
    /// One event of one device of one owner.
    Event {
        user: UserId,
        device: DeviceId,
        at: Timestamp,
        event: EventId,
    },
    /// The daily analytics report for `day`.
    Report { day: Day },
    /// One scan segment's checkpoint of the daily run for `day`.
    Checkpoint { day: Day, segment: u32 },
}

/// `USER#{userId}`: the user partition (profile, devices, tag links).
pub fn user_pk(user: &UserId) -> String {
    format!("USER#{user}")
}

/// `DEVICE#{deviceId}`: the device's sort key in its owner's partition.
pub fn device_sk(device: &DeviceId) -> String {
    format!("{DEVICE_PREFIX}{device}")
}

/// `TAG#{tag}#{deviceId}`.
pub fn tag_link_sk(tag: &Tag, device: &DeviceId) -> String {
    format!("{TAG_PREFIX}{tag}#{device}")
}

/// `TAG#{tag}#`: prefix of all tag links for `tag` in a user partition.
pub fn tag_link_prefix(tag: &Tag) -> String {
    format!("{TAG_PREFIX}{tag}#")
}

/// `DEVICE#{deviceId}`: the registration partition.
pub fn registration_pk(device: &DeviceId) -> String {
    format!("DEVICE#{device}")
}

/// `USER#{userId}#DEVICE#`: the common start of every event partition of `user`.
pub fn event_pk_prefix(user: &UserId) -> String {
    format!("USER#{user}#{DEVICE_PREFIX}")
}

/// `USER#{userId}#DEVICE#{deviceId}`: one owner's events of one device.
pub fn event_pk(user: &UserId, device: &DeviceId) -> String {
    format!("{}{device}", event_pk_prefix(user))
}

/// The owner and device of an event partition key `USER#{userId}#DEVICE#{deviceId}`.
pub fn parse_event_pk(pk: &str) -> Result<(UserId, DeviceId), ValidationError> {
    match pk.split('#').collect::<Vec<_>>().as_slice() {
        ["USER", user, "DEVICE", device] => Ok((UserId::parse(*user)?, DeviceId::parse(*device)?)),
        _ => Err(ValidationError::new(
            "key",
            format!("not an event partition: {pk}"),
        )),
    }
}

/// `EVENT#{at}#{eventId}`.
pub fn event_sk(at: &Timestamp, event: &EventId) -> String {
    format!("{EVENT_PREFIX}{at}#{event}")
}

/// `REPORT#{day}`.
pub fn report_pk(day: &Day) -> String {
    format!("REPORT#{day}")
}

/// `ANALYTICS#{day}`: the checkpoints of the daily run for `day`.
pub fn analytics_pk(day: &Day) -> String {
    format!("ANALYTICS#{day}")
}

/// `SEGMENT#{segment}`: one scan segment's checkpoint.
pub fn segment_sk(segment: u32) -> String {
    format!("SEGMENT#{segment:04}")
}

/// Device status as stored and as the API spells it.
pub use crate::items::DeviceStatus;

/// GSI1 partition key of a device: `STATUS#{status}#{shard}`.
pub fn status_gsi1pk(status: DeviceStatus, shard: u16) -> String {
    format!("STATUS#{}#{shard}", status.as_str())
}

/// The status shard of `device` (stable: a device never moves between status shards).
pub fn status_shard(device: &DeviceId, shards: &ShardCounts) -> u16 {
    shard_of(device.as_str(), shards.status)
}

/// GSI1 sort key of a device: `SEEN#{lastSeen}#{deviceId}`.
pub fn seen_gsi1sk(last_seen: &Timestamp, device: &DeviceId) -> String {
    format!("{SEEN_PREFIX}{last_seen}#{device}")
}

/// `lastSeen` rounded down to [`SEEN_GRANULARITY_SECONDS`]: what the `SEEN#` index key holds.
pub fn seen_bucket(last_seen: &Timestamp) -> Timestamp {
    let secs = last_seen.epoch_seconds();
    let floored = secs - secs.rem_euclid(SEEN_GRANULARITY_SECONDS);
    Timestamp::from_epoch_millis(floored * 1000).unwrap_or(*last_seen)
}

/// A device's GSI1 sort key for `last_seen`: its `SEEN#` bucket and id.
pub fn device_seen_key(last_seen: &Timestamp, device: &DeviceId) -> String {
    seen_gsi1sk(&seen_bucket(last_seen), device)
}

/// `SEEN#{bucket}`: the lowest GSI1 sort key of devices seen at or after `since`'s bucket.
pub fn seen_since(since: &Timestamp) -> String {
    format!("{SEEN_PREFIX}{}", seen_bucket(since))
}

/// The seen bucket of a device's GSI1 sort key `SEEN#{bucket}#{deviceId}`.
pub fn parse_seen_gsi1sk(sk: &str) -> Result<Timestamp, ValidationError> {
    let bad = || ValidationError::new("key", format!("not a SEEN key: {sk}"));
    let rest = sk.strip_prefix(SEEN_PREFIX).ok_or_else(bad)?;
    let (at, _device) = rest.split_once('#').ok_or_else(bad)?;
    Timestamp::parse_field("key", at)
}

/// GSI1 partition key of an event: `TYPE#{type}#{day}#{shard}`.
pub fn type_gsi1pk(event_type: &EventType, day: &Day, shard: u16) -> String {
    format!("TYPE#{event_type}#{day}#{shard}")
}

/// GSI2 partition key of an event: `OWNER#{userId}#{shard}`.
pub fn owner_gsi2pk(user: &UserId, shard: u16) -> String {
    format!("OWNER#{user}#{shard}")
}

/// GSI1 and GSI2 sort key of an event: `{at}#{deviceId}#{eventId}` (time order across devices).
pub fn event_index_sk(at: &Timestamp, device: &DeviceId, event: &EventId) -> String {
    format!("{at}#{device}#{event}")
}

/// The event id at the end of an index sort key `{at}#{deviceId}#{eventId}`.
pub fn parse_event_index_sk(sk: &str) -> Result<EventId, ValidationError> {
    let id = sk
        .rsplit_once('#')
        .map(|(_, id)| id)
        .ok_or_else(|| ValidationError::new("key", format!("not an event index key: {sk}")))?;
    EventId::parse(id)
}

/// The index key attributes an item carries. A pair left out keeps the item out of that
/// index (sparse indexes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexKeys {
    /// `GSI1PK`.
    pub gsi1pk: Option<String>,
    /// `GSI1SK`.
    pub gsi1sk: Option<String>,
    /// `GSI2PK`.
    pub gsi2pk: Option<String>,
    /// `GSI2SK`.
    pub gsi2sk: Option<String>,
}

impl IndexKeys {
    /// A device on GSI1: by status shard, and once seen by its `SEEN#` bucket.
    pub fn device(
        status: DeviceStatus,
        device: &DeviceId,
        last_seen: Option<&Timestamp>,
        shards: &ShardCounts,
    ) -> Self {
        IndexKeys {
            gsi1pk: Some(status_gsi1pk(status, status_shard(device, shards))),
            gsi1sk: last_seen.map(|t| device_seen_key(t, device)),
            ..IndexKeys::default()
        }
    }

    /// An event on GSI1 (by type, day and shard) and GSI2 (by owner shard), both in time
    /// order. The shard spreads each device's events, so one busy device cannot heat a shard.
    pub fn event(
        user: &UserId,
        device: &DeviceId,
        event_type: &EventType,
        at: &Timestamp,
        event: &EventId,
        shards: &ShardCounts,
    ) -> Self {
        let spread = format!("{device}#{event}");
        let sort = event_index_sk(at, device, event);
        IndexKeys {
            gsi1pk: Some(type_gsi1pk(
                event_type,
                &at.day(),
                shard_of(&spread, shards.event_type),
            )),
            gsi1sk: Some(sort.clone()),
            gsi2pk: Some(owner_gsi2pk(user, shard_of(&spread, shards.owner))),
            gsi2sk: Some(sort),
        }
    }

    /// The attributes to store.
    pub fn attributes(&self) -> impl Iterator<Item = (String, AttributeValue)> + '_ {
        [
            (GSI1PK, &self.gsi1pk),
            (GSI1SK, &self.gsi1sk),
            (GSI2PK, &self.gsi2pk),
            (GSI2SK, &self.gsi2sk),
        ]
        .into_iter()
        .filter_map(|(name, value)| {
            value
                .as_ref()
                .map(|v| (name.to_string(), AttributeValue::S(v.clone())))
        })
    }
}

impl ItemKey {
    /// The primary key of this item.
    pub fn primary_key(&self) -> PrimaryKey {
        let (pk, sk) = match self {
            ItemKey::Profile { user } => (user_pk(user), PROFILE_SK.to_string()),
            ItemKey::Device { user, device } => (user_pk(user), device_sk(device)),
            ItemKey::TagLink { user, tag, device } => (user_pk(user), tag_link_sk(tag, device)),
            ItemKey::Registration { device } => {
                (registration_pk(device), REGISTRATION_SK.to_string())
            }
            ItemKey::Event {
                user,
                device,
                at,
                event,
            } => (event_pk(user, device), event_sk(at, event)),
            ItemKey::Report { day } => (report_pk(day), REPORT_SK.to_string()),
            ItemKey::Checkpoint { day, segment } => (analytics_pk(day), segment_sk(*segment)),
        };
        PrimaryKey { pk, sk }
    }

    /// The key as request attributes (`PK`, `SK`).
    pub fn attributes(&self) -> Attributes {
        self.primary_key().attributes()
    }

    /// Parses a primary key back into the item it addresses. Rejects anything that is not
    /// exactly one of the key shapes above.
    pub fn parse(pk: &str, sk: &str) -> Result<Self, ValidationError> {
        let bad = || ValidationError::new("key", format!("not a Device Fleet key: {pk} / {sk}"));
        let pk_parts: Vec<&str> = pk.split('#').collect();
        let sk_parts: Vec<&str> = sk.split('#').collect();
        match (pk_parts.as_slice(), sk_parts.as_slice()) {
            (["USER", user], ["PROFILE"]) => Ok(ItemKey::Profile {
                user: UserId::parse(*user)?,
            }),
            (["USER", user], ["DEVICE", device]) => Ok(ItemKey::Device {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
            }),
            (["USER", user], ["TAG", tag, device]) => Ok(ItemKey::TagLink {
                user: UserId::parse(*user)?,
                tag: Tag::parse(*tag)?,
                device: DeviceId::parse(*device)?,
            }),
            (["DEVICE", device], ["REGISTRATION"]) => Ok(ItemKey::Registration {
                device: DeviceId::parse(*device)?,
            }),
            (["USER", user, "DEVICE", device], ["EVENT", at, event]) => Ok(ItemKey::Event {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
                at: Timestamp::parse_field("at", at)?,
                event: EventId::parse(*event)?,
            }),
            (["REPORT", day], ["REPORT"]) => Ok(ItemKey::Report {
                day: Day::parse_field("day", day)?,
            }),
            (["ANALYTICS", day], ["SEGMENT", segment])
                if segment.len() == 4 && segment.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Ok(ItemKey::Checkpoint {
                    day: Day::parse_field("day", day)?,
                    segment: segment.parse().map_err(|_| bad())?,
                })
            }
            _ => Err(bad()),
        }
    }

    /// The item a stored item's (or key's) `PK`/`SK` address.
    pub fn of(item: &Attributes) -> Result<Self, ValidationError> {
        let key = PrimaryKey::of(item)
            .ok_or_else(|| ValidationError::new("key", "an item without PK and SK"))?;
        Self::parse(&key.pk, &key.sk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ItemKey::Event {
                user: user(),
                device: device(),
                at: at(),
                event: EventId::parse("e-1").unwrap(),
            },
            ItemKey::Report { day: day() },
            ItemKey::Checkpoint {
                day: day(),
                segment: 7,
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
        assert_eq!(owner_gsi2pk(&user(), 1), "OWNER#u-1#1");
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
    fn seen_bucket_rounds_down_to_the_granularity() {
        let t = Timestamp::parse_field("at", "2024-04-10T10:29:59.999Z").unwrap();
        assert_eq!(seen_bucket(&t).to_string(), "2024-04-10T10:15:00.000Z");
        let t = Timestamp::parse_field("at", "2024-04-10T10:30:00Z").unwrap();
        assert_eq!(seen_bucket(&t).to_string(), "2024-04-10T10:30:00.000Z");
        assert_eq!(
            device_seen_key(&t, &device()),
            "SEEN#2024-04-10T10:30:00.000Z#thermo-1"
        );
        assert_eq!(seen_since(&t), "SEEN#2024-04-10T10:30:00.000Z");
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
            seen_bucket(&at())
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
    fn index_keys_place_items_by_their_own_fields() {
        let shards = ShardCounts {
            status: 4,
            event_type: 8,
            owner: 2,
        };
        let t = EventType::parse("temperature").unwrap();
        let e = EventId::parse("e-1").unwrap();
        let keys = IndexKeys::event(&user(), &device(), &t, &at(), &e, &shards);
        let gsi1pk = keys.gsi1pk.clone().unwrap();
        assert!(
            gsi1pk.starts_with("TYPE#temperature#2024-04-10#"),
            "{gsi1pk}"
        );
        assert!(keys.gsi2pk.clone().unwrap().starts_with("OWNER#u-1#"));
        assert_eq!(keys.gsi1sk, keys.gsi2sk);
        assert_eq!(keys.attributes().count(), 4);
        let never_seen = IndexKeys::device(DeviceStatus::Active, &device(), None, &shards);
        let names: Vec<String> = never_seen.attributes().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            ["GSI1PK"],
            "a device is on GSI1's SEEN range only once seen"
        );
    }

    #[test]
    fn user_partition_range_holds_devices_and_profile_but_not_tags() {
        // The dashboard reads SK BETWEEN 'DEVICE#' AND 'PROFILE': every device and the profile,
        // never a tag link (and events live in their own partitions).
        let lo = DEVICE_PREFIX;
        let hi = PROFILE_SK;
        for sk in [
            device_sk(&device()),
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
            ("REPORT#2024-02-30", "REPORT"),
            ("ANALYTICS#2024-02-01", "SEGMENT#7"),
            ("ANALYTICS#2024-02-01", "SEGMENT#+007"),
            ("OTHER#x", "Y"),
        ] {
            assert!(ItemKey::parse(pk, sk).is_err(), "{pk} / {sk}");
        }
    }
}

/// The key templates of one entity, for documentation (`docs/model.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    /// `entityType`.
    pub entity_type: &'static str,
    /// Partition key template.
    pub pk: &'static str,
    /// Sort key template.
    pub sk: &'static str,
    /// GSI1 partition and sort key templates, if the entity is on GSI1.
    pub gsi1: Option<(&'static str, &'static str)>,
    /// GSI2 partition and sort key templates, if the entity is on GSI2.
    pub gsi2: Option<(&'static str, &'static str)>,
}

/// Every entity's keys, as templates (a unit test checks them against the builders above).
pub const KEY_TEMPLATES: [KeyTemplate; 7] = [
    KeyTemplate {
        entity_type: "profile",
        pk: "USER#${userId}",
        sk: "PROFILE",
        gsi1: None,
        gsi2: None,
    },
    KeyTemplate {
        entity_type: "device",
        pk: "USER#${userId}",
        sk: "DEVICE#${deviceId}",
        gsi1: Some(("STATUS#${status}#${shard}", "SEEN#${lastSeen}#${deviceId}")),
        gsi2: None,
    },
    KeyTemplate {
        entity_type: "tagLink",
        pk: "USER#${userId}",
        sk: "TAG#${tag}#${deviceId}",
        gsi1: None,
        gsi2: None,
    },
    KeyTemplate {
        entity_type: "registration",
        pk: "DEVICE#${deviceId}",
        sk: "REGISTRATION",
        gsi1: None,
        gsi2: None,
    },
    KeyTemplate {
        entity_type: "event",
        pk: "USER#${userId}#DEVICE#${deviceId}",
        sk: "EVENT#${at}#${eventId}",
        gsi1: Some((
            "TYPE#${type}#${day}#${shard}",
            "${at}#${deviceId}#${eventId}",
        )),
        gsi2: Some(("OWNER#${userId}#${shard}", "${at}#${deviceId}#${eventId}")),
    },
    KeyTemplate {
        entity_type: "report",
        pk: "REPORT#${day}",
        sk: "REPORT",
        gsi1: None,
        gsi2: None,
    },
    KeyTemplate {
        entity_type: "checkpoint",
        pk: "ANALYTICS#${day}",
        sk: "SEGMENT#${segment}",
        gsi1: None,
        gsi2: None,
    },
];

#[cfg(test)]
mod template_tests {
    use super::*;

    fn fill(template: &str, values: &[(&str, &str)]) -> String {
        values
            .iter()
            .fold(template.to_string(), |t, (name, value)| {
                t.replace(&format!("${{{name}}}"), value)
            })
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
        let v = [
            ("userId", "u"),
            ("deviceId", "d"),
            ("tag", "t"),
            ("at", "2024-04-10T10:00:00.000Z"),
            ("eventId", "e"),
            ("type", "temp"),
            ("day", "2024-04-10"),
            ("shard", "3"),
            ("status", "active"),
            ("lastSeen", "2024-04-10T10:00:00.000Z"),
            ("segment", "0007"),
        ];
        let built = [
            (user_pk(&user), PROFILE_SK.to_string()),
            (user_pk(&user), device_sk(&device)),
            (user_pk(&user), tag_link_sk(&tag, &device)),
            (registration_pk(&device), REGISTRATION_SK.to_string()),
            (event_pk(&user, &device), event_sk(&at, &event)),
            (report_pk(&day), REPORT_SK.to_string()),
            (analytics_pk(&day), segment_sk(7)),
        ];
        for (t, (pk, sk)) in KEY_TEMPLATES.iter().zip(built) {
            assert_eq!(fill(t.pk, &v), pk, "{}", t.entity_type);
            assert_eq!(fill(t.sk, &v), sk, "{}", t.entity_type);
        }
        let device_t = &KEY_TEMPLATES[1];
        let (g1pk, g1sk) = device_t.gsi1.unwrap();
        assert_eq!(fill(g1pk, &v), status_gsi1pk(DeviceStatus::Active, 3));
        assert_eq!(fill(g1sk, &v), seen_gsi1sk(&at, &device));
        let event_t = &KEY_TEMPLATES[4];
        let (g1pk, g1sk) = event_t.gsi1.unwrap();
        assert_eq!(fill(g1pk, &v), type_gsi1pk(&kind, &day, 3));
        assert_eq!(fill(g1sk, &v), event_index_sk(&at, &device, &event));
        let (g2pk, _) = event_t.gsi2.unwrap();
        assert_eq!(fill(g2pk, &v), owner_gsi2pk(&user, 3));
    }
}
