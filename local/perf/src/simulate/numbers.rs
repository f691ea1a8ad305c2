//! How the report writes figures.

/// A figure as the report writes it: grouped thousands, one decimal, or two significant
/// digits below 1.
pub fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 100.0 {
        group(v.round() as u64)
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        // Two significant digits, however small.
        let decimals = (-v.log10()).ceil() as usize + 1;
        format!("{v:.decimals$}")
    }
}

/// `1234567` as `1,234,567`.
pub fn group(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A share as a percentage with one decimal.
pub(super) fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// A count for the cost tables: whole millions from 100 M, one decimal from 1 M, grouped below.
pub fn millions(v: f64) -> String {
    if v >= 1e8 {
        format!("{} M", group((v / 1e6).round() as u64))
    } else if v >= 1e6 {
        format!("{:.1} M", v / 1e6)
    } else {
        group(v.round() as u64)
    }
}
