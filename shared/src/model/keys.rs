//! Builders and parsers for every key of the table and its indexes (docs/design.md, "Key schema"): the one
//! place a key is spelled, built or taken apart. Items get their keys from
//! [`crate::model::entity::Entity`], which calls these.
//!
//! | item | PK | SK |
//! |---|---|---|
//! | profile | `USER#{userId}` | `PROFILE` |
//! | fleet | `USER#{userId}` | `FLEET` |
//! | device | `USER#{userId}` | `DEVICE#{deviceId}` |
//! | device state | `USER#{userId}` (shard 0) or `USER#{userId}#SHARD#{k}` | `DEVICE#{deviceId}#STATE` |
//! | tag link | `USER#{userId}` | `TAG#{tag}#{deviceId}` |
//! | registration | `DEVICE#{deviceId}` | `REGISTRATION` |
//! | event | `USER#{userId}#DEVICE#{deviceId}` | `EVENT#{at}#{eventId}` |
//! | type mark | `USER#{userId}#DEVICE#{deviceId}` | `TYPEMARK#{type}#{window start}` |
//! | daily report | `REPORT#{day}` | `REPORT` |
//! | checkpoint | `ANALYTICS#{day}#{segment}` | `CHECKPOINT` |
//! | purge marker | `PURGE#{userId}#{deviceId}` | `PURGE` |
//! | desired state | `USER#{userId}#DEVICE#{deviceId}` | `TWIN#DESIRED` |
//! | reported state | `USER#{userId}#DEVICE#{deviceId}` | `TWIN#REPORTED` |
//! | command | `USER#{userId}#DEVICE#{deviceId}` | `COMMAND#{seq, 10 digits}` |
//! | rollout | `USER#{userId}` | `ROLLOUT#{rolloutId}` |
//! | running rollout | `ROLLOUTS#RUNNING` | `{userId}#{rolloutId}` |
//! | rule set | `USER#{userId}` | `RULES` |
//! | alarm | `ALARM#{userId}#{deviceId}` | `{raisedAt}#{ruleId or offline}` |
//! | open alarm | `ALARM#{userId}#{deviceId}` | `OPEN#{ruleId or offline}` |
//!
//! Every part is a validated type that cannot contain `#`, so parsing is unambiguous.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::model::alarm::ids::AlarmSource;

use crate::model::alarm::severity::Severity;
use crate::model::error::ValidationError;
use crate::model::expression::Attribute;
use crate::model::ids::{DeviceId, EventId, EventType, RolloutId, Tag, UserId};
use crate::model::schema::{Item, GSI1PK, GSI1SK, GSI2PK, GSI2SK, GSI3PK, GSI3SK, PK, SK};
use crate::model::shard::shard_of;
use crate::model::shard::ShardCounts;
use crate::model::status::DeviceStatus;
use crate::model::timestamp::{Day, Timestamp};

/// Sort key of an owner's rule set.
pub const RULES_SK: &str = "RULES";
/// Sort key prefix of an open-alarm pointer (one per device and source).
pub const OPEN_ALARM_PREFIX: &str = "OPEN#";
/// Shards of `OPEN#{severity}#{shard}` (open alarms across owners, GSI3): a storm that raises
/// alarms on 10 million devices within ten minutes (16,700 a second) stays under 1,000 WCU/s
/// a partition only when spread this wide (docs/design.md, "Alarms").
pub const OPEN_ALARM_SHARDS: u16 = 32;
/// Shards of `REMIND#{shard}` (alarms with a reminder due, GSI1).
pub const REMINDER_SHARDS: u16 = 16;
/// Shards of `DUE#{shard}` (devices' offline-check due times, GSI3). A device's due entry
/// moves exactly when its `SEEN#` entry does, so it takes the same write rate and the same
/// spread as `STATUS#active#{shard}` (`ACTIVE_STATUS_SHARDS`' default): 10 million devices
/// moving once per 15 minutes are 22,000 WCU/s over 64 keys, 350 each (docs/design.md,
/// "Offline detection").
pub const DUE_SHARDS: u16 = 64;

/// Sort key of the profile item.
pub const PROFILE_SK: &str = "PROFILE";
/// Sort key of the registration item.
pub const REGISTRATION_SK: &str = "REGISTRATION";
/// Sort key of an owner's fleet item.
pub const FLEET_SK: &str = "FLEET";
/// Sort-key suffix of a device's live state item (after its `DEVICE#{deviceId}`).
const STATE_SUFFIX: &str = "#STATE";
/// Shards of the directory index (GSI2): profiles and fleet items, which the daily run scans.
pub const DIRECTORY_SHARDS: u16 = 16;
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
/// Sort-key prefix of a type mark in a device-event partition (sorts after every `EVENT#`,
/// so no event range ever reads one).
pub const TYPE_MARK_PREFIX: &str = "TYPEMARK#";
/// The window of a type mark: a device has at most one mark per searchable type and window,
/// so the marks' index partitions take at most one write per device, type and window however
/// many events the device sends (docs/design.md, "The event-type index").
pub const TYPE_WINDOW_SECONDS: i64 = 3600;
/// Granularity of the `SEEN#` index key: a device's index entry moves at most once per
/// bucket, however often it reports.
pub const SEEN_GRANULARITY_SECONDS: i64 = 15 * 60;
/// Sort key of a device's desired state (in its event partition, beside its commands).
pub const DESIRED_SK: &str = "TWIN#DESIRED";
/// Sort key of a device's reported state.
pub const REPORTED_SK: &str = "TWIN#REPORTED";
/// Sort-key prefix of the twin documents (desired and reported: one Query reads both).
pub const TWIN_PREFIX: &str = "TWIN#";
/// Sort-key prefix of a device's commands (in its event partition, after every `EVENT#`).
pub const COMMAND_PREFIX: &str = "COMMAND#";
/// Sort-key prefix of an owner's rollouts in the user partition (after `PROFILE`, so no
/// dashboard range reads one).
pub const ROLLOUT_PREFIX: &str = "ROLLOUT#";
/// Partition of the running rollouts, which the scheduled worker lists (written twice per
/// rollout, read once a minute).
pub const RUNNING_ROLLOUTS_PK: &str = "ROLLOUTS#RUNNING";

