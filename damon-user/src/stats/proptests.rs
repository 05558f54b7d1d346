//! Property tests against slow, obviously-right oracles: percentiles against a sorted array,
//! bucket edges against a per-value check, the rank test against counting every pair.
use proptest::prelude::*;

use super::{
    buckets::BucketGrid,
    percentile,
    ranktest::{PMethod, mann_whitney},
};

/// Nearest rank by definition: the smallest value v with at least p % of the data ≤ v,
/// counted value by value in exact integers (p with three decimals, as the CLI uses).
fn oracle_percentile(sorted: &[u64], p_milli: u64) -> u64 {
    let n = sorted.len() as u128;
    for &v in sorted {
        let at_or_below = sorted.iter().filter(|&&x| x <= v).count() as u128;
        if at_or_below * 100_000 >= u128::from(p_milli) * n {
            return v;
        }
    }
    sorted[sorted.len() - 1]
}

fn sorted_data() -> impl Strategy<Value = Vec<u64>> {
    // Small values make ties common; some huge ones test the top of the range.
    prop::collection::vec(
        prop_oneof![0u64..50, 0u64..5_000, u64::MAX - 100..=u64::MAX],
        1..300,
    )
    .prop_map(|mut v| {
        v.sort_unstable();
        v
    })
}

proptest! {
    #[test]
    fn percentiles_match_the_sorted_array_oracle(data in sorted_data(), p_milli in 1u64..=100_000) {
        let p = p_milli as f64 / 1000.0;
        prop_assert_eq!(percentile(&data, p), Some(oracle_percentile(&data, p_milli)));
    }

    #[test]
    fn percentiles_are_monotone_in_p(data in sorted_data(), a in 1u64..=100_000, b in 1u64..=100_000) {
        let (lo, hi) = (a.min(b) as f64 / 1000.0, a.max(b) as f64 / 1000.0);
        prop_assert!(percentile(&data, lo) <= percentile(&data, hi));
    }

    #[test]
    fn every_value_lands_in_exactly_the_row_whose_edges_hold_it(
        data in sorted_data(),
        width in 1u64..2_000,
        max_ns in prop::option::of(0u64..20_000),
    ) {
        let Ok(grid) = BucketGrid::plan(width, max_ns, &[&data]) else {
            // Only a range too wide to print may be refused.
            prop_assert!(max_ns.is_some());
            return Ok(());
        };
        let rows = grid.count(&data);
        prop_assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), data.len() as u64);
        for r in &rows {
            let held = data
                .iter()
                .filter(|&&v| v >= r.lo_ns && r.hi_ns.is_none_or(|hi| v < hi))
                .count() as u64;
            prop_assert_eq!(r.count, held, "row {:?}", r);
        }
        // Rows are contiguous, each `width` wide except a last one cut at the top.
        for w in rows.windows(2) {
            prop_assert_eq!(w[0].hi_ns, Some(w[1].lo_ns));
        }
        for r in rows.iter().filter(|r| r.lo_ns >= grid.lo_ns) {
            if let Some(hi) = r.hi_ns {
                prop_assert!(hi - r.lo_ns <= grid.width_ns && hi > r.lo_ns);
            }
        }
    }

    #[test]
    fn mann_whitney_counts_every_pair(
        before in prop::collection::vec(0u64..30, 1..60),
        after in prop::collection::vec(0u64..30, 1..60),
    ) {
        let (mut b, mut a) = (before, after);
        b.sort_unstable();
        a.sort_unstable();
        let m = mann_whitney(&b, &a).expect("non-empty");
        let (mut greater, mut less, mut equal) = (0u64, 0u64, 0u64);
        for &x in &b {
            for &y in &a {
                match y.cmp(&x) {
                    std::cmp::Ordering::Greater => greater += 1,
                    std::cmp::Ordering::Less => less += 1,
                    std::cmp::Ordering::Equal => equal += 1,
                }
            }
        }
        prop_assert_eq!(m.u_after, greater as f64 + equal as f64 / 2.0);
        let pairs = (b.len() * a.len()) as f64;
        prop_assert!((m.cliffs_delta - (greater as f64 - less as f64) / pairs).abs() < 1e-12);
        prop_assert!((0.0..=1.0).contains(&m.p_value));
        // Swapping the samples mirrors δ and keeps the two-sided p-value.
        let s = mann_whitney(&a, &b).expect("non-empty");
        prop_assert!((s.cliffs_delta + m.cliffs_delta).abs() < 1e-12);
        prop_assert!((s.p_value - m.p_value).abs() < 1e-9);
        if m.method == PMethod::Exact {
            prop_assert_eq!(equal, 0);
        }
    }
}
