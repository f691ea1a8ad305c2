//! The daily analytics run on DynamoDB Local: exact counts on a dataset spanning several days,
//! users and statuses (checked through `GET /admin/reports/{date}` against hand-computed
//! figures), the purge of a deleted device's events, resuming an interrupted run, and
//! idempotence.

use std::time::{Duration, Instant};

use fleet_tests::*;
use serde_json::{json, Value};
use shared::model::entities::{Entity, EntityType, ItemKey};
use shared::model::ids::{DeviceId, DeviceType, UserId};
use shared::model::status::DeviceStatus;
use shared::model::timestamp::{Day, Timestamp};
use shared::ops::analytics::{run_daily_report, RunPlan};
use shared::ops::devices::delete::delete_device;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::devices::update::{update_device, DevicePatch};
use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::profile::{upsert_profile, ProfileUpdate};
use shared::FleetTable;

const DAY: &str = "2026-11-20";

fn t(text: &str) -> Timestamp {
    Timestamp::parse_field("t", text).unwrap()
}

/// `(user, device, type, [(event type, count, first at)])`; devices after the user's profile.
async fn add_device(
    table: &FleetTable,
    user: &str,
    device: &str,
    kind: &str,
    events: &[(&str, usize, &str)],
) {
    let token = register(table, user, device, kind).await;
    if events.is_empty() {
        return;
    }
    let mut submitted = Vec::new();
    for (kind, count, first) in events {
        for i in 0..*count {
            submitted.push(SubmittedEvent {
                id: Some(format!("{kind}-{first}-{i}").replace(':', "")),
                event_type: kind.to_string(),
                value: json!(i),
                at: t(first).plus_seconds(i as i64 * 60).to_string(),
            });
        }
    }
    send_events(table, device, &token, submitted).await;
}

/// Registers `device` (named after itself, of type `kind`) for `user`; returns its token.
async fn register(table: &FleetTable, user: &str, device: &str, kind: &str) -> String {
    register_device(
        table,
        &UserId::parse(user).unwrap(),
        DeviceRegistration {
            report_every_seconds: None,
            offline_detection: Default::default(),
            device_id: DeviceId::parse(device).unwrap(),
            name: device.into(),
            device_type: DeviceType::parse(kind).unwrap(),
            tags: vec![],
        },
    )
    .await
    .unwrap()
    .token
    .reveal()
    .to_string()
}

/// Ingests `submitted` for `device` (authenticated with `token`), 100 at a time, as of
/// 2026-11-21T00:10Z with a 10-year retention; every event must be stored.
async fn send_events(
    table: &FleetTable,
    device: &str,
    token: &str,
    submitted: Vec<SubmittedEvent>,
) {
    let ingestor = Ingestor::new(table.clone(), patient());
    let registration = ingestor
        .authenticate(&DeviceId::parse(device).unwrap(), token)
        .await
        .unwrap();
    for chunk in submitted.chunks(100) {
        let batch = validate_batch(
            chunk.to_vec(),
            t("2026-11-21T00:10:00Z"),
            3650,
            Duration::from_secs(300),
        )
        .unwrap();
        let outcome = ingestor
            .ingest(
                &registration,
                batch,
                Instant::now() + Duration::from_secs(30),
            )
            .await
            .unwrap();
        assert!(outcome.failed.is_empty(), "{outcome:?}");
    }
}

/// Fixtures are stored whatever the machine's load: retries for as long as the batch's own
/// 30-second deadline (the default 5 s window answers a loaded DynamoDB Local with a 503).
fn patient() -> IngestConfig {
    IngestConfig {
        retry_window: Duration::from_secs(30),
        ..IngestConfig::default()
    }
}

async fn profile(table: &FleetTable, user: &str) {
    upsert_profile(
        table,
        &UserId::parse(user).unwrap(),
        ProfileUpdate {
            name: user.into(),
            email: None,
        },
    )
    .await
    .unwrap();
}