/// A primary key (PK, SK).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PrimaryKey {
    /// Partition key value.
    pub pk: String,
    /// Sort key value.
    pub sk: String,
}

impl PrimaryKey {
    /// The key as request attributes (`PK`, `SK`).
    pub fn attributes(&self) -> Item {
        HashMap::from([
            (PK.name().to_string(), AttributeValue::S(self.pk.clone())),
            (SK.name().to_string(), AttributeValue::S(self.sk.clone())),
        ])
    }

    /// The primary key of a stored item (or key), if it has one.
    pub fn of(item: &Item) -> Option<PrimaryKey> {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        Some(PrimaryKey {
            pk: text(PK.name())?,
            sk: text(SK.name())?,
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
    /// An owner's fleet: how many devices and over how many partitions their live state spreads.
    Fleet { user: UserId },
    /// A device's live state, in its owner's partition `shard` (0 is the user partition).
    DeviceState {
        user: UserId,
        partition: u32,
        device: DeviceId,
    },
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
    /// That a device sent events of a searchable type during the window starting at `window`.
    TypeMark {
        user: UserId,
        device: DeviceId,
        event_type: EventType,
        window: Timestamp,
    },
    /// The daily analytics report for `day`.
    Report { day: Day },
    /// One scan segment's checkpoint of the daily run for `day` (a key of its own per segment).
    Checkpoint { day: Day, segment: u32 },
    /// A deleted device whose events the daily run still has to purge.
    PurgeMarker { user: UserId, device: DeviceId },
    /// What a device's owner wants it to be configured as.
    Desired { user: UserId, device: DeviceId },
    /// What a device reported it applied.
    Reported { user: UserId, device: DeviceId },
    /// A command queued for a device, by its sequence number.
    Command {
        user: UserId,
        device: DeviceId,
        seq: u64,
    },
    /// A fleet-wide desired-state change of an owner.
    Rollout { user: UserId, rollout: RolloutId },
    /// A rollout the scheduled worker still has to carry out.
    RunningRollout { user: UserId, rollout: RolloutId },
    /// An owner's alarm rules (all in one item: ingestion reads them with the live state).
    RuleSet { user: UserId },
    /// One alarm of one device, raised at `raised_at` by `source` (its history entry).
    Alarm {
        user: UserId,
        device: DeviceId,
        raised_at: Timestamp,
        source: AlarmSource,
    },
    /// The open alarm of a device and source, while there is one (at most one per pair).
    OpenAlarm {
        user: UserId,
        device: DeviceId,
        source: AlarmSource,
    },
}

/// `COMMAND#{seq}` (10 digits, so commands sort in the order they were queued).
pub fn command_sk(seq: u64) -> String {
    format!("{COMMAND_PREFIX}{seq:010}")
}

/// `ROLLOUT#{rolloutId}`.
pub fn rollout_sk(rollout: &RolloutId) -> String {
    format!("{ROLLOUT_PREFIX}{rollout}")
}

/// `{userId}#`: the start of every running-list key of `user`'s rollouts (they follow it in
/// creation order, the rollout ids being time-ordered).
pub fn running_rollout_prefix(user: &UserId) -> String {
    format!("{user}#")
}

/// `USER#{userId}`: the user partition (profile, devices, tag links).
pub fn user_pk(user: &UserId) -> String {
    format!("USER#{user}")
}

/// The owner partition holding the live state of `user`'s devices placed on `partition`: the
/// user partition for partition 0 (so an ordinary owner's dashboard stays one Query),
/// `USER#{userId}#SHARD#{partition}` for the others (the key keeps its first spelling).
pub fn state_pk(user: &UserId, partition: u32) -> String {
    match partition {
        0 => user_pk(user),
        k => format!("USER#{user}#SHARD#{k}"),
    }
}

/// `DEVICE#{deviceId}#STATE`: a device's live state item (sorts right after its device item).
pub fn state_sk(device: &DeviceId) -> String {
    format!("{}{STATE_SUFFIX}", device_sk(device))
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

/// `ANALYTICS#{day}#{segment}`: one scan segment's checkpoint of the daily run for `day`. Each
/// segment writes its own key after every page, so segments never share a partition.
pub fn checkpoint_pk(day: &Day, segment: u32) -> String {
    format!("ANALYTICS#{day}#{segment:04}")
}

/// Sort key of a checkpoint item.
pub const CHECKPOINT_SK: &str = "CHECKPOINT";

/// `PURGE#{userId}#{deviceId}`: a deleted device's purge marker.
pub fn purge_pk(user: &UserId, device: &DeviceId) -> String {
    format!("PURGE#{user}#{device}")
}

/// Sort key of a purge marker.
pub const PURGE_SK: &str = "PURGE";

/// Partition key of a device's alarms (history and open pointers): `ALARM#{userId}#{deviceId}`.
/// One key per device: its transitions reach DynamoDB Streams in order.
pub fn alarm_pk(user: &UserId, device: &DeviceId) -> String {
    format!("ALARM#{user}#{device}")
}

/// Sort-key bounds of a device's alarm history (its `OPEN#` pointers sort after them).
pub fn alarm_history_range() -> (String, String) {
    ("0".to_string(), "9~".to_string())
}

/// GSI3 partition key of an owner's alarms in the owner's live-state partition `partition`:
/// `ALARMS#{userId}#{partition}` (an owner's storm spreads like the owner's live states).
pub fn owner_alarms_gsi3pk(user: &UserId, partition: u32) -> String {
    format!("ALARMS#{user}#{partition}")
}

/// GSI3 sort key of an alarm in its owner's list: open ones (`2`) before cleared ones (`1`),
/// each newest first when read backwards.
pub fn owner_alarms_gsi3sk(
    open: bool,
    raised_at: &Timestamp,
    device: &DeviceId,
    source: &AlarmSource,
) -> String {
    let rank = if open {
        owner_open_alarms_prefix()
    } else {
        "1#"
    };
    format!("{rank}{raised_at}#{device}#{}", source.as_str())
}

/// GSI3 sort-key prefix of the open part of an owner's alarm list (see
/// [`owner_alarms_gsi3sk`]).
pub fn owner_open_alarms_prefix() -> &'static str {
    "2#"
}

/// GSI3 partition key of open alarms across owners: `OPEN#{severity}#{shard}`.
pub fn open_alarms_gsi3pk(severity: Severity, shard: u16) -> String {
    format!("OPEN#{severity}#{shard}")
}

/// The shard of an open alarm of `device` among [`OPEN_ALARM_SHARDS`].
pub fn open_alarm_shard(user: &UserId, device: &DeviceId) -> u16 {
    shard_of(&format!("{user}#{device}"), OPEN_ALARM_SHARDS)
}

/// GSI3 sort key of an open alarm across owners: `{raisedAt}#{userId}#{deviceId}#{source}`.
pub fn open_alarms_gsi3sk(
    raised_at: &Timestamp,
    user: &UserId,
    device: &DeviceId,
    source: &AlarmSource,
) -> String {
    format!("{raised_at}#{user}#{device}#{}", source.as_str())
}

/// GSI1 partition key of alarms whose reminder is due: `REMIND#{shard}`.
pub fn reminder_gsi1pk(shard: u16) -> String {
    format!("REMIND#{shard}")
}

/// GSI1 sort key of an alarm's next reminder: `{remindAt}#{userId}#{deviceId}#{source}`.
pub fn reminder_gsi1sk(
    remind_at: &Timestamp,
    user: &UserId,
    device: &DeviceId,
    source: &AlarmSource,
) -> String {
    format!("{remind_at}#{user}#{device}#{}", source.as_str())
}

/// GSI3 partition key of devices' offline-check due times: `DUE#{shard}`.
pub fn due_gsi3pk(shard: u16) -> String {
    format!("DUE#{shard}")
}

/// The shard of `device`'s due entry among [`DUE_SHARDS`].
pub fn due_shard(device: &DeviceId) -> u16 {
    shard_of(device.as_str(), DUE_SHARDS)
}

/// GSI3 sort key of a device's due entry: `{dueAt}#{deviceId}` (due order).
pub fn due_gsi3sk(due_at: &Timestamp, device: &DeviceId) -> String {
    format!("{due_at}#{device}")
}

/// The highest GSI3 sort key of a device due at or before `at` (every id character sorts
/// before `~`), for `GSI3SK <= due_until(at)`.
pub fn due_until(at: &Timestamp) -> String {
    format!("{at}#~")
}

/// The due time and device of a due entry's GSI3 sort key `{dueAt}#{deviceId}`.
pub fn parse_due_gsi3sk(sk: &str) -> Result<(Timestamp, DeviceId), ValidationError> {
    let bad = || ValidationError::new("key", format!("not a due key: {sk}"));
    let (at, device) = sk.split_once('#').ok_or_else(bad)?;
    Ok((
        Timestamp::parse_field("key", at).map_err(|_| bad())?,
        DeviceId::parse(device).map_err(|_| bad())?,
    ))
}

/// GSI1 partition key of a device state: `STATUS#{status}#{shard}`.
pub fn status_gsi1pk(status: DeviceStatus, shard: u16) -> String {
    format!("STATUS#{}#{shard}", status.as_str())
}

/// The shard of `device` under `status` (stable for a given status count: a device's entry
/// moves between shards only when its status changes).
pub fn status_shard(device: &DeviceId, status: DeviceStatus, shards: &ShardCounts) -> u16 {
    shard_of(device.as_str(), shards.status_shards(status))
}

/// Where `device` is placed among an owner's `owner_partitions` live-state partitions when it
/// registers. Placement is stored and never recomputed, so a device never moves. A fleet
/// starts on partition 0; each time it doubles its partitions, new devices fill the newest
/// half only, so every partition ends up with about `DEVICES_PER_SHARD` devices.
pub fn placement(device: &DeviceId, owner_partitions: u32) -> u32 {
    if owner_partitions <= 1 {
        return 0;
    }
    let half = owner_partitions / 2;
    half + (xxhash_rust::xxh3::xxh3_64(device.as_str().as_bytes()) % u64::from(half)) as u32
}

/// GSI1 sort key of a device state: `SEEN#{bucket start}#{deviceId}`.
pub fn seen_gsi1sk(last_seen: &Timestamp, device: &DeviceId) -> String {
    format!("{SEEN_PREFIX}{last_seen}#{device}")
}

/// The start of `device`'s [`SEEN_GRANULARITY_SECONDS`] bucket holding `last_seen`: what its
/// `SEEN#` index key holds. Each device's buckets are offset by a stable hash of its id, so
/// devices cross their bucket boundaries spread over the whole interval, never all at the
/// same instant (a shared boundary would move every busy device's index entry at once).
pub fn seen_bucket(last_seen: &Timestamp, device: &DeviceId) -> Timestamp {
    let offset = (xxhash_rust::xxh3::xxh3_64(device.as_str().as_bytes())
        % SEEN_GRANULARITY_SECONDS as u64) as i64;
    let secs = last_seen.epoch_seconds() + offset;
    let start = secs - secs.rem_euclid(SEEN_GRANULARITY_SECONDS) - offset;
    Timestamp::from_epoch_millis(start * 1000)
        .unwrap_or(*last_seen)
        .min(*last_seen)
}

/// A device's GSI1 sort key for `last_seen`: its `SEEN#` bucket and id.
pub fn device_seen_key(last_seen: &Timestamp, device: &DeviceId) -> String {
    seen_gsi1sk(&seen_bucket(last_seen, device), device)
}

/// The lowest GSI1 sort key of a device seen at or after `since`: a device's bucket starts
/// less than [`SEEN_GRANULARITY_SECONDS`] before its `lastSeen`, so devices from
/// `since` - granularity on hold every one seen since `since` (exact to the granularity).
pub fn seen_since(since: &Timestamp) -> String {
    let earlier =
        Timestamp::from_epoch_millis((since.epoch_seconds() - SEEN_GRANULARITY_SECONDS + 1) * 1000)
            .unwrap_or(*since);
    format!("{SEEN_PREFIX}{earlier}")
}

/// The seen bucket of a device's GSI1 sort key `SEEN#{bucket}#{deviceId}`.
pub fn parse_seen_gsi1sk(sk: &str) -> Result<Timestamp, ValidationError> {
    let bad = || ValidationError::new("key", format!("not a SEEN key: {sk}"));
    let rest = sk.strip_prefix(SEEN_PREFIX).ok_or_else(bad)?;
    let (at, _device) = rest.split_once('#').ok_or_else(bad)?;
    Timestamp::parse_field("key", at)
}

/// GSI1 partition key of the type marks of a searchable type and day, one shard of them:
/// `TYPE#{type}#{day}#{shard}` (which devices sent the type, window by window).
pub fn type_gsi1pk(event_type: &EventType, day: &Day, shard: u16) -> String {
    format!("TYPE#{event_type}#{day}#{shard}")
}

/// GSI1 partition key of one device's events of one searchable type:
/// `DEVICETYPE#{userId}#{deviceId}#{type}`. Its write rate is that device's rate of that type,
/// never more than the device's own event partition takes.
pub fn device_type_gsi1pk(user: &UserId, device: &DeviceId, event_type: &EventType) -> String {
    format!("DEVICETYPE#{user}#{device}#{event_type}")
}

/// `TYPEMARK#{type}#{window start}`: a device's type mark in its event partition.
pub fn type_mark_sk(event_type: &EventType, window: &Timestamp) -> String {
    format!("{TYPE_MARK_PREFIX}{event_type}#{window}")
}

/// The start of the [`TYPE_WINDOW_SECONDS`] window holding `at` (windows are aligned to the
/// epoch, so a day holds whole windows).
pub fn type_window(at: &Timestamp) -> Timestamp {
    let secs = at.epoch_seconds();
    Timestamp::from_epoch_millis((secs - secs.rem_euclid(TYPE_WINDOW_SECONDS)) * 1000)
        .unwrap_or(*at)
}

/// GSI1 sort key of a type mark: `{window start}#{userId}#{deviceId}` (window order).
pub fn type_mark_gsi1sk(window: &Timestamp, user: &UserId, device: &DeviceId) -> String {
    format!("{window}#{user}#{device}")
}

/// The window, owner and device of a type mark's GSI1 sort key.
pub fn parse_type_mark_gsi1sk(sk: &str) -> Result<(Timestamp, UserId, DeviceId), ValidationError> {
    let bad = || ValidationError::new("key", format!("not a type mark index key: {sk}"));
    match sk.split('#').collect::<Vec<_>>().as_slice() {
        [window, user, device] => Ok((
            Timestamp::parse_field("key", window).map_err(|_| bad())?,
            UserId::parse(*user)?,
            DeviceId::parse(*device)?,
        )),
        _ => Err(bad()),
    }
}

/// GSI2 (directory) partition key of a user's profile and fleet items: `DIRECTORY#{shard}`.
pub fn directory_gsi2pk(user: &UserId) -> String {
    format!("DIRECTORY#{}", shard_of(user.as_str(), DIRECTORY_SHARDS))
}

/// GSI1 sort key of an event: `{at}#{deviceId}#{eventId}` (time order across devices).
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

/// What a directory (GSI2) entry stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectoryEntry {
    /// A user's profile.
    Profile,
    /// An owner's fleet item.
    Fleet,
    /// A deleted device's purge marker.
    Purge,
}

impl DirectoryEntry {
    fn as_str(self) -> &'static str {
        match self {
            DirectoryEntry::Profile => "PROFILE",
            DirectoryEntry::Fleet => "FLEET",
            DirectoryEntry::Purge => "PURGE",
        }
    }
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
    /// `GSI3PK`.
    pub gsi3pk: Option<String>,
    /// `GSI3SK`.
    pub gsi3sk: Option<String>,
}

impl IndexKeys {
    /// A device's live state on GSI1: by status shard, and once seen by its `SEEN#` bucket.
    pub fn device_state(
        status: DeviceStatus,
        device: &DeviceId,
        last_seen: Option<&Timestamp>,
        shards: &ShardCounts,
    ) -> Self {
        IndexKeys {
            gsi1pk: Some(status_gsi1pk(status, status_shard(device, status, shards))),
            gsi1sk: last_seen.map(|t| device_seen_key(t, device)),
            ..IndexKeys::default()
        }
    }

