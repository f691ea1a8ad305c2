//! Summaries of a device's readings per 5 minutes, hour and day (issue 32): the bucket
//! arithmetic and the compact stored forms. No I/O.
//!
//! A [`Bucket`] holds `count`, `min`, `max` and `sum` of the readings in one UTC-aligned
//! interval. Two buckets of disjoint readings combine into the bucket of all of them
//! ([`Bucket::merge`]), and the result does not depend on the order readings arrived in:
//! `count`, `min` and `max` trivially, and `sum` because it is kept exactly ([`ExactSum`]:
//! Shewchuk's non-overlapping partials, as Python's `math.fsum`), rounded once when shown. So a
//! bucket built reading by reading at ingest, one recomputed from the stored raw readings and
//! one combined from smaller buckets are the same bucket, bit for bit. That is what makes the
//! summaries exact under replays, out-of-order batches and late readings: ingest never has to
//! count a reading twice to stay right, it recomputes what it cannot count once (see
//! docs/design.md, "Summaries").
//!
//! Text and flag readings are counted (`count`) but carry no number: a bucket of only those has
//! no `min`, `max`, `sum` or `avg`.

pub mod assembly;
pub mod bucket;
pub mod ids;
pub mod open;
pub mod resolution;

pub use assembly::{assemble, stored_ranges, StoredSeries};
pub use bucket::{five_minute_buckets, Bucket, Buckets, ExactSum};
pub use ids::{reading_id, BucketIds};
pub use open::{OpenSeries, SeriesState, Trail};
pub use resolution::{
    block_start, month_start, Resolution, BLOCK_MS, DAY_MS, FIVE_MINUTES_MS, HOUR_MS,
};