async fn set_status(table: &FleetTable, user: &str, device: &str, status: DeviceStatus) {
    let patch = DevicePatch {
        status: Some(status),
        ..DevicePatch::default()
    };
    update_device(
        table,
        &UserId::parse(user).unwrap(),
        &DeviceId::parse(device).unwrap(),
        1,
        patch,
    )
    .await
    .unwrap();
}

/// The dataset whose report for 2026-11-20 is worked out by hand in `expected()`.
async fn dataset() -> FleetTable {
    let mut table = fresh_table().await;
    table.config.retention_days = 3650;
    // Every type of this dataset is searchable, so its events are on GSI1 and the report's
    // index heat has something to rank.
    table.config.shards.searchable =
        shared::model::shard::parse_searchable("temperature,humidity,door", 8).unwrap();
    for u in ["an-u1", "an-u2", "an-u3", "an-u4", "an-u5", "an-u6"] {
        profile(&table, u).await;
    }
    add_device(
        &table,
        "an-u1",
        "d1",
        "thermostat",
        &[
            ("temperature", 2, "2026-11-19T23:00:00Z"),
            ("temperature", 5, "2026-11-20T10:00:00Z"),
            ("humidity", 3, "2026-11-20T11:00:00Z"),
            ("temperature", 1, "2026-11-21T00:05:00Z"),
        ],
    )
    .await;
    add_device(
        &table,
        "an-u1",
        "d2",
        "door-sensor",
        &[("door", 4, "2026-11-20T12:00:00Z")],
    )
    .await;
    set_status(&table, "an-u1", "d2", DeviceStatus::Maintenance).await;
    add_device(
        &table,
        "an-u2",
        "d3",
        "thermostat",
        &[
            ("temperature", 3, "2026-11-20T08:00:00Z"),
            ("temperature", 1, "2026-10-11T08:00:00Z"),
        ],
    )
    .await;
    set_status(&table, "an-u2", "d3", DeviceStatus::Error).await;
    add_device(
        &table,
        "an-u4",
        "d4",
        "thermostat",
        &[
            ("temperature", 2, "2026-11-20T09:00:00Z"),
            ("humidity", 1, "2026-11-18T09:00:00Z"),
        ],
    )
    .await;
    delete_device(
        &table,
        &UserId::parse("an-u4").unwrap(),
        &DeviceId::parse("d4").unwrap(),
    )
    .await
    .unwrap();
    add_device(&table, "an-u5", "d5", "power-meter", &[]).await;
    add_device(
        &table,
        "an-u6",
        "d6",
        "thermostat",
        &[("temperature", 2, "2026-10-31T10:00:00Z")],
    )
    .await;
    table
}

/// Worked out by hand from `dataset()`:
/// - users: 6 profiles; active in the 30 days before 2026-11-21: u1, u2 (seen on the day) and
///   u6 (seen 2026-10-31) = 3.
/// - devices: d1, d2, d3, d5, d6 (d4 deleted) = 5; active d1, d5, d6; maintenance d2; error d3;
///   thermostat d1, d3, d6; online since 2026-11-20T00:00: d1, d2, d3 = 3.
/// - events on 2026-11-20: d1 5 temperature + 3 humidity, d2 4 door, d3 3 temperature = 15
///   (d4's are purged, not counted): temperature 8, humidity 3, door 4.
/// - heat: d1 8/15 = 0.5333, d2 4/15 = 0.2667, d3 3/15 = 0.2, all over 10%.
/// - purged: d4's 3 events (all days).
fn expected() -> Value {
    json!({
        "date": DAY,
        "users": {"total": 6, "active30d": 3},
        "organizations": {"active30d": 0},
        "devices": {"total": 5, "online24h": 3,
            "byStatus": {"active": 3, "maintenance": 1, "error": 1},
            "byType": {"thermostat": 3, "door-sensor": 1, "power-meter": 1}},
        "events": {"total": 15, "byType": {"temperature": 8, "humidity": 3, "door": 4}},
        "topDevices": [
            {"userId": "an-u1", "deviceId": "d1", "events": 8},
            {"userId": "an-u1", "deviceId": "d2", "events": 4},
            {"userId": "an-u2", "deviceId": "d3", "events": 3},
        ],
        "partitionHeat": [
            {"key": key::event_partition("an-u1", "d1"), "writes": 8, "share": 0.5333, "hot": true},
            {"key": key::event_partition("an-u1", "d2"), "writes": 4, "share": 0.2667, "hot": true},
            {"key": key::event_partition("an-u2", "d3"), "writes": 3, "share": 0.2, "hot": true},
        ],
        "purgedEvents": 3,
    })
}

