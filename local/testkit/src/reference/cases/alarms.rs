//! The cases of alarms: rules, alarms and their acknowledgement, the scheduled offline check
//! and reminders, with the fixtures the bench calls work on.

use serde_json::json;
use shared::model::alarm::evaluation::Transition;
use shared::model::alarm::ids::{AlarmId, AlarmSource, RuleId};
use shared::model::alarm::rule::RuleDefinition;
use shared::model::alarm::severity::Severity;
use shared::model::ids::{DeviceId, DeviceType, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;
use shared::ops::alarms::{lifecycle, rules, transition_actions, watch, AlarmDevice};
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::{IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::pattern::BudgetScale;
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use super::common::{
    active_alarm, alice, alice_device, device_id, every_call, found, now, one, put_fixtures, read,
    route, write, PatternCase, BOB, FIXTURE_CALLS,
};
use crate::api_event::ApiEvent;
use crate::reference::dataset::ingest_at_reference_time;
use shared::model::alarm::rule::Rule;
use shared::model::entities::alarm::AlarmItem;
use shared::model::entities::rule_set::RuleSetItem;
use shared::model::entities::Entity;

/// CreateRule: create a rule scoped to one device (its ownership checked).
pub(super) const CREATE_RULE: PatternCase = PatternCase {
    id: PatternId::CreateRule,
    workload: "create a rule scoped to one device (its ownership checked)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let body = json!({"name": "Hot", "eventType": "temperature",
                "scope": {"deviceId": device_id(ALARM_DEVICE)},
                "condition": {"above": 80}, "clear": {"below": 75}, "severity": "major"});
            rules::create_rule(table, &alice()?, RuleDefinition::parse(&body)?).await?;
            Ok(())
        })
    },
    // Each call a new owner's first rule (an owner keeps at most 32), scoped by type.
    call: write("POST /me/rules (a type scope)", 201, |_, _| {
        Box::new(|i| {
            ApiEvent::new(route(PatternId::CreateRule), "/me/rules")
                .caller(&format!("ref-rule-owner-{i}"))
                .json(&json!({"name": "Hot", "eventType": "temperature",
                    "scope": {"deviceType": "thermostat"}, "condition": {"above": 80},
                    "severity": "major"}))
                .to_bytes()
        })
    }),
};

/// ListRules: an owner's one rule.
pub(super) const LIST_RULES: PatternCase = PatternCase {
    id: PatternId::ListRules,
    workload: "an owner's one rule",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let rules = rules::list_rules(table, &alice()?).await?;
            found(rules.len() == 1, PatternId::ListRules)
        })
    },
    call: read("GET /me/rules (Bob's one rule)", |_, _| {
        every_call(ApiEvent::new(route(PatternId::ListRules), "/me/rules").caller(BOB))
    }),
};

/// UpdateRule: change a rule's severity at version 1.
pub(super) const UPDATE_RULE: PatternCase = PatternCase {
    id: PatternId::UpdateRule,
    workload: "change a rule's severity at version 1",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let id = alice_rule(table).await?;
            rules::update_rule(table, &alice()?, &id, 1, &json!({"severity": "critical"})).await?;
            Ok(())
        })
    },
    // Bob's fixture rule, one version further each call.
    call: write("PATCH /me/rules/{ruleId} (severity)", 200, |_, _| {
        Box::new(|i| {
            ApiEvent::new(
                route(PatternId::UpdateRule),
                format!("/me/rules/{BOB_RULE}"),
            )
            .caller(BOB)
            .param("ruleId", BOB_RULE)
            .header("If-Match", &(i + 1).to_string())
            .json(&json!({"severity": if i % 2 == 0 { "minor" } else { "warning" }}))
            .to_bytes()
        })
    }),
};

