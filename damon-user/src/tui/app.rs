//! The live screen's state and its pure update: `App::update(event) -> Effect`.
//!
//! Nothing here does I/O or reads a clock: time arrives as `Event::Second` from the source (the
//! wall clock when tracing, the capture's clock in a replay), which keeps the screen
//! deterministic under test.
use std::{
    collections::{BTreeMap, VecDeque},
    time::Duration,
};

use damon_common::{CallRecord, FunctionId};
use ratatui::crossterm::event::KeyEvent;

use crate::{
    analysis::disturbance::Disturbance,
    capture::{Clock, FunctionCounters, FunctionStatus, HistSnapshot, KernelHist, Mode},
    cli::TimeBasis,
    session::StopReason,
    stats::{
        calibration::Calibration,
        heatmap::{Heatmap, Overflow},
        interval_tracker::{IntervalTrack, IntervalTracker},
        window::{Distribution, FunctionStats},
    },
    tui::{
        keys::{self, Action},
        slow::{SlowCalls, SlowOrder, SlowView},
    },
};

/// Seconds of calls/s history behind the sparklines.
pub const RATE_HISTORY: usize = 60;
/// The heatmap's column: one second of the records' clock.
pub const HEAT_COLUMN_NS: u64 = 1_000_000_000;
/// Heatmap columns kept per function (the newest; more than the widest screen shows).
pub const HEAT_COLUMNS: usize = 600;

/// Everything the screen reacts to: one enum for the one `select!` of the event loop.
#[derive(Debug)]
pub enum Event {
    /// Call records as they arrived.
    Records(Vec<CallRecord>),
    /// `--slow`: slow calls with their kernel stacks, as they arrived (each also came as a
    /// record in [`Event::Records`]).
    Slow(Vec<crate::capture::SlowCall>),
    /// `--slow`: each function's slow calls kept and lost so far (about once a second).
    SlowCounters(BTreeMap<u32, crate::capture::SlowCounters>),
    /// Kernel mode: the kernel's counters and histograms, cumulative since the session
    /// started (about once a second).
    Histograms(HistSnapshot),
    /// The kernel's counters (cumulative since the session started).
    Counters(BTreeMap<u32, FunctionCounters>),
    /// One more second of the source's clock has passed.
    Second {
        elapsed: Duration,
    },
    /// Lines the probes logged (`--debug-probes`), oldest first.
    ProbeLog(Vec<String>),
    /// The probe floor measured beside the session has come, for the session's trace mode.
    Calibration(Calibration, Mode),
    /// A replay reached the end of its capture.
    SourceEnded,
    Key(KeyEvent),
    /// The terminal changed size: draw now.
    Resize,
    /// Time to draw (the fixed frame rate), if anything changed.
    Frame,
    /// A stop signal.
    Stop(StopReason),
    /// Outcome of a save requested by [`Effect::Save`]: the path written, or why not.
    Saved(Result<String, String>),
}

/// What the event loop must do after an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    None,
    Draw,
    Save,
    Quit(StopReason),
}

/// A histogram's scale; binning's type, named here too as the screen's state.
pub use super::binning::Scale;

/// Where the records come from, for the status line.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    Live,
    Replay { file: String, speed: f64 },
}

/// What the screen is set up with.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// The kernel release; the header adds the clock unless it is the wall clock.
    pub kernel_release: String,
    /// What a duration counts: every value on screen is shown in its unit.
    pub clock: Clock,
    pub origin: Origin,
    /// The capture being written by `--record`.
    pub recording: Option<String>,
    pub functions: Vec<FunctionStatus>,
    pub bucket_ns: u64,
    pub window_secs: u32,
    /// Kernel mode: the in-kernel histograms' linear bucket width (`None`: stream mode).
    pub kernel_width_ns: Option<u64>,
}

/// One traced function on screen.
#[derive(Debug, Clone)]
pub struct Panel {
    pub status: FunctionStatus,
    pub stats: FunctionStats,
    /// Records since start (or reset): those set aside included.
    pub records: u64,
    /// Kernel counters since start (or reset).
    pub counters: FunctionCounters,
    /// Calls per second, oldest first, at most [`RATE_HISTORY`].
    pub rates: VecDeque<u64>,
    calls_at_last_second: u64,
    /// Time per DAMON aggregation interval (empty without interval boundaries).
    pub intervals: IntervalTrack,
    /// The probe floor of this function's attach method: (median, uncertainty) in ns, when
    /// the session (or the replayed capture) is calibrated.
    pub floor: Option<(f64, f64)>,
    /// Since start (or reset), which calls were clean: `None` when the records (or, in kernel
    /// mode, the histograms) do not say (recorded without `--disturbance`, an older capture).
    pub disturbance: Option<Disturbance>,
    /// Latency over time: the calls of the last [`HEAT_COLUMNS`] seconds by entry time, and
    /// the aggregation intervals that ended in each second.
    pub heat: Heatmap,
    /// `--time on-cpu`: records left out of the statistics because their breakdown is not
    /// known (since start or reset).
    pub set_aside: u64,
}

