//! The live state's stored readings (`shared::model::readings`): decoding any bytes never panics,
//! and whatever decodes encodes back to readings that decode the same (NaN aside, which no
//! event carries: JSON has none).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared::model::readings::EventValue;
use shared::model::readings::LiveReadings;

fn has_nan(readings: &LiveReadings) -> bool {
    let nan = |v: &EventValue| matches!(v, EventValue::Number(n) if n.is_nan());
    readings.latest.values().any(|r| nan(&r.1)) || readings.recent.iter().any(|e| nan(&e.3))
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(readings) = LiveReadings::decode(bytes) else {
        return;
    };
    if has_nan(&readings) {
        return;
    }
    let again = LiveReadings::decode(&readings.encode()).expect("encoded readings decode");
    assert_eq!(again, readings);
});
