//! The order of an A/B experiment's runs (before, after, before, …): which side each slot of
//! the sequence runs. Shared by the harness that boots or loads the runs (`cargo xtask ab`,
//! `patch-ab`, `kernel-ab`) and by the tests that show the verdict keeps its false-positive
//! rate under drift with this order (damon-user's `stats::drift`).
//!
//! A B B A, repeated (A B B A A B B A …): over every four slots both sides' mean position is
//! the same, so a drift linear in time (a host that warms up, a boot whose medians creep down)
//! adds nothing to after − before. The strict alternation A B A B … puts every A one slot
//! before its B, and turns the same drift into a difference of one slot's drift, in every pair,
//! in the same direction: a bias no number of runs averages away.

/// Whether slot `position` (0-based) of the sequence is a before (A) run.
pub const fn is_before(position: u32) -> bool {
    (position / 2) % 2 == position % 2
}

/// The sequence for `runs` runs a side: (before?, the run's index on its side, from 1), in
/// order. Each pair of slots holds one run of each side, so slot `p` is run `p / 2 + 1` of
/// its side.
pub fn schedule(runs: u32) -> impl Iterator<Item = (bool, u32)> {
    (0..2 * runs).map(|p| (is_before(p), p / 2 + 1))
}

/// The strict alternation A B A B … that `ab` and `patch-ab` used before: kept for the
/// simulations that show why it was replaced.
pub fn alternating(runs: u32) -> impl Iterator<Item = (bool, u32)> {
    (0..2 * runs).map(|p| (p % 2 == 0, p / 2 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letters(s: impl Iterator<Item = (bool, u32)>) -> [u8; 8] {
        let mut out = [0u8; 8];
        for (slot, (before, _)) in out.iter_mut().zip(s) {
            *slot = if before { b'A' } else { b'B' };
        }
        out
    }

    #[test]
    fn abba_repeats_and_each_side_counts_its_runs() {
        assert_eq!(&letters(schedule(4)), b"ABBAABBA");
        assert_eq!(&letters(alternating(4)), b"ABABABAB");
        let mut seen = [[false; 5]; 2];
        for (before, i) in schedule(4) {
            let side = &mut seen[usize::from(before)];
            assert!(!side[i as usize], "run {i} twice");
            side[i as usize] = true;
        }
        assert_eq!(seen, [[false, true, true, true, true]; 2]);
    }

    #[test]
    fn a_linear_drift_cancels_over_every_four_slots() {
        // Sum of positions per side: equal for an even number of runs a side; for an odd
        // number the best any order can do is one slot apart (the total is odd).
        for runs in 1..=12u32 {
            let (mut a, mut b) = (0i64, 0i64);
            for (p, (before, _)) in schedule(runs).enumerate() {
                if before {
                    a += p as i64;
                } else {
                    b += p as i64;
                }
            }
            let want = if runs % 2 == 0 { 0 } else { 1 };
            assert_eq!((b - a).abs(), want, "{runs} runs");
            let old: i64 = alternating(runs)
                .enumerate()
                .map(|(p, (before, _))| if before { -(p as i64) } else { p as i64 })
                .sum();
            assert_eq!(old, i64::from(runs), "the old order: one slot per pair");
        }
    }
}
