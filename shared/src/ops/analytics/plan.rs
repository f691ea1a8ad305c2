//! What one invocation of the daily run is asked to do: a leaf, so the run (`mod.rs`) and the
//! scan read it without using each other.

use std::time::Instant;

use crate::model::error::ValidationError;
use crate::model::timestamp::Day;

/// How one invocation runs.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// The report day.
    pub day: Day,
    /// Total scan segments (`SCAN_SEGMENTS`, default 4); fixed for a day once started.
    pub segments: u32,
    /// The segments this invocation works on (all when `None`): several invocations can share
    /// a day when one 15-minute Lambda cannot scan the table.
    pub only: Option<Vec<u32>>,
    /// Directory page size (`None`: DynamoDB's 1 MB pages).
    pub page_limit: Option<i32>,
    /// Stop scanning (after checkpointing) at this instant.
    pub deadline: Instant,
    /// Forget earlier checkpoints of the day and scan again.
    pub fresh: bool,
    /// Units of work per segment in this invocation at most (`None`: until done or the
    /// deadline); a bound on one invocation's work, like the deadline.
    pub max_pages: Option<u32>,
}

impl RunPlan {
    /// A plan for `day` with every segment and no page limit.
    pub fn new(day: Day, segments: u32, deadline: Instant) -> Result<Self, ValidationError> {
        if !(1..=1000).contains(&segments) {
            return Err(ValidationError::new("segments", "must be 1..1000"));
        }
        Ok(Self {
            day,
            segments,
            only: None,
            page_limit: None,
            deadline,
            fresh: false,
            max_pages: None,
        })
    }
}
