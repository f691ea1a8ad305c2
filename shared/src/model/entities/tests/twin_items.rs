//! The twin's entities: declared attributes, keys read back, a command's expiry.

use crate::model::entities::command::CommandItem;
use crate::model::entities::desired_state::DesiredStateItem;
use crate::model::entities::reported_state::ReportedStateItem;
use crate::model::entities::rollout::RolloutItem;
use crate::model::entities::rollout_slots::RolloutSlotsItem;
use crate::model::entities::running_rollout::RunningRolloutItem;
use crate::model::entities::Entity;
use crate::model::expression::Attribute;
use crate::model::firmware::{AbortRule, FirmwareId, FirmwarePlan, MaintenanceWindow};
use crate::model::ids::{CommandName, DeviceId, DeviceType, RolloutId, Tag, UserId};
use crate::model::schema::{Item, ENTITY_TYPE, KEY_ATTRIBUTES};
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;
use crate::model::twin::*;
use std::collections::BTreeSet;

#[test]
fn command_ids_round_trip_and_expiry_is_read_not_stored() {
    assert_eq!(
        parse_command_id("acks[0].commandId", &command_id(7)).unwrap(),
        7
    );
    for bad in ["7", "cmd-", "cmd-0", "cmd-x", "cmd-12345678901", "CMD-1"] {
        assert!(parse_command_id("f", bad).is_err(), "{bad}");
    }
    let at = |s: &str| Timestamp::parse_field("at", s).unwrap();
    let command = CommandItem {
        user_id: UserId::parse("u").unwrap(),
        device_id: DeviceId::parse("d").unwrap(),
        seq: 1,
        name: CommandName::parse("reboot").unwrap(),
        parameters: "{}".into(),
        status: CommandStatus::Delivered,
        created_at: at("2024-04-10T10:00:00Z"),
        expires_at: at("2024-04-10T11:00:00Z"),
        delivered_at: None,
        finished_at: None,
        result: None,
        ttl: 0,
    };
    assert_eq!(
        command.status_at(at("2024-04-10T10:59:59Z")),
        CommandStatus::Delivered
    );
    assert_eq!(
        command.status_at(at("2024-04-10T11:00:00Z")),
        CommandStatus::Expired
    );
}

#[test]
fn declared_attributes_are_exactly_the_stored_ones_and_keys_read_back() {
    let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
    let user = UserId::parse("u").unwrap();
    let device = DeviceId::parse("d").unwrap();
    let rollout = RolloutId::parse("r-1").unwrap();
    let shards = ShardCounts::default();
    let stored = |item: &Item| -> BTreeSet<String> {
        let keys = KEY_ATTRIBUTES.map(|a| a.name());
        item.keys()
            .filter(|n| !keys.contains(&n.as_str()) && *n != ENTITY_TYPE.name())
            .cloned()
            .collect()
    };
    let declared = |names: &[Attribute]| {
        names
            .iter()
            .map(|a| a.name().to_string())
            .collect::<BTreeSet<_>>()
    };
    let desired = DesiredStateItem {
        user_id: user.clone(),
        device_id: device.clone(),
        document: "{}".into(),
        version: 1,
        updated_at: at,
    };
    let item = desired.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(DesiredStateItem::ATTRIBUTES));
    assert_eq!(DesiredStateItem::from_item(item).unwrap(), desired);
    let reported = ReportedStateItem {
        user_id: user.clone(),
        device_id: device.clone(),
        document: "{}".into(),
        version: 1,
        reported_at: at,
    };
    let item = reported.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(ReportedStateItem::ATTRIBUTES));
    assert_eq!(ReportedStateItem::from_item(item).unwrap(), reported);
    let command = CommandItem {
        user_id: user.clone(),
        device_id: device.clone(),
        seq: 3,
        name: CommandName::parse("reboot").unwrap(),
        parameters: "{}".into(),
        status: CommandStatus::Succeeded,
        created_at: at,
        expires_at: at,
        delivered_at: Some(at),
        finished_at: Some(at),
        result: Some("{}".into()),
        ttl: 1,
    };
    let item = command.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(CommandItem::ATTRIBUTES));
    assert_eq!(CommandItem::from_item(item).unwrap(), command);
    let firmware_id = FirmwareId::parse("f-000001700000000-0123456789abcdef").unwrap();
    let rollout_item = RolloutItem {
        user_id: user.clone(),
        rollout_id: rollout.clone(),
        target: RolloutTarget::Tag(Tag::parse("meters").unwrap()),
        patch: "{}".into(),
        firmware: Some(FirmwarePlan {
            firmware_id: firmware_id.clone(),
            version: "1.2.3".into(),
            device_type: DeviceType::parse("meter").unwrap(),
            stages: vec![1, 5, 25, 100],
            soak_seconds: 3600,
            healthy_check_ins: 2,
            success_percent: 95,
            abort: AbortRule {
                failure_percent: 10,
                min_finished: 20,
            },
            maintenance_window: Some(MaintenanceWindow {
                start_hour: 22,
                end_hour: 4,
            }),
        }),
        image: Some(crate::model::firmware::OfferedImage {
            sha256: "0".repeat(64),
            size: 1000,
            signature: Some("c2ln".into()),
            object_key: "firmware/u/f".into(),
            object_version: Some("v1".into()),
        }),
        status: RolloutStatus::Done,
        position: Some(device.clone()),
        devices_updated: 2,
        devices_failed: 1,
        failures: vec![RolloutFailure {
            device_id: device.clone(),
            reason: "too large".into(),
        }],
        created_at: at,
        finished_at: Some(at),
        // Never both on a real rollout; here so every attribute is stored and read back.
        cancelled_at: Some(at),
        gate: Some(crate::model::rollout_stages::StageGate {
            open: 1,
            opened_at: vec![at, at],
            met_at: Some(at),
            walked: true,
            baseline: vec![crate::model::rollout_stages::StageBaseline {
                stage: 0,
                finished: 20,
                failed: 3,
            }],
            health: Default::default(),
            last_health: Some(crate::model::rollout_health::HealthTally {
                updated: vec![crate::model::rollout_health::GroupHealth {
                    devices: 20,
                    unhealthy: 1,
                }],
                not_updated: crate::model::rollout_health::GroupHealth {
                    devices: 380,
                    unhealthy: 4,
                },
            }),
            health_accepted_through: Some(1),
            tally: vec![Default::default()],
            counts: Some(vec![crate::model::rollout_stages::StageCounts {
                offered: 20,
                in_progress: 1,
                succeeded: 16,
                failed: 3,
                timed_out: 1,
                retried: 2,
            }]),
            counted_at: Some(at),
        }),
        paused_reason: Some("stage 1: 3 of 20 finished devices failed".into()),
    };
    let item = rollout_item.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(RolloutItem::ATTRIBUTES));
    assert_eq!(RolloutItem::from_item(item).unwrap(), rollout_item);
    let running = RunningRolloutItem {
        user_id: user,
        rollout_id: rollout,
        firmware_id: Some(firmware_id),
    };
    let item = running.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(RunningRolloutItem::ATTRIBUTES));
    assert_eq!(RunningRolloutItem::from_item(item).unwrap(), running);
    let slots = RolloutSlotsItem {
        user_id: running.user_id.clone(),
        running: 3,
    };
    let item = slots.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(RolloutSlotsItem::ATTRIBUTES));
    assert_eq!(RolloutSlotsItem::from_item(item).unwrap(), slots);
}