/// AcknowledgeAlarm: acknowledge an active alarm (raised outside the meter).
pub(super) const ACKNOWLEDGE_ALARM: PatternCase = PatternCase {
    id: PatternId::AcknowledgeAlarm,
    workload: "acknowledge an active alarm (raised outside the meter)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let id = RequestMeter::new()
                .scope(raise_reference_alarm(table))
                .await?;
            let alarm = lifecycle::acknowledge(table, &alice()?, &id).await?;
            found(
                alarm.state == shared::model::alarm::status::AlarmState::Acknowledged,
                PatternId::AcknowledgeAlarm,
            )
        })
    },
    // Each call one of Bob's fixture alarms, active until then.
    call: write("POST /me/alarms/{alarmId}/ack", 200, |_, _| {
        Box::new(|i| {
            let id = bob_fixture_alarm(i).to_string();
            ApiEvent::new(
                route(PatternId::AcknowledgeAlarm),
                format!("/me/alarms/{id}/ack"),
            )
            .caller(BOB)
            .param("alarmId", &id)
            .to_bytes()
        })
    }),
};

/// OwnerAlarms: an owner's alarms, one partition.
pub(super) const OWNER_ALARMS: PatternCase = PatternCase {
    id: PatternId::OwnerAlarms,
    workload: "an owner's alarms, one partition",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let page = lifecycle::owner_alarms(table, &alice()?, 50, None).await?;
            found(page.items.len() == 1, PatternId::OwnerAlarms)
        })
    },
    call: read("GET /me/alarms (Bob's first page of 50)", |_, _| {
        every_call(ApiEvent::new(route(PatternId::OwnerAlarms), "/me/alarms").caller(BOB))
    }),
};

/// DeviceAlarms: a device's alarm history.
pub(super) const DEVICE_ALARMS: PatternCase = PatternCase {
    id: PatternId::DeviceAlarms,
    workload: "a device's alarm history",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let page =
                lifecycle::device_alarms(table, &alice()?, &alice_device(ALARM_DEVICE)?, 50, None)
                    .await?;
            found(page.items.len() == 1, PatternId::DeviceAlarms)
        })
    },
    call: read(
        "GET /me/devices/{deviceId}/alarms (first page of 50)",
        |_, _| {
            every_call(
                ApiEvent::new(
                    route(PatternId::DeviceAlarms),
                    format!("/me/devices/{BOB_ALARM_DEVICE}/alarms"),
                )
                .caller(BOB)
                .param("deviceId", BOB_ALARM_DEVICE),
            )
        },
    ),
};

/// OpenAlarms: open critical alarms across owners.
pub(super) const OPEN_ALARMS: PatternCase = PatternCase {
    id: PatternId::OpenAlarms,
    workload: "open critical alarms across owners",
    scale: |_| BudgetScale {
        shards: u32::from(shared::model::entities::open_alarm::OPEN_ALARM_SHARDS),
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let page = lifecycle::open_alarms(table, Severity::Critical, 50, None).await?;
            found(page.items.len() == 1, PatternId::OpenAlarms)
        })
    },
    call: read(
        "GET /admin/alarms?severity=warning (first page of 50)",
        |_, _| {
            every_call(
                ApiEvent::new(route(PatternId::OpenAlarms), "/admin/alarms")
                    .operator("ref-operator")
                    .query("severity", "warning"),
            )
        },
    ),
};

/// DeleteRule: delete a rule with one open alarm.
pub(super) const DELETE_RULE: PatternCase = PatternCase {
    id: PatternId::DeleteRule,
    // The reference alarm (raised for AP-25) is the rule's: the deletion clears it.
    workload: "delete a rule with one open alarm",
    scale: |_| BudgetScale {
        devices: 1,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let id = alice_rule(table).await?;
            rules::delete_rule(table, &alice()?, &id).await
        })
    },
    // Each call one of the fixture owners' rules, 32 to an owner.
    call: write("DELETE /me/rules/{ruleId}", 204, |_, _| {
        Box::new(|i| {
            let (owner, rule) = deletable_rule(i);
            ApiEvent::new(route(PatternId::DeleteRule), format!("/me/rules/{rule}"))
                .caller(&owner)
                .param("ruleId", &rule)
                .to_bytes()
        })
    }),
};

