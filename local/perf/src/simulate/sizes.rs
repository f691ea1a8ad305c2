//! The real items of a profile (`shared::model::entities`), serialized exactly as stored, and
//! their sizes by DynamoDB's rules.

use shared::model::alarm::status::AlarmState;
use shared::model::entities::alarm::AlarmItem;
use shared::model::entities::desired_state::DesiredStateItem;
use shared::model::entities::device::DeviceItem;
use shared::model::entities::device_state::DeviceStateItem;
use shared::model::entities::event::EventItem;
use shared::model::entities::open_alarm::OpenAlarmItem;
use shared::model::entities::profile::ProfileItem;
use shared::model::entities::registration::RegistrationItem;
use shared::model::entities::series::SeriesItem;
use shared::model::entities::tag_link::TagLinkItem;
use shared::model::entities::type_mark::{type_window, TypeMarkItem};
use shared::model::entities::Entity;
use shared::model::ids::{DeviceId, DeviceType, EventId, EventType, Tag, UserId};
use shared::model::offline::OFFLINE_SEVERITY;
use shared::model::readings::derive_event_id;
use shared::model::readings::{EventValue, StoredEvent, StoredReading};
use shared::model::schema::INDEXES;
use shared::model::series::{five_minute_buckets, Buckets, Resolution};
use shared::model::shard::ShardCounts;
use shared::model::status::DeviceStatus;
use shared::model::timestamp::{Day, Timestamp};
use shared::ops::ingest::RECENT_EVENTS;

/// Events an event-list read returns (the API's default page).
pub const EVENT_PAGE: f64 = 50.0;

/// A registration stamp as ingest writes it on events and summary items (`reg`: a
/// registration's `createdAt` in epoch milliseconds, 13 digits in this century).
const REGISTRATION_STAMP: i64 = 1_790_000_000_000;

use super::fleet::{device_id, user_id};
use super::profile::Profile;
use fleet_testkit::capacity::{index_entry, item_size, Item};

/// One event type's sizes: (type, base item, GSI1 entry, GSI2 entry), bytes.
pub type EventSize = (EventType, u64, u64, u64);

/// Sizes of the real items of one profile, as stored (serde_dynamo), in bytes.
#[derive(Clone, Debug)]
pub struct ItemSizes {
    /// Per event type: (type, base item, GSI1 entry, GSI2 entry).
    pub events: Vec<EventSize>,
    /// A device's live state (`latest`, `recent`, `lastSeen`), bytes.
    pub state: u64,
    /// That live state, as stored (what a firmware rollout marks).
    pub state_item: DeviceStateItem,
    /// The live state's GSI1 entry (`STATUS#`/`SEEN#`).
    pub state_gsi1: u64,
    /// The device item (what its owner set), bytes.
    pub device_item: u64,
    /// A profile.
    pub profile: u64,
    /// A registration.
    pub registration: u64,
    /// A tag link.
    pub tag_link: u64,
    /// A type mark (one per device, searchable type and window), bytes.
    pub type_mark: u64,
    /// Its GSI1 entry (`TYPE#{type}#{day}#{shard}`).
    pub type_mark_gsi1: u64,
    /// A desired (or reported) document of a few settings, or a command, bytes.
    pub twin_document: u64,
    /// The live state's GSI3 due entry (`DUE#{shard}`, offline detection).
    pub state_gsi3: u64,
    /// An offline alarm item (its history entry), bytes.
    pub offline_alarm: u64,
    /// Its GSI3 entry in its owner's list (`ALARMS#{user}#{partition}`).
    pub offline_alarm_gsi3: u64,
    /// Its open-alarm pointer, bytes.
    pub open_pointer: u64,
    /// The pointer's GSI3 entry (`OPEN#{severity}#{shard}`).
    pub open_pointer_gsi3: u64,
    /// Summaries (issue 32) of a type read every minute: a 5-minute block item (24 buckets of
    /// 5 readings), a day item (24 hourly buckets), a month item (31 daily buckets), bytes.
    pub series_items: [u64; 3],
    /// Bytes a 5-minute bucket adds to the live state's `series` attribute: of 5 readings
    /// (a type read every minute), of one reading (every 5 minutes or slower).
    pub series_bucket_bytes: [f64; 2],
}

fn to_item(entity: &impl Entity, shards: &ShardCounts) -> Item {
    entity.to_item(shards).expect("items serialize")
}

/// The event item of `owner`'s `device` of type `t` read `at` (a reading of `21.5`), as
/// ingestion stores it: what the simulator sizes and what a device move copies.
pub fn event_item(
    owner: &UserId,
    device: &DeviceId,
    t: &EventType,
    at: Timestamp,
    shards: &ShardCounts,
) -> Item {
    let value = EventValue::Number(21.5);
    to_item(
        &EventItem {
            user_id: owner.clone(),
            device_id: device.clone(),
            id: derive_event_id(t, &value, &at),
            event_type: t.clone(),
            value,
            at,
            device_name: "Kitchen thermostat".to_string(),
            device_type: DeviceType::parse("thermostat").expect("valid"),
            ttl: at.epoch_seconds() + 90 * 86_400,
            registered_at: Some(REGISTRATION_STAMP),
        },
        shards,
    )
}