/// The report without the run's own figures (which describe the run, not the data).
fn counts(report: &Value) -> Value {
    let mut r = report.clone();
    let o = r.as_object_mut().unwrap();
    for volatile in ["run", "indexHeat", "hotKeyThreshold"] {
        o.remove(volatile);
    }
    r
}

/// What a run of `dataset()`'s day reads: the directory (6 profiles, 5 fleets, d4's purge
/// marker = 12 entries), the owners' partitions (u1: 2 devices, 2 states, fleet, profile = 6;
/// u2, u5, u6: 4 each; u4, whose only device is deleted: fleet and profile = 2) = 20, and the
/// day's 15 events. Not the other days' events, not the registrations or tag links.
const ITEMS_READ: u64 = 12 + 20 + 15;

fn plan(segments: u32) -> RunPlan {
    let day = Day::parse_field("date", DAY).unwrap();
    RunPlan::new(day, segments, Instant::now() + Duration::from_secs(60)).unwrap()
}

async fn read_report(table: &FleetTable) -> Answer {
    dashboard(
        table,
        ApiRequest::get(&format!("/admin/reports/{DAY}")).admin("ops"),
    )
    .await
}

fn events_of(items: &[Item], device: &str) -> usize {
    in_partition_of(items, device, EntityType::Event)
}

/// Items of `kind` in `device`'s event partition.
fn in_partition_of(items: &[Item], device: &str, kind: EntityType) -> usize {
    items
        .iter()
        .filter(|i| {
            i["PK"]
                .as_s()
                .is_ok_and(|pk| pk.ends_with(&format!("#DEVICE#{device}")))
                && entity_type(i) == Some(kind)
        })
        .count()
}

#[tokio::test]
async fn the_report_matches_the_hand_computed_figures_and_deleted_devices_are_purged() {
    let table = dataset().await;
    let before = table_contents(&table).await;
    assert_eq!(
        events_of(&before, "d4"),
        3,
        "the deleted device's events are still there"
    );
    assert_eq!(
        read_report(&table).await.status,
        404,
        "no report before the run"
    );

    let outcome = run_daily_report(&table, &plan(4)).await.unwrap();
    assert!(outcome.complete);
    let a = read_report(&table).await;
    assert_eq!(a.status, 200);
    assert_eq!(counts(&a.body), expected());
    let run = &a.body["run"];
    assert_eq!(run["segments"], 4);
    assert_eq!(
        run["itemsScanned"].as_u64().unwrap(),
        ITEMS_READ,
        "the directory, the owners' partitions and the day's events, never the history"
    );
    assert!((ITEMS_READ as usize) < before.len());
    assert!(run["rcu"].as_f64().unwrap() > 0.0 && run["wcu"].as_f64().unwrap() > 0.0);
    assert!(run["durationMs"].is_number());
    // The index's shared partitions take one type mark per device, type and hour of the day:
    // d1's temperature (10:00) and humidity (11:00), d2's door (12:00), d3's temperature
    // (08:00); the deleted d4's are purged, not counted.
    let index_heat = a.body["indexHeat"].as_array().unwrap();
    assert_eq!(index_heat.len(), 4, "{index_heat:?}");
    assert!(
        index_heat.iter().all(|h| h["writes"] == 1),
        "one write per device, type and hour, however many events: {index_heat:?}"
    );

    let after = table_contents(&table).await;
    assert_eq!(
        events_of(&after, "d4"),
        0,
        "a deleted device's events are gone after the run"
    );
    assert_eq!(
        in_partition_of(&before, "d4", EntityType::TypeMark),
        2,
        "its two type marks before the run"
    );
    assert_eq!(
        in_partition_of(&after, "d4", EntityType::TypeMark),
        0,
        "and its type marks too: they name the device"
    );
    assert_eq!(
        events_of(&after, "d1"),
        events_of(&before, "d1"),
        "live devices keep every event"
    );
    assert_eq!(events_of(&after, "d3"), 4);
}

