//! The demo organizations, with fixed ids (an organization's id is generated when the API
//! creates one), so the organization samples in `events/` can name them: Acme Facilities, with
//! a member of every role, two devices, two alarm rules (one alarm raised) and two open
//! invitations whose codes are published; and Old labs, with no devices (deleted by
//! `events/delete-org.json`). Items are stored as the organization routes store them.

use shared::model::alarm::ids::RuleId;
use shared::model::alarm::rule::{Rule, RuleDefinition};
use shared::model::entities::invitation::InvitationItem;
use shared::model::entities::membership::MembershipItem;
use shared::model::entities::org_member::OrgMemberItem;
use shared::model::entities::organization::OrganizationItem;
use shared::model::entities::rule_set::RuleSetItem;
use shared::model::entities::Entity;
use shared::model::ids::{DeviceId, DeviceType, OrgId, Tag, UserId};
use shared::model::org::{InvitationCode, Role};
use shared::model::timestamp::Timestamp;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::SubmittedEvent;
use shared::{FleetError, FleetTable};

/// Acme Facilities: the organization of the samples.
pub const DEMO_ORG_ID: &str = "o0000000000000000ac3e";
/// Old labs: an organization without devices, owned by Alice.
pub const EMPTY_ORG_ID: &str = "o00000000000000001ab5";

/// Acme Facilities' members: one of every role (two viewers, one of whom the samples remove).
pub const DEMO_ORG_MEMBERS: [(&str, Role); 5] = [
    ("demo-alice", Role::Owner),
    ("demo-carol", Role::Admin),
    ("demo-dave", Role::Operator),
    ("demo-bob", Role::Viewer),
    ("demo-erin", Role::Viewer),
];

/// The secret of Acme Facilities' published viewer invitation: its code is
/// `{DEMO_ORG_ID}.{DEMO_INVITATION_SECRET}` (`events/accept-invitation.json`). Local demo data
/// only: real codes are random and shown once.
pub const DEMO_INVITATION_SECRET: &str = "c0dec0dec0dec0dec0dec0dec0dec0de";
/// The secret of the invitation `events/revoke-org-invitation.json` revokes (by its id).
pub const DEMO_REVOKED_INVITATION_SECRET: &str = "deaddeaddeaddeaddeaddeaddeaddead";

/// `(deviceId, name, type, tags)` of Acme Facilities' devices.
pub const DEMO_ORG_DEVICES: [(&str, &str, &str, &[&str]); 2] = [
    ("acme-boiler", "Boiler", "boiler", &["plant-room"]),
    ("acme-pump", "Circulation pump", "pump", &["plant-room"]),
];

/// Acme Facilities' alarm rules: the one the samples edit and delete, and the one whose alarm
/// `events/org-ack-alarm.json` acknowledges.
pub const DEMO_ORG_RULE_IDS: [&str; 2] = ["r00000000000000a1", "r00000000000000a2"];

/// When the boiler's overheating raised Acme Facilities' alarm (fixed, so
/// `events/org-ack-alarm.json` can name the alarm), unless that is outside the table's
/// retention; then an hour ago.
pub const DEMO_OVERHEAT_AT: &str = "2026-11-20T09:00:00.000Z";

