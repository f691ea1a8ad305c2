//! A summary item: `USER#{userId}#DEVICE#{deviceId}` / `SERIES#{type}#{resolution}#{start}`,
//! one item of a device's summaries of one event type ([`crate::model::series`]).

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::model::entities::{entity_item, Entity, EntityType, ItemKey};
use crate::model::error::{FleetError, ValidationError};
use crate::model::ids::{DeviceId, EventType, UserId};
use crate::model::keys::{event_pk, KeyParts, KeyTemplate, PrimaryKey};
use crate::model::schema::Item;
use crate::model::series::{BucketIds, Buckets, Resolution};
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;

/// The stored summaries of one event type of a device over one span, in the device's event
/// partition (so they travel and are purged with its events):
/// - `5m`: the 5-minute buckets of a 2-hour block ([`crate::model::series::BLOCK_MS`]);
/// - `1h`: the hourly buckets of a UTC day;
/// - `1d`: the daily buckets of a UTC month.
///
/// Only `buckets` and `ttl` are stored besides the key: owner, device, type, resolution and
/// start are read back from the key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeriesItem {
    /// Owner (in the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// Device (in the key).
    #[serde(skip_serializing)]
    pub device_id: DeviceId,
    /// The event type summarised (in the key).
    #[serde(skip_serializing, rename = "type")]
    pub event_type: EventType,
    /// The buckets' resolution (in the key).
    #[serde(skip_serializing)]
    pub resolution: Resolution,
    /// The span's start: a block's, a day's or a month's (in the key).
    #[serde(skip_serializing)]
    pub start: Timestamp,
    /// The buckets (stored in the compact binary attribute `buckets`).
    #[serde(skip)]
    pub buckets: Buckets,
    /// A block's reading identities (issue 38: a late reading is added once), in the binary
    /// attribute `ids` ([`BucketIds::encode`] from the block's start); empty for day and month
    /// items and absent while empty.
    #[serde(skip)]
    pub ids: BucketIds,
    /// Expiry, epoch seconds: the span's end + what its resolution keeps.
    pub ttl: i64,
    /// The registration that wrote it (`reg`, [`crate::model::entities::event::registration_stamp`]):
    /// reads, flushes and rolls of another registration under the same id treat it as absent,
    /// and the purge deletes it (issue 38 item 5). Absent on items written before the stamp.
    #[serde(default, rename = "reg", skip_serializing_if = "Option::is_none")]
    pub registered_at: Option<i64>,
}

attributes!(SeriesItem {
    /// `buckets`: [`Buckets::encode`].
    BUCKETS = "buckets",
    /// `ttl`.
    TTL = "ttl",
    /// `ids`: [`BucketIds::encode`] from the item's start.
    IDS = "ids",
    /// `reg`: the registration stamp.
    REGISTERED_AT = "reg",
});

impl Entity for SeriesItem {
    const ENTITY_TYPE: EntityType = EntityType::Series;
    fn item_key(&self) -> ItemKey {
        ItemKey::Series {
            user: self.user_id.clone(),
            device: self.device_id.clone(),
            event_type: self.event_type.clone(),
            resolution: self.resolution,
            start: self.start,
        }
    }
    fn to_item(&self, shards: &ShardCounts) -> Result<Item, FleetError> {
        let mut item = entity_item(self, shards)?;
        item.insert(
            SeriesItem::BUCKETS.name().into(),
            AttributeValue::B(self.buckets.encode(self.resolution).into()),
        );
        if !self.ids.0.is_empty() {
            item.insert(
                SeriesItem::IDS.name().into(),
                AttributeValue::B(self.ids.encode(self.start.epoch_millis()).into()),
            );
        }
        Ok(item)
    }
    fn from_item(mut item: Item) -> Result<Self, FleetError> {
        let buckets = match item.remove(SeriesItem::BUCKETS.name()) {
            Some(AttributeValue::B(bytes)) => Buckets::decode(bytes.as_ref())?,
            _ => {
                return Err(FleetError::internal(
                    "a summary item without binary buckets",
                ))
            }
        };
        let ids = item.remove(SeriesItem::IDS.name());
        let key = ItemKey::of(&item).map_err(|e| FleetError::internal(e.to_string()))?;
        let ItemKey::Series {
            user,
            device,
            event_type,
            resolution,
            start,
        } = key
        else {
            return Err(FleetError::internal("a summary item with another key"));
        };
        let ttl: i64 = match item.get(SeriesItem::TTL.name()) {
            Some(AttributeValue::N(n)) => n
                .parse()
                .map_err(|_| FleetError::internal("a summary item's ttl is not a number"))?,
            _ => 0,
        };
        let registered_at = match item.get(SeriesItem::REGISTERED_AT.name()) {
            Some(AttributeValue::N(n)) => Some(n.parse().map_err(|_| {
                FleetError::internal("a summary item's registration stamp is not a number")
            })?),
            _ => None,
        };
        if EntityType::of(&item) != Some(EntityType::Series) {
            return Err(FleetError::internal("expected a series item"));
        }
        let ids = match ids {
            Some(AttributeValue::B(bytes)) => {
                BucketIds::decode(bytes.as_ref(), start.epoch_millis())?
            }
            _ => BucketIds::default(),
        };
        Ok(SeriesItem {
            user_id: user,
            device_id: device,
            event_type,
            resolution,
            start,
            buckets,
            ids,
            ttl,
            registered_at,
        })
    }
}

