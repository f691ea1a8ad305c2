//! The function's routes, one module per resource.

pub(crate) mod deliveries;
pub(crate) mod webhooks;
