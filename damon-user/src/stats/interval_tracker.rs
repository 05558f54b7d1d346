//! Time per DAMON aggregation interval, as the records stream in (pure): the live screen's
//! per-interval line and `serve`'s `damon_trace_interval_cost_seconds`.
//!
//! A kdamond runs its calls and then ends the interval (`damon:damon_aggregated` fires in the
//! same thread after the scheme work), so in the ring a kdamond's calls of interval `i` come
//! before its marker `i`: the calls a kdamond makes between two of its markers are that
//! interval's, exactly as `report` attributes them by entry time. Calls before a kdamond's first
//! marker belong to no complete interval and are not counted here.
use std::{
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    hash::BuildHasherDefault,
};

use damon_common::CallRecord;

use crate::stats::window::IntHasher;

/// Intervals kept for the sparkline.
pub const INTERVAL_HISTORY: usize = 60;

/// One function's completed intervals (of the kdamonds that called it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalTrack {
    pub intervals: u64,
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// The last completed interval: calls and ns.
    pub last: Option<(u64, u64)>,
    /// ns per interval, oldest first, at most [`INTERVAL_HISTORY`].
    pub history: VecDeque<u64>,
}

impl IntervalTrack {
    pub fn push(&mut self, calls: u64, ns: u64) {
        self.intervals += 1;
        self.calls += calls;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
        self.last = Some((calls, ns));
        self.history.push_back(ns);
        while self.history.len() > INTERVAL_HISTORY {
            self.history.pop_front();
        }
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.intervals > 0).then(|| self.total_ns as f64 / self.intervals as f64)
    }
}

/// Which thread is a kdamond, and what each has accumulated in its open interval.
#[derive(Debug, Clone, Default)]
pub struct IntervalTracker {
    last_mark: BTreeMap<u32, u64>,
    /// (kdamond tid, function id) → calls and ns in the kdamond's open interval.
    open: BTreeMap<(u32, u32), (u64, u64)>,
    /// (tid, function id) pairs seen calling: whose intervals count for which function. Per
    /// tid a bit mask of the function ids below 64 (one hash lookup per record: a search of an
    /// ordered set of every pair cost as much as the rest of the screen's work, measured by
    /// `cargo xtask bench`), and the rare larger ids in a set.
    callers: HashMap<u32, u64, BuildHasherDefault<IntHasher>>,
    callers_high: BTreeSet<(u32, u32)>,
    pub marks: u64,
}

impl IntervalTracker {
    pub fn call(&mut self, r: &CallRecord) {
        match 1u64.checked_shl(r.func) {
            Some(bit) => *self.callers.entry(r.tid).or_default() |= bit,
            None => {
                self.callers_high.insert((r.tid, r.func));
            }
        }
        if self.last_mark.contains_key(&r.tid) {
            let e = self.open.entry((r.tid, r.func)).or_default();
            e.0 += 1;
            e.1 += r.duration_ns;
        }
    }

    /// A boundary of kdamond `m.tid`: closes its open interval for every function it called,
    /// handing `(function id, calls, ns)` to `close`.
    pub fn mark(&mut self, m: &CallRecord, mut close: impl FnMut(u32, u64, u64)) {
        self.marks += 1;
        let had_open = self.last_mark.insert(m.tid, m.entry_ns).is_some();
        let mask = self.callers.get(&m.tid).copied().unwrap_or(0);
        let funcs: Vec<u32> = (0..64)
            .filter(|f| mask & (1u64 << f) != 0)
            .chain(
                self.callers_high
                    .range((m.tid, 0)..=(m.tid, u32::MAX))
                    .map(|&(_, f)| f),
            )
            .collect();
        for f in funcs {
            let (calls, ns) = self.open.remove(&(m.tid, f)).unwrap_or_default();
            if had_open {
                close(f, calls, ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use damon_common::AGGREGATION_MARK;

    use super::*;

    fn rec(tid: u32, func: u32, t: u64, d: u64) -> CallRecord {
        CallRecord {
            entry_ns: t,
            duration_ns: d,
            tid,
            func,
            ..CallRecord::default()
        }
    }

    #[test]
    fn closes_intervals_per_kdamond_and_function() {
        let mut tr = IntervalTracker::default();
        let mut tracks: BTreeMap<u32, IntervalTrack> = BTreeMap::new();
        let mut mark = |tr: &mut IntervalTracker, tid: u32, t: u64| {
            tr.mark(&rec(tid, AGGREGATION_MARK, t, 0), |f, c, ns| {
                tracks.entry(f).or_default().push(c, ns);
            });
        };
        tr.call(&rec(7, 0, 1, 100)); // before the first boundary: not counted
        mark(&mut tr, 7, 10);
        tr.call(&rec(7, 0, 11, 5));
        tr.call(&rec(7, 0, 12, 6));
        tr.call(&rec(8, 0, 13, 1000)); // not a kdamond
        mark(&mut tr, 7, 20);
        mark(&mut tr, 7, 30); // an interval without calls counts as 0
        tr.call(&rec(7, 1, 31, 40));
        mark(&mut tr, 7, 40);
        assert_eq!(tr.marks, 4);
        let t0 = &tracks[&0];
        assert_eq!(
            (t0.intervals, t0.calls, t0.total_ns, t0.max_ns),
            (3, 2, 11, 11)
        );
        assert_eq!(t0.history, VecDeque::from(vec![11, 0, 0]));
        assert_eq!(t0.last, Some((0, 0)));
        let t1 = &tracks[&1];
        assert_eq!((t1.intervals, t1.total_ns, t1.last), (1, 40, Some((1, 40))));
        assert_eq!(t1.mean_ns(), Some(40.0));
    }

    #[test]
    fn functions_are_closed_in_id_order_whatever_their_id() {
        let mut tr = IntervalTracker::default();
        let mut closed = Vec::new();
        let m = rec(7, AGGREGATION_MARK, 0, 0);
        tr.mark(&m, |f, c, ns| closed.push((f, c, ns)));
        for f in [70, 3, 63, 0] {
            tr.call(&rec(7, f, 1, 10 + u64::from(f)));
        }
        tr.call(&rec(9, 5, 1, 1)); // another thread
        tr.mark(&m, |f, c, ns| closed.push((f, c, ns)));
        assert_eq!(closed, [(0, 1, 10), (3, 1, 13), (63, 1, 73), (70, 1, 80)]);
    }
}
