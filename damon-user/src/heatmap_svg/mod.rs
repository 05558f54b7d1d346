//! Latency over time as SVG heatmaps (`report --heatmap`, `compare --plot`): per function,
//! calls counted per (time column, latency row), p50 and p99 per column, DAMON's
//! aggregation-interval boundaries on the time axis, the clean calls apart when the capture
//! measured disturbance, and the time per aggregation interval of DAMON functions.
//!
//! The counts come from [`stats::heatmap`](crate::stats::heatmap) (columns of 10 ms doubled
//! as needed so at most [`MAX_COLUMNS`] cover the capture) fed in one pass over the records,
//! so a capture is read chunk by chunk ([`crate::capture::stream`]) and never held whole.
//! [`draw`] turns the counts into SVG; both commands call it.
pub mod draw;
pub mod layout;
#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, path::Path};

use damon_common::CallRecord;

use crate::{
    analysis::{ReportOptions, TimeBasis, damon::wants_intervals, time},
    capture::{
        Capture, Clock, DisturbanceStatus, Meta,
        stream::{Outline, Source, Visitor},
    },
    stats::{
        heatmap::{Heatmap, Overflow},
        intervals::{Boundaries, Place, counted_kdamonds},
    },
};

/// The columns' width before the capture's length makes them wider.
pub const START_WIDTH_NS: u64 = 10_000_000;
/// The most columns a map keeps (they double in width instead of growing in number).
pub const MAX_COLUMNS: usize = 300;

/// Time per complete aggregation interval of one function, per kdamond that called it.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Kdamond thread id → the function's summed durations per interval of that kdamond.
    pub totals: BTreeMap<u32, Vec<u64>>,
}

/// What is drawn of one function.
#[derive(Debug, Clone)]
pub struct FunctionMaps {
    pub name: String,
    /// Every call `--cpu`/`--pid` select (`compare --clean`: the clean ones).
    pub all: Heatmap,
    /// The clean calls among them, when the capture measured disturbance (`report`).
    pub clean: Option<Heatmap>,
    /// DAMON functions in a capture with interval boundaries (`report`).
    pub series: Option<Series>,
}

/// The maps of one capture (or of the runs of one `compare` side, laid over each other on
/// time since each capture's start), times in ns since that start.
#[derive(Debug, Clone)]
pub struct Maps {
    pub functions: Vec<FunctionMaps>,
    /// Aggregation-interval boundaries, each one's time.
    pub marks: Vec<u64>,
    /// Per kdamond thread id: its boundaries' times (for the per-interval series).
    pub boundaries: BTreeMap<u32, Vec<u64>>,
    pub clock: Clock,
    /// The clean calls are drawn apart.
    pub clean: bool,
}

impl Maps {
    /// Where the maps end: the last column's end.
    pub fn end_ns(&self) -> u64 {
        let maps = self
            .functions
            .iter()
            .flat_map(|f| [Some(&f.all), f.clean.as_ref()]);
        maps.flatten().map(Heatmap::end_ns).max().unwrap_or(0)
    }

    /// Extends every map to the column holding `t_ns`, so they share one column width.
    pub fn advance_to(&mut self, t_ns: u64) {
        for f in &mut self.functions {
            f.all.advance_to(t_ns);
            if let Some(c) = &mut f.clean {
                c.advance_to(t_ns);
            }
        }
    }
}

/// Gathers [`Maps`] from captures: [`Collector::start`] with a capture's metadata and
/// markers, then its records in any number of batches, then the next capture.
pub struct Collector<'a> {
    opts: &'a ReportOptions,
    /// Draw the clean calls apart and the per-interval series (`report`).
    detail: bool,
    start_ns: u64,
    measured: bool,
    bounds: Boundaries,
    /// Function id → index in `maps.functions`, for the capture being read.
    ids: BTreeMap<u32, usize>,
    /// Function ids whose per-interval series is kept.
    series_ids: Vec<u32>,
    maps: Maps,
}

fn new_map() -> Heatmap {
    Heatmap::new(0, START_WIDTH_NS, MAX_COLUMNS, Overflow::Coarsen)
}

