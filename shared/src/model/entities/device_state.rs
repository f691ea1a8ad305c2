//! A device's live state: `{state partition}` / `DEVICE#{deviceId}#STATE`, on GSI1
//! (status, `SEEN#` bucket) and GSI3 (offline-check due time).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::model::alarm::status::AlarmStatuses;
use crate::model::alarm::OFFLINE;
use crate::model::entities::device::device_sk;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::expression::Attribute;
use crate::model::ids::{DeviceId, DeviceType, Tag, UserId};
use crate::model::keys::{user_pk, IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::offline::{
    due_at, seen_bucket, OfflineDetection, Rhythm, SEEN_GRANULARITY_SECONDS,
};
use crate::model::readings::{LiveReadings, StoredEvent, StoredReading};
use crate::model::schema::Item;
use crate::model::series::SeriesState;
use crate::model::shard::{shard_of, ShardCounts};
use crate::model::status::DeviceStatus;
use crate::model::timestamp::Timestamp;
use crate::model::twin::TwinVersions;

/// A device's live state: `{state partition}` / `DEVICE#{deviceId}#STATE`, kept by ingestion.
/// It sits in the owner's partition placed at registration ([`state_pk`]): an
/// ordinary owner's states share the user partition (the dashboard stays one Query), a large
/// owner's spread over `USER#{userId}#SHARD#{k}`. On GSI1 as the status index (AP-13), with the
/// copies that index returns. Bounded: see `ops::ingest` for the caps and the largest size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStateItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device (read back from the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// The owner's partition it is placed on (read back from the key, as `shard`).
    #[serde(skip_serializing, default, rename = "shard")]
    pub partition: u32,
    /// Copy of the device's status (its GSI1 partition).
    pub status: DeviceStatus,
    /// Copy of the device's name (AP-13 returns it).
    pub name: String,
    /// Copy of the device's type (AP-13 returns it).
    #[serde(rename = "type")]
    pub device_type: DeviceType,
    /// Newest event time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Timestamp>,
    /// Latest reading per event type. Stored with `recent` in the compact `readings`
    /// attribute ([`crate::model::readings`]); read from a list form too (states written before it).
    #[serde(default, skip_serializing)]
    pub latest: BTreeMap<String, StoredReading>,
    /// The newest events, newest first (stored in `readings`, like `latest`).
    #[serde(default, skip_serializing)]
    pub recent: Vec<StoredEvent>,
    /// Optimistic-concurrency counter of ingestion's updates (0: never updated).
    #[serde(default)]
    pub ingest_seq: u64,
    /// The device `version` whose status and name were last copied here (an older PATCH's
    /// copy landing late is refused).
    #[serde(default)]
    pub device_version: u64,
    /// The twin's versions (desired, reported, commands): ingestion's own update returns them,
    /// so it knows whether anything is pending without a read ([`crate::model::twin`]).
    #[serde(flatten)]
    pub twin: TwinVersions,
    /// Copy of the device's tags (alarm rules scoped by tag), with its status and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag>,
    /// The device's alarm statuses by source: open alarms and conditions pending their
    /// duration ([`crate::model::alarm::evaluation::evaluate`]); empty for a device with nothing open.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub alarms: AlarmStatuses,
    /// Copy of the device's declared reporting interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_every_seconds: Option<u64>,
    /// Copy of the device's offline detection (stored only when tight, like the device's).
    #[serde(default, skip_serializing_if = "OfflineDetection::is_standard")]
    pub offline_detection: OfflineDetection,
    /// The learned mean gap between reports, changed at most once per `SEEN#` bucket
    /// ([`crate::model::offline`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_every_seconds: Option<u64>,
    /// The learned mean deviation of the gaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_jitter_seconds: Option<u64>,
    /// Where the due index holds the device now (read back from its GSI3 sort key, never
    /// stored as an attribute of its own): what an update compares [`DeviceStateItem::due_at`]
    /// with to decide whether the entry moves.
    #[serde(skip)]
    pub indexed_due: Option<Timestamp>,
    /// The open part of the device's summaries per event type (issue 32,
    /// [`crate::model::series`]): stored in the compact binary attribute `series`, absent on
    /// a state written before summaries (no open summaries) and while there are none.
    #[serde(skip)]
    pub series: SeriesState,
    /// While the device's history is being copied to this owner (a move, issue 33): the owner
    /// it came from, whose summary items ingest reads where this owner has none yet, so a
    /// late reading adds to the copied buckets instead of starting over (issue 38 item 4).
    /// Removed when the copy is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving_from: Option<UserId>,
    /// The device's part in the last staged firmware rollout that offered it something
    /// (issue 40): set by the rollout worker's offer, moved on by the device's check-ins inside
    /// ingestion's own update of this item (no write of its own), kept when it is over as the
    /// device's firmware record. A check-in of a device with nothing open reads nothing more
    /// (docs/design.md section 15, "Progress on the live state").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<crate::model::rollout_progress::FirmwareProgress>,
    /// Writes of `firmware` so far: every one (the worker's offers, time-outs and retries, the
    /// check-ins' moves) is conditioned on the count it read and adds one, so of two that race
    /// one wins and the other reads again (0: never written, stored absent).
    #[serde(default, skip_serializing_if = "crate::model::twin::is_zero")]
    pub firmware_seq: u64,
}

