//! ingest: `POST /devices/{deviceId}/events` (AP-14). Not built yet: no handler exists,
//! so nothing pretends to accept events.
