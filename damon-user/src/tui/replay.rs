//! A capture played through the screen on its own clock, as if it were being traced now.
use std::{
    collections::{BTreeMap, VecDeque},
    time::Duration,
};

use damon_common::CallRecord;

use crate::{
    capture::{Capture, FunctionCounters, HistSnapshot, Meta, SlowCall, SlowCounters, Summary},
    tui::app::Event,
};

/// Capture time delivered per replay step: ten steps per second keep the counts moving smoothly.
const REPLAY_STEP_NS: u64 = 100_000_000;
const SECOND_NS: u64 = 1_000_000_000;

/// A capture cut into the events a live session would have produced, on the capture's clock
/// (pure: the caller says how far the clock has moved).
#[derive(Debug)]
pub struct ReplaySchedule {
    meta: Meta,
    records: Vec<CallRecord>,
    /// When each record arrived, in ns since the start: its exit time, never going back.
    arrivals: Vec<u64>,
    next: usize,
    now_ns: u64,
    end_ns: u64,
    next_second: u64,
    summary: Option<Summary>,
    ended: bool,
    /// Kernel mode: the histogram snapshots, played when the clock passes their time.
    snapshots: Vec<HistSnapshot>,
    next_snapshot: usize,
    /// The slow calls kept with their stacks, in the order they arrive (their exit time, as
    /// their records), with when each arrives; played with the records.
    slow: Vec<(u64, SlowCall)>,
    next_slow: usize,
}

impl ReplaySchedule {
    /// Keeps only the functions in `meta.functions` (the caller may have narrowed them).
    pub fn new(capture: Capture) -> ReplaySchedule {
        let Capture {
            meta,
            records,
            summary,
            marks,
            hist_snapshots,
            slow_calls,
        } = capture;
        let ids: Vec<u32> = meta.functions.iter().map(|f| f.id).collect();
        let records: Vec<CallRecord> = records
            .into_iter()
            .filter(|r| ids.contains(&r.func))
            .collect();
        let records = merge_marks(records, marks);
        let start = meta.start_monotonic_ns;
        let mut latest = 0;
        let arrivals: Vec<u64> = records
            .iter()
            .map(|r| {
                // Records reach the reader in about exit order; calls that ended while the
                // probes were being attached arrive at the start.
                latest = latest.max(exit_since(r, start));
                latest
            })
            .collect();
        let last_snapshot = hist_snapshots.last().map_or(0, |s| s.elapsed_ns);
        let end_ns = summary
            .as_ref()
            .map_or(latest, |s| s.duration_ns)
            .max(latest)
            .max(last_snapshot);
        let summary = summary.map(|mut s| {
            s.counters.retain(|id, _| ids.contains(id));
            s.slow.retain(|id, _| ids.contains(id));
            s
        });
        let mut slow: Vec<(u64, SlowCall)> = slow_calls
            .into_iter()
            .filter(|c| ids.contains(&c.call.func))
            .map(|c| (exit_since(&c.call, start), c))
            .collect();
        // Stable: calls that ended together keep the capture's order.
        slow.sort_by_key(|(t, _)| *t);
        ReplaySchedule {
            meta,
            records,
            arrivals,
            next: 0,
            now_ns: 0,
            end_ns,
            next_second: 1,
            summary,
            ended: false,
            snapshots: hist_snapshots,
            next_snapshot: 0,
            slow,
            next_slow: 0,
        }
    }

    /// Each function's slow calls kept and lost, from the capture's summary (empty without
    /// one, or without `--slow`).
    pub fn slow_counters(&self) -> BTreeMap<u32, SlowCounters> {
        self.summary
            .as_ref()
            .map(|s| s.slow.clone())
            .unwrap_or_default()
    }

    /// Kernel mode: the linear bucket width of the capture's histograms.
    pub fn kernel_width_ns(&self) -> Option<u64> {
        if self.meta.mode != crate::capture::Mode::Kernel {
            return None;
        }
        let from_summary = self
            .summary
            .as_ref()
            .and_then(|s| s.kernel_hist.values().next().map(|h| h.width_ns));
        let from_snapshots = self
            .snapshots
            .iter()
            .find_map(|s| s.functions.values().next().map(|(_, h)| h.width_ns));
        Some(
            from_summary
                .or(from_snapshots)
                .unwrap_or(damon_common::DEFAULT_HIST_WIDTH_NS),
        )
    }

