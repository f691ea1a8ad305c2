//! Creating, listing, reading, renaming and deleting organizations (AP-O1 to AP-O5).

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{KeysAndAttributes, TransactWriteItem, WriteRequest};
use futures::TryStreamExt;
use serde::Serialize;

use crate::model::cursor::{self, Page};
use crate::model::entities::deleted_webhook_log::DELETED_LOG_PREFIX;
use crate::model::entities::firmware::{firmware_pk, object_key, package_of_sk};
use crate::model::entities::fleet::FleetItem;
use crate::model::entities::invitation::INVITATION_PREFIX;
use crate::model::entities::membership::{membership_pk, MembershipItem, ORG_PREFIX};
use crate::model::entities::org_deletion::{OrgDeletionItem, DELETING_ORGS_PK};
use crate::model::entities::org_member::{OrgMemberItem, MEMBER_PREFIX};
use crate::model::entities::organization::{org_pk, OrganizationItem};
use crate::model::entities::running_rollout::{running_rollout_prefix, RUNNING_ROLLOUTS_PK};
use crate::model::entities::webhook::WEBHOOK_PREFIX;
use crate::model::entities::webhook_delivery::{
    log_partition, DELIVERY_LOG_SHARDS, DELIVERY_PREFIX,
};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{OrgId, UserId};
use crate::model::keys::user_pk;
use crate::model::org::{Role, MAX_ORGS_PER_USER};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, PK, SK};
use crate::model::timestamp::Timestamp;
use crate::model::webhook::WebhookId;
use crate::ops::orgs::view::Org;
use crate::ops::orgs::writes;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    get_all, key_prefix, number_value, query, read_consistent, string_value, transact,
    whole_partition, write_all, Transaction, BATCH_GET_SIZE, BATCH_WRITE_SIZE,
};
use crate::store::firmware_images::FirmwareImages;
use crate::store::retry::Retry;
use crate::store::table::{condition_failed, sdk_error, FleetTable, TransactionSlot};
use crate::store::with_expressions::WithExpressions;

/// AP-O1, implemented by [`create_org`].
pub const CREATE_ORG: AccessPattern = AccessPattern {
    id: PatternId::CreateOrg,
    description: "create an organization, the caller its owner",
    frequency: Frequency::Important,
    operations: &[Operation::Query, Operation::TransactWriteItems],
    index: None,
    key_condition: "PK = MEMBER#{userId} (count); put ORG#{orgId}/ORG, ORG#{orgId}/MEMBER#{userId}, MEMBER#{userId}/ORG#{orgId}",
    budget: RequestBudget::Fixed(2),
    max_read_units: None,
    route: Some("POST /orgs"),
    implemented_by: implemented_by!(create_org),
};

/// AP-O1: a new organization named `name` with `owner` as its owner (and only member). A
/// person belongs to at most [`MAX_ORGS_PER_USER`] organizations (409 `org_limit`).
pub async fn create_org(
    table: &FleetTable,
    owner: &UserId,
    email: Option<String>,
    name: String,
) -> Result<Org, FleetError> {
    let (mine, _) = query(
        key_prefix(
            table,
            membership_pk(owner),
            ORG_PREFIX,
            Expressions::builder().projection(&[PK]),
        )
        .limit(MAX_ORGS_PER_USER as i32)
        .consistent_read(true),
    )
    .await?;
    if mine.len() >= MAX_ORGS_PER_USER {
        return Err(FleetError::Conflict {
            code: "org_limit",
            message: format!("a person belongs to at most {MAX_ORGS_PER_USER} organizations"),
        });
    }
    let now = Timestamp::now();
    let org = OrganizationItem {
        org_id: OrgId::generate(),
        name,
        owner: owner.clone(),
        created_by: owner.clone(),
        created_at: now,
        member_count: 1,
        deleting_at: None,
    };
    let member = OrgMemberItem {
        org_id: org.org_id.clone(),
        user_id: owner.clone(),
        role: Role::Owner,
        joined_at: now,
        email,
    };
    let membership = MembershipItem {
        user_id: owner.clone(),
        org_id: org.org_id.clone(),
        role: Role::Owner,
        joined_at: now,
    };
    let fresh = || Some(Condition::absent(PK));
    let actions = vec![
        writes::put(table, &org, fresh())?,
        writes::put(table, &member, fresh())?,
        writes::put(table, &membership, fresh())?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(Org::of(&org, Role::Owner)),
        Transaction::Cancelled(_) => Err(FleetError::internal("a new organization id was taken")),
    }
}