    /// A device state's offline-check due entry on GSI3 (`DUE#{shard}` / `{dueAt}#{deviceId}`),
    /// or none while the device is not watched (never seen, no interval known, not active, or
    /// offline already).
    pub fn due(device: &DeviceId, due_at: Option<&Timestamp>) -> Self {
        IndexKeys {
            gsi3pk: due_at.map(|_| due_gsi3pk(due_shard(device))),
            gsi3sk: due_at.map(|at| due_gsi3sk(at, device)),
            ..IndexKeys::default()
        }
    }

    /// An event of a searchable type on GSI1, under its device and type (in time order); no
    /// index entry for any other type. A key per device: no storm of many devices can heat one
    /// partition, and one device's key takes no more than its own event partition.
    pub fn event(
        user: &UserId,
        device: &DeviceId,
        event_type: &EventType,
        at: &Timestamp,
        event: &EventId,
        shards: &ShardCounts,
    ) -> Self {
        if shards.type_shards(event_type).is_none() {
            return IndexKeys::default();
        }
        IndexKeys {
            gsi1pk: Some(device_type_gsi1pk(user, device, event_type)),
            gsi1sk: Some(event_index_sk(at, device, event)),
            ..IndexKeys::default()
        }
    }

    /// A type mark on GSI1: by type, day and shard (`SEARCHABLE_EVENT_TYPES`' count; the
    /// shard hashes the device, whose marks come at most one per window), in window order.
    pub fn type_mark(
        user: &UserId,
        device: &DeviceId,
        event_type: &EventType,
        window: &Timestamp,
        shards: &ShardCounts,
    ) -> Self {
        let Some(type_shards) = shards.type_shards(event_type) else {
            return IndexKeys::default();
        };
        let spread = format!("{user}#{device}");
        IndexKeys {
            gsi1pk: Some(type_gsi1pk(
                event_type,
                &window.day(),
                shard_of(&spread, type_shards),
            )),
            gsi1sk: Some(type_mark_gsi1sk(window, user, device)),
            ..IndexKeys::default()
        }
    }

