//! Summaries per 5 minutes, hour and day (issue 32), written by ingest: exact against a
//! recompute of what was sent (shuffles, a replay, late readings, text readings), what they
//! cost in write units by DynamoDB's rules, and how soon a late reading shows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use fleet_testkit::pricing::{self, WriteKind};
use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::device_state::DeviceStateItem;
use shared::model::entities::series::{SeriesItem, SERIES_PREFIX};
use shared::model::entities::{Entity, EntityType};
use shared::model::readings::EventValue;
use shared::model::series::{assemble, Bucket, Buckets, Resolution, StoredSeries};
use shared::model::timestamp::Timestamp;
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::FleetTable;

pub(super) const OWNER: &str = "series-owner";
pub(super) const MINUTE_MS: i64 = 60_000;
pub(super) const DAY_MS: i64 = 86_400_000;

/// What was sent, by (at, id): a replay overwrites the same entry, as the table does.
pub(super) type Sent = BTreeMap<(i64, String), (String, EventValue)>;

pub(super) fn event_json(id: &str, kind: &str, value: &EventValue, at_ms: i64) -> Value {
    let at = Timestamp::from_epoch_millis(at_ms).unwrap().to_string();
    let value = match value {
        EventValue::Number(n) => json!(n),
        EventValue::Text(t) => json!(t),
        EventValue::Flag(f) => json!(f),
    };
    json!({"id": id, "type": kind, "value": value, "at": at})
}

/// A small deterministic generator (the test must be repeatable).
pub(super) struct Lcg(pub(super) u64);

impl Lcg {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// The device's open summaries and stored items of `kind`, as the read route gets them.
pub(super) async fn read_series(
    table: &FleetTable,
    device: &str,
    kind: &str,
) -> (DeviceStateItem, StoredSeries) {
    let state = DeviceStateItem::from_item(
        item(table, &key::state(OWNER, 0, device))
            .await
            .expect("a live state"),
    )
    .unwrap();
    let mut stored = StoredSeries::default();
    let mut start = None;
    loop {
        let out = table
            .client
            .query()
            .table_name(table.name())
            .key_condition_expression("PK = :pk AND begins_with(SK, :sk)")
            .expression_attribute_values(
                ":pk",
                aws_sdk_dynamodb::types::AttributeValue::S(key::event_partition(OWNER, device)),
            )
            .expression_attribute_values(
                ":sk",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("{SERIES_PREFIX}{kind}#")),
            )
            .consistent_read(true)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .unwrap();
        for item in out.items() {
            assert_eq!(EntityType::of(item), Some(EntityType::Series));
            let item = SeriesItem::from_item(item.clone()).unwrap();
            let into = match item.resolution {
                Resolution::FiveMinutes => &mut stored.blocks,
                Resolution::Hour => &mut stored.days,
                Resolution::Day => &mut stored.months,
            };
            for (s, b) in item.buckets.0 {
                assert!(into.0.insert(s, b).is_none(), "one item per bucket");
            }
        }
        match out.last_evaluated_key {
            Some(key) => start = Some(key),
            None => break,
        }
    }
    (state, stored)
}

/// The buckets of `kind` at `resolution` recomputed from what was sent.
pub(super) fn recompute(sent: &Sent, kind: &str, resolution: Resolution) -> Buckets {
    let mut buckets = Buckets::default();
    for ((at, _), (k, value)) in sent {
        if k == kind {
            buckets
                .0
                .entry(resolution.bucket_start(*at))
                .or_insert_with(Bucket::default)
                .record(value);
        }
    }
    buckets
}