/// Sort-key prefix of the summary items (sorts after every `EVENT#`, so no event range ever
/// reads one).
pub const SERIES_PREFIX: &str = "SERIES#";

/// `SERIES#{type}#{resolution}#{start}`.
pub fn series_sk(event_type: &EventType, resolution: Resolution, start: &Timestamp) -> String {
    format!(
        "{SERIES_PREFIX}{event_type}#{}#{start}",
        resolution.as_str()
    )
}

/// The sort-key range (inclusive) of a type's items of `resolution` starting from `from` to
/// `to`: a Query's `SK BETWEEN`.
pub fn series_sk_range(
    event_type: &EventType,
    resolution: Resolution,
    from: &Timestamp,
    to: &Timestamp,
) -> (String, String) {
    (
        series_sk(event_type, resolution, from),
        series_sk(event_type, resolution, to),
    )
}

/// `USER#{userId}#DEVICE#{deviceId}` / `SERIES#{type}#{resolution}#{start}`.
pub fn primary_key(
    user: &UserId,
    device: &DeviceId,
    event_type: &EventType,
    resolution: Resolution,
    start: &Timestamp,
) -> PrimaryKey {
    PrimaryKey {
        pk: event_pk(user, device),
        sk: series_sk(event_type, resolution, start),
    }
}

/// A summary item's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user, "DEVICE", device], ["SERIES", event_type, resolution, start]) => key
            .matched(|| {
                Ok(ItemKey::Series {
                    user: UserId::parse(*user)?,
                    device: DeviceId::parse(*device)?,
                    event_type: EventType::parse(*event_type)?,
                    resolution: Resolution::parse(resolution).ok_or_else(|| {
                        ValidationError::new("key", format!("no resolution {resolution}"))
                    })?,
                    start: Timestamp::parse_field("start", start)?,
                })
            }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (a test in `model::entities` checks them
/// against the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "series",
    pk: "USER#${userId}#DEVICE#${deviceId}",
    sk: "SERIES#${type}#${resolution}#${start}",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::readings::EventValue;
    use crate::model::series::{five_minute_buckets, Resolution};

    #[test]
    fn a_summary_item_round_trips_its_key_and_buckets() {
        let start = Timestamp::parse_field("start", "2026-01-01T02:00:00Z").unwrap();
        let values = [EventValue::Number(21.5), EventValue::Text("door".into())];
        let at = start.epoch_millis();
        let item = SeriesItem {
            user_id: UserId::parse("u").unwrap(),
            device_id: DeviceId::parse("d").unwrap(),
            event_type: EventType::parse("power").unwrap(),
            resolution: Resolution::FiveMinutes,
            start,
            buckets: five_minute_buckets([(at, &values[0]), (at + 60_000, &values[1])]),
            ids: {
                let mut ids = BucketIds::default();
                ids.insert(at, "a");
                ids.insert(at + 60_000, "b");
                ids
            },
            ttl: 1_800_000_000,
            registered_at: Some(1_790_000_000_000),
        };
        let stored = item.to_item(&ShardCounts::default()).unwrap();
        assert_eq!(
            stored["SK"].as_s().unwrap(),
            "SERIES#power#5m#2026-01-01T02:00:00.000Z"
        );
        assert_eq!(stored["PK"].as_s().unwrap(), "USER#u#DEVICE#d");
        assert_eq!(stored["reg"].as_n().unwrap(), "1790000000000");
        assert_eq!(SeriesItem::from_item(stored).unwrap(), item);
        let template = KEY_TEMPLATE.sk.replace("${type}", "power");
        assert!(template.starts_with("SERIES#power#"));
        let (low, high) = series_sk_range(&item.event_type, Resolution::Hour, &start, &start);
        assert!(low <= high && low.starts_with("SERIES#power#1h#"));
    }
}
