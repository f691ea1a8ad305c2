//! alarm-watch: alarms in the background (docs/design.md, "Offline detection" and
//! "Notifications"). One function, two event sources:
//!
//! - the EventBridge schedule (`rate(1 minute)`): the offline detector and reminders for the
//!   scheduled event's `time` (or `{"time": "..."}` by hand: a test or an operator runs it for a
//!   given moment), [`shared::ops::alarms::watch`];
//! - the table's DynamoDB stream, filtered to alarm items: their transitions published to the
//!   EventBridge bus `AlarmBus` ([`shared::ops::alarms::notify`]), answering the records that
//!   could not be published as batch item failures so Lambda retries them; a record that
//!   cannot be read goes to the dead-letter queue (SQS SendMessage) and the batch goes on.

use std::time::{Duration, Instant};

use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::model::timestamp::Timestamp;
use shared::observe::served::serve_invocation;
use shared::ops::alarms::notify::{
    publish, stream_record, DeadLetters, EventEntry, Publisher, StreamRecord,
};
use shared::ops::alarms::watch::watch;
use shared::{FleetError, FleetTable, ValidationError};

/// The function's `Timeout` in `template.yaml` (see [`shared::store::deadline`]): a run must
/// end before the next minute's starts.
pub const TIMEOUT: Duration = Duration::from_secs(55);
/// Time kept before the deadline to answer.
const MARGIN: Duration = Duration::from_secs(5);
/// The name of a run's subsegment in its trace.
pub const RUN_SEGMENT: &str = "alarm watch";

/// The function's own settings, read like every other one ([`shared::FleetConfig`]): from
/// the environment, or a map in tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlarmWatchSettings {
    /// `ALARM_BUS_NAME` (the template sets it to the bus `AlarmBus`'s name; default
    /// `AlarmBus`).
    pub bus_name: String,
    /// `ALARM_DEAD_LETTER_QUEUE_URL` (the template sets it to the queue
    /// `AlarmTransitionsDeadLetterQueue`'s URL): required, so a function that could not set
    /// a record aside fails at start-up, not on the first record it cannot read.
    pub dead_letter_queue_url: String,
}

