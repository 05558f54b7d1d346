//! The Mann–Whitney U test (Wilcoxon rank-sum) and Cliff's delta, over sorted durations.
//!
//! Rank tests suit latencies: they need no assumption about the shape of a distribution with
//! a long tail, and a few huge outliers (an interrupt, a TCG hiccup) cannot dominate them.
use serde::Serialize;

use super::dist::normal_cdf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PMethod {
    /// The exact null distribution of U (small samples without ties).
    Exact,
    /// Normal approximation with tie and continuity corrections.
    Normal,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MannWhitney {
    /// Pairs (before, after) with after > before, ties counting ½.
    pub u_after: f64,
    /// Two-sided p-value of "both samples come from the same distribution".
    pub p_value: f64,
    pub method: PMethod,
    /// P(after > before) − P(after < before) over all pairs, in [−1, 1]; negative when after
    /// tends to be faster.
    pub cliffs_delta: f64,
}

/// Samples no larger than this (each), and without ties, get the exact p-value.
const EXACT_MAX: usize = 50;

/// Counts pairs with after > before and after == before, and Σ(t³ − t) over tie groups of
/// the pooled sample, in one merge of the two sorted slices.
fn pair_counts(before: &[u64], after: &[u64]) -> (u128, u128, f64) {
    let (mut greater, mut equal, mut ties) = (0u128, 0u128, 0f64);
    let (mut i, mut j) = (0, 0);
    while i < before.len() || j < after.len() {
        let v = match (before.get(i), after.get(j)) {
            (Some(&b), Some(&a)) => b.min(a),
            (Some(&b), None) => b,
            (None, Some(&a)) => a,
            (None, None) => break,
        };
        let bi = before[i..].partition_point(|&x| x == v);
        let aj = after[j..].partition_point(|&x| x == v);
        // Every after equal to v beats the i befores below v and ties the bi equal ones.
        greater += (aj as u128) * (i as u128);
        equal += (aj as u128) * (bi as u128);
        let t = (bi + aj) as f64;
        ties += t * t * t - t;
        i += bi;
        j += aj;
    }
    (greater, equal, ties)
}

/// The test on two sorted samples; `None` when either is empty.
pub fn mann_whitney(before: &[u64], after: &[u64]) -> Option<MannWhitney> {
    let (n1, n2) = (before.len(), after.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (greater, equal, ties) = pair_counts(before, after);
    let pairs = (n1 as f64) * (n2 as f64);
    let less = (n1 as u128) * (n2 as u128) - greater - equal;
    let u_after = greater as f64 + equal as f64 / 2.0;
    let cliffs_delta = (greater as f64 - less as f64) / pairs;
    let (p_value, method) = if ties == 0.0 && n1 <= EXACT_MAX && n2 <= EXACT_MAX {
        (exact_p(n1, n2, greater as usize), PMethod::Exact)
    } else {
        let n = (n1 + n2) as f64;
        let var = pairs / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
        let p = if var <= 0.0 {
            1.0 // every value tied: no evidence of any difference
        } else {
            let z = ((u_after - pairs / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
            (2.0 * normal_cdf(-z)).min(1.0)
        };
        (p, PMethod::Normal)
    };
    Some(MannWhitney {
        u_after,
        p_value,
        method,
        cliffs_delta,
    })
}

/// Two-sided exact p-value: 2 · P(U ≤ min(u, n1·n2 − u)) under the null (U is symmetric).
///
/// N(m, n, u), the arrangements of m befores and n afters (all distinct) with U = u, follows
/// from where the largest value is: a before beats no after, an after beats all m befores:
/// N(m, n, u) = N(m − 1, n, u) + N(m, n − 1, u − m), with N(m, 0, 0) = N(0, n, 0) = 1.
fn exact_p(n1: usize, n2: usize, u: usize) -> f64 {
    let max_u = n1 * n2;
    // prev[m][u] = N(m, n − 1, u), rolled over n.
    let mut prev = vec![vec![0.0f64; max_u + 1]; n1 + 1];
    for row in &mut prev {
        row[0] = 1.0;
    }
    for n in 1..=n2 {
        let mut cur = vec![vec![0.0f64; max_u + 1]; n1 + 1];
        cur[0][0] = 1.0;
        for m in 1..=n1 {
            for w in 0..=m * n {
                let after_on_top = if w >= m { prev[m][w - m] } else { 0.0 };
                cur[m][w] = cur[m - 1][w] + after_on_top;
            }
        }
        prev = cur;
    }
    let counts = &prev[n1];
    let total: f64 = counts.iter().sum();
    let tail = u.min(max_u - u);
    let below: f64 = counts[..=tail].iter().sum();
    (2.0 * below / total).min(1.0)
}

/// Romano et al.'s (2006) thresholds for |δ|.
pub fn magnitude(delta: f64) -> &'static str {
    match delta.abs() {
        d if d < 0.147 => "negligible",
        d if d < 0.33 => "small",
        d if d < 0.474 => "medium",
        _ => "large",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(v: &[u64]) -> Vec<u64> {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    }

    /// Exact distribution by brute force: every way to choose which n1 of the pooled ranks
    /// belong to "before".
    fn brute_p(n1: usize, n2: usize, u: usize) -> f64 {
        let n = n1 + n2;
        let (mut below, mut total) = (0u64, 0u64);
        let tail = u.min(n1 * n2 - u);
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != n1 {
                continue;
            }
            // U for "after" = pairs (before rank < after rank).
            let mut uu = 0;
            let mut befores_seen = 0;
            for r in 0..n {
                if mask & (1 << r) != 0 {
                    befores_seen += 1;
                } else {
                    uu += befores_seen;
                }
            }
            total += 1;
            if uu <= tail {
                below += 1;
            }
        }
        (2.0 * below as f64 / total as f64).min(1.0)
    }

    #[test]
    fn hand_computed_small_samples() {
        // Complete separation of 3 and 3: U = 0, P(U ≤ 0) = 1/C(6,3) = 1/20, two-sided 0.1.
        let m = mann_whitney(&[1, 2, 3], &[4, 5, 6]).expect("test");
        assert_eq!((m.u_after, m.method), (9.0, PMethod::Exact));
        assert!((m.p_value - 0.1).abs() < 1e-12, "{m:?}");
        assert_eq!(m.cliffs_delta, 1.0);
        // before {1, 4}, after {2, 3}: after beats 1 twice, loses to 4 twice: U = 2, δ = 0.
        let m = mann_whitney(&[1, 4], &[2, 3]).expect("test");
        assert_eq!((m.u_after, m.cliffs_delta), (2.0, 0.0));
        assert!((m.p_value - 1.0).abs() < 1e-12);
    }

    /// R's `wilcox.test` example (x = Hollander & Wolfe's data): W = 35, one-sided exact
    /// p = 0.1272, so two-sided 0.2544.
    #[test]
    fn matches_r_wilcox_example() {
        let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
        let y = [1.15, 0.88, 0.90, 0.74, 1.21];
        let to_ns = |v: &[f64]| {
            sorted(
                &v.iter()
                    .map(|f| (f * 100.0).round() as u64)
                    .collect::<Vec<_>>(),
            )
        };
        let m = mann_whitney(&to_ns(&y), &to_ns(&x)).expect("test");
        assert_eq!(m.u_after, 35.0);
        assert!((m.p_value - 0.2544).abs() < 5e-4, "{m:?}");
    }

    #[test]
    fn exact_matches_enumeration() {
        for (n1, n2) in [(1, 1), (2, 3), (4, 4), (3, 7), (6, 5)] {
            for u in 0..=n1 * n2 {
                let (e, b) = (exact_p(n1, n2, u), brute_p(n1, n2, u));
                assert!((e - b).abs() < 1e-12, "n1 {n1} n2 {n2} u {u}: {e} vs {b}");
            }
        }
    }

    #[test]
    fn normal_approximation_with_ties() {
        // 60 vs 60 with heavy ties, shifted by one: hand computation of the tie-corrected z.
        let before = sorted(&(0..60).map(|i| i / 10).collect::<Vec<u64>>());
        let after = sorted(&(0..60).map(|i| i / 10 + 1).collect::<Vec<u64>>());
        let m = mann_whitney(&before, &after).expect("test");
        assert_eq!(m.method, PMethod::Normal);
        // Pairs after > before: each after value k+1 (10 of them) beats the befores < k+1.
        let greater: f64 = (0..6).map(|k| 10.0 * 10.0 * (k as f64 + 1.0)).sum();
        let equal: f64 = (0..5).map(|_| 100.0).sum();
        assert_eq!(m.u_after, greater + equal / 2.0);
        // Tie groups: values 0 and 6 have 10 each, values 1..=5 have 20 each.
        let ties = 2.0 * (1000.0 - 10.0) + 5.0 * (8000.0 - 20.0);
        let var: f64 = 3600.0 / 12.0 * (121.0 - ties / (120.0 * 119.0));
        let z = ((m.u_after - 1800.0).abs() - 0.5) / var.sqrt();
        assert!((m.p_value - 2.0 * normal_cdf(-z)).abs() < 1e-15);
        // By hand: U = 2350, σ = 187.9, z = 2.925, p = 0.0035; δ = (2100 − 1000) / 3600.
        assert!((m.p_value - 0.003_45).abs() < 1e-4, "{m:?}");
        assert!((m.cliffs_delta - 1100.0 / 3600.0).abs() < 1e-12);
        // Identical samples: no difference at all.
        let m = mann_whitney(&before, &before).expect("test");
        assert!(m.p_value > 0.99 && m.cliffs_delta == 0.0, "{m:?}");
        let same = vec![5u64; 100];
        assert_eq!(mann_whitney(&same, &same).map(|m| m.p_value), Some(1.0));
        assert_eq!(mann_whitney(&[], &[1]), None);
    }
}
