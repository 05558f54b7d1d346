//! Cost per DAMON aggregation interval (pure).
//!
//! The kernel writes one boundary marker per kdamond at the end of each aggregation interval
//! (see `damon-ebpf`: `damon:damon_aggregated` fires in `kdamond_reset_aggregated`, right after
//! `kdamond_apply_schemes` ran the interval's scheme actions). For one kdamond with markers
//! at `m0 < m1 < … < mn`, interval `i` (1..=n) holds the calls that kdamond *entered* in
//! `[m(i-1), mi)`: the scheme work that ends interval `i` runs just before `mi`, so it lands
//! in interval `i`. Every call of a traced function then falls in exactly one class:
//! - in one complete interval of the kdamond (its thread id) that made it;
//! - `outside`: made by a kdamond, before its first or at/after its last marker (the partial
//!   intervals at both ends of the session);
//! - `not_kdamond`: made by a thread that never ended an interval (not a kdamond, or one whose
//!   markers were all lost).
//!
//! So `in_intervals + outside + not_kdamond == calls` and the same for the summed durations;
//! [`PerInterval::check`] verifies both.
use std::collections::BTreeMap;

use damon_common::{AGGREGATION_MARK, CallRecord};
use serde::Serialize;

use super::percentile;

/// Boundary times of each kdamond (thread id → sorted marker times).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Boundaries {
    pub by_kdamond: BTreeMap<u32, Vec<u64>>,
}

impl Boundaries {
    /// From marker records (any order; records of other kinds are ignored).
    pub fn from_marks(marks: &[CallRecord]) -> Boundaries {
        let mut by_kdamond: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for m in marks.iter().filter(|m| m.func == AGGREGATION_MARK) {
            by_kdamond.entry(m.tid).or_default().push(m.entry_ns);
        }
        for v in by_kdamond.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        Boundaries { by_kdamond }
    }

    pub fn is_empty(&self) -> bool {
        self.by_kdamond.is_empty()
    }

    /// Where a call that thread `tid` entered at `entry_ns` falls (the module's rules).
    pub fn place(&self, tid: u32, entry_ns: u64) -> Place {
        let Some(b) = self.by_kdamond.get(&tid) else {
            return Place::NotKdamond;
        };
        // Number of boundaries at or before the entry: k in 1..len means interval k.
        match b.partition_point(|&m| m <= entry_ns) {
            k if k == 0 || k >= b.len() => Place::Outside,
            k => Place::Interval(k - 1),
        }
    }

    /// Complete intervals of one kdamond.
    pub fn intervals_of(&self, tid: u32) -> usize {
        self.by_kdamond
            .get(&tid)
            .map_or(0, |v| v.len().saturating_sub(1))
    }
}

/// Where one call falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Complete interval `k` (from 0) of the kdamond that made it: entered in
    /// `[m(k), m(k+1))` of its boundaries.
    Interval(usize),
    /// Made by a kdamond before its first or at/after its last boundary (a kdamond with one
    /// boundary has only this).
    Outside,
    /// Made by a thread that never ended an interval.
    NotKdamond,
}

/// Per-interval cost of one function.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerInterval {
    /// Complete aggregation intervals of the kdamonds counted (see [`PerInterval::kdamonds`]).
    pub intervals: u64,
    /// Thread ids of the kdamonds whose intervals are counted: those that called the function,
    /// or every kdamond that ended an interval when none did.
    pub kdamonds: Vec<u32>,
    /// Intervals with at least one call.
    pub intervals_with_calls: u64,
    pub mean_calls: f64,
    pub p50_calls: u64,
    pub max_calls: u64,
    /// Time spent in the function per interval (sum of its call durations), ns; empty
    /// intervals count as 0.
    pub mean_total_ns: f64,
    pub p50_total_ns: u64,
    pub p99_total_ns: u64,
    pub max_total_ns: u64,
    /// Mean length of the counted intervals, ns (their boundaries' spacing).
    pub mean_interval_ns: f64,
    /// Calls (and their summed durations) inside complete intervals.
    pub calls_in_intervals: u64,
    pub total_ns_in_intervals: u64,
    /// Calls by a kdamond before its first or after its last boundary.
    pub calls_outside: u64,
    pub total_ns_outside: u64,
    /// Calls by threads that never ended an interval.
    pub calls_not_kdamond: u64,
    pub total_ns_not_kdamond: u64,
    /// Per interval, in time order (kdamonds one after the other): calls and total ns.
    #[serde(rename = "calls_per_interval")]
    pub per_interval_calls: Vec<u64>,
    #[serde(rename = "ns_per_interval")]
    pub per_interval_totals: Vec<u64>,
}