attributes!(DeviceStateItem {
    /// `status`.
    STATUS = "status",
    /// `name`.
    NAME = "name",
    /// `type`.
    DEVICE_TYPE = "type",
    /// `lastSeen`.
    LAST_SEEN = "lastSeen",
    /// `ingestSeq`.
    INGEST_SEQ = "ingestSeq",
    /// `deviceVersion`.
    DEVICE_VERSION = "deviceVersion",
    /// `readings`: `latest` and `recent` in their compact form.
    READINGS = "readings",
    /// `desiredVersion` ([`TwinVersions`]).
    DESIRED_VERSION = "desiredVersion",
    /// `reportedVersion` ([`TwinVersions`]).
    REPORTED_VERSION = "reportedVersion",
    /// `commandSeq` ([`TwinVersions`]).
    COMMAND_SEQ = "commandSeq",
    /// `commandsDone` ([`TwinVersions`]).
    COMMANDS_DONE = "commandsDone",
    /// `tags`: copy of the device's tags.
    TAGS = "tags",
    /// `alarms`: alarm statuses by source.
    ALARMS = "alarms",
    /// `reportEverySeconds`: copy of the declared reporting interval.
    REPORT_EVERY_SECONDS = "reportEverySeconds",
    /// `offlineDetection`: copy of the device's offline detection (absent: standard).
    OFFLINE_DETECTION = "offlineDetection",
    /// `learnedEverySeconds`: the learned reporting interval.
    LEARNED_EVERY_SECONDS = "learnedEverySeconds",
    /// `learnedJitterSeconds`: the learned jitter of the interval.
    LEARNED_JITTER_SECONDS = "learnedJitterSeconds",
    /// `series`: the open summaries ([`SeriesState::encode`]).
    SERIES = "series",
    /// `movingFrom`: the previous owner while a move copies the history.
    MOVING_FROM = "movingFrom",
    /// `firmware`: the device's part in a staged firmware rollout.
    FIRMWARE = "firmware",
    /// `firmwareSeq`: how many times `firmware` was written.
    FIRMWARE_SEQ = "firmwareSeq",
});

impl DeviceStateItem {
    /// `latest` of a state written before the compact form (read, removed by the next write).
    pub const LEGACY_LATEST: Attribute = Attribute::named("latest");
    /// `recent` of a state written before the compact form (read, removed by the next write).
    pub const LEGACY_RECENT: Attribute = Attribute::named("recent");
}

