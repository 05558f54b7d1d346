//! Confidence intervals for differences between two latency samples: percentile differences
//! by bootstrap, the mean difference by Welch's t interval.
use serde::Serialize;

use super::{dist::t_quantile, nearest_rank, percentile, rng::Rng};

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 4000;
/// Fixed seed: the same captures always give the same intervals.
pub const SEED: u64 = 0x64_616d_6f6e; // "damon"
/// A percentile's interval needs this many values at or beyond it on each side; fewer, and
/// the bootstrap only reshuffles the few largest values (p99.9 of 3000 calls is the 3rd
/// largest), which would print a confident-looking but meaningless interval.
pub const MIN_TAIL: u64 = 10;

/// An estimate of `after − before` with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// The interval lies entirely on one side of 0.
    pub fn excludes_zero(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }
}

/// The `p` percentile of a resample (with replacement) of sorted `data`, drawn without
/// building the resample: the k-th smallest of n uniform indices ⌊n·U⌋ is ⌊n·U₍ₖ₎⌋, and the
/// k-th order statistic of n uniforms is Beta(k, n − k + 1). Exact, and O(1) per resample
/// however many calls a capture holds.
fn resampled_percentile(sorted: &[u64], p: f64, rng: &mut Rng) -> u64 {
    let n = sorted.len() as u64;
    let k = nearest_rank(p, n);
    let u = rng.beta(k as f64, (n - k + 1) as f64);
    let i = ((u * n as f64) as usize).min(sorted.len() - 1);
    sorted[i]
}

fn enough_tail(n: usize, p: f64) -> bool {
    let n = n as u64;
    let k = nearest_rank(p, n);
    k >= MIN_TAIL && n - k + 1 >= MIN_TAIL
}

/// Percentile bootstrap interval of `percentile(after, p) − percentile(before, p)`; `None`
/// when either sample has too few values around that percentile.
pub fn percentile_delta(before: &[u64], after: &[u64], p: f64, rng: &mut Rng) -> Option<Interval> {
    if !enough_tail(before.len(), p) || !enough_tail(after.len(), p) {
        return None;
    }
    let estimate = percentile(after, p)? as f64 - percentile(before, p)? as f64;
    let mut deltas: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            resampled_percentile(after, p, rng) as f64 - resampled_percentile(before, p, rng) as f64
        })
        .collect();
    deltas.sort_unstable_by(f64::total_cmp);
    Some(Interval {
        estimate,
        lo: deltas[(RESAMPLES as f64 * 0.025) as usize],
        hi: deltas[(RESAMPLES as f64 * 0.975).ceil() as usize - 1],
    })
}

fn mean_var(sorted: &[u64]) -> (f64, f64) {
    let n = sorted.len() as f64;
    let mean = sorted.iter().map(|&v| v as f64).sum::<f64>() / n;
    let ss: f64 = sorted.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
    (mean, ss / (n - 1.0))
}

/// Welch's 95 % interval of `mean(after) − mean(before)` (unequal variances,
/// Welch–Satterthwaite degrees of freedom); `None` with fewer than 2 values on a side.
pub fn mean_delta(before: &[u64], after: &[u64]) -> Option<Interval> {
    if before.len() < 2 || after.len() < 2 {
        return None;
    }
    let (mb, vb) = mean_var(before);
    let (ma, va) = mean_var(after);
    let (qb, qa) = (vb / before.len() as f64, va / after.len() as f64);
    let se = (qb + qa).sqrt();
    let estimate = ma - mb;
    if se == 0.0 {
        return Some(Interval {
            estimate,
            lo: estimate,
            hi: estimate,
        });
    }
    let df = (qb + qa).powi(2)
        / (qb * qb / (before.len() as f64 - 1.0) + qa * qa / (after.len() as f64 - 1.0));
    let t = t_quantile(0.975, df);
    Some(Interval {
        estimate,
        lo: estimate - t * se,
        hi: estimate + t * se,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_matches_hand_computation() {
        // before 1..=10 (mean 5.5, var 55/6), after 11..=20 (same variance): Δ = 10,
        // se = sqrt(2 · 55/6 / 10) = 1.354006, df = 18, t(0.975, 18) = 2.100922.
        let before: Vec<u64> = (1..=10).collect();
        let after: Vec<u64> = (11..=20).collect();
        let i = mean_delta(&before, &after).expect("interval");
        assert!((i.estimate - 10.0).abs() < 1e-12);
        let half = 2.100_922_04 * 1.354_006_4;
        assert!((i.hi - (10.0 + half)).abs() < 1e-5, "{i:?}");
        assert!((i.lo - (10.0 - half)).abs() < 1e-5, "{i:?}");
        assert!(i.excludes_zero());
        assert_eq!(mean_delta(&[1], &[2, 3]), None);
    }

    #[test]
    fn percentile_interval_covers_a_known_shift() {
        let mut rng = Rng::new(SEED);
        // Uniform-ish samples 0..2000 and the same shifted by +300: Δ p50 = 300.
        let before: Vec<u64> = (0..2000).collect();
        let after: Vec<u64> = (300..2300).collect();
        let i = percentile_delta(&before, &after, 50.0, &mut rng).expect("interval");
        assert_eq!(i.estimate, 300.0);
        assert!(i.lo < 300.0 && 300.0 < i.hi && i.excludes_zero(), "{i:?}");
        // The bootstrap standard error of a median of n = 2000 uniforms over 2000 is about
        // 2000 / (2·sqrt(2000)) ≈ 22; the Δ interval (√2 of that, ×1.96) is about ±62.
        assert!(i.hi - i.lo > 60.0 && i.hi - i.lo < 200.0, "{i:?}");
        // Identical samples: the interval straddles 0.
        let i = percentile_delta(&before, &before, 90.0, &mut rng).expect("interval");
        assert!(!i.excludes_zero(), "{i:?}");
        // p99.9 of 2000 values has 2 values beyond it: no interval.
        assert_eq!(percentile_delta(&before, &after, 99.9, &mut rng), None);
    }

    /// The order-statistic shortcut against literal resampling: same distribution of the
    /// resampled median (compared through its mean and spread).
    #[test]
    fn order_statistic_shortcut_matches_literal_resampling() {
        let data: Vec<u64> = (0..301).map(|i| (i * i) % 1000).collect::<Vec<_>>();
        let mut sorted = data.clone();
        sorted.sort_unstable();
        let mut rng = Rng::new(1);
        let draws = 20_000;
        let fast: Vec<f64> = (0..draws)
            .map(|_| resampled_percentile(&sorted, 50.0, &mut rng) as f64)
            .collect();
        let slow: Vec<f64> = (0..draws)
            .map(|_| {
                let mut r: Vec<u64> = (0..sorted.len())
                    .map(|_| sorted[(rng.uniform() * sorted.len() as f64) as usize])
                    .collect();
                r.sort_unstable();
                percentile(&r, 50.0).unwrap_or(0) as f64
            })
            .collect();
        let stats = |v: &[f64]| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            (
                m,
                (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt(),
            )
        };
        let ((mf, sf), (ms, ss)) = (stats(&fast), stats(&slow));
        assert!((mf - ms).abs() < 0.05 * ss + 2.0, "{mf} {ms}");
        assert!((sf - ss).abs() < 0.05 * ss, "{sf} {ss}");
    }
}