/// AP-O2, implemented by [`my_orgs`].
pub const MY_ORGS: AccessPattern = AccessPattern {
    id: PatternId::MyOrgs,
    description: "the caller's organizations, with their role in each, a page",
    frequency: Frequency::Important,
    operations: &[Operation::Query, Operation::BatchGetItem],
    index: None,
    key_condition: "PK = MEMBER#{userId}, SK begins_with ORG#; then each ORG#{orgId}/ORG",
    budget: RequestBudget::PerPage(2),
    max_read_units: None,
    route: Some("GET /orgs"),
    implemented_by: implemented_by!(my_orgs),
};

/// Organizations per page of `GET /orgs`: one BatchGetItem's worth.
pub const ORGS_PAGE: usize = BATCH_GET_SIZE;

/// AP-O2: one page of the organizations `user` belongs to, by id, with their role (one Query
/// of their memberships, one BatchGetItem of the organizations). A person is in at most
/// [`MAX_ORGS_PER_USER`], one page; the cursor serves anyone past it (joined before the limit
/// held on accept, or by racing requests).
pub async fn my_orgs(
    table: &FleetTable,
    user: &UserId,
    cursor: Option<&str>,
) -> Result<Page<Org>, FleetError> {
    let pk = membership_pk(user);
    let start = cursor::resume(PatternId::MyOrgs, cursor, &[(PK, &pk)], &[(SK, ORG_PREFIX)])?;
    let (items, next) = query(
        key_prefix(table, pk.clone(), ORG_PREFIX, Expressions::builder())
            .limit(ORGS_PAGE as i32)
            .set_exclusive_start_key(start),
    )
    .await?;
    let cursor = cursor::after(PatternId::MyOrgs, next.as_ref());
    let memberships = items
        .into_iter()
        .map(MembershipItem::from_item)
        .collect::<Result<Vec<_>, _>>()?;
    if memberships.is_empty() {
        return Ok(Page {
            items: Vec::new(),
            cursor,
        });
    }
    let keys = memberships
        .iter()
        .map(|m| {
            ItemKey::Organization {
                org: m.org_id.clone(),
            }
            .attributes()
        })
        .collect::<Vec<_>>();
    let request = KeysAndAttributes::builder()
        .set_keys(Some(keys))
        .build()
        .map_err(FleetError::internal)?;
    let found = get_all(table, request, &mut Retry::attempts(4)).await?;
    let orgs = found
        .into_iter()
        .map(OrganizationItem::from_item)
        .collect::<Result<Vec<_>, _>>()?;
    // In membership order (by id); a membership whose organization is gone or being deleted
    // (its memberships' removal still under way) lists nothing.
    let items = memberships
        .iter()
        .filter_map(|m| {
            orgs.iter()
                .find(|o| o.org_id == m.org_id && o.deleting_at.is_none())
                .map(|o| Org::of(o, m.role))
        })
        .collect();
    Ok(Page { items, cursor })
}

/// AP-O3, implemented by [`get_org`].
pub const GET_ORG: AccessPattern = AccessPattern {
    id: PatternId::GetOrg,
    description: "one organization (after the caller's role, AP-O13)",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = ORG#{orgId}, SK = ORG",
    budget: RequestBudget::Fixed(1),
    max_read_units: Some(0.5),
    route: Some("GET /orgs/{orgId}"),
    implemented_by: implemented_by!(get_org),
};

