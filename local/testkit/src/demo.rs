//! Demo data for `make dev`: a few users with devices, created through the same operations the
//! API uses.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::model::alarm::ids::RuleId;
use shared::model::alarm::rule::{Rule, RuleDefinition};
use shared::model::entities::registration::RegistrationItem;
use shared::model::entities::rule_set::RuleSetItem;
use shared::model::entities::Entity;
use shared::model::entities::ItemKey;
use shared::model::expression::{Expressions, Update};
use shared::model::ids::{DeviceId, DeviceType, Tag, UserId};
use shared::model::timestamp::Timestamp;
use shared::model::token::sha256_hex;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::{validate_batch, IngestConfig, Ingestor, SubmittedEvent};
use shared::ops::profile::{upsert_profile, ProfileUpdate};
use shared::store::with_expressions::WithExpressions;
use shared::{FleetError, FleetTable};
use std::time::{Duration, Instant};

/// A demo user.
#[derive(Clone, Debug)]
pub struct DemoUser {
    /// JWT `sub`.
    pub sub: &'static str,
    /// E-mail claim.
    pub email: &'static str,
    /// Profile name.
    pub name: &'static str,
    /// Member of the `admin` group.
    pub admin: bool,
}

/// A demo device with the token it was issued.
#[derive(Clone, Debug)]
pub struct DemoDevice {
    /// Owner's `sub`.
    pub owner: &'static str,
    /// Device id.
    pub device_id: &'static str,
    /// Bearer token for ingestion (shown once, like the API does).
    pub token: String,
}

/// The demo users: Alice, Bob and the utility with fleets of their own, Olga the operator
/// (the `admin` group), and Carol, Dave and Erin, who have no devices and work in the demo
/// organization ([`crate::demo_orgs`]: Alice its owner, Carol its admin, Dave its operator, Bob and Erin
/// its viewers), so the console can be tried at every role.
pub const USERS: [DemoUser; 7] = [
    DemoUser {
        sub: "demo-alice",
        email: "alice@example.com",
        name: "Alice",
        admin: false,
    },
    DemoUser {
        sub: "demo-bob",
        email: "bob@example.com",
        name: "Bob",
        admin: false,
    },
    DemoUser {
        sub: UTILITY,
        email: "grid@example.com",
        name: "Utility",
        admin: false,
    },
    DemoUser {
        sub: "demo-operator",
        email: "ops@example.com",
        name: "Olga Operator",
        admin: true,
    },
    DemoUser {
        sub: "demo-carol",
        email: "carol@example.com",
        name: "Carol",
        admin: false,
    },
    DemoUser {
        sub: "demo-dave",
        email: "dave@example.com",
        name: "Dave",
        admin: false,
    },
    DemoUser {
        sub: "demo-erin",
        email: "erin@example.com",
        name: "Erin",
        admin: false,
    },
];

/// The demo utility: an owner whose meters spread over two of its partitions.
pub const UTILITY: &str = "demo-utility";
/// `DEVICES_PER_SHARD` the utility's meters are registered with.
const UTILITY_DEVICES_PER_SHARD: u32 = 1;

/// `(owner, deviceId, name, type, tags)` of the demo devices.
pub const DEVICES: [(&str, &str, &str, &str, &[&str]); 6] = [
    (
        UTILITY,
        "utility-meter-1",
        "Meter 1",
        "power-meter",
        &["feeder-7"],
    ),
    (
        UTILITY,
        "utility-meter-2",
        "Meter 2",
        "power-meter",
        &["feeder-7"],
    ),
    (
        "demo-alice",
        "thermo-kitchen",
        "Kitchen thermostat",
        "thermostat",
        &["home", "kitchen"],
    ),
    (
        "demo-alice",
        "door-front",
        "Front door",
        "door-sensor",
        &["home"],
    ),
    (
        "demo-alice",
        "meter-garage",
        "Garage power meter",
        "power-meter",
        &["garage"],
    ),
    (
        "demo-bob",
        "thermo-office",
        "Office thermostat",
        "thermostat",
        &["office"],
    ),
];

/// A published token for the demo device `thermo-kitchen`, so the sample events in `events/`
/// can authenticate. Local demo data only: real tokens are random and shown once.
pub const DEMO_KITCHEN_TOKEN: &str = "dft_demo-thermo-kitchen-local-only-token";

/// The demo rules' ids (fixed, so the sample events in `events/` can name them).
pub const DEMO_RULE_IDS: [&str; 3] = [
    "r0000000000000001",
    "r0000000000000002",
    "r0000000000000003",
];

/// When the demo garage meter's power spike raised its alarm (fixed, so
/// `events/ack-alarm.json` can name the alarm), unless that is outside the table's retention;
/// then an hour ago.
pub const DEMO_SPIKE_AT: &str = "2026-11-20T09:00:00.000Z";

