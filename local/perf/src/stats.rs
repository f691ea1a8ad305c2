//! The one statistics module of the performance tools: every p50, p99, min and max in a
//! report is [`quantile`], so "p99" means the same thing in `make bench`, `make cold-start`,
//! `make load` and the throughput commands.
//!
//! The definition is **nearest rank**: the `q` quantile of `n` values is the value of rank
//! `ceil(q * n)` (1-based, at least 1) in ascending order. It is always one of the measured
//! values (never an interpolation), p0 is the minimum and p100 the maximum.

use std::time::Duration;

/// The `q` quantile (0..=1) of `values` by nearest rank; 0 when there are none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    nearest_rank(&sorted, q).copied().unwrap_or(0.0)
}

/// The `q` quantile (0..=1) of `durations` by nearest rank; zero when there are none.
pub fn quantile_duration(durations: &[Duration], q: f64) -> Duration {
    let mut sorted = durations.to_vec();
    sorted.sort();
    nearest_rank(&sorted, q).copied().unwrap_or_default()
}

/// The value of rank `ceil(q * n)` (clamped to 1..=n) in an ascending slice.
fn nearest_rank<T>(sorted: &[T], q: f64) -> Option<&T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert_eq!(quantile(&v, 0.99), 5.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn duration_quantiles_are_nearest_rank() {
        let d: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(quantile_duration(&d, 0.5), Duration::from_millis(50));
        assert_eq!(quantile_duration(&d, 0.99), Duration::from_millis(99));
        assert_eq!(quantile_duration(&d, 1.0), Duration::from_millis(100));
        assert_eq!(quantile_duration(&[], 0.5), Duration::ZERO);
    }
}
