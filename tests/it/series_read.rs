//! `GET /me/devices/{deviceId}/series` (AP-29) end to end on DynamoDB Local: the 400s (each
//! naming its field, the table unchanged), the 404 of another owner's device, `auto`'s choice,
//! the buckets' shape (text types counted only) against a recompute of the readings, the read
//! budget for a day at 5 minutes, 30 days at hours and a year at days of a device reporting
//! every minute, and raw paging (AP-04) over the same device for comparison.

use fleet_testkit::minute_meter::MinuteMeter;
use fleet_testkit::reference::{ALICE, BOB};
use fleet_tests::*;
use serde_json::Value;
use shared::model::ids::{DeviceId, UserId};
use shared::model::series::Resolution;
use shared::model::timestamp::Timestamp;
use shared::ops::pattern::BudgetScale;
use shared::FleetTable;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
const METER: &str = "series-meter";

/// A per-minute meter of `days` with its door texts, registered for Alice and its summaries
/// stored as ingest keeps them.
async fn meter(table: &FleetTable, days: i64) -> MinuteMeter {
    let meter = MinuteMeter::new(Timestamp::now().epoch_millis(), days, true);
    register_device(table, ALICE, METER).await;
    let (user, device) = (
        UserId::parse(ALICE).unwrap(),
        DeviceId::parse(METER).unwrap(),
    );
    meter.store(table, &user, &device, true).await.unwrap();
    meter
}

fn series(device: &str, params: &[(&str, &str)]) -> ApiRequest {
    let mut request = ApiRequest::get(&format!("/me/devices/{device}/series")).caller(ALICE);
    for (k, v) in params {
        request = request.query(k, v);
    }
    request
}

fn at(ms: i64) -> String {
    Timestamp::from_epoch_millis(ms).unwrap().to_string()
}

/// Checks an answer's buckets against a recompute of the meter's `event_type` over `[from, to)`.
fn assert_buckets(
    body: &Value,
    meter: &MinuteMeter,
    event_type: &str,
    resolution: Resolution,
    from: i64,
    to: i64,
) {
    let want = meter.recompute(event_type, resolution, from, to);
    let got = body["buckets"].as_array().unwrap();
    assert_eq!(got.len(), want.0.len(), "{resolution:?} bucket count");
    for (g, (start, w)) in got.iter().zip(&want.0) {
        assert_eq!(g["start"], at(*start));
        assert_eq!(g["count"], w.count);
        match w.numbers() {
            Some((min, max, sum, avg)) => {
                assert_eq!(g["min"].as_f64(), Some(min), "{g}");
                assert_eq!(g["max"].as_f64(), Some(max), "{g}");
                assert_eq!(g["sum"].as_f64(), Some(sum), "{g}");
                assert_eq!(g["avg"].as_f64(), Some(avg), "{g}");
            }
            None => {
                let keys: Vec<&String> = g.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["count", "start"], "counts only: {g}");
            }
        }
    }
}

#[tokio::test]
async fn bad_requests_name_their_field_and_another_owners_device_is_a_404() {
    let table = fresh_table().await;
    meter(&table, 2).await;
    let before = table_contents(&table).await;
    let now = Timestamp::now();
    let old = now.plus_seconds(-100 * 86_400).to_string();
    let ancient = now.plus_seconds(-6 * 365 * 86_400).to_string();
    let cases: [(&[(&str, &str)], &str); 8] = [
        (&[], "type"),
        (&[("type", "power"), ("resolution", "15m")], "resolution"),
        (&[("type", "power"), ("resolution", "")], "resolution"),
        (
            &[
                ("type", "power"),
                ("from", "2026-01-02T00:00:00Z"),
                ("to", "2026-01-01T00:00:00Z"),
            ],
            "from",
        ),
        (&[("type", "power"), ("from", "yesterday")], "from"),
        (
            &[("type", "power"), ("from", &old), ("resolution", "5m")],
            "from",
        ),
        (&[("type", "power"), ("from", &ancient)], "from"),
        (&[("type", "power"), ("to", "later")], "to"),
    ];
    for (params, field) in cases {
        let a = dashboard(&table, series(METER, params)).await;
        assert_eq!(
            (a.status, a.error_code(), a.error_field()),
            (400, "invalid_request", field),
            "{params:?}: {:?}",
            a.body
        );
        assert_eq!(a.used.requests(), 0, "refused before any read");
    }
    let theirs = dashboard(&table, series(METER, &[("type", "power")]).caller(BOB)).await;
    assert_eq!((theirs.status, theirs.error_code()), (404, "not_found"));
    let unknown = dashboard(&table, series("no-such-meter", &[("type", "power")])).await;
    assert_eq!((unknown.status, unknown.error_code()), (404, "not_found"));
    assert_eq!(table_contents(&table).await, before, "reads change nothing");
}

