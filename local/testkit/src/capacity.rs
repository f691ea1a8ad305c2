//! DynamoDB's size and capacity-unit rules, applied to the real items of `shared`: how many
//! bytes an item counts as, what an index entry holds, and how bytes round to request units.
//! The key-distribution simulator and the cost model price items with these rules;
//! `local/perf/tests/it/simulator.rs` checks them against the consumed capacity DynamoDB Local reports.
//!
//! The rules (DynamoDB developer guide, "Item sizes and formats" and "Read/write capacity"):
//! - an attribute counts its name's UTF-8 bytes plus its value: a string its UTF-8 bytes, a
//!   number 1 byte per two significant digits plus 1, a boolean or null 1 byte, a list or map
//!   3 bytes plus 1 byte and the size of each element (a map element includes its name);
//! - a write costs 1 unit per started KB (1,024 bytes) of the item; an update costs by the
//!   larger of the item before and after;
//! - a read costs 1 unit per started 4 KB, half for eventually consistent reads; a Query sums
//!   the sizes of all items it reads before rounding;
//! - a global secondary index entry holds the table's key, the index key and the projected
//!   attributes; writing an item whose index key changes costs a delete and a put there;
//! - storage counts every item and every index entry with 100 bytes of overhead.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::model::expression::Attribute;
use shared::model::schema::{IndexSpec, PK, SK};

pub use shared::model::schema::Item;

/// Bytes of one write unit.
pub const WRITE_UNIT_BYTES: u64 = 1024;
/// Bytes of one read unit.
pub const READ_UNIT_BYTES: u64 = 4096;
/// Storage overhead DynamoDB adds to every item and every index entry.
pub const STORAGE_OVERHEAD_BYTES: u64 = 100;
/// Largest page a Query or Scan returns.
pub const PAGE_BYTES: u64 = 1024 * 1024;

/// Bytes of a stored number: 1 per two significant digits, plus 1.
fn number_size(text: &str) -> u64 {
    // DynamoDB stores a number as base-100 digit pairs aligned at the decimal point, leading
    // and trailing zero pairs dropped, plus one byte: 1,795,850,379,000 is the pairs
    // 1|79|58|50|37|90 (7 bytes), not "ten significant digits" (6).
    let text = text.trim_start_matches(['-', '+']);
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().unwrap_or(0)),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let leading = digits.len() - digits.trim_start_matches('0').len();
    let significant = digits.trim_start_matches('0').trim_end_matches('0');
    if significant.is_empty() {
        return 2;
    }
    // The place (power of ten) of the first and the last significant digit.
    let point = whole.len() as i64 + exponent - leading as i64;
    let high = point - 1;
    let low = point - significant.len() as i64;
    (high.div_euclid(2) - low.div_euclid(2) + 1) as u64 + 1
}

/// Bytes an attribute value counts for (without its name).
pub fn value_size(value: &AttributeValue) -> u64 {
    match value {
        AttributeValue::S(s) => s.len() as u64,
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len() as u64,
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(|s| s.len() as u64).sum(),
        AttributeValue::Ns(v) => v.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len() as u64).sum(),
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<u64>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + k.len() as u64 + value_size(v))
                .sum::<u64>()
        }
        _ => 0,
    }
}

/// Bytes an item counts for: every attribute's name and value.
pub fn item_size(item: &Item) -> u64 {
    item.iter()
        .map(|(name, value)| name.len() as u64 + value_size(value))
        .sum()
}

/// The entry `index` holds for `item`, or `None` when the item lacks the index's key
/// attributes (a sparse index skips it).
pub fn index_entry(item: &Item, index: &IndexSpec) -> Option<Item> {
    if !item.contains_key(index.partition_key.name()) || !item.contains_key(index.sort_key.name()) {
        return None;
    }
    let keep = [PK, SK, index.partition_key, index.sort_key];
    let named = |names: &[Attribute], name: &str| names.iter().any(|a| a.name() == name);
    Some(
        item.iter()
            .filter(|(name, _)| named(&keep, name) || named(index.projected, name))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Write units DynamoDB bills for changing one item from `before` to `after` (`None`: absent),
/// by its rules, not DynamoDB Local's: the table write plus every index entry it changes
/// ([`table_write_units_of_change`] + [`index_write_units_of_change`]). Transactions bill the
/// table part twice ([`transaction_write_units_of_change`]).
pub fn write_units_of_change(before: Option<&Item>, after: Option<&Item>) -> u64 {
    table_write_units_of_change(before, after) + index_write_units_of_change(before, after)
}

/// The table part of a change: the larger of the two images, rounded up to 1 KB (an
/// UpdateItem bills the larger of the item before and after; a delete bills the deleted item).
pub fn table_write_units_of_change(before: Option<&Item>, after: Option<&Item>) -> u64 {
    let size = |item: Option<&Item>| item.map_or(0, item_size);
    match (before, after) {
        (None, None) => 0,
        _ => write_units(size(before).max(size(after))),
    }
}

/// The index part of a change: every index whose entry changes bills on its own, each entry
/// rounded up to 1 KB: a put of the new entry, a delete of the old one, both when the entry's
/// key moves (a move is a delete and a put). An entry whose keys and projected attributes are
/// unchanged costs nothing.
pub fn index_write_units_of_change(before: Option<&Item>, after: Option<&Item>) -> u64 {
    shared::model::schema::INDEXES
        .iter()
        .map(|index| {
            let old = before.and_then(|i| index_entry(i, index));
            let new = after.and_then(|i| index_entry(i, index));
            let key = |e: &Item| {
                (
                    e.get(index.partition_key.name()).cloned(),
                    e.get(index.sort_key.name()).cloned(),
                )
            };
            match (old, new) {
                (None, None) => 0,
                (Some(old), None) => write_units(item_size(&old)),
                (None, Some(new)) => write_units(item_size(&new)),
                (Some(old), Some(new)) if key(&old) != key(&new) => {
                    write_units(item_size(&old)) + write_units(item_size(&new))
                }
                (Some(old), Some(new)) if old != new => write_units(item_size(&new)),
                _ => 0,
            }
        })
        .sum()
}

/// Write units of one item's change made inside a TransactWriteItems: the table write
/// [`TRANSACTION_FACTOR`] times, the index entries once.
pub fn transaction_write_units_of_change(before: Option<&Item>, after: Option<&Item>) -> u64 {
    TRANSACTION_FACTOR * table_write_units_of_change(before, after)
        + index_write_units_of_change(before, after)
}

/// Write units of a conditional write whose condition failed: DynamoDB bills it like a write
/// of the item as stored (at least 1 unit when the item is absent); no index entry changes.
pub fn failed_conditional_write_units(stored: Option<&Item>) -> u64 {
    write_units(stored.map_or(0, item_size))
}

/// A TransactWriteItems bills every item's write twice (DynamoDB's two-phase commit); the
/// index entries it changes are billed once. DynamoDB Local reports 2.0 for any transaction,
/// whatever it holds, so its figure is never used for one.
pub const TRANSACTION_FACTOR: u64 = 2;

/// Write units of writing `bytes` (at least 1).
pub fn write_units(bytes: u64) -> u64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1)
}

