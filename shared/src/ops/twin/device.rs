//! What a device gets from its twin: its report and acknowledgements applied, and its
//! pending work (the desired state it has not reported applying, the commands it has not
//! finished) in the answer to the request it makes anyway (AP-14), or to a sync of its own
//! (AP-T4) when it has nothing to send.
//!
//! Nothing is read when nothing is pending: the versions come from the live-state update
//! ingestion sends anyway (`ReturnValues`), and only a pending kind costs its read.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use serde::Serialize;
use serde_json::Value;

use super::firmware_offer::{firmware_check_in, FirmwareDelivery, OpenFirmware};
use super::owner::{command_key, open_commands, watermark, CommandView};
use super::state::read_state;
use crate::model::entities::desired_state::DesiredStateItem;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::reported_state::ReportedStateItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::pattern_id::PatternId;
use crate::model::rollout_progress::{FirmwareReport, SubmittedFirmwareReport};
use crate::model::schema::PK;
use crate::model::timestamp::Timestamp;
use crate::model::twin::{command_id, CommandStatus, TwinDocument, TwinVersions};
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{number_value, string_value};
use crate::store::firmware_images::FirmwareImages;
use crate::store::table::{done_unless_failed, sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// What a device sends about its twin with a batch or a sync.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceReport {
    /// The desired version it applied and the configuration it runs with.
    pub reported: Option<(u64, TwinDocument)>,
    /// Commands it finished.
    pub acks: Vec<Acknowledgement>,
    /// What it says of its firmware (issue 40): the version it runs and its update state.
    pub firmware: Option<FirmwareReport>,
}

impl DeviceReport {
    /// The report with the device's `firmware` (validated: a 400 naming `firmware.*`).
    pub fn with_firmware(
        mut self,
        firmware: Option<SubmittedFirmwareReport>,
    ) -> Result<Self, crate::model::error::ValidationError> {
        self.firmware = firmware.map(FirmwareReport::parse).transpose()?;
        Ok(self)
    }

    /// Whether it says nothing of its twin (reported state, acknowledgements); its firmware
    /// report is a check-in's part ([`super::firmware_offer`]).
    pub fn is_empty(&self) -> bool {
        self.reported.is_none() && self.acks.is_empty()
    }
}

/// Most acknowledgements in one request.
pub const MAX_ACKS: usize = 32;

/// `reported` as a device sends it: `{"version": n, "state": {...}}`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmittedReport {
    /// The desired version it applied (0: none yet).
    pub version: u64,
    /// The configuration it runs with.
    pub state: Value,
}

/// One of `acks` as a device sends it: `{"commandId", "status": "succeeded"|"failed", "result"?}`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubmittedAck {
    /// `cmd-{seq}`.
    pub command_id: String,
    /// `succeeded` or `failed`.
    pub status: String,
    /// What it says about it (an object); `null` is refused (leave it out).
    #[serde(default, deserialize_with = "crate::model::optional::not_null")]
    pub result: Option<Value>,
}

impl DeviceReport {
    /// The report and acknowledgements of a request, validated: a 400 naming the field
    /// (`reported.state.x`, `acks[2].commandId`) for anything out of bounds.
    pub fn parse(
        reported: Option<SubmittedReport>,
        acks: Vec<SubmittedAck>,
    ) -> Result<Self, crate::model::error::ValidationError> {
        use crate::model::error::ValidationError;
        use crate::model::twin::{
            parse_command_id, MAX_COMMAND_PARAMETERS_BYTES, MAX_DOCUMENT_BYTES,
        };
        if acks.len() > MAX_ACKS {
            return Err(ValidationError::new(
                "acks",
                format!("at most {MAX_ACKS} acknowledgements per request"),
            ));
        }
        let reported = reported
            .map(|r| {
                TwinDocument::parse("reported.state", r.state, MAX_DOCUMENT_BYTES)
                    .map(|doc| (r.version, doc))
            })
            .transpose()?;
        let mut parsed = Vec::with_capacity(acks.len());
        for (i, ack) in acks.into_iter().enumerate() {
            let seq = parse_command_id(&format!("acks[{i}].commandId"), &ack.command_id)?;
            let succeeded = match ack.status.as_str() {
                "succeeded" => true,
                "failed" => false,
                _ => {
                    return Err(ValidationError::new(
                        format!("acks[{i}].status"),
                        "must be succeeded or failed",
                    ))
                }
            };
            let result = ack
                .result
                .map(|r| {
                    TwinDocument::parse(
                        &format!("acks[{i}].result"),
                        r,
                        MAX_COMMAND_PARAMETERS_BYTES,
                    )
                })
                .transpose()?;
            parsed.push(Acknowledgement {
                seq,
                succeeded,
                result,
            });
        }
        Ok(Self {
            reported,
            acks: parsed,
            firmware: None,
        })
    }
}