/// AP-O3: `org` as a member with `role` sees it.
pub async fn get_org(table: &FleetTable, org: &OrgId, role: Role) -> Result<Org, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Organization { org: org.clone() }.attributes(),
        ))
        .send()
        .await
        .map_err(sdk_error)?;
    out.item
        .map(OrganizationItem::from_item)
        .transpose()?
        .filter(|o| o.deleting_at.is_none())
        .map(|o| Org::of(&o, role))
        .ok_or(FleetError::NotFound("organization"))
}

/// AP-O4, implemented by [`rename_org`].
pub const RENAME_ORG: AccessPattern = AccessPattern {
    id: PatternId::RenameOrg,
    description: "rename an organization",
    frequency: Frequency::Analytics,
    operations: &[Operation::UpdateItem],
    index: None,
    key_condition: "PK = ORG#{orgId}, SK = ORG",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("PATCH /orgs/{orgId}"),
    implemented_by: implemented_by!(rename_org),
};

/// AP-O4: `org` renamed to `name`, as a member with `role` sees it.
pub async fn rename_org(
    table: &FleetTable,
    org: &OrgId,
    role: Role,
    name: String,
) -> Result<Org, FleetError> {
    let out = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(
            ItemKey::Organization { org: org.clone() }.attributes(),
        ))
        .expressions(Expressions::write(
            Update::new().set(OrganizationItem::NAME, string_value(name)),
            Some(Condition::exists(PK)),
        ))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
        .send()
        .await;
    match out {
        Ok(out) => {
            let item = OrganizationItem::from_item(out.attributes.unwrap_or_default())?;
            Ok(Org::of(&item, role))
        }
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
        {
            Err(FleetError::NotFound("organization"))
        }
        Err(err) => Err(sdk_error(err)),
    }
}

/// AP-O5, implemented by [`delete_org`].
pub const DELETE_ORG: AccessPattern = AccessPattern {
    id: PatternId::DeleteOrg,
    description: "delete an organization that has no devices, its members, invitations and firmware",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::GetItem,
        Operation::TransactWriteItems,
        Operation::Query,
        Operation::BatchWriteItem,
    ],
    index: None,
    key_condition: "USER#org:{orgId}/FLEET; mark ORG#{orgId}/ORG, put ORGS#DELETING/{orgId}; PK = ORG#{orgId} begins_with MEMBER#, INVITATION#; PK = USER#org:{orgId} begins_with WEBHOOK#, WHLOG# (deleted endpoints), then each endpoint's PK = USER#org:{orgId}#WHLOG#{webhookId}#{shard}; PK = USER#org:{orgId}; ROLLOUTS#RUNNING begins_with org:{orgId}#; PK = FIRMWARE#org:{orgId}",
    // The fleet item's GetItem, the marking transaction, one Query per step (members,
    // invitations, webhook endpoints, deleted endpoints' logs, fleet partition, running
    // rollouts, firmware partition)
    // and the deletions in batches of 25, each step's rounded up apart (the memberships' own
    // batches before the member list's: +1; the firmware's: +1), and the last batch: the
    // organization item and its entry on the worker's list. Each webhook endpoint adds a Query
    // of each of its 16 log partitions and their deletions, and so does a deleted endpoint
    // whose log has not expired. The images' S3 deletes are not DynamoDB requests.
    budget: RequestBudget::BatchOf25Plus(12),
    max_read_units: None,
    route: Some("DELETE /orgs/{orgId}"),
    implemented_by: implemented_by!(delete_org),
};

/// How long a deletion request works before it answers (the worker finishes the rest): at
/// most half the device-updates function's timeout, so it is never killed midway.
pub const ORG_DELETION_REQUEST_BUDGET: Duration = Duration::from_secs(4);

/// Keys read per Query of a deletion step: four BatchWriteItems, well under a second.
const DELETION_PAGE: i32 = 100;

/// Firmware images deleted at once (S3 DeleteObject): a page's 100 in about ten round trips.
const IMAGE_DELETES_AT_ONCE: usize = 10;

