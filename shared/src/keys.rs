//! Builders and parsers for every key of the table and its indexes (DESIGN §3).
//!
//! | item | PK | SK |
//! |---|---|---|
//! | profile | `USER#{userId}` | `PROFILE` |
//! | device | `USER#{userId}` | `DEVICE#{deviceId}` |
//! | tag link | `USER#{userId}` | `TAG#{tag}#{deviceId}` |
//! | registration | `DEVICE#{deviceId}` | `REGISTRATION` |
//! | event | `USER#{userId}#DEVICE#{deviceId}` | `EVENT#{at}#{eventId}` |
//! | daily report | `REPORT#{day}` | `REPORT` |
//!
//! Every part is a validated type that cannot contain `#`, so parsing is unambiguous.

use crate::error::ValidationError;
use crate::ids::{DeviceId, EventId, EventType, Tag, UserId};
use crate::timestamp::Timestamp;

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

/// A primary key (PK, SK).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PrimaryKey {
    /// Partition key value.
    pub pk: String,
    /// Sort key value.
    pub sk: String,
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
    /// The daily analytics report for `day` (`YYYY-MM-DD`).
    Report { day: String },
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

/// `USER#{userId}#DEVICE#{deviceId}`: one owner's events of one device.
pub fn event_pk(user: &UserId, device: &DeviceId) -> String {
    format!("USER#{user}#DEVICE#{device}")
}

/// `EVENT#{at}#{eventId}`.
pub fn event_sk(at: &Timestamp, event: &EventId) -> String {
    format!("{EVENT_PREFIX}{at}#{event}")
}

/// `REPORT#{day}`.
pub fn report_pk(day: &str) -> String {
    format!("REPORT#{day}")
}

/// `ANALYTICS#{day}`: the checkpoints of the daily run for `day`.
pub fn analytics_pk(day: &str) -> String {
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

/// GSI1 sort key of a device: `SEEN#{lastSeen}#{deviceId}`.
pub fn seen_gsi1sk(last_seen: &Timestamp, device: &DeviceId) -> String {
    format!("SEEN#{last_seen}#{device}")
}

/// GSI1 partition key of an event: `TYPE#{type}#{day}#{shard}`.
pub fn type_gsi1pk(event_type: &EventType, day: &str, shard: u16) -> String {
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
        };
        PrimaryKey { pk, sk }
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
            (["REPORT", day], ["REPORT"]) if is_day(day) => Ok(ItemKey::Report {
                day: (*day).to_string(),
            }),
            _ => Err(bad()),
        }
    }
}

/// Whether `day` is a `YYYY-MM-DD` calendar date.
pub fn is_day(day: &str) -> bool {
    Timestamp::parse_field("day", &format!("{day}T00:00:00Z"))
        .map(|t| t.day() == day)
        .unwrap_or(false)
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
            ItemKey::Report {
                day: "2024-04-10".into(),
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
        assert_eq!(
            type_gsi1pk(&t, "2024-04-10", 3),
            "TYPE#temperature#2024-04-10#3"
        );
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
        assert_eq!(report_pk("2024-04-10"), "REPORT#2024-04-10");
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
            (report_pk("2024-04-10"), REPORT_SK.to_string()),
            (analytics_pk("2024-04-10"), segment_sk(7)),
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
        assert_eq!(fill(g1pk, &v), type_gsi1pk(&kind, "2024-04-10", 3));
        assert_eq!(fill(g1sk, &v), event_index_sk(&at, &device, &event));
        let (g2pk, _) = event_t.gsi2.unwrap();
        assert_eq!(fill(g2pk, &v), owner_gsi2pk(&user, 3));
    }
}
