//! The sample events in `events/` and their manifest: which function receives each, and the
//! status it must answer. Replayed in-process by the tests, through the release bootstraps by
//! the smoke test, and used as the representative requests of the cold-start measurement.

use std::path::PathBuf;

/// Retention for replaying the samples, whose timestamps are fixed.
pub const SAMPLE_RETENTION_DAYS: u32 = 3650;

/// One entry of `events/manifest.json`, with the event's text.
#[derive(Clone, Debug)]
pub struct SampleEvent {
    /// File name in `events/`.
    pub file: String,
    /// The template function (logical id) that receives it.
    pub function: String,
    /// The status it must answer.
    pub status: u16,
    /// The event JSON.
    pub text: String,
}

/// `events/`.
pub fn events_dir() -> PathBuf {
    crate::repo_root().join("events")
}

/// The sample that stands for `function` in measurements: its first one answered with a 2xx.
pub fn first_success<'a>(samples: &'a [SampleEvent], function: &str) -> Option<&'a SampleEvent> {
    samples
        .iter()
        .find(|s| s.function == function && (200..300).contains(&s.status))
}

/// Every sample event, in manifest order. Panics on a broken manifest: the samples are part
/// of the repository, and every caller is a test or a measurement.
pub fn sample_events() -> Vec<SampleEvent> {
    #[derive(serde::Deserialize)]
    struct Manifest {
        events: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        file: String,
        function: String,
        status: u16,
    }
    let text = std::fs::read_to_string(events_dir().join("manifest.json")).expect("manifest");
    let manifest: Manifest = serde_json::from_str(&text).expect("events/manifest.json");
    manifest
        .events
        .into_iter()
        .map(|e| SampleEvent {
            text: std::fs::read_to_string(events_dir().join(&e.file))
                .unwrap_or_else(|err| panic!("events/{}: {err}", e.file)),
            file: e.file,
            function: e.function,
            status: e.status,
        })
        .collect()
}
