//! Id validation (`shared::model::ids`): never panics; an accepted value is exactly the input, short
//! enough, free of the key delimiter, control and non-ASCII characters, not a URL dot-segment;
//! deserializing validates the same way; tag lists are bounded, sorted and unique.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use shared::model::ids::{
    parse_display_name, parse_tags, DeviceId, DeviceType, EventId, EventType, Tag, UserId,
    MAX_TAGS_PER_DEVICE,
};

#[derive(Arbitrary, Debug)]
struct Input {
    value: String,
    tags: Vec<String>,
}

fn check(value: &str, parsed: Option<&str>, max: usize) {
    let json: Option<String> = serde_json::from_value(serde_json::Value::from(value)).ok();
    if let Some(ok) = parsed {
        assert_eq!(ok, value);
        assert!(!ok.is_empty() && ok.chars().count() <= max, "{ok:?}");
        assert!(
            ok.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:@+".contains(c)),
            "{ok:?}"
        );
        assert!(!ok.chars().all(|c| c == '.'), "{ok:?}");
        assert!(json.is_some());
    }
}

macro_rules! each {
    ($value:expr, $($t:ty),*) => {$(
        let parsed = <$t>::parse($value);
        check($value, parsed.as_ref().ok().map(|v| v.as_str()), <$t>::MAX_LEN);
        let via_serde: Result<$t, _> = serde_json::from_value(serde_json::Value::from($value));
        assert_eq!(via_serde.is_ok(), parsed.is_ok(), "{:?}", $value);
        if let Err(e) = parsed {
            assert_eq!(e.field, <$t>::FIELD);
        }
    )*};
}

fuzz_target!(|input: Input| {
    let value = input.value.as_str();
    each!(value, UserId, DeviceId, EventId, Tag, EventType, DeviceType);
    if let Ok(name) = parse_display_name("name", value, 100) {
        assert!(!name.is_empty() && name.chars().count() <= 100);
        assert!(!name.chars().any(char::is_control));
        assert_eq!(name, name.trim());
    }
    let count = input.tags.len();
    if let Ok(tags) = parse_tags(input.tags) {
        assert!(count <= MAX_TAGS_PER_DEVICE);
        assert!(tags.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
    }
});
