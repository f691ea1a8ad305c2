//! The firmware routes' request budgets: how many DynamoDB requests each may issue, and of
//! which operations. Asserted on DynamoDB Local by `tests/it/firmware_packages.rs` with the request
//! meter, as `tests/it/budgets.rs` asserts the catalog's. (S3 requests are not DynamoDB
//! capacity: a check of a pending package adds one HEAD and one GET of its image.)

use crate::ops::pattern::Operation;

/// One route's budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirmwareBudget {
    /// The route.
    pub route: &'static str,
    /// The operations it may issue.
    pub operations: &'static [Operation],
    /// The most requests it may issue.
    pub max_requests: u32,
    /// The key condition or keys it touches.
    pub keys: &'static str,
}

/// `POST /me/firmware`: the owner's signing keys (GetItem), the package (PutItem).
pub const CREATE_FIRMWARE: FirmwareBudget = FirmwareBudget {
    route: "POST /me/firmware",
    operations: &[Operation::GetItem, Operation::PutItem],
    max_requests: 2,
    keys: "FIRMWARE#{userId}/KEYS, FIRMWARE#{userId}/PACKAGE#{firmwareId}",
};

/// `GET /me/firmware/{firmwareId}`: the package (GetItem); a pending one whose image is
/// there, its verdict (UpdateItem), and on losing a race with another check the stored one
/// (GetItem).
pub const GET_FIRMWARE: FirmwareBudget = FirmwareBudget {
    route: "GET /me/firmware/{firmwareId}",
    operations: &[Operation::GetItem, Operation::UpdateItem],
    max_requests: 3,
    keys: "FIRMWARE#{userId}/PACKAGE#{firmwareId}",
};

/// `GET /me/firmware`: one Query per page.
pub const LIST_FIRMWARE: FirmwareBudget = FirmwareBudget {
    route: "GET /me/firmware",
    operations: &[Operation::Query],
    max_requests: 1,
    keys: "PK = FIRMWARE#{userId}, SK begins_with PACKAGE#",
};

/// `DELETE /me/firmware/{firmwareId}`: the package (GetItem), the owner's running rollouts
/// (one Query: is it in use?), its deletion (DeleteItem).
pub const DELETE_FIRMWARE: FirmwareBudget = FirmwareBudget {
    route: "DELETE /me/firmware/{firmwareId}",
    operations: &[Operation::GetItem, Operation::Query, Operation::DeleteItem],
    max_requests: 3,
    keys: "FIRMWARE#{userId}/PACKAGE#{firmwareId}; PK = ROLLOUTS#RUNNING, SK begins_with {userId}#",
};

/// `POST /me/rollouts` with a `firmwareId` (served by device-updates): the package
/// (GetItem), the owner's running entries (Query), the rollout, its running entry and the
/// owner's count (TransactWriteItems), as a desired-state start plus the package's read.
pub const START_FIRMWARE_ROLLOUT: FirmwareBudget = FirmwareBudget {
    route: "POST /me/rollouts (firmwareId)",
    operations: &[
        Operation::GetItem,
        Operation::Query,
        Operation::TransactWriteItems,
    ],
    max_requests: 3,
    keys: "FIRMWARE#{userId}/PACKAGE#{firmwareId}; PK = ROLLOUTS#RUNNING, SK begins_with {userId}#; USER#{userId}/ROLLOUT#{rolloutId}, ROLLOUTS#RUNNING/{userId}#{rolloutId}, USER#{userId}/ROLLOUTS",
};

/// `PUT /me/firmware-keys/{deviceType}`: read and conditional write of the keys item, up to
/// [`super::keys::CHANGE_ATTEMPTS`] times under concurrent changes (2 without).
pub const SET_SIGNING_KEY: FirmwareBudget = FirmwareBudget {
    route: "PUT /me/firmware-keys/{deviceType}",
    operations: &[Operation::GetItem, Operation::PutItem],
    max_requests: 2 * super::keys::CHANGE_ATTEMPTS,
    keys: "FIRMWARE#{userId}/KEYS",
};