/// AP-O5: deletes `org` when its fleet has no device (409 `org_not_empty` otherwise: a
/// million devices' histories are never deleted as a side effect; they are moved or deleted
/// first, each a request its caller sees).
///
/// The organization is marked as being deleted first, in the transaction that checks its
/// fleet is empty and puts it on the worker's list (`ORGS#DELETING`): from then on no
/// invitation is accepted and no device registered or moved into it (each is conditioned on
/// the mark), so a deletion interrupted after any step admits nobody. Then, for at most
/// [`ORG_DELETION_REQUEST_BUDGET`], each member's membership (what authorization reads) with
/// its member-list entry, the invitations, the fleet's partition (fleet item, rules,
/// rollouts), its rollouts on the worker's running list, its firmware (each package's image
/// in `images`, then the packages and signing keys), and last the organization item and its
/// entry on the list. What does not fit is finished by the scheduled worker
/// ([`continue_org_deletions`]); every step is a delete of what it reads, so repeating one is
/// harmless.
pub async fn delete_org(
    table: &FleetTable,
    images: &FirmwareImages,
    org: &OrgId,
) -> Result<(), FleetError> {
    let limit = DeletionLimit::Until(Instant::now() + ORG_DELETION_REQUEST_BUDGET);
    delete_org_within(table, images, org, limit)
        .await
        .map(|_| ())
}

/// How much of a deletion a run may do: until a deadline (requests, the worker), or a number
/// of steps' pages (a test interrupting it after each one).
#[derive(Clone, Copy, Debug)]
pub enum DeletionLimit {
    /// Until this instant.
    Until(Instant),
    /// This many pages (a Query and its deletes; the last delete of the organization item
    /// counts as one).
    Pages(u32),
}

impl DeletionLimit {
    /// Takes one page's work from the limit: `false` when none is left.
    fn take(&mut self) -> bool {
        match self {
            DeletionLimit::Until(until) => Instant::now() < *until,
            DeletionLimit::Pages(0) => false,
            DeletionLimit::Pages(left) => {
                *left -= 1;
                true
            }
        }
    }
}

/// [`delete_org`] within `limit`: whether the deletion is finished (else the worker's).
pub async fn delete_org_within(
    table: &FleetTable,
    images: &FirmwareImages,
    org: &OrgId,
    limit: DeletionLimit,
) -> Result<bool, FleetError> {
    mark_deleting(table, org).await?;
    finish_org_deletion(table, images, org, limit).await
}

/// The slots of the marking transaction.
#[derive(Clone, Copy, Debug)]
enum MarkSlot {
    /// The organization item, marked (fails when it is gone).
    Organization = 0,
    /// The fleet item: no device (fails when one was registered or moved in since read).
    EmptyFleet = 1,
}

impl TransactionSlot for MarkSlot {
    fn position(self) -> usize {
        self as usize
    }
}

/// Marks `org` as being deleted and puts it on the worker's list, on the condition that its
/// fleet has no device (one transaction, after a GetItem of the fleet that answers the common
/// 409 without writing). A deletion already under way is marked again harmlessly.
async fn mark_deleting(table: &FleetTable, org: &OrgId) -> Result<(), FleetError> {
    let fleet_key = ItemKey::Fleet {
        user: UserId::org_fleet(org),
    };
    let not_empty = |devices: u64| FleetError::Conflict {
        code: "org_not_empty",
        message: format!("the organization has {devices} devices: move or delete them first"),
    };
    let fleet: Option<FleetItem> = read_consistent(table, &fleet_key).await?;
    let devices = fleet.map_or(0, |f| f.devices);
    if devices > 0 {
        return Err(not_empty(devices));
    }
    let now = Timestamp::now();
    let empty = aws_sdk_dynamodb::types::ConditionCheck::builder()
        .table_name(table.name())
        .set_key(Some(fleet_key.attributes()))
        .expressions(Expressions::condition(
            Condition::absent(PK).or(Condition::equals(FleetItem::DEVICES, number_value(0))),
        ))
        .build()
        .map_err(FleetError::internal)?;
    // In the order of `MarkSlot`.
    let actions = vec![
        writes::update(
            table,
            &ItemKey::Organization { org: org.clone() },
            Update::new()
                .set_if_absent(OrganizationItem::DELETING_AT, string_value(now.to_string())),
            Condition::exists(PK),
        )?,
        TransactWriteItem::builder().condition_check(empty).build(),
        writes::put(
            table,
            &OrgDeletionItem {
                org_id: org.clone(),
                started_at: now,
            },
            None,
        )?,
    ];
    match transact(table, actions, Retry::attempts(4)).await? {
        Transaction::Committed => Ok(()),
        Transaction::Cancelled(reasons) if condition_failed(&reasons, MarkSlot::EmptyFleet) => {
            let fleet: Option<FleetItem> = read_consistent(table, &fleet_key).await?;
            Err(not_empty(fleet.map_or(1, |f| f.devices.max(1))))
        }
        Transaction::Cancelled(reasons) if condition_failed(&reasons, MarkSlot::Organization) => {
            Err(FleetError::NotFound("organization"))
        }
        Transaction::Cancelled(reasons) => Err(FleetError::internal(format!(
            "organization deletion cancelled: {reasons:?}"
        ))),
    }
}

