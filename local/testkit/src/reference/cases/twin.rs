//! The cases of the device twin: the owner's desired state and commands, the device's syncs,
//! and fleet-wide rollouts.

use serde_json::json;
use shared::model::ids::{CommandName, RolloutId, Tag};
use shared::model::pattern_id::PatternId;
use shared::model::twin::{RolloutTarget, TwinDocument, MAX_DOCUMENT_BYTES};
use shared::ops::ingest::{IngestConfig, Ingestor};
use shared::ops::pattern::BudgetScale;
use shared::ops::twin::device::{sync_device, DeviceReport, SubmittedAck, SubmittedReport};
use shared::ops::twin::owner::{list_commands, queue_command, set_desired, NewCommand};
use shared::ops::twin::rollout::{advance_rollouts, get_rollout, start_rollout};
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use super::common::{
    alice, alice_device, device_id, every_call, found, one, read, route, write, PatternCase,
    RouteCall, Tokens, ALICE, DASHBOARD, INGEST,
};
use crate::api_event::ApiEvent;

/// SyncDevice: a device with nothing to send and nothing pending, cold Lambda.
pub(super) const SYNC_NOTHING_PENDING: PatternCase = PatternCase {
    id: PatternId::SyncDevice,
    workload: "a device with nothing to send and nothing pending, cold Lambda",
    scale: |_| BudgetScale {
        twin: 1,
        ..BudgetScale::one()
    },
    run: |table, tokens| {
        Box::pin(async move {
            let cold = Ingestor::new(table.clone(), IngestConfig::default());
            let device = alice_device(SYNC_DEVICE)?;
            let token = tokens
                .get(device.as_str())
                .ok_or_else(|| FleetError::internal("no token"))?;
            let registration = cold.authenticate(&device, token).await?;
            let work = sync_device(table, &registration, &DeviceReport::default()).await?;
            found(work.is_empty(), PatternId::SyncDevice)
        })
    },
    call: Some(RouteCall {
        request: "POST /devices/{deviceId}/sync (nothing pending, warm caches)",
        function: INGEST,
        expected: 200,
        events: |tokens, _| {
            let device = device_id(SYNC_DEVICE);
            let token = tokens.get(&device).cloned().unwrap_or_default();
            every_call(
                ApiEvent::new(
                    route(PatternId::SyncDevice),
                    format!("/devices/{device}/sync"),
                )
                .param("deviceId", &device)
                .header("Authorization", &format!("Bearer {token}")),
            )
        },
    }),
};

/// SetDesired: set a device's desired state (If-Match 0).
pub(super) const SET_DESIRED: PatternCase = PatternCase {
    id: PatternId::SetDesired,
    workload: "set a device's desired state (If-Match 0)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let document = TwinDocument::parse(
                "desired",
                json!({"reportIntervalSeconds": 300}),
                MAX_DOCUMENT_BYTES,
            )?;
            let set =
                set_desired(table, &alice()?, &alice_device(SYNC_DEVICE)?, 0, document).await?;
            found(set.version == 1, PatternId::SetDesired)
        })
    },
    call: write(
        "PUT /me/devices/{deviceId}/desired (If-Match 0)",
        200,
        |_, _| {
            Box::new(|i| {
                let device = format!("bench-{i}");
                ApiEvent::new(
                    route(PatternId::SetDesired),
                    format!("/me/devices/{device}/desired"),
                )
                .caller(ALICE)
                .param("deviceId", &device)
                .header("If-Match", "0")
                .json(&json!({"desired": {"reportIntervalSeconds": 300}}))
                .to_bytes()
            })
        },
    ),
};

/// QueueCommand: queue a command (an empty queue).
pub(super) const QUEUE_COMMAND: PatternCase = PatternCase {
    id: PatternId::QueueCommand,
    workload: "queue a command (an empty queue)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let command = NewCommand {
                name: CommandName::parse("reboot")?,
                parameters: TwinDocument::default(),
                expires_in_seconds: 3600,
            };
            let queued =
                queue_command(table, &alice()?, &alice_device(SYNC_DEVICE)?, command).await?;
            found(queued.command_id == "cmd-1", PatternId::QueueCommand)
        })
    },
    call: write("POST /me/devices/{deviceId}/commands", 201, |_, _| {
        Box::new(|i| {
            let device = format!("bench-{i}");
            ApiEvent::new(
                route(PatternId::QueueCommand),
                format!("/me/devices/{device}/commands"),
            )
            .caller(ALICE)
            .param("deviceId", &device)
            .json(&json!({"name": "reboot"}))
            .to_bytes()
        })
    }),
};

