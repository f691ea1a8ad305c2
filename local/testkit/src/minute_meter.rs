//! A device reporting `power` every minute (and, if asked, a `door` text now and then), with
//! its summaries laid out as ingest keeps them: month items (days) and day items (hours)
//! before the current day, 5-minute blocks of the last four days before the current hour,
//! the current hour open on the live state. The fixture of the `series` read (AP-29): its
//! reference case and its tests on DynamoDB Local, which compare the answers with
//! [`MinuteMeter::recompute`].

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use shared::model::entities::device_state::DeviceStateItem;
use shared::model::entities::series::SeriesItem;
use shared::model::entities::{Entity, ItemKey};
use shared::model::ids::{DeviceId, EventType, UserId};
use shared::model::readings::{EventValue, StoredReading};
use shared::model::series::{
    block_start, five_minute_buckets, month_start, Buckets, OpenSeries, Resolution, SeriesState,
    Trail, BLOCK_MS,
};
use shared::model::timestamp::Timestamp;
use shared::store::dynamo::{put_item, read_consistent, write_all};
use shared::store::retry::Retry;
use shared::store::table::MAX_ATTEMPTS;
use shared::{FleetError, FleetTable};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// The readings of a per-minute meter up to `now`, by type and time (epoch ms).
pub struct MinuteMeter {
    /// The time the fixture is laid out at (epoch ms).
    pub now: i64,
    /// Readings by type, then time.
    pub readings: BTreeMap<String, BTreeMap<i64, EventValue>>,
}

impl MinuteMeter {
    /// `power` every minute from `days` days before `now`'s day up to `now`'s 5 minutes, and
    /// with `text`, 40 `door` texts over the last day.
    pub fn new(now: i64, days: i64, text: bool) -> Self {
        let last = Resolution::FiveMinutes.bucket_start(now) - MINUTE;
        let first = Resolution::Day.bucket_start(now) - days * DAY;
        let power = (first / MINUTE..=last / MINUTE)
            .map(|m| {
                let v = 20.0 + (m % 97) as f64 * 0.1 + (m % 7) as f64 * 0.013;
                (m * MINUTE, EventValue::Number(v))
            })
            .collect();
        let mut readings = BTreeMap::from([("power".to_string(), power)]);
        if text {
            let door = (0..40)
                .map(|i| {
                    let at = last - i * 37 * MINUTE - 17_000;
                    (at, EventValue::Text(format!("open{i}")))
                })
                .collect();
            readings.insert("door".to_string(), door);
        }
        Self { now, readings }
    }

    /// The buckets of `resolution` overlapping `[from, to)`, recomputed from the readings.
    pub fn recompute(
        &self,
        event_type: &str,
        resolution: Resolution,
        from: i64,
        to: i64,
    ) -> Buckets {
        let mut b = Buckets::default();
        let readings = &self.readings[event_type];
        for (at, v) in readings.range(resolution.bucket_start(from)..) {
            let start = resolution.bucket_start(*at);
            if start >= to {
                break;
            }
            b.0.entry(start).or_default().record(v);
        }
        b
    }

    /// The summary items of `user`'s `device` and the open part its live state keeps.
    pub fn summaries(
        &self,
        user: &UserId,
        device: &DeviceId,
    ) -> Result<(Vec<SeriesItem>, SeriesState), FleetError> {
        let hour = Resolution::Hour.bucket_start(self.now);
        let today = Resolution::Day.bucket_start(self.now);
        let ttl = self.now / 1000 + 3650 * 86_400;
        let mut state = SeriesState::default();
        let mut items = Vec::new();
        let slice = |b: &Buckets, from: i64, to: i64| {
            Buckets(b.within(from, to).map(|(s, b)| (*s, b.clone())).collect())
        };
        for (name, readings) in &self.readings {
            let event_type = EventType::parse(name)?;
            let mut item = |resolution, start: i64, buckets: Buckets| -> Result<(), FleetError> {
                if !buckets.0.is_empty() {
                    items.push(SeriesItem {
                        user_id: user.clone(),
                        device_id: device.clone(),
                        event_type: event_type.clone(),
                        resolution,
                        start: Timestamp::from_epoch_millis(start)
                            .ok_or_else(|| FleetError::internal("start out of range"))?,
                        buckets,
                        ids: Default::default(),
                        ttl,
                        registered_at: None,
                    });
                }
                Ok(())
            };
            let fine = five_minute_buckets(readings.iter().map(|(at, v)| (*at, v)));
            let closed = slice(&fine, i64::MIN, today);
            let hours = closed.coarsen(Resolution::Hour);
            let mut months: BTreeMap<i64, Buckets> = BTreeMap::new();
            for (start, b) in &closed.coarsen(Resolution::Day).0 {
                months
                    .entry(month_start(*start))
                    .or_default()
                    .add(*start, b);
            }
            for (month, b) in months {
                item(Resolution::Day, month, b)?;
            }
            let first = readings.keys().next().copied().unwrap_or(today);
            let mut day = Resolution::Day.bucket_start(first);
            while day < today {
                item(Resolution::Hour, day, slice(&hours, day, day + DAY))?;
                day += DAY;
            }
            let mut block = block_start(today - 4 * DAY);
            while block < hour {
                item(
                    Resolution::FiveMinutes,
                    block,
                    slice(&fine, block, (block + BLOCK_MS).min(hour)),
                )?;
                block += BLOCK_MS;
            }
            let mut trail = Trail::default();
            trail.update(&slice(&fine, hour - DAY, hour).coarsen(Resolution::Hour));
            state.0.insert(
                name.clone(),
                OpenSeries {
                    flushed_before: hour,
                    rolled_before: today,
                    open: slice(&fine, hour, i64::MAX),
                    ids: Default::default(),
                    first_block_written: true,
                    trail,
                },
            );
        }
        Ok((items, state))
    }

    /// Stores the summaries of `user`'s registered `device` (placed on partition 0) and puts
    /// their open part on its live state; with `latest`, the newest readings too (as ingest
    /// would have).
    pub async fn store(
        &self,
        table: &FleetTable,
        user: &UserId,
        device: &DeviceId,
        latest: bool,
    ) -> Result<(), FleetError> {
        let (items, series) = self.summaries(user, device)?;
        let requests = items
            .iter()
            .map(|item| {
                let put = PutRequest::builder()
                    .set_item(Some(item.to_item(&table.config.shards)?))
                    .build()
                    .map_err(FleetError::internal)?;
                Ok(WriteRequest::builder().put_request(put).build())
            })
            .collect::<Result<Vec<_>, FleetError>>()?;
        for chunk in requests.chunks(25) {
            let left = write_all(table, chunk.to_vec(), &mut Retry::attempts(MAX_ATTEMPTS)).await?;
            if !left.is_empty() {
                return Err(FleetError::internal("summary fixtures not stored"));
            }
        }
        let key = ItemKey::DeviceState {
            user: user.clone(),
            partition: 0,
            device: device.clone(),
        };
        let mut state: DeviceStateItem = read_consistent(table, &key)
            .await?
            .ok_or_else(|| FleetError::internal("the device has no live state"))?;
        if latest {
            for (name, readings) in &self.readings {
                if let Some((at, value)) = readings.iter().next_back() {
                    state
                        .latest
                        .insert(name.clone(), StoredReading(*at, value.clone()));
                }
            }
            let newest = self
                .readings
                .values()
                .filter_map(|r| r.keys().next_back())
                .max();
            state.last_seen = newest.and_then(|at| Timestamp::from_epoch_millis(*at));
        }
        state.series.0.extend(series.0);
        put_item(table, &state).await
    }
}