/// Carries on the deletion of `org` (marked already) within `limit`: returns whether it is
/// finished. Each step deletes what a Query finds until it finds nothing, so a run stopped
/// anywhere is continued by the next one.
///
/// `images` is required, not optional: a deletion without the bucket would delete the
/// packages and leave their images with nothing left that names them. It is asked only for
/// an organization that has packages.
pub async fn finish_org_deletion(
    table: &FleetTable,
    images: &FirmwareImages,
    org: &OrgId,
    mut limit: DeletionLimit,
) -> Result<bool, FleetError> {
    let fleet_owner = UserId::org_fleet(org);
    // Members first: each one's membership (what authorization reads), then its entry in
    // the member list, so an entry is never gone while its membership is left.
    let members = || {
        key_prefix(
            table,
            org_pk(org),
            MEMBER_PREFIX,
            Expressions::builder().projection(&[PK, SK]),
        )
    };
    if !delete_pages(table, &mut limit, members, |sk: &str| {
        let member = sk.strip_prefix(MEMBER_PREFIX)?;
        UserId::parse(member).ok().map(|member| {
            ItemKey::Membership {
                member,
                org: org.clone(),
            }
            .attributes()
        })
    })
    .await?
    {
        return Ok(false);
    }
    let invitations = || {
        key_prefix(
            table,
            org_pk(org),
            INVITATION_PREFIX,
            Expressions::builder().projection(&[PK, SK]),
        )
    };
    if !delete_pages(table, &mut limit, invitations, |_: &str| None).await? {
        return Ok(false);
    }
    // The logs of its webhook endpoints live beside the fleet, in partitions of their own:
    // before the endpoints (in the fleet's partition, next), so a run stopped between finds
    // them again.
    if !delete_webhook_logs(table, &mut limit, &fleet_owner).await? {
        return Ok(false);
    }
    let fleet_partition = || {
        table.client.query().table_name(table.name()).expressions(
            Expressions::builder()
                .key_condition(Condition::equals(PK, string_value(user_pk(&fleet_owner))))
                .projection(&[PK, SK])
                .build(),
        )
    };
    if !delete_pages(table, &mut limit, fleet_partition, |_: &str| None).await? {
        return Ok(false);
    }
    // Its rollouts still on the worker's running list: the worker would otherwise write
    // their progress back into the deleted fleet's partition.
    let running = || {
        key_prefix(
            table,
            RUNNING_ROLLOUTS_PK,
            running_rollout_prefix(&fleet_owner),
            Expressions::builder().projection(&[PK, SK]),
        )
    };
    if !delete_pages(table, &mut limit, running, |_: &str| None).await? {
        return Ok(false);
    }
    // Its firmware, once no rollout of the fleet runs (a running one would offer a package's
    // image): each page's images first, then its items (packages, signing keys), so a run
    // stopped in between finds the packages again and deletes their images again (a delete of
    // a deleted object is harmless), and no image is ever left without its package.
    if !delete_firmware_pages(table, images, &mut limit, &fleet_owner).await? {
        return Ok(false);
    }
    // Last, the organization item (with its mark) and its entry on the worker's list: until
    // then the mark refuses every accept, registration and move-in.
    if !limit.take() {
        return Ok(false);
    }
    delete_keys(
        table,
        vec![
            ItemKey::Organization { org: org.clone() }.attributes(),
            ItemKey::OrgDeletion { org: org.clone() }.attributes(),
        ],
    )
    .await?;
    Ok(true)
}

