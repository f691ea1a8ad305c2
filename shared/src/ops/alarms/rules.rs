//! An owner's alarm rules (AP-19 to AP-22): all in one item, `USER#{userId}` / `RULES`.
//!
//! A change reads the set (consistently) and writes it back conditioned on the version it
//! read, retrying on a concurrent change: two requests, a few KB. Rules change rarely and are
//! read on every cold ingest batch, so the one-item layout favours the read (one key of a
//! BatchGetItem that ingest sends anyway) over the write.

use crate::model::alarm::MAX_RULES_PER_OWNER;

use crate::model::alarm::ids::RuleId;

use crate::model::alarm::rule::{Rule, RuleDefinition, Scope};
use crate::model::entities::rule_set::RuleSetItem;
use crate::model::entities::Entity;
use crate::model::entities::ItemKey;
use crate::model::error::FleetError;
use crate::model::ids::UserId;
use crate::model::pattern_id::PatternId;
use crate::model::schema::GSI3;
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::put_if_version;
use crate::store::table::{sdk_error, FleetTable};

/// Attempts of a change against concurrent changes of the same owner's rules.
const CHANGE_ATTEMPTS: u32 = 5;

/// AP-19, implemented by [`create_rule`].
pub const CREATE_RULE: AccessPattern = AccessPattern {
    id: PatternId::CreateRule,
    description: "create an alarm rule (at most 32 per owner)",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::PutItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = RULES, version = {read}; a device scope: PK = USER#{userId}, SK = DEVICE#{deviceId}",
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("POST /me/rules"),
    implemented_by: implemented_by!(create_rule),
};

/// AP-20, implemented by [`list_rules`].
pub const LIST_RULES: AccessPattern = AccessPattern {
    id: PatternId::ListRules,
    description: "an owner's alarm rules",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = RULES",
    budget: RequestBudget::Fixed(1),
    max_read_units: Some(4.0),
    route: Some("GET /me/rules"),
    implemented_by: implemented_by!(list_rules),
};

