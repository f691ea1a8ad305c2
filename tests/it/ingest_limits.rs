//! Ingest under abuse: a device over its batch rate gets a 429 with `Retry-After` (and the
//! accepted batches cost no extra DynamoDB request), and unknown devices and wrong tokens are
//! answered without a DynamoDB read per attempt once seen.

use std::time::Duration;

use fleet_tests::*;
use serde_json::{json, Value};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::ops::limits::Rate;

fn batch(id: &str) -> Value {
    json!([{"id": id, "type": "temperature", "value": 20.5, "at": ago(5)}])
}

#[tokio::test]
async fn a_device_over_its_rate_gets_429_with_retry_after_and_nothing_is_stored() {
    let table = fresh_table().await;
    let token = register_device(&table, "user-rate", "rate-1").await;
    let other = register_device(&table, "user-rate", "rate-2").await;
    let limited = std::sync::Arc::new(Ingestor::new(
        table.clone(),
        IngestConfig {
            device_rate: Rate {
                per_second: 0.5,
                burst: 2.0,
            },
            ..IngestConfig::default()
        },
    ));
    let unlimited = std::sync::Arc::new(Ingestor::new(table.clone(), IngestConfig::default()));
    // The same two batches through an ingestor without a limit: the request count to match.
    let mut baseline = Vec::new();
    for id in ["b-1", "b-2"] {
        let a = ingest(&unlimited, ingest_request("rate-2", &other, batch(id))).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        baseline.push(a.used.requests());
    }
    let mut used = Vec::new();
    for id in ["e-1", "e-2"] {
        let a = ingest(&limited, ingest_request("rate-1", &token, batch(id))).await;
        assert_eq!(a.status, 200, "{:?}", a.body);
        used.push(a.used.requests());
    }
    assert_eq!(used, baseline, "the limit costs no DynamoDB request");

    let before = table_contents(&table).await;
    let a = ingest(&limited, ingest_request("rate-1", &token, batch("e-3"))).await;
    assert_eq!(a.status, 429, "{:?}", a.body);
    assert_eq!(a.error_code(), "rate_limited");
    let retry_after: u64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(a.used.requests(), 0, "refused without touching the table");
    assert_eq!(table_contents(&table).await, before);
    api_doc::api_doc()
        .check_response("POST /devices/{deviceId}/events", 429, &a.body)
        .unwrap();
    // Another device has its own allowance.
    let a = ingest(&limited, ingest_request("rate-2", &other, batch("b-3"))).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
}

#[tokio::test]
async fn unknown_devices_and_wrong_tokens_cost_two_reads_per_window_not_per_attempt() {
    let table = fresh_table().await;
    let token = register_device(&table, "user-guess", "guess-1").await;
    let ingestor = std::sync::Arc::new(Ingestor::new(
        table.clone(),
        IngestConfig {
            negative_cache: Duration::from_millis(400),
            ..IngestConfig::default()
        },
    ));
    let before = table_contents(&table).await;
    let reads = |a: &Answer| a.used.count("GetItem") + a.used.count("BatchGetItem");

    // An unknown device: two reads (eventually consistent, then consistent before refusing),
    // then none while the window lasts.
    let first = ingest(&ingestor, ingest_request("guess-9", &token, batch("x-1"))).await;
    let again = ingest(
        &ingestor,
        ingest_request("guess-9", "dft_other", batch("x-2")),
    )
    .await;
    assert_eq!((first.status, again.status), (401, 401));
    assert_eq!(
        first.body, again.body,
        "an answer from the cache looks the same"
    );
    assert_eq!((reads(&first), again.used.requests()), (2, 0));

    // Wrong tokens for a real device: two reads show the mismatch, later guesses read nothing.
    let guesses: Vec<Answer> = {
        let mut out = Vec::new();
        for guess in ["dft_guess-a", "dft_guess-b", "dft_guess-c"] {
            out.push(ingest(&ingestor, ingest_request("guess-1", guess, batch("x-3"))).await);
        }
        out
    };
    assert!(guesses.iter().all(|a| a.status == 401));
    assert_eq!(
        guesses
            .iter()
            .map(|a| a.used.requests())
            .collect::<Vec<_>>(),
        [2, 0, 0]
    );
    assert_eq!(
        guesses[0].body, first.body,
        "unknown device and wrong token look the same"
    );
    assert_eq!(
        table_contents(&table).await,
        before,
        "refused attempts change nothing"
    );

    // The right token still works without reading the registration again (it is cached);
    // the one read is the live state, which this Lambda has not seen yet.
    let ok = ingest(&ingestor, ingest_request("guess-1", &token, batch("e-1"))).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    assert_eq!(reads(&ok), 1);
    let again = ingest(&ingestor, ingest_request("guess-1", &token, batch("e-2"))).await;
    assert_eq!((again.status, reads(&again)), (200, 0), "both cached now");

    // After the window, a guess is checked against the table again.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let late = ingest(
        &ingestor,
        ingest_request("guess-1", "dft_guess-d", batch("x-4")),
    )
    .await;
    assert_eq!(late.status, 401);
    assert_eq!(reads(&late), 2);
    let late_unknown = ingest(&ingestor, ingest_request("guess-9", &token, batch("x-5"))).await;
    assert_eq!(reads(&late_unknown), 2);
}
