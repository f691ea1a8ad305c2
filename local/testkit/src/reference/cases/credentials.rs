//! The cases of a device's tokens: rotation (AP-17) and revocation (AP-18), on Alice's
//! device 8, which no other case ingests for.

use shared::model::pattern_id::PatternId;
use shared::ops::credentials::{revoke_token, rotate_token};

use super::common::{
    alice, alice_device, device_id, every_call, one, route, write, PatternCase, ALICE,
};
use crate::api_event::ApiEvent;

/// RotateToken: rotate a device's token.
pub(super) const ROTATE_TOKEN: PatternCase = PatternCase {
    id: PatternId::RotateToken,
    workload: "rotate a device's token",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            rotate_token(table, &alice()?, &alice_device(TOKEN_DEVICE)?).await?;
            Ok(())
        })
    },
    call: write("POST /me/devices/{deviceId}/token", 200, |_, _| {
        let device = device_id(TOKEN_DEVICE);
        every_call(
            ApiEvent::new(
                route(PatternId::RotateToken),
                format!("/me/devices/{device}/token"),
            )
            .caller(ALICE)
            .param("deviceId", &device),
        )
    }),
};

/// RevokeToken: revoke a device's tokens.
pub(super) const REVOKE_TOKEN: PatternCase = PatternCase {
    id: PatternId::RevokeToken,
    workload: "revoke a device's tokens",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            revoke_token(table, &alice()?, &alice_device(TOKEN_DEVICE)?).await?;
            Ok(())
        })
    },
    call: write("DELETE /me/devices/{deviceId}/token", 204, |_, _| {
        let device = device_id(TOKEN_DEVICE);
        every_call(
            ApiEvent::new(
                route(PatternId::RevokeToken),
                format!("/me/devices/{device}/token"),
            )
            .caller(ALICE)
            .param("deviceId", &device),
        )
    }),
};

/// Alice's device whose token AP-17 rotates and AP-18 revokes.
const TOKEN_DEVICE: u32 = 8;