/// The type mark of `owner`'s `device` for type `t` in the window holding `at`.
pub fn type_mark_item(
    owner: &UserId,
    device: &DeviceId,
    t: &EventType,
    at: Timestamp,
    shards: &ShardCounts,
) -> Item {
    to_item(
        &TypeMarkItem {
            user_id: owner.clone(),
            device_id: device.clone(),
            event_type: t.clone(),
            window: type_window(&at),
            device_name: "Kitchen thermostat".to_string(),
            ttl: at.epoch_seconds() + 90 * 86_400,
        },
        shards,
    )
}

impl ItemSizes {
    /// Builds one of each item the way the operations store them, for a typical user and
    /// device of the profile, with numeric readings of `21.5`.
    pub fn of(profile: &Profile, shards: ShardCounts, day: &Day) -> Self {
        let user = user_id(0);
        let device = device_id(0, 0);
        let at = day.start().plus_seconds(12 * 3600);
        let value = EventValue::Number(21.5);
        let ttl = at.epoch_seconds() + 90 * 86_400;
        let name = "Kitchen thermostat".to_string();
        let kind = DeviceType::parse("thermostat").expect("valid");
        let event_item = |t: &EventType, id: &EventId| EventItem {
            user_id: user.clone(),
            device_id: device.clone(),
            id: id.clone(),
            event_type: t.clone(),
            value: value.clone(),
            at,
            device_name: name.clone(),
            device_type: kind.clone(),
            ttl,
            registered_at: Some(REGISTRATION_STAMP),
        };
        let types = profile.type_shares();
        let events = types
            .iter()
            .map(|(t, _)| {
                let id = derive_event_id(t, &value, &at);
                let item = to_item(&event_item(t, &id), &shards);
                let gsi = |i: usize| index_entry(&item, &INDEXES[i]).map_or(0, |e| item_size(&e));
                (t.clone(), item_size(&item), gsi(0), gsi(1))
            })
            .collect();
        // The live state ingestion keeps: the latest reading of every type and the 10 newest
        // events (types in turn, derived ids as devices that send no id get).
        let latest = types
            .iter()
            .map(|(t, _)| {
                (
                    t.to_string(),
                    StoredReading(at.epoch_millis(), value.clone()),
                )
            })
            .collect();
        let recent = (0..RECENT_EVENTS)
            .map(|i| {
                let t = types[i % types.len()].0.clone();
                let at = at.plus_seconds(-(i as i64) * 60);
                StoredEvent(
                    at.epoch_millis(),
                    derive_event_id(&t, &value, &at),
                    t,
                    value.clone(),
                )
            })
            .collect();
        let mark_type = EventType::parse("fault").expect("valid");
        let type_mark = to_item(
            &TypeMarkItem {
                user_id: user.clone(),
                device_id: device.clone(),
                event_type: mark_type,
                window: type_window(&at),
                device_name: name.clone(),
                ttl,
            },
            &shards,
        );
        let type_mark_gsi1 = index_entry(&type_mark, &INDEXES[0]).map_or(0, |e| item_size(&e));
        let tag = Tag::parse("home").expect("valid");
        let device_item = DeviceItem {
            user_id: user.clone(),
            device_id: device.clone(),
            name: name.clone(),
            device_type: kind.clone(),
            status: DeviceStatus::Active,
            tags: vec![tag.clone()],
            version: 3,
            sync_version: 1,
            linked_tags: vec![tag.clone()],
            partition: 0,
            created_at: at,
            updated_at: at,
            deleting_at: None,
            report_every_seconds: None,
            offline_detection: Default::default(),
        };
        let state = DeviceStateItem {
            user_id: user.clone(),
            device_id: device.clone(),
            partition: 0,
            status: DeviceStatus::Active,
            name: name.clone(),
            device_type: kind.clone(),
            last_seen: Some(at),
            latest,
            recent,
            ingest_seq: 48_213,
            device_version: 3,
            twin: Default::default(),
            // The live state carries the device's tags (alarm rules scoped by tag).
            tags: device_item.tags.clone(),
            alarms: Default::default(),
            report_every_seconds: None,
            offline_detection: Default::default(),
            // A learned rhythm (offline detection): every reporting device carries one.
            learned_every_seconds: Some(300),
            learned_jitter_seconds: Some(12),
            indexed_due: None,
            series: Default::default(),
            moving_from: None,
            firmware: None,
            firmware_seq: 0,
        };
        let state_attrs = to_item(&state, &shards);
        let state_gsi1 = index_entry(&state_attrs, &INDEXES[0]).map_or(0, |e| item_size(&e));
        let state_gsi3 = index_entry(&state_attrs, &INDEXES[2]).map_or(0, |e| item_size(&e));
        let offline_alarm = AlarmItem {
            user_id: user.clone(),
            device_id: device.clone(),
            partition: 0,
            device_name: name.clone(),
            source: "offline".into(),
            rule_name: None,
            severity: OFFLINE_SEVERITY,
            state: AlarmState::Active,
            raised_at: at,
            cleared_at: None,
            acknowledged_at: None,
            reading: None,
            clear_reading: None,
            last_seen: Some(at),
            remind_every_seconds: None,
            remind_at: None,
            reminders: 0,
            ttl: None,
        };
        let pointer = to_item(&OpenAlarmItem::of(&offline_alarm), &shards);
        let offline_alarm = to_item(&offline_alarm, &shards);
        let gsi3 = |item: &Item| index_entry(item, &INDEXES[2]).map_or(0, |e| item_size(&e));
        let profile_item = ProfileItem {
            user_id: user.clone(),
            name: Some("Ada Lovelace".into()),
            email: Some("ada.lovelace@example.com".into()),
            created_at: at,
            updated_at: at,
        };
        let registration = RegistrationItem {
            device_id: device.clone(),
            user_id: user.clone(),
            token_sha256: "0".repeat(64),
            device_name: name.clone(),
            device_type: kind.clone(),
            partition: 0,
            created_at: at,
            previous_token_sha256: None,
            previous_token_until: None,
            revoked_at: None,
            raw_retention_days: None,
            retention_version: None,
        };
        // A desired document of a few settings (a reported one or a command is about as large).
        let twin_document = item_size(&to_item(
            &DesiredStateItem {
                user_id: user.clone(),
                device_id: device.clone(),
                document: r#"{"reportIntervalSeconds":300,"setpoint":{"day":21.5,"night":18}}"#
                    .into(),
                version: 3,
                updated_at: at,
            },
            &shards,
        ));
        let tag_link = TagLinkItem {
            user_id: user.clone(),
            tag,
            device_id: device,
            name,
            device_type: kind,
        };
        Self {
            events,
            state: item_size(&state_attrs),
            state_item: state.clone(),
            device_item: item_size(&to_item(&device_item, &shards)),
            state_gsi1,
            profile: item_size(&to_item(&profile_item, &shards)),
            registration: item_size(&to_item(&registration, &shards)),
            tag_link: item_size(&to_item(&tag_link, &shards)),
            type_mark: item_size(&type_mark),
            type_mark_gsi1,
            twin_document,
            state_gsi3,
            offline_alarm_gsi3: gsi3(&offline_alarm),
            offline_alarm: item_size(&offline_alarm),
            open_pointer_gsi3: gsi3(&pointer),
            open_pointer: item_size(&pointer),
            series_items: series_item_sizes(&user, &device_id(0, 0), day, &shards),
            series_bucket_bytes: series_bucket_bytes(day),
        }
    }
}

