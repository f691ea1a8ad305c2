//! Update, condition, key-condition and projection expressions built from typed attribute
//! names ([`Attribute`], declared once beside the entity that owns them in
//! [`crate::model::entities`]). Every name goes through an `#n` placeholder and every value
//! through a `:v` placeholder, so no expression spells an attribute name, reserved words
//! (`status`, `name`, `type`, `ttl`) need no care, and a renamed field cannot leave an
//! expression behind. No I/O: [`crate::store::with_expressions`] applies the result to a request.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// A stored attribute's name. Constants of this type are the one spelling of each name.
/// Serialized as its name (the generated docs list index projections by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Attribute(&'static str);

impl Attribute {
    /// The attribute called `name` (only for the declarations beside the entities).
    pub const fn named(name: &'static str) -> Self {
        Self(name)
    }

    /// Its stored name.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Attribute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A comparison in a [`Condition`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Comparison {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Comparison {
    fn symbol(self) -> &'static str {
        match self {
            Comparison::Equal => "=",
            Comparison::NotEqual => "<>",
            Comparison::Less => "<",
            Comparison::LessOrEqual => "<=",
            Comparison::Greater => ">",
            Comparison::GreaterOrEqual => ">=",
        }
    }
}

/// A condition (or filter, or key condition) on an item's attributes.
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    /// `attribute_exists(a)`.
    Exists(Attribute),
    /// `attribute_not_exists(a)`.
    Absent(Attribute),
    /// `attribute_exists(a.#key)`: the map `a` has an entry `key`.
    HasEntry(Attribute, String),
    /// `a <op> :value`.
    Compare(Attribute, ComparisonOp, AttributeValue),
    /// `begins_with(a, :prefix)`.
    BeginsWith(Attribute, AttributeValue),
    /// `a BETWEEN :low AND :high`.
    Between(Attribute, AttributeValue, AttributeValue),
    /// Both.
    And(Box<Condition>, Box<Condition>),
    /// Either.
    Or(Box<Condition>, Box<Condition>),
}

/// The comparison operator of [`Condition::Compare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ComparisonOp(Comparison);

impl Condition {
    /// `attribute_exists(attribute)`.
    pub fn exists(attribute: Attribute) -> Self {
        Condition::Exists(attribute)
    }
    /// `attribute_not_exists(attribute)`.
    pub fn absent(attribute: Attribute) -> Self {
        Condition::Absent(attribute)
    }
    /// `attribute_exists(map.key)`: the map attribute `map` has an entry named `key` (a
    /// name chosen at run time, such as a rule's id, sent through its own placeholder).
    pub fn has_entry(map: Attribute, key: impl Into<String>) -> Self {
        Condition::HasEntry(map, key.into())
    }
    /// `attribute = value`.
    pub fn equals(attribute: Attribute, value: AttributeValue) -> Self {
        Self::compare(attribute, Comparison::Equal, value)
    }
    /// `attribute <> value`.
    pub fn differs(attribute: Attribute, value: AttributeValue) -> Self {
        Self::compare(attribute, Comparison::NotEqual, value)
    }
    /// `attribute < value`.
    pub fn below(attribute: Attribute, value: AttributeValue) -> Self {
        Self::compare(attribute, Comparison::Less, value)
    }
    /// `attribute <= value`.
    pub fn at_most(attribute: Attribute, value: AttributeValue) -> Self {
        Self::compare(attribute, Comparison::LessOrEqual, value)
    }
    /// `attribute > value`.
    pub fn above(attribute: Attribute, value: AttributeValue) -> Self {
        Self::compare(attribute, Comparison::Greater, value)
    }
    /// `attribute >= value`.
    pub fn at_least(attribute: Attribute, value: AttributeValue) -> Self {
        Self::compare(attribute, Comparison::GreaterOrEqual, value)
    }
    /// `begins_with(attribute, prefix)`.
    pub fn begins_with(attribute: Attribute, prefix: AttributeValue) -> Self {
        Condition::BeginsWith(attribute, prefix)
    }
    /// `attribute BETWEEN low AND high`.
    pub fn between(attribute: Attribute, low: AttributeValue, high: AttributeValue) -> Self {
        Condition::Between(attribute, low, high)
    }
    /// This and `other`.
    pub fn and(self, other: Condition) -> Self {
        Condition::And(Box::new(self), Box::new(other))
    }
    /// This or `other`.
    pub fn or(self, other: Condition) -> Self {
        Condition::Or(Box::new(self), Box::new(other))
    }

