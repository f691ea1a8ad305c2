//! What a request's writes cost by DynamoDB's rules, priced from the real items it changed.
//!
//! DynamoDB Local reports 2.0 write units for any TransactWriteItems and does not bill index
//! entries the way DynamoDB does, so its consumed capacity is never the figure we publish for a
//! write. Instead: take the table's items before and after the request ([`snapshot`]), pair
//! them by primary key ([`changes`]), and price each change with the rules of
//! [`crate::capacity`] ([`ItemChange::write_units`]). Tests, `make docs` and the cost model use
//! these functions; nothing else re-derives write units.

use std::collections::{BTreeMap, BTreeSet};

use crate::reference::cases::CASES;
use crate::reference::{Measurement, Tokens};
use shared::store::metrics::RequestMeter;
use shared::{FleetError, FleetTable};

use crate::capacity::{
    failed_conditional_write_units, table_write_units_of_change, transaction_write_units_of_change,
    write_units_of_change, Item,
};

/// Every item of a table, by `(PK, SK)`.
pub type Snapshot = BTreeMap<(String, String), Item>;

/// How a change was written, which decides what it bills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// PutItem, UpdateItem, DeleteItem or one BatchWriteItem entry.
    Single,
    /// One item of a TransactWriteItems: its table write bills twice.
    Transaction,
}

/// One item's change between two snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemChange {
    /// The item's `(PK, SK)`.
    pub key: (String, String),
    /// The item before (`None`: it did not exist).
    pub before: Option<Item>,
    /// The item after (`None`: it was deleted).
    pub after: Option<Item>,
}

impl ItemChange {
    /// Write units DynamoDB bills for this change written as `kind`.
    pub fn write_units(&self, kind: WriteKind) -> u64 {
        let (before, after) = (self.before.as_ref(), self.after.as_ref());
        match kind {
            WriteKind::Single => write_units_of_change(before, after),
            WriteKind::Transaction => transaction_write_units_of_change(before, after),
        }
    }

    /// Write units of a conditional write on this item that failed before the change: billed
    /// like a write of the stored item.
    pub fn failed_write_units(&self) -> u64 {
        failed_conditional_write_units(self.before.as_ref())
    }
}

fn key_text(item: &Item, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// Every item of `table`, read with a consistent Scan (for tests and `make docs` on DynamoDB
/// Local; never on a production table).
pub async fn snapshot(table: &FleetTable) -> Result<Snapshot, FleetError> {
    let mut items = Snapshot::new();
    let mut start: Option<Item> = None;
    loop {
        let out = table
            .client
            .scan()
            .table_name(table.name())
            .consistent_read(true)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| FleetError::internal(format!("snapshot scan: {e}")))?;
        for item in out.items() {
            let key = (
                key_text(item, shared::model::schema::PK.name()),
                key_text(item, shared::model::schema::SK.name()),
            );
            items.insert(key, item.clone());
        }
        match out.last_evaluated_key {
            Some(key) => start = Some(key),
            None => return Ok(items),
        }
    }
}

/// The items that differ between `before` and `after`, in key order.
pub fn changes(before: &Snapshot, after: &Snapshot) -> Vec<ItemChange> {
    let keys: BTreeSet<&(String, String)> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| ItemChange {
            key: k.clone(),
            before: before.get(k).cloned(),
            after: after.get(k).cloned(),
        })
        .collect()
}

/// Write units of all `changes`, each written as `kind`.
pub fn write_units(changes: &[ItemChange], kind: WriteKind) -> u64 {
    changes.iter().map(|c| c.write_units(kind)).sum()
}

/// Operations that write one item each and bill as single writes.
const SINGLE_WRITES: [&str; 3] = ["PutItem", "UpdateItem", "DeleteItem"];