/// Alice's alarm rules, stored as the rules routes store them.
async fn seed_rules(table: &FleetTable) -> Result<(), FleetError> {
    let now = Timestamp::now();
    let bodies = [
        serde_json::json!({"name": "Kitchen pressure high", "eventType": "pressure",
            "scope": {"deviceId": "thermo-kitchen"}, "condition": {"above": 5},
            "clear": {"below": 4}, "severity": "major", "remindEverySeconds": 3600}),
        serde_json::json!({"name": "Garage power spike", "eventType": "power",
            "scope": {"deviceType": "power-meter"}, "condition": {"above": 5000},
            "clear": {"below": 4000}, "severity": "critical"}),
        serde_json::json!({"name": "Door left open", "eventType": "door",
            "scope": {"tag": "home"}, "condition": {"equals": "open"},
            "forSeconds": 300, "severity": "minor"}),
    ];
    let mut rules = std::collections::BTreeMap::new();
    for (id, body) in DEMO_RULE_IDS.iter().zip(bodies) {
        let rule = Rule {
            rule_id: RuleId::parse(id)?,
            version: 1,
            definition: RuleDefinition::parse(&body)?,
            created_at: now,
            updated_at: now,
        };
        rules.insert(id.to_string(), rule);
    }
    let set = RuleSetItem {
        user_id: UserId::parse("demo-alice")?,
        rules,
        version: 1,
    };
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(set.to_item(&table.config.shards)?))
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    Ok(())
}

/// Seeds profiles, alarm rules and devices (whose readings raise the demo's alarm), and the
/// demo organizations ([`crate::demo_orgs`]); returns each personal device's token.
pub async fn seed(table: &FleetTable) -> Result<Vec<DemoDevice>, FleetError> {
    seed_rules(table).await?;
    for user in &USERS {
        upsert_profile(
            table,
            &UserId::parse(user.sub)?,
            ProfileUpdate {
                name: user.name.to_string(),
                email: Some(user.email.to_string()),
            },
        )
        .await?;
    }
    let mut devices = Vec::new();
    // The utility's meters are registered as by an owner past DEVICES_PER_SHARD (here 1), so
    // its second meter's live state sits on the owner's second partition: the large-fleet
    // paths (placement, the dashboard's BatchGetItem) run in every local stack.
    let utility = FleetTable {
        client: table.client.clone(),
        config: shared::model::settings::FleetConfig {
            devices_per_partition: UTILITY_DEVICES_PER_SHARD,
            ..table.config.clone()
        },
    };
    for (owner, id, name, kind, tags) in DEVICES {
        let registrar = if owner == UTILITY { &utility } else { table };
        let registered = register_device(
            registrar,
            &UserId::parse(owner)?,
            DeviceRegistration {
                offline_detection: Default::default(),
                // The kitchen thermostat and the utility's meters declare their interval
                // (offline detection); the others' are learned from their reports.
                report_every_seconds: match id {
                    "thermo-kitchen" => Some(300),
                    "utility-meter-1" | "utility-meter-2" => Some(900),
                    _ => None,
                },
                device_id: DeviceId::parse(id)?,
                name: name.to_string(),
                device_type: DeviceType::parse(kind)?,
                tags: tags
                    .iter()
                    .map(|t| Tag::parse(*t))
                    .collect::<Result<_, _>>()?,
            },
        )
        .await?;
        let mut token = registered.token.reveal().to_string();
        if id == "thermo-kitchen" {
            publish_demo_token(table, id).await?;
            token = DEMO_KITCHEN_TOKEN.to_string();
        }
        ingest_demo_events(table, id, &token).await?;
        if id == "meter-garage" {
            ingest_power_spike(table, id, &token).await?;
        }
        devices.push(DemoDevice {
            owner,
            device_id: id,
            token,
        });
    }
    fill_command_queue(table).await?;
    crate::demo_orgs::seed_orgs(table).await?;
    Ok(devices)
}

/// Bob's office thermostat has been offline with a full command queue (the device twin's
/// bound, `events/queue-command-full.json`).
async fn fill_command_queue(table: &FleetTable) -> Result<(), FleetError> {
    use shared::model::ids::CommandName;
    use shared::model::twin::{TwinDocument, MAX_OPEN_COMMANDS};
    use shared::ops::twin::owner::{queue_command, NewCommand};
    for i in 0..MAX_OPEN_COMMANDS {
        queue_command(
            table,
            &UserId::parse("demo-bob")?,
            &DeviceId::parse("thermo-office")?,
            NewCommand {
                name: CommandName::parse(format!("calibrate-{i}"))?,
                parameters: TwinDocument::default(),
                expires_in_seconds: shared::model::twin::MAX_COMMAND_EXPIRY_SECONDS,
            },
        )
        .await?;
    }
    Ok(())
}

async fn publish_demo_token(table: &FleetTable, device: &str) -> Result<(), FleetError> {
    let device = DeviceId::parse(device)?;
    table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::Registration { device }.attributes()))
        .expressions(Expressions::write(
            Update::new().set(
                RegistrationItem::TOKEN_SHA256,
                AttributeValue::S(sha256_hex(DEMO_KITCHEN_TOKEN)),
            ),
            None,
        ))
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    Ok(())
}