#[tokio::test]
async fn an_interrupted_run_resumes_from_its_checkpoints() {
    let table = dataset().await;
    let items = table_contents(&table).await.len();
    let mut interrupted = plan(2);
    interrupted.page_limit = Some(3);
    interrupted.max_pages = Some(2);
    let first = run_daily_report(&table, &interrupted).await.unwrap();
    assert!(
        !first.complete,
        "two pages of three items cannot cover the table"
    );
    assert_eq!(read_report(&table).await.status, 404);
    let checkpoints = table_contents(&table)
        .await
        .into_iter()
        .filter(|i| matches!(key_of(i), ItemKey::Checkpoint { day, .. } if day == DAY))
        .count();
    assert_eq!(checkpoints, 2, "one checkpoint per segment");

    let mut rest = plan(2);
    rest.page_limit = Some(3);
    let second = run_daily_report(&table, &rest).await.unwrap();
    assert!(second.complete);
    let report = read_report(&table).await.body;
    assert_eq!(
        counts(&report),
        expected(),
        "nothing counted twice or missed"
    );
    assert_eq!(
        report["run"]["itemsScanned"].as_u64().unwrap(),
        ITEMS_READ,
        "the second invocation continued, it did not start over"
    );
    assert!((ITEMS_READ as usize) < items);
}

/// Stopped after every single unit of work (a directory page, an owner's partition, a purge),
/// with pages of two entries, the run resumes from its position each time and counts
/// everything exactly once.
#[tokio::test]
async fn a_run_stopped_after_every_unit_counts_everything_once() {
    let table = dataset().await;
    let mut invocations = 0;
    loop {
        let mut one_unit = plan(2);
        one_unit.page_limit = Some(2);
        one_unit.max_pages = Some(1);
        invocations += 1;
        assert!(invocations < 100, "the run does not advance");
        if run_daily_report(&table, &one_unit).await.unwrap().complete {
            break;
        }
    }
    // 5 fleets and a purge marker over 2 segments, one unit each per invocation.
    assert!(invocations >= 4, "{invocations} invocations: it did stop");
    let report = read_report(&table).await.body;
    assert_eq!(
        counts(&report),
        expected(),
        "nothing counted twice or missed"
    );
    assert_eq!(report["run"]["itemsScanned"].as_u64().unwrap(), ITEMS_READ);
}

#[tokio::test]
async fn running_a_day_again_writes_the_same_report() {
    let table = dataset().await;
    let first = run_daily_report(&table, &plan(3))
        .await
        .unwrap()
        .report
        .unwrap();
    let again = run_daily_report(&table, &plan(3))
        .await
        .unwrap()
        .report
        .unwrap();
    assert_eq!(first, again, "a second run reuses the finished checkpoints");
    assert_eq!(read_report(&table).await.body, json!(first));
    // A fresh scan of the same data counts the same (the purge has nothing left to do).
    let mut fresh = plan(3);
    fresh.fresh = true;
    let rescanned = run_daily_report(&table, &fresh)
        .await
        .unwrap()
        .report
        .unwrap();
    let mut expected_again = expected();
    expected_again["purgedEvents"] = json!(0);
    assert_eq!(counts(&json!(rescanned)), expected_again);
    // A different segment count for a day already started is refused, not mixed.
    let err = run_daily_report(&table, &plan(5)).await.unwrap_err();
    assert!(err.to_string().contains("segments"), "{err}");
}

