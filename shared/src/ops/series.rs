//! AP-29: one event type of a device summarised per 5 minutes, hour or day
//! (`GET /me/devices/{deviceId}/series`, docs/design.md "Reading a series").
//!
//! Three reads at most, whatever the range: the device with its live state (one Query; the
//! state holds the open buckets and where the stored items end), then at most two Queries of
//! the stored summary items, concurrently ([`stored_ranges`]), assembled in memory
//! ([`assemble`]). A 30-day chart is one API request and three DynamoDB requests, not the 432
//! pages of raw events it would take.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use crate::model::entities::event::{registration_stamp, stored_by};
use crate::model::entities::series::{series_sk_range, SeriesItem};
use crate::model::entities::Entity;
use crate::model::error::{FleetError, ValidationError};
use crate::model::expression::{Condition, Expressions};
use crate::model::ids::{DeviceId, EventType, UserId};
use crate::model::keys::event_pk;
use crate::model::pattern_id::PatternId;
use crate::model::series::{
    assemble, block_start, month_start, stored_ranges, Buckets, Resolution, StoredSeries, DAY_MS,
};
use crate::model::settings::FleetConfig;
use crate::model::timestamp::Timestamp;
use crate::ops::devices::read::device_and_state;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{key_range, query, ttl_now};
use crate::store::table::FleetTable;

/// `auto` picks the finest resolution giving at most this many buckets.
pub const AUTO_MAX_BUCKETS: i64 = 1000;
/// No answer holds more buckets than this (five years of days fit): what keeps every read to
/// one page of each Query, whatever resolution the caller names.
pub const MAX_BUCKETS: i64 = 2000;
/// The range when `from` is not given: the day before `to`.
const DEFAULT_RANGE_MS: i64 = DAY_MS;

/// A validated `series` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesRequest {
    /// The event type summarised.
    pub event_type: EventType,
    /// The resolution answered (`auto` resolved).
    pub resolution: Resolution,
    /// Range start (inclusive).
    pub from: Timestamp,
    /// Range end (exclusive).
    pub to: Timestamp,
}

/// How long each resolution is kept, in days: 5 minutes as long as the raw readings.
pub fn kept_days(config: &FleetConfig, resolution: Resolution) -> u32 {
    match resolution {
        Resolution::FiveMinutes => config.retention_days,
        Resolution::Hour => config.hourly_retention_days,
        Resolution::Day => config.daily_retention_days,
    }
}

impl SeriesRequest {
    /// The request the query parameters ask for at `now`, or a 400 naming the field: `type`
    /// missing; `resolution` not `auto`, `5m`, `1h` or `1d`; `from` not before `to`, before
    /// what the resolution keeps, or giving more than [`MAX_BUCKETS`].
    pub fn parse(
        config: &FleetConfig,
        now: Timestamp,
        event_type: Option<&str>,
        from: Option<&str>,
        to: Option<&str>,
        resolution: Option<&str>,
    ) -> Result<Self, ValidationError> {
        let event_type = EventType::parse_field(
            "type",
            event_type.ok_or_else(|| ValidationError::new("type", "is required"))?,
        )?;
        let requested =
            match resolution.unwrap_or("auto") {
                "auto" => None,
                name => Some(Resolution::parse(name).ok_or_else(|| {
                    ValidationError::new("resolution", "must be auto, 5m, 1h or 1d")
                })?),
            };
        let to = match to {
            Some(t) => Timestamp::parse_field("to", t)?,
            None => now,
        };
        let from = match from {
            Some(f) => Timestamp::parse_field("from", f)?,
            None => to.plus_millis(-DEFAULT_RANGE_MS),
        };
        let (from_ms, to_ms) = (from.epoch_millis(), to.epoch_millis());
        if from_ms >= to_ms {
            return Err(ValidationError::new("from", "must be before to"));
        }
        let covers = |r: Resolution| {
            from_ms >= now.epoch_millis() - i64::from(kept_days(config, r)) * DAY_MS
        };
        let resolution = requested.unwrap_or_else(|| {
            Resolution::ALL
                .into_iter()
                .find(|r| covers(*r) && r.buckets_in(from_ms, to_ms) <= AUTO_MAX_BUCKETS)
                .unwrap_or(Resolution::Day)
        });
        if !covers(resolution) {
            return Err(ValidationError::new(
                "from",
                format!(
                    "is before what {} summaries keep ({} days)",
                    resolution.as_str(),
                    kept_days(config, resolution)
                ),
            ));
        }
        let buckets = resolution.buckets_in(from_ms, to_ms);
        if buckets > MAX_BUCKETS {
            return Err(ValidationError::new(
                "from",
                format!(
                    "the range holds {buckets} buckets of {}, at most {MAX_BUCKETS}: a shorter range or a coarser resolution",
                    resolution.as_str()
                ),
            ));
        }
        Ok(Self {
            event_type,
            resolution,
            from,
            to,
        })
    }
}

