//! A device's credential lifecycle (AP-17, AP-18): the owner rotates a device's token (the old
//! one keeps working for an overlap, so devices can be re-provisioned without a gap) or revokes
//! it outright (a leaked token stops working). The device item and its events stay: only the
//! registration (`DEVICE#{deviceId}` / `REGISTRATION`), which ingestion authenticates
//! against, changes, in one conditional UpdateItem that also proves the caller owns it.
//!
//! Ingestion caches registrations for `REGISTRATION_CACHE_SECONDS` (30 s by default): a
//! revoked token, and an old token past its overlap, are refused within that window.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValue;
use serde::Serialize;

use crate::model::entities::registration::RegistrationItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Condition, Expressions, Update};
use crate::model::ids::{DeviceId, UserId};
use crate::model::pattern_id::PatternId;
use crate::model::schema::PK;
use crate::model::timestamp::Timestamp;
use crate::model::token::DeviceToken;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::string_value;
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// What a revoked registration stores as its token digest: not a SHA-256 hex digest, so no
/// token can ever match it.
pub const REVOKED_DIGEST: &str = "revoked";

/// The answer to a rotation: the new token, shown once.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RotatedToken {
    /// The device.
    pub device_id: String,
    /// The new token (only its digest is stored).
    pub token: String,
    /// Until when the replaced token is still accepted (`None` when there was none to keep:
    /// the device's tokens had been revoked, or the overlap is 0).
    pub previous_token_valid_until: Option<String>,
}

/// AP-17, implemented by [`rotate_token`].
pub const ROTATE_TOKEN: AccessPattern = AccessPattern {
    id: PatternId::RotateToken,
    description: "rotate a device's token (the old one works for an overlap)",
    frequency: Frequency::Important,
    operations: &[Operation::UpdateItem],
    index: None,
    key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION, userId = {caller}",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("POST /me/devices/{deviceId}/token"),
    implemented_by: implemented_by!(rotate_token),
};

/// AP-17: gives `device` a new token; the current one is accepted until `now` plus the
/// configured overlap (`TOKEN_OVERLAP_SECONDS`).
/// Another user's device, and an unknown one, are [`FleetError::NotFound`] (ids cannot be
/// probed). One conditional UpdateItem.
pub async fn rotate_token(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<RotatedToken, FleetError> {
    let token = DeviceToken::generate()?;
    let overlap = i64::from(table.config.token_overlap_seconds);
    let until = Timestamp::now().plus_seconds(overlap);
    let out = registration_update(table, device)
        // The replaced digest moves aside; after a revocation it is the revoked marker, which
        // matches no token, so nothing revoked comes back.
        .expressions(owned_registration_update(
            user,
            Update::new()
                .copy(
                    RegistrationItem::PREVIOUS_TOKEN_SHA256,
                    RegistrationItem::TOKEN_SHA256,
                )
                .set(
                    RegistrationItem::PREVIOUS_TOKEN_UNTIL,
                    string_value(until.to_string()),
                )
                .set(
                    RegistrationItem::TOKEN_SHA256,
                    string_value(token.sha256_hex()),
                )
                .remove(RegistrationItem::REVOKED_AT),
        ))
        .return_values(ReturnValue::AllOld)
        .send()
        .await
        .map_err(not_found_if_not_owned)?;
    let before = out
        .attributes
        .map(RegistrationItem::from_item)
        .transpose()?;
    let kept = before.is_some_and(|r| r.revoked_at.is_none()) && overlap > 0;
    Ok(RotatedToken {
        device_id: device.to_string(),
        token: token.reveal().to_string(),
        previous_token_valid_until: kept.then(|| until.to_string()),
    })
}

/// AP-18, implemented by [`revoke_token`].
pub const REVOKE_TOKEN: AccessPattern = AccessPattern {
    id: PatternId::RevokeToken,
    description: "revoke a device's tokens (the device and its history stay)",
    frequency: Frequency::Important,
    operations: &[Operation::UpdateItem],
    index: None,
    key_condition: "PK = DEVICE#{deviceId}, SK = REGISTRATION, userId = {caller}",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("DELETE /me/devices/{deviceId}/token"),
    implemented_by: implemented_by!(revoke_token),
};

/// AP-18: no token of `device` is accepted any more, the one in an overlap included, until the
/// owner rotates again. Idempotent. One conditional UpdateItem.
pub async fn revoke_token(
    table: &FleetTable,
    user: &UserId,
    device: &DeviceId,
) -> Result<(), FleetError> {
    registration_update(table, device)
        .expressions(owned_registration_update(
            user,
            Update::new()
                .set_if_absent(
                    RegistrationItem::REVOKED_AT,
                    string_value(Timestamp::now().to_string()),
                )
                .set(RegistrationItem::TOKEN_SHA256, string_value(REVOKED_DIGEST))
                .remove(RegistrationItem::PREVIOUS_TOKEN_SHA256)
                .remove(RegistrationItem::PREVIOUS_TOKEN_UNTIL),
        ))
        .send()
        .await
        .map_err(not_found_if_not_owned)?;
    Ok(())
}

/// An UpdateItem of `device`'s registration, to be given its expressions.
fn registration_update(
    table: &FleetTable,
    device: &DeviceId,
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::registration(device).attributes()))
}

/// `changes` to a registration, applied only if `user` owns it.
fn owned_registration_update(user: &UserId, changes: Update) -> Expressions {
    let owned = Condition::exists(PK).and(Condition::equals(
        RegistrationItem::USER_ID,
        string_value(user.as_str()),
    ));
    Expressions::write(changes, Some(owned))
}

fn not_found_if_not_owned(
    err: aws_sdk_dynamodb::error::SdkError<
        UpdateItemError,
        aws_sdk_dynamodb::config::http::HttpResponse,
    >,
) -> FleetError {
    match err.as_service_error() {
        Some(UpdateItemError::ConditionalCheckFailedException(_)) => FleetError::NotFound("device"),
        _ => sdk_error(err),
    }
}
