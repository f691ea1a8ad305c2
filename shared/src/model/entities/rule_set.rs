//! An owner's alarm rules: `USER#{userId}` / `RULES`, all in one item.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::alarm::rule::Rule;
use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::ids::UserId;
use crate::model::keys::{user_pk, KeyParts, KeyTemplate, PrimaryKey};

/// An owner's alarm rules: `USER#{userId}` / `RULES`, all in one item (at most
/// [`crate::model::alarm::MAX_RULES_PER_OWNER`], a few KB), so ingestion reads them together
/// with a device's live state in one BatchGetItem, and every change is one conditional write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSetItem {
    /// The owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// The rules by id.
    #[serde(default)]
    pub rules: BTreeMap<String, Rule>,
    /// Every change adds one (the condition of the next change).
    #[serde(default)]
    pub version: u64,
}

attributes!(RuleSetItem {
    /// `rules`: the rules by id.
    RULES = "rules",
    /// `version`.
    VERSION = "version",
});

impl Entity for RuleSetItem {
    const ENTITY_TYPE: EntityType = EntityType::RuleSet;
    fn item_key(&self) -> ItemKey {
        ItemKey::RuleSet {
            user: self.user_id.clone(),
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

impl RuleSetItem {
    /// The rules in id order.
    pub fn rule_list(&self) -> Vec<Rule> {
        self.rules.values().cloned().collect()
    }
}

/// Sort key of an owner's rule set.
pub const RULES_SK: &str = "RULES";

/// `USER#{userId}` / `RULES`.
pub fn primary_key(user: &UserId) -> PrimaryKey {
    PrimaryKey {
        pk: user_pk(user),
        sk: RULES_SK.to_string(),
    }
}

/// A rule set's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["USER", user], ["RULES"]) => {
            Some(UserId::parse(*user).map(|user| ItemKey::RuleSet { user }))
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "ruleSet",
    pk: "USER#${userId}",
    sk: "RULES",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