impl PerInterval {
    /// Checks the partition invariants against the function's calls: counts and duration sums
    /// of the three classes add up to those of `calls`, and the per-interval vectors add up to
    /// the in-interval class.
    pub fn check(&self, calls: &[CallRecord]) -> Result<(), String> {
        let n = calls.len() as u64;
        let sum: u64 = calls.iter().map(|r| r.duration_ns).sum();
        let classes = self.calls_in_intervals + self.calls_outside + self.calls_not_kdamond;
        if classes != n {
            return Err(format!("calls: {classes} classified, {n} made"));
        }
        let ns = self.total_ns_in_intervals + self.total_ns_outside + self.total_ns_not_kdamond;
        if ns != sum {
            return Err(format!("ns: {ns} classified, {sum} made"));
        }
        if self.per_interval_calls.iter().sum::<u64>() != self.calls_in_intervals
            || self.per_interval_totals.iter().sum::<u64>() != self.total_ns_in_intervals
            || self.per_interval_calls.len() as u64 != self.intervals
        {
            return Err("per-interval sums differ from the in-interval totals".to_owned());
        }
        Ok(())
    }
}

/// Per-interval cost of the calls in `calls` (records of one function), or `None` when there
/// are no boundaries at all.
pub fn per_interval(calls: &[CallRecord], bounds: &Boundaries) -> Option<PerInterval> {
    if bounds.is_empty() {
        return None;
    }
    let kdamonds = counted_kdamonds(calls.iter().map(|r| r.tid), bounds);
    let mut out = PerInterval {
        intervals: 0,
        kdamonds: kdamonds.clone(),
        intervals_with_calls: 0,
        mean_calls: 0.0,
        p50_calls: 0,
        max_calls: 0,
        mean_total_ns: 0.0,
        p50_total_ns: 0,
        p99_total_ns: 0,
        max_total_ns: 0,
        mean_interval_ns: 0.0,
        calls_in_intervals: 0,
        total_ns_in_intervals: 0,
        calls_outside: 0,
        total_ns_outside: 0,
        calls_not_kdamond: 0,
        total_ns_not_kdamond: 0,
        per_interval_calls: Vec::new(),
        per_interval_totals: Vec::new(),
    };
    let mut span_ns: u128 = 0;
    // Index of each counted kdamond's first interval in the per-interval vectors.
    let mut base: BTreeMap<u32, usize> = BTreeMap::new();
    for tid in &kdamonds {
        let b = &bounds.by_kdamond[tid];
        base.insert(*tid, out.per_interval_calls.len());
        let n = b.len().saturating_sub(1);
        out.per_interval_calls.extend(std::iter::repeat_n(0, n));
        out.per_interval_totals.extend(std::iter::repeat_n(0, n));
        if n > 0 {
            span_ns += u128::from(b[n] - b[0]);
        }
    }
    out.intervals = out.per_interval_calls.len() as u64;
    for r in calls {
        let d = r.duration_ns;
        match bounds.place(r.tid, r.entry_ns) {
            Place::Interval(k) => {
                let i = base[&r.tid] + k;
                out.per_interval_calls[i] += 1;
                out.per_interval_totals[i] += d;
                out.calls_in_intervals += 1;
                out.total_ns_in_intervals += d;
            }
            Place::Outside => {
                out.calls_outside += 1;
                out.total_ns_outside += d;
            }
            Place::NotKdamond => {
                out.calls_not_kdamond += 1;
                out.total_ns_not_kdamond += d;
            }
        }
    }
    if out.intervals > 0 {
        summarise(&mut out, span_ns);
    }
    Some(out)
}

/// The kdamonds whose intervals count: those among the callers `tids` (of the calls, in any
/// order, repeats allowed), or every kdamond with a complete interval when none is.
pub fn counted_kdamonds(tids: impl IntoIterator<Item = u32>, bounds: &Boundaries) -> Vec<u32> {
    let mut callers: Vec<u32> = tids
        .into_iter()
        .filter(|t| bounds.intervals_of(*t) > 0)
        .collect();
    callers.sort_unstable();
    callers.dedup();
    if callers.is_empty() {
        bounds
            .by_kdamond
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(t, _)| *t)
            .collect()
    } else {
        callers
    }
}

/// Means, percentiles and maxima over the intervals (at least one), `span_ns` their total
/// length.
fn summarise(out: &mut PerInterval, span_ns: u128) {
    let n = out.intervals as f64;
    out.intervals_with_calls = out.per_interval_calls.iter().filter(|&&c| c > 0).count() as u64;
    out.mean_calls = out.calls_in_intervals as f64 / n;
    out.mean_total_ns = out.total_ns_in_intervals as f64 / n;
    out.mean_interval_ns = span_ns as f64 / n;
    let mut calls = out.per_interval_calls.clone();
    calls.sort_unstable();
    out.p50_calls = percentile(&calls, 50.0).unwrap_or(0);
    out.max_calls = calls.last().copied().unwrap_or(0);
    let mut totals = out.per_interval_totals.clone();
    totals.sort_unstable();
    out.p50_total_ns = percentile(&totals, 50.0).unwrap_or(0);
    out.p99_total_ns = percentile(&totals, 99.0).unwrap_or(0);
    out.max_total_ns = totals.last().copied().unwrap_or(0);
}

/// Whole-session interval facts, for reports: per kdamond, its intervals and their spacing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KdamondIntervals {
    pub tid: u32,
    /// Boundaries seen.
    pub boundaries: u64,
    /// Complete intervals (boundaries − 1).
    pub intervals: u64,
    pub mean_interval_ns: f64,
    pub min_interval_ns: u64,
    pub max_interval_ns: u64,
}

