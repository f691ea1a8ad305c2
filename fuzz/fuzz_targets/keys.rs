//! Key parsing (`shared::model::keys::ItemKey::parse`): never panics, and whatever it accepts is a
//! key the builders produce: building it again and parsing that gives the same item, and for
//! keys without a timestamp, the very same strings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared::model::keys::ItemKey;
use shared::model::timestamp::Day;

#[derive(Debug)]
struct Input<'a> {
    pk: &'a str,
    sk: &'a str,
}

// The input is `PK\nSK` as UTF-8 text (seeds in fuzz/seeds/keys/ are real keys).
fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (pk, sk) = text.split_once('\n').unwrap_or((text, ""));
    let input = Input { pk, sk };
    let Ok(key) = ItemKey::parse(input.pk, input.sk) else {
        return;
    };
    let built = key.primary_key();
    assert_eq!(
        ItemKey::parse(&built.pk, &built.sk).as_ref(),
        Ok(&key),
        "{input:?} -> {built:?}"
    );
    match &key {
        // Event keys hold a timestamp, which parsing normalizes to UTC milliseconds.
        ItemKey::Event { .. } => assert!(built.sk.len() >= "EVENT#0000-01-01T00:00:00.000Z#".len() + 1),
        // A day parses from several spellings of nothing else; it renders one way.
        ItemKey::Report { day } | ItemKey::Checkpoint { day, .. } => {
            assert_eq!(Day::parse_field("day", &day.to_string()).as_ref(), Ok(day))
        }
        _ => assert_eq!((built.pk.as_str(), built.sk.as_str()), (input.pk, input.sk)),
    }
    for part in [&built.pk, &built.sk] {
        assert!(!part.chars().any(char::is_control), "{part:?}");
    }
});