    /// Kernel mode: the snapshots taken before `before_ns`, as counters and histograms.
    fn take_snapshots(&mut self, before_ns: u64, out: &mut Vec<Event>) {
        while let Some(s) = self.snapshots.get(self.next_snapshot)
            && s.elapsed_ns < before_ns
        {
            let ids: Vec<u32> = self.meta.functions.iter().map(|f| f.id).collect();
            let mut s = s.clone();
            s.functions.retain(|id, _| ids.contains(id));
            out.push(Event::Histograms(s));
            self.next_snapshot += 1;
        }
    }

    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The first event: the capture's drop counts (known only from its summary), so the
    /// screen shows them from the start; calls are counted as records arrive.
    pub fn opening(&self) -> Option<Event> {
        let summary = self.summary.as_ref()?;
        let drops = summary
            .counters
            .iter()
            .map(|(&id, c)| {
                let only_drops = FunctionCounters {
                    ring_full: c.ring_full,
                    stamp_full: c.stamp_full,
                    too_deep: c.too_deep,
                    stale_entries: c.stale_entries,
                    skipped_entries: c.skipped_entries,
                    ..FunctionCounters::default()
                };
                (id, only_drops)
            })
            .collect();
        Some(Event::Counters(drops))
    }

    /// The records played so far.
    pub fn played(&self) -> &[CallRecord] {
        &self.records[..self.next]
    }

    fn take_until(&mut self, before_ns: u64, out: &mut Vec<Event>) {
        let from = self.next;
        while self.next < self.records.len() && self.arrivals[self.next] < before_ns {
            self.next += 1;
        }
        if self.next > from {
            out.push(Event::Records(self.records[from..self.next].to_vec()));
        }
        let from = self.next_slow;
        while self.next_slow < self.slow.len() && self.slow[self.next_slow].0 < before_ns {
            self.next_slow += 1;
        }
        if self.next_slow > from {
            let calls = self.slow[from..self.next_slow]
                .iter()
                .map(|(_, c)| c.clone())
                .collect();
            out.push(Event::Slow(calls));
        }
    }

    /// Moves the capture clock to `t_ns`: the records that arrived by then, a `Second` at each
    /// whole second passed, and at the end the capture's counters and `SourceEnded`.
    pub fn advance_to(&mut self, t_ns: u64) -> Vec<Event> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        let t = t_ns.min(self.end_ns);
        while self.next_second * SECOND_NS <= t {
            let boundary = self.next_second * SECOND_NS;
            self.take_until(boundary, &mut out);
            self.take_snapshots(boundary.saturating_add(1), &mut out);
            out.push(Event::Second {
                elapsed: Duration::from_nanos(boundary),
            });
            self.next_second += 1;
        }
        self.take_until(t, &mut out);
        self.now_ns = t;
        if t >= self.end_ns {
            self.take_until(u64::MAX, &mut out);
            self.take_snapshots(u64::MAX, &mut out);
            if (self.next_second - 1) * SECOND_NS < t {
                out.push(Event::Second {
                    elapsed: Duration::from_nanos(t),
                });
            }
            if let Some(s) = &self.summary {
                out.push(Event::Counters(s.counters.clone()));
                if !s.kernel_hist.is_empty() {
                    let ids: Vec<u32> = self.meta.functions.iter().map(|f| f.id).collect();
                    let functions = s
                        .kernel_hist
                        .iter()
                        .filter(|(id, _)| ids.contains(id))
                        .map(|(&id, h)| {
                            let c = s.counters.get(&id).copied().unwrap_or_default();
                            (id, (c, h.clone()))
                        })
                        .collect();
                    out.push(Event::Histograms(HistSnapshot {
                        elapsed_ns: s.duration_ns,
                        functions,
                    }));
                }
            }
            out.push(Event::SourceEnded);
            self.ended = true;
        }
        out
    }

    /// What a capture saved now should end with: the capture's own summary once the replay
    /// is over, otherwise the counts of the records played so far.
    pub fn snapshot_summary(&self) -> Summary {
        if self.ended
            && let Some(s) = &self.summary
        {
            return s.clone();
        }
        let mut counters: BTreeMap<u32, FunctionCounters> = self
            .meta
            .functions
            .iter()
            .map(|f| (f.id, FunctionCounters::default()))
            .collect();
        let mut kernel_hist = BTreeMap::new();
        if let Some(s) = self
            .next_snapshot
            .checked_sub(1)
            .map(|i| &self.snapshots[i])
        {
            for (&id, (c, h)) in &s.functions {
                counters.insert(id, *c);
                kernel_hist.insert(id, h.clone());
            }
        }
        for r in self.played() {
            if r.func == damon_common::AGGREGATION_MARK {
                continue;
            }
            let c = counters.entry(r.func).or_default();
            c.calls += 1;
            c.emitted += 1;
        }
        Summary {
            kernel_hist,
            ..Summary::new(self.now_ns, "snapshot", counters)
        }
    }
}