#[tokio::test]
async fn auto_picks_the_resolution_and_every_bucket_equals_a_recompute() {
    let table = fresh_table().await;
    let meter = meter(&table, 50).await;
    let now = meter.now;
    for (from, to, want) in [
        (now - DAY, now, Resolution::FiveMinutes),
        (now - 30 * DAY, now, Resolution::Hour),
        (now - 45 * DAY, now - 3 * DAY + 17_000, Resolution::Day),
        (
            now - 3 * DAY - 5 * HOUR,
            now - HOUR / 2,
            Resolution::FiveMinutes,
        ),
    ] {
        for name in ["power", "door"] {
            let a = dashboard(
                &table,
                series(
                    METER,
                    &[("type", name), ("from", &at(from)), ("to", &at(to))],
                ),
            )
            .await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            assert_eq!(a.body["resolution"], want.as_str());
            assert_eq!(a.body["deviceId"], METER);
            assert_eq!(a.body["type"], name);
            assert_eq!(a.body["from"], at(from));
            assert_eq!(a.body["to"], at(to));
            assert_buckets(&a.body, &meter, name, want, from, to);
            assert!(a.used.requests() <= 3, "{:?}", a.used.operations);
        }
    }
    // Each resolution asked for by name, over the same day.
    for resolution in Resolution::ALL {
        let a = dashboard(
            &table,
            series(
                METER,
                &[
                    ("type", "power"),
                    ("from", &at(now - DAY)),
                    ("resolution", resolution.as_str()),
                ],
            ),
        )
        .await;
        assert_eq!(a.body["resolution"], resolution.as_str());
        let to = Timestamp::parse_field("to", a.body["to"].as_str().unwrap())
            .unwrap()
            .epoch_millis();
        assert_buckets(&a.body, &meter, "power", resolution, now - DAY, to);
    }
    // The text type: counts only.
    let a = dashboard(&table, series(METER, &[("type", "door")])).await;
    assert!(!a.body["buckets"].as_array().unwrap().is_empty());
    assert!(a.body["buckets"][0].get("min").is_none());
    // A type the device never sent: no buckets.
    let a = dashboard(&table, series(METER, &[("type", "pressure")])).await;
    assert_eq!(
        (a.status, a.body["buckets"].as_array().unwrap().len()),
        (200, 0)
    );
    // The dashboard's sparkline: the first numeric type's last 24 hours, no extra read.
    let d = dashboard(&table, ApiRequest::get("/me/dashboard").caller(ALICE)).await;
    assert_eq!(d.used.requests(), 1);
    let trail = &d.body["devices"][0]["trail"];
    assert_eq!(trail["type"], "power", "{trail}");
    let hours = trail["hours"].as_array().unwrap();
    assert!((23..=24).contains(&hours.len()), "{} hours", hours.len());
    // From 24 hours back: the trail holds 23 or 24 hours, depending on where in the hour the
    // test runs.
    let exact = meter.recompute(
        "power",
        Resolution::Hour,
        Resolution::Hour.bucket_start(now) - 24 * HOUR,
        now,
    );
    for h in hours {
        let start = Timestamp::parse_field("start", h["start"].as_str().unwrap())
            .unwrap()
            .epoch_millis();
        let avg = exact.0[&start].numbers().unwrap().3;
        // Quantized to 1/254 of the trail's range (about 10).
        assert!(
            (h["avg"].as_f64().unwrap() - avg).abs() < 0.05,
            "{h} vs {avg}"
        );
    }
}

