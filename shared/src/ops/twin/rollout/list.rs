//! `GET /me/rollouts`: an owner's rollouts of both kinds, newest first, a page at a time (served
//! by the firmware function: device-updates, which starts them, has no room for more routes).

use super::*;
use crate::model::entities::rollout::ROLLOUT_PREFIX;

/// One page of an owner's rollouts, newest first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RolloutPage {
    /// The rollouts. A firmware rollout's `stages` are left out: its counts are 16 shards of
    /// their own, read by `GET /me/rollouts/{rolloutId}`, not by a listing.
    pub rollouts: Vec<RolloutView>,
    /// Where the next page starts (the last rollout's id); absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// AP-F10, implemented by [`list_rollouts`].
pub const LIST_ROLLOUTS: AccessPattern = AccessPattern {
    id: PatternId::ListRollouts,
    description: "an owner's rollouts of both kinds, newest first, a page at a time (a firmware rollout without its stages)",
    frequency: Frequency::Analytics,
    operations: &[Operation::Query],
    index: None,
    key_condition: "PK = USER#{userId}, SK begins_with ROLLOUT# (backwards)",
    budget: RequestBudget::PerPage(1),
    max_read_units: None,
    route: Some("GET /me/rollouts"),
    implemented_by: implemented_by!(list_rollouts),
};

/// `GET /me/rollouts`: one Query of the owner's rollouts (`USER#{userId}`, `ROLLOUT#` prefix:
/// the running count at `ROLLOUTS` is not under it), newest first (ids sort by creation),
/// `limit` after `cursor`. The cursor is a rollout id: the start key is built from the caller's
/// own partition, so no cursor reaches another's; anything else is a 400 naming `cursor` before
/// anything is read.
pub async fn list_rollouts(
    table: &FleetTable,
    user: &UserId,
    cursor: Option<&str>,
    limit: u32,
) -> Result<RolloutPage, FleetError> {
    let start = cursor
        .map(|c| {
            RolloutId::parse_generated(c).ok_or_else(|| {
                ValidationError::new("cursor", "is not a cursor this request issued")
            })
        })
        .transpose()?
        .map(|rollout| {
            ItemKey::Rollout {
                user: user.clone(),
                rollout,
            }
            .attributes()
        });
    let (items, next) = query(
        key_prefix(table, user_pk(user), ROLLOUT_PREFIX, Expressions::builder())
            .scan_index_forward(false)
            .limit(limit.clamp(1, crate::ops::MAX_LIMIT) as i32)
            .set_exclusive_start_key(start),
    )
    .await?;
    let rollouts = items
        .into_iter()
        .map(|item| {
            RolloutItem::from_item(item).map(|rollout| RolloutView {
                stages: None,
                ..RolloutView::of(&rollout)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cursor = next
        .and_then(|key| key.get(SK.name())?.as_s().ok().cloned())
        .and_then(|sk| sk.strip_prefix(ROLLOUT_PREFIX).map(str::to_string));
    Ok(RolloutPage { rollouts, cursor })
}