impl<'a> Collector<'a> {
    /// `detail`: also the clean panel and the per-interval series (a single capture).
    pub fn new(opts: &'a ReportOptions, detail: bool) -> Collector<'a> {
        Collector {
            opts,
            detail,
            start_ns: 0,
            measured: false,
            bounds: Boundaries::default(),
            ids: BTreeMap::new(),
            series_ids: Vec::new(),
            maps: Maps {
                functions: Vec::new(),
                marks: Vec::new(),
                boundaries: BTreeMap::new(),
                clock: Clock::Wall,
                clean: false,
            },
        }
    }

    /// A capture begins: its traced functions (those `--functions` selects) get maps (the
    /// maps of a function already seen, by name, go on), its markers are placed.
    pub fn start(&mut self, meta: &Meta, marks: &[CallRecord]) {
        self.start_ns = meta.start_monotonic_ns;
        self.measured = self.detail && DisturbanceStatus::measured(meta);
        self.maps.clean |= self.measured;
        self.maps.clock = meta.clock;
        self.bounds = Boundaries::from_marks(marks);
        self.ids.clear();
        self.series_ids.clear();
        let selected =
            |name: &String| self.opts.functions.is_empty() || self.opts.functions.contains(name);
        for f in meta.functions.iter().filter(|f| f.attach.is_traced()) {
            if !selected(&f.name) {
                continue;
            }
            let at = match self.maps.functions.iter().position(|m| m.name == f.name) {
                Some(at) => at,
                None => {
                    self.maps.functions.push(FunctionMaps {
                        name: f.name.clone(),
                        all: new_map(),
                        clean: None,
                        series: None,
                    });
                    self.maps.functions.len() - 1
                }
            };
            let m = &mut self.maps.functions[at];
            if self.measured {
                m.clean.get_or_insert_with(new_map);
            }
            if self.detail && !self.bounds.is_empty() && wants_intervals(f.attach, f.id) {
                m.series.get_or_insert_with(Series::default);
                self.series_ids.push(f.id);
            }
            self.ids.insert(f.id, at);
        }
        for m in marks {
            self.maps
                .marks
                .push(m.entry_ns.saturating_sub(self.start_ns));
        }
        for (tid, b) in &self.bounds.by_kdamond {
            let rel = b.iter().map(|t| t.saturating_sub(self.start_ns));
            self.maps.boundaries.entry(*tid).or_default().extend(rel);
        }
    }

    /// A batch of the current capture's records (markers and unselected ones are skipped).
    pub fn add(&mut self, records: &[CallRecord]) {
        for r in records {
            // `--time on-cpu`: the on-CPU durations, as the report's (`analysis::time`).
            let r = &match self.opts.time {
                TimeBasis::Wall => *r,
                TimeBasis::OnCpu => time::on_cpu(r),
            };
            let Some(&at) = self.ids.get(&r.func) else {
                continue;
            };
            let m = &mut self.maps.functions[at];
            if let Some(s) = m
                .series
                .as_mut()
                .filter(|_| self.series_ids.contains(&r.func))
            {
                // Per-interval cost ignores `--cpu`/`--pid`, as the report's numbers do.
                if self.bounds.intervals_of(r.tid) > 0 {
                    let n = self.bounds.intervals_of(r.tid);
                    let totals = s.totals.entry(r.tid).or_insert_with(|| vec![0; n]);
                    if let Place::Interval(k) = self.bounds.place(r.tid, r.entry_ns) {
                        totals[k] += r.duration_ns;
                    }
                }
            }
            if !self.opts.keeps_record(r) {
                continue;
            }
            let t = r.entry_ns.saturating_sub(self.start_ns);
            m.all.add(t, r.duration_ns);
            if let Some(c) = m.clean.as_mut().filter(|_| self.measured && r.is_clean()) {
                c.add(t, r.duration_ns);
            }
        }
    }

    /// The capture ends at `duration_ns` after its start (if known): the per-interval series
    /// get their counted kdamonds (those that called, or all when none did, as
    /// `stats::intervals` counts them).
    pub fn end(&mut self, duration_ns: Option<u64>) {
        if let Some(d) = duration_ns {
            self.maps.advance_to(d.saturating_sub(1));
        }
        for m in &mut self.maps.functions {
            if let Some(s) = &mut m.series {
                for tid in counted_kdamonds(s.totals.keys().copied(), &self.bounds) {
                    let n = self.bounds.intervals_of(tid);
                    s.totals.entry(tid).or_insert_with(|| vec![0; n]);
                }
            }
        }
    }

    /// The maps, each extended to the last one's end and with the markers counted in their
    /// columns.
    pub fn finish(mut self) -> Maps {
        let end = self.maps.marks.iter().map(|t| t + 1).max().unwrap_or(0);
        self.maps
            .advance_to(end.max(self.maps.end_ns()).saturating_sub(1));
        for f in &mut self.maps.functions {
            for &t in &self.maps.marks {
                f.all.mark(t);
                if let Some(c) = &mut f.clean {
                    c.mark(t);
                }
            }
        }
        self.maps
    }
}

impl Visitor for Collector<'_> {
    fn records(&mut self, records: &[CallRecord]) {
        self.add(records);
    }
}