    /// A profile, fleet or purge marker in the directory (GSI2), which the daily run scans
    /// instead of the table: one entry per user, per fleet and per deleted device being purged,
    /// never an event. `detail` tells apart several entries of one user (a marker's device).
    pub fn directory(user: &UserId, entry: DirectoryEntry) -> Self {
        Self::directory_entry(user, entry, None)
    }

    /// [`IndexKeys::directory`] with a detail after the user (a purge marker's device).
    pub fn directory_entry(user: &UserId, entry: DirectoryEntry, detail: Option<&str>) -> Self {
        let sort = match detail {
            Some(detail) => format!("{}#{user}#{detail}", entry.as_str()),
            None => format!("{}#{user}", entry.as_str()),
        };
        IndexKeys {
            gsi2pk: Some(directory_gsi2pk(user)),
            gsi2sk: Some(sort),
            ..IndexKeys::default()
        }
    }

    /// An alarm of `device` raised at `raised_at` by `source`: in its owner's list on GSI3
    /// (open first, under the device's owner partition), and on GSI1 while a reminder is due
    /// at `remind_at`.
    pub fn alarm(
        user: &UserId,
        device: &DeviceId,
        partition: u32,
        source: &AlarmSource,
        raised_at: &Timestamp,
        open: bool,
        remind_at: Option<&Timestamp>,
    ) -> Self {
        IndexKeys {
            gsi1pk: remind_at
                .map(|_| reminder_gsi1pk(shard_of(&format!("{user}#{device}"), REMINDER_SHARDS))),
            gsi1sk: remind_at.map(|at| reminder_gsi1sk(at, user, device, source)),
            gsi3pk: Some(owner_alarms_gsi3pk(user, partition)),
            gsi3sk: Some(owner_alarms_gsi3sk(open, raised_at, device, source)),
            ..IndexKeys::default()
        }
    }

