//! The slow calls the screen keeps (`--slow DURATION`, or a replayed capture's): per function
//! the [`KEPT_PER_FUNCTION`] slowest that arrived, so memory stays bounded however long `live`
//! runs; the others are counted. What the `x` view shows of them is in `draw::slow`.
use std::collections::BTreeMap;

use crate::{
    capture::{SlowCall, SlowCounters, SlowSettings},
    cli::TimeBasis,
    session::StopReason,
    tui::{
        app::{App, Effect},
        keys::Action,
    },
};

/// Slow calls the screen keeps per function: the slowest (wall time) of those that arrived.
/// A slow call's stack is at most `SLOW_STACK_DEPTH` names: 100 of them take well under 1 MiB.
pub const KEPT_PER_FUNCTION: usize = 100;

/// One function's slow calls on screen.
#[derive(Debug, Clone, Default)]
pub struct SlowList {
    /// At most [`KEPT_PER_FUNCTION`], in arrival order.
    calls: Vec<SlowCall>,
    /// Every slow call of the function that reached the screen.
    pub arrived: u64,
}

impl SlowList {
    /// Keeps `call` if there is room or it is slower than the fastest kept (which then goes).
    fn add(&mut self, call: SlowCall) {
        self.arrived += 1;
        if self.calls.len() < KEPT_PER_FUNCTION {
            self.calls.push(call);
            return;
        }
        let fastest = self
            .calls
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.call.duration_ns)
            .map(|(i, _)| i);
        if let Some(i) = fastest
            && self.calls[i].call.duration_ns < call.call.duration_ns
        {
            self.calls.remove(i);
            self.calls.push(call);
        }
    }

    /// Arrived but not kept on screen (faster than the [`KEPT_PER_FUNCTION`] kept).
    pub fn not_kept(&self) -> u64 {
        self.arrived - self.calls.len() as u64
    }

    /// The kept calls in the order asked: slowest first (ties: newest first), or newest
    /// (latest return) first.
    pub fn ordered(&self, order: SlowOrder) -> Vec<&SlowCall> {
        let mut v: Vec<(usize, &SlowCall)> = self.calls.iter().enumerate().collect();
        let exit = |c: &SlowCall| c.call.entry_ns.saturating_add(c.call.duration_ns);
        match order {
            SlowOrder::Slowest => v.sort_by(|(ia, a), (ib, b)| {
                (b.call.duration_ns, ib).cmp(&(a.call.duration_ns, ia))
            }),
            SlowOrder::Newest => v.sort_by(|(ia, a), (ib, b)| (exit(b), ib).cmp(&(exit(a), ia))),
        }
        v.into_iter().map(|(_, c)| c).collect()
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

/// The order of the slow-call list (`o` switches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlowOrder {
    #[default]
    Slowest,
    Newest,
}

/// The slow-call view (`x`): whose calls, which one is selected, in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowView {
    /// The function (id) whose calls are listed: the panel selected when the view opened.
    pub func: u32,
    /// Index into the ordered list.
    pub selected: usize,
    pub order: SlowOrder,
}

/// Everything the screen knows of slow calls.
#[derive(Debug, Clone, Default)]
pub struct SlowCalls {
    pub by_function: BTreeMap<u32, SlowList>,
    /// What `--slow` asked (`None`: the session or capture keeps no slow calls).
    pub settings: Option<SlowSettings>,
    /// Whether the records carry the time breakdown (else its columns show `-`).
    pub breakdown: bool,
    /// The kernel's and the recorder's counts: a live session's, read each second, or a
    /// replayed capture's summary.
    pub counters: BTreeMap<u32, SlowCounters>,
    /// Slow calls of functions not on screen (never expected; counted so nothing vanishes).
    pub foreign: u64,
    /// The counters when the statistics were last reset (`r`): the view counts from there.
    baseline: BTreeMap<u32, SlowCounters>,
}

impl SlowCalls {
    /// Keeps each call of a function in `ids` (see [`SlowList`]).
    pub fn add(&mut self, calls: Vec<SlowCall>, ids: impl Fn(u32) -> bool) {
        for c in calls {
            if ids(c.call.func) {
                self.by_function.entry(c.call.func).or_default().add(c);
            } else {
                self.foreign += 1;
            }
        }
    }