/// The read budget: a day at 5 minutes, 30 days at hours and a year at days of a
/// device reporting every minute are each one API request, at most 3 DynamoDB requests and 8
/// read units. Prints the figures (`--nocapture`).
#[tokio::test]
async fn a_day_a_month_and_a_year_each_read_within_the_budget() {
    let table = fresh_table().await;
    let meter = meter(&table, 366).await;
    let now = meter.now;
    let pattern = shared::model::pattern_id::PatternId::DeviceSeries.definition();
    for (label, from, want, buckets) in [
        ("1 day", now - DAY, Resolution::FiveMinutes, 288..=289),
        ("30 days", now - 30 * DAY, Resolution::Hour, 720..=721),
        ("1 year", now - 365 * DAY, Resolution::Day, 365..=366),
    ] {
        let started = std::time::Instant::now();
        let a = dashboard(
            &table,
            series(
                METER,
                &[("type", "power"), ("from", &at(from)), ("to", &at(now))],
            ),
        )
        .await;
        let took = started.elapsed();
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_eq!(a.body["resolution"], want.as_str());
        let n = a.body["buckets"].as_array().unwrap().len();
        assert!(buckets.contains(&n), "{label}: {n} buckets");
        assert_buckets(&a.body, &meter, "power", want, from, now);
        println!(
            "series {label}: 1 API request, {} DynamoDB requests {:?}, {} read units, {} buckets, {:.1} ms",
            a.used.requests(),
            a.used.operations,
            a.used.read_units,
            n,
            took.as_secs_f64() * 1000.0
        );
        assert!(a.used.requests() <= 3, "{label}: {:?}", a.used.operations);
        assert!(
            a.used.read_units <= 8.0,
            "{label}: {} RCU",
            a.used.read_units
        );
        pattern
            .check(&a.used, &BudgetScale::one())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
    }
}