impl Panel {
    fn new(status: FunctionStatus, window_secs: u32) -> Panel {
        let scores = status.id == FunctionId::DamonHotScore as u32;
        Panel {
            status,
            stats: FunctionStats::new(window_secs, scores),
            records: 0,
            counters: FunctionCounters::default(),
            rates: VecDeque::new(),
            calls_at_last_second: 0,
            intervals: IntervalTrack::default(),
            floor: None,
            disturbance: None,
            heat: Heatmap::new(0, HEAT_COLUMN_NS, HEAT_COLUMNS, Overflow::Scroll),
            set_aside: 0,
        }
    }

    /// The share of this panel's calls that nothing took the CPU from, when known.
    pub fn clean_share(&self) -> Option<f64> {
        self.disturbance.as_ref()?.clean_fraction()
    }

    /// Whether to show time per aggregation interval: a DAMON function with intervals.
    pub fn shows_intervals(&self) -> bool {
        self.intervals.intervals > 0
            && FunctionId::try_from(self.status.id).is_ok_and(FunctionId::is_damon)
    }

    pub fn traced(&self) -> bool {
        self.status.attach.is_traced()
    }

    /// Calls the kernel made. Counters are polled about once a second while records stream in,
    /// so records + drops is the better lower bound in between (and the only one in a replay,
    /// which knows the drops from the start and counts the records as they play).
    pub fn calls(&self) -> u64 {
        self.counters
            .made()
            .max(self.records + self.counters.dropped())
    }

    pub fn dropped(&self) -> u64 {
        self.counters.dropped()
    }

    /// Of [`Self::dropped`], the calls the kernel did not let the probes time: entry runs it
    /// skipped and entries whose exit run it skipped.
    pub fn kernel_skipped(&self) -> u64 {
        self.counters.skipped_entries.unwrap_or(0) + self.counters.stale_entries
    }

    pub fn calls_per_sec(&self) -> Option<u64> {
        self.rates.back().copied()
    }
}

#[derive(Debug, Clone)]
pub struct App {
    /// The header's kernel release and, unless wall, clock.
    pub kernel_release: String,
    pub clock: Clock,
    pub origin: Origin,
    pub recording: Option<String>,
    panels: Vec<Panel>,
    /// What the screen shows while frozen, panels and slow calls; `panels` and `slow` keep
    /// collecting.
    frozen: Option<(Vec<Panel>, SlowCalls)>,
    /// Latest raw kernel counters, and their values at the last reset.
    counters: BTreeMap<u32, FunctionCounters>,
    baseline: BTreeMap<u32, FunctionCounters>,
    pub selected: usize,
    pub focused: bool,
    pub help: bool,
    /// The histogram scale the user fixed with `l`, `+` or `-`; `None`: each panel's is
    /// chosen from its data ([`crate::tui::binning::auto_scale`]) at every frame.
    pub scale: Option<Scale>,
    pub zoom: bool,
    pub bucket_ns: u64,
    pub windowed: bool,
    /// Percentiles shown minus the probe floor (`c`), or raw.
    pub corrected: bool,
    /// Each panel shows its latency over time (`h`) instead of its histogram.
    pub heatmap: bool,
    pub window_secs: u32,
    pub elapsed: Duration,
    pub reset_at: Option<Duration>,
    pub records_total: u64,
    records_at_last_second: u64,
    pub records_per_sec: u64,
    /// Records of functions not on screen (never expected; counted so nothing vanishes).
    pub foreign_records: u64,
    /// The last batch of records, emptied: handed back to the source ([`App::take_spent`]) so
    /// that the next batch reuses its memory.
    spent: Vec<CallRecord>,
    /// Aggregation-interval boundaries seen, and each kdamond's open interval.
    pub interval_tracker: IntervalTracker,
    pub ended: bool,
    /// The last thing to tell the user (a saved path, an error, the probes' last log line).
    pub message: Option<String>,
    /// Lines the probes logged so far (`--debug-probes`).
    pub probe_lines: u64,
    /// The probe floor is being measured beside the session (corrected values come later).
    calibrating: bool,
    /// Kernel mode: the linear bucket width (percentiles are bucket tops); `None`: stream.
    pub kernel_width_ns: Option<u64>,
    /// Kernel mode: the last cumulative histograms, to take the next period's difference.
    last_hists: BTreeMap<u32, KernelHist>,
    /// Which of a call's times the panels show (`--time`); the header names it.
    pub time: TimeBasis,
    /// The slow calls kept so far (bounded, see [`crate::tui::slow`]).
    pub slow: SlowCalls,
    /// The slow-call view (`x`), when open.
    pub slow_view: Option<SlowView>,
}

