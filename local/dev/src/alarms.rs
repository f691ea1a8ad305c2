//! The dev server's alarm-watch: what EventBridge's schedule and the stream's event source
//! mapping do on AWS. Every minute the offline check and reminders run for the current time;
//! every few seconds the alarm records of DynamoDB Local's stream go through alarm-watch's
//! handler, and each PutEvents request it would send to EventBridge (which has no local twin)
//! is logged, one line per transition (and each record it would send to the dead-letter queue,
//! one line per record). The same records become webhook deliveries, which a loop of
//! [`crate::local_aws`] sends for real.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet_testkit::alarm_events::{
    lambda_event, AlarmStream, RecordedDeadLetters, RecordedPutEvents,
};
use serde_json::{json, Value};
use shared::model::timestamp::Timestamp;
use shared::FleetTable;
use webhooks::worker::DeliveryWorker;

/// How often the stream is read.
const STREAM_POLL: Duration = Duration::from_secs(2);
/// How often the scheduled run goes (the template's `rate(1 minute)`).
const SCHEDULE: Duration = Duration::from_secs(60);

/// Runs until the process ends: the schedule and the stream, logging each transition; the
/// same records go to `webhooks` (the delivery function's own event source mapping on AWS).
pub async fn watch_alarms(
    table: FleetTable,
    endpoint: String,
    webhooks: Option<Arc<DeliveryWorker>>,
) {
    let state = alarm_watch::State {
        table: table.clone(),
        publisher: RecordedPutEvents::default(),
        bus: alarm_watch::bus_from_env(),
        dead_letters: RecordedDeadLetters::default(),
    };
    let mut stream = match AlarmStream::open(&table, &endpoint).await {
        Ok(stream) => stream,
        Err(err) => {
            eprintln!("alarm notifications off: the table's stream cannot be read ({err})");
            return;
        }
    };
    let mut next_run = Instant::now();
    let mut logged = 0;
    let mut dead_lettered = 0;
    loop {
        if Instant::now() >= next_run {
            next_run += SCHEDULE;
            let event = json!({"detail-type": "Scheduled Event", "source": "aws.events",
                "time": Timestamp::now().to_string()});
            let deadline = Instant::now() + alarm_watch::TIMEOUT;
            if let Err(err) = alarm_watch::handle(&state, event, deadline).await {
                tracing::warn!(error = %err, "offline check failed");
            }
        }
        match stream.read().await {
            Ok(records) if !records.is_empty() => {
                let deadline = Instant::now() + alarm_watch::TIMEOUT;
                if let Err(err) =
                    alarm_watch::handle(&state, lambda_event(&records), deadline).await
                {
                    tracing::warn!(error = %err, "alarm notifications failed");
                }
                if let Some(worker) = &webhooks {
                    if let Err(err) = worker.handle(lambda_event(&records)).await {
                        tracing::warn!(error = %err, "alarm webhook deliveries failed");
                    }
                }
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "the table's stream could not be read"),
        }
        let entries = state.publisher.entries();
        for entry in &entries[logged..] {
            log_transition(entry);
        }
        logged = entries.len();
        let letters = state.dead_letters.letters();
        for letter in &letters[dead_lettered..] {
            tracing::warn!(
                sequence_number = %letter.sequence_number,
                reason = %letter.reason,
                "unreadable alarm record (SendMessage to the dead-letter queue, recorded locally)"
            );
        }
        dead_lettered = letters.len();
        tokio::time::sleep(STREAM_POLL).await;
    }
}

/// One line per transition: what EventBridge would receive.
fn log_transition(entry: &Value) {
    let detail: Value =
        serde_json::from_str(entry["Detail"].as_str().unwrap_or("{}")).unwrap_or_default();
    tracing::info!(
        detail_type = entry["DetailType"].as_str().unwrap_or_default(),
        alarm = detail["alarmId"].as_str().unwrap_or_default(),
        user = detail["userId"].as_str().unwrap_or_default(),
        device = detail["deviceId"].as_str().unwrap_or_default(),
        kind = detail["kind"].as_str().unwrap_or_default(),
        severity = detail["severity"].as_str().unwrap_or_default(),
        put_events_entry = %entry,
        "alarm transition (PutEvents to EventBridge, recorded locally)"
    );
}