/// ListCommands: a device's commands (one queued).
pub(super) const LIST_COMMANDS: PatternCase = PatternCase {
    id: PatternId::ListCommands,
    workload: "a device's commands (one queued)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let listed = list_commands(table, &alice()?, &alice_device(SYNC_DEVICE)?).await?;
            found(
                listed.is_some_and(|l| l.len() == 1),
                PatternId::ListCommands,
            )
        })
    },
    call: read("GET /me/devices/{deviceId}/commands", |_, _| {
        Box::new(|i| {
            let device = format!("bench-{i}");
            ApiEvent::new(
                route(PatternId::ListCommands),
                format!("/me/devices/{device}/commands"),
            )
            .caller(ALICE)
            .param("deviceId", &device)
            .to_bytes()
        })
    }),
};

/// SyncDevice: a desired change and a command pending: delivered.
pub(super) const SYNC_DELIVERS_PENDING: PatternCase = PatternCase {
    id: PatternId::SyncDevice,
    workload: "a desired change and a command pending: delivered",
    scale: |_| BudgetScale {
        twin: 4,
        ..BudgetScale::one()
    },
    run: |table, tokens| {
        Box::pin(async move {
            let registration = sync_registration(table, tokens).await?;
            let work = sync_device(table, &registration, &DeviceReport::default()).await?;
            found(
                work.desired.is_some() && work.commands.len() == 1,
                PatternId::SyncDevice,
            )
        })
    },
    call: Some(RouteCall {
        request: "POST /devices/{deviceId}/sync (asks for its pending work)",
        function: INGEST,
        expected: 200,
        events: |tokens, _| sync_call(tokens, json!({})),
    }),
};

/// SyncDevice: report the desired version applied and acknowledge the command.
pub(super) const SYNC_REPORTS_AND_ACKS: PatternCase = PatternCase {
    id: PatternId::SyncDevice,
    workload: "report the desired version applied and acknowledge the command",
    scale: |_| BudgetScale {
        twin: 5,
        ..BudgetScale::one()
    },
    run: |table, tokens| {
        Box::pin(async move {
            let registration = sync_registration(table, tokens).await?;
            let report = DeviceReport::parse(
                Some(SubmittedReport {
                    version: 1,
                    state: json!({"reportIntervalSeconds": 600}),
                }),
                vec![SubmittedAck {
                    command_id: "cmd-1".into(),
                    status: "succeeded".into(),
                    result: None,
                }],
            )?;
            let work = sync_device(table, &registration, &report).await?;
            found(
                work.acknowledged == ["cmd-1"] && work.desired.is_none(),
                PatternId::SyncDevice,
            )
        })
    },
    call: Some(RouteCall {
        request: "POST /devices/{deviceId}/sync (a report and an acknowledgement)",
        function: INGEST,
        expected: 200,
        events: |tokens, _| {
            sync_call(
                tokens,
                json!({"reported": {"version": 1, "state": {"reportIntervalSeconds": 600}},
                       "acks": [{"commandId": "cmd-1", "status": "succeeded"}]}),
            )
        },
    }),
};

/// StartRollout: start a fleet-wide change of Alice's devices tagged kitchen (4: AP-06 retagged device 0).
pub(super) const START_ROLLOUT: PatternCase = PatternCase {
    id: PatternId::StartRollout,
    workload:
        "start a fleet-wide change of Alice's devices tagged kitchen (4: AP-06 retagged device 0)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let patch = TwinDocument::parse(
                "desired",
                json!({"firmwareChannel": "stable"}),
                MAX_DOCUMENT_BYTES,
            )?;
            let started = start_rollout(
                table,
                &alice()?,
                RolloutTarget::Tag(Tag::parse("kitchen")?),
                patch,
            )
            .await?;
            found(started.devices_updated == 0, PatternId::StartRollout)
        })
    },
    // Each call from another owner: an owner runs at most 10 rollouts at once (issue 39 item
    // 8), and a repeated call would be its 409 after the tenth.
    call: write("POST /me/rollouts (tag)", 202, |_, _| {
        Box::new(|i| {
            ApiEvent::new(route(PatternId::StartRollout), "/me/rollouts")
                .caller(&format!("{ALICE}-rollouts-{i}"))
                .json(&json!({"tag": "bench", "desired": {"firmwareChannel": "beta"}}))
                .to_bytes()
        })
    }),
};

