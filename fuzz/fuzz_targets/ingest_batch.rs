//! Event-batch parsing (`ingest::parse_batch`, what `POST /devices/{id}/events` does with its
//! body): never panics and never a 5xx; an accepted batch has 1..=100 events, valid ids and
//! types, times inside [now - retention, now + skew], no two with the same time and id.
#![no_main]

use std::collections::HashSet;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use shared::ops::ingest::MAX_EVENTS_PER_BATCH;
use shared::model::readings::EventValue;
use shared::model::timestamp::Timestamp;

fuzz_target!(|body: &[u8]| {
    let request = lambda_http::http::Request::builder()
        .header("content-type", "application/json")
        .body(lambda_http::Body::from(body.to_vec()))
        .expect("request");
    let now = Timestamp::parse_field("now", "2026-11-21T12:00:00Z").expect("now");
    let skew = Duration::from_secs(300);
    match ingest::parse_batch(request.headers(), request.body().as_ref(), now, 90, skew) {
        Ok(events) => {
            assert!((1..=MAX_EVENTS_PER_BATCH).contains(&events.len()));
            let mut seen = HashSet::new();
            for e in &events {
                assert!(e.at >= now.plus_seconds(-90 * 86_400) && e.at <= now.plus_seconds(300));
                assert!(seen.insert((e.at, e.id.clone())), "duplicate {:?}", e.id);
                // Every accepted number is one DynamoDB stores (0, or 1e-130 <= |v| < 1e126).
                if let EventValue::Number(v) = e.value {
                    assert!(v == 0.0 || (1e-130..1e126).contains(&v.abs()), "{v}");
                }
            }
        }
        Err(err) => {
            assert!((400..500).contains(&err.status.as_u16()), "{err:?}");
        }
    }
});
