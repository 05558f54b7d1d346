//! Inference with the run as the unit of replication.
//!
//! The calls of one run (one boot, one session) share that run's boot, emulation speed,
//! memory layout and workload: they are not independent samples of "the kernel". A claim
//! about two kernels therefore rests on per-run summaries (one median per run, one mean per
//! run, …): Welch's t on those summaries carries the run-to-run variation into every interval
//! and p-value, and with one run per side there is no estimate of that variation at all.
use serde::Serialize;

use super::{
    dist::{t_cdf, t_quantile},
    nearest_rank,
};

/// A percentile of one run enters the per-run statistics only when the run has this many
/// values at or beyond it on each side; fewer, and it is one of the few largest values (p99.9
/// of 3000 calls is the 3rd largest), too noisy to stand for the run.
pub const MIN_TAIL: u64 = 10;

/// Whether `n` calls have at least [`MIN_TAIL`] values at or beyond percentile `p` on each
/// side.
pub fn enough_tail(n: usize, p: f64) -> bool {
    let n = n as u64;
    if n == 0 {
        return false;
    }
    let k = nearest_rank(p, n);
    k >= MIN_TAIL && n - k + 1 >= MIN_TAIL
}

/// An estimate of `after − before` with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

/// Welch's t on per-run summaries: `mean(after) − mean(before)` of the runs' values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunTest {
    /// After − before of the means of the per-run values.
    pub estimate: f64,
    /// 95 % interval of the estimate (Welch).
    pub lo: f64,
    pub hi: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value of "no difference".
    pub p_value: f64,
    /// Standard deviation of the per-run values, each side: the run-to-run variation.
    pub sd_before: f64,
    pub sd_after: f64,
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, f64::NAN);
    }
    let ss: f64 = v.iter().map(|x| (x - mean).powi(2)).sum();
    (mean, (ss / (n - 1.0)).sqrt())
}

/// Welch's test of the per-run values of two sides; `None` unless each side has at least two
/// runs (with one run a side's run-to-run variation is unknown).
pub fn welch(before: &[f64], after: &[f64]) -> Option<RunTest> {
    if before.len() < 2 || after.len() < 2 {
        return None;
    }
    let (mb, sb) = mean_sd(before);
    let (ma, sa) = mean_sd(after);
    let (qb, qa) = (sb * sb / before.len() as f64, sa * sa / after.len() as f64);
    let se = (qb + qa).sqrt();
    let estimate = ma - mb;
    if se == 0.0 {
        // Every run of both sides gave the same value: no variation to test against.
        return Some(RunTest {
            estimate,
            lo: estimate,
            hi: estimate,
            df: f64::INFINITY,
            p_value: if estimate == 0.0 { 1.0 } else { 0.0 },
            sd_before: sb,
            sd_after: sa,
        });
    }
    let df = (qb + qa).powi(2)
        / (qb * qb / (before.len() as f64 - 1.0) + qa * qa / (after.len() as f64 - 1.0));
    let t = estimate / se;
    let half = t_quantile(0.975, df) * se;
    Some(RunTest {
        estimate,
        lo: estimate - half,
        hi: estimate + half,
        df,
        p_value: (2.0 * t_cdf(-t.abs(), df)).min(1.0),
        sd_before: sb,
        sd_after: sa,
    })
}

/// A difference in every run, where one side's runs do not vary at all: its per-run value
/// is then exact (under the instruction clock a path length, the same in every boot), and
/// every run of the other side lies beyond it in one direction. Returns the smallest and
/// largest `after − before` over all pairs of runs (same sign), or `None`: fewer than two
/// runs a side, neither side constant, or the sides overlapping.
///
/// Welch's t cannot state this: with one side's SD at 0 its degrees of freedom fall to the
/// other side's runs less one (1 with two runs), and a difference present in every call of
/// every run came out unresolved. Two varying sides never qualify, however they separate:
/// two runs a side of one kernel separate by chance one time in three.
pub fn every_run(before: &[f64], after: &[f64]) -> Option<[f64; 2]> {
    if before.len() < 2 || after.len() < 2 {
        return None;
    }
    let constant = |v: &[f64]| v.iter().all(|x| *x == v[0]);
    if !constant(before) && !constant(after) {
        return None;
    }
    let diffs: Vec<f64> = after
        .iter()
        .flat_map(|a| before.iter().map(move |b| a - b))
        .collect();
    let (lo, hi) = diffs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), d| {
            (lo.min(*d), hi.max(*d))
        });
    (lo > 0.0 || hi < 0.0).then_some([lo, hi])
}

/// Holm's step-down adjustment of a family of p-values (same order as given): controls the
/// chance of any false "significant" among them at the nominal level, whatever their
/// dependence.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Power of a two-sided Welch test at level `alpha` with `n` runs a side, equal run-to-run
/// standard deviation `sd`, for a true difference `effect` (noncentral t approximated by a
/// shifted central t, accurate to a few percent for the sizes used here).
pub fn power(n: u32, sd: f64, effect: f64, alpha: f64) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let df = 2.0 * (f64::from(n) - 1.0);
    let se = sd * (2.0 / f64::from(n)).sqrt();
    let crit = t_quantile(1.0 - alpha / 2.0, df);
    let shift = effect.abs() / se;
    (1.0 - t_cdf(crit - shift, df)) + t_cdf(-crit - shift, df)
}

