//! The open alarm of a device and source: `ALARM#{userId}#{deviceId}` / `OPEN#{source}`, on
//! GSI3 under `OPEN#{severity}#{shard}` for operators.

use serde::{Deserialize, Serialize};

use crate::model::alarm::ids::AlarmSource;
use crate::model::alarm::severity::Severity;
use crate::model::alarm::status::{AlarmReading, AlarmState};
use crate::model::entities::alarm::{alarm_pk, AlarmItem};
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::{DeviceId, UserId};
use crate::model::keys::{IndexKeys, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::shard::{shard_of, ShardCounts};
use crate::model::timestamp::Timestamp;

/// The open alarm of a device and source, while it is open: `ALARM#{userId}#{deviceId}` /
/// `OPEN#{source}` (so a second one cannot be raised), on GSI3 under
/// `OPEN#{severity}#{shard}` for operators. Deleted when the alarm clears.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAlarmItem {
    /// The owner.
    pub user_id: UserId,
    /// The device.
    pub device_id: DeviceId,
    /// The device's name.
    pub device_name: String,
    /// The rule's id, or `offline`.
    pub source: String,
    /// The rule's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// How urgent.
    pub severity: Severity,
    /// Active or acknowledged.
    pub state: AlarmState,
    /// When it was raised.
    pub raised_at: Timestamp,
    /// When it was acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<Timestamp>,
    /// The reading that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<AlarmReading>,
}

attributes!(OpenAlarmItem {
    /// `userId`.
    USER_ID = "userId",
    /// `deviceId`.
    DEVICE_ID = "deviceId",
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
    /// `acknowledgedAt`.
    ACKNOWLEDGED_AT = "acknowledgedAt",
    /// `reading`.
    READING = "reading",
});

impl OpenAlarmItem {
    /// The pointer of an open alarm.
    pub fn of(alarm: &AlarmItem) -> Self {
        Self {
            user_id: alarm.user_id.clone(),
            device_id: alarm.device_id.clone(),
            device_name: alarm.device_name.clone(),
            source: alarm.source.clone(),
            rule_name: alarm.rule_name.clone(),
            severity: alarm.severity,
            state: alarm.state,
            raised_at: alarm.raised_at,
            acknowledged_at: alarm.acknowledged_at,
            reading: alarm.reading.clone(),
        }
    }
}

impl Entity for OpenAlarmItem {
    const ENTITY_TYPE: EntityType = EntityType::OpenAlarm;
    fn item_key(&self) -> ItemKey {
        ItemKey::OpenAlarm {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            source: AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline),
        }
    }
    fn index_keys(&self, _shards: &ShardCounts) -> IndexKeys {
        let source = AlarmSource::parse(&self.source).unwrap_or(AlarmSource::Offline);
        IndexKeys::open_alarm(
            &self.user_id,
            &self.device_id,
            &source,
            self.severity,
            &self.raised_at,
        )
    }
}

/// Sort key prefix of an open-alarm pointer (one per device and source).
pub const OPEN_ALARM_PREFIX: &str = "OPEN#";
/// Shards of `OPEN#{severity}#{shard}` (open alarms across owners, GSI3): a storm that raises
/// alarms on 10 million devices within ten minutes (16,700 a second) stays under 1,000 WCU/s
/// a partition only when spread this wide (docs/design.md, "Alarms").
pub const OPEN_ALARM_SHARDS: u16 = 32;

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

impl IndexKeys {
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
}

/// `ALARM#{userId}#{deviceId}` / `OPEN#{source}`.
pub fn primary_key(user: &UserId, device: &DeviceId, source: &AlarmSource) -> PrimaryKey {
    PrimaryKey {
        pk: alarm_pk(user, device),
        sk: format!("{OPEN_ALARM_PREFIX}{}", source.as_str()),
    }
}

/// An open alarm's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ALARM", user, device], ["OPEN", source]) => key.matched(|| {
            Ok(ItemKey::OpenAlarm {
                user: UserId::parse(*user)?,
                device: DeviceId::parse(*device)?,
                source: AlarmSource::parse(source)?,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "openAlarm",
    pk: "ALARM#${userId}#${deviceId}",
    sk: "OPEN#${source}",
    gsi1: None,
    gsi2: None,
    gsi3: Some((
        "OPEN#${severity}#${shard}",
        "${raisedAt}#${userId}#${deviceId}#${source}",
    )),
};