/// `POST /me/rollouts/{rolloutId}/cancel` (served by the firmware function): the rollout
/// (GetItem), its status (UpdateItem, conditioned on `running`), its running-list entry and
/// the owner's slot (TransactWriteItems, conditioned on the entry); an owner without a count
/// (an organization being deleted) has its entry deleted alone (DeleteItem). A 404 or a 409
/// is the GetItem alone, or with the UpdateItem when another end won the race.
pub const CANCEL_ROLLOUT: FirmwareBudget = FirmwareBudget {
    route: "POST /me/rollouts/{rolloutId}/cancel",
    operations: &[
        Operation::GetItem,
        Operation::UpdateItem,
        Operation::TransactWriteItems,
        Operation::DeleteItem,
    ],
    max_requests: 4,
    keys: "USER#{userId}/ROLLOUT#{rolloutId}; ROLLOUTS#RUNNING/{userId}#{rolloutId}, USER#{userId}/ROLLOUTS",
};

/// `POST /me/rollouts/{rolloutId}/pause`: the rollout (consistent GetItem), its status
/// (UpdateItem conditioned on `running`); a 404 or 409 is the GetItem alone (or both, when it
/// stopped running between them).
pub const PAUSE_ROLLOUT: FirmwareBudget = FirmwareBudget {
    route: "POST /me/rollouts/{rolloutId}/pause",
    operations: &[Operation::GetItem, Operation::UpdateItem],
    max_requests: 2,
    keys: "USER#{userId}/ROLLOUT#{rolloutId}",
};

/// `POST /me/rollouts/{rolloutId}/resume`: the rollout (consistent GetItem, with the counts of
/// the worker's last walk, the abort rule's baseline), its status and gate (UpdateItem
/// conditioned on `paused`); a 404 or 409 on the state read is the GetItem alone.
pub const RESUME_ROLLOUT: FirmwareBudget = FirmwareBudget {
    route: "POST /me/rollouts/{rolloutId}/resume",
    operations: &[Operation::GetItem, Operation::UpdateItem],
    max_requests: 2,
    keys: "USER#{userId}/ROLLOUT#{rolloutId}",
};

/// `GET /me/rollouts` (served by the firmware function): one Query of the owner's rollouts per
/// page (a firmware rollout's stage counts are not read: `GET /me/rollouts/{rolloutId}` has
/// them).
pub const LIST_ROLLOUTS: FirmwareBudget = FirmwareBudget {
    route: "GET /me/rollouts",
    operations: &[Operation::Query],
    max_requests: 1,
    keys: "PK = USER#{userId}, SK begins_with ROLLOUT#",
};

/// `GET /me/devices/{deviceId}/firmware`: the device's item (is it the caller's? which
/// partition holds its live state?), then its live state, whose `firmware` is its part in the
/// last rollout that offered it something: two consistent GetItems.
pub const DEVICE_FIRMWARE: FirmwareBudget = FirmwareBudget {
    route: "GET /me/devices/{deviceId}/firmware",
    operations: &[Operation::GetItem],
    max_requests: 2,
    keys: "USER#{userId}/DEVICE#{deviceId}, then the device's live state on the partition it names",
};

/// Every firmware route's budget.
pub const FIRMWARE_BUDGETS: &[FirmwareBudget] = &[
    CREATE_FIRMWARE,
    GET_FIRMWARE,
    LIST_FIRMWARE,
    DELETE_FIRMWARE,
    SET_SIGNING_KEY,
    START_FIRMWARE_ROLLOUT,
    CANCEL_ROLLOUT,
    PAUSE_ROLLOUT,
    RESUME_ROLLOUT,
    LIST_ROLLOUTS,
    DEVICE_FIRMWARE,
];