/// Deletes the delivery logs of `owner`'s webhook endpoints, present and deleted (each over
/// [`DELIVERY_LOG_SHARDS`] partitions), within `limit`: whether they are all gone. A deleted
/// endpoint's log is found by the
/// [`DeletedWebhookLogItem`](crate::model::entities::deleted_webhook_log::DeletedWebhookLogItem)
/// its deletion left; that item goes only once its log has, a page of them at a time, so a run
/// stopped anywhere finds the rest.
async fn delete_webhook_logs(
    table: &FleetTable,
    limit: &mut DeletionLimit,
    owner: &UserId,
) -> Result<bool, FleetError> {
    let listed = |prefix: &'static str| {
        key_prefix(
            table,
            user_pk(owner),
            prefix,
            Expressions::builder().projection(&[PK, SK]),
        )
    };
    // The endpoints (at most MAX_WEBHOOKS_PER_OWNER: one page); they go with the partition.
    let (endpoints, _) = page_keys(listed(WEBHOOK_PREFIX)).await?;
    if !delete_logs_named(table, limit, owner, WEBHOOK_PREFIX, &endpoints).await? {
        return Ok(false);
    }
    loop {
        if !limit.take() {
            return Ok(false);
        }
        let (deleted, more) = page_keys(listed(DELETED_LOG_PREFIX)).await?;
        if !delete_logs_named(table, limit, owner, DELETED_LOG_PREFIX, &deleted).await? {
            return Ok(false);
        }
        delete_keys(
            table,
            deleted
                .into_iter()
                .map(|(pk, sk)| key_item(pk, sk))
                .collect(),
        )
        .await?;
        if !more {
            return Ok(true);
        }
    }
}