/// Collects the interval markers of a pass without records.
#[derive(Default)]
struct Marks(Vec<CallRecord>);

impl Visitor for Marks {
    fn marks(&mut self, marks: &[CallRecord]) {
        self.0.extend_from_slice(marks);
    }
}

/// The maps of the capture at `path`, read in two streaming passes (markers, then records):
/// `None` for a kernel-mode capture, which has no per-call records.
pub fn collect_file(path: &Path, opts: &ReportOptions) -> anyhow::Result<Option<(Maps, Outline)>> {
    let source = Source::open(path)?;
    let mut marks = Marks::default();
    let outline = source.visit(&mut marks, false)?;
    if outline.meta.mode == crate::capture::Mode::Kernel {
        return Ok(None);
    }
    if let Some(why) = time::not_available(&outline.meta).filter(|_| opts.time == TimeBasis::OnCpu)
    {
        return Err(crate::error::UsageError(why).into());
    }
    let mut c = Collector::new(opts, true);
    c.start(&outline.meta, &marks.0);
    source.visit(&mut c, true)?;
    c.end(outline.summary.as_ref().map(|s| s.duration_ns));
    Ok(Some((c.finish(), outline)))
}

/// The maps of one `compare` side, its runs laid over each other on time since each
/// capture's start; `None` when no run has per-call records (kernel mode).
pub fn collect_captures<'c>(
    captures: impl IntoIterator<Item = &'c Capture>,
    opts: &ReportOptions,
) -> Option<Maps> {
    let mut c = Collector::new(opts, false);
    let mut any = false;
    for cap in captures.into_iter().filter(|c| !c.is_kernel_mode()) {
        c.start(&cap.meta, &cap.marks);
        c.add(&cap.records);
        c.end(cap.summary.as_ref().map(|s| s.duration_ns));
        any = true;
    }
    any.then(|| c.finish())
}

/// `report --heatmap PATH`: draws the capture's maps into `path` (created 0600; an existing
/// file only with `force`). A kernel-mode capture is an error that says why.
pub fn write_report(
    capture: &Path,
    path: &Path,
    force: bool,
    opts: &ReportOptions,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let Some((maps, outline)) = collect_file(capture, opts)? else {
        return Err(crate::error::UsageError(format!(
            "--heatmap needs one record per call, and {} was recorded with --mode kernel \
             (in-kernel histograms, no call times): record in stream mode (the default) to \
             draw heatmaps",
            capture.display()
        ))
        .into());
    };
    let mut title = format!(
        "{} — {} · {}",
        capture.display(),
        outline.meta.kernel.release,
        outline.meta.clock.describe()
    );
    if opts.time == TimeBasis::OnCpu {
        title.push_str(" · on-CPU time");
    }
    if let Some(chunk) = outline.torn_chunk {
        title.push_str(&format!(
            " · the file ends inside chunk {chunk}: the chunks before it"
        ));
    }
    let svg = layout::report_document(&maps, &title);
    let mut file = crate::capture::format::create_output(path, force)?;
    file.write_all(svg.as_bytes())?;
    Ok(())
}