impl Entity for DeviceStateItem {
    const ENTITY_TYPE: EntityType = EntityType::DeviceState;
    fn item_key(&self) -> ItemKey {
        ItemKey::DeviceState {
            user: self.user_id.clone(),
            partition: self.partition,
            device: self.device_id.clone(),
        }
    }
    /// On GSI1 by status shard; sparse in the `SEEN#` sort key until the device first sends
    /// events, which keeps never-seen devices out of "seen since" queries.
    /// On GSI3 by its offline-check due time while it is watched ([`DeviceStateItem::due_at`]).
    fn index_keys(&self, shards: &ShardCounts) -> IndexKeys {
        let due = IndexKeys::due(&self.device_id, self.due_at().as_ref());
        IndexKeys {
            gsi3pk: due.gsi3pk,
            gsi3sk: due.gsi3sk,
            ..IndexKeys::device_state(
                self.status,
                &self.device_id,
                self.last_seen.as_ref(),
                shards,
            )
        }
    }
    /// The readings go into one compact attribute ([`crate::model::readings`]).
    fn to_item(&self, shards: &ShardCounts) -> Result<Item, crate::model::error::FleetError> {
        let mut item = crate::model::entities::entity_item(self, shards)?;
        item.insert(
            DeviceStateItem::READINGS.name().into(),
            self.readings_attribute(),
        );
        if let Some(series) = self.series_attribute() {
            item.insert(DeviceStateItem::SERIES.name().into(), series);
        }
        Ok(item)
    }
    /// Owner, device and shard come from the key (GSI1 projects the table's key as well).
    const FIELDS_IN_KEY: bool = true;
    /// The readings come from their compact attribute, or from the lists of an older state.
    fn from_item(mut item: Item) -> Result<Self, crate::model::error::FleetError> {
        let readings = match item.remove(DeviceStateItem::READINGS.name()) {
            Some(AttributeValue::B(bytes)) => Some(LiveReadings::decode(bytes.as_ref())?),
            Some(_) => {
                return Err(crate::model::error::FleetError::internal(
                    "live state readings are not binary",
                ))
            }
            None => None,
        };
        let series = match item.remove(DeviceStateItem::SERIES.name()) {
            Some(AttributeValue::B(bytes)) => SeriesState::decode(bytes.as_ref())?,
            Some(_) => {
                return Err(crate::model::error::FleetError::internal(
                    "live state series are not binary",
                ))
            }
            None => SeriesState::default(),
        };
        let indexed_due = item
            .get(crate::model::schema::GSI3SK.name())
            .and_then(|v| v.as_s().ok())
            .and_then(|sk| parse_due_gsi3sk(sk).ok())
            .map(|(at, _)| at);
        let mut state: Self = crate::model::entities::checked_item(item)?;
        state.indexed_due = indexed_due;
        state.series = series;
        if let Some(readings) = readings {
            state.latest = readings.latest;
            state.recent = readings.recent;
        }
        Ok(state)
    }
}

impl DeviceStateItem {
    /// The condition that `firmware` is as a state read with `firmware_seq` = `seq` had it.
    pub fn firmware_unchanged(seq: u64) -> crate::model::expression::Condition {
        use crate::model::expression::Condition;
        if seq == 0 {
            Condition::absent(Self::FIRMWARE_SEQ)
        } else {
            Condition::equals(Self::FIRMWARE_SEQ, AttributeValue::N(seq.to_string()))
        }
    }

    /// Whether an alarm is raised on the device now (the offline one included).
    pub fn has_open_alarm(&self) -> bool {
        self.alarms.values().any(|a| a.raised_at.is_some())
    }

    /// Its reporting rhythm: the declared interval and the learned one.
    pub fn rhythm(&self) -> Rhythm {
        Rhythm {
            declared: self.report_every_seconds,
            learned: self.learned_every_seconds,
            jitter: self.learned_jitter_seconds,
            detection: self.offline_detection,
        }
    }

    /// When the device is offline unless it reports first ([`crate::model::offline`]), while it
    /// is watched: active, seen, with an interval known, and not offline already.
    pub fn due_at(&self) -> Option<Timestamp> {
        if self.status != DeviceStatus::Active || self.alarms.contains_key(OFFLINE) {
            return None;
        }
        due_at(self.last_seen.as_ref()?, &self.device_id, &self.rhythm())
    }

    /// This state with what others write on the item taken from `written` (the item as an
    /// update returned it): the owner's copies (status, name, tags, interval, offline
    /// detection, their version) and where the due index holds the device. A PATCH does not
    /// move `ingestSeq`, so a warm ingestion container's cached state would keep the old
    /// copies (and place the due entry by them) until its cache missed; refreshed from every
    /// update's answer, its next batch works from the owner's current settings.
    pub fn with_copies_of(self, written: &DeviceStateItem) -> Self {
        Self {
            status: written.status,
            name: written.name.clone(),
            tags: written.tags.clone(),
            device_version: written.device_version,
            report_every_seconds: written.report_every_seconds,
            offline_detection: written.offline_detection,
            indexed_due: written.indexed_due,
            firmware: written.firmware.clone(),
            firmware_seq: written.firmware_seq,
            ..self
        }
    }

