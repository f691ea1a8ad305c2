//! Timestamp normalization (`shared::model::timestamp`): never panics, whatever the offset, precision
//! or year; an accepted time renders as fixed-width UTC milliseconds that parse back to itself;
//! arithmetic saturates at the years a key can hold; day ranges are bounded before listing.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use shared::ops::events::{TimeRange, MAX_TYPE_RANGE_DAYS};
use shared::model::timestamp::{Day, Timestamp};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    text: &'a str,
    other: &'a str,
    seconds: i64,
    millis: i64,
}

fuzz_target!(|input: Input<'_>| {
    let parsed = Timestamp::parse_field("at", input.text);
    if let Ok(at) = parsed {
        let text = at.to_string();
        assert_eq!(text.len(), "2024-04-10T10:00:00.000Z".len(), "{text}");
        assert!(text.ends_with('Z'));
        assert_eq!(Timestamp::parse_field("at", &text), Ok(at));
        let day = at.day();
        assert_eq!(Day::parse_field("day", &day.to_string()), Ok(day), "{day}");
        assert!(day.start() <= at && at < day.start().plus_seconds(86_400));
        let moved = at.plus_seconds(input.seconds);
        assert!(Timestamp::min() <= moved && moved <= Timestamp::max());
        assert_eq!(moved.to_string().len(), text.len());
        if input.seconds >= 0 {
            assert!(moved >= at);
        } else {
            assert!(moved <= at);
        }
        if let Ok(other) = Timestamp::parse_field("to", input.other) {
            let (from, to) = if at <= other { (at, other) } else { (other, at) };
            let range = TimeRange::new(from, to).expect("ordered");
            assert!(range.day_count() >= 1);
            if range.day_count() <= MAX_TYPE_RANGE_DAYS {
                let days = range.days();
                assert_eq!(days.len() as i64, range.day_count());
                assert_eq!(days.first(), Some(&from.day()));
                assert_eq!(days.last(), Some(&to.day()));
            }
        }
    }
    if let Some(at) = Timestamp::from_epoch_millis(input.millis) {
        assert_eq!(Timestamp::parse_field("at", &at.to_string()), Ok(at));
    }
    if let Ok(day) = Day::parse_field("day", input.text) {
        assert_eq!(day.to_string(), input.text, "a day has one spelling");
    }
});
