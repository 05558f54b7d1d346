//! Per-function statistics since start and over a sliding window of the last N seconds (pure).
//!
//! Records are added to an open one-second slice and to both running totals; closing a second
//! keeps the slice, and a slice older than the window is subtracted from the window's totals.
//! Memory is bounded by the number of distinct histogram slots, not by the number of calls.
use std::{
    collections::{HashMap, VecDeque},
    hash::{BuildHasherDefault, Hasher},
};

use super::histogram::{LatencyHistogram, slot_of};

/// DAMOS hotness scores run from 0 to `DAMOS_MAX_SCORE` (99).
pub const SCORE_VALUES: usize = 100;

/// How often each returned hotness score occurred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreCounts {
    pub counts: [u64; SCORE_VALUES],
    /// Values outside 0..=99 (never expected from DAMOS; counted so nothing vanishes).
    pub other: u64,
}

impl Default for ScoreCounts {
    fn default() -> Self {
        ScoreCounts {
            counts: [0; SCORE_VALUES],
            other: 0,
        }
    }
}

impl ScoreCounts {
    fn add(&mut self, value: i64) {
        match usize::try_from(value).ok().filter(|&v| v < SCORE_VALUES) {
            Some(v) => self.counts[v] += 1,
            None => self.other += 1,
        }
    }

    fn subtract(&mut self, other: &ScoreCounts) {
        for (c, o) in self.counts.iter_mut().zip(other.counts.iter()) {
            *c = c.saturating_sub(*o);
        }
        self.other = self.other.saturating_sub(other.other);
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.other
    }
}

/// Hashes integer keys (histogram slots, thread ids: the screen's own numbers, not keys an
/// adversary picks to collide): SipHash, the default, cost more than the rest of
/// [`FunctionStats::record`] (measured by `cargo xtask bench`).
#[derive(Debug, Clone, Copy, Default)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing, folded so that the low bits (the table's index) see the high ones.
        let h = (n ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 32);
    }
}

/// What every tally keeps besides its latency slots.
#[derive(Debug, Clone, Default)]
struct Moments {
    count: u64,
    sum: u128,
    min: Option<u64>,
    max: Option<u64>,
    scores: Option<ScoreCounts>,
}

impl Moments {
    fn new(keeps_scores: bool) -> Moments {
        Moments {
            scores: keeps_scores.then(ScoreCounts::default),
            ..Moments::default()
        }
    }

    /// `n` calls known to lie in `lo..=top`.
    fn add(&mut self, n: u64, lo: u64, top: u64) {
        self.count += n;
        self.min = extend(self.min, Some(lo), u64::min);
        self.max = extend(self.max, Some(top), u64::max);
    }
}

/// One second of records.
#[derive(Debug, Clone, Default)]
struct Slice {
    slots: HashMap<usize, u64, BuildHasherDefault<IntHasher>>,
    m: Moments,
}

/// A latency distribution as the screen needs it.
#[derive(Debug, Clone, Copy)]
pub struct Distribution<'a> {
    pub latency: &'a LatencyHistogram,
    pub count: u64,
    pub sum: u128,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub scores: Option<&'a ScoreCounts>,
}

impl Distribution<'_> {
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// Percentiles clamped to the exact extremes (slots only bound the value from above).
    pub fn percentiles(&self, ps: &[f64]) -> Option<Vec<u64>> {
        let (min, max) = (self.min?, self.max?);
        let mut v = self.latency.percentiles(ps)?;
        for p in &mut v {
            *p = (*p).clamp(min, max);
        }
        Some(v)
    }
}

#[derive(Debug, Clone)]
struct Totals {
    latency: LatencyHistogram,
    m: Moments,
}

impl Totals {
    fn new(keeps_scores: bool) -> Totals {
        Totals {
            latency: LatencyHistogram::default(),
            m: Moments::new(keeps_scores),
        }
    }
}

#[derive(Debug, Clone)]
pub struct FunctionStats {
    since_start: Totals,
    /// Totals of `closed` plus `open`; its min/max are recomputed from the slices.
    window: Totals,
    closed: VecDeque<Slice>,
    open: Slice,
    window_secs: usize,
}

fn extend(a: Option<u64>, b: Option<u64>, pick: fn(u64, u64) -> u64) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    }
}

impl FunctionStats {
    /// `window_secs` ≥ 1: the window holds the open second and the `window_secs - 1` before it.
    /// `keeps_scores`: count returned values as DAMOS hotness scores.
    pub fn new(window_secs: u32, keeps_scores: bool) -> FunctionStats {
        FunctionStats {
            since_start: Totals::new(keeps_scores),
            window: Totals::new(keeps_scores),
            closed: VecDeque::new(),
            open: Slice {
                m: Moments::new(keeps_scores),
                ..Slice::default()
            },
            window_secs: window_secs.max(1) as usize,
        }
    }

    pub fn record(&mut self, duration_ns: u64, value: i64) {
        self.add_to_slot(slot_of(duration_ns), 1);
        for m in self.moments() {
            m.add(1, duration_ns, duration_ns);
            m.sum += u128::from(duration_ns);
            if let Some(s) = &mut m.scores {
                s.add(value);
            }
        }
    }

