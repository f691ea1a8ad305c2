//! Revoking a member's invitations when they can no longer make them (removed, or lowered
//! below admin). Accepting checks the maker's role as well
//! ([`crate::ops::orgs::invitations::accept_invitation`]), so a revocation cut short admits
//! nobody either.

use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};

use crate::model::entities::invitation::{InvitationItem, INVITATION_PREFIX};
use crate::model::entities::organization::org_pk;
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions};
use crate::model::ids::{OrgId, UserId};
use crate::model::schema::{PK, SK};
use crate::store::dynamo::{
    key_prefix, query, string_value, throttled, write_all, BATCH_WRITE_SIZE,
};
use crate::store::retry::Retry;
use crate::store::table::FleetTable;

/// Revokes every invitation of `org` that `maker` made: when they are removed, or lowered to
/// a role that invites nobody. One Query (every page; the open ones are capped, so one) and
/// a BatchWriteItem per 25 found. Accepting checks the maker's role anyway, so a revocation
/// cut short admits nobody either.
pub async fn revoke_made_by(
    table: &FleetTable,
    org: &OrgId,
    maker: &UserId,
) -> Result<usize, FleetError> {
    let mut keys = Vec::new();
    let mut start = None;
    loop {
        let (items, next) = query(
            key_prefix(
                table,
                org_pk(org),
                INVITATION_PREFIX,
                Expressions::builder()
                    .condition(Condition::equals(
                        InvitationItem::CREATED_BY,
                        string_value(maker.as_str()),
                    ))
                    .projection(&[PK, SK]),
            )
            .set_exclusive_start_key(start),
        )
        .await?;
        keys.extend(items);
        match next {
            Some(next) => start = Some(next),
            None => break,
        }
    }
    for chunk in keys.chunks(BATCH_WRITE_SIZE) {
        let mut requests = Vec::with_capacity(chunk.len());
        for key in chunk {
            let delete = DeleteRequest::builder()
                .set_key(Some(key.clone()))
                .build()
                .map_err(FleetError::internal)?;
            requests.push(WriteRequest::builder().delete_request(delete).build());
        }
        if !write_all(table, requests, &mut Retry::attempts(8))
            .await?
            .is_empty()
        {
            return Err(throttled());
        }
    }
    Ok(keys.len())
}