    fn compare(attribute: Attribute, comparison: Comparison, value: AttributeValue) -> Self {
        Condition::Compare(attribute, ComparisonOp(comparison), value)
    }

    fn render(&self, into: &mut Placeholders) -> String {
        match self {
            Condition::Exists(a) => format!("attribute_exists({})", into.name(*a)),
            Condition::Absent(a) => format!("attribute_not_exists({})", into.name(*a)),
            Condition::HasEntry(a, key) => {
                let map = into.name(*a);
                format!("attribute_exists({map}.{})", into.entry_name(key))
            }
            Condition::Compare(a, op, value) => {
                let name = into.name(*a);
                format!("{name} {} {}", op.0.symbol(), into.value(value.clone()))
            }
            Condition::BeginsWith(a, prefix) => {
                let name = into.name(*a);
                format!("begins_with({name}, {})", into.value(prefix.clone()))
            }
            Condition::Between(a, low, high) => {
                let name = into.name(*a);
                let low = into.value(low.clone());
                format!("{name} BETWEEN {low} AND {}", into.value(high.clone()))
            }
            // AND binds tighter than OR: an OR is the only part that needs parentheses (a key
            // condition, always a plain AND, takes none).
            Condition::And(left, right) => {
                format!("{} AND {}", left.render(into), right.render(into))
            }
            Condition::Or(left, right) => {
                format!("({} OR {})", left.render(into), right.render(into))
            }
        }
    }
}

/// What an update sets an attribute to.
#[derive(Clone, Debug, PartialEq)]
enum NewValue {
    Value(AttributeValue),
    /// The value, unless the attribute has one already.
    IfAbsent(AttributeValue),
    /// Another attribute's value.
    CopyOf(Attribute),
    /// The attribute's own value plus a number.
    Plus(AttributeValue),
    /// The attribute's own value, or a start where it has none, plus a number.
    StartPlus(AttributeValue, AttributeValue),
}

/// An update: SET, ADD and REMOVE clauses over typed attributes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    sets: Vec<(Attribute, NewValue)>,
    adds: Vec<(Attribute, AttributeValue)>,
    removes: Vec<Attribute>,
}

impl Update {
    /// An update that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// `SET attribute = value`.
    pub fn set(mut self, attribute: Attribute, value: AttributeValue) -> Self {
        self.sets.push((attribute, NewValue::Value(value)));
        self
    }
    /// `SET attribute = if_not_exists(attribute, value)`: keeps a value already there.
    pub fn set_if_absent(mut self, attribute: Attribute, value: AttributeValue) -> Self {
        self.sets.push((attribute, NewValue::IfAbsent(value)));
        self
    }
    /// `SET attribute = source`: the item's own `source` value.
    pub fn copy(mut self, attribute: Attribute, source: Attribute) -> Self {
        self.sets.push((attribute, NewValue::CopyOf(source)));
        self
    }
    /// `SET attribute = attribute + amount`.
    pub fn increment(mut self, attribute: Attribute, amount: AttributeValue) -> Self {
        self.sets.push((attribute, NewValue::Plus(amount)));
        self
    }
    /// `SET attribute = if_not_exists(attribute, start) + amount`: a count that starts at
    /// `start` where the item has none yet.
    pub fn increment_from(
        mut self,
        attribute: Attribute,
        start: AttributeValue,
        amount: AttributeValue,
    ) -> Self {
        self.sets
            .push((attribute, NewValue::StartPlus(start, amount)));
        self
    }
    /// `ADD attribute amount` (creates the number at `amount`).
    pub fn add(mut self, attribute: Attribute, amount: AttributeValue) -> Self {
        self.adds.push((attribute, amount));
        self
    }
    /// `REMOVE attribute`.
    pub fn remove(mut self, attribute: Attribute) -> Self {
        self.removes.push(attribute);
        self
    }
    /// Sets every attribute of `attributes` (index keys an entity derived, say).
    pub fn set_all(
        self,
        attributes: impl IntoIterator<Item = (Attribute, AttributeValue)>,
    ) -> Self {
        attributes
            .into_iter()
            .fold(self, |update, (attribute, value)| {
                update.set(attribute, value)
            })
    }