/// Read units of a strongly consistent read of `bytes` (GetItem with `ConsistentRead`).
pub fn strong_read_units(bytes: u64) -> f64 {
    bytes.div_ceil(READ_UNIT_BYTES).max(1) as f64
}

/// Read units of an eventually consistent GetItem of `bytes`: half a strong read's.
pub fn eventual_read_units(bytes: u64) -> f64 {
    strong_read_units(bytes) * 0.5
}

/// Read units of an eventually consistent Query or Scan that reads `bytes` in total: each
/// 1 MB page rounds up to 4 KB on its own, and an empty read still costs half a unit.
pub fn query_read_units(bytes: u64) -> f64 {
    let full_pages = bytes / PAGE_BYTES;
    let rest = bytes % PAGE_BYTES;
    let per_full_page = PAGE_BYTES.div_ceil(READ_UNIT_BYTES);
    let units = full_pages * per_full_page + rest.div_ceil(READ_UNIT_BYTES);
    (units.max(1) as f64) * 0.5
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_count_base_100_pairs_aligned_at_the_point() {
        use super::number_size;
        assert_eq!(number_size("1795850379454"), 8);
        assert_eq!(number_size("1795850379000"), 7);
        assert_eq!(number_size("100"), 2);
        assert_eq!(number_size("12.5"), 3);
        assert_eq!(number_size("-0.05"), 2);
        assert_eq!(number_size("0"), 2);
        assert_eq!(number_size("1.5e3"), 2);
    }
    use super::*;
    use shared::model::schema::INDEXES;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
    }

    #[test]
    fn sizes_follow_the_documented_rules() {
        // Name + value: "PK" (2) + "USER#u" (6).
        let item: Item = [("PK".to_string(), s("USER#u"))].into();
        assert_eq!(item_size(&item), 8);
        // Numbers: 1 byte per two significant digits, plus 1; zeros at the ends trimmed.
        assert_eq!(number_size("21.5"), 3);
        assert_eq!(number_size("1000"), 2);
        assert_eq!(number_size("0.05"), 2);
        assert_eq!(number_size("1795168801"), 6);
        assert_eq!(number_size("1795168800"), 5);
        // A map: 3 + per element 1 + name + value.
        let map = AttributeValue::M([("at".to_string(), s("x"))].into());
        assert_eq!(value_size(&map), 3 + 1 + 2 + 1);
        let list = AttributeValue::L(vec![AttributeValue::Bool(true), s("ab")]);
        assert_eq!(value_size(&list), 3 + (1 + 1) + (1 + 2));
    }

    #[test]
    fn units_round_up_per_kilobyte_and_per_page() {
        assert_eq!(write_units(1), 1);
        assert_eq!(write_units(1024), 1);
        assert_eq!(write_units(1025), 2);
        assert_eq!(strong_read_units(4097), 2.0);
        assert_eq!(query_read_units(0), 0.5);
        assert_eq!(query_read_units(12 * 1024), 1.5);
        assert_eq!(query_read_units(12 * 1024 + 1), 2.0);
        // Two full pages and a 1-byte remainder: 256 + 256 + 1 units, halved.
        assert_eq!(query_read_units(2 * PAGE_BYTES + 1), 256.5);
    }

    #[test]
    fn index_entries_keep_keys_and_projected_attributes_only() {
        let gsi2 = &INDEXES[1];
        let item: Item = [
            ("PK", "p"),
            ("SK", "s"),
            ("GSI2PK", "g"),
            ("GSI2SK", "h"),
            ("deviceName", "n"),
            ("userId", "u"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), s(v)))
        .collect();
        let entry = index_entry(&item, gsi2).unwrap();
        assert!(entry.contains_key("userId"));
        assert!(
            !entry.contains_key("deviceName"),
            "the directory does not project deviceName"
        );
        let mut sparse = item.clone();
        sparse.remove("GSI2SK");
        assert!(index_entry(&sparse, gsi2).is_none());
    }
}
