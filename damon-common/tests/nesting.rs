//! Real nesting deeper than [`STAMP_DEPTH`] on one task (a recursive traced function, nothing
//! skipped by the kernel), through the pairing code the eBPF programs run
//! ([`StampStack::open`]/[`StampStack::close`]).
//!
//! No workload the test guests can run (busybox) nests a traced function more than
//! `STAMP_DEPTH` deep on one task, so this host model is where that case is checked: the
//! innermost `STAMP_DEPTH` calls are timed, each from its own entry; each call opened while all
//! slots were taken pushes out the oldest stamp, counted once as stale (`stale_entries`, a
//! drop), and that call's exit finds no stamp (an orphan exit, not timed); so
//! `calls == timed + stale + in_flight` holds at every depth.
use damon_common::{STAMP_DEPTH, StampStack};

/// Frame of the call at recursion level `level` (0 = outermost): one stack frame per level.
fn frame(level: usize) -> u64 {
    0x8000 - 0x40 * level as u64
}

#[test]
fn recursion_deeper_than_the_stack_times_the_innermost_calls_and_counts_the_rest() {
    for depth in 1..=3 * STAMP_DEPTH {
        let mut st = StampStack::default();
        let mut stale = 0u64;
        for level in 0..depth {
            let (slot, s) = st.open(frame(level), [level as i64, 0]);
            assert!(
                slot < STAMP_DEPTH,
                "depth {depth}, level {level}: slot {slot}"
            );
            st.stamps[slot] = 1000 + level as u64;
            stale += u64::from(s);
        }
        let in_flight = u64::from(st.depth);
        assert_eq!(
            in_flight as usize,
            depth.min(STAMP_DEPTH),
            "depth {depth}: open stamps"
        );
        let (mut timed, mut orphans) = (Vec::new(), 0u64);
        for level in (0..depth).rev() {
            match st.close(frame(level)) {
                Some(call) => {
                    stale += u64::from(call.stale);
                    timed.push((level, call.stamp, call.args[0]));
                }
                None => orphans += 1,
            }
        }
        let lost = depth.saturating_sub(STAMP_DEPTH);
        assert_eq!(
            timed.len(),
            depth - lost,
            "depth {depth}: innermost calls timed: {timed:?}"
        );
        assert!(
            timed
                .iter()
                .all(|&(l, stamp, arg)| l >= lost && stamp == 1000 + l as u64 && arg == l as i64),
            "depth {depth}: each timed call from its own entry: {timed:?}"
        );
        assert_eq!(stale, lost as u64, "depth {depth}: pushed-out stamps");
        assert_eq!(orphans, lost as u64, "depth {depth}: exits without a stamp");
        assert_eq!(st.depth, 0, "depth {depth}: nothing left open");
        assert_eq!(
            depth as u64,
            timed.len() as u64 + stale,
            "depth {depth}: calls == timed + stale + in_flight (0 at the end)"
        );
    }
}