/// A device's word on a command it was given.
#[derive(Clone, Debug, PartialEq)]
pub struct Acknowledgement {
    /// The command's sequence number (its id is `cmd-{seq}`).
    pub seq: u64,
    /// Done (`succeeded`) or not (`failed`).
    pub succeeded: bool,
    /// What it says about it (bounded like command parameters).
    pub result: Option<TwinDocument>,
}

/// A desired state handed to the device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredDelivery {
    /// The version to report once applied.
    pub version: u64,
    /// The whole desired document (never a stale one: the newest version, read consistently).
    pub state: Value,
}

/// A command handed to the device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandDelivery {
    /// The id to acknowledge.
    pub command_id: String,
    /// What to do.
    pub name: String,
    /// With what.
    pub parameters: Value,
    /// Not to be started after this.
    pub expires_at: String,
}

/// The twin's part of the answer to a device (a batch or a sync): what it must do and what of
/// its acknowledgements took effect.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TwinReply {
    /// The desired state, while the device has not reported applying its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<DesiredDelivery>,
    /// Commands queued or delivered and not finished, oldest first (at least once: a command
    /// comes again until it is acknowledged or expires).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandDelivery>,
    /// The acknowledgements of this request that took effect (a replayed one is not listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acknowledged: Vec<String>,
    /// A staged firmware rollout's offer, while the device's stage is open, the rollout runs
    /// and the device still needs the image ([`super::firmware_offer`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwareDelivery>,
    /// DynamoDB requests this twin work issued (its part of the pattern's budget).
    #[serde(skip)]
    pub requests: u32,
}

impl TwinReply {
    /// Whether the answer carries nothing of the twin.
    pub fn is_empty(&self) -> bool {
        self.desired.is_none()
            && self.commands.is_empty()
            && self.acknowledged.is_empty()
            && self.firmware.is_none()
    }
}

/// The device's report and acknowledgements applied, all at once: each acknowledgement one
/// conditional UpdateItem of its command (`delivered` to `succeeded`/`failed`: a replay fails
/// the condition and acknowledges nothing again), a report one conditional
/// UpdateItem of the live state's `reportedVersion` (returning the versions) and one PutItem
/// of the document. Returns the versions the report's update saw, the ids acknowledged now,
/// and the requests issued ([`AppliedReport`]).
pub async fn apply_report(
    table: &FleetTable,
    registration: &RegistrationItem,
    report: &DeviceReport,
) -> Result<AppliedReport, FleetError> {
    let now = Timestamp::now();
    let acks = futures::future::join_all(
        report
            .acks
            .iter()
            .map(|ack| acknowledge(table, registration, ack, now)),
    );
    let reported = async {
        match &report.reported {
            Some((version, document)) => {
                let (versions, stored) = tokio::join!(
                    record_reported_version(table, registration, *version),
                    store_reported(table, registration, *version, document, now),
                );
                stored?;
                versions
            }
            None => Ok(None),
        }
    };
    let (acks, state) = tokio::join!(acks, reported);
    let mut acknowledged = Vec::new();
    for (ack, result) in report.acks.iter().zip(acks) {
        if result? {
            acknowledged.push(command_id(ack.seq));
        }
    }
    let requests = report.acks.len() as u32 + 2 * u32::from(report.reported.is_some());
    let state = state?;
    Ok(AppliedReport {
        versions: state.as_ref().map(|s| s.twin),
        firmware: state.as_ref().and_then(OpenFirmware::of),
        acknowledged,
        requests,
    })
}

