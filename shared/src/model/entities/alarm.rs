//! One alarm of one device (its history entry): `ALARM#{userId}#{deviceId}` /
//! `{raisedAt}#{source}`, on GSI3 in its owner's list and on GSI1 while a reminder is due.

use serde::{Deserialize, Serialize};

use crate::model::alarm::ids::{AlarmId, AlarmSource};
use crate::model::alarm::severity::Severity;
use crate::model::alarm::status::{AlarmReading, AlarmState};
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::{IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::shard::{shard_of, ShardCounts};
use crate::model::timestamp::Timestamp;

/// One alarm of one device: `ALARM#{userId}#{deviceId}` / `{raisedAt}#{source}` (the device's
/// history, newest last), on GSI3 in its owner's list (open first), and on GSI1 while a
/// reminder is due. Written only on a transition, expired by TTL like events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmItem {
    /// The owner.
    pub user_id: UserId,
    /// The device.
    pub device_id: DeviceId,
    /// The owner's live-state partition the device is placed on (its owner-list key; not on
    /// GSI3, whose readers do not need it).
    #[serde(rename = "shard", default)]
    pub partition: u32,
    /// The device's name when it was raised.
    pub device_name: String,
    /// The rule's id, or `offline`.
    pub source: String,
    /// The rule's name when it was raised (none for offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// How urgent.
    pub severity: Severity,
    /// Where it is in its life.
    pub state: AlarmState,
    /// When it was raised.
    pub raised_at: Timestamp,
    /// When it cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared_at: Option<Timestamp>,
    /// When it was acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<Timestamp>,
    /// The reading that raised it (none for offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<AlarmReading>,
    /// The reading that cleared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear_reading: Option<AlarmReading>,
    /// The device's last report when an offline alarm was raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Timestamp>,
    /// The rule's reminder interval when it was raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_every_seconds: Option<u64>,
    /// When the next reminder is due (while active and unacknowledged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_at: Option<Timestamp>,
    /// Reminders sent so far.
    #[serde(default)]
    pub reminders: u32,
    /// Expiry, epoch seconds: set when it clears (its time + the events' retention); an open
    /// alarm never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
}

attributes!(AlarmItem {
    /// `userId`.
    USER_ID = "userId",
    /// `deviceId`.
    DEVICE_ID = "deviceId",
    /// `shard`.
    PARTITION = "shard",
    /// `deviceName`.
    DEVICE_NAME = "deviceName",
    /// `source`.
    SOURCE = "source",
    /// `ruleName`.
    RULE_NAME = "ruleName",
    /// `severity`.
    SEVERITY = "severity",
    /// `state`.
    STATE = "state",
    /// `raisedAt`.
    RAISED_AT = "raisedAt",
    /// `clearedAt`.
    CLEARED_AT = "clearedAt",
    /// `acknowledgedAt`.
    ACKNOWLEDGED_AT = "acknowledgedAt",
    /// `reading`.
    READING = "reading",
    /// `clearReading`.
    CLEAR_READING = "clearReading",
    /// `lastSeen`.
    LAST_SEEN = "lastSeen",
    /// `remindEverySeconds`.
    REMIND_EVERY_SECONDS = "remindEverySeconds",
    /// `remindAt`.
    REMIND_AT = "remindAt",
    /// `reminders`.
    REMINDERS = "reminders",
    /// `ttl`.
    TTL = "ttl",
});

impl AlarmItem {
    /// Where it came from.
    pub fn alarm_source(&self) -> Result<AlarmSource, crate::model::error::ValidationError> {
        AlarmSource::parse(&self.source)
    }

    /// Its id as the API shows it.
    pub fn alarm_id(&self) -> Result<AlarmId, crate::model::error::ValidationError> {
        Ok(AlarmId {
            device: self.device_id.clone(),
            source: self.alarm_source()?,
            raised_at: self.raised_at,
        })
    }
}

impl Entity for AlarmItem {
    const ENTITY_TYPE: EntityType = EntityType::Alarm;
    fn item_key(&self) -> ItemKey {
        ItemKey::Alarm {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            raised_at: self.raised_at,
            source: AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        let source = AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline);
        let reminder = self
            .remind_at
            .as_ref()
            .filter(|_| self.state == AlarmState::Active);
        IndexKeys::alarm(
            &self.user_id,
            &self.device_id,
            self.partition,
            &source,
            &self.raised_at,
            self.state != AlarmState::Cleared,
            reminder,
        )
    }
}

/// Shards of `REMIND#{shard}` (alarms with a reminder due, GSI1).
pub const REMINDER_SHARDS: u16 = 16;

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

impl IndexKeys {
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
}

/// `ALARM#{userId}#{deviceId}` / `{raisedAt}#{source}`.
pub fn primary_key(
    user: &UserId,
    device: &DeviceId,
    raised_at: &Timestamp,
    source: &AlarmSource,
) -> PrimaryKey {
    PrimaryKey {
        pk: alarm_pk(user, device),
        sk: format!("{raised_at}#{}", source.as_str()),
    }
}

/// An alarm's key, if `key` has its shape (tried after [`super::open_alarm`]'s).
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ALARM", user, device], [at, source]) => key.matched(|| {
            Ok(ItemKey::Alarm {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
                raised_at: Timestamp::parse_field("raisedAt", at)?,
                source: AlarmSource::parse(source)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
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
};