/// When a call's record reaches the reader, in ns since `start`: its exit (calls that ended
/// while the probes were being attached arrive at the start).
fn exit_since(r: &CallRecord, start: u64) -> u64 {
    r.entry_ns
        .saturating_add(r.duration_ns)
        .saturating_sub(start)
}

/// Puts interval markers back among the records where the ring delivered them: before the
/// first record that ended after the marker.
fn merge_marks(records: Vec<CallRecord>, mut marks: Vec<CallRecord>) -> Vec<CallRecord> {
    if marks.is_empty() {
        return records;
    }
    marks.sort_by_key(|m| m.entry_ns);
    let mut out = Vec::with_capacity(records.len() + marks.len());
    let mut marks = marks.into_iter().peekable();
    for r in records {
        let exit = r.entry_ns.saturating_add(r.duration_ns);
        while let Some(m) = marks.next_if(|m| m.entry_ns <= exit) {
            out.push(m);
        }
        out.push(r);
    }
    out.extend(marks);
    out
}

/// Replays a schedule at `speed` × real time (0: as fast as the screen takes it).
pub struct ReplaySource {
    schedule: ReplaySchedule,
    speed: f64,
    started: Option<tokio::time::Instant>,
    pending: VecDeque<Event>,
}

impl ReplaySource {
    pub fn schedule(&self) -> &ReplaySchedule {
        &self.schedule
    }

    pub fn new(schedule: ReplaySchedule, speed: f64) -> ReplaySource {
        let pending = schedule.opening().into_iter().collect();
        ReplaySource {
            schedule,
            speed,
            started: None,
            pending,
        }
    }