#[tokio::test]
async fn the_scheduled_event_reports_the_previous_day_and_bad_input_is_refused() {
    let table = dataset().await;
    let config = daily_analytics::AnalyticsConfig {
        segments: 2,
        page_limit: None,
    };
    let far = Instant::now() + Duration::from_secs(60);
    let scheduled = json!({"version": "0", "detail-type": "Scheduled Event", "source": "aws.events",
        "time": "2026-11-21T00:15:00Z", "detail": {}});
    let out = daily_analytics::handle(&table, &config, scheduled, far)
        .await
        .unwrap();
    assert_eq!(out["date"], DAY);
    assert_eq!(counts(&out["report"]), expected());
    for bad in [
        json!({}),
        json!({"date": "2026-02-30"}),
        json!({"time": "noon"}),
    ] {
        assert!(
            daily_analytics::handle(&table, &config, bad.clone(), far)
                .await
                .is_err(),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn segments_can_fan_out_over_invocations_and_the_last_one_writes_the_report() {
    let table = dataset().await;
    let config = daily_analytics::AnalyticsConfig {
        segments: 4,
        page_limit: Some(4),
    };
    let far = Instant::now() + Duration::from_secs(60);
    let first = daily_analytics::handle(
        &table,
        &config,
        json!({"date": DAY, "segments": [0, 1]}),
        far,
    )
    .await
    .unwrap();
    assert_eq!(first["complete"], false);
    assert_eq!(first["segmentsDone"], 2);
    assert_eq!(read_report(&table).await.status, 404);
    let last = daily_analytics::handle(
        &table,
        &config,
        json!({"date": DAY, "segments": [2, 3]}),
        far,
    )
    .await
    .unwrap();
    assert_eq!(last["complete"], true);
    assert_eq!(counts(&read_report(&table).await.body), expected());
}

/// Sends `events` (type, at) for a freshly registered `device` of `user`.
async fn device_with_events(
    table: &FleetTable,
    user: &str,
    device: &str,
    events: &[(String, Timestamp)],
) {
    let token = register(table, user, device, "meter").await;
    let submitted = events
        .iter()
        .map(|(kind, at)| SubmittedEvent {
            id: None,
            event_type: kind.clone(),
            value: json!(at.epoch_seconds() % 97),
            at: at.to_string(),
        })
        .collect();
    send_events(table, device, &token, submitted).await;
}

/// The same live fleet (6 users, 12 devices, 24 events each on the report day) with `days`
/// days of history; returns the run's read units and a full Scan's.
async fn read_units_with_history(days: i64) -> (f64, f64) {
    let mut table = fresh_table().await;
    table.config.retention_days = 3650;
    for u in 0..6 {
        let user = format!("hist-u{u}");
        profile(&table, &user).await;
        for d in 0..2 {
            let events: Vec<(String, Timestamp)> = (0..days)
                .flat_map(|back| {
                    (0..24).map(move |h| {
                        let at = t("2026-11-20T00:30:00Z").plus_seconds(h * 3600 - back * 86_400);
                        (["power", "temperature"][(h % 2) as usize].to_string(), at)
                    })
                })
                .collect();
            device_with_events(&table, &user, &format!("hist-{u}-{d}"), &events).await;
        }
    }
    let (outcome, _) = metered(run_daily_report(&table, &plan(4))).await;
    let report = outcome.unwrap().report.unwrap();
    assert_eq!(report.events.total, 12 * 24, "{days} days of history");
    assert_eq!(report.devices.online_24h, 12);
    let (_, full_scan) = metered(async {
        let mut start = None;
        loop {
            let out = table
                .client
                .scan()
                .table_name(table.name())
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            start = out.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
    })
    .await;
    (report.run.rcu, full_scan.read_units)
}

#[tokio::test]
async fn the_runs_reads_follow_the_day_not_the_history() {
    let (one_day, scan_one_day) = read_units_with_history(1).await;
    let (thirty_days, scan_thirty_days) = read_units_with_history(30).await;
    eprintln!(
        "daily run read units: 1 day of history {one_day}, 30 days {thirty_days} ({:.2}x); \
         a full Scan: {scan_one_day} and {scan_thirty_days} ({:.1}x)",
        thirty_days / one_day,
        scan_thirty_days / scan_one_day
    );
    assert!(
        (thirty_days / one_day - 1.0).abs() <= 0.05,
        "the run's reads stay flat: {one_day} vs {thirty_days}"
    );
    assert!(
        scan_thirty_days / scan_one_day > 15.0,
        "while a full Scan's grow with the history: {scan_one_day} vs {scan_thirty_days}"
    );
}

#[tokio::test]
async fn a_rebuilt_day_says_what_was_true_of_that_day() {
    let table = dataset().await;
    run_daily_report(&table, &plan(4)).await.unwrap();
    let first = counts(&read_report(&table).await.body);
    // Later traffic: d5 (never seen) and d6 (last seen 2026-10-31) report on 2026-11-22.
    for (device, user) in [("d5", "an-u5"), ("d6", "an-u6")] {
        let registration = shared::ops::credentials::rotate_token(
            &table,
            &UserId::parse(user).unwrap(),
            &DeviceId::parse(device).unwrap(),
        )
        .await
        .unwrap();
        let ingestor = Ingestor::new(table.clone(), patient());
        let auth = ingestor
            .authenticate(&DeviceId::parse(device).unwrap(), &registration.token)
            .await
            .unwrap();
        let batch = validate_batch(
            vec![SubmittedEvent {
                id: Some("later".into()),
                event_type: "temperature".into(),
                value: json!(1),
                at: "2026-11-22T08:00:00Z".into(),
            }],
            t("2026-11-22T09:00:00Z"),
            3650,
            Duration::from_secs(300),
        )
        .unwrap();
        ingestor
            .ingest(&auth, batch, Instant::now() + Duration::from_secs(30))
            .await
            .unwrap();
    }
    let mut fresh = plan(4);
    fresh.fresh = true;
    run_daily_report(&table, &fresh).await.unwrap();
    let rebuilt = counts(&read_report(&table).await.body);
    let mut expected = first.clone();
    // d4's events were purged by the first run; the marker is gone, nothing is left to purge.
    expected["purgedEvents"] = json!(0);
    assert_eq!(
        rebuilt, expected,
        "devices seen after the day are neither online nor active on it"
    );
}

#[tokio::test]
async fn a_deleted_devices_events_are_purged_in_bounded_runs_and_its_marker_goes() {
    let mut table = fresh_table().await;
    table.config.retention_days = 3650;
    let events: Vec<(String, Timestamp)> = (0..1_250)
        .map(|i| {
            (
                "power".to_string(),
                t("2026-11-10T00:00:00Z").plus_seconds(i * 60),
            )
        })
        .collect();
    device_with_events(&table, "purge-u", "purge-d", &events).await;
    delete_device(
        &table,
        &UserId::parse("purge-u").unwrap(),
        &DeviceId::parse("purge-d").unwrap(),
    )
    .await
    .unwrap();
    let marker = key::purge_marker("purge-u", "purge-d");
    assert!(
        item(&table, &marker).await.is_some(),
        "the deletion left a marker"
    );
    let purge_per_run = shared::ops::analytics::PURGE_PER_RUN as u64;
    let left = |items: &[Item]| {
        items
            .iter()
            .filter(|i| entity_type(i) == Some(shared::model::entities::EntityType::Event))
            .count()
    };
    let report = run_daily_report(&table, &plan(2))
        .await
        .unwrap()
        .report
        .unwrap();
    assert_eq!(report.purged_events, purge_per_run, "bounded work per run");
    assert_eq!(
        left(&table_contents(&table).await),
        1_250 - purge_per_run as usize
    );
    assert!(
        item(&table, &marker).await.is_some(),
        "more to purge: the marker stays"
    );
    let next_day = Day::parse_field("date", "2026-11-21").unwrap();
    let plan = RunPlan::new(next_day, 2, Instant::now() + Duration::from_secs(60)).unwrap();
    let report = run_daily_report(&table, &plan)
        .await
        .unwrap()
        .report
        .unwrap();
    assert_eq!(report.purged_events, 1_250 - purge_per_run);
    assert_eq!(left(&table_contents(&table).await), 0);
    assert!(
        item(&table, &marker).await.is_none(),
        "done: the marker is gone"
    );
}

/// A checkpoint is a position, not the work a directory page lists: with DynamoDB's 1 MB
/// pages (thousands of fleets at scale) it stays one write unit, and it is written once per
/// `UNITS_PER_CHECKPOINT` units rather than after each, so checkpoints cost less than the
/// reads they protect. An invocation stopped after any unit still resumes exactly.
#[tokio::test]
async fn checkpoints_stay_small_and_few_however_long_the_directory_page() {
    use shared::ops::analytics::UNITS_PER_CHECKPOINT;
    const OWNERS: u32 = 150;
    let table = fresh_table().await;
    for i in 0..OWNERS {
        let user = format!("owner-{i:03}");
        profile(&table, &user).await;
        add_device(&table, &user, &format!("meter-{i:03}"), "meter", &[]).await;
    }
    // One segment, whole pages: the first page lists every owner.
    let mut stopped = plan(1);
    stopped.max_pages = Some(OWNERS / 2);
    let first = run_daily_report(&table, &stopped).await.unwrap();
    assert!(!first.complete);
    let checkpoint = table_contents(&table)
        .await
        .into_iter()
        .find(|i| matches!(key_of(i), ItemKey::Checkpoint { .. }))
        .expect("the stopped invocation's checkpoint");
    let size = fleet_testkit::capacity::item_size(&checkpoint.clone().into_iter().collect());
    assert!(
        fleet_testkit::capacity::write_units(size) == 1,
        "a checkpoint {OWNERS} owners into a page is {size} bytes: {checkpoint:?}"
    );
    let rest = run_daily_report(&table, &plan(1)).await.unwrap();
    assert!(rest.complete);
    let report = read_report(&table).await.body;
    assert_eq!(report["users"]["total"], OWNERS, "{report}");
    assert_eq!(report["devices"]["total"], OWNERS, "{report}");
    // Units: a page read and an owner each (150), and the end of the directory; saves: one
    // per UNITS_PER_CHECKPOINT units (or 10 s) and when each invocation stops.
    let writes = report["run"]["checkpointWrites"].as_u64().unwrap();
    let units = u64::from(OWNERS) + 2;
    assert!(
        writes <= units.div_ceil(u64::from(UNITS_PER_CHECKPOINT)) + 2,
        "{writes} checkpoint writes for {units} units"
    );
}

/// `users` counts people: `users.active30d` counts the people whose own fleet was active, and
/// an organization's fleet is counted apart (`organizations.active30d`), never as a user.
#[tokio::test]
async fn active_users_are_people_and_organizations_are_counted_apart() {
    let mut table = fresh_table().await;
    table.config.retention_days = 3650;
    profile(&table, "an-person").await;
    add_device(
        &table,
        "an-person",
        "pd1",
        "thermostat",
        &[("temperature", 2, "2026-11-20T08:00:00Z")],
    )
    .await;
    let org = shared::model::ids::OrgId::parse("o00000000000000000039").unwrap();
    // A registration into an organization's fleet needs the organization (not being deleted).
    put_item(
        &table,
        shared::model::entities::organization::OrganizationItem {
            org_id: org.clone(),
            name: "Counted apart".into(),
            owner: UserId::parse("an-person").unwrap(),
            created_by: UserId::parse("an-person").unwrap(),
            created_at: Timestamp::now(),
            member_count: 1,
            deleting_at: None,
        }
        .to_item(&table.config.shards)
        .unwrap(),
    )
    .await;
    let org_fleet = UserId::org_fleet(&org);
    add_device(
        &table,
        org_fleet.as_str(),
        "od1",
        "thermostat",
        &[("temperature", 3, "2026-11-20T09:00:00Z")],
    )
    .await;
    let outcome = run_daily_report(&table, &plan(2)).await.unwrap();
    assert!(outcome.complete);
    let a = read_report(&table).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(
        (&a.body["users"], &a.body["organizations"]),
        (
            &json!({"total": 1, "active30d": 1}),
            &json!({"active30d": 1})
        ),
        "one person, active; one organization, active, not a user"
    );
}
