//! Profile upsert (`PUT /me`, AP-16) and the profile read model.

use aws_sdk_dynamodb::types::ReturnValue;
use serde::Serialize;

use crate::model::entities::profile::ProfileItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::error::FleetError;
use crate::model::expression::{Expressions, Update};
use crate::model::ids::UserId;
use crate::model::keys::{DirectoryEntry, IndexKeys};
use crate::model::pattern_id::PatternId;
use crate::model::timestamp::Timestamp;
use crate::ops::pattern::{implemented_by, AccessPattern, Frequency, Operation, RequestBudget};
use crate::store::dynamo::string_value;
use crate::store::table::{sdk_error, FleetTable};
use crate::store::with_expressions::WithExpressions;

/// Longest profile name, in characters.
pub const MAX_PROFILE_NAME: usize = 100;

/// What `PUT /me` sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileUpdate {
    /// Display name (validated with [`crate::model::ids::parse_display_name`]).
    pub name: String,
    /// E-mail from the caller's identity token, if it carries one.
    pub email: Option<String>,
}

/// A profile as the API returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The user.
    pub user_id: String,
    /// Display name.
    pub name: Option<String>,
    /// E-mail.
    pub email: Option<String>,
    /// First write.
    pub created_at: String,
    /// Last write.
    pub updated_at: String,
}

impl From<ProfileItem> for Profile {
    fn from(item: ProfileItem) -> Self {
        Self {
            user_id: item.user_id.to_string(),
            name: item.name,
            email: item.email,
            created_at: item.created_at.to_string(),
            updated_at: item.updated_at.to_string(),
        }
    }
}

/// AP-16, implemented by [`upsert_profile`].
pub const UPSERT_PROFILE: AccessPattern = AccessPattern {
    id: PatternId::PutProfile,
    description: "create or update the caller's profile",
    frequency: Frequency::Important,
    operations: &[Operation::UpdateItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = PROFILE",
    budget: RequestBudget::Fixed(1),
    max_read_units: None,
    route: Some("PUT /me"),
    implemented_by: implemented_by!(upsert_profile),
};

/// Creates or updates the caller's profile in one UpdateItem (no read first): `createdAt` is
/// kept from the first write.
pub async fn upsert_profile(
    table: &FleetTable,
    user: &UserId,
    update: ProfileUpdate,
) -> Result<Profile, FleetError> {
    let now = Timestamp::now().to_string();
    // The profile is in the directory (GSI2) the daily run scans; its keys come from the entity.
    let directory = IndexKeys::directory(user, DirectoryEntry::Profile);
    let mut changes = Update::new()
        .set_all([ProfileItem::ENTITY_TYPE.assignment()])
        .set(ProfileItem::USER_ID, string_value(user.as_str()))
        .set(ProfileItem::NAME, string_value(update.name))
        .set_if_absent(ProfileItem::CREATED_AT, string_value(now.clone()))
        .set(ProfileItem::UPDATED_AT, string_value(now))
        .set_all(directory.attributes());
    if let Some(email) = update.email {
        changes = changes.set(ProfileItem::EMAIL, string_value(email));
    }
    let out = table
        .client
        .update_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::Profile { user: user.clone() }.attributes()))
        .expressions(Expressions::write(changes, None))
        .return_values(ReturnValue::AllNew)
        .send()
        .await
        .map_err(sdk_error)?;
    let attributes = out
        .attributes
        .ok_or_else(|| FleetError::internal("UpdateItem returned no attributes"))?;
    Ok(ProfileItem::from_item(attributes)?.into())
}

/// AP-01, implemented by [`get_profile`].
pub const GET_PROFILE: AccessPattern = AccessPattern {
    id: PatternId::GetProfile,
    description: "user profile",
    frequency: Frequency::Critical,
    operations: &[Operation::GetItem],
    index: None,
    key_condition: "PK = USER#{userId}, SK = PROFILE",
    budget: RequestBudget::Fixed(1),
    max_read_units: Some(0.5),
    route: Some("GET /me"),
    implemented_by: implemented_by!(get_profile),
};

/// AP-01: the caller's profile, or `None` before the first `PUT /me`. One eventually consistent
/// GetItem.
pub async fn get_profile(table: &FleetTable, user: &UserId) -> Result<Option<Profile>, FleetError> {
    let out = table
        .client
        .get_item()
        .table_name(table.name())
        .set_key(Some(ItemKey::Profile { user: user.clone() }.attributes()))
        .send()
        .await
        .map_err(sdk_error)?;
    out.item
        .map(|item| ProfileItem::from_item(item).map(Profile::from))
        .transpose()
}