impl App {
    pub fn new(config: AppConfig) -> App {
        let window_secs = config.window_secs.max(1);
        App {
            kernel_release: config.clock.with_release(&config.kernel_release),
            clock: config.clock,
            origin: config.origin,
            recording: config.recording,
            panels: config
                .functions
                .into_iter()
                .map(|s| Panel::new(s, window_secs))
                .collect(),
            frozen: None,
            counters: BTreeMap::new(),
            baseline: BTreeMap::new(),
            selected: 0,
            focused: false,
            help: false,
            scale: None,
            zoom: false,
            bucket_ns: config.bucket_ns.max(1),
            windowed: false,
            corrected: false,
            heatmap: false,
            window_secs,
            elapsed: Duration::ZERO,
            reset_at: None,
            records_total: 0,
            records_at_last_second: 0,
            records_per_sec: 0,
            foreign_records: 0,
            spent: Vec::new(),
            interval_tracker: IntervalTracker::default(),
            ended: false,
            message: None,
            probe_lines: 0,
            calibrating: false,
            kernel_width_ns: config.kernel_width_ns,
            last_hists: BTreeMap::new(),
            time: TimeBasis::Wall,
            slow: SlowCalls::default(),
            slow_view: None,
        }
    }

    /// Gives each panel the floor of its attach method in trace mode `mode`, from the
    /// session's or the replayed capture's calibration.
    pub fn set_calibration(&mut self, calibration: Option<&Calibration>, mode: Mode) {
        // A replayed capture that still says pending ended before its calibration did.
        self.calibrating = self.origin == Origin::Live
            && calibration
                .is_some_and(|c| c.status == crate::stats::calibration::CalibrationStatus::Pending);
        for p in &mut self.panels {
            p.floor = calibration
                .and_then(|c| c.floor(p.status.attach.attach()?, mode))
                .map(|f| (f.median_ns(), f.uncertainty_ns));
        }
    }

    /// Whether the records say which calls were disturbed (the capture's or session's
    /// metadata): the panels then count the clean ones.
    pub fn set_disturbance_measured(&mut self, measured: bool) {
        for p in &mut self.panels {
            p.disturbance = measured.then(Disturbance::default);
        }
    }

    /// Whether any panel can show corrected latencies.
    pub fn calibrated(&self) -> bool {
        self.panels.iter().any(|p| p.floor.is_some())
    }

    /// The panels as the screen shows them (a frozen copy while frozen).
    pub fn panels(&self) -> &[Panel] {
        self.frozen.as_ref().map_or(&self.panels, |(p, _)| p)
    }

    /// The slow calls as the screen shows them (a frozen copy while frozen).
    pub fn slow_calls(&self) -> &SlowCalls {
        self.frozen.as_ref().map_or(&self.slow, |(_, s)| s)
    }

    pub fn frozen(&self) -> bool {
        self.frozen.is_some()
    }

    /// Calls the kernel dropped since start (or reset), from the live counters.
    pub fn total_dropped(&self) -> u64 {
        self.panels.iter().map(Panel::dropped).sum()
    }

