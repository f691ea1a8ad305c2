//! daily-analytics: the scheduled parallel-scan report. Not built yet: no handler exists.