/// Deletes the logs of the endpoints whose ids the sort keys of `keys` carry after `prefix`
/// (endpoint items, or the records of deleted endpoints) within `limit`: whether all are gone.
async fn delete_logs_named(
    table: &FleetTable,
    limit: &mut DeletionLimit,
    owner: &UserId,
    prefix: &str,
    keys: &[(String, String)],
) -> Result<bool, FleetError> {
    for (_, sk) in keys {
        let Some(webhook) = sk
            .strip_prefix(prefix)
            .and_then(|id| WebhookId::parse(id).ok())
        else {
            continue;
        };
        if !delete_log(table, limit, owner, &webhook).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Deletes one endpoint's delivery log (its [`DELIVERY_LOG_SHARDS`] partitions) within
/// `limit`: whether it is all gone.
async fn delete_log(
    table: &FleetTable,
    limit: &mut DeletionLimit,
    owner: &UserId,
    webhook: &WebhookId,
) -> Result<bool, FleetError> {
    for shard in 0..DELIVERY_LOG_SHARDS {
        let log = || {
            key_prefix(
                table,
                log_partition(owner, webhook, shard),
                DELIVERY_PREFIX,
                Expressions::builder().projection(&[PK, SK]),
            )
        };
        if !delete_pages(table, limit, log, |_: &str| None).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Deletes what the Query `pages` finds, a page of [`DELETION_PAGE`] keys at a time, until it
/// finds nothing (`true`) or `limit` is used up (`false`). For each key found, `first` may name
/// another item to delete before it (in batches of their own, earlier).
async fn delete_pages(
    table: &FleetTable,
    limit: &mut DeletionLimit,
    pages: impl Fn() -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    first: impl Fn(&str) -> Option<Item>,
) -> Result<bool, FleetError> {
    loop {
        if !limit.take() {
            return Ok(false);
        }
        let (keys, more) = page_keys(pages()).await?;
        delete_keys(table, keys.iter().filter_map(|(_, sk)| first(sk)).collect()).await?;
        delete_keys(
            table,
            keys.into_iter().map(|(pk, sk)| key_item(pk, sk)).collect(),
        )
        .await?;
        if !more {
            return Ok(true);
        }
    }
}

/// The firmware step of a deletion: [`delete_pages`] of the partition `FIRMWARE#{owner}`,
/// each page's package images deleted from `images` before its items.
async fn delete_firmware_pages(
    table: &FleetTable,
    images: &FirmwareImages,
    limit: &mut DeletionLimit,
    owner: &UserId,
) -> Result<bool, FleetError> {
    let partition = || {
        table.client.query().table_name(table.name()).expressions(
            Expressions::builder()
                .key_condition(Condition::equals(PK, string_value(firmware_pk(owner))))
                .projection(&[PK, SK])
                .build(),
        )
    };
    loop {
        if !limit.take() {
            return Ok(false);
        }
        let (keys, more) = page_keys(partition()).await?;
        let objects: Vec<String> = keys
            .iter()
            .filter_map(|(_, sk)| package_of_sk(sk))
            .map(|firmware| object_key(owner, &firmware))
            .collect();
        futures::stream::iter(objects.iter().map(Ok))
            .try_for_each_concurrent(IMAGE_DELETES_AT_ONCE, |object| images.delete(object))
            .await?;
        delete_keys(
            table,
            keys.into_iter().map(|(pk, sk)| key_item(pk, sk)).collect(),
        )
        .await?;
        if !more {
            return Ok(true);
        }
    }
}

/// The keys of one page (at most [`DELETION_PAGE`], read consistently) the Query `page`
/// finds, and whether there may be more.
async fn page_keys(
    page: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
) -> Result<(Vec<(String, String)>, bool), FleetError> {
    let (items, next) = query(page.consistent_read(true).limit(DELETION_PAGE)).await?;
    let keys = items
        .iter()
        .filter_map(|item| {
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            Some((text(PK.name())?, text(SK.name())?))
        })
        .collect();
    Ok((keys, next.is_some()))
}

/// One organization deletion's progress after a run of the scheduled worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgDeletionProgress {
    /// The organization.
    pub org_id: String,
    /// Whether it is all gone.
    pub finished: bool,
}

/// The scheduled worker's part: lists the organizations being deleted (one Query of
/// `ORGS#DELETING`) and carries each deletion on until `until` (their firmware images deleted
/// from `images`). Two runs at once only repeat deletes.
pub async fn continue_org_deletions(
    table: &FleetTable,
    images: &FirmwareImages,
    until: Instant,
) -> Result<Vec<OrgDeletionProgress>, FleetError> {
    let items = whole_partition(table, DELETING_ORGS_PK).await?;
    let mut progress = Vec::new();
    for item in items {
        if Instant::now() >= until {
            break;
        }
        let deletion = OrgDeletionItem::from_item(item)?;
        let finished =
            finish_org_deletion(table, images, &deletion.org_id, DeletionLimit::Until(until))
                .await?;
        progress.push(OrgDeletionProgress {
            org_id: deletion.org_id.to_string(),
            finished,
        });
    }
    Ok(progress)
}

fn key_item(pk: String, sk: String) -> Item {
    Item::from([
        (PK.name().to_string(), string_value(pk)),
        (SK.name().to_string(), string_value(sk)),
    ])
}

/// Deletes the items at `keys`, 25 per BatchWriteItem.
async fn delete_keys(table: &FleetTable, keys: Vec<Item>) -> Result<(), FleetError> {
    for chunk in keys.chunks(BATCH_WRITE_SIZE) {
        let mut requests = Vec::with_capacity(chunk.len());
        for key in chunk {
            let delete = aws_sdk_dynamodb::types::DeleteRequest::builder()
                .set_key(Some(key.clone()))
                .build()
                .map_err(FleetError::internal)?;
            requests.push(WriteRequest::builder().delete_request(delete).build());
        }
        let left = write_all(table, requests, &mut Retry::attempts(8)).await?;
        if !left.is_empty() {
            return Err(crate::store::dynamo::throttled());
        }
    }
    Ok(())
}
