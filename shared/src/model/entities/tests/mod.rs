//! Tests over every entity: each key shape round-trips and has its documented spelling, the
//! key templates match the builders, and every entity's declared attributes are exactly the
//! ones serde stores.

mod firmware_items;
mod items;
mod key_shapes;
mod key_templates;
mod twin_items;