/// Every bucket of `kind` at every resolution, as stored items and state assemble them,
/// equals the recompute, bit for bit. Returns the number of buckets compared.
pub(super) async fn assert_exact(
    table: &FleetTable,
    device: &str,
    kind: &str,
    sent: &Sent,
) -> usize {
    let (state, stored) = read_series(table, device, kind).await;
    let open = state.series.0.get(kind);
    assert!(open.is_some(), "the state carries {kind}'s open summaries");
    let from = sent.keys().next().unwrap().0 - DAY_MS;
    let to = sent.keys().next_back().unwrap().0 + DAY_MS;
    let mut compared = 0;
    for resolution in Resolution::ALL {
        let got = assemble(resolution, from, to, open, &stored);
        let want = recompute(sent, kind, resolution);
        let got_starts: Vec<_> = got.0.keys().collect();
        let want_starts: Vec<_> = want.0.keys().collect();
        assert_eq!(
            got_starts, want_starts,
            "{kind} {resolution:?}: the same buckets"
        );
        for ((start, g), w) in got.0.iter().zip(want.0.values()) {
            assert_eq!(
                (g.count, g.numeric, g.min.to_bits(), g.max.to_bits()),
                (w.count, w.numeric, w.min.to_bits(), w.max.to_bits()),
                "{kind} {resolution:?} bucket {start}"
            );
            assert_eq!(
                g.sum.value().to_bits(),
                w.sum.value().to_bits(),
                "{kind} {resolution:?} sum of bucket {start}"
            );
            compared += 1;
        }
    }
    compared
}

