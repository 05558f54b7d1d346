//! A probe floor's distribution: the durations of an empty function, whole (as a histogram)
//! and summarised (median, spread), from exact durations or the kernel's buckets (pure; the
//! floor that uses it is `calibration`).
use serde::{Deserialize, Serialize};

use super::nearest_rank;

/// One histogram bucket of a floor: durations in `[lo_ns, hi_ns)` (`hi_ns == lo_ns + 1` for an
/// exact duration; `u64::MAX` for the open-ended last kernel bucket), and how many calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloorBucket {
    pub lo_ns: u64,
    pub hi_ns: u64,
    pub count: u64,
}

impl FloorBucket {
    /// The value a bucket stands for: the middle of the integers it holds (the value itself
    /// for an exact bucket; the low edge for the open-ended one).
    fn value(&self) -> f64 {
        if self.hi_ns == u64::MAX {
            self.lo_ns as f64
        } else {
            (self.lo_ns as f64 + self.hi_ns as f64 - 1.0) / 2.0
        }
    }

    fn width(&self) -> u64 {
        self.hi_ns.saturating_sub(self.lo_ns)
    }
}

/// A floor distribution: the whole histogram and the numbers derived from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorDistribution {
    /// Timed calls of the empty function.
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub p5_ns: f64,
    pub p25_ns: f64,
    /// The central value subtracted from raw latencies.
    pub median_ns: f64,
    pub p75_ns: f64,
    pub p95_ns: f64,
    /// Per-call spread: `(p95 − p5) / 2 + (resolution − 1) / 2` (see the module
    /// documentation).
    pub spread_ns: f64,
    /// Widest bucket between p5 and p95 (1: exact durations, stream mode).
    pub resolution_ns: u64,
    /// Non-empty buckets, lowest first.
    pub buckets: Vec<FloorBucket>,
}

impl FloorDistribution {
    /// From exact durations (stream mode). `None` without any.
    pub fn from_durations(durations: &[u64]) -> Option<FloorDistribution> {
        let mut sorted = durations.to_vec();
        sorted.sort_unstable();
        let mut buckets: Vec<FloorBucket> = Vec::new();
        for &d in &sorted {
            match buckets.last_mut() {
                Some(b) if b.lo_ns == d => b.count += 1,
                _ => buckets.push(FloorBucket {
                    lo_ns: d,
                    hi_ns: d.saturating_add(1),
                    count: 1,
                }),
            }
        }
        let sum: u128 = sorted.iter().map(|&d| u128::from(d)).sum();
        Self::from_buckets(buckets, Some(sum), *sorted.first()?, *sorted.last()?)
    }

    /// From histogram buckets (kernel mode: the kernel's buckets, with its exact sum, min and
    /// max). Buckets may come in any order; empty ones are dropped. `None` when all are empty.
    pub fn from_buckets(
        mut buckets: Vec<FloorBucket>,
        sum_ns: Option<u128>,
        min_ns: u64,
        max_ns: u64,
    ) -> Option<FloorDistribution> {
        buckets.retain(|b| b.count > 0);
        buckets.sort_unstable_by_key(|b| b.lo_ns);
        let count: u64 = buckets.iter().map(|b| b.count).sum();
        if count == 0 {
            return None;
        }
        let at = |p: f64| -> (f64, u64) {
            let rank = nearest_rank(p, count);
            let mut seen = 0;
            for (i, b) in buckets.iter().enumerate() {
                seen += b.count;
                if seen >= rank {
                    return (b.value(), i as u64);
                }
            }
            (buckets[buckets.len() - 1].value(), buckets.len() as u64 - 1)
        };
        let (p5, i5) = at(5.0);
        let (p95, i95) = at(95.0);
        let resolution = buckets[i5 as usize..=i95 as usize]
            .iter()
            .map(FloorBucket::width)
            .max()
            .unwrap_or(1)
            .max(1);
        let mean = match sum_ns {
            Some(s) => s as f64 / count as f64,
            None => {
                buckets
                    .iter()
                    .map(|b| b.value() * b.count as f64)
                    .sum::<f64>()
                    / count as f64
            }
        };
        Some(FloorDistribution {
            count,
            min_ns,
            max_ns,
            mean_ns: mean,
            p5_ns: p5,
            p25_ns: at(25.0).0,
            median_ns: at(50.0).0,
            p75_ns: at(75.0).0,
            p95_ns: p95,
            spread_ns: (p95 - p5) / 2.0 + (resolution as f64 - 1.0) / 2.0,
            resolution_ns: resolution,
            buckets,
        })
    }

