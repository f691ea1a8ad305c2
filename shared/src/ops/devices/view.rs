//! The device as the API shows it: what its owner set, with the readings, twin versions,
//! connectivity and open alarms of its live state (AP-03, and every listing of devices).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::alarm::OFFLINE;

use crate::model::alarm::severity::Severity;

use crate::model::alarm::status::open_summary;
use crate::model::entities::device::DeviceItem;
use crate::model::entities::device_state::DeviceStateItem;
use crate::model::offline::OfflineDetection;
use crate::model::readings::{EventValue, Reading, RecentEvent};
use crate::model::series::Resolution;
use crate::model::status::DeviceStatus;
use crate::model::timestamp::Timestamp;
use crate::ops::twin::TwinView;

/// A device as the API returns it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// Id.
    pub device_id: String,
    /// Display name.
    pub name: String,
    /// Device type.
    #[serde(rename = "type")]
    pub device_type: String,
    /// Status.
    pub status: DeviceStatus,
    /// Tags.
    pub tags: Vec<String>,
    /// Declared reporting interval, if any (otherwise the device's rhythm is learned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_every_seconds: Option<u64>,
    /// The interval learned from the device's rhythm, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learned_every_seconds: Option<u64>,
    /// `tight` when the owner asked for it; absent: standard (every other device's answer
    /// stays as it was).
    #[serde(skip_serializing_if = "OfflineDetection::is_standard")]
    pub offline_detection: OfflineDetection,
    /// Version for `If-Match`.
    pub version: u64,
    /// Registration time.
    pub created_at: String,
    /// Last owner update.
    pub updated_at: String,
    /// Newest event time, once the device has sent events.
    pub last_seen: Option<String>,
    /// Latest reading per event type.
    pub latest: BTreeMap<String, Reading>,
    /// Newest events, newest first.
    pub recent: Vec<RecentEvent>,
    /// The twin's versions (desired, reported, open commands) once it has one; AP-03 adds the
    /// documents and their delta ([`crate::ops::twin`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub twin: Option<TwinView>,
    /// `online` (reporting), `offline` (an open offline alarm) or `unknown` (never reported).
    pub connectivity: Connectivity,
    /// The device's open alarms: how many, and the highest severity.
    pub alarms: AlarmSummary,
    /// The dashboard's sparkline ([`DeviceTrail::of_state`]); other reads leave it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trail: Option<DeviceTrail>,
}

/// Hourly averages of the last 24 hours of a device's first numeric event type
/// (alphabetically), for the dashboard's sparkline: from the live state's summaries (the
/// flushed hours' trail and the open 5-minute buckets), no read of its own. Approximate (the
/// trail is quantized); `GET /me/devices/{deviceId}/series` has the exact figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceTrail {
    /// The event type drawn.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Oldest first, hours without a numeric reading left out.
    pub hours: Vec<TrailHour>,
}

/// One hour of a [`DeviceTrail`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrailHour {
    /// The hour's start.
    pub start: String,
    /// The average of its numeric readings.
    pub avg: f64,
}

impl DeviceTrail {
    /// The trail of `state`'s first event type (alphabetically) whose latest reading is a
    /// number and whose summaries hold a numeric hour: the 24 hours up to its newest one.
    pub fn of_state(state: &DeviceStateItem) -> Option<Self> {
        state
            .latest
            .iter()
            .filter(|(_, r)| matches!(r.1, EventValue::Number(_)))
            .find_map(|(event_type, _)| {
                let series = state.series.0.get(event_type)?;
                let mut hours = series.trail.clone();
                hours.update(&series.open.coarsen(Resolution::Hour));
                let hours: Vec<TrailHour> = hours
                    .0
                    .iter()
                    .filter_map(|(start, avg)| {
                        Some(TrailHour {
                            start: Timestamp::from_epoch_millis(*start)?.to_string(),
                            avg: *avg,
                        })
                    })
                    .collect();
                (!hours.is_empty()).then(|| DeviceTrail {
                    event_type: event_type.clone(),
                    hours,
                })
            })
    }
}

/// Whether a device is reporting, from its live state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Connectivity {
    /// It has reported and is not overdue.
    Online,
    /// It stopped reporting: an offline alarm is open.
    Offline,
    /// It has never reported.
    Unknown,
}

/// A device's open alarms as the dashboard shows them (from the statuses on its live state:
/// no read of its alarms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmSummary {
    /// Open alarms (active or acknowledged).
    pub active: usize,
    /// The highest severity among them.
    pub highest_severity: Option<Severity>,
}

impl Device {
    /// The device as the API shows it: what its owner set, with the readings of its live
    /// state (none before its first batch, or while a reader has not found the state).
    pub fn with_state(item: DeviceItem, state: Option<&DeviceStateItem>) -> Self {
        Self {
            last_seen: state.and_then(|s| s.last_seen).map(|t| t.to_string()),
            learned_every_seconds: state.and_then(|s| s.learned_every_seconds),
            latest: state
                .map(|s| {
                    s.latest
                        .iter()
                        .map(|(t, r)| (t.clone(), r.reading()))
                        .collect()
                })
                .unwrap_or_default(),
            recent: state
                .map(|s| s.recent.iter().map(|e| e.recent_event()).collect())
                .unwrap_or_default(),
            twin: state.and_then(TwinView::of_state),
            connectivity: match state {
                Some(s) if s.alarms.get(OFFLINE).is_some_and(|a| a.raised_at.is_some()) => {
                    Connectivity::Offline
                }
                Some(s) if s.last_seen.is_some() => Connectivity::Online,
                _ => Connectivity::Unknown,
            },
            alarms: state
                .map(|s| {
                    let (active, highest_severity) = open_summary(&s.alarms);
                    AlarmSummary {
                        active,
                        highest_severity,
                    }
                })
                .unwrap_or_default(),
            ..Device::from(item)
        }
    }
}

impl From<DeviceItem> for Device {
    fn from(item: DeviceItem) -> Self {
        Self {
            device_id: item.device_id.to_string(),
            name: item.name,
            device_type: item.device_type.to_string(),
            status: item.status,
            tags: item.tags.iter().map(ToString::to_string).collect(),
            report_every_seconds: item.report_every_seconds,
            learned_every_seconds: None,
            offline_detection: item.offline_detection,
            version: item.version,
            created_at: item.created_at.to_string(),
            updated_at: item.updated_at.to_string(),
            last_seen: None,
            latest: BTreeMap::new(),
            recent: Vec::new(),
            twin: None,
            connectivity: Connectivity::Unknown,
            alarms: AlarmSummary::default(),
            trail: None,
        }
    }
}