    /// Learns from the gap between `before`'s report and this state's, once per `SEEN#`
    /// bucket (when the bucket changes): the learned interval, like the due entry, changes
    /// only when the `SEEN#` entry moves.
    pub fn learn_rhythm(&mut self, before: &DeviceStateItem) {
        let (Some(then), Some(now)) = (before.last_seen, self.last_seen) else {
            return;
        };
        if seen_bucket(&then, &self.device_id) == seen_bucket(&now, &self.device_id) {
            return;
        }
        let gap = now.epoch_seconds() - then.epoch_seconds();
        let learned = before
            .rhythm()
            .learned_after(gap, before.alarms.contains_key(OFFLINE));
        self.learned_every_seconds = learned.learned;
        self.learned_jitter_seconds = learned.jitter;
    }

    /// `latest` and `recent` as the state item stores them (attribute [`DeviceStateItem::READINGS`]).
    pub fn readings_attribute(&self) -> AttributeValue {
        AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
            crate::model::readings::encode(&self.latest, &self.recent),
        ))
    }

    /// The open summaries as the state item stores them (attribute
    /// [`DeviceStateItem::SERIES`]), `None` while there are none (the attribute is absent).
    pub fn series_attribute(&self) -> Option<AttributeValue> {
        (!self.series.0.is_empty()).then(|| {
            AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
                self.series.encode(),
            ))
        })
    }
}

/// Shards of `DUE#{shard}` (devices' offline-check due times, GSI3). A device's due entry
/// moves exactly when its `SEEN#` entry does, so it takes the same write rate and the same
/// spread as `STATUS#active#{shard}` (`ACTIVE_STATUS_SHARDS`' default): 10 million devices
/// moving once per 15 minutes are 22,000 WCU/s over 64 keys, 350 each (docs/design.md,
/// "Offline detection").
pub const DUE_SHARDS: u16 = 64;

/// Sort-key suffix of a device's live state item (after its `DEVICE#{deviceId}`).
const STATE_SUFFIX: &str = "#STATE";

/// Sort-key prefix of a device's GSI1 entry.
const SEEN_PREFIX: &str = "SEEN#";

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

/// The GSI1 sort key between the devices whose `SEEN#` bucket starts before `at` and those
/// whose bucket starts at or after it: `SEEN#{at}` (a bucket's key goes on with `#{deviceId}`).
pub fn seen_bucket_bound(at: &Timestamp) -> String {
    format!("{SEEN_PREFIX}{at}")
}

/// Every GSI1 partition a device's `SEEN#` entry may be in: each status's shards, in a fixed
/// order (what a walk over every device seen, partition by partition, counts through).
pub fn seen_partitions(shards: &ShardCounts) -> Vec<String> {
    DeviceStatus::ALL
        .into_iter()
        .flat_map(|status| {
            (0..shards.status_shards(status)).map(move |shard| status_gsi1pk(status, shard))
        })
        .collect()
}

/// The seen bucket of a device's GSI1 sort key `SEEN#{bucket}#{deviceId}`.
pub fn parse_seen_gsi1sk(sk: &str) -> Result<Timestamp, ValidationError> {
    let bad = || ValidationError::new("key", format!("not a SEEN key: {sk}"));
    let rest = sk.strip_prefix(SEEN_PREFIX).ok_or_else(bad)?;
    let (at, _device) = rest.split_once('#').ok_or_else(bad)?;
    Timestamp::parse_field("key", at)
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
}

/// `{state partition}` / `DEVICE#{deviceId}#STATE`.
pub fn primary_key(user: &UserId, partition: &u32, device: &DeviceId) -> PrimaryKey {
    PrimaryKey {
        pk: state_pk(user, *partition),
        sk: state_sk(device),
    }
}

/// A live state's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    let (user, partition, device) = match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["DEVICE", device, "STATE"]) => (user, 0, device),
        (["USER", user, "SHARD", shard], ["DEVICE", device, "STATE"]) => {
            // One spelling per shard: `1`, never `01` or `+1`; shard 0 is the user partition.
            match shard
                .parse()
                .ok()
                .filter(|k: &u32| *k > 0 && k.to_string() == *shard)
            {
                Some(shard) => (user, shard, device),
                None => return Some(Err(key.bad())),
            }
        }
        _ => return None,
    };
    key.matched(|| {
        Ok(ItemKey::DeviceState {
            user: UserId::parse(*user)?,
            partition,
            device: DeviceId::parse(*device)?,
        })
    })
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
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
};