/// A series as the API returns it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// The device.
    pub device_id: String,
    /// The event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The resolution answered.
    pub resolution: Resolution,
    /// Range start, as asked.
    pub from: String,
    /// Range end, as asked.
    pub to: String,
    /// The buckets overlapping `[from, to)`, whole, oldest first, empty ones left out.
    pub buckets: Vec<SeriesBucket>,
}

/// One bucket as the API returns it: the numbers only when it holds numeric readings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesBucket {
    /// Bucket start (UTC-aligned).
    pub start: String,
    /// Every reading in it (numbers, text, flags).
    pub count: u64,
    /// Smallest numeric reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Largest numeric reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Average of the numeric readings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg: Option<f64>,
    /// Exact sum of the numeric readings, rounded once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<f64>,
}

fn bucket_views(buckets: &Buckets) -> Vec<SeriesBucket> {
    buckets
        .0
        .iter()
        .filter_map(|(start, bucket)| {
            let numbers = bucket.numbers();
            Some(SeriesBucket {
                start: Timestamp::from_epoch_millis(*start)?.to_string(),
                count: bucket.count,
                min: numbers.map(|n| n.0),
                max: numbers.map(|n| n.1),
                sum: numbers.map(|n| n.2),
                avg: numbers.map(|n| n.3),
            })
        })
        .collect()
}

/// The start of the stored item (block, day or month) holding the buckets of `resolution`
/// at `at_ms`.
fn item_start(resolution: Resolution, at_ms: i64) -> i64 {
    match resolution {
        Resolution::FiveMinutes => block_start(at_ms),
        Resolution::Hour => Resolution::Day.bucket_start(at_ms),
        Resolution::Day => month_start(at_ms),
    }
}

/// AP-29, implemented by [`device_series`].
pub const DEVICE_SERIES: AccessPattern = AccessPattern {
    id: PatternId::DeviceSeries,
    description: "one event type of a device summarised per 5 minutes, hour or day over a range (count, min, max, avg, sum)",
    frequency: Frequency::Critical,
    operations: &[Operation::Query, Operation::GetItem],
    index: None,
    key_condition: "PK = USER#{userId} AND SK BETWEEN DEVICE#{deviceId} AND DEVICE#{deviceId}#STATE; then at most two of PK = USER#{userId}#DEVICE#{deviceId} AND SK BETWEEN SERIES#{type}#{resolution}#{first} AND SERIES#{type}#{resolution}#{last}",
    budget: RequestBudget::FixedPlusPlacedState(3),
    // A month of hours of a device reporting every minute: 30 day items under 1 KB each, the
    // open day's blocks and the state, eventually consistent.
    max_read_units: Some(8.0),
    route: Some("GET /me/devices/{deviceId}/series"),
    implemented_by: implemented_by!(device_series),
};

/// AP-29: `request`'s buckets of `user`'s `device` (404 for another user's, an unknown or a
/// deleting device). One Query of the device and its live state (a GetItem more for a state
/// placed on another of a large owner's partitions), then at most two Queries of summary
/// items, concurrently, all eventually consistent: the boundaries come from the state, read
/// first, so an item a flush writes meanwhile is cut where the open buckets begin and nothing
/// is counted twice.
pub async fn device_series(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
    request: &SeriesRequest,
) -> Result<Series, FleetError> {
    let (device_item, state) = device_and_state(table, user, device)
        .await?
        .ok_or(FleetError::NotFound("device"))?;
    // Items another registration under the same id wrote (a deleted device's, until the
    // purge) are not this device's (issue 38 item 5).
    let stamp = registration_stamp(&device_item.created_at);
    let open = state
        .as_ref()
        .and_then(|s| s.series.0.get(request.event_type.as_str()));
    // A type this registration never counted has no summaries: any stored item of it is a
    // deleted device's under the same id, left until the daily purge (issue 38 item 5).
    let Some(open) = open else {
        return Ok(Series {
            device_id: device.to_string(),
            event_type: request.event_type.to_string(),
            resolution: request.resolution,
            from: request.from.to_string(),
            to: request.to.to_string(),
            buckets: Vec::new(),
        });
    };
    let open = Some(open);
    let (from_ms, to_ms) = (request.from.epoch_millis(), request.to.epoch_millis());
    let ranges = stored_ranges(request.resolution, from_ms, to_ms, open);
    let pk = event_pk(user, device);
    let reads = ranges.iter().map(|(resolution, from, to)| {
        stored_items(
            table,
            &pk,
            &request.event_type,
            *resolution,
            item_start(*resolution, *from),
            item_start(*resolution, to - 1),
        )
    });
    let mut stored = StoredSeries::default();
    for item in futures::future::try_join_all(reads)
        .await?
        .into_iter()
        .flatten()
        .filter(|item| stored_by(item.registered_at, stamp))
    {
        let into = match item.resolution {
            Resolution::FiveMinutes => &mut stored.blocks,
            Resolution::Hour => &mut stored.days,
            Resolution::Day => &mut stored.months,
        };
        into.0.extend(item.buckets.0);
    }
    let buckets = assemble(request.resolution, from_ms, to_ms, open, &stored);
    Ok(Series {
        device_id: device.to_string(),
        event_type: request.event_type.to_string(),
        resolution: request.resolution,
        from: request.from.to_string(),
        to: request.to.to_string(),
        buckets: bucket_views(&buckets),
    })
}

