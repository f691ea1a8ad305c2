//! One shard of a firmware rollout's per-stage counts: `ROLLOUT#{userId}#{rolloutId}#COUNTS#{shard}`
//! / `COUNTS`.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::model::entities::{Entity, EntityType, ItemKey};
use crate::model::error::ValidationError;
use crate::model::expression::Attribute;
use crate::model::ids::{RolloutId, UserId};
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::rollout_progress::{StageCounter, StageCounts};
use crate::model::schema::Item;

/// Shards of a rollout's counts. A device always counts on the shard of its id
/// ([`counts_shard`]), so a stage of a million devices moving at once spreads its increments
/// over this many partitions (each well under DynamoDB's 1,000 writes a second per partition
/// at a million devices checking in hourly: 278 a second in all), and a read is one
/// BatchGetItem of them all.
pub const ROLLOUT_COUNT_SHARDS: u32 = 16;

/// The shard a device's counts go to: its stable stage bucket
/// ([`crate::model::firmware::stage_bucket`]) mod [`ROLLOUT_COUNT_SHARDS`].
pub fn counts_shard(device: &crate::model::ids::DeviceId) -> u32 {
    (crate::model::firmware::stage_bucket(device) % u64::from(ROLLOUT_COUNT_SHARDS)) as u32
}

/// The stored attribute of each stage's counters (`s{stage}{counter}`), in
/// [`StageCounter::ALL`] order, for the at most [`crate::model::firmware::MAX_STAGES`] stages.
pub const STAGE_COUNTER_ATTRIBUTES: [[Attribute; 6]; 10] = [
    [
        Attribute::named("s0offered"),
        Attribute::named("s0inProgress"),
        Attribute::named("s0succeeded"),
        Attribute::named("s0failed"),
        Attribute::named("s0timedOut"),
        Attribute::named("s0retried"),
    ],
    [
        Attribute::named("s1offered"),
        Attribute::named("s1inProgress"),
        Attribute::named("s1succeeded"),
        Attribute::named("s1failed"),
        Attribute::named("s1timedOut"),
        Attribute::named("s1retried"),
    ],
    [
        Attribute::named("s2offered"),
        Attribute::named("s2inProgress"),
        Attribute::named("s2succeeded"),
        Attribute::named("s2failed"),
        Attribute::named("s2timedOut"),
        Attribute::named("s2retried"),
    ],
    [
        Attribute::named("s3offered"),
        Attribute::named("s3inProgress"),
        Attribute::named("s3succeeded"),
        Attribute::named("s3failed"),
        Attribute::named("s3timedOut"),
        Attribute::named("s3retried"),
    ],
    [
        Attribute::named("s4offered"),
        Attribute::named("s4inProgress"),
        Attribute::named("s4succeeded"),
        Attribute::named("s4failed"),
        Attribute::named("s4timedOut"),
        Attribute::named("s4retried"),
    ],
    [
        Attribute::named("s5offered"),
        Attribute::named("s5inProgress"),
        Attribute::named("s5succeeded"),
        Attribute::named("s5failed"),
        Attribute::named("s5timedOut"),
        Attribute::named("s5retried"),
    ],
    [
        Attribute::named("s6offered"),
        Attribute::named("s6inProgress"),
        Attribute::named("s6succeeded"),
        Attribute::named("s6failed"),
        Attribute::named("s6timedOut"),
        Attribute::named("s6retried"),
    ],
    [
        Attribute::named("s7offered"),
        Attribute::named("s7inProgress"),
        Attribute::named("s7succeeded"),
        Attribute::named("s7failed"),
        Attribute::named("s7timedOut"),
        Attribute::named("s7retried"),
    ],
    [
        Attribute::named("s8offered"),
        Attribute::named("s8inProgress"),
        Attribute::named("s8succeeded"),
        Attribute::named("s8failed"),
        Attribute::named("s8timedOut"),
        Attribute::named("s8retried"),
    ],
    [
        Attribute::named("s9offered"),
        Attribute::named("s9inProgress"),
        Attribute::named("s9succeeded"),
        Attribute::named("s9failed"),
        Attribute::named("s9timedOut"),
        Attribute::named("s9retried"),
    ],
];