    /// The next events. Cancel-safe: the schedule only moves after the wait completes.
    pub async fn next(&mut self) -> Vec<Event> {
        if !self.pending.is_empty() {
            return self.pending.drain(..).collect();
        }
        if self.schedule.ended() {
            // Hold the last screen until the user quits.
            return std::future::pending().await;
        }
        let started = *self.started.get_or_insert_with(tokio::time::Instant::now);
        let target = self.schedule.now_ns() + REPLAY_STEP_NS;
        if self.speed > 0.0 {
            let wall = Duration::from_secs_f64(target as f64 / 1e9 / self.speed);
            tokio::time::sleep_until(started + wall).await;
        } else {
            tokio::task::yield_now().await;
        }
        self.schedule.advance_to(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::test_support::fixture;

    fn seconds(events: &[Event]) -> Vec<u64> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Second { elapsed } => Some(elapsed.as_millis() as u64),
                _ => None,
            })
            .collect()
    }

    fn records(events: &[Event]) -> usize {
        events
            .iter()
            .map(|e| match e {
                Event::Records(r) => r.len(),
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn replays_the_fixture_second_by_second_and_then_ends() {
        let mut s = ReplaySchedule::new(fixture());
        assert!(matches!(s.opening(), Some(Event::Counters(_))));
        let first = s.advance_to(2_500_000_000);
        assert_eq!(seconds(&first), vec![1000, 2000]);
        let n = records(&first);
        assert!(n > 0 && n < 3612, "{n}");
        assert!(
            s.played()
                .iter()
                .all(|r| r.entry_ns + r.duration_ns < s.meta().start_monotonic_ns + 2_500_000_000)
        );
        assert!(
            s.advance_to(2_500_000_000).is_empty(),
            "the clock did not move"
        );
        let rest = s.advance_to(u64::MAX);
        assert_eq!(n + records(&rest), 3612);
        // 20.34 s: whole seconds 3..=20, then the partial last one.
        let secs = seconds(&rest);
        assert_eq!(secs.len(), 19);
        assert_eq!(secs.last(), Some(&20_342));
        assert!(matches!(rest.last(), Some(Event::SourceEnded)));
        assert!(s.ended());
        assert!(s.advance_to(u64::MAX).is_empty());
        assert_eq!(s.snapshot_summary().end_reason, "duration");
    }

    #[test]
    fn a_snapshot_mid_replay_counts_what_was_played() {
        let mut s = ReplaySchedule::new(fixture());
        s.advance_to(5_000_000_000);
        let summary = s.snapshot_summary();
        assert_eq!(summary.end_reason, "snapshot");
        assert_eq!(summary.duration_ns, 5_000_000_000);
        let calls: u64 = summary.counters.values().map(|c| c.calls).sum();
        assert_eq!(calls, s.played().len() as u64);
    }

    #[test]
    fn narrowed_functions_drop_the_others_records() {
        let mut c = fixture();
        c.meta.functions.retain(|f| f.name == "lock_timer_base");
        let mut s = ReplaySchedule::new(c);
        let events = s.advance_to(u64::MAX);
        assert_eq!(records(&events), 559);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Counters(c) if c.len() == 1 && c[&3].calls == 559))
        );
    }

    /// Each slow call arrives with the records that ended before the replay clock, after
    /// its own record, in the order the calls ended, whatever the capture's order.
    #[test]
    fn slow_calls_arrive_with_their_records_in_time_order() {
        let capture = crate::tui::test_support::slow_fixture();
        let start = capture.meta.start_monotonic_ns;
        let total = capture.slow_calls.len();
        assert!(total > 20, "{total}");
        let mut s = ReplaySchedule::new(capture);
        let mut seen_records: Vec<CallRecord> = Vec::new();
        let mut arrived: Vec<u64> = Vec::new();
        for t in (1..=25).map(|s| s * 1_000_000_000) {
            for e in s.advance_to(t) {
                match e {
                    Event::Records(r) => seen_records.extend(r),
                    Event::Slow(calls) => {
                        for c in calls {
                            assert!(seen_records.contains(&c.call), "its record came first");
                            let exit = (c.call.entry_ns + c.call.duration_ns).saturating_sub(start);
                            assert!(exit < t, "not before it ended: {exit} >= {t}");
                            arrived.push(exit);
                        }
                    }
                    _ => {}
                }
            }
            if t == 5_000_000_000 {
                assert!(
                    !arrived.is_empty() && arrived.len() < total,
                    "{}",
                    arrived.len()
                );
            }
        }
        assert_eq!(arrived.len(), total, "every slow call arrives by the end");
        assert!(arrived.windows(2).all(|w| w[0] <= w[1]), "in time order");
    }

    #[test]
    fn narrowed_functions_drop_the_others_slow_calls_and_counts() {
        let mut c = crate::tui::test_support::slow_fixture();
        c.meta.functions.retain(|f| f.name == "lock_timer_base");
        let mut s = ReplaySchedule::new(c);
        assert_eq!(
            s.slow_counters().keys().copied().collect::<Vec<_>>(),
            vec![3]
        );
        let events = s.advance_to(u64::MAX);
        let slow: Vec<u32> = events
            .iter()
            .flat_map(|e| match e {
                Event::Slow(calls) => calls.iter().map(|c| c.call.func).collect(),
                _ => Vec::new(),
            })
            .collect();
        assert!(!slow.is_empty() && slow.iter().all(|&f| f == 3), "{slow:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn paces_the_replay_by_speed() {
        let mut src = ReplaySource::new(ReplaySchedule::new(fixture()), 10.0);
        let start = tokio::time::Instant::now();
        let opening = src.next().await;
        assert!(matches!(opening[..], [Event::Counters(_)]));
        // Ten steps of 100 ms capture time at 10× take 100 ms of (paused, simulated) time.
        let mut seen_second = false;
        for _ in 0..10 {
            let events = src.next().await;
            seen_second |= !seconds(&events).is_empty();
        }
        assert!(seen_second);
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }
}