/// The unexpired summary items of `event_type` at `resolution` starting from `first` to
/// `last` (epoch ms): one eventually consistent Query (one page: [`MAX_BUCKETS`] bounds it
/// far below 1 MB; a further page is read if ever there is one).
async fn stored_items(
    table: &FleetTable,
    pk: &str,
    event_type: &EventType,
    resolution: Resolution,
    first: i64,
    last: i64,
) -> Result<Vec<SeriesItem>, FleetError> {
    let at = |ms: i64| {
        Timestamp::from_epoch_millis(ms)
            .ok_or_else(|| FleetError::internal("a summary span outside 0000..9999"))
    };
    let (low, high) = series_sk_range(event_type, resolution, &at(first)?, &at(last)?);
    let mut items = Vec::new();
    let mut start: Option<std::collections::HashMap<String, AttributeValue>> = None;
    loop {
        let unexpired =
            Expressions::builder().condition(Condition::above(SeriesItem::TTL, ttl_now()));
        let (page, last_key) = query(
            key_range(table, pk, low.clone(), high.clone(), unexpired)
                .set_exclusive_start_key(start.take()),
        )
        .await?;
        for item in page {
            items.push(SeriesItem::from_item(item)?);
        }
        match last_key {
            Some(key) => start = Some(key),
            None => return Ok(items),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-11-20T12:00:00Z";

    fn parse(
        from: Option<&str>,
        to: Option<&str>,
        resolution: Option<&str>,
    ) -> Result<SeriesRequest, ValidationError> {
        let now = Timestamp::parse_field("now", NOW).unwrap();
        SeriesRequest::parse(
            &FleetConfig::for_table("t"),
            now,
            Some("power"),
            from,
            to,
            resolution,
        )
    }

    fn field(r: Result<SeriesRequest, ValidationError>) -> String {
        r.unwrap_err().field
    }

    #[test]
    fn auto_picks_the_finest_resolution_that_fits_and_is_kept() {
        let to = Some(NOW);
        let at = |from| parse(Some(from), to, None).unwrap().resolution;
        assert_eq!(at("2026-11-19T12:00:00Z"), Resolution::FiveMinutes);
        assert_eq!(at("2026-10-21T12:00:00Z"), Resolution::Hour);
        assert_eq!(at("2025-11-20T12:00:00Z"), Resolution::Day);
        // 3 days: 864 five-minute buckets fit.
        assert_eq!(at("2026-11-17T12:00:00Z"), Resolution::FiveMinutes);
        // A day 100 days ago: past the raw retention (90), so hourly.
        let old = parse(
            Some("2026-08-11T00:00:00Z"),
            Some("2026-08-12T00:00:00Z"),
            None,
        );
        assert_eq!(old.unwrap().resolution, Resolution::Hour);
        // Two years ago: past the hourly retention (400), so daily.
        let older = parse(
            Some("2024-11-01T00:00:00Z"),
            Some("2024-11-02T00:00:00Z"),
            None,
        );
        assert_eq!(older.unwrap().resolution, Resolution::Day);
        let default = parse(None, None, None).unwrap();
        assert_eq!(default.resolution, Resolution::FiveMinutes);
        assert_eq!(
            default.to.epoch_millis() - default.from.epoch_millis(),
            DAY_MS
        );
    }

    #[test]
    fn bad_requests_name_their_field() {
        let now = Timestamp::parse_field("now", NOW).unwrap();
        let config = FleetConfig::for_table("t");
        assert_eq!(
            SeriesRequest::parse(&config, now, None, None, None, None)
                .unwrap_err()
                .field,
            "type"
        );
        assert_eq!(field(parse(None, None, Some("15m"))), "resolution");
        assert_eq!(field(parse(Some(NOW), Some(NOW), None)), "from");
        assert_eq!(
            field(parse(Some("2026-11-21T00:00:00Z"), None, None)),
            "from"
        );
        assert_eq!(field(parse(Some("yesterday"), None, None)), "from");
        assert_eq!(field(parse(None, Some("soon"), None)), "to");
        // Past what each resolution keeps: 5m 90 days, 1h 400, 1d 1826.
        assert_eq!(
            field(parse(Some("2026-08-01T00:00:00Z"), None, Some("5m"))),
            "from"
        );
        assert_eq!(
            field(parse(Some("2025-10-01T00:00:00Z"), None, Some("1h"))),
            "from"
        );
        assert_eq!(
            field(parse(Some("2021-11-01T00:00:00Z"), None, Some("1d"))),
            "from"
        );
        assert_eq!(
            field(parse(Some("2021-11-01T00:00:00Z"), None, None)),
            "from"
        );
        // 30 days at 5 minutes: 8,640 buckets.
        assert_eq!(
            field(parse(Some("2026-10-21T12:00:00Z"), None, Some("5m"))),
            "from"
        );
        assert!(parse(Some("2021-11-21T00:00:00Z"), None, Some("1d")).is_ok());
    }
}