/// A power reading over the garage rule's threshold at [`DEMO_SPIKE_AT`]: the demo's open
/// critical alarm, raised by ingestion like any other.
async fn ingest_power_spike(
    table: &FleetTable,
    device: &str,
    token: &str,
) -> Result<(), FleetError> {
    let at = crate::demo_readings::fixed_or_recent(table, DEMO_SPIKE_AT)?;
    let submitted = vec![SubmittedEvent {
        id: Some("demo-spike".into()),
        event_type: "power".into(),
        value: serde_json::json!(6200),
        at: at.to_string(),
    }];
    crate::demo_readings::store_readings(table, device, token, submitted).await
}

/// A few readings from the last hour, so the dashboard has something to show.
async fn ingest_demo_events(
    table: &FleetTable,
    device: &str,
    token: &str,
) -> Result<(), FleetError> {
    let now = Timestamp::now();
    let submitted = (0..6)
        .map(|i| SubmittedEvent {
            id: Some(format!("demo-{i}")),
            event_type: ["temperature", "humidity"][i % 2].to_string(),
            value: serde_json::json!(20.0 + i as f64),
            at: now.plus_seconds(-600 * (6 - i as i64)).to_string(),
        })
        .collect();
    crate::demo_readings::store_readings(table, device, token, submitted).await
}

/// The demo device with a month of history: Alice's roof weather station, which reported its
/// temperature every minute for [`HISTORY_DAYS`] days (the console's long-range charts and
/// summaries have something real to show).
pub const HISTORY_DEVICE: (&str, &str, &str, &str, &[&str]) = (
    "demo-alice",
    "weather-roof",
    "Roof weather station",
    "weather-station",
    &["roof"],
);
/// Days of minute-by-minute readings of [`HISTORY_DEVICE`].
pub const HISTORY_DAYS: i64 = 30;
/// Readings per batch of the history, as a device uploading its backlog would send them.
const HISTORY_BATCH: usize = 100;

/// Registers [`HISTORY_DEVICE`] and ingests its [`HISTORY_DAYS`] days of one reading a minute
/// (43,200), oldest first in batches of [`HISTORY_BATCH`], through the ingest path (so
/// whatever ingest writes beside the events, the summaries included, is written too). Kept
/// apart from [`seed`], which the integration tests and benchmarks use: only `fleet-dev serve`
/// (`make dev`, the browser tests) pays for it.
pub async fn seed_history(table: &FleetTable) -> Result<DemoDevice, FleetError> {
    let (owner, id, name, kind, tags) = HISTORY_DEVICE;
    let registered = register_device(
        table,
        &UserId::parse(owner)?,
        DeviceRegistration {
            offline_detection: Default::default(),
            report_every_seconds: Some(60),
            device_id: DeviceId::parse(id)?,
            name: name.to_string(),
            device_type: DeviceType::parse(kind)?,
            tags: tags
                .iter()
                .map(|t| Tag::parse(*t))
                .collect::<Result<_, _>>()?,
        },
    )
    .await?;
    let token = registered.token.reveal().to_string();
    let ingestor = Ingestor::new(table.clone(), IngestConfig::default());
    let registration = ingestor.authenticate(&DeviceId::parse(id)?, &token).await?;
    let now = Timestamp::now();
    // Whole minutes, the newest a minute ago.
    let newest = now.epoch_seconds() / 60 * 60 - 60;
    let minutes = HISTORY_DAYS * 24 * 60;
    let readings = (0..minutes)
        .map(|i| {
            let at = newest - (minutes - 1 - i) * 60;
            Ok(SubmittedEvent {
                id: Some(format!("h{i}")),
                event_type: "temperature".into(),
                value: serde_json::json!(roof_temperature(at)),
                at: Timestamp::from_epoch_millis(at * 1000)
                    .ok_or_else(|| FleetError::internal("demo history time"))?
                    .to_string(),
            })
        })
        .collect::<Result<Vec<_>, FleetError>>()?;
    for batch in readings.chunks(HISTORY_BATCH) {
        let events = validate_batch(
            batch.to_vec(),
            Timestamp::now(),
            table.config.retention_days,
            Duration::from_secs(300),
        )?;
        let outcome = ingestor
            .ingest(
                &registration,
                events,
                Instant::now() + Duration::from_secs(30),
            )
            .await?;
        if !outcome.failed.is_empty() {
            return Err(FleetError::internal("demo history not stored"));
        }
    }
    Ok(DemoDevice {
        owner,
        device_id: id,
        token,
    })
}

/// A roof's temperature at `epoch` seconds: a daily swing around a slowly drifting mean, with
/// a deterministic minute-to-minute wobble (two decimals, as a sensor reports).
fn roof_temperature(epoch: i64) -> f64 {
    use std::f64::consts::TAU;
    let day = (epoch % 86_400) as f64 / 86_400.0;
    let weeks = epoch as f64 / (7.0 * 86_400.0);
    let wobble = ((epoch / 60) * 7919 % 101) as f64 / 100.0 - 0.5;
    let celsius = 12.0 + 3.0 * (TAU * weeks).sin() + 6.0 * (TAU * (day - 0.375)).sin() + wobble;
    (celsius * 100.0).round() / 100.0
}