    fn render(&self, into: &mut Placeholders) -> String {
        let mut clauses = Vec::new();
        if !self.sets.is_empty() {
            let sets: Vec<String> = self
                .sets
                .iter()
                .map(|(a, value)| {
                    let name = into.name(*a);
                    let right = match value {
                        NewValue::Value(v) => into.value(v.clone()),
                        NewValue::IfAbsent(v) => {
                            format!("if_not_exists({name}, {})", into.value(v.clone()))
                        }
                        NewValue::CopyOf(source) => into.name(*source),
                        NewValue::Plus(v) => format!("{name} + {}", into.value(v.clone())),
                        NewValue::StartPlus(start, v) => {
                            let start = into.value(start.clone());
                            format!("if_not_exists({name}, {start}) + {}", into.value(v.clone()))
                        }
                    };
                    format!("{name} = {right}")
                })
                .collect();
            clauses.push(format!("SET {}", sets.join(", ")));
        }
        if !self.adds.is_empty() {
            let adds: Vec<String> = self
                .adds
                .iter()
                .map(|(a, v)| format!("{} {}", into.name(*a), into.value(v.clone())))
                .collect();
            clauses.push(format!("ADD {}", adds.join(", ")));
        }
        if !self.removes.is_empty() {
            let removes: Vec<String> = self.removes.iter().map(|a| into.name(*a)).collect();
            clauses.push(format!("REMOVE {}", removes.join(", ")));
        }
        clauses.join(" ")
    }
}

/// The placeholders of one request: each attribute named once, each value once per use.
#[derive(Default)]
struct Placeholders {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Placeholders {
    fn name(&mut self, attribute: Attribute) -> String {
        if let Some((placeholder, _)) = self.names.iter().find(|(_, n)| *n == attribute.0) {
            return placeholder.clone();
        }
        let placeholder = format!("#n{}", self.names.len());
        self.names
            .insert(placeholder.clone(), attribute.0.to_string());
        placeholder
    }

    /// A placeholder for a map entry's name chosen at run time (each name once).
    fn entry_name(&mut self, key: &str) -> String {
        if let Some((placeholder, _)) = self.names.iter().find(|(_, n)| *n == key) {
            return placeholder.clone();
        }
        let placeholder = format!("#n{}", self.names.len());
        self.names.insert(placeholder.clone(), key.to_string());
        placeholder
    }

    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }
}

/// Every expression of one request, rendered with shared placeholders: what
/// [`crate::store::with_expressions`] puts on an SDK request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expressions {
    /// `UpdateExpression`.
    pub update: Option<String>,
    /// `ConditionExpression` (writes) or `FilterExpression` (reads).
    pub condition: Option<String>,
    /// `KeyConditionExpression` (Query).
    pub key_condition: Option<String>,
    /// `ProjectionExpression`.
    pub projection: Option<String>,
    /// `ExpressionAttributeNames` (`None` when empty: DynamoDB refuses an empty map).
    pub names: Option<HashMap<String, String>>,
    /// `ExpressionAttributeValues` (`None` when empty).
    pub values: Option<HashMap<String, AttributeValue>>,
}

/// Builds one request's [`Expressions`].
#[derive(Clone, Debug, Default)]
pub struct ExpressionsBuilder {
    update: Option<Update>,
    condition: Option<Condition>,
    key_condition: Option<Condition>,
    projection: Vec<Attribute>,
}

impl Expressions {
    /// A request's expressions, to be given parts.
    pub fn builder() -> ExpressionsBuilder {
        ExpressionsBuilder::default()
    }
    /// A write's update under `condition`.
    pub fn write(update: Update, condition: Option<Condition>) -> Self {
        let mut b = Self::builder().update(update);
        b.condition = condition;
        b.build()
    }
    /// A write's condition alone (Put, Delete, ConditionCheck).
    pub fn condition(condition: Condition) -> Self {
        Self::builder().condition(condition).build()
    }
}