/// Stores `meter`'s `power` readings as raw events of `device` (bypassing ingest: only AP-04's
/// reads are measured), 25 to a BatchWriteItem, eight at a time.
async fn store_raw_events(table: &FleetTable, meter: &MinuteMeter, device: &str) {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    use futures::StreamExt;
    use shared::model::entities::event::EventItem;
    use shared::model::entities::Entity;
    use shared::model::ids::{DeviceType, EventId, EventType};
    let user = UserId::parse(ALICE).unwrap();
    let device = DeviceId::parse(device).unwrap();
    let requests: Vec<WriteRequest> = meter.readings["power"]
        .iter()
        .map(|(at, value)| {
            let item = EventItem {
                user_id: user.clone(),
                device_id: device.clone(),
                id: EventId::parse(format!("m{at}")).unwrap(),
                event_type: EventType::parse("power").unwrap(),
                value: value.clone(),
                at: Timestamp::from_epoch_millis(*at).unwrap(),
                device_name: "Boiler room".into(),
                device_type: DeviceType::parse("thermostat").unwrap(),
                ttl: at / 1000 + 3650 * 86_400,
                registered_at: None,
            };
            let put = PutRequest::builder()
                .set_item(Some(item.to_item(&table.config.shards).unwrap()))
                .build()
                .unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect();
    let chunks: Vec<Vec<WriteRequest>> = requests.chunks(25).map(<[_]>::to_vec).collect();
    futures::stream::iter(chunks)
        .for_each_concurrent(8, |chunk| async move {
            let left = shared::store::dynamo::write_all(
                table,
                chunk,
                &mut shared::store::retry::Retry::attempts(8),
            )
            .await
            .unwrap();
            assert!(left.is_empty());
        })
        .await;
}

/// Pages `GET /me/devices/{METER}/events` over `[from, now)` 100 at a time, as the console did
/// before summaries; returns (API requests, DynamoDB requests, read units, events, ms).
async fn raw_paging(table: &FleetTable, from: i64, now: i64) -> (u32, u32, f64, usize, f64) {
    let started = std::time::Instant::now();
    let (mut calls, mut requests, mut units, mut events) = (0, 0, 0.0, 0);
    let mut cursor: Option<String> = None;
    loop {
        let mut request = ApiRequest::get(&format!("/me/devices/{METER}/events"))
            .caller(ALICE)
            .query("from", &at(from))
            .query("to", &at(now))
            .query("limit", "100");
        if let Some(c) = &cursor {
            request = request.query("cursor", c);
        }
        let a = dashboard(table, request).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        calls += 1;
        requests += a.used.requests();
        units += a.used.read_units;
        events += a.body["events"].as_array().unwrap().len();
        cursor = a.body["cursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    (
        calls,
        requests,
        units,
        events,
        started.elapsed().as_secs_f64() * 1000.0,
    )
}

/// What the console paid before summaries, for the closing figures: a day of a per-minute
/// device paged through AP-04 100 events at a time (`SERIES_RAW_DAYS=30` for a month).
#[tokio::test]
async fn raw_paging_of_the_same_device_for_comparison() {
    let days: i64 = std::env::var("SERIES_RAW_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(1);
    let table = fresh_table().await;
    let meter = MinuteMeter::new(Timestamp::now().epoch_millis(), days, false);
    register_device(&table, ALICE, METER).await;
    store_raw_events(&table, &meter, METER).await;
    let now = meter.now;
    let (calls, requests, units, events, ms) = raw_paging(&table, now - days * DAY, now).await;
    println!(
        "raw paging {days} day(s): {calls} API requests, {requests} DynamoDB requests, {units} read units, {events} events, {ms:.0} ms"
    );
    let want = meter.readings["power"].range(now - days * DAY..).count();
    assert_eq!(events, want);
    assert!(
        calls as usize >= want.div_ceil(100),
        "one request per 100 events"
    );
}

/// Through ingest: readings sent in reversed batches, one batch replayed, then read back
/// through the route at 5 minutes and hours, equal to a recompute of what was sent.
#[tokio::test]
async fn readings_ingested_read_back_through_the_route_exactly() {
    use serde_json::json;
    use shared::ops::ingest::{IngestConfig, Ingestor};
    let table = fresh_table().await;
    let token = register_device(&table, ALICE, METER).await;
    let ingestor = std::sync::Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let now = Timestamp::now().epoch_millis();
    let start = Resolution::FiveMinutes.bucket_start(now) - 3 * HOUR;
    let sent: Vec<(i64, f64)> = (0..180)
        .map(|i| (start + i * MINUTE + 1_234, 20.0 + (i % 13) as f64 * 0.7))
        .collect();
    let batch = |readings: &[(i64, f64)]| {
        let events: Vec<Value> = readings
            .iter()
            .rev()
            .map(|(at_ms, v)| json!({"id": format!("p{at_ms}"), "type": "power", "value": v, "at": at(*at_ms)}))
            .collect();
        ingest_request(METER, &token, Value::Array(events))
    };
    for chunk in sent.chunks(60).chain(sent.chunks(60).take(1)) {
        let a = ingest(&ingestor, batch(chunk)).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
    }
    let mut readings = MinuteMeter {
        now,
        readings: Default::default(),
    };
    readings.readings.insert(
        "power".into(),
        sent.iter()
            .map(|(at_ms, v)| (*at_ms, shared::model::readings::EventValue::Number(*v)))
            .collect(),
    );
    for resolution in [Resolution::FiveMinutes, Resolution::Hour] {
        let a = dashboard(
            &table,
            series(
                METER,
                &[
                    ("type", "power"),
                    ("from", &at(start)),
                    ("to", &at(now)),
                    ("resolution", resolution.as_str()),
                ],
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        assert_buckets(&a.body, &readings, "power", resolution, start, now);
        assert!(a.used.requests() <= 3);
    }
}

/// Issue 38 item 7: for a day not yet rolled (its hours still in 5-minute blocks), a `1d` or
/// `1h` read with bounds inside the day returns every overlapping bucket whole, from the
/// blocks before `from` and after `to` too. The meter is laid out at 15:30 two days ago, so
/// its day is unrolled whatever time the test runs.
#[tokio::test]
async fn unaligned_bounds_inside_an_unrolled_day_return_whole_buckets() {
    let table = fresh_table().await;
    let today = Resolution::Day.bucket_start(Timestamp::now().epoch_millis());
    let day = today - 2 * DAY;
    let meter = MinuteMeter::new(day + 15 * HOUR + 30 * MINUTE, 5, true);
    register_device(&table, ALICE, METER).await;
    let (user, device) = (
        UserId::parse(ALICE).unwrap(),
        DeviceId::parse(METER).unwrap(),
    );
    meter.store(&table, &user, &device, true).await.unwrap();
    for (from, to) in [
        // Both bounds inside the unrolled day: before and after are blocks.
        (day + 9 * HOUR + 30 * MINUTE, day + 12 * HOUR + 10 * MINUTE),
        // From inside the day to after its open buckets.
        (day + 9 * HOUR + 30 * MINUTE, day + DAY + 10 * HOUR),
        // From inside a rolled day into the unrolled one.
        (day - DAY + 9 * HOUR + 30 * MINUTE, day + 10 * HOUR),
        (
            day - DAY + 9 * HOUR + 30 * MINUTE,
            day + 3 * HOUR + 10 * MINUTE,
        ),
    ] {
        for resolution in [Resolution::Day, Resolution::Hour] {
            let a = dashboard(
                &table,
                series(
                    METER,
                    &[
                        ("type", "power"),
                        ("from", &at(from)),
                        ("to", &at(to)),
                        ("resolution", resolution.as_str()),
                    ],
                ),
            )
            .await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            assert_buckets(&a.body, &meter, "power", resolution, from, to);
            assert!(a.used.requests() <= 3, "{:?}", a.used.operations);
        }
    }
}

/// Issue 38 item 5: a deleted device's events route is a 404 at once (it answered 200 with the
/// deleted device's events until the daily purge); a device registered again under the id
/// reads an empty series for every type the old one had, at every resolution; the daily
/// purge deletes a deleted device's summary items (blocks, day and month items) with its
/// events.
#[tokio::test]
async fn a_deleted_device_reads_nothing_and_its_summaries_are_purged() {
    use shared::model::entities::EntityType;
    use shared::ops::analytics::{run_daily_report, RunPlan};
    let table = fresh_table().await;
    let token = register_device(&table, ALICE, METER).await;
    let ingestor = std::sync::Arc::new(shared::ops::ingest::Ingestor::new(
        table.clone(),
        shared::ops::ingest::IngestConfig::default(),
    ));
    let sent = ingest(
        &ingestor,
        ingest_request(
            METER,
            &token,
            serde_json::json!([
                {"id": "e1", "type": "power", "value": 20.5, "at": ago(120)},
                {"id": "e2", "type": "power", "value": 21.5, "at": ago(60)},
            ]),
        ),
    )
    .await;
    assert_eq!(sent.status, 200, "{:?}", sent.body);
    let meter = MinuteMeter::new(Timestamp::now().epoch_millis(), 2, true);
    let (user, device) = (
        UserId::parse(ALICE).unwrap(),
        DeviceId::parse(METER).unwrap(),
    );
    meter.store(&table, &user, &device, true).await.unwrap();
    let events = |table: &FleetTable| {
        let table = table.clone();
        async move {
            dashboard(
                &table,
                ApiRequest::get(&format!("/me/devices/{METER}/events")).caller(ALICE),
            )
            .await
        }
    };
    let before = events(&table).await;
    assert_eq!(before.status, 200);
    assert_eq!(before.body["events"].as_array().unwrap().len(), 2);

    let deleted = device_updates(
        &table,
        ApiRequest::delete(&format!("/me/devices/{METER}")).caller(ALICE),
    )
    .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    let after = events(&table).await;
    assert_eq!(
        (after.status, after.error_code()),
        (404, "not_found"),
        "{:?}",
        after.body
    );

    register_device(&table, ALICE, METER).await;
    let now = Timestamp::now().epoch_millis();
    for name in ["power", "door"] {
        for (resolution, from) in [
            (Resolution::FiveMinutes, now - DAY),
            (Resolution::Hour, now - 3 * DAY),
            (Resolution::Day, now - 30 * DAY),
        ] {
            let a = dashboard(
                &table,
                series(
                    METER,
                    &[
                        ("type", name),
                        ("from", &at(from)),
                        ("resolution", resolution.as_str()),
                    ],
                ),
            )
            .await;
            assert_eq!(a.status, 200, "{:?}", a.body);
            assert_eq!(
                a.body["buckets"].as_array().unwrap().len(),
                0,
                "{name} {resolution:?}: the old device's buckets"
            );
        }
    }

    // Deleted again, the daily run purges the old device's events and summary items (while
    // the id is registered again, the partition's summaries may be the new device's: kept).
    let deleted = device_updates(
        &table,
        ApiRequest::delete(&format!("/me/devices/{METER}")).caller(ALICE),
    )
    .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    let summaries = |items: &[shared::model::schema::Item]| {
        items
            .iter()
            .filter(|i| entity_type(i) == Some(EntityType::Series))
            .count()
    };
    assert!(summaries(&table_contents(&table).await) > 0);
    let day =
        shared::model::timestamp::Day::parse_field("date", &Timestamp::now().to_string()[..10])
            .unwrap();
    let plan = RunPlan::new(
        day,
        1,
        std::time::Instant::now() + std::time::Duration::from_secs(60),
    )
    .unwrap();
    run_daily_report(&table, &plan).await.unwrap();
    let left = table_contents(&table).await;
    assert_eq!(summaries(&left), 0, "summary items left after the purge");
    assert!(
        !left
            .iter()
            .any(|i| entity_type(i) == Some(EntityType::Event)),
        "events left after the purge"
    );
}

/// Every event of `device` in `[from, to]` through AP-04, page after page: (ids, pages).
async fn all_events(table: &FleetTable, device: &str, from: i64, to: i64) -> (Vec<String>, usize) {
    let (mut ids, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let mut request = ApiRequest::get(&format!("/me/devices/{device}/events"))
            .caller(ALICE)
            .query("from", &at(from))
            .query("to", &at(to))
            .query("limit", "100");
        if let Some(c) = &cursor {
            request = request.query("cursor", c);
        }
        let a = dashboard(table, request).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        pages += 1;
        for e in a.body["events"].as_array().unwrap() {
            ids.push(e["id"].as_str().unwrap().to_string());
        }
        match a.body["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (ids, pages),
        }
    }
}

/// Issue 38 item 5, the fence: a device deleted and registered again at once under the same
/// id (no purge run) reads none of the old device's history, neither its summaries (blocks,
/// day and month items its flushes and rolls wrote) nor its raw events; once the new device
/// sends (a late reading into a bucket and day the old device's items hold among them), its
/// series is exactly its own readings at every resolution; the daily purge then deletes
/// every item of the old registration and keeps every item of the new one, its late reading
/// from before the deletion included.
#[tokio::test]
async fn a_device_registered_again_reads_only_its_own_history_and_the_purge_keeps_it() {
    use serde_json::json;
    use shared::model::entities::event::EventItem;
    use shared::model::entities::series::SeriesItem;
    use shared::model::entities::{Entity, EntityType};
    use shared::model::readings::EventValue;
    use shared::ops::analytics::{run_daily_report, RunPlan};
    use shared::ops::ingest::{IngestConfig, Ingestor};
    let table = fresh_table().await;
    let now = Timestamp::now().epoch_millis();
    let start = Resolution::Day.bucket_start(now) - 3 * DAY;
    let send = |ingestor: std::sync::Arc<Ingestor>, token: String, events: Vec<Value>| {
        let table = table.clone();
        async move {
            let _ = &table;
            let a = ingest(
                &ingestor,
                ingest_request(METER, &token, Value::Array(events)),
            )
            .await;
            assert_eq!(a.status, 200, "{:?}", a.body);
        }
    };
    // The old device: power and level every 15 minutes for three days and more, oldest first,
    // so its flushes and rolls write blocks, day items and month items.
    let old_token = register_device(&table, ALICE, METER).await;
    let old_ingestor = std::sync::Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let mut old_events = Vec::new();
    let mut t = start + 60_000;
    while t < now - 10 * MINUTE {
        for (kind, value) in [("power", 20.0 + (t / 300_000 % 7) as f64), ("level", 3.5)] {
            old_events.push(
                json!({"id": format!("o{kind}{t}"), "type": kind, "value": value, "at": at(t)}),
            );
        }
        t += 15 * MINUTE;
    }
    for chunk in old_events.chunks(100) {
        send(old_ingestor.clone(), old_token.clone(), chunk.to_vec()).await;
    }
    let series_items = |items: &[shared::model::schema::Item]| {
        items
            .iter()
            .filter(|i| entity_type(i) == Some(EntityType::Series))
            .map(|i| SeriesItem::from_item(i.clone()).unwrap())
            .collect::<Vec<_>>()
    };
    let old_items = series_items(&table_contents(&table).await);
    for resolution in Resolution::ALL {
        assert!(
            old_items.iter().any(|i| i.resolution == resolution),
            "the old device wrote no {resolution:?} item"
        );
    }

    let deleted = device_updates(
        &table,
        ApiRequest::delete(&format!("/me/devices/{METER}")).caller(ALICE),
    )
    .await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    let new_token = register_device(&table, ALICE, METER).await;
    let ranges = fence_ranges(start);
    for kind in ["power", "level"] {
        for (resolution, from) in ranges {
            let body = read_until_now(&table, kind, resolution, from).await;
            assert_eq!(
                body["buckets"].as_array().unwrap().len(),
                0,
                "registered again, before sending: the old device's {kind} {resolution:?} buckets"
            );
        }
    }
    let (ids, pages) = all_events(&table, METER, start - HOUR, now + MINUTE).await;
    assert!(
        ids.is_empty(),
        "registered again, before sending: {} of the old device's events in {pages} pages",
        ids.len()
    );

    // The new device sends the last half hour, then a reading two days late, into a bucket,
    // a block and a day the old device's items cover.
    let new_ingestor = std::sync::Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    let mut sent: Vec<(i64, f64)> = (0..30)
        .map(|i| (now - 30 * MINUTE + i * MINUTE, 40.0 + i as f64 * 0.5))
        .collect();
    let as_events = |readings: &[(i64, f64)]| -> Vec<Value> {
        readings
            .iter()
            .map(|(t, v)| json!({"id": format!("n{t}"), "type": "power", "value": v, "at": at(*t)}))
            .collect()
    };
    send(new_ingestor.clone(), new_token.clone(), as_events(&sent)).await;
    let late = (start + DAY + 10 * HOUR + 2 * MINUTE, 99.25);
    send(new_ingestor.clone(), new_token.clone(), as_events(&[late])).await;
    sent.push(late);
    // Every one of these is from before the deletion instant, in the range one purge unit
    // reads: under `PURGE_PER_RUN` whatever the time of day, so one daily run finishes it (at
    // 10-minute steps the range passed 1,000 after 09:00 UTC and the purge rightly left the
    // summaries to the next run).
    assert!(
        old_events.len() + sent.len() < shared::ops::analytics::PURGE_PER_RUN as usize,
        "{} events for one purge unit",
        old_events.len() + sent.len()
    );
    let mut own = MinuteMeter {
        now,
        readings: Default::default(),
    };
    own.readings.insert(
        "power".into(),
        sent.iter()
            .map(|(t, v)| (*t, EventValue::Number(*v)))
            .collect(),
    );
    only_its_own(&table, &own, start, "after the new device sent").await;

    // The daily purge: the old registration's events and summary items go, the new one's stay.
    let day =
        shared::model::timestamp::Day::parse_field("date", &Timestamp::now().to_string()[..10])
            .unwrap();
    let plan = RunPlan::new(
        day,
        1,
        std::time::Instant::now() + std::time::Duration::from_secs(60),
    )
    .unwrap();
    run_daily_report(&table, &plan).await.unwrap();
    let left = table_contents(&table).await;
    let stamp = left
        .iter()
        .find(|i| entity_type(i) == Some(EntityType::Device))
        .map(|i| {
            shared::model::entities::device::DeviceItem::from_item(i.clone())
                .unwrap()
                .created_at
                .epoch_millis()
        })
        .unwrap();
    let items = series_items(&left);
    assert!(
        !items.is_empty(),
        "the new device's summary items were purged"
    );
    assert!(
        items.iter().all(|i| i.registered_at == Some(stamp)),
        "summary items of another registration left (the new one is {stamp}): {:?}",
        items
            .iter()
            .filter(|i| i.registered_at != Some(stamp))
            .map(|i| (
                i.event_type.to_string(),
                i.resolution,
                i.start,
                i.registered_at
            ))
            .collect::<Vec<_>>()
    );
    let events: Vec<EventItem> = left
        .iter()
        .filter(|i| entity_type(i) == Some(EntityType::Event))
        .map(|i| EventItem::from_item(i.clone()).unwrap())
        .collect();
    assert_eq!(events.len(), sent.len(), "events left after the purge");
    assert!(events.iter().all(|e| e.registered_at == Some(stamp)));
    only_its_own(&table, &own, start, "after the purge").await;
}

/// The ranges the fence test reads: 5 minutes, hours and days over the old device's history.
fn fence_ranges(start: i64) -> [(Resolution, i64); 3] {
    [
        (Resolution::FiveMinutes, start),
        (Resolution::Hour, start - DAY),
        (Resolution::Day, start - 40 * DAY),
    ]
}

/// `kind` of the meter device at `resolution` from `from` to a minute from now.
async fn read_until_now(
    table: &FleetTable,
    kind: &str,
    resolution: Resolution,
    from: i64,
) -> Value {
    let a = dashboard(
        table,
        series(
            METER,
            &[
                ("type", kind),
                ("from", &at(from)),
                ("to", &at(Timestamp::now().epoch_millis() + MINUTE)),
                ("resolution", resolution.as_str()),
            ],
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    a.body
}

/// The device registered again reads exactly `own` (its power readings) at every
/// resolution, no level (only the old device sent it), and only its own raw events.
async fn only_its_own(table: &FleetTable, own: &MinuteMeter, start: i64, stage: &str) {
    for (resolution, from) in fence_ranges(start) {
        let body = read_until_now(table, "power", resolution, from).await;
        let to = Timestamp::now().epoch_millis() + MINUTE;
        let want = own.recompute("power", resolution, from, to);
        let got = body["buckets"].as_array().unwrap();
        assert_eq!(
            got.len(),
            want.0.len(),
            "{stage}: {resolution:?} buckets, {} of them the new device's",
            want.0.len()
        );
        assert_buckets(&body, own, "power", resolution, from, to);
        let level = read_until_now(table, "level", resolution, from).await;
        assert_eq!(
            level["buckets"].as_array().unwrap().len(),
            0,
            "{stage}: level {resolution:?}"
        );
    }
    let (mut ids, _) = all_events(table, METER, start - HOUR, own.now + MINUTE).await;
    ids.sort();
    let mut want: Vec<String> = own.readings["power"]
        .keys()
        .map(|t| format!("n{t}"))
        .collect();
    want.sort();
    assert_eq!(
        ids.len(),
        want.len(),
        "{stage}: events on the pages, the new device's {}",
        want.len()
    );
    assert_eq!(
        ids, want,
        "{stage}: the events pages hold the new device's only"
    );
}
