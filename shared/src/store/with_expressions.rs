//! Puts a request's typed [`Expressions`] on an SDK request builder: each builder takes the
//! parts it has (an UpdateItem its update and condition, a Query its key condition, filter
//! and projection), and the placeholders' names and values.

use aws_sdk_dynamodb::operation::{
    delete_item::builders::DeleteItemFluentBuilder, put_item::builders::PutItemFluentBuilder,
    query::builders::QueryFluentBuilder, scan::builders::ScanFluentBuilder,
    update_item::builders::UpdateItemFluentBuilder,
};
use aws_sdk_dynamodb::types::builders::{
    ConditionCheckBuilder, DeleteBuilder, PutBuilder, UpdateBuilder,
};

use crate::model::expression::Expressions;

/// A request builder that takes [`Expressions`].
pub trait WithExpressions: Sized {
    /// The builder with `expressions` set (the parts this request has; a part it does not
    /// have is a programming error, caught in debug builds).
    fn expressions(self, expressions: Expressions) -> Self;
}

macro_rules! with_expressions {
    ($builder:ty { $($part:ident => $setter:ident),* }) => {
        impl WithExpressions for $builder {
            fn expressions(self, e: Expressions) -> Self {
                let Expressions { update, condition, key_condition, projection, names, values } = e;
                let mut parts = [
                    ("update", update),
                    ("condition", condition),
                    ("key_condition", key_condition),
                    ("projection", projection),
                ];
                let take = |parts: &mut [(&str, Option<String>); 4], name: &str| {
                    parts.iter_mut().find(|(n, _)| *n == name).and_then(|(_, p)| p.take())
                };
                let builder = self
                    $(.$setter(take(&mut parts, stringify!($part))))*
                    .set_expression_attribute_names(names)
                    .set_expression_attribute_values(values);
                debug_assert!(
                    parts.iter().all(|(_, p)| p.is_none()),
                    "{} takes no {:?}",
                    stringify!($builder),
                    parts.iter().filter(|(_, p)| p.is_some()).map(|(n, _)| n).collect::<Vec<_>>()
                );
                builder
            }
        }
    };
}

with_expressions!(UpdateItemFluentBuilder { update => set_update_expression, condition => set_condition_expression });
with_expressions!(UpdateBuilder { update => set_update_expression, condition => set_condition_expression });
with_expressions!(PutItemFluentBuilder { condition => set_condition_expression });
with_expressions!(PutBuilder { condition => set_condition_expression });
with_expressions!(DeleteItemFluentBuilder { condition => set_condition_expression });
with_expressions!(DeleteBuilder { condition => set_condition_expression });
with_expressions!(ConditionCheckBuilder { condition => set_condition_expression });
with_expressions!(QueryFluentBuilder {
    key_condition => set_key_condition_expression,
    condition => set_filter_expression,
    projection => set_projection_expression
});
with_expressions!(ScanFluentBuilder { condition => set_filter_expression, projection => set_projection_expression });