/// What applying a device's report and acknowledgements did ([`apply_report`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppliedReport {
    /// The live state's twin versions as the report's update saw them (`None`: no report).
    pub versions: Option<TwinVersions>,
    /// The live state's open firmware part as the report's update saw it.
    pub firmware: Option<OpenFirmware>,
    /// The ids of the commands acknowledged by this request (a replayed one is not listed).
    pub acknowledged: Vec<String>,
    /// DynamoDB requests issued.
    pub requests: u32,
}

impl From<AppliedReport> for TwinReply {
    /// The reply before its pending work: the acknowledgements and their requests.
    fn from(applied: AppliedReport) -> Self {
        Self {
            acknowledged: applied.acknowledged,
            requests: applied.requests,
            ..Self::default()
        }
    }
}

/// One acknowledgement: true when it took effect now (a `delivered` command only).
async fn acknowledge(
    table: &FleetTable,
    registration: &RegistrationItem,
    ack: &Acknowledgement,
    now: Timestamp,
) -> Result<bool, FleetError> {
    let status = if ack.succeeded {
        CommandStatus::Succeeded
    } else {
        CommandStatus::Failed
    };
    let mut changes = Update::new()
        .set(
            crate::model::entities::command::CommandItem::STATUS,
            serde_dynamo::to_attribute_value(status)?,
        )
        .set(
            crate::model::entities::command::CommandItem::FINISHED_AT,
            string_value(now.to_string()),
        );
    if let Some(result) = &ack.result {
        changes = changes.set(
            crate::model::entities::command::CommandItem::RESULT,
            string_value(result.to_text()),
        );
    }
    let open = |status: CommandStatus| -> Result<Condition, FleetError> {
        Ok(Condition::equals(
            crate::model::entities::command::CommandItem::STATUS,
            serde_dynamo::to_attribute_value(status)?,
        ))
    };
    // Only a delivered command can be acknowledged: a device knows an id only once it was
    // handed one, and a command that expired before delivery was never handed out. A command
    // from before this device's registration is a deleted device's of the same id.
    let condition = Condition::exists(PK)
        .and(open(CommandStatus::Delivered)?)
        .and(Condition::at_least(
            crate::model::entities::command::CommandItem::CREATED_AT,
            string_value(registration.created_at.to_string()),
        ));
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(
            command_key(&registration.user_id, &registration.device_id, ack.seq).attributes(),
        ))
        .expressions(Expressions::write(changes, Some(condition)))
        .send()
        .await;
    match sent {
        Ok(_) => Ok(true),
        Err(err) => match err.as_service_error() {
            // Acknowledged before (a replay), or no such command of this device.
            Some(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(false),
            _ => Err(sdk_error(err)),
        },
    }
}

/// `reportedVersion` moved up to `version` (never down, never past the desired version),
/// returning the live state either way; `None` when the device is gone.
async fn record_reported_version(
    table: &FleetTable,
    registration: &RegistrationItem,
    version: u64,
) -> Result<Option<DeviceStateItem>, FleetError> {
    let condition = Condition::exists(PK)
        .and(Condition::at_least(
            TwinVersions::DESIRED_VERSION,
            number_value(version),
        ))
        .and(
            Condition::absent(TwinVersions::REPORTED_VERSION).or(Condition::below(
                TwinVersions::REPORTED_VERSION,
                number_value(version),
            )),
        );
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(state_key(registration).attributes()))
        .expressions(Expressions::write(
            Update::new().set(TwinVersions::REPORTED_VERSION, number_value(version)),
            Some(condition),
        ))
        .return_values(ReturnValue::AllNew)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    let item = match sent {
        Ok(out) => out.attributes,
        Err(err) => match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(failed)) => failed.item.clone(),
            _ => return Err(sdk_error(err)),
        },
    };
    item.map(DeviceStateItem::from_item).transpose()
}