/// AP-21, implemented by [`update_rule`].
pub const UPDATE_RULE: AccessPattern = AccessPattern {
    id: PatternId::UpdateRule,
    description: "change an alarm rule (If-Match on its version)",
    frequency: Frequency::Important,
    operations: &[Operation::GetItem, Operation::PutItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = RULES, version = {read}; a new device scope: PK = USER#{userId}, SK = DEVICE#{deviceId}",
    budget: RequestBudget::Fixed(3),
    max_read_units: None,
    route: Some("PATCH /me/rules/{ruleId}"),
    implemented_by: implemented_by!(update_rule),
};

/// AP-22, implemented by [`delete_rule`].
pub const DELETE_RULE: AccessPattern = AccessPattern {
    id: PatternId::DeleteRule,
    description: "delete an alarm rule and clear its open alarms (at most 500; the rest on their devices' next batch)",
    frequency: Frequency::Important,
    operations: &[
        Operation::GetItem,
        Operation::PutItem,
        Operation::Query,
        Operation::TransactWriteItems,
    ],
    index: Some(GSI3),
    key_condition: "PK = USER#{userId}, SK = RULES, version = {read}; PK = USER#{userId}, SK = FLEET; GSI3PK = ALARMS#{userId}#{partition} AND GSI3SK begins_with 2#; per open alarm of the rule its live state",
    budget: RequestBudget::FixedPlusShardPagesAndAlarms(3),
    max_read_units: None,
    route: Some("DELETE /me/rules/{ruleId}"),
    implemented_by: implemented_by!(delete_rule),
};

/// The owner's rules, in id order (none when they never made one).
pub async fn list_rules(table: &FleetTable, user: &UserId) -> Result<Vec<Rule>, FleetError> {
    Ok(read_set(table, user).await?.rule_list())
}

/// Creates a rule: a 409 past [`MAX_RULES_PER_OWNER`], a 404 for a device scope naming a
/// device the owner does not have.
pub async fn create_rule(
    table: &FleetTable,
    user: &UserId,
    definition: RuleDefinition,
) -> Result<Rule, FleetError> {
    check_scope(table, user, &definition.scope, None).await?;
    let now = Timestamp::now();
    let rule = Rule {
        rule_id: RuleId::generate(),
        version: 1,
        definition,
        created_at: now,
        updated_at: now,
    };
    change(table, user, |set| {
        if set.rules.len() >= MAX_RULES_PER_OWNER {
            return Err(FleetError::Conflict {
                code: "rule_limit",
                message: format!(
                    "an owner keeps at most {MAX_RULES_PER_OWNER} alarm rules: delete one first"
                ),
            });
        }
        set.rules.insert(rule.rule_id.to_string(), rule.clone());
        Ok(rule.clone())
    })
    .await
}

/// Applies a PATCH body to rule `id` if its version is `expected`: 404 for no such rule of
/// this owner, 412 for another version, 400 naming the field for a bad body.
pub async fn update_rule(
    table: &FleetTable,
    user: &UserId,
    id: &RuleId,
    expected: u64,
    patch: &serde_json::Value,
) -> Result<Rule, FleetError> {
    let current = read_set(table, user)
        .await?
        .rules
        .get(id.as_str())
        .cloned()
        .ok_or(FleetError::NotFound("rule"))?;
    let definition = current.definition.patched(patch)?;
    check_scope(
        table,
        user,
        &definition.scope,
        Some(&current.definition.scope),
    )
    .await?;
    change(table, user, |set| {
        let rule = set
            .rules
            .get_mut(id.as_str())
            .ok_or(FleetError::NotFound("rule"))?;
        if rule.version != expected {
            return Err(FleetError::StaleRule { expected });
        }
        rule.definition = definition.clone();
        rule.version += 1;
        rule.updated_at = Timestamp::now();
        Ok(rule.clone())
    })
    .await
}

/// Deletes rule `id` (404 if the owner has none such), then clears its open alarms (a
/// silent device would otherwise keep them open for good: see
/// [`super::withdraw::clear_rule_alarms`]). Once the rule is gone no batch raises it again,
/// so the clearing comes after.
pub async fn delete_rule(table: &FleetTable, user: &UserId, id: &RuleId) -> Result<(), FleetError> {
    change(table, user, |set| {
        set.rules
            .remove(id.as_str())
            .map(|_| ())
            .ok_or(FleetError::NotFound("rule"))
    })
    .await?;
    super::withdraw::clear_rule_alarms(table, user, id).await?;
    Ok(())
}

/// A device scope must name one of the owner's devices (another owner's is a 404, like every
/// other route): checked when a rule gets it, not when an unchanged one is edited.
async fn check_scope(
    table: &FleetTable,
    user: &UserId,
    scope: &Scope,
    before: Option<&Scope>,
) -> Result<(), FleetError> {
    let Scope::DeviceId(device) = scope else {
        return Ok(());
    };
    if before == Some(scope) {
        return Ok(());
    }
    if super::lifecycle::owns_device(table, user, device).await? {
        Ok(())
    } else {
        Err(FleetError::NotFound("device"))
    }
}

async fn read_set(table: &FleetTable, user: &UserId) -> Result<RuleSetItem, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::RuleSet { user: user.clone() }.attributes()))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    match out.item {
        Some(item) => RuleSetItem::from_item(item),
        None => Ok(RuleSetItem {
            user_id: user.clone(),
            rules: Default::default(),
            version: 0,
        }),
    }
}

/// Reads the owner's rule set, applies `edit`, and writes it back if nobody changed it in
/// between (again on a conflict). An error from `edit` is returned with nothing written.
async fn change<T>(
    table: &FleetTable,
    user: &UserId,
    mut edit: impl FnMut(&mut RuleSetItem) -> Result<T, FleetError>,
) -> Result<T, FleetError> {
    for _ in 0..CHANGE_ATTEMPTS {
        let mut set = read_set(table, user).await?;
        let read_version = set.version;
        let answer = edit(&mut set)?;
        set.version = read_version + 1;
        if put_if_version(table, &set, RuleSetItem::VERSION, read_version).await? {
            return Ok(answer);
        }
    }
    Err(FleetError::Conflict {
        code: "busy",
        message: "the rules changed concurrently too often: retry".into(),
    })
}