    pub fn of(&self, func: u32) -> Option<&SlowList> {
        self.by_function.get(&func)
    }

    /// A function's kept and lost slow calls since the last reset, where known.
    pub fn counters_of(&self, func: u32) -> Option<SlowCounters> {
        let now = self.counters.get(&func)?;
        Some(match self.baseline.get(&func) {
            Some(base) => now.since(base),
            None => *now,
        })
    }

    /// `r`: the kept calls go, and the counts start again from the counters now.
    pub fn reset(&mut self) {
        self.by_function.clear();
        self.foreign = 0;
        self.baseline = self.counters.clone();
    }
}

/// The screen's setup for slow calls and the time basis, and the keys of the `x` view.
impl App {
    /// Which of a call's times the panels show: every record is converted here, where it
    /// enters, and nowhere else.
    pub fn set_time_basis(&mut self, time: TimeBasis) {
        self.time = time;
    }

    /// What `--slow` asked of the session or the capture (`None`: no slow calls are kept),
    /// and whether the records carry the time breakdown.
    pub fn set_slow_settings(&mut self, settings: Option<SlowSettings>, breakdown: bool) {
        self.slow.settings = settings;
        self.slow.breakdown = breakdown;
    }

    /// Each function's slow calls kept and lost: a live session's so far, or a replayed
    /// capture's.
    pub fn set_slow_counters(&mut self, counters: BTreeMap<u32, SlowCounters>) {
        self.slow.counters = counters;
    }

    /// Keys while the slow-call view is open: up/down move in its list, `o` orders it, `x`
    /// or Esc close it; help, save and quit work as everywhere; the rest waits.
    pub(super) fn act_in_slow_view(&mut self, mut view: SlowView, action: Action) -> Effect {
        let n = self.slow_calls().of(view.func).map_or(0, |l| l.len());
        match action {
            Action::Next => view.selected = (view.selected + 1).min(n.saturating_sub(1)),
            Action::Previous => view.selected = view.selected.saturating_sub(1),
            Action::SlowOrder => {
                view.order = match view.order {
                    SlowOrder::Slowest => SlowOrder::Newest,
                    SlowOrder::Newest => SlowOrder::Slowest,
                };
                view.selected = 0;
            }
            Action::SlowCalls | Action::Back => {
                self.slow_view = None;
                return Effect::Draw;
            }
            Action::Help => self.help = true,
            Action::Save => return Effect::Save,
            Action::Quit => return Effect::Quit(StopReason::Quit),
            _ => return Effect::None,
        }
        self.slow_view = Some(view);
        Effect::Draw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::test_support::slow_call as slow;

    #[test]
    fn keeps_the_slowest_per_function_and_counts_the_rest() {
        let mut s = SlowCalls::default();
        // 250 calls of 1, durations 1..=250 in a shuffled order; 3 of an unknown function.
        let calls: Vec<SlowCall> = (0..250u64)
            .map(|i| slow(1, i, (i * 97) % 250 + 1))
            .chain((0..3).map(|i| slow(9, i, 5)))
            .collect();
        s.add(calls, |f| f == 1);
        let list = s.of(1).expect("kept");
        assert_eq!(list.len(), KEPT_PER_FUNCTION);
        assert_eq!(list.arrived, 250);
        assert_eq!(list.not_kept(), 150);
        assert_eq!(s.foreign, 3);
        let kept: Vec<u64> = list
            .ordered(SlowOrder::Slowest)
            .iter()
            .map(|c| c.call.duration_ns)
            .collect();
        let expect: Vec<u64> = (151..=250).rev().collect();
        assert_eq!(kept, expect, "the 100 slowest, slowest first");
        let newest = list.ordered(SlowOrder::Newest);
        let exits: Vec<u64> = newest
            .iter()
            .map(|c| c.call.entry_ns + c.call.duration_ns)
            .collect();
        assert!(exits.windows(2).all(|w| w[0] >= w[1]), "{exits:?}");
    }
}