    /// Adds `n` calls known only to lie in `lo..=top` (a kernel-mode histogram bucket): they
    /// count at `top`, an upper bound like every slot, and widen min/max by the bucket's
    /// edges. Their time goes in with [`FunctionStats::add_sum`], exact, per batch.
    pub fn record_bucket(&mut self, lo: u64, top: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.add_to_slot(slot_of(top), n);
        for m in self.moments() {
            m.add(n, lo, top);
        }
    }

    /// Adds the exact total time of calls added with [`FunctionStats::record_bucket`].
    pub fn add_sum(&mut self, sum_ns: u64) {
        for m in self.moments() {
            m.sum += u128::from(sum_ns);
        }
    }

    /// Since start, the window and the open second: where every call is counted.
    fn moments(&mut self) -> [&mut Moments; 3] {
        [
            &mut self.since_start.m,
            &mut self.window.m,
            &mut self.open.m,
        ]
    }

    fn add_to_slot(&mut self, slot: usize, n: u64) {
        self.since_start.latency.add_to_slot(slot, n);
        self.window.latency.add_to_slot(slot, n);
        *self.open.slots.entry(slot).or_default() += n;
    }

    /// Narrows the since-start extremes to exact ones (the kernel keeps them).
    pub fn set_exact_extremes(&mut self, min: u64, max: u64) {
        self.since_start.m.min = Some(min);
        self.since_start.m.max = Some(max);
    }

    /// Ends the current second; drops from the window the second that leaves it.
    pub fn close_second(&mut self) {
        let fresh = Slice {
            m: Moments::new(self.open.m.scores.is_some()),
            ..Slice::default()
        };
        self.closed
            .push_back(std::mem::replace(&mut self.open, fresh));
        while self.closed.len() >= self.window_secs {
            let Some(old) = self.closed.pop_front() else {
                break;
            };
            let w = &mut self.window;
            for (&slot, &n) in &old.slots {
                w.latency.remove_from_slot(slot, n);
            }
            w.m.count = w.m.count.saturating_sub(old.m.count);
            w.m.sum = w.m.sum.saturating_sub(old.m.sum);
            if let (Some(ws), Some(os)) = (&mut w.m.scores, &old.m.scores) {
                ws.subtract(os);
            }
        }
        let (min, max) = self
            .closed
            .iter()
            .chain(std::iter::once(&self.open))
            .fold((None, None), |(mn, mx), s| {
                (extend(mn, s.m.min, u64::min), extend(mx, s.m.max, u64::max))
            });
        self.window.m.min = min;
        self.window.m.max = max;
    }

    pub fn since_start(&self) -> Distribution<'_> {
        view(&self.since_start)
    }

    pub fn window(&self) -> Distribution<'_> {
        view(&self.window)
    }
}

fn view(t: &Totals) -> Distribution<'_> {
    Distribution {
        latency: &t.latency,
        count: t.m.count,
        sum: t.m.sum,
        min: t.m.min,
        max: t.m.max,
        scores: t.m.scores.as_ref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_slides_by_whole_seconds() {
        let mut s = FunctionStats::new(3, false);
        s.record(100, 0); // second 0
        s.close_second();
        s.record(200, 0); // second 1
        s.close_second();
        s.record(300, 0); // second 2 (open)
        assert_eq!(s.window().count, 3);
        assert_eq!(s.window().min, Some(100));
        s.close_second(); // second 0 leaves
        let w = s.window();
        assert_eq!(
            (w.count, w.min, w.max, w.sum),
            (2, Some(200), Some(300), 500)
        );
        assert_eq!(w.latency.total(), 2);
        assert_eq!(s.since_start().count, 3);
        assert_eq!(s.since_start().min, Some(100));
        s.close_second();
        s.close_second();
        let w = s.window();
        assert_eq!((w.count, w.min, w.max), (0, None, None));
        assert_eq!(w.percentiles(&[50.0]), None);
        assert_eq!(w.mean(), None);
        assert_eq!(s.since_start().mean(), Some(200.0));
    }

    #[test]
    fn one_second_window_holds_only_the_open_second() {
        let mut s = FunctionStats::new(1, false);
        s.record(5, 0);
        assert_eq!(s.window().count, 1);
        s.close_second();
        assert_eq!(s.window().count, 0);
        s.record(7, 0);
        assert_eq!(s.window().max, Some(7));
    }

    #[test]
    fn scores_follow_the_window() {
        let mut s = FunctionStats::new(2, true);
        s.record(10, 11);
        s.record(10, 99);
        s.record(10, 100);
        s.record(10, -1);
        s.close_second();
        s.record(10, 11);
        let w = s.window().scores.expect("scores");
        assert_eq!((w.counts[11], w.counts[99], w.other), (2, 1, 2));
        s.close_second();
        let w = s.window().scores.expect("scores");
        assert_eq!(
            (w.counts[11], w.counts[99], w.other, w.total()),
            (1, 0, 0, 1)
        );
        assert_eq!(s.since_start().scores.expect("scores").total(), 5);
        assert!(FunctionStats::new(2, false).window().scores.is_none());
    }

    #[test]
    fn percentiles_are_clamped_to_the_exact_extremes() {
        let mut s = FunctionStats::new(5, false);
        s.record(1_000_003, 0);
        let p = s.since_start().percentiles(&[50.0, 100.0]).expect("one");
        assert_eq!(p, vec![1_000_003, 1_000_003]);
    }
}