/// Seeds both organizations.
pub async fn seed_orgs(table: &FleetTable) -> Result<(), FleetError> {
    let now = Timestamp::now();
    let acme = OrgId::parse(DEMO_ORG_ID)?;
    let members: Vec<(UserId, Role)> = DEMO_ORG_MEMBERS
        .iter()
        .map(|(user, role)| Ok((UserId::parse(*user)?, *role)))
        .collect::<Result<_, FleetError>>()?;
    seed_org(table, &acme, "Acme Facilities", &members, now).await?;
    for (secret, role) in [
        (DEMO_INVITATION_SECRET, Role::Viewer),
        (DEMO_REVOKED_INVITATION_SECRET, Role::Operator),
    ] {
        seed_invitation(table, &acme, secret, role, &members[0].0, now).await?;
    }
    seed_org_rules(table, &acme, now).await?;
    for (id, name, kind, tags) in DEMO_ORG_DEVICES {
        let registered = register_device(
            table,
            &UserId::org_fleet(&acme),
            DeviceRegistration {
                offline_detection: Default::default(),
                report_every_seconds: None,
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
        if id == "acme-boiler" {
            ingest_boiler_readings(table, id, registered.token.reveal()).await?;
        }
    }
    let empty = OrgId::parse(EMPTY_ORG_ID)?;
    let empty_members = [members[0].clone(), members[3].clone()];
    seed_org(table, &empty, "Old labs", &empty_members, now).await?;
    seed_invitation(
        table,
        &empty,
        DEMO_INVITATION_SECRET,
        Role::Viewer,
        &members[0].0,
        now,
    )
    .await
}

/// The organization item and, for each member, its org member and membership items.
async fn seed_org(
    table: &FleetTable,
    org: &OrgId,
    name: &str,
    members: &[(UserId, Role)],
    now: Timestamp,
) -> Result<(), FleetError> {
    let owner = members
        .iter()
        .find(|(_, role)| *role == Role::Owner)
        .map(|(user, _)| user.clone())
        .ok_or_else(|| FleetError::internal("a demo organization without its owner"))?;
    put(
        table,
        &OrganizationItem {
            org_id: org.clone(),
            name: name.to_string(),
            owner: owner.clone(),
            created_by: owner,
            created_at: now,
            member_count: members.len() as u64,
            deleting_at: None,
        },
    )
    .await?;
    for (user, role) in members {
        put(
            table,
            &OrgMemberItem {
                org_id: org.clone(),
                user_id: user.clone(),
                role: *role,
                joined_at: now,
                email: Some(format!(
                    "{}@example.com",
                    user.as_str().trim_start_matches("demo-")
                )),
            },
        )
        .await?;
        put(
            table,
            &MembershipItem {
                user_id: user.clone(),
                org_id: org.clone(),
                role: *role,
                joined_at: now,
            },
        )
        .await?;
    }
    Ok(())
}

/// An open invitation to `org` whose code's secret is `secret`, valid for 7 days.
async fn seed_invitation(
    table: &FleetTable,
    org: &OrgId,
    secret: &str,
    role: Role,
    created_by: &UserId,
    now: Timestamp,
) -> Result<(), FleetError> {
    let code = InvitationCode::parse(&format!("{org}.{secret}"))
        .ok_or_else(|| FleetError::internal("a malformed demo invitation code"))?;
    let expires_at = now.plus_seconds(7 * 86_400);
    put(
        table,
        &InvitationItem {
            org_id: org.clone(),
            invitation_id: code.invitation_id(),
            role,
            created_by: created_by.clone(),
            created_at: now,
            expires_at,
            ttl: expires_at.epoch_seconds(),
        },
    )
    .await
}

/// Acme Facilities' rule set, stored as the rules routes store it.
async fn seed_org_rules(table: &FleetTable, org: &OrgId, now: Timestamp) -> Result<(), FleetError> {
    let bodies = [
        serde_json::json!({"name": "Boiler pressure high", "eventType": "pressure",
            "scope": {"deviceType": "boiler"}, "condition": {"above": 3},
            "clear": {"below": 2.5}, "severity": "major"}),
        serde_json::json!({"name": "Boiler overheating", "eventType": "temperature",
            "scope": {"tag": "plant-room"}, "condition": {"above": 90},
            "clear": {"below": 80}, "severity": "critical"}),
    ];
    let mut rules = std::collections::BTreeMap::new();
    for (id, body) in DEMO_ORG_RULE_IDS.iter().zip(bodies) {
        let rule = Rule {
            rule_id: RuleId::parse(id)?,
            version: 1,
            definition: RuleDefinition::parse(&body)?,
            created_at: now,
            updated_at: now,
        };
        rules.insert(id.to_string(), rule);
    }
    put(
        table,
        &RuleSetItem {
            user_id: UserId::org_fleet(org),
            rules,
            version: 1,
        },
    )
    .await
}

/// The boiler's overheating at [`DEMO_OVERHEAT_AT`] (which raises the alarm of the second of
/// [`DEMO_ORG_RULE_IDS`]) and its pressures of the last hour (under the first rule's threshold),
/// through the ingest path.
async fn ingest_boiler_readings(
    table: &FleetTable,
    device: &str,
    token: &str,
) -> Result<(), FleetError> {
    let now = Timestamp::now();
    let overheat_at = crate::demo_readings::fixed_or_recent(table, DEMO_OVERHEAT_AT)?;
    let mut submitted = vec![SubmittedEvent {
        id: Some("acme-overheat".into()),
        event_type: "temperature".into(),
        value: serde_json::json!(96.5),
        at: overheat_at.to_string(),
    }];
    submitted.extend((0..6u8).map(|i| SubmittedEvent {
        id: Some(format!("acme-{i}")),
        event_type: "pressure".into(),
        value: serde_json::json!(1.8 + f64::from(i) / 10.0),
        at: now.plus_seconds(-600 * (6 - i64::from(i))).to_string(),
    }));
    crate::demo_readings::store_readings(table, device, token, submitted).await
}

async fn put(table: &FleetTable, entity: &impl Entity) -> Result<(), FleetError> {
    table
        .client
        .put_item()
        .table_name(table.name())
        .set_item(Some(entity.to_item(&table.config.shards)?))
        .send()
        .await
        .map_err(shared::store::table::sdk_error)?;
    Ok(())
}