/// Readings of a meter: values that need a full double (the costlier stored form), `count`
/// of them per 5 minutes from `start_ms` for `buckets` buckets.
fn meter_buckets(start_ms: i64, step_ms: i64, buckets: i64, per_bucket: i64) -> Buckets {
    let values: Vec<(i64, EventValue)> = (0..buckets * per_bucket)
        .map(|i| {
            (
                start_ms + i / per_bucket * step_ms + i % per_bucket,
                EventValue::Number(20.0 + (i % 97) as f64 * 0.013),
            )
        })
        .collect();
    let fine = five_minute_buckets(values.iter().map(|(at, v)| (*at, v)));
    match step_ms {
        s if s == Resolution::FiveMinutes.millis() => fine,
        s if s == Resolution::Hour.millis() => fine.coarsen(Resolution::Hour),
        _ => fine.coarsen(Resolution::Day),
    }
}

/// The sizes of a block, a day item and a month item of a type read every minute.
fn series_item_sizes(
    user: &UserId,
    device: &DeviceId,
    day: &Day,
    shards: &ShardCounts,
) -> [u64; 3] {
    let start = day.start().epoch_millis();
    let kind = EventType::parse("temperature").expect("valid");
    let size = |resolution: Resolution, buckets: Buckets| {
        item_size(&to_item(
            &SeriesItem {
                user_id: user.clone(),
                device_id: device.clone(),
                event_type: kind.clone(),
                resolution,
                start: day.start(),
                buckets,
                ids: Default::default(),
                ttl: start / 1000,
                registered_at: Some(REGISTRATION_STAMP),
            },
            shards,
        ))
    };
    let five = Resolution::FiveMinutes.millis();
    [
        size(Resolution::FiveMinutes, meter_buckets(start, five, 24, 5)),
        size(
            Resolution::Hour,
            meter_buckets(start, Resolution::Hour.millis(), 24, 5),
        ),
        size(
            Resolution::Day,
            meter_buckets(start, Resolution::Day.millis(), 31, 5),
        ),
    ]
}

/// Bytes per 5-minute bucket in the state's open summaries: dense (5 readings) and sparse (1).
fn series_bucket_bytes(day: &Day) -> [f64; 2] {
    let start = day.start().epoch_millis();
    let five = Resolution::FiveMinutes.millis();
    [5, 1].map(|per_bucket| {
        meter_buckets(start, five, 24, per_bucket)
            .encode(Resolution::FiveMinutes)
            .len() as f64
            / 24.0
    })
}