    /// An open alarm's pointer: on GSI3 by severity and shard, for operators.
    pub fn open_alarm(
        user: &UserId,
        device: &DeviceId,
        source: &AlarmSource,
        severity: Severity,
        raised_at: &Timestamp,
    ) -> Self {
        IndexKeys {
            gsi3pk: Some(open_alarms_gsi3pk(severity, open_alarm_shard(user, device))),
            gsi3sk: Some(open_alarms_gsi3sk(raised_at, user, device, source)),
            ..IndexKeys::default()
        }
    }

    /// The attributes to store (or to set in an update: see
    /// [`crate::model::expression::Update::set_all`]).
    pub fn attributes(&self) -> impl Iterator<Item = (Attribute, AttributeValue)> + '_ {
        [
            (GSI1PK, &self.gsi1pk),
            (GSI1SK, &self.gsi1sk),
            (GSI2PK, &self.gsi2pk),
            (GSI2SK, &self.gsi2sk),
            (GSI3PK, &self.gsi3pk),
            (GSI3SK, &self.gsi3sk),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| (name, AttributeValue::S(v.clone()))))
    }
}

impl ItemKey {
    /// A device's key in its owner's partition.
    pub fn device(user: &UserId, device: &DeviceId) -> Self {
        ItemKey::Device {
            user: user.clone(),
            device: device.clone(),
        }
    }