/// The reported document, unless a newer report of this device is stored already. A stored
/// report from before this device's registration is a deleted device's of the same id (one in
/// flight at its deletion): this device's first report replaces it whatever its version.
async fn store_reported(
    table: &FleetTable,
    registration: &RegistrationItem,
    version: u64,
    document: &TwinDocument,
    now: Timestamp,
) -> Result<(), FleetError> {
    let item = ReportedStateItem {
        user_id: registration.user_id.clone(),
        device_id: registration.device_id.clone(),
        document: document.to_text(),
        version,
        reported_at: now,
    };
    let sent = table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(item.to_item(&table.config.shards)?))
        .expressions(Expressions::condition(
            Condition::absent(PK)
                .or(Condition::at_most(
                    ReportedStateItem::VERSION,
                    number_value(version),
                ))
                .or(Condition::below(
                    ReportedStateItem::REPORTED_AT,
                    string_value(registration.created_at.to_string()),
                )),
        ))
        .send()
        .await;
    // A newer report is there already.
    done_unless_failed(sent)
}

/// The device's pending work given its live state's `versions` (none: read the state, one
/// consistent GetItem): the desired document when its version is ahead of the reported one
/// (one consistent GetItem), the open commands when there are any (one consistent Query; a
/// queued one is marked delivered, one conditional UpdateItem each, the first time only; an
/// expired one is never handed out), and the queue's watermark moved past what is finished
/// (one UpdateItem, only when it moves). Nothing at all when nothing is pending.
pub async fn pending_work(
    table: &FleetTable,
    registration: &RegistrationItem,
    versions: Option<TwinVersions>,
    mut work: TwinReply,
) -> Result<TwinReply, FleetError> {
    let versions = match versions {
        Some(v) => v,
        None => {
            work.requests += 1;
            match read_state(table, state_key(registration)).await? {
                Some(state) => state.twin,
                None => return Err(FleetError::Unauthorized),
            }
        }
    };
    let now = Timestamp::now();
    let desired = async {
        if !versions.desired_pending() {
            return Ok::<_, FleetError>(None);
        }
        let out = table
            .client
            .get_item()
            .table_name(table.name())
            .set_key(Some(
                ItemKey::Desired {
                    user: registration.user_id.clone(),
                    device: registration.device_id.clone(),
                }
                .attributes(),
            ))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let item = DesiredStateItem::from_item(item)?;
        Ok(Some(DesiredDelivery {
            version: item.version,
            state: TwinDocument::from_text(&item.document)?.as_value(),
        }))
    };
    let commands = async {
        if !versions.commands_pending() {
            return Ok::<_, FleetError>((Vec::new(), 0));
        }
        let open = open_commands(
            table,
            &registration.user_id,
            &registration.device_id,
            &versions,
        )
        .await?;
        let deliverable: Vec<_> = open
            .iter()
            .filter(|c| {
                matches!(
                    c.status_at(now),
                    CommandStatus::Queued | CommandStatus::Delivered
                )
            })
            .cloned()
            .collect();
        let first_time: Vec<_> = deliverable
            .iter()
            .filter(|c| c.status == CommandStatus::Queued)
            .collect();
        let marked = futures::future::join_all(
            first_time
                .iter()
                .map(|c| mark_delivered(table, registration, c.seq, now)),
        )
        .await;
        for result in marked {
            result?;
        }
        let mut requests = 1 + first_time.len() as u32;
        let (done, _) = watermark(&open, &versions, now);
        if done > versions.commands_done {
            requests += 1;
            advance_watermark(table, registration, done).await?;
        }
        let delivered = deliverable
            .into_iter()
            .map(|c| {
                let view = CommandView::of(&c, now);
                CommandDelivery {
                    command_id: view.command_id,
                    name: view.name,
                    parameters: view.parameters,
                    expires_at: view.expires_at,
                }
            })
            .collect();
        Ok((delivered, requests))
    };
    let (desired, commands) = tokio::join!(desired, commands);
    work.desired = desired?;
    work.requests += u32::from(versions.desired_pending());
    let (commands, requests) = commands?;
    work.commands = commands;
    work.requests += requests;
    Ok(work)
}

/// `queued` to `delivered`, the first time the command is handed out.
async fn mark_delivered(
    table: &FleetTable,
    registration: &RegistrationItem,
    seq: u64,
    now: Timestamp,
) -> Result<(), FleetError> {
    let status = |st: CommandStatus| serde_dynamo::to_attribute_value(st);
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(
            command_key(&registration.user_id, &registration.device_id, seq).attributes(),
        ))
        .expressions(Expressions::write(
            Update::new()
                .set(
                    crate::model::entities::command::CommandItem::STATUS,
                    status(CommandStatus::Delivered)?,
                )
                .set(
                    crate::model::entities::command::CommandItem::DELIVERED_AT,
                    string_value(now.to_string()),
                ),
            Some(Condition::equals(
                crate::model::entities::command::CommandItem::STATUS,
                status(CommandStatus::Queued)?,
            )),
        ))
        .send()
        .await;
    // Delivered (or acknowledged) by a concurrent request meanwhile.
    done_unless_failed(sent)
}