/// Write units DynamoDB bills for a case that issued `used` and changed `changed`.
///
/// A case without a TransactWriteItems prices every change as a single write. A case with
/// one prices every changed item but its events (BatchWriteItem's) as a transaction item; its single-item writes (AP-06's update
/// before the link sync, AP-08's mark) wrote an item the transaction then rewrote or deleted,
/// so the snapshots do not show them on their own: each bills as an update of the largest
/// item the case changed (1 unit for items under 1 KB, as all of ours are).
///
/// Known limit: an item a write rewrote with identical contents (a re-put tag link, a
/// registration whose name did not change, a replayed event) does not show in the snapshots
/// and is not priced, though DynamoDB bills it; the figure is a floor for such cases.
pub fn case_write_units(
    used: &shared::store::metrics::MeterSnapshot,
    changed: &[ItemChange],
) -> u64 {
    if used.count("TransactWriteItems") == 0 {
        return write_units(changed, WriteKind::Single);
    }
    let singles: u64 = SINGLE_WRITES
        .iter()
        .map(|op| u64::from(used.count(op)))
        .sum();
    let largest = changed
        .iter()
        .map(|c| table_write_units_of_change(c.before.as_ref(), c.after.as_ref()))
        .max()
        .unwrap_or(1);
    // Events are written by BatchWriteItem, never in a transaction: an ingest batch whose
    // state update flushed summaries (a transaction) still bills its events as single writes.
    let (events, others): (Vec<ItemChange>, Vec<ItemChange>) =
        changed.iter().cloned().partition(|c| {
            used.count("BatchWriteItem") > 0
                && c.after
                    .as_ref()
                    .or(c.before.as_ref())
                    .and_then(shared::model::entities::EntityType::of)
                    == Some(shared::model::entities::EntityType::Event)
        });
    write_units(&others, WriteKind::Transaction)
        + write_units(&events, WriteKind::Single)
        + singles * largest
}

/// Every pattern case on the reference dataset, as
/// [`measure_patterns`](crate::reference::measure_patterns) runs them, with each
/// case's `write_units` replaced by what DynamoDB bills ([`case_write_units`] of the items it
/// changed) instead of DynamoDB Local's report (1 per item of a transaction, no index entry
/// counted). Read units stay as DynamoDB Local reports them.
pub async fn measure_priced(
    table: &FleetTable,
    tokens: &Tokens,
) -> Result<Vec<Measurement>, FleetError> {
    let mut measurements = Vec::with_capacity(CASES.len());
    for case in CASES {
        let before = snapshot(table).await?;
        let meter = RequestMeter::new();
        meter.clone().scope((case.run)(table, tokens)).await?;
        let mut used = meter.snapshot();
        let changed = changes(&before, &snapshot(table).await?);
        used.write_units = case_write_units(&used, &changed) as f64;
        measurements.push(Measurement {
            id: case.id,
            used,
            scale: (case.scale)(&table.config.shards),
            workload: case.workload,
        });
    }
    Ok(measurements)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn item(pk: &str, sk: &str, filler: usize) -> Item {
        [
            ("PK".to_string(), AttributeValue::S(pk.into())),
            ("SK".to_string(), AttributeValue::S(sk.into())),
            ("note".to_string(), AttributeValue::S("x".repeat(filler))),
        ]
        .into()
    }

    #[test]
    fn a_transaction_bills_each_item_twice_per_started_kilobyte() {
        let small = item("A", "1", 10);
        let big = item("B", "1", 1500); // 2 KB started
        let before = Snapshot::new();
        let after: Snapshot = [
            (("A".into(), "1".into()), small),
            (("B".into(), "1".into()), big),
        ]
        .into();
        let changed = changes(&before, &after);
        assert_eq!(changed.len(), 2);
        assert_eq!(write_units(&changed, WriteKind::Single), 1 + 2);
        assert_eq!(write_units(&changed, WriteKind::Transaction), 2 + 4);
        // Unchanged items cost nothing; a delete bills the deleted item.
        assert!(changes(&after, &after).is_empty());
        let deleted = changes(&after, &before);
        assert_eq!(write_units(&deleted, WriteKind::Single), 3);
        // A failed conditional write on the big item bills its size.
        assert_eq!(deleted[1].failed_write_units(), 2);
    }
}