impl ExpressionsBuilder {
    /// The update.
    pub fn update(mut self, update: Update) -> Self {
        self.update = Some(update);
        self
    }
    /// The condition of a write, or the filter of a read.
    pub fn condition(mut self, condition: Condition) -> Self {
        self.condition = Some(condition);
        self
    }
    /// The key condition of a Query.
    pub fn key_condition(mut self, condition: Condition) -> Self {
        self.key_condition = Some(condition);
        self
    }
    /// The attributes a read returns.
    pub fn projection(mut self, attributes: &[Attribute]) -> Self {
        self.projection = attributes.to_vec();
        self
    }
    /// The rendered expressions.
    pub fn build(self) -> Expressions {
        let mut into = Placeholders::default();
        let update = self.update.map(|u| u.render(&mut into));
        let condition = self.condition.map(|c| c.render(&mut into));
        let key_condition = self.key_condition.map(|c| c.render(&mut into));
        let projection = (!self.projection.is_empty()).then(|| {
            let names: Vec<String> = self.projection.iter().map(|a| into.name(*a)).collect();
            names.join(", ")
        });
        Expressions {
            update,
            condition,
            key_condition,
            projection,
            names: (!into.names.is_empty()).then_some(into.names),
            values: (!into.values.is_empty()).then_some(into.values),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: Attribute = Attribute::named("status");
    const VERSION: Attribute = Attribute::named("version");
    const TOKEN: Attribute = Attribute::named("tokenSha256");
    const PREVIOUS: Attribute = Attribute::named("previousTokenSha256");

    fn n(v: i64) -> AttributeValue {
        AttributeValue::N(v.to_string())
    }

    #[test]
    fn every_name_and_value_goes_through_a_placeholder() {
        let e = Expressions::write(
            Update::new()
                .set(STATUS, AttributeValue::S("active".into()))
                .increment(VERSION, n(1))
                .copy(PREVIOUS, TOKEN)
                .add(Attribute::named("devices"), n(-1))
                .remove(Attribute::named("revokedAt")),
            Some(Condition::exists(VERSION).and(Condition::equals(VERSION, n(3)))),
        );
        assert_eq!(
            e.update.as_deref(),
            Some("SET #n0 = :v0, #n1 = #n1 + :v1, #n2 = #n3 ADD #n4 :v2 REMOVE #n5")
        );
        assert_eq!(
            e.condition.as_deref(),
            Some("attribute_exists(#n1) AND #n1 = :v3")
        );
        let names = e.names.unwrap();
        assert_eq!(names.len(), 6, "one placeholder per attribute: {names:?}");
        assert_eq!(names["#n0"], "status");
        assert_eq!(names["#n3"], "tokenSha256");
        assert_eq!(e.values.unwrap()[":v3"], n(3));
    }

    #[test]
    fn a_bare_condition_has_no_values_map() {
        let e = Expressions::condition(Condition::absent(STATUS));
        assert_eq!(e.condition.as_deref(), Some("attribute_not_exists(#n0)"));
        assert!(e.values.is_none(), "DynamoDB refuses an empty values map");
        assert!(e.update.is_none());
        let read = Expressions::builder()
            .key_condition(Condition::equals(STATUS, n(1)).and(Condition::begins_with(
                VERSION,
                AttributeValue::S("D".into()),
            )))
            .projection(&[STATUS, TOKEN])
            .build();
        assert_eq!(
            read.key_condition.as_deref(),
            Some("#n0 = :v0 AND begins_with(#n1, :v1)")
        );
        assert_eq!(read.projection.as_deref(), Some("#n0, #n2"));
        let either = Expressions::condition(
            Condition::absent(STATUS)
                .or(Condition::equals(STATUS, n(1)))
                .and(Condition::below(VERSION, n(2))),
        );
        assert_eq!(
            either.condition.as_deref(),
            Some("(attribute_not_exists(#n0) OR #n0 = :v0) AND #n1 < :v1")
        );
    }

    #[test]
    fn a_map_entry_and_a_count_from_a_start_go_through_placeholders() {
        let rules = Attribute::named("rules");
        let e = Expressions::write(
            Update::new().increment_from(VERSION, n(4), n(1)),
            Some(Condition::has_entry(rules, "r1.a").and(Condition::has_entry(rules, "r2"))),
        );
        assert_eq!(
            e.update.as_deref(),
            Some("SET #n0 = if_not_exists(#n0, :v0) + :v1")
        );
        assert_eq!(
            e.condition.as_deref(),
            Some("attribute_exists(#n1.#n2) AND attribute_exists(#n1.#n3)")
        );
        let names = e.names.unwrap();
        assert_eq!(
            names["#n2"], "r1.a",
            "a run-time name is never spelled in the expression"
        );
        assert_eq!(names["#n3"], "r2");
    }
}
