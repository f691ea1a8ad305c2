//! Devices: the listing (AP-02, by tag AP-12) and one device.

use crate::adapters::{limit, ok, Answer, ReadQuery};
use axum::extract::State;
use serde::Serialize;
use shared::http::api::ApiError;
use shared::http::fleet::{Fleet, ViewerRole};
use shared::http::gateway::{DeviceIdPath, QueryParams};
use shared::model::ids::Tag;
use shared::ops::{dashboard, devices};
use shared::FleetTable;

/// `{"device": ...}`.
#[derive(Serialize)]
struct DeviceAnswer<T> {
    device: T,
}

/// `{"devices": [...], "cursor": ...}`: one page of devices.
#[derive(Serialize)]
struct DevicesPage<T> {
    devices: Vec<T>,
    cursor: Option<String>,
}

/// `GET /me/devices`: all the caller's devices (AP-02), or those with `tag` (AP-12).
pub(crate) async fn device_listing(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    QueryParams(q): QueryParams<ReadQuery>,
) -> Answer {
    let limit = limit(&q)?;
    let cursor = q.cursor.as_deref();
    match q.tag {
        Some(tag) => {
            let tag = Tag::parse_field("tag", tag)?;
            let page =
                dashboard::devices_with_tag(&table, &fleet.owner, &tag, limit, cursor).await?;
            ok(&DevicesPage {
                devices: page.items,
                cursor: page.cursor,
            })
        }
        None => {
            let page = dashboard::list_devices(&table, &fleet.owner, limit, cursor).await?;
            ok(&DevicesPage {
                devices: page.items,
                cursor: page.cursor,
            })
        }
    }
}

/// `GET /me/devices/{deviceId}`.
pub(crate) async fn get_device(
    fleet: Fleet<ViewerRole>,
    State(table): State<FleetTable>,
    DeviceIdPath(id): DeviceIdPath,
) -> Answer {
    let device = devices::read::get_device(&table, &fleet.owner, &id)
        .await?
        .ok_or(ApiError::not_found("device"))?;
    ok(&DeviceAnswer { device })
}