/// One shard of a firmware rollout's counts: `ROLLOUT#{userId}#{rolloutId}#COUNTS#{shard}` /
/// `COUNTS`. Its counts are attributes `s{stage}{Counter}` (`s0offered`, `s2timedOut`), each
/// changed only by `ADD` in the transaction that moves a device, so a shard is never read
/// before it is written; created by its first `ADD`. Its own partition per shard: no stage's
/// traffic lands on one key, and nothing else of the owner's shares it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutCountsItem {
    /// Owner (read back from the key).
    #[serde(skip_serializing)]
    pub user_id: UserId,
    /// The rollout (read back from the key).
    #[serde(skip_serializing)]
    pub rollout_id: RolloutId,
    /// The shard (not read back; a read sums them all).
    #[serde(skip)]
    pub shard: u32,
}

impl RolloutCountsItem {
    /// The stored attribute of `counter` of `stage` (`None` past the last stage a plan has).
    pub fn attribute(stage: u32, counter: StageCounter) -> Option<Attribute> {
        let index = StageCounter::ALL.iter().position(|c| *c == counter)?;
        STAGE_COUNTER_ATTRIBUTES
            .get(stage as usize)
            .map(|row| row[index])
    }

    /// Adds the counts stored on one shard `item` to `into` (per stage).
    pub fn add_counts(item: &Item, into: &mut BTreeMap<u32, StageCounts>) {
        for (name, value) in item {
            let Some(rest) = name.strip_prefix('s') else {
                continue;
            };
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let (Ok(stage), Some(counter)) = (
                digits.parse::<u32>(),
                StageCounter::parse(&rest[digits.len()..]),
            ) else {
                continue;
            };
            let AttributeValue::N(n) = value else {
                continue;
            };
            let n: i64 = n.parse().unwrap_or(0);
            into.entry(stage).or_default().add(counter, n);
        }
    }
}

impl Entity for RolloutCountsItem {
    const ENTITY_TYPE: EntityType = EntityType::RolloutCounts;
    fn item_key(&self) -> ItemKey {
        ItemKey::RolloutCounts {
            user: self.user_id.clone(),
            rollout: self.rollout_id.clone(),
            shard: self.shard,
        }
    }
    const FIELDS_IN_KEY: bool = true;
}

/// Sort key of a counts shard.
pub const ROLLOUT_COUNTS_SK: &str = "COUNTS";

/// `ROLLOUT#{userId}#{rolloutId}#COUNTS#{shard}` / `COUNTS`.
pub fn primary_key(user: &UserId, rollout: &RolloutId, shard: &u32) -> PrimaryKey {
    PrimaryKey {
        pk: format!("ROLLOUT#{user}#{rollout}#COUNTS#{shard}"),
        sk: ROLLOUT_COUNTS_SK.to_string(),
    }
}

/// A counts shard's key, if `key` has its shape.
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ROLLOUT", user, rollout, "COUNTS", shard], ["COUNTS"]) => key.matched(|| {
            let shard: u32 = shard
                .parse()
                .ok()
                .filter(|s| *s < ROLLOUT_COUNT_SHARDS && shard.len() <= 2)
                .ok_or_else(|| ValidationError::new("key", "not a counts shard"))?;
            Ok(ItemKey::RolloutCounts {
                user: UserId::parse(*user)?,
                rollout: RolloutId::parse(*rollout)?,
                shard,
            })
        }),
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "rolloutCounts",
    pk: "ROLLOUT#${userId}#${rolloutId}#COUNTS#${shard}",
    sk: "COUNTS",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