/// OfflineCheck: the offline check at a watched device's due time: every due shard, the one due device raised.
pub(super) const OFFLINE_CHECK: PatternCase = PatternCase {
    id: PatternId::OfflineCheck,
    workload: "the offline check at a watched device's due time: every due shard, the one due device raised",
    scale: |_| BudgetScale {
        shards: u32::from(shared::model::entities::device_state::DUE_SHARDS),
        batch_items: 1,
        devices: 1,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let due = RequestMeter::new().scope(watched_device(table)).await?;
            let run = watch::check_offline(
                table,
                due,
                std::time::Instant::now() + std::time::Duration::from_secs(60),
            )
            .await?;
            found(
                run.candidates == 1 && run.raised == 1,
                PatternId::OfflineCheck,
            )
        })
    },
    call: None,
};

/// AlarmReminders: reminders at the reference time: every reminder shard, the one due alarm reminded.
pub(super) const ALARM_REMINDERS: PatternCase = PatternCase {
    id: PatternId::AlarmReminders,
    workload: "reminders at the reference time: every reminder shard, the one due alarm reminded",
    scale: |_| BudgetScale {
        shards: u32::from(shared::model::entities::alarm::REMINDER_SHARDS),
        batch_items: 1,
        devices: 1,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            RequestMeter::new().scope(alarm_to_remind(table)).await?;
            let run = watch::send_reminders(
                table,
                now(),
                std::time::Instant::now() + std::time::Duration::from_secs(60),
            )
            .await?;
            found(run.reminders == 1, PatternId::AlarmReminders)
        })
    },
    call: None,
};

/// Alice's device the alarm cases use.
const ALARM_DEVICE: u32 = 2;

/// Bob's fixture rule, which the AP-21 calls change.
const BOB_RULE: &str = "r00000000000000b0";
/// Bob's device whose fixture alarms the AP-25 calls acknowledge.
const BOB_ALARM_DEVICE: &str = "ref-bob-dev-0";

/// Bob's `i`-th fixture alarm (warning, active), a minute apart before the reference time.
fn bob_fixture_alarm(i: usize) -> AlarmId {
    AlarmId {
        device: DeviceId::parse(BOB_ALARM_DEVICE).expect("valid constant"),
        source: AlarmSource::Rule(RuleId::parse(BOB_RULE).expect("valid constant")),
        raised_at: now().plus_seconds(-60 * (i as i64 + 1)),
    }
}

/// The owner and id of the `i`-th rule the AP-22 calls delete.
fn deletable_rule(i: usize) -> (String, String) {
    let per_owner = shared::model::alarm::MAX_RULES_PER_OWNER;
    (
        format!("ref-rule-keeper-{}", i / per_owner),
        format!("r{:016x}", i % per_owner),
    )
}

/// What the alarm routes' bench calls work on, written directly (fixtures, not transitions):
/// Bob's rule, his active warning alarms, and owners with 32 rules each to delete.
pub async fn seed_alarm_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    let rule = |id: &str, severity: &str| -> Result<Rule, FleetError> {
        Ok(Rule {
            rule_id: RuleId::parse(id)?,
            version: 1,
            definition: RuleDefinition::parse(
                &json!({"name": "Pressure", "eventType": "pressure",
                "scope": {"deviceType": "thermostat"}, "condition": {"above": 5},
                "severity": severity}),
            )?,
            created_at: now(),
            updated_at: now(),
        })
    };
    let mut sets = vec![RuleSetItem {
        user_id: UserId::parse(BOB)?,
        rules: [(BOB_RULE.to_string(), rule(BOB_RULE, "warning")?)].into(),
        version: 1,
    }];
    let per_owner = shared::model::alarm::MAX_RULES_PER_OWNER;
    for owner in 0..FIXTURE_CALLS.div_ceil(per_owner) {
        let rules = (0..per_owner)
            .map(|k| {
                let id = format!("r{k:016x}");
                rule(&id, "minor").map(|r| (id, r))
            })
            .collect::<Result<_, FleetError>>()?;
        sets.push(RuleSetItem {
            user_id: UserId::parse(format!("ref-rule-keeper-{owner}"))?,
            rules,
            version: 1,
        });
    }
    let mut items = Vec::new();
    for set in &sets {
        items.push(set.to_item(&table.config.shards)?);
    }
    let bob_rule = rule(BOB_RULE, "warning")?;
    for i in 0..FIXTURE_CALLS {
        let id = bob_fixture_alarm(i);
        let alarm = active_alarm(
            UserId::parse(BOB)?,
            id.device.clone(),
            BOB_RULE,
            Some(bob_rule.definition.name.clone()),
            Severity::Warning,
            id.raised_at,
        );
        items.push(alarm.to_item(&table.config.shards)?);
    }
    put_fixtures(table, items).await
}

