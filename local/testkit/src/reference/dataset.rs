//! The reference dataset's fixed facts: its users, its day and retention, its organization, and
//! ingest as of that day. A leaf that the seed (`reference.rs`) and the cases
//! (`reference/cases/`) share.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use shared::model::entities::membership::MembershipItem;
use shared::model::entities::org_member::OrgMemberItem;
use shared::model::entities::organization::OrganizationItem;
use shared::model::entities::registration::RegistrationItem;
use shared::model::entities::Entity;
use shared::model::ids::{DeviceId, DeviceType, OrgId, Tag, UserId};
use shared::model::org::Role;
use shared::model::timestamp::Timestamp;
use shared::ops::devices::register::{register_device, DeviceRegistration};
use shared::ops::ingest::{validate_batch, IngestOutcome, Ingestor, SubmittedEvent};
use shared::ops::orgs::invitations::{accept_invitation, invite, InvitationTerms};
use shared::ops::orgs::members::Actor;
use shared::{FleetError, FleetTable};

/// The reference time: every event of the dataset is on this day, before it.
pub const REFERENCE_NOW: &str = "2026-11-20T12:00:00.000Z";
/// Retention the reference table runs with, so the fixed timestamps stay valid.
pub const REFERENCE_RETENTION_DAYS: u32 = 3650;
/// The user with 10 devices x 10 events.
pub const ALICE: &str = "ref-alice";
/// A second user.
pub const BOB: &str = "ref-bob";

/// The reference organization: a fixed id of the generated shape (`o` and 20 hex digits), so
/// the cases' route calls can name it.
pub const REF_ORG: &str = "o00000000000000000001";
/// Its name as seeded.
pub const REF_ORG_NAME: &str = "Reference Works";
/// The organization's owner.
pub const ORG_OWNER: &str = "ref-org-owner";
/// The organization's admin.
pub const ORG_ADMIN: &str = "ref-org-admin";
/// The organization's operator.
pub const ORG_OPERATOR: &str = "ref-org-operator";
/// The organization's viewer.
pub const ORG_VIEWER: &str = "ref-org-viewer";
/// The one device of the organization's fleet.
pub const ORG_DEVICE: &str = "ref-org-dev-0";

/// The people the dataset seeds, each with their devices and the events each device sends at
/// the reference time: (user, name, devices, events).
pub const SEEDED_FLEETS: [(&str, &str, usize, usize); 2] =
    [(ALICE, "Alice", 10, 10), (BOB, "Bob", 2, 5)];

pub(crate) fn now() -> Timestamp {
    Timestamp::parse_field("now", REFERENCE_NOW).expect("valid constant")
}

/// The device tokens of the dataset, by device id.
pub type Tokens = BTreeMap<String, String>;

/// Validates `events` as the ingest function would at the reference time and stores them for
/// the device of `registration`.
pub(crate) async fn ingest_at_reference_time(
    ingestor: &Ingestor,
    registration: &RegistrationItem,
    events: Vec<SubmittedEvent>,
) -> Result<IngestOutcome, FleetError> {
    let batch = validate_batch(
        events,
        now(),
        REFERENCE_RETENTION_DAYS,
        Duration::from_secs(300),
    )?;
    ingestor
        .ingest(
            registration,
            batch,
            Instant::now() + Duration::from_secs(30),
        )
        .await
}

/// Seeds the reference organization: [`REF_ORG`], owned by [`ORG_OWNER`]; an admin, an
/// operator and a viewer who joined by accepting invitations; one open invitation (a viewer's,
/// made by the owner); and [`ORG_DEVICE`] in its fleet, registered by the ordinary operation
/// for the owner key `org:{orgId}` (its token added to `tokens`). The organization and its
/// owner's two items are written as `create_org` writes them, but under the fixed id.
pub(crate) async fn seed_organization(
    table: &FleetTable,
    tokens: &mut Tokens,
) -> Result<(), FleetError> {
    let org = OrgId::parse(REF_ORG)?;
    let owner = UserId::parse(ORG_OWNER)?;
    let created_at = Timestamp::now();
    let organization = OrganizationItem {
        org_id: org.clone(),
        name: REF_ORG_NAME.into(),
        owner: owner.clone(),
        created_by: owner.clone(),
        created_at,
        member_count: 1,
        deleting_at: None,
    };
    let member = OrgMemberItem {
        org_id: org.clone(),
        user_id: owner.clone(),
        role: Role::Owner,
        joined_at: created_at,
        email: Some(format!("{ORG_OWNER}@example.com")),
    };
    let membership = MembershipItem {
        user_id: owner.clone(),
        org_id: org.clone(),
        role: Role::Owner,
        joined_at: created_at,
    };
    for item in [
        organization.to_item(&table.config.shards)?,
        member.to_item(&table.config.shards)?,
        membership.to_item(&table.config.shards)?,
    ] {
        table
            .client
            .put_item()
            .table_name(table.name())
            .set_item(Some(item))
            .send()
            .await
            .map_err(shared::store::table::sdk_error)?;
    }
    let by_owner = Actor {
        user: owner.clone(),
        role: Role::Owner,
    };
    for (person, role) in [
        (ORG_ADMIN, Role::Admin),
        (ORG_OPERATOR, Role::Operator),
        (ORG_VIEWER, Role::Viewer),
    ] {
        let invitation = invite(table, &org, &by_owner, InvitationTerms::new(role, None)?).await?;
        accept_invitation(
            table,
            &UserId::parse(person)?,
            Some(format!("{person}@example.com")),
            &invitation.code,
        )
        .await?;
    }
    invite(
        table,
        &org,
        &by_owner,
        InvitationTerms::new(Role::Viewer, None)?,
    )
    .await?;
    let registered = register_device(
        table,
        &UserId::org_fleet(&org),
        DeviceRegistration {
            offline_detection: Default::default(),
            report_every_seconds: None,
            device_id: DeviceId::parse(ORG_DEVICE)?,
            name: "Boiler room".into(),
            device_type: DeviceType::parse("thermostat")?,
            tags: vec![Tag::parse("plant")?],
        },
    )
    .await?;
    tokens.insert(ORG_DEVICE.into(), registered.token.reveal().to_string());
    Ok(())
}