/// The live state's `commandsDone` moved up to `done` (never down).
async fn advance_watermark(
    table: &FleetTable,
    registration: &RegistrationItem,
    done: u64,
) -> Result<(), FleetError> {
    let sent = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(state_key(registration).attributes()))
        .expressions(Expressions::write(
            Update::new().set(TwinVersions::COMMANDS_DONE, number_value(done)),
            Some(
                Condition::exists(PK).and(Condition::absent(TwinVersions::COMMANDS_DONE).or(
                    Condition::below(TwinVersions::COMMANDS_DONE, number_value(done)),
                )),
            ),
        ))
        .send()
        .await;
    // At `done` or above already.
    done_unless_failed(sent)
}

/// AP-T4, implemented by [`sync_device`].
pub const SYNC_DEVICE: AccessPattern = AccessPattern {
    id: PatternId::SyncDevice,
    description: "a device with nothing to send: report, acknowledge, get its pending work",
    frequency: Frequency::Important,
    operations: &[
        Operation::GetItem,
        Operation::Query,
        Operation::UpdateItem,
        Operation::PutItem,
        Operation::BatchGetItem,
        Operation::TransactWriteItems,
    ],
    index: None,
    key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION; the live state; PK = USER#{userId}#DEVICE#{deviceId}, SK = TWIN#DESIRED | COMMAND#{seq}; only while the device has an open part in a firmware rollout: the rollout (PK = USER#{userId}, SK = ROLLOUT#{rolloutId}), and on a move the live state's `firmware`",
    budget: RequestBudget::FixedPlusTwin(1),
    max_read_units: None,
    route: Some("POST /devices/{deviceId}/sync"),
    implemented_by: implemented_by!(sync_device),
};

/// AP-T4: a device's report and acknowledgements applied and its pending work, without
/// events. Nothing to report or acknowledge and nothing pending: the registration read
/// (cached by a warm Lambda) and one consistent GetItem of the live state. No firmware offer
/// ([`sync_device_with_firmware`] has it).
pub async fn sync_device(
    table: &FleetTable,
    registration: &RegistrationItem,
    report: &DeviceReport,
) -> Result<TwinReply, FleetError> {
    sync_device_with_firmware(table, None, registration, report).await
}

/// [`sync_device`] with the device's firmware check-in ([`firmware_check_in`]): the live
/// state the sync reads anyway (or the report's update returns) tells whether the device has
/// an open part in a firmware rollout, and only then is the rollout read; its URL is presigned on
/// `images`.
pub async fn sync_device_with_firmware(
    table: &FleetTable,
    images: Option<&FirmwareImages>,
    registration: &RegistrationItem,
    report: &DeviceReport,
) -> Result<TwinReply, FleetError> {
    let mut applied = apply_report(table, registration, report).await?;
    let mark = applied.firmware.take();
    let (versions, mark, read) = match applied.versions {
        Some(versions) => (versions, mark, 0),
        None => match read_state(table, state_key(registration)).await? {
            Some(state) => (state.twin, OpenFirmware::of(&state), 1),
            None => return Err(FleetError::Unauthorized),
        },
    };
    let mut work = pending_work(table, registration, Some(versions), applied.into()).await?;
    work.requests += read;
    let firmware = firmware_check_in(
        table,
        images,
        registration,
        mark.as_ref(),
        report.firmware.as_ref(),
    )
    .await?;
    work.firmware = firmware.offer;
    work.requests += firmware.requests;
    Ok(work)
}

/// The key of the live state of the device of `registration`.
fn state_key(registration: &RegistrationItem) -> ItemKey {
    ItemKey::DeviceState {
        user: registration.user_id.clone(),
        partition: registration.partition,
        device: registration.device_id.clone(),
    }
}