    /// A raw latency with the floor's central value taken out (may be negative).
    pub fn correct(&self, raw_ns: f64) -> f64 {
        raw_ns - self.median_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread_of_exact_durations() {
        // 1..=100: nearest-rank p5 = 5, p50 = 50, p95 = 95.
        let d: Vec<u64> = (1..=100).rev().collect();
        let f = FloorDistribution::from_durations(&d).expect("floor");
        assert_eq!(f.count, 100);
        assert_eq!((f.p5_ns, f.median_ns, f.p95_ns), (5.0, 50.0, 95.0));
        assert_eq!((f.p25_ns, f.p75_ns), (25.0, 75.0));
        assert_eq!(f.resolution_ns, 1);
        assert_eq!(f.spread_ns, 45.0);
        assert_eq!((f.min_ns, f.max_ns), (1, 100));
        assert!((f.mean_ns - 50.5).abs() < 1e-9);
        assert_eq!(f.buckets.len(), 100);
        assert_eq!(FloorDistribution::from_durations(&[]), None);
    }

    #[test]
    fn interrupts_move_the_mean_not_the_median() {
        // 10 000 probe costs of 300..=309 ns, and 50 calls an interrupt stretched to 40 µs.
        let mut d: Vec<u64> = (0..10_000).map(|i| 300 + i % 10).collect();
        d.extend(std::iter::repeat_n(40_000, 50));
        let f = FloorDistribution::from_durations(&d).expect("floor");
        assert_eq!(f.median_ns, 305.0);
        assert!(f.mean_ns > 500.0, "{}", f.mean_ns);
        assert_eq!((f.p5_ns, f.p95_ns), (300.0, 309.0));
        assert_eq!(f.spread_ns, 4.5);
        // Repeated durations share one bucket.
        assert_eq!(f.buckets.len(), 11);
        assert_eq!(f.buckets[0].count, 1000);
    }

    #[test]
    fn kernel_buckets_round_to_their_middle_and_add_their_width() {
        // 10 ns linear buckets [300,310) 60 calls, [310,320) 40 calls.
        let b = |lo, count| FloorBucket {
            lo_ns: lo,
            hi_ns: lo + 10,
            count,
        };
        let f = FloorDistribution::from_buckets(
            vec![b(310, 40), b(300, 60), b(900, 0)],
            Some(30_800),
            301,
            318,
        )
        .expect("floor");
        assert_eq!(f.count, 100);
        assert_eq!(f.buckets.len(), 2, "empty buckets are dropped");
        assert_eq!(f.median_ns, 304.5);
        assert_eq!((f.p5_ns, f.p95_ns), (304.5, 314.5));
        assert_eq!(f.resolution_ns, 10);
        assert_eq!(f.spread_ns, 5.0 + 4.5);
        assert!((f.mean_ns - 308.0).abs() < 1e-9);
        assert_eq!(
            FloorDistribution::from_buckets(vec![b(0, 0)], None, 0, 0),
            None
        );
        // The open-ended last bucket stands for its low edge.
        let open = FloorBucket {
            lo_ns: 1 << 40,
            hi_ns: u64::MAX,
            count: 1,
        };
        let f = FloorDistribution::from_buckets(vec![open], None, 1 << 40, 1 << 41).expect("f");
        assert_eq!(f.median_ns, (1u64 << 40) as f64);
    }
}
