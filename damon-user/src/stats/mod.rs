//! Pure statistics over call durations (no I/O).
pub mod buckets;
pub mod calibration;
pub mod dist;
#[cfg(test)]
mod drift;
pub mod floor;
pub mod heatmap;
pub mod histogram;
pub mod interval_tracker;
pub mod intervals;
pub mod kernel_hist;
#[cfg(test)]
mod proptests;
pub mod ranktest;
// Synthetic data: tests and the instrument commands.
#[cfg(any(test, feature = "instruments"))]
pub mod rng;
pub mod runs;
pub mod window;

use serde::Serialize;

/// The 1-based nearest rank of percentile `p` among `n` values: `ceil(p/100 · n)`, at least 1.
///
/// Computed in integers at a resolution of 0.001 %: in floating point `99.9 / 100 · 10000`
/// is 9990.000000000002, whose ceiling would pick the wrong element.
pub fn nearest_rank(p: f64, n: u64) -> u64 {
    let k = (p.clamp(0.0, 100.0) * 1000.0).round() as u128;
    let rank = (k * u128::from(n)).div_ceil(100_000);
    (rank as u64).clamp(1, n.max(1))
}

/// Nearest-rank percentile of sorted data: the smallest value with at least `p`% of the data at
/// or below it. `p` in (0, 100].
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = nearest_rank(p, sorted.len() as u64) as usize;
    Some(sorted[rank - 1])
}

/// Summary of a latency distribution, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyStats {
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LatencyStats {
    /// Sorts `durations` in place; `None` when empty.
    pub fn from_durations(durations: &mut [u64]) -> Option<LatencyStats> {
        durations.sort_unstable();
        let sum: u128 = durations.iter().map(|&d| u128::from(d)).sum();
        Some(LatencyStats {
            min_ns: *durations.first()?,
            mean_ns: sum as f64 / durations.len() as f64,
            p50_ns: percentile(durations, 50.0)?,
            p90_ns: percentile(durations, 90.0)?,
            p95_ns: percentile(durations, 95.0)?,
            p99_ns: percentile(durations, 99.0)?,
            p999_ns: percentile(durations, 99.9)?,
            max_ns: *durations.last()?,
        })
    }
}

/// Summary of returned values (hotness scores, pages migrated).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ValueStats {
    pub min: i64,
    pub mean: f64,
    pub max: i64,
    pub sum: i64,
}

impl ValueStats {
    pub fn from_values(values: impl IntoIterator<Item = i64>) -> Option<ValueStats> {
        let mut it = values.into_iter();
        let first = it.next()?;
        let (mut min, mut max, mut sum, mut n) = (first, first, i128::from(first), 1u64);
        for v in it {
            min = min.min(v);
            max = max.max(v);
            sum += i128::from(v);
            n += 1;
        }
        Some(ValueStats {
            min,
            max,
            mean: sum as f64 / n as f64,
            sum: sum.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Oracle: the definition of nearest rank (the first value with at least p % of the data
    /// at or below it), computed the slow way in exact integers (p has three decimals here).
    fn oracle(sorted: &[u64], p: f64) -> u64 {
        let n = sorted.len() as u128;
        let p_milli = (p * 1000.0).round() as u128;
        for (i, &v) in sorted.iter().enumerate() {
            if (i as u128 + 1) * 100_000 >= p_milli * n {
                return v;
            }
        }
        sorted[sorted.len() - 1]
    }

    #[test]
    fn percentile_edges() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 1.0), Some(7));
        assert_eq!(percentile(&[7], 100.0), Some(7));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.5), Some(1));
        for n in 1..60u64 {
            let v: Vec<u64> = (0..n).map(|i| i * i % 17).collect::<Vec<_>>();
            let mut s = v.clone();
            s.sort_unstable();
            for p in [1.0, 10.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
                assert_eq!(percentile(&s, p), Some(oracle(&s, p)), "n={n} p={p}");
            }
        }
    }

    #[test]
    fn p99_9_of_ten_thousand_is_the_9990th() {
        let v: Vec<u64> = (1..=10_000).collect();
        assert_eq!(percentile(&v, 99.9), Some(9990));
        assert_eq!(nearest_rank(99.9, 10_000), 9990);
        assert_eq!(nearest_rank(50.0, 0), 1);
    }

    #[test]
    fn latency_stats_are_ordered() {
        let mut d = vec![40, 10, 30, 20, 1000];
        let s = LatencyStats::from_durations(&mut d).expect("stats");
        assert_eq!((s.min_ns, s.p50_ns, s.max_ns), (10, 30, 1000));
        assert!((s.mean_ns - 220.0).abs() < 1e-9);
        assert!(
            s.min_ns <= s.p50_ns
                && s.p50_ns <= s.p90_ns
                && s.p90_ns <= s.p99_ns
                && s.p99_ns <= s.max_ns
        );
        assert_eq!(LatencyStats::from_durations(&mut []), None);
    }

    #[test]
    fn value_stats() {
        let s = ValueStats::from_values([11, 85, 40]).expect("stats");
        assert_eq!((s.min, s.max, s.sum), (11, 85, 136));
        assert_eq!(ValueStats::from_values([]), None);
    }
}
