//! The routes, one module per resource: each holds that resource's handlers and the shapes
//! of their requests and answers. What several share is in [`crate::adapters`].

pub(crate) mod alarms;
pub(crate) mod devices;
pub(crate) mod invitations;
pub(crate) mod members;
pub(crate) mod moves;
pub(crate) mod organizations;
pub(crate) mod profile;
pub(crate) mod retention;
pub(crate) mod rules;
pub(crate) mod twin;