pub fn kdamonds(bounds: &Boundaries) -> Vec<KdamondIntervals> {
    bounds
        .by_kdamond
        .iter()
        .map(|(tid, b)| {
            let gaps: Vec<u64> = b.windows(2).map(|w| w[1] - w[0]).collect();
            KdamondIntervals {
                tid: *tid,
                boundaries: b.len() as u64,
                intervals: gaps.len() as u64,
                mean_interval_ns: if gaps.is_empty() {
                    0.0
                } else {
                    gaps.iter().map(|&g| g as f64).sum::<f64>() / gaps.len() as f64
                },
                min_interval_ns: gaps.iter().copied().min().unwrap_or(0),
                max_interval_ns: gaps.iter().copied().max().unwrap_or(0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(tid: u32, t: u64) -> CallRecord {
        CallRecord {
            entry_ns: t,
            tid,
            pid: tid,
            func: AGGREGATION_MARK,
            ..CallRecord::default()
        }
    }

    fn call(tid: u32, t: u64, d: u64) -> CallRecord {
        CallRecord {
            entry_ns: t,
            duration_ns: d,
            tid,
            pid: tid,
            func: 1,
            ..CallRecord::default()
        }
    }

    #[test]
    fn calls_fall_in_exactly_one_class() {
        // kdamond 7: boundaries at 100, 200, 300 (two intervals); kdamond 9: only one.
        let bounds =
            Boundaries::from_marks(&[mark(7, 300), mark(7, 100), mark(7, 200), mark(9, 50)]);
        let calls = [
            call(7, 50, 1),     // before the first boundary: outside
            call(7, 100, 2),    // at a boundary: starts interval 1
            call(7, 150, 4),    // interval 1
            call(7, 199, 8),    // interval 1
            call(7, 250, 16),   // interval 2
            call(7, 300, 32),   // at the last boundary: outside
            call(9, 60, 64),    // kdamond without a complete interval: outside
            call(11, 150, 128), // not a kdamond
        ];
        let p = per_interval(&calls, &bounds).unwrap();
        assert_eq!(p.kdamonds, vec![7]);
        assert_eq!(p.intervals, 2);
        assert_eq!(p.per_interval_calls, vec![3, 1]);
        assert_eq!(p.per_interval_totals, vec![14, 16]);
        assert_eq!((p.calls_outside, p.total_ns_outside), (3, 1 + 32 + 64));
        assert_eq!((p.calls_not_kdamond, p.total_ns_not_kdamond), (1, 128));
        assert_eq!(p.mean_total_ns, 15.0);
        assert_eq!(p.max_total_ns, 16);
        assert_eq!(p.p50_total_ns, 14);
        assert_eq!(p.mean_calls, 2.0);
        assert_eq!(p.mean_interval_ns, 100.0);
        assert_eq!(p.intervals_with_calls, 2);
        p.check(&calls).unwrap();
    }

    #[test]
    fn empty_intervals_count_as_zero_and_idle_function_uses_every_kdamond() {
        let bounds = Boundaries::from_marks(&[
            mark(7, 0),
            mark(7, 10),
            mark(7, 20),
            mark(7, 30),
            mark(8, 5),
            mark(8, 15),
        ]);
        let calls = [call(7, 25, 90)];
        let p = per_interval(&calls, &bounds).unwrap();
        assert_eq!(p.per_interval_totals, vec![0, 0, 90]);
        assert_eq!(p.mean_total_ns, 30.0);
        assert_eq!(p.p50_total_ns, 0);
        assert_eq!(p.p99_total_ns, 90);
        assert_eq!(p.intervals_with_calls, 1);
        p.check(&calls).unwrap();
        let idle = per_interval(&[], &bounds).unwrap();
        assert_eq!(idle.kdamonds, vec![7, 8]);
        assert_eq!(idle.intervals, 4);
        assert_eq!(idle.mean_total_ns, 0.0);
        idle.check(&[]).unwrap();
    }

    #[test]
    fn no_boundaries_no_per_interval() {
        assert_eq!(per_interval(&[call(7, 1, 1)], &Boundaries::default()), None);
    }

    #[test]
    fn check_catches_a_lost_call() {
        let bounds = Boundaries::from_marks(&[mark(7, 0), mark(7, 10)]);
        let calls = [call(7, 5, 3)];
        let p = per_interval(&calls, &bounds).unwrap();
        assert!(p.check(&[call(7, 5, 3), call(7, 6, 1)]).is_err());
    }

    #[test]
    fn kdamond_spacing() {
        let bounds = Boundaries::from_marks(&[mark(7, 0), mark(7, 10), mark(7, 40)]);
        let k = kdamonds(&bounds);
        assert_eq!(k.len(), 1);
        assert_eq!(
            (k[0].intervals, k[0].min_interval_ns, k[0].max_interval_ns),
            (2, 10, 30)
        );
        assert_eq!(k[0].mean_interval_ns, 20.0);
    }
}