#[tokio::test]
async fn thirty_days_of_minute_readings_with_shuffles_a_replay_and_late_readings_summarise_exactly()
{
    let started = Instant::now();
    let table = fresh_table().await;
    let device = "meter-30d";
    let token = register_device(&table, OWNER, device).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let mut rng = Lcg(32);
    let end = Resolution::FiveMinutes.bucket_start(Timestamp::now().epoch_millis()) - MINUTE_MS;
    let start = end - 30 * DAY_MS;
    let minutes = 30 * 24 * 60;
    let mut sent = Sent::new();
    // (at, id, type, value) of one reading a minute; a text reading now and then.
    let mut readings: Vec<(i64, String, String, EventValue)> = (0..minutes)
        .map(|m| {
            let at = start + m * MINUTE_MS + (rng.next() % 50_000) as i64;
            let value = if m % 4999 == 17 {
                EventValue::Text("door open".into())
            } else {
                EventValue::Number(200.0 + (rng.next() % 100_000) as f64 / 1000.0)
            };
            (at, format!("m{m}"), "power".to_string(), value)
        })
        .collect();
    // A few hundred held back and sent 3 to 27 days late (inside the 30 days), and a hundred
    // older than the device's first summaries (30 to 80 days late).
    let mut held = Vec::new();
    let mut i = 0;
    readings.retain(|r| {
        i += 1;
        let keep = !(i % 200 == 7 && r.0 < end - 3 * DAY_MS);
        if !keep {
            held.push(r.clone());
        }
        keep
    });
    let older: Vec<_> = (0..100)
        .map(|k| {
            let at = end - (30 + k % 50) * DAY_MS - (rng.next() % DAY_MS as u64) as i64;
            let at = at.max(end - 80 * DAY_MS);
            (
                at,
                format!("old{k}"),
                "power".to_string(),
                EventValue::Number(f64::from(k as u32) * 0.1),
            )
        })
        .collect();
    let mut batches: Vec<Vec<(i64, String, String, EventValue)>> =
        readings.chunks(90).map(<[_]>::to_vec).collect();
    // Every 40th batch also carries held-back readings at least 3 days older than it.
    let mut late_sent = 0;
    for (b, batch) in batches.iter_mut().enumerate() {
        if b % 8 != 7 {
            continue;
        }
        let newest = batch.iter().map(|r| r.0).max().unwrap();
        let mut taken = 0;
        held.retain(|r| {
            let take = taken < 10 && r.0 < newest - 3 * DAY_MS;
            if take {
                taken += 1;
                batch.push(r.clone());
            }
            !take
        });
        late_sent += taken;
    }
    let mut tail: Vec<_> = held.into_iter().chain(older).collect();
    late_sent += tail.len();
    rng.shuffle(&mut tail);
    batches.extend(tail.chunks(100).map(<[_]>::to_vec));
    let replayed = batches.len() / 2;
    let mut requests = 0;
    let send_started = Instant::now();
    for (b, mut batch) in batches.into_iter().enumerate() {
        rng.shuffle(&mut batch);
        let body = Value::Array(
            batch
                .iter()
                .map(|(at, id, kind, value)| event_json(id, kind, value, *at))
                .collect(),
        );
        for _ in 0..if b == replayed { 2 } else { 1 } {
            let a = ingest(&ingestor, ingest_request(device, &token, body.clone())).await;
            assert_eq!(a.status, 200, "batch {b}: {:?}", a.body);
            requests += 1;
        }
        for (at, id, kind, value) in batch {
            sent.insert((at, id), (kind, value));
        }
    }
    let sending = send_started.elapsed();
    let compared = assert_exact(&table, device, "power", &sent).await;
    let (state, stored) = read_series(&table, device, "power").await;
    let open = &state.series.0["power"];
    eprintln!(
        "30 days of minute readings: {} readings ({late_sent} late) in {requests} requests, sent in {:.1} s ({:.0} ms a request); {compared} buckets compared bit for bit; {} blocks, {} day items' hours, {} month items' days stored; state {} open buckets; test {:.1} s",
        sent.len(),
        sending.as_secs_f64(),
        sending.as_secs_f64() * 1000.0 / requests as f64,
        stored.blocks.0.len(),
        stored.days.0.len(),
        stored.months.0.len(),
        open.open.0.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(late_sent >= 200, "a few hundred late readings: {late_sent}");
    assert!(
        open.rolled_before > start && open.flushed_before > open.rolled_before - DAY_MS,
        "days were rolled and hours flushed"
    );
    assert!(!stored.months.0.is_empty() && !stored.days.0.is_empty());
}

/// Write units of one request's changes with summaries (state and summary items in a
/// transaction when any summary item changed: 2 units per KB) and as the same request would
/// bill without summaries (no summary items, no `series` attribute, single writes).
fn priced(before: &pricing::Snapshot, after: &pricing::Snapshot) -> (u64, u64) {
    let changes = pricing::changes(before, after);
    let is_series = |c: &pricing::ItemChange| c.key.1.starts_with(SERIES_PREFIX);
    let is_state = |c: &pricing::ItemChange| {
        c.after
            .as_ref()
            .or(c.before.as_ref())
            .is_some_and(|i| EntityType::of(i) == Some(EntityType::DeviceState))
    };
    let transaction = changes.iter().any(is_series);
    let with: u64 = changes
        .iter()
        .map(|c| {
            let kind = if transaction && (is_series(c) || is_state(c)) {
                WriteKind::Transaction
            } else {
                WriteKind::Single
            };
            c.write_units(kind)
        })
        .sum();
    let strip = |item: &Option<shared::model::schema::Item>| {
        item.clone().map(|mut i| {
            i.remove(DeviceStateItem::SERIES.name());
            i
        })
    };
    let without: u64 = changes
        .iter()
        .filter(|c| !is_series(c))
        .map(|c| pricing::ItemChange {
            key: c.key.clone(),
            before: strip(&c.before),
            after: strip(&c.after),
        })
        .filter(|c| c.before != c.after)
        .map(|c| c.write_units(WriteKind::Single))
        .sum();
    (with, without)
}

/// Write units per event with and without summaries for a device reporting every
/// `every_minutes`, sending `per_request` events a request, `requests` requests.
async fn units_per_event(
    table: &FleetTable,
    device: &str,
    every_minutes: i64,
    per_request: usize,
    requests: usize,
    step: f64,
) -> (f64, f64) {
    let token = register_device(table, OWNER, device).await;
    let cold = || Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let total = (per_request * requests) as i64;
    let now = Timestamp::now().epoch_millis();
    let first = now - (total + 1) * every_minutes * MINUTE_MS;
    let (mut with, mut without) = (0, 0);
    // Nothing else writes between two requests: one request's `after` is the next one's
    // `before` (a Scan of the whole table each).
    let mut before = pricing::snapshot(table).await.unwrap();
    for r in 0..requests {
        let body = Value::Array(
            (0..per_request)
                .map(|i| {
                    let n = (r * per_request + i) as i64;
                    event_json(
                        &format!("e{n}"),
                        "power",
                        &EventValue::Number(230.0 + (n % 97) as f64 * step),
                        first + n * every_minutes * MINUTE_MS + 1234,
                    )
                })
                .collect(),
        );
        let a = ingest(&cold(), ingest_request(device, &token, body)).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        let after = pricing::snapshot(table).await.unwrap();
        let (w, wo) = priced(&before, &after);
        before = after;
        if std::env::var("SERIES_UNITS_TRACE").is_ok() && w != wo {
            eprintln!("request {r}: {w} vs {wo}");
        }
        with += w;
        without += wo;
    }
    let events = total as f64;
    (with as f64 / events, without as f64 / events)
}

#[tokio::test]
async fn summaries_add_at_most_a_tenth_of_a_write_unit_per_event_for_a_minute_device() {
    // Readings in steps of 0.25 (kept as 4-byte floats, as most meters' readings) and of 0.37
    // (8-byte doubles: larger buckets, so the live state passes one write unit sooner).
    let mut figures = Vec::new();
    for (every, per_request, requests, step) in [
        (1, 100, 15, 0.25),
        (1, 1, 300, 0.25),
        (1, 100, 15, 0.37),
        (1, 1, 300, 0.37),
        (15, 100, 6, 0.25),
        (15, 1, 200, 0.25),
    ] {
        let table = fresh_table().await;
        let device = format!("meter-{every}m-{per_request}");
        let (with, without) =
            units_per_event(&table, &device, every, per_request, requests, step).await;
        eprintln!(
            "device every {every} min, readings in steps of {step}, {per_request}-event requests ({requests}): {with:.3} write units per event with summaries, {without:.3} without: +{:.3}",
            with - without
        );
        figures.push((every, per_request, step, with, without));
    }
    for (every, per_request, step, with, without) in figures {
        // A 15-minute device's single events move its SEEN# and due entries every time
        // (about 6 units without summaries): the goals are a one-minute device's.
        if every == 1 {
            let goal = if per_request == 1 { 3.0 } else { 1.5 };
            assert!(with <= goal, "every {every} min, {per_request}: {with}");
        }
        if every == 1 && (per_request > 1 || step == 0.25) {
            assert!(
                with - without <= 0.1,
                "every minute, {per_request} a request, steps of {step}: {with} vs {without}"
            );
        }
    }
}

#[tokio::test]
async fn a_late_reading_shows_in_its_buckets_when_its_batch_is_answered() {
    let table = fresh_table().await;
    let device = "meter-late";
    let token = register_device(&table, OWNER, device).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let now = Timestamp::now().epoch_millis();
    let mut sent = Sent::new();
    // Three days of 5-minute readings (hours flushed and days rolled), in batches of 100.
    let readings: Vec<(i64, String, EventValue)> = (0..3 * 288)
        .map(|i| {
            (
                now - (3 * 288 - i) * 5 * MINUTE_MS,
                format!("r{i}"),
                EventValue::Number(10.0 + i as f64 * 0.25),
            )
        })
        .collect();
    for batch in readings.chunks(100) {
        let body = Value::Array(
            batch
                .iter()
                .map(|(at, id, v)| event_json(id, "power", v, *at))
                .collect(),
        );
        let a = ingest(&ingestor, ingest_request(device, &token, body)).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        for (at, id, v) in batch {
            sent.insert((*at, id.clone()), ("power".into(), v.clone()));
        }
    }
    // One reading 2 days and 7 minutes late: its day is rolled already.
    let at = now - 2 * DAY_MS - 7 * MINUTE_MS;
    let value = EventValue::Number(1000.5);
    let body = Value::Array(vec![event_json("late-1", "power", &value, at)]);
    let sent_at = Instant::now();
    let a = ingest(&ingestor, ingest_request(device, &token, body)).await;
    let answered = sent_at.elapsed();
    assert_eq!(a.status, 200, "{:?}", a.body);
    sent.insert((at, "late-1".into()), ("power".into(), value));
    let (state, stored) = read_series(&table, device, "power").await;
    let shown = sent_at.elapsed();
    let open = &state.series.0["power"];
    assert!(
        Resolution::Day.bucket_start(at) < open.rolled_before,
        "the late reading's day was rolled before it came"
    );
    for resolution in Resolution::ALL {
        let bucket = resolution.bucket_start(at);
        let got = assemble(resolution, bucket, bucket + 1, Some(open), &stored);
        let want = recompute(&sent, "power", resolution);
        assert_eq!(got.0.get(&bucket), want.0.get(&bucket), "{resolution:?}");
        assert_eq!(got.0[&bucket].max, 1000.5, "{resolution:?} shows it");
    }
    eprintln!(
        "a reading 2 days late: answered in {} ms, in its 5m, 1h and 1d buckets when answered (read back {} ms after sending)",
        answered.as_millis(),
        shown.as_millis()
    );
    assert_exact(&table, device, "power", &sent).await;
}

#[tokio::test]
async fn an_out_of_order_reading_never_drops_counted_readings_whose_raw_events_are_missing() {
    // Issue 38 item 3 (this test encoded the old in-flight wait, now gone with the recompute):
    // the state counts r1..r3 of one open 5-minute bucket, then r2's and r3's raw events go
    // missing (in flight, expired or deleted). An out-of-order reading of that bucket, and its
    // replay, are added to the bucket by its reading identities: no raw reading is read, so
    // nothing counted is dropped and nothing waits.
    let table = fresh_table().await;
    let device = "meter-race";
    let token = register_device(&table, OWNER, device).await;
    let ingestor = Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let bucket =
        Resolution::FiveMinutes.bucket_start(Timestamp::now().epoch_millis() - DAY_MS / 24);
    let reading = |i: i64| {
        (
            bucket + (1 + i) * 40_000,
            format!("r{i}"),
            EventValue::Number(i as f64),
        )
    };
    let batch = |ids: std::ops::RangeInclusive<i64>| {
        Value::Array(
            ids.map(|i| {
                let (at, id, v) = reading(i);
                event_json(&id, "power", &v, at)
            })
            .collect(),
        )
    };
    let sent_through = |last: i64| {
        let mut sent = Sent::new();
        for i in 0..=last {
            let (at, id, v) = reading(i);
            sent.insert((at, id), ("power".into(), v));
        }
        sent
    };
    let status = |body: Value| {
        let ingestor = ingestor.clone();
        let token = token.clone();
        async move { ingest(&ingestor, ingest_request(device, &token, body)).await }
    };
    assert_eq!(status(batch(1..=3)).await.status, 200);
    let take_out = |ids: &'static [&'static str]| {
        let table = table.clone();
        async move {
            let found: Vec<_> = table_contents(&table)
                .await
                .into_iter()
                .filter(|i| entity_type(i) == Some(EntityType::Event))
                .filter(|i| {
                    let e =
                        shared::model::entities::event::EventItem::from_item(i.clone()).unwrap();
                    ids.contains(&e.id.as_str())
                })
                .collect();
            for item in &found {
                table
                    .client
                    .delete_item()
                    .table_name(table.name())
                    .set_key(Some(key_of(item).attributes()))
                    .send()
                    .await
                    .unwrap();
            }
            found
        }
    };
    assert_eq!(take_out(&["r2", "r3"]).await.len(), 2);
    for _ in 0..2 {
        let answer = status(batch(0..=0)).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        let (state, _) = read_series(&table, device, "power").await;
        assert_eq!(
            state.series.0["power"].open.0[&bucket].count, 4,
            "r0 counted once; r1..r3 kept though r2's and r3's raw events are missing"
        );
    }
    assert_exact(&table, device, "power", &sent_through(3)).await;
}
