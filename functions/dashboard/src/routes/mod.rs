//! The read routes, one module per resource: each holds that resource's handlers and the
//! shapes of their answers. What several share is in [`crate::adapters`].

pub(crate) mod admin;
pub(crate) mod alarms;
pub(crate) mod dashboard;
pub(crate) mod devices;
pub(crate) mod events;
pub(crate) mod invitations;
pub(crate) mod members;
pub(crate) mod organizations;
pub(crate) mod profile;
pub(crate) mod rules;
pub(crate) mod series;
pub(crate) mod twin;
