//! A daily run's scan-segment checkpoint: `ANALYTICS#{day}#{segment}` / `CHECKPOINT`. Its
//! struct is the daily run's own (`ops::analytics`, private); its keys are here.

use crate::model::entities::ItemKey;
use crate::model::error::ValidationError;
use crate::model::keys::{KeyParts, KeyTemplate, PrimaryKey};
use crate::model::timestamp::Day;

/// `ANALYTICS#{day}#{segment}`: one scan segment's checkpoint of the daily run for `day`. Each
/// segment writes its own key after every page, so segments never share a partition.
pub fn checkpoint_pk(day: &Day, segment: u32) -> String {
    format!("ANALYTICS#{day}#{segment:04}")
}

/// Sort key of a checkpoint item.
pub const CHECKPOINT_SK: &str = "CHECKPOINT";

/// `ANALYTICS#{day}#{segment}` / `CHECKPOINT`.
pub fn primary_key(day: &Day, segment: &u32) -> PrimaryKey {
    PrimaryKey {
        pk: checkpoint_pk(day, *segment),
        sk: CHECKPOINT_SK.to_string(),
    }
}

/// A checkpoint's key, if `key` has its shape (a segment of exactly four digits).
pub fn parse_key(key: &KeyParts) -> Option<Result<ItemKey, ValidationError>> {
    match (key.pk_parts.as_slice(), key.sk_parts.as_slice()) {
        (["ANALYTICS", day, segment], ["CHECKPOINT"])
            if segment.len() == 4 && segment.bytes().all(|b| b.is_ascii_digit()) =>
        {
            key.matched(|| {
                Ok(ItemKey::Checkpoint {
                    day: Day::parse_field("day", day)?,
                    segment: segment.parse().map_err(|_| key.bad())?,
                })
            })
        }
        _ => None,
    }
}

/// Its key templates, for the generated docs (`model::entities::tests` checks them against
/// the builders).
pub const KEY_TEMPLATE: KeyTemplate = KeyTemplate {
    entity_type: "checkpoint",
    pk: "ANALYTICS#${day}#${segment}",
    sk: "CHECKPOINT",
    gsi1: None,
    gsi2: None,
    gsi3: None,
};