/// GetRollout: a fleet-wide change's progress.
pub(super) const GET_ROLLOUT: PatternCase = PatternCase {
    id: PatternId::GetRollout,
    workload: "a fleet-wide change's progress",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            // Which rollout: read outside the case's meter (the worker's list).
            let id = RequestMeter::new()
                .scope(first_running_rollout(table))
                .await?;
            let got = get_rollout(table, &alice()?, &id).await?;
            found(got.is_some(), PatternId::GetRollout)
        })
    },
    // The id a call could name is random: the bench reads one that is not there (the same
    // one GetItem), answered 404.
    call: Some(RouteCall {
        request: "GET /me/rollouts/{rolloutId} (unknown id)",
        function: DASHBOARD,
        expected: 404,
        events: |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::GetRollout), "/me/rollouts/r-unknown")
                    .caller(ALICE)
                    .param("rolloutId", "r-unknown"),
            )
        },
    }),
};

/// AdvanceRollouts: the rollout worker: one rollout, one page of 4 devices.
pub(super) const ADVANCE_ROLLOUTS: PatternCase = PatternCase {
    id: PatternId::AdvanceRollouts,
    workload: "the rollout worker: one rollout, one page of 4 devices",
    scale: |_| BudgetScale {
        shards: 1,
        pages: 1,
        devices: 4,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let run = advance_rollouts(
                table,
                std::time::Instant::now() + std::time::Duration::from_secs(60),
            )
            .await?;
            found(
                run.devices == 4 && run.finished == 1,
                PatternId::AdvanceRollouts,
            )
        })
    },
    call: None,
};

/// Alice's device that AP-T4 syncs (tagged home only: no rollout case reaches it).
const SYNC_DEVICE: u32 = 3;

/// Device 3's registration, read the way a cold Lambda does (outside no meter: it is the
/// pattern's first request).
async fn sync_registration(
    table: &FleetTable,
    tokens: &Tokens,
) -> Result<shared::model::entities::registration::RegistrationItem, FleetError> {
    let cold = Ingestor::new(table.clone(), IngestConfig::default());
    let device = alice_device(SYNC_DEVICE)?;
    let token = tokens
        .get(device.as_str())
        .ok_or_else(|| FleetError::internal("no token"))?;
    cold.authenticate(&device, token).await
}

/// A sync of device 3 with `body`, the same for every call.
fn sync_call(tokens: &Tokens, body: serde_json::Value) -> Box<dyn FnMut(usize) -> Vec<u8> + Send> {
    let device = device_id(SYNC_DEVICE);
    let token = tokens.get(&device).cloned().unwrap_or_default();
    every_call(
        ApiEvent::new(
            route(PatternId::SyncDevice),
            format!("/devices/{device}/sync"),
        )
        .param("deviceId", &device)
        .header("Authorization", &format!("Bearer {token}"))
        .json(&body),
    )
}

/// The first rollout on the worker's list.
async fn first_running_rollout(table: &FleetTable) -> Result<RolloutId, FleetError> {
    use shared::model::entities::running_rollout::RunningRolloutItem;
    use shared::model::entities::Entity;
    let listed = table
        .client
        .query()
        .table_name(table.name())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(
                shared::model::entities::running_rollout::RUNNING_ROLLOUTS_PK.to_string(),
            ),
        )
        .limit(1)
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    let item = listed
        .items
        .unwrap_or_default()
        .into_iter()
        .next()
        .ok_or_else(|| FleetError::internal("no running rollout"))?;
    Ok(RunningRolloutItem::from_item(item)?.rollout_id)
}