/// Runs per side that resolve a difference `effect` with 80 % power at level `alpha`, given a
/// run-to-run standard deviation `sd`; `None` beyond `max` runs (or for no effect).
pub fn runs_needed(sd: f64, effect: f64, alpha: f64, max: u32) -> Option<u32> {
    if effect == 0.0 || !sd.is_finite() || !effect.is_finite() {
        return None;
    }
    (2..=max).find(|&n| power(n, sd, effect, alpha) >= 0.8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::Rng;

    #[test]
    fn welch_matches_hand_computation() {
        // By hand: variances 5/3 and 1, se² = 5/12 + 1/3 = 0.75, t = 4.5 / √0.75 = 5.196,
        // df = 0.75² / ((5/12)²/3 + (1/3)²/2) = 4.959, two-sided p = 0.0036.
        let w = welch(&[14.0, 15.0, 16.0, 17.0], &[10.0, 11.0, 12.0]).expect("test");
        assert!((w.estimate + 4.5).abs() < 1e-12, "{w:?}");
        let se: f64 = (1.666_666_7_f64 / 4.0 + 1.0 / 3.0).sqrt();
        let df = (1.666_666_7_f64 / 4.0 + 1.0 / 3.0).powi(2)
            / ((1.666_666_7_f64 / 4.0).powi(2) / 3.0 + (1.0_f64 / 3.0).powi(2) / 2.0);
        assert!((w.df - df).abs() < 1e-6, "{w:?} {df}");
        assert!((w.df - 4.959).abs() < 0.001, "{w:?}");
        assert!(
            (w.p_value - 2.0 * t_cdf(-4.5 / se, df)).abs() < 1e-9,
            "{w:?}"
        );
        assert!((w.p_value - 0.0036).abs() < 0.0001, "{w:?}");
        assert!(w.hi < 0.0, "{w:?}");
        assert_eq!(welch(&[1.0], &[1.0, 2.0]), None);
        // Identical constant runs: no difference, p = 1.
        let same = welch(&[3.0, 3.0], &[3.0, 3.0]).expect("test");
        assert_eq!((same.p_value, same.estimate), (1.0, 0.0));
    }

    /// The instruction clock's case: one side the same in every run, the other beyond it in
    /// every run; not when both vary (a chance separation of two runs a side), not when they
    /// overlap or touch, not with one run.
    #[test]
    fn every_run_needs_a_constant_side_and_no_overlap() {
        // patch-ab seed-000 under icount: after 231 in every call of both loads.
        assert_eq!(
            every_run(&[251.0, 256.0], &[231.0, 231.0]),
            Some([-25.0, -20.0])
        );
        assert_eq!(
            every_run(&[231.0, 231.0], &[245.0, 245.0]),
            Some([14.0, 14.0])
        );
        assert_eq!(every_run(&[251.0, 256.0], &[231.0, 233.0]), None);
        assert_eq!(every_run(&[231.0, 256.0], &[231.0, 231.0]), None);
        assert_eq!(every_run(&[568.0, 568.0], &[568.0, 568.0]), None);
        assert_eq!(every_run(&[251.0], &[231.0, 231.0]), None);
        // Welch on the same numbers: df 1, unresolved; and with both constant, no NaN.
        let w = welch(&[251.0, 256.0], &[231.0, 231.0]).expect("two a side");
        assert!((w.df - 1.0).abs() < 1e-9 && w.p_value > 0.05, "{w:?}");
        let w = welch(&[568.0, 568.0], &[568.0, 568.0]).expect("two a side");
        assert!(
            w.p_value == 1.0 && w.estimate == 0.0 && !w.lo.is_nan(),
            "{w:?}"
        );
    }

    #[test]
    fn tails_need_ten_values_beyond_the_percentile() {
        assert!(enough_tail(2000, 50.0) && enough_tail(2000, 99.0));
        // p99.9 of 2000 calls has 2 values beyond it.
        assert!(!enough_tail(2000, 99.9));
        assert!(!enough_tail(0, 50.0) && !enough_tail(15, 50.0) && enough_tail(19, 50.0));
    }

    #[test]
    fn holm_adjusts_step_down_and_keeps_order() {
        // m = 4: sorted 0.01, 0.02, 0.03, 0.5 → 0.04, 0.06, 0.06 (monotone), 0.5.
        let adj = holm(&[0.03, 0.5, 0.01, 0.02]);
        let want = [0.06, 0.5, 0.04, 0.06];
        for (a, w) in adj.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adj:?}");
        }
        // 2 × 0.8 caps at 1, and the larger p cannot come out smaller.
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
        assert_eq!(holm(&[0.9, 0.01]), vec![0.9, 0.02]);
        assert!(holm(&[]).is_empty());
    }

    /// The power formula against simulation: Welch on normal per-run values.
    #[test]
    fn power_matches_simulation() {
        let mut rng = Rng::new(7);
        for (n, effect) in [(3u32, 2.0), (5, 1.5), (8, 1.0)] {
            let trials = 4000;
            let hits = (0..trials)
                .filter(|_| {
                    let b: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
                    let a: Vec<f64> = (0..n).map(|_| rng.normal() + effect).collect();
                    welch(&b, &a).expect("test").p_value < 0.05
                })
                .count();
            let sim = hits as f64 / f64::from(trials);
            let model = power(n, 1.0, effect, 0.05);
            // Welch's df is at most 2(n − 1), so the model (pooled df) is a little optimistic.
            assert!(
                (sim - model).abs() < 0.06,
                "n={n} effect={effect}: simulated {sim:.3}, model {model:.3}"
            );
        }
        assert_eq!(runs_needed(1.0, 0.0, 0.05, 50), None);
        let n = runs_needed(1.0, 1.0, 0.05, 50).expect("n");
        assert!(
            (16..=18).contains(&n),
            "{n}: ~17 per side for d = 1 at 80 %"
        );
        assert_eq!(runs_needed(1.0, 0.01, 0.05, 50), None);
    }
}
