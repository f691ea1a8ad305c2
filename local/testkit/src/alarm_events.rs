//! Alarm notifications on a machine without EventBridge and SQS: the stand-ins that record the
//! PutEvents and SendMessage requests alarm-watch would send (exactly their bodies, nothing
//! more), and a
//! reader of DynamoDB Local's real stream of the table (its records, as Lambda's event source
//! mapping would deliver them, filtered to alarm items like the template's `FilterCriteria`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, ShardIteratorType};
use serde_json::Value;
use shared::model::entities::EntityType;
use shared::model::schema::Item;
use shared::ops::alarms::notify::{
    put_events_request, send_message_request, AlarmRecord, DeadLetter, DeadLetters, EventEntry,
    Publisher,
};
use shared::{FleetError, FleetTable};

use crate::stack::StackError;

/// Records every PutEvents request body; accepts every entry unless told to refuse some.
#[derive(Default)]
pub struct RecordedPutEvents {
    requests: Mutex<Vec<Value>>,
    refuse: Mutex<Vec<usize>>,
    calls: Mutex<usize>,
}

impl RecordedPutEvents {
    /// Every request recorded so far (`{"Entries": [...]}`), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").clone()
    }

    /// Every entry recorded so far, in order.
    pub fn entries(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .flat_map(|r| r["Entries"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// The next calls (counted from 0 over the recorder's life) numbered in `calls` answer
    /// their first entry with an `InternalFailure` (as EventBridge does for an entry it could
    /// not take); the rest of such a call is accepted.
    pub fn refuse_first_entry_of_calls(&self, calls: impl IntoIterator<Item = usize>) {
        self.refuse.lock().expect("lock").extend(calls);
    }
}

impl Publisher for RecordedPutEvents {
    async fn put_events(
        &self,
        entries: Vec<EventEntry>,
    ) -> Result<Vec<Option<String>>, FleetError> {
        let call = {
            let mut calls = self.calls.lock().expect("lock");
            *calls += 1;
            *calls - 1
        };
        let refused = self.refuse.lock().expect("lock").contains(&call);
        let mut codes = vec![None; entries.len()];
        if refused {
            codes[0] = Some("InternalFailure".to_string());
        } else {
            self.requests
                .lock()
                .expect("lock")
                .push(put_events_request(&entries));
        }
        Ok(codes)
    }
}

/// The queue URL the dead-letter stand-in records (an account's queue URL shape).
pub const LOCAL_DEAD_LETTER_QUEUE: &str =
    "https://sqs.us-east-1.amazonaws.com/123456789012/device-fleet-alarm-transitions-dlq";

/// Records every SendMessage request body to the dead-letter queue; accepts every message
/// unless told to refuse some.
#[derive(Default)]
pub struct RecordedDeadLetters {
    requests: Mutex<Vec<Value>>,
    refuse: Mutex<usize>,
}

impl RecordedDeadLetters {
    /// Every request recorded so far (`{"QueueUrl": ..., "MessageBody": ...}`), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").clone()
    }

    /// The messages recorded so far, read back.
    pub fn letters(&self) -> Vec<DeadLetter> {
        self.requests()
            .iter()
            .filter_map(|r| serde_json::from_str(r["MessageBody"].as_str()?).ok())
            .collect()
    }

    /// The next `calls` SendMessage calls fail (as SQS unreachable would).
    pub fn refuse_next(&self, calls: usize) {
        *self.refuse.lock().expect("lock") += calls;
    }
}

impl DeadLetters for RecordedDeadLetters {
    async fn send_message(&self, body: String) -> Result<(), FleetError> {
        {
            let mut refuse = self.refuse.lock().expect("lock");
            if *refuse > 0 {
                *refuse -= 1;
                return Err(FleetError::internal("SendMessage refused by the stand-in"));
            }
        }
        self.requests
            .lock()
            .expect("lock")
            .push(send_message_request(LOCAL_DEAD_LETTER_QUEUE, &body));
        Ok(())
    }
}

/// A reader of a table's stream on DynamoDB Local, shard by shard, from its first record.
pub struct AlarmStream {
    client: aws_sdk_dynamodbstreams::Client,
    arn: String,
    /// Shards read so far, with the iterator to continue from (`None`: the shard is closed
    /// and read to its end).
    shards: HashMap<String, Option<String>>,
    order: Vec<String>,
}

impl AlarmStream {
    /// The stream of `table` (created from template.yaml, so with NEW_AND_OLD_IMAGES), read
    /// from its oldest record.
    pub async fn open(table: &FleetTable, endpoint: &str) -> Result<Self, StackError> {
        let described = table
            .client
            .describe_table()
            .table_name(table.name())
            .send()
            .await?;
        let arn = described
            .table()
            .and_then(|t| t.latest_stream_arn())
            .ok_or("the table has no stream (template.yaml: StreamSpecification)")?
            .to_string();
        let sdk = crate::stack::local_sdk_config(endpoint).await;
        Ok(Self {
            client: aws_sdk_dynamodbstreams::Client::new(&sdk),
            arn,
            shards: HashMap::new(),
            order: Vec::new(),
        })
    }

    /// Every record written since the last read, alarm items only, in stream order per
    /// shard (a device's alarms share a key, so a shard).
    pub async fn read(&mut self) -> Result<Vec<AlarmRecord>, StackError> {
        let described = self
            .client
            .describe_stream()
            .stream_arn(&self.arn)
            .send()
            .await?;
        let shards = described
            .stream_description()
            .map(|d| d.shards().to_vec())
            .unwrap_or_default();
        for shard in shards {
            let Some(id) = shard.shard_id() else { continue };
            if self.shards.contains_key(id) {
                continue;
            }
            let iterator = self
                .client
                .get_shard_iterator()
                .stream_arn(&self.arn)
                .shard_id(id)
                .shard_iterator_type(ShardIteratorType::TrimHorizon)
                .send()
                .await?
                .shard_iterator;
            self.shards.insert(id.to_string(), iterator);
            self.order.push(id.to_string());
        }
        let mut records = Vec::new();
        for id in self.order.clone() {
            while let Some(Some(iterator)) = self.shards.get(&id).cloned() {
                let out = self
                    .client
                    .get_records()
                    .shard_iterator(iterator)
                    .send()
                    .await?;
                self.shards
                    .insert(id.clone(), out.next_shard_iterator.clone());
                if out.records().is_empty() {
                    break;
                }
                for record in out.records() {
                    let Some(change) = record.dynamodb() else {
                        continue;
                    };
                    let image = |m: Option<&HashMap<String, StreamValue>>| -> Item {
                        m.map(|m| m.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
                            .unwrap_or_default()
                    };
                    let new_image = image(change.new_image());
                    // The template's FilterCriteria: alarm items' new images only.
                    if EntityType::of(&new_image) != Some(EntityType::Alarm) {
                        continue;
                    }
                    records.push(AlarmRecord {
                        sequence_number: change.sequence_number().unwrap_or_default().to_string(),
                        old_image: image(change.old_image()),
                        new_image,
                    });
                }
            }
        }
        Ok(records)
    }
}

/// A stream attribute value as the table's client spells it.
fn convert(value: &StreamValue) -> AttributeValue {
    match value {
        StreamValue::S(s) => AttributeValue::S(s.clone()),
        StreamValue::N(n) => AttributeValue::N(n.clone()),
        StreamValue::B(b) => {
            AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(b.as_ref().to_vec()))
        }
        StreamValue::Bool(b) => AttributeValue::Bool(*b),
        StreamValue::Null(n) => AttributeValue::Null(*n),
        StreamValue::Ss(v) => AttributeValue::Ss(v.clone()),
        StreamValue::Ns(v) => AttributeValue::Ns(v.clone()),
        StreamValue::Bs(v) => AttributeValue::Bs(
            v.iter()
                .map(|b| aws_sdk_dynamodb::primitives::Blob::new(b.as_ref().to_vec()))
                .collect(),
        ),
        StreamValue::L(v) => AttributeValue::L(v.iter().map(convert).collect()),
        StreamValue::M(m) => {
            AttributeValue::M(m.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
        }
        _ => AttributeValue::Null(true),
    }
}

/// The detail-types of `entries` in order, each with its alarm id (what a test compares).
pub fn detail_types(entries: &[Value]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|e| {
            let detail: Value =
                serde_json::from_str(e["Detail"].as_str().unwrap_or("{}")).unwrap_or_default();
            (
                e["DetailType"].as_str().unwrap_or_default().to_string(),
                detail["alarmId"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The distinct `notificationId`s of `entries`.
pub fn notification_ids(entries: &[Value]) -> BTreeSet<String> {
    entries
        .iter()
        .filter_map(|e| {
            let detail: Value = serde_json::from_str(e["Detail"].as_str()?).ok()?;
            detail["notificationId"].as_str().map(str::to_string)
        })
        .collect()
}

/// The event Lambda's DynamoDB event source mapping delivers for `records` (what the handler
/// is fed): `Records` with `eventName`, `dynamodb.SequenceNumber` and both images as DynamoDB
/// JSON.
pub fn lambda_event(records: &[AlarmRecord]) -> Value {
    let image = |item: &Item| serde_json::to_value(serde_dynamo::Item::from(item.clone()));
    let records: Vec<Value> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut change = serde_json::json!({
                "ApproximateCreationDateTime": 1_795_168_800.0,
                "SequenceNumber": r.sequence_number,
                "SizeBytes": 1,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
                "Keys": {},
            });
            if !r.new_image.is_empty() {
                change["NewImage"] = image(&r.new_image).unwrap_or_default();
            }
            if !r.old_image.is_empty() {
                change["OldImage"] = image(&r.old_image).unwrap_or_default();
            }
            serde_json::json!({
                "eventID": format!("local-{i}"),
                "eventName": if r.old_image.is_empty() { "INSERT" } else { "MODIFY" },
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": change,
                "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/local/stream/local",
            })
        })
        .collect();
    serde_json::json!({ "Records": records })
}