    /// A device id's table-wide registration key.
    pub fn registration(device: &DeviceId) -> Self {
        ItemKey::Registration {
            device: device.clone(),
        }
    }

    /// An owner's fleet item key.
    pub fn fleet(user: &UserId) -> Self {
        ItemKey::Fleet { user: user.clone() }
    }

    /// The primary key of this item.
    pub fn primary_key(&self) -> PrimaryKey {
        let (pk, sk) = match self {
            ItemKey::Profile { user } => (user_pk(user), PROFILE_SK.to_string()),
            ItemKey::Device { user, device } => (user_pk(user), device_sk(device)),
            ItemKey::Fleet { user } => (user_pk(user), FLEET_SK.to_string()),
            ItemKey::DeviceState {
                user,
                partition,
                device,
            } => (state_pk(user, *partition), state_sk(device)),
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
            ItemKey::TypeMark {
                user,
                device,
                event_type,
                window,
            } => (event_pk(user, device), type_mark_sk(event_type, window)),
            ItemKey::Report { day } => (report_pk(day), REPORT_SK.to_string()),
            ItemKey::Checkpoint { day, segment } => {
                (checkpoint_pk(day, *segment), CHECKPOINT_SK.to_string())
            }
            ItemKey::PurgeMarker { user, device } => (purge_pk(user, device), PURGE_SK.to_string()),
            ItemKey::Desired { user, device } => (event_pk(user, device), DESIRED_SK.to_string()),
            ItemKey::Reported { user, device } => (event_pk(user, device), REPORTED_SK.to_string()),
            ItemKey::Command { user, device, seq } => (event_pk(user, device), command_sk(*seq)),
            ItemKey::Rollout { user, rollout } => (user_pk(user), rollout_sk(rollout)),
            ItemKey::RunningRollout { user, rollout } => (
                RUNNING_ROLLOUTS_PK.to_string(),
                format!("{}{rollout}", running_rollout_prefix(user)),
            ),
            ItemKey::RuleSet { user } => (user_pk(user), RULES_SK.to_string()),
            ItemKey::Alarm {
                user,
                device,
                raised_at,
                source,
            } => (
                alarm_pk(user, device),
                format!("{raised_at}#{}", source.as_str()),
            ),
            ItemKey::OpenAlarm {
                user,
                device,
                source,
            } => (
                alarm_pk(user, device),
                format!("{OPEN_ALARM_PREFIX}{}", source.as_str()),
            ),
        };
        PrimaryKey { pk, sk }
    }

