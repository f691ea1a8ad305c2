//! The cases of events: a device's and an owner's events, events by type (operators), and
//! ingestion (AP-14), with the batches the bench sends.

use serde_json::json;
use shared::model::ids::EventType;
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;
use shared::ops::events;
use shared::ops::ingest::{IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::pattern::BudgetScale;
use shared::{FleetError, FleetTable};

use super::common::{
    alice, alice_device, day, device_id, every_call, found, now, one, read, route, OverTheDay,
    PatternCase, RouteCall, Tokens, ALICE, INGEST, OPERATOR,
};
use crate::api_event::ApiEvent;
use crate::reference::dataset::ingest_at_reference_time;

/// DeviceEvents: a device's 10 events of the day.
pub(super) const DEVICE_EVENTS: PatternCase = PatternCase {
    id: PatternId::DeviceEvents,
    workload: "a device's 10 events of the day",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let page = events::device_events(table, &alice()?, &alice_device(0)?, day()?, 50, None)
                .await?;
            found(page.items.len() == 10, PatternId::DeviceEvents)
        })
    },
    call: read(
        "GET /me/devices/{deviceId}/events (a day: 10 events)",
        |_, _| {
            let device = device_id(0);
            every_call(
                ApiEvent::new(
                    route(PatternId::DeviceEvents),
                    format!("/me/devices/{device}/events"),
                )
                .caller(ALICE)
                .param("deviceId", &device)
                .over_the_day(),
            )
        },
    ),
};

/// UserEvents: Alice's newest 50 of 100 events across devices.
pub(super) const USER_EVENTS: PatternCase = PatternCase {
    id: PatternId::UserEvents,
    workload: "Alice's newest 50 of 100 events across devices",
    // Alice's 10 devices are one group: the device list plus one Query per device.
    scale: |_| BudgetScale {
        shards: shared::ops::events::DEVICE_GROUP as u32,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let page = events::user_events(table, &alice()?, day()?, 50, None).await?;
            found(page.items.len() == 50, PatternId::UserEvents)
        })
    },
    call: read("GET /me/events?limit=50 (a day: 100 events)", |_, _| {
        every_call(
            ApiEvent::new(route(PatternId::UserEvents), "/me/events")
                .caller(ALICE)
                .over_the_day()
                .query("limit", "50"),
        )
    }),
};

/// EventsByType: a day's alarm events (a searchable type; 12 of the day's 110, one on each of 12 devices), all users.
pub(super) const EVENTS_BY_TYPE: PatternCase = PatternCase {
    id: PatternId::EventsByType,
    workload: "a day's alarm events (a searchable type; 12 of the day's 110, one on each of 12 devices), all users",
    scale: |shards| BudgetScale {
        days: 1,
        shards: u32::from(
            EventType::parse("alarm")
                .ok()
                .and_then(|alarm| shards.type_shards(&alarm))
                .unwrap_or(1),
        ),
        // The 12 devices with an alarm that day, each read once.
        devices: 12,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let alarm = EventType::parse("alarm")?;
            let found_events = events::events_by_type(table, &alarm, day()?, 50).await?;
            found(
                found_events.events.len() == 12
                    && found_events.devices == 12
                    && found_events.complete,
                PatternId::EventsByType,
            )
        })
    },
    call: read("GET /admin/events?type=alarm&limit=50 (a day)", |_, _| {
        every_call(
            ApiEvent::new(route(PatternId::EventsByType), "/admin/events")
                .operator(OPERATOR)
                .query("type", "alarm")
                .over_the_day()
                .query("limit", "50"),
        )
    }),
};

/// IngestEvents: 100 events, cold Lambda (registration read).
pub(super) const INGEST_EVENTS: PatternCase = PatternCase {
    id: PatternId::IngestEvents,
    workload: "100 events, cold Lambda (registration read)",
    scale: |_| BudgetScale {
        batch_items: 100,
        ..BudgetScale::one()
    },
    run: |table, tokens| Box::pin(ingest_cold(table, tokens)),
    call: Some(RouteCall {
        request: "POST /devices/{deviceId}/events (100 new events, warm caches)",
        function: INGEST,
        expected: 200,
        events: |tokens, from| {
            let device = device_id(1);
            let token = tokens.get(&device).cloned().unwrap_or_default();
            Box::new(move |i| ingest_event(&device, &token, &format!("p{i}"), from, i))
        },
    }),
};

/// A batch of 100 new events (ids `{prefix}-{n}`, types cycling through three) for `device`,
/// the `batch`-th from `from`: event `n` of batch `b` is at `from + (b * 100 + n)` seconds.
pub fn ingest_event(
    device: &str,
    token: &str,
    prefix: &str,
    from: Timestamp,
    batch: usize,
) -> Vec<u8> {
    const TYPES: [&str; 3] = ["temperature", "humidity", "door"];
    let events: Vec<_> = (0..100)
        .map(|n| {
            let offset = (batch * 100 + n) as i64;
            json!({"id": format!("{prefix}-{n}"), "type": TYPES[n % TYPES.len()],
                   "value": offset, "at": from.plus_seconds(offset).to_string()})
        })
        .collect();
    ingest_request(device, token, events)
}

/// The API Gateway event of `POST /devices/{device}/events` sending `events` (each
/// `{id, type, value, at}`) with the device's `token`.
pub fn ingest_request(device: &str, token: &str, events: Vec<serde_json::Value>) -> Vec<u8> {
    ApiEvent::new(
        route(PatternId::IngestEvents),
        format!("/devices/{device}/events"),
    )
    .param("deviceId", device)
    .header("Authorization", &format!("Bearer {token}"))
    .json(&json!({ "events": events }))
    .to_bytes()
}

/// AP-14 as a cold Lambda sees it: authenticate (reads the registration), then store 100 new
/// events for Alice's device 1.
async fn ingest_cold(table: &FleetTable, tokens: &Tokens) -> Result<(), FleetError> {
    let cold = Ingestor::new(table.clone(), IngestConfig::default());
    let device = alice_device(1)?;
    let token = tokens
        .get(device.as_str())
        .ok_or_else(|| FleetError::internal("no token"))?;
    let submitted = (0..100)
        .map(|i| SubmittedEvent {
            id: Some(format!("x-{i:03}")),
            event_type: "temperature".into(),
            value: json!(i),
            at: now().plus_seconds(-1800 + i).to_string(),
        })
        .collect();
    let registration = cold.authenticate(&device, token).await?;
    let outcome = ingest_at_reference_time(&cold, &registration, submitted).await?;
    found(outcome.failed.is_empty(), PatternId::IngestEvents)
}
