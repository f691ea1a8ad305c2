//! Table and index names, attribute names and key templates: the one place they are spelled.
//! `template.yaml` must agree with every name here (a test compares them).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::model::expression::Attribute;

/// One stored item (or key) as the SDK holds it: the one item type of the crate.
pub type Item = HashMap<String, AttributeValue>;

/// Partition key attribute of the base table.
pub const PK: Attribute = Attribute::named("PK");
/// Sort key attribute of the base table.
pub const SK: Attribute = Attribute::named("SK");
/// Partition key attribute of GSI1 (events by type, devices by status).
pub const GSI1PK: Attribute = Attribute::named("GSI1PK");
/// Sort key attribute of GSI1.
pub const GSI1SK: Attribute = Attribute::named("GSI1SK");
/// Partition key attribute of GSI2 (the directory: profiles and fleets).
pub const GSI2PK: Attribute = Attribute::named("GSI2PK");
/// Sort key attribute of GSI2.
pub const GSI2SK: Attribute = Attribute::named("GSI2SK");
/// Partition key attribute of GSI3 (alarms: an owner's, and open ones across owners).
pub const GSI3PK: Attribute = Attribute::named("GSI3PK");
/// Sort key attribute of GSI3.
pub const GSI3SK: Attribute = Attribute::named("GSI3SK");
/// TTL attribute (epoch seconds).
pub const TTL: Attribute = Attribute::named("ttl");
/// Attribute naming the kind of every item.
pub const ENTITY_TYPE: Attribute = Attribute::named("entityType");

/// GSI1: overloaded, sparse; searchable event types by day and shard, and devices' live
/// states by status shard.
pub const GSI1: &str = "GSI1";
/// GSI2: the directory, sparse; one entry per profile and per fleet (what the daily run
/// scans instead of the table).
pub const GSI2: &str = "GSI2";

/// GSI3: alarms, sparse; an owner's alarms (open first) by owner partition, open alarms across
/// owners by severity and shard, and devices' offline-check due times.
pub const GSI3: &str = "GSI3";

/// A global secondary index as the key design needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexSpec {
    /// Index name.
    pub name: &'static str,
    /// Partition key attribute.
    pub partition_key: Attribute,
    /// Sort key attribute.
    pub sort_key: Attribute,
    /// Non-key attributes projected (INCLUDE): exactly what the index's readers return
    /// (each one an entity declares: `entities::tests` checks).
    pub projected: &'static [Attribute],
}

/// Both global secondary indexes, as `template.yaml` must declare them.
pub const INDEXES: [IndexSpec; 3] = [
    IndexSpec {
        name: GSI1,
        partition_key: GSI1PK,
        sort_key: GSI1SK,
        projected: &[
            ENTITY_TYPE,
            Attribute::named("deviceId"),
            Attribute::named("userId"),
            Attribute::named("type"),
            Attribute::named("value"),
            Attribute::named("at"),
            Attribute::named("status"),
            Attribute::named("name"),
            Attribute::named("deviceType"),
            Attribute::named("deviceName"),
            TTL,
        ],
    },
    IndexSpec {
        name: GSI2,
        partition_key: GSI2PK,
        sort_key: GSI2SK,
        projected: &[
            ENTITY_TYPE,
            Attribute::named("userId"),
            Attribute::named("shards"),
            Attribute::named("devices"),
            Attribute::named("deletedAt"),
        ],
    },
    IndexSpec {
        name: GSI3,
        partition_key: GSI3PK,
        sort_key: GSI3SK,
        // An alarm as its lists show it: a page of alarms is one Query, no reads of items.
        projected: &[
            ENTITY_TYPE,
            Attribute::named("userId"),
            Attribute::named("deviceId"),
            Attribute::named("deviceName"),
            Attribute::named("source"),
            Attribute::named("ruleName"),
            Attribute::named("severity"),
            Attribute::named("state"),
            Attribute::named("raisedAt"),
            Attribute::named("clearedAt"),
            Attribute::named("acknowledgedAt"),
            Attribute::named("reading"),
            Attribute::named("clearReading"),
            Attribute::named("reminders"),
            TTL,
        ],
    },
];

/// Every attribute that is part of a key of the table or an index (all strings).
pub const KEY_ATTRIBUTES: [Attribute; 8] = [PK, SK, GSI1PK, GSI1SK, GSI2PK, GSI2SK, GSI3PK, GSI3SK];