/// The id of Alice's one rule, read outside the meter.
async fn alice_rule(table: &FleetTable) -> Result<RuleId, FleetError> {
    let rules = RequestMeter::new()
        .scope(rules::list_rules(table, &alice()?))
        .await?;
    rules
        .first()
        .map(|r| r.rule_id.clone())
        .ok_or_else(|| FleetError::internal("no reference rule"))
}

/// An active critical alarm of Alice's rule on her alarm device, written as a transition is.
async fn raise_reference_alarm(table: &FleetTable) -> Result<AlarmId, FleetError> {
    let rule = rules::list_rules(table, &alice()?)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| FleetError::internal("no reference rule"))?;
    let at = now().plus_seconds(-60);
    let device = AlarmDevice {
        user: alice()?,
        device: alice_device(ALARM_DEVICE)?,
        partition: 0,
        name: "Sensor".into(),
    };
    let raised = Transition::Raised {
        source: AlarmSource::Rule(rule.rule_id.clone()),
        severity: rule.definition.severity,
        at,
        reading: None,
    };
    let actions = transition_actions(table, &device, std::slice::from_ref(&rule), &[raised])?;
    table
        .client
        .transact_write_items()
        .set_transact_items(Some(actions))
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    Ok(AlarmId {
        device: device.device,
        source: AlarmSource::Rule(rule.rule_id),
        raised_at: at,
    })
}

/// The owner of the device the AP-27 case watches.
const WATCH_OWNER: &str = "ref-watch-owner";

/// Registers a device that promises to report every minute and stores one report of it (the
/// first report puts it on the due index); returns its due time.
async fn watched_device(table: &FleetTable) -> Result<Timestamp, FleetError> {
    let owner = UserId::parse(WATCH_OWNER)?;
    let device = DeviceId::parse("ref-watched")?;
    let registered = register_device(
        table,
        &owner,
        DeviceRegistration {
            offline_detection: Default::default(),
            device_id: device.clone(),
            name: "Watched meter".into(),
            device_type: DeviceType::parse("power-meter")?,
            tags: Vec::new(),
            report_every_seconds: Some(60),
        },
    )
    .await?;
    let ingestor = Ingestor::new(table.clone(), IngestConfig::default());
    let registration = ingestor
        .authenticate(&device, registered.token.reveal())
        .await?;
    let report = vec![SubmittedEvent {
        id: Some("watched-1".into()),
        event_type: "power".into(),
        value: json!(1.5),
        at: now().plus_seconds(-60).to_string(),
    }];
    ingest_at_reference_time(&ingestor, &registration, report).await?;
    let key = shared::model::entities::ItemKey::DeviceState {
        user: owner,
        partition: registration.partition,
        device,
    };
    shared::store::dynamo::read_consistent::<shared::model::entities::device_state::DeviceStateItem>(table, &key)
        .await?
        .ok_or_else(|| FleetError::internal("the watched device has no live state"))?
        .due_at()
        .ok_or_else(|| FleetError::internal("the watched device is not on the due index"))
}

/// An active alarm of Bob's whose reminder is due a minute before the reference time, written
/// directly like the other alarm fixtures (a day older than all of them).
async fn alarm_to_remind(table: &FleetTable) -> Result<(), FleetError> {
    let alarm = AlarmItem {
        remind_every_seconds: Some(3600),
        remind_at: Some(now().plus_seconds(-60)),
        ..active_alarm(
            UserId::parse(BOB)?,
            DeviceId::parse(BOB_ALARM_DEVICE)?,
            BOB_RULE,
            Some("Pressure".into()),
            Severity::Warning,
            now().plus_seconds(-86_400),
        )
    };
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(alarm.to_item(&table.config.shards)?))
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    Ok(())
}