    /// The distribution the current window setting selects.
    pub fn distribution<'a>(&self, panel: &'a Panel) -> Distribution<'a> {
        if self.windowed {
            panel.stats.window()
        } else {
            panel.stats.since_start()
        }
    }

    /// The last batch of records, emptied, for the source's next batch (an empty vector if
    /// none came since the last call).
    pub fn take_spent(&mut self) -> Vec<CallRecord> {
        std::mem::take(&mut self.spent)
    }

    pub fn update(&mut self, event: Event) -> Effect {
        match event {
            Event::Records(batch) => {
                self.records(batch);
                Effect::None
            }
            Event::Slow(calls) => {
                let panels = &self.panels;
                self.slow
                    .add(calls, |f| panels.iter().any(|p| p.status.id == f));
                Effect::None
            }
            Event::SlowCounters(counters) => {
                self.set_slow_counters(counters);
                Effect::None
            }
            Event::Histograms(snapshot) => {
                let mut hists = BTreeMap::new();
                for (id, (c, h)) in snapshot.functions {
                    self.counters.insert(id, c);
                    hists.insert(id, h);
                }
                self.apply_counters();
                self.histograms(hists);
                Effect::None
            }
            Event::Counters(counters) => {
                self.counters = counters;
                self.apply_counters();
                Effect::None
            }
            Event::Second { elapsed } => {
                self.second(elapsed);
                Effect::None
            }
            Event::ProbeLog(lines) => {
                self.probe_lines += lines.len() as u64;
                if let Some(last) = lines.last() {
                    self.message = Some(format!("[{} probe lines] {last}", self.probe_lines));
                }
                Effect::Draw
            }
            Event::Calibration(cal, mode) => {
                self.set_calibration(Some(&cal), mode);
                Effect::Draw
            }
            Event::SourceEnded => {
                self.ended = true;
                Effect::Draw
            }
            Event::Key(key) => match keys::action_for(key) {
                Some(action) => self.act(action),
                None => Effect::None,
            },
            Event::Frame | Event::Resize => Effect::Draw,
            Event::Stop(reason) => Effect::Quit(reason),
            Event::Saved(outcome) => {
                self.message = Some(match outcome {
                    Ok(path) => format!("saved {path}"),
                    Err(e) => format!("save failed: {e}"),
                });
                Effect::Draw
            }
        }
    }

    /// Records as they arrive: each call's time on the screen's basis ([`TimeBasis::of`])
    /// goes into its panel; calls without one are counted as set aside.
    fn records(&mut self, mut batch: Vec<CallRecord>) {
        let mut latest = 0;
        for &r in &batch {
            latest = latest.max(r.entry_ns);
            if r.func == damon_common::AGGREGATION_MARK {
                for p in &mut self.panels {
                    p.heat.mark(r.entry_ns);
                }
                let panels = &mut self.panels;
                self.interval_tracker.mark(&r, |f, calls, ns| {
                    if let Some(p) = panels.iter_mut().find(|p| p.status.id == f) {
                        p.intervals.push(calls, ns);
                    }
                });
                continue;
            }
            self.records_total += 1;
            self.interval_tracker.call(&r);
            match self.panels.iter_mut().find(|p| p.status.id == r.func) {
                Some(p) => {
                    p.records += 1;
                    if let Some(d) = &mut p.disturbance {
                        d.add(&r);
                    }
                    let Some(ns) = self.time.of(&r) else {
                        p.set_aside += 1;
                        continue;
                    };
                    p.stats.record(ns, r.value);
                    p.heat.add(r.entry_ns, ns);
                }
                None => self.foreign_records += 1,
            }
        }
        // Every heatmap scrolls on to the newest time, called or not.
        if !batch.is_empty() {
            for p in &mut self.panels {
                p.heat.advance_to(latest);
            }
        }
        batch.clear();
        self.spent = batch;
    }

    /// Kernel mode: what the kernel counted since the last read goes into the panels, each
    /// call at its bucket's top (the exact time sum per period, the exact extremes since
    /// start).
    fn histograms(&mut self, hists: BTreeMap<u32, KernelHist>) {
        for (id, h) in hists {
            let d = crate::stats::kernel_hist::delta(&h, self.last_hists.get(&id));
            let n: u64 = d.buckets.iter().sum();
            match self.panels.iter_mut().find(|p| p.status.id == id) {
                Some(p) => {
                    for (b, &count) in d.buckets.iter().enumerate().filter(|(_, c)| **c > 0) {
                        let (lo, hi) = damon_common::hist_bucket_bounds(b as u32, d.width_ns);
                        let top = if hi == u64::MAX { lo } else { hi - 1 };
                        p.stats.record_bucket(lo, top, count);
                    }
                    p.stats.add_sum(d.sum_ns);
                    if let (Some(total), Some(period)) = (&mut p.disturbance, d.disturbance()) {
                        total.merge(&period);
                    }
                    if self.reset_at.is_none() && h.count > 0 {
                        p.stats.set_exact_extremes(h.min_ns, h.max_ns);
                    }
                    p.records += n;
                }
                None => self.foreign_records += n,
            }
            self.records_total += n;
            self.last_hists.insert(id, h);
        }
    }

    fn apply_counters(&mut self) {
        for p in &mut self.panels {
            let id = p.status.id;
            if let Some(now) = self.counters.get(&id) {
                let base = self.baseline.get(&id).copied().unwrap_or_default();
                p.counters = now.since(&base);
            }
        }
    }

    fn second(&mut self, elapsed: Duration) {
        let dt = elapsed.saturating_sub(self.elapsed).as_secs_f64();
        let per_sec = |n: u64| {
            if dt > 0.0 {
                (n as f64 / dt).round() as u64
            } else {
                0
            }
        };
        for p in &mut self.panels {
            p.stats.close_second();
            let calls = p.calls();
            p.rates
                .push_back(per_sec(calls.saturating_sub(p.calls_at_last_second)));
            while p.rates.len() > RATE_HISTORY {
                p.rates.pop_front();
            }
            p.calls_at_last_second = calls;
        }
        self.records_per_sec = per_sec(self.records_total - self.records_at_last_second);
        self.records_at_last_second = self.records_total;
        self.elapsed = elapsed;
    }

    fn act(&mut self, action: Action) -> Effect {
        if self.help {
            return match action {
                Action::Quit => Effect::Quit(StopReason::Quit),
                Action::Help | Action::Back => {
                    self.help = false;
                    Effect::Draw
                }
                _ => Effect::None,
            };
        }
        if let Some(view) = self.slow_view {
            return self.act_in_slow_view(view, action);
        }
        let n = self.panels.len().max(1);
        match action {
            Action::Next => self.selected = (self.selected + 1) % n,
            Action::Previous => self.selected = (self.selected + n - 1) % n,
            Action::Focus => self.focused = !self.panels.is_empty(),
            Action::Back => {
                self.focused = false;
                self.message = None;
            }
            Action::ToggleScale => self.scale = Some(self.other_scale()),
            Action::ToggleZoom => self.zoom = !self.zoom,
            Action::WiderBuckets => self.set_bucket(keys::wider(self.bucket_ns)),
            Action::NarrowerBuckets => self.set_bucket(keys::narrower(self.bucket_ns)),
            Action::ToggleWindow => self.windowed = !self.windowed,
            Action::ToggleCorrected if self.calibrated() => {
                self.corrected = !self.corrected;
                self.message = None;
            }
            Action::ToggleCorrected => {
                self.message = Some(
                    if self.calibrating {
                        "the probe floor is being measured beside the session: corrected \
                         latencies come when it is done"
                    } else {
                        "no probe calibration in this session: latencies are raw only"
                    }
                    .to_owned(),
                )
            }
            Action::ToggleHeatmap if self.kernel_width_ns.is_some() => {
                self.message = Some(
                    "kernel mode keeps no time per call: no heatmap (record in stream mode)"
                        .to_owned(),
                )
            }
            Action::ToggleHeatmap => {
                self.heatmap = !self.heatmap;
                self.message = None;
            }
            Action::Freeze => {
                self.frozen = match self.frozen {
                    Some(_) => None,
                    None => Some((self.panels.clone(), self.slow.clone())),
                }
            }
            Action::Reset => self.reset(),
            Action::SlowCalls => {
                self.slow_view = self.panels.get(self.selected).map(|p| SlowView {
                    func: p.status.id,
                    selected: 0,
                    order: SlowOrder::default(),
                });
                self.message = None;
            }
            Action::SlowOrder => {
                self.message = Some("o orders the slow calls: x opens them".to_owned())
            }
            Action::Save => return Effect::Save,
            Action::Help => self.help = true,
            Action::Quit => return Effect::Quit(StopReason::Quit),
        }
        Effect::Draw
    }

    /// What `l` switches to: the other scale than the one shown, which before any choice is
    /// the one the selected panel's data called for. From then on the choice is the user's.
    fn other_scale(&self) -> Scale {
        let shown = self.scale.or_else(|| {
            let panel = self.panels().get(self.selected)?;
            crate::tui::binning::auto_scale(&self.distribution(panel))
        });
        match shown {
            Some(Scale::Log2) => Scale::Linear,
            _ => Scale::Log2,
        }
    }

    /// Adjusting the bucket width means the user wants linear buckets of that width.
    fn set_bucket(&mut self, width_ns: u64) {
        self.bucket_ns = width_ns;
        self.scale = Some(Scale::Linear);
        self.zoom = false;
    }

    fn reset(&mut self) {
        self.baseline = self.counters.clone();
        for p in &mut self.panels {
            let (floor, measured) = (p.floor, p.disturbance.is_some());
            *p = Panel::new(p.status.clone(), self.window_secs);
            p.floor = floor;
            p.disturbance = measured.then(Disturbance::default);
        }
        self.apply_counters();
        self.slow.reset();
        self.frozen = None;
        self.reset_at = Some(self.elapsed);
        self.records_total = 0;
        self.records_at_last_second = 0;
        self.records_per_sec = 0;
        self.message = Some(format!(
            "statistics reset at {}",
            crate::tui::format::clock(self.elapsed)
        ));
    }
}

#[cfg(test)]
mod slow_tests;
#[cfg(test)]
mod tests;