    /// The key as request attributes (`PK`, `SK`).
    pub fn attributes(&self) -> Item {
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
            (["USER", user], ["FLEET"]) => Ok(ItemKey::Fleet {
                user: UserId::parse(*user)?,
            }),
            (["USER", user], ["DEVICE", device, "STATE"]) => Ok(ItemKey::DeviceState {
                user: UserId::parse(*user)?,
                partition: 0,
                device: DeviceId::parse(*device)?,
            }),
            (["USER", user, "SHARD", shard], ["DEVICE", device, "STATE"]) => {
                // One spelling per shard: `1`, never `01` or `+1`; shard 0 is the user partition.
                let shard: u32 = shard
                    .parse()
                    .ok()
                    .filter(|k: &u32| *k > 0 && k.to_string() == *shard)
                    .ok_or_else(bad)?;
                Ok(ItemKey::DeviceState {
                    user: UserId::parse(*user)?,
                    partition: shard,
                    device: DeviceId::parse(*device)?,
                })
            }
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
            (["USER", user, "DEVICE", device], ["TYPEMARK", event_type, window]) => {
                Ok(ItemKey::TypeMark {
                    user: UserId::parse(*user)?,
                    device: DeviceId::parse(*device)?,
                    event_type: EventType::parse(*event_type)?,
                    window: Timestamp::parse_field("at", window)?,
                })
            }
            (["REPORT", day], ["REPORT"]) => Ok(ItemKey::Report {
                day: Day::parse_field("day", day)?,
            }),
            (["ANALYTICS", day, segment], ["CHECKPOINT"])
                if segment.len() == 4 && segment.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Ok(ItemKey::Checkpoint {
                    day: Day::parse_field("day", day)?,
                    segment: segment.parse().map_err(|_| bad())?,
                })
            }
            (["PURGE", user, device], ["PURGE"]) => Ok(ItemKey::PurgeMarker {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
            }),
            (["USER", user, "DEVICE", device], ["TWIN", which]) => {
                let (user, device) = (UserId::parse(*user)?, DeviceId::parse(*device)?);
                match *which {
                    "DESIRED" => Ok(ItemKey::Desired { user, device }),
                    "REPORTED" => Ok(ItemKey::Reported { user, device }),
                    _ => Err(bad()),
                }
            }
            (["USER", user, "DEVICE", device], ["COMMAND", seq])
                if seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Ok(ItemKey::Command {
                    user: UserId::parse(*user)?,
                    device: DeviceId::parse(*device)?,
                    seq: seq.parse().map_err(|_| bad())?,
                })
            }
            (["USER", user], ["ROLLOUT", rollout]) => Ok(ItemKey::Rollout {
                user: UserId::parse(*user)?,
                rollout: RolloutId::parse(*rollout)?,
            }),
            (["ROLLOUTS", "RUNNING"], [user, rollout]) => Ok(ItemKey::RunningRollout {
                user: UserId::parse(*user)?,
                rollout: RolloutId::parse(*rollout)?,
            }),
            (["USER", user], ["RULES"]) => Ok(ItemKey::RuleSet {
                user: UserId::parse(*user)?,
            }),
            (["ALARM", user, device], ["OPEN", source]) => Ok(ItemKey::OpenAlarm {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
                source: AlarmSource::parse(source)?,
            }),
            (["ALARM", user, device], [at, source]) => Ok(ItemKey::Alarm {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
                raised_at: Timestamp::parse_field("raisedAt", at)?,
                source: AlarmSource::parse(source)?,
            }),
            _ => Err(bad()),
        }
    }

    /// The item a stored item's (or key's) `PK`/`SK` address.
    pub fn of(item: &Item) -> Result<Self, ValidationError> {
        let key = PrimaryKey::of(item)
            .ok_or_else(|| ValidationError::new("key", "an item without PK and SK"))?;
        Self::parse(&key.pk, &key.sk)
    }

    /// The entity fields this key names, as attributes: the owner (`userId`), the device
    /// (`deviceId`) and a live state's placement (`shard`). An entity that stores them only in
    /// its key ([`crate::model::entity::Entity::FIELDS_IN_KEY`]) reads them back from here.
    pub fn entity_fields(&self) -> Vec<(&'static str, AttributeValue)> {
        let owner = |u: &UserId| ("userId", AttributeValue::S(u.to_string()));
        let device = |d: &DeviceId| ("deviceId", AttributeValue::S(d.to_string()));
        match self {
            Self::Profile { user } | Self::Fleet { user } => vec![owner(user)],
            Self::RuleSet { user } => vec![owner(user)],
            Self::Device { user, device: d }
            | Self::PurgeMarker { user, device: d }
            | Self::Alarm {
                user, device: d, ..
            }
            | Self::OpenAlarm {
                user, device: d, ..
            }
            | Self::TagLink {
                user, device: d, ..
            }
            | Self::Event {
                user, device: d, ..
            }
            | Self::TypeMark {
                user, device: d, ..
            }
            | Self::Desired { user, device: d }
            | Self::Reported { user, device: d }
            | Self::Command {
                user, device: d, ..
            } => vec![owner(user), device(d)],
            Self::Rollout { user, rollout } | Self::RunningRollout { user, rollout } => vec![
                owner(user),
                ("rolloutId", AttributeValue::S(rollout.to_string())),
            ],
            Self::DeviceState {
                user,
                partition: shard,
                device: d,
            } => vec![
                owner(user),
                device(d),
                ("shard", AttributeValue::N(shard.to_string())),
            ],
            Self::Registration { device: d } => vec![device(d)],
            Self::Report { .. } | Self::Checkpoint { .. } => Vec::new(),
        }
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
    /// GSI3 partition and sort key templates, if the entity is on GSI3.
    pub gsi3: Option<(&'static str, &'static str)>,
}

