//! Creating, listing, reading, renaming and deleting organizations (AP-O1 to AP-O5).

use aws_sdk_dynamodb::types::{KeysAndAttributes, WriteRequest};

use crate::model::cursor::{self, Page};
use crate::model::entities::fleet::FleetItem;
use crate::model::entities::membership::{membership_pk, MembershipItem, ORG_PREFIX};
use crate::model::entities::org_member::OrgMemberItem;
use crate::model::entities::organization::{org_pk, OrganizationItem};
use crate::model::entities::running_rollout::{running_rollout_prefix, RUNNING_ROLLOUTS_PK};
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{OrgId, UserId};
use crate::model::keys::user_pk;
use crate::model::org::{Role, MAX_ORGS_PER_USER};
use crate::model::pattern_id::PatternId;
use crate::model::schema::{Item, PK, SK};
use crate::model::timestamp::Timestamp;
use crate::ops::orgs::view::Org;
use crate::ops::orgs::writes;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::{
    get_all, key_prefix, query, read_consistent, string_value, transact, write_all, Transaction,
    BATCH_GET_SIZE, BATCH_WRITE_SIZE,
};
use crate::store::retry::Retry;
use crate::store::table::{sdk_error, FleetTable};
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
    // In membership order (by id); a membership whose organization is gone (deleted while
    // the membership's removal was still under way) lists nothing.
    let items = memberships
        .iter()
        .filter_map(|m| {
            orgs.iter()
                .find(|o| o.org_id == m.org_id)
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
    description: "delete an organization that has no devices, its members and invitations",
    frequency: Frequency::Analytics,
    operations: &[
        Operation::GetItem,
        Operation::Query,
        Operation::BatchWriteItem,
    ],
    index: None,
    key_condition: "USER#org:{orgId}/FLEET; PK = ORG#{orgId} (all); PK = USER#org:{orgId} (all); ROLLOUTS#RUNNING begins_with org:{orgId}#",
    // The fleet item's GetItem, one Query of each partition and of the running list, and the
    // deletions: the memberships in batches of their own first, so the two deletions round up
    // apart (+1).
    budget: RequestBudget::BatchOf25Plus(5),
    max_read_units: None,
    route: Some("DELETE /orgs/{orgId}"),
    implemented_by: implemented_by!(delete_org),
};

/// AP-O5: deletes `org` when its fleet has no device (409 `org_not_empty` otherwise: a
/// million devices' histories are never deleted as a side effect; they are moved or deleted
/// first, each a request its caller sees). Memberships go first, so nobody acts on the
/// organization while the rest is removed; then its members, invitations, the organization
/// item and what remains of its fleet (fleet item, rules, rollouts and their entries on the
/// worker's running list). Deleted devices' events go by their purge markers, as ever.
pub async fn delete_org(table: &FleetTable, org: &OrgId) -> Result<(), FleetError> {
    let fleet_owner = UserId::org_fleet(org);
    let fleet: Option<FleetItem> = read_consistent(
        table,
        &ItemKey::Fleet {
            user: fleet_owner.clone(),
        },
    )
    .await?;
    let devices = fleet.map_or(0, |f| f.devices);
    if devices > 0 {
        return Err(FleetError::Conflict {
            code: "org_not_empty",
            message: format!("the organization has {devices} devices: move or delete them first"),
        });
    }
    let org_items = partition_keys(table, org_pk(org)).await?;
    let mut deletes = Vec::new();
    // Each member's own membership item first (what authorization reads).
    for (_, sk) in org_items.iter().filter(|(_, sk)| sk.starts_with("MEMBER#")) {
        if let Some(member) = sk.strip_prefix("MEMBER#") {
            let member = UserId::parse(member)?;
            deletes.push(ItemKey::Membership {
                member,
                org: org.clone(),
            });
        }
    }
    delete_keys(table, deletes.iter().map(ItemKey::attributes).collect()).await?;
    let mut rest: Vec<Item> = org_items
        .into_iter()
        .map(|(pk, sk)| key_item(pk, sk))
        .collect();
    rest.extend(
        partition_keys(table, user_pk(&fleet_owner))
            .await?
            .into_iter()
            .map(|(pk, sk)| key_item(pk, sk)),
    );
    // Its rollouts still on the worker's running list: the worker would otherwise write
    // their progress back into the deleted fleet's partition.
    let (running, _) = query(key_prefix(
        table,
        RUNNING_ROLLOUTS_PK,
        running_rollout_prefix(&fleet_owner),
        Expressions::builder().projection(&[PK, SK]),
    ))
    .await?;
    rest.extend(running.into_iter().filter_map(|item| {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        Some(key_item(text(PK.name())?, text(SK.name())?))
    }));
    delete_keys(table, rest).await
}

fn key_item(pk: String, sk: String) -> Item {
    Item::from([
        (PK.name().to_string(), string_value(pk)),
        (SK.name().to_string(), string_value(sk)),
    ])
}

/// Every key of partition `pk`, all pages.
async fn partition_keys(
    table: &FleetTable,
    pk: String,
) -> Result<Vec<(String, String)>, FleetError> {
    let mut keys = Vec::new();
    let mut start = None;
    loop {
        let (items, next) = query(
            table
                .client
                .query()
                .table_name(table.name())
                .expressions(
                    Expressions::builder()
                        .key_condition(Condition::equals(PK, string_value(pk.clone())))
                        .projection(&[PK, SK])
                        .build(),
                )
                .set_exclusive_start_key(start),
        )
        .await?;
        for item in items {
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            if let (Some(pk), Some(sk)) = (text(PK.name()), text(SK.name())) {
                keys.push((pk, sk));
            }
        }
        match next {
            Some(next) => start = Some(next),
            None => return Ok(keys),
        }
    }
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