impl AlarmWatchSettings {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, FleetError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup`: an error naming `ALARM_DEAD_LETTER_QUEUE_URL` when
    /// it is unset or blank.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, FleetError> {
        let dead_letter_queue_url = lookup("ALARM_DEAD_LETTER_QUEUE_URL")
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| FleetError::internal("ALARM_DEAD_LETTER_QUEUE_URL is not set"))?;
        Ok(Self {
            bus_name: bus_name(&lookup),
            dead_letter_queue_url,
        })
    }
}

/// `ALARM_BUS_NAME` through `lookup`, `AlarmBus` when unset or blank.
fn bus_name(lookup: &impl Fn(&str) -> Option<String>) -> String {
    lookup("ALARM_BUS_NAME")
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "AlarmBus".to_string())
}

/// `ALARM_BUS_NAME` from the environment, for the local stand-ins that need no dead-letter
/// queue (they record what they would send).
pub fn bus_from_env() -> String {
    bus_name(&|name: &str| std::env::var(name).ok())
}

/// SendMessage to the stream's dead-letter queue on Amazon SQS.
pub struct Sqs {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl Sqs {
    /// A client from the environment (region, credentials) for `queue_url`.
    pub async fn from_env(queue_url: String) -> Self {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self {
            client: aws_sdk_sqs::Client::new(&sdk),
            queue_url,
        }
    }
}

impl DeadLetters for Sqs {
    async fn send_message(&self, body: String) -> Result<(), FleetError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .send()
            .await
            .map_err(|e| FleetError::internal(aws_sdk_sqs::error::DisplayErrorContext(e)))?;
        Ok(())
    }
}

/// PutEvents on Amazon EventBridge.
pub struct EventBridge {
    client: aws_sdk_eventbridge::Client,
}

impl EventBridge {
    /// A client from the environment (region, credentials).
    pub async fn from_env() -> Self {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self {
            client: aws_sdk_eventbridge::Client::new(&sdk),
        }
    }
}

impl Publisher for EventBridge {
    async fn put_events(
        &self,
        entries: Vec<EventEntry>,
    ) -> Result<Vec<Option<String>>, FleetError> {
        let count = entries.len();
        let entries = entries
            .into_iter()
            .map(|e| {
                aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                    .source(e.source)
                    .detail_type(e.detail_type)
                    .detail(e.detail)
                    .event_bus_name(e.event_bus_name)
                    .build()
            })
            .collect();
        let out = self
            .client
            .put_events()
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| {
                FleetError::internal(aws_sdk_eventbridge::error::DisplayErrorContext(e))
            })?;
        let mut codes: Vec<Option<String>> = out
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.error_code)
            .collect();
        // EventBridge answers one result per entry, in order; a short answer fails the rest.
        codes.resize(count, Some("NoResult".to_string()));
        Ok(codes)
    }
}

/// What every invocation of this execution environment shares.
pub struct State<P, D> {
    /// The table.
    pub table: FleetTable,
    /// Where transitions go.
    pub publisher: P,
    /// The bus's name.
    pub bus: String,
    /// Where stream records that cannot be read go.
    pub dead_letters: D,
}

impl State<EventBridge, Sqs> {
    /// The table, EventBridge, the bus and the dead-letter queue from the environment.
    pub async fn from_env() -> Result<Self, FleetError> {
        let settings = AlarmWatchSettings::from_env()?;
        Ok(Self {
            table: FleetTable::from_env().await?,
            publisher: EventBridge::from_env().await,
            bus: settings.bus_name,
            dead_letters: Sqs::from_env(settings.dead_letter_queue_url).await,
        })
    }
}

impl<P: Publisher + Sync, D: DeadLetters + Sync> State<P, D> {
    /// One Lambda invocation, until the deadline Lambda gave.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, FleetError> {
        serve_invocation(
            "alarm-watch",
            RUN_SEGMENT,
            event.context.deadline(),
            TIMEOUT,
            event.context.xray_trace_id.as_deref(),
            |deadline| handle(self, event.payload, deadline),
        )
        .await
    }
}

/// A stream batch's answer: the records Lambda retries (`{"batchItemFailures": [...]}`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchAnswer {
    /// The first record not fully published (Lambda retries from it); empty when all were.
    pub batch_item_failures: Vec<ItemFailure>,
}

/// One record Lambda retries, by its sequence number.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemFailure {
    /// The record's `SequenceNumber`.
    pub item_identifier: String,
}

#[derive(Deserialize)]
struct Scheduled {
    /// EventBridge scheduled events (and runs by hand): the time to evaluate.
    time: Option<String>,
}

/// Handles one event: a stream batch (`Records`) or a scheduled run (`time`).
pub async fn handle<P: Publisher, D: DeadLetters>(
    state: &State<P, D>,
    event: Value,
    deadline: Instant,
) -> Result<Value, FleetError> {
    if let Some(records) = event.get("Records") {
        let records = records
            .as_array()
            .ok_or_else(|| ValidationError::new("Records", "must be an array"))?;
        let records: Vec<StreamRecord> = records.iter().map(stream_record).collect();
        let published =
            publish(&state.publisher, &state.dead_letters, &state.bus, &records).await?;
        tracing::info!(
            records = records.len(),
            published = published.entries,
            calls = published.calls,
            dead_lettered = published.dead_lettered,
            failed_from = published.failed_from.as_deref(),
            "alarm notifications"
        );
        let batch_item_failures = published
            .failed_from
            .into_iter()
            .map(|item_identifier| ItemFailure { item_identifier })
            .collect();
        return serde_json::to_value(BatchAnswer {
            batch_item_failures,
        })
        .map_err(FleetError::internal);
    }
    let scheduled: Scheduled =
        serde_json::from_value(event).map_err(|e| ValidationError::new("event", e.to_string()))?;
    let at = match scheduled.time {
        Some(time) => Timestamp::parse_field("time", &time)?,
        None => {
            return Err(
                ValidationError::new("time", "give a time, or send a scheduled event").into(),
            )
        }
    };
    let run = watch(
        &state.table,
        at,
        deadline.checked_sub(MARGIN).unwrap_or(deadline),
    )
    .await?;
    tracing::info!(
        at = %run.at,
        candidates = run.candidates,
        raised = run.raised,
        rearmed = run.rearmed,
        removed = run.removed,
        conflicts = run.conflicts,
        reminders = run.reminders,
        unreadable = run.unreadable,
        complete = run.complete,
        "offline check"
    );
    serde_json::to_value(run).map_err(FleetError::internal)
}

#[cfg(test)]
mod settings {
    use super::*;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_missing_dead_letter_queue_fails_at_start_up() {
        for pairs in [
            &[][..],
            &[("ALARM_DEAD_LETTER_QUEUE_URL", "")][..],
            &[
                ("ALARM_DEAD_LETTER_QUEUE_URL", "  "),
                ("ALARM_BUS_NAME", "b"),
            ][..],
        ] {
            let err = AlarmWatchSettings::from_lookup(lookup(pairs)).unwrap_err();
            assert!(
                err.to_string()
                    .contains("ALARM_DEAD_LETTER_QUEUE_URL is not set"),
                "{err}"
            );
        }
    }

    #[test]
    fn reads_the_bus_and_the_queue() {
        let url = "https://sqs.eu-west-1.amazonaws.com/1/dlq";
        let s = AlarmWatchSettings::from_lookup(lookup(&[
            (
                "ALARM_DEAD_LETTER_QUEUE_URL",
                "https://sqs.eu-west-1.amazonaws.com/1/dlq",
            ),
            ("ALARM_BUS_NAME", "fleet-alarms"),
        ]))
        .unwrap();
        assert_eq!(
            (s.bus_name.as_str(), s.dead_letter_queue_url.as_str()),
            ("fleet-alarms", url)
        );
        let s = AlarmWatchSettings::from_lookup(lookup(&[(
            "ALARM_DEAD_LETTER_QUEUE_URL",
            "https://sqs.eu-west-1.amazonaws.com/1/dlq",
        )]))
        .unwrap();
        assert_eq!(s.bus_name, "AlarmBus");
    }
}