/// Every entity's keys, as templates (a unit test checks them against the builders above).
pub const KEY_TEMPLATES: [KeyTemplate; 19] = [
    KeyTemplate {
        entity_type: "profile",
        pk: "USER#${userId}",
        sk: "PROFILE",
        gsi1: None,
        gsi2: Some(("DIRECTORY#${directoryShard}", "PROFILE#${userId}")),
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "fleet",
        pk: "USER#${userId}",
        sk: "FLEET",
        gsi1: None,
        gsi2: Some(("DIRECTORY#${directoryShard}", "FLEET#${userId}")),
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "device",
        pk: "USER#${userId}",
        sk: "DEVICE#${deviceId}",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "deviceState",
        pk: "USER#${userId}#SHARD#${ownerShard} (USER#${userId} for shard 0)",
        sk: "DEVICE#${deviceId}#STATE",
        gsi1: Some((
            "STATUS#${status}#${shard}",
            "SEEN#${seenBucket}#${deviceId}",
        )),
        gsi2: None,
        gsi3: Some((
            "DUE#${dueShard} (active devices with a known interval, not offline)",
            "${dueAt}#${deviceId}",
        )),
    },
    KeyTemplate {
        entity_type: "tagLink",
        pk: "USER#${userId}",
        sk: "TAG#${tag}#${deviceId}",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "registration",
        pk: "DEVICE#${deviceId}",
        sk: "REGISTRATION",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "event",
        pk: "USER#${userId}#DEVICE#${deviceId}",
        sk: "EVENT#${at}#${eventId}",
        gsi1: Some((
            "DEVICETYPE#${userId}#${deviceId}#${type} (searchable types only)",
            "${at}#${deviceId}#${eventId}",
        )),
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "typeMark",
        pk: "USER#${userId}#DEVICE#${deviceId}",
        sk: "TYPEMARK#${type}#${window}",
        gsi1: Some((
            "TYPE#${type}#${day}#${shard}",
            "${window}#${userId}#${deviceId}",
        )),
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "report",
        pk: "REPORT#${day}",
        sk: "REPORT",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "checkpoint",
        pk: "ANALYTICS#${day}#${segment}",
        sk: "CHECKPOINT",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "purgeMarker",
        pk: "PURGE#${userId}#${deviceId}",
        sk: "PURGE",
        gsi1: None,
        gsi2: Some(("DIRECTORY#${directoryShard}", "PURGE#${userId}#${deviceId}")),
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "ruleSet",
        pk: "USER#${userId}",
        sk: "RULES",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "alarm",
        pk: "ALARM#${userId}#${deviceId}",
        sk: "${raisedAt}#${source}",
        gsi1: Some((
            "REMIND#${shard} (active, unacknowledged, with a reminder interval)",
            "${remindAt}#${userId}#${deviceId}#${source}",
        )),
        gsi2: None,
        gsi3: Some((
            "ALARMS#${userId}#${ownerShard}",
            "${2 open | 1 cleared}#${raisedAt}#${deviceId}#${source}",
        )),
    },
    KeyTemplate {
        entity_type: "openAlarm",
        pk: "ALARM#${userId}#${deviceId}",
        sk: "OPEN#${source}",
        gsi1: None,
        gsi2: None,
        gsi3: Some((
            "OPEN#${severity}#${shard}",
            "${raisedAt}#${userId}#${deviceId}#${source}",
        )),
    },
    KeyTemplate {
        entity_type: "desiredState",
        pk: "USER#${userId}#DEVICE#${deviceId}",
        sk: "TWIN#DESIRED",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "reportedState",
        pk: "USER#${userId}#DEVICE#${deviceId}",
        sk: "TWIN#REPORTED",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "command",
        pk: "USER#${userId}#DEVICE#${deviceId}",
        sk: "COMMAND#${seq}",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "rollout",
        pk: "USER#${userId}",
        sk: "ROLLOUT#${rolloutId}",
        gsi1: None,
        gsi2: None,
        gsi3: None,
    },
    KeyTemplate {
        entity_type: "runningRollout",
        pk: "ROLLOUTS#RUNNING",
        sk: "${userId}#${rolloutId}",
        gsi1: None,
        gsi2: None,
        gsi3: None,
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
        for (t, (pk, sk)) in KEY_TEMPLATES.iter().zip(built) {
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
            let t = KEY_TEMPLATES
                .iter()
                .find(|t| t.entity_type == name)
                .unwrap();
            assert_eq!(fill(main(t.pk), &v), pk, "{name}");
            assert_eq!(fill(t.sk, &v), sk, "{name}");
        }
        let (g2pk, g2sk) = KEY_TEMPLATES[0].gsi2.unwrap();
        let profile = IndexKeys::directory(&user, DirectoryEntry::Profile);
        assert_eq!(Some(fill(g2pk, &v)), profile.gsi2pk);
        assert_eq!(Some(fill(g2sk, &v)), profile.gsi2sk);
        let (_, g2sk) = KEY_TEMPLATES[1].gsi2.unwrap();
        let fleet = IndexKeys::directory(&user, DirectoryEntry::Fleet);
        assert_eq!(Some(fill(g2sk, &v)), fleet.gsi2sk);
        let (g1pk, g1sk) = KEY_TEMPLATES[3].gsi1.unwrap();
        assert_eq!(fill(g1pk, &v), status_gsi1pk(DeviceStatus::Active, 3));
        assert_eq!(fill(g1sk, &v), seen_gsi1sk(&at, &device));
        let (g1pk, g1sk) = KEY_TEMPLATES[6].gsi1.unwrap();
        assert_eq!(
            fill(main(g1pk), &v),
            device_type_gsi1pk(&user, &device, &kind)
        );
        assert_eq!(fill(g1sk, &v), event_index_sk(&at, &device, &event));
        let (g1pk, g1sk) = KEY_TEMPLATES[7].gsi1.unwrap();
        assert_eq!(fill(g1pk, &v), type_gsi1pk(&kind, &day, 3));
        assert_eq!(fill(g1sk, &v), type_mark_gsi1sk(&at, &user, &device));
    }
}
