//! `damon-trace compare`: pure math over the captures of two sides, one capture per run,
//! "before" the reference.
//!
//! The run is the unit of replication. For each function traced on both sides: a side-by-side
//! range table on one grid and percentiles of the pooled calls with each run's spread; Welch
//! intervals over per-run values; a verdict from Welch's t on the per-run medians, Holm-adjusted
//! across functions — or, with one run on a side, a description and the runs it would take;
//! and warnings when the sides did different work or ran differently configured.
pub mod intervals;
mod kernel;
pub mod plot;
pub mod render;
/// A side's latencies minus its own capture's probe floor (for the attach method and the
/// capture's trace mode), when it was calibrated.
fn corrected(c: &Capture, attach: &str, stats: Option<&LatencyStats>) -> Option<Corrected> {
    let floor = Calibration::from_meta(c.meta.calibration.as_ref())?
        .floor(attach, &c.meta.mode)
        .cloned()?;
    Some(Corrected::new(&floor, stats?))
}

mod runs;
#[cfg(test)]
mod tests;
pub mod values;
mod verdict;

pub use verdict::{p_text, signed};

use std::{collections::BTreeMap, process::ExitCode};

use anyhow::Context as _;
use damon_common::FunctionId;
use serde::Serialize;

use crate::{
    capture::{Capture, FunctionCounters, KernelHist, format::read_file},
    cli::{CompareArgs, CompareFormat},
    record::UsageError,
    report::{ReportOptions, check_functions, counters, select},
    stats::{
        LatencyStats,
        buckets::BucketGrid,
        calibration::{Calibration, Corrected},
        intervals::PerInterval,
        ranktest::{self, MannWhitney},
        runs::{Interval, RunTest},
    },
};

/// Significance level of the verdicts.
pub const ALPHA: f64 = 0.05;
/// Fewer calls than this on a side and the verdict says the comparison is weak.
pub const FEW: usize = 20;
pub const PERCENTILES: [(f64, &str); 5] = [
    (50.0, "p50"),
    (90.0, "p90"),
    (95.0, "p95"),
    (99.0, "p99"),
    (99.9, "p99.9"),
];

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub before: SideMeta,
    pub after: SideMeta,
    pub functions: Vec<FunctionComparison>,
    /// Traced on one side only (missing, inlined or failed on the other, or not selected).
    pub only_before: Vec<String>,
    pub only_after: Vec<String>,
    pub warnings: Vec<String>,
    pub method: Method,
}

#[derive(Debug, Serialize)]
pub struct Method {
    /// The unit of replication: every interval, p-value and verdict rests on per-run values.
    pub unit: &'static str,
    pub runs_before: usize,
    pub runs_after: usize,
    pub alpha: f64,
    /// How the verdicts were reached with these runs.
    pub verdict: String,
    /// Holm's adjustment across this many function tests (the family).
    pub tests: usize,
    pub intervals: &'static str,
    pub pooled: &'static str,
    pub calls_test: &'static str,
    pub typical_variation: &'static str,
}

/// One capture: one run.
#[derive(Debug, Serialize)]
pub struct CaptureSide {
    pub file: String,
    pub kernel_release: String,
    pub cpu_model: String,
    pub duration_ns: Option<u64>,
    pub complete: bool,
}

/// One side of the comparison: its runs.
#[derive(Debug, Serialize)]
pub struct SideMeta {
    pub runs: usize,
    /// The kernel release of its runs (several, comma-separated, if they differ).
    pub kernel_release: String,
    pub cpu_model: String,
    pub captures: Vec<CaptureSide>,
}

/// A side's calls, all runs pooled.
#[derive(Debug, Serialize)]
pub struct SideStats {
    pub attach: &'static str,
    pub calls: u64,
    pub count: u64,
    pub dropped: u64,
    pub matched: u64,
    /// Raw latencies (they include the probe's cost), all runs pooled.
    pub stats: Option<LatencyStats>,
    /// The raw latencies minus the probe floor for the function's attach method (the first
    /// calibrated run's; absent when no run has a matching calibration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<Corrected>,
}

#[derive(Debug, Serialize)]
pub struct RangeRow {
    pub lo_ns: u64,
    pub hi_ns: Option<u64>,
    /// Calls of all runs pooled.
    pub before: u64,
    pub after: u64,
    /// Smallest and largest share of a run's calls in this row, percent (several runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_runs_pct: Option<[f64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_runs_pct: Option<[f64; 2]>,
}

#[derive(Debug, Serialize)]
pub struct PercentileDelta {
    pub label: &'static str,
    pub p: f64,
    /// Of all runs pooled.
    pub before_ns: u64,
    pub after_ns: u64,
    /// Smallest and largest per-run value (several runs with enough calls in this tail).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_runs: Option<[f64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_runs: Option<[f64; 2]>,
    /// `after − before` of the mean per-run percentile with its 95 % Welch interval over runs;
    /// `None` with fewer than two runs a side (or too few calls in this tail).
    pub interval: Option<Interval>,
}

#[derive(Debug, Serialize)]
pub struct RunsPair {
    pub before: Vec<runs::RunSummary>,
    pub after: Vec<runs::RunSummary>,
}

#[derive(Debug, Serialize)]
pub struct FunctionComparison {
    pub name: String,
    pub before: SideStats,
    pub after: SideStats,
    pub grid: BucketGrid,
    pub rows: Vec<RangeRow>,
    pub percentiles: Vec<PercentileDelta>,
    /// After − before of the per-run means, Welch's interval over runs.
    pub mean: Option<Interval>,
    /// Each run's numbers.
    pub runs: RunsPair,
    /// The test behind the verdict: Welch's t on the per-run medians (two runs a side at
    /// least).
    pub test: Option<RunTest>,
    /// Its p-value after Holm's adjustment across the functions compared.
    pub p_holm: Option<f64>,
    /// Mann–Whitney and Cliff's δ over the pooled calls: describes the calls, not the kernels
    /// (calls of one run are not independent), never used for the verdict.
    pub calls_test: Option<MannWhitney>,
    pub significant: bool,
    pub verdict: String,
    /// Runs a side would need to resolve the median difference seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_needed: Option<runs::RunsNeeded>,
    /// The two sides did different amounts of work (see the warnings).
    pub workload_differs: bool,
    /// Time per DAMON aggregation interval, when a capture recorded the boundaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_interval: Option<intervals::IntervalComparison>,
    /// Before/after distributions of the returned value and recorded arguments (scores, pages
    /// migrated, target nodes, region nr_accesses/age), runs pooled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<values::DistComparison>,
    /// Log-spaced bins over both samples, for `--plot` (latencies span decades).
    #[serde(skip)]
    pub log_bins: Vec<plot::LogBin>,
}

/// The captures of each side (one per run), with the names the user gave them.
pub struct Inputs<'a> {
    pub before: Vec<(&'a str, &'a Capture)>,
    pub after: Vec<(&'a str, &'a Capture)>,
}

impl<'a> Inputs<'a> {
    /// One capture a side.
    #[cfg(test)]
    pub fn pair(before: (&'a str, &'a Capture), after: (&'a str, &'a Capture)) -> Self {
        Inputs {
            before: vec![before],
            after: vec![after],
        }
    }
}

fn side_meta(runs: &[(&str, &Capture)]) -> SideMeta {
    let captures: Vec<CaptureSide> = runs
        .iter()
        .map(|&(file, c)| CaptureSide {
            file: file.to_owned(),
            kernel_release: c.meta.kernel.release.clone(),
            cpu_model: c.meta.cpu_model.clone(),
            duration_ns: c.summary.as_ref().map(|s| s.duration_ns),
            complete: c.summary.is_some(),
        })
        .collect();
    SideMeta {
        runs: captures.len(),
        kernel_release: distinct(captures.iter().map(|c| c.kernel_release.as_str())).join(", "),
        cpu_model: distinct(captures.iter().map(|c| c.cpu_model.as_str())).join(", "),
        captures,
    }
}

/// The different values, in order of first appearance.
fn distinct<T: PartialEq>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in values {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// Names of the functions a capture traced (attached one way or another), with id and method.
fn traced(c: &Capture) -> Vec<(&str, u32, &'static str)> {
    c.meta
        .functions
        .iter()
        .filter(|f| matches!(f.attach.as_str(), "fentry" | "kprobe"))
        .map(|f| (f.name.as_str(), f.id, f.attach.as_str()))
        .collect()
}

/// One run of one function, ready to compare.
struct Run<'a> {
    file: &'a str,
    capture: &'a Capture,
    id: u32,
    attach: &'static str,
    selected: crate::report::Selected,
    counters: FunctionCounters,
    /// The run's histogram on the kernel's grid (a kernel-mode capture on either side).
    kernel: Option<KernelHist>,
    /// Cost per DAMON aggregation interval (DAMON functions, per-call records, boundaries).
    per_interval: Option<PerInterval>,
}

impl Run<'_> {
    /// The per-interval numbers of the runs that have them.
    fn intervals<'r>(runs: &'r [Run]) -> Vec<&'r PerInterval> {
        runs.iter()
            .filter_map(|r| r.per_interval.as_ref())
            .collect()
    }

    fn summary(&self) -> runs::RunSummary {
        let d = &self.selected.durations;
        let seconds = self
            .capture
            .summary
            .as_ref()
            .map(|s| s.duration_ns as f64 / 1e9)
            .filter(|&s| s > 0.0);
        let mean_ns = match &self.kernel {
            Some(h) if h.count > 0 => Some(h.sum_ns as f64 / h.count as f64),
            _ if !d.is_empty() => Some(d.iter().map(|&v| v as f64).sum::<f64>() / d.len() as f64),
            _ => None,
        };
        let calls = self.counters.made();
        runs::RunSummary {
            file: self.file.to_owned(),
            calls,
            matched: d.len() as u64,
            dropped: self.counters.dropped(),
            seconds,
            calls_per_s: seconds.map(|s| calls as f64 / s),
            calls_per_interval: self.per_interval.as_ref().map(|p| p.mean_calls),
            percentiles: PERCENTILES
                .iter()
                .map(|&(p, _)| {
                    crate::stats::runs::enough_tail(d.len(), p)
                        .then(|| crate::stats::percentile(d, p))
                        .flatten()
                })
                .collect(),
            p50_ns: crate::stats::percentile(d, 50.0),
            mean_ns,
        }
    }
}

/// The runs of one side that traced `name`, with their selected calls.
fn side_runs<'a>(
    name: &str,
    side: &[(&'a str, &'a Capture)],
    selected: &mut [BTreeMap<u32, crate::report::Selected>],
    resolution: Option<kernel::Resolution>,
) -> Vec<Run<'a>> {
    side.iter()
        .zip(selected.iter_mut())
        .filter_map(|(&(file, c), sel)| {
            let &(_, id, attach) = traced(c).iter().find(|f| f.0 == name)?;
            let selected = sel.remove(&id).unwrap_or_default();
            let (selected, counters, kernel) = match resolution {
                Some(res) => {
                    let k = kernel::side(c, id, selected, res);
                    (k.selected, k.counters, Some(k.hist))
                }
                None => {
                    let counters = counters(c, id, selected.count);
                    (selected, counters, None)
                }
            };
            let per_interval = FunctionId::from_symbol(name)
                .filter(|f| f.is_damon() && kernel.is_none())
                .and_then(|_| intervals::of_run(c, id));
            Some(Run {
                file,
                capture: c,
                id,
                attach,
                selected,
                counters,
                kernel,
                per_interval,
            })
        })
        .collect()
}

/// The pooled side: counters added, calls put together (sorted), histograms added on the
/// grid.
fn pooled(runs: &[Run], attach: &'static str) -> (SideStats, Vec<u64>, Option<KernelHist>) {
    let mut durations: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.selected.durations.iter().copied())
        .collect();
    let hists: Option<Vec<&KernelHist>> = runs.iter().map(|r| r.kernel.as_ref()).collect();
    let merged = hists.map(|h| kernel::merge(&h));
    let stats = match &merged {
        Some(h) => kernel::stats(&mut durations, h),
        None => LatencyStats::from_durations(&mut durations),
    };
    let corrected = runs
        .iter()
        .find_map(|r| corrected(r.capture, attach, stats.as_ref()));
    (
        SideStats {
            attach,
            calls: runs.iter().map(|r| r.counters.made()).sum(),
            count: runs.iter().map(|r| r.selected.count).sum(),
            dropped: runs.iter().map(|r| r.counters.dropped()).sum(),
            matched: durations.len() as u64,
            corrected,
            stats,
        },
        durations,
        merged,
    )
}

/// Each run's share of its calls in each row (min and max over runs, percent), when a side has
/// several runs.
fn row_spread(rows: &[(u64, Option<u64>)], runs: &[Run]) -> Vec<Option<[f64; 2]>> {
    rows.iter()
        .map(|&(lo, hi)| {
            let shares: Vec<f64> = runs
                .iter()
                .filter(|r| !r.selected.durations.is_empty())
                .map(|r| {
                    let d = &r.selected.durations;
                    let below = |x: u64| d.partition_point(|&v| v < x);
                    let n = hi.map_or(d.len(), below) - below(lo);
                    n as f64 * 100.0 / d.len() as f64
                })
                .collect();
            runs::spread(&shares)
        })
        .collect()
}

/// Compares the runs of two sides (pure; deterministic).
pub fn build(inp: &Inputs, opts: &ReportOptions) -> Result<Comparison, UsageError> {
    if inp.before.is_empty() || inp.after.is_empty() {
        return Err(UsageError(
            "compare needs at least one capture a side".to_owned(),
        ));
    }
    let all: Vec<&Capture> = inp.before.iter().chain(&inp.after).map(|r| r.1).collect();
    for name in &opts.functions {
        if all
            .iter()
            .all(|c| check_functions(c, std::slice::from_ref(name)).is_err())
        {
            return Err(UsageError(format!(
                "function `{name}` is in none of the captures"
            )));
        }
    }
    let wanted = |n: &str| opts.functions.is_empty() || opts.functions.iter().any(|f| f == n);
    let names = |side: &[(&str, &Capture)]| -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for (n, _, _) in side.iter().flat_map(|r| traced(r.1)) {
            if wanted(n) && !v.iter().any(|x| x == n) {
                v.push(n.to_owned());
            }
        }
        v
    };
    let (nb, na) = (names(&inp.before), names(&inp.after));
    let mut sel_b: Vec<_> = inp.before.iter().map(|r| select(r.1, opts)).collect();
    let mut sel_a: Vec<_> = inp.after.iter().map(|r| select(r.1, opts)).collect();
    let mut warnings = header_warnings(&inp.before, &inp.after);
    let resolution = kernel::Resolution::of(&all, opts)?;
    if let Some(res) = resolution {
        warnings.push(format!(
            "a capture was recorded with --mode kernel: all are compared {} (percentiles and \
             tests on bucketed durations; min, mean and max exact); per-interval times and \
             argument values need per-call records and are not compared",
            res.describe()
        ));
        if res.mixed_widths {
            warnings.push(format!(
                "the kernel-mode captures used different --hist-width: the finer histogram is \
                 re-bucketed onto {} ns buckets, each of its buckets counted where its lower \
                 edge falls (exact where the grids nest)",
                res.width_ns
            ));
        }
    }
    let multi = inp.before.len() > 1 || inp.after.len() > 1;
    let mut functions = Vec::new();
    for name in nb.iter().filter(|n| na.contains(n)) {
        let rb = side_runs(name, &inp.before, &mut sel_b, resolution);
        let ra = side_runs(name, &inp.after, &mut sel_a, resolution);
        for (label, side, got) in [("before", &inp.before, &rb), ("after", &inp.after, &ra)] {
            if got.len() < side.len() {
                warnings.push(format!(
                    "{name}: traced in {} of the {} {label} runs; compared over those",
                    got.len(),
                    side.len()
                ));
            }
        }
        let methods = |runs: &[Run]| {
            let mut m: Vec<&'static str> = runs.iter().map(|r| r.attach).collect();
            m.dedup();
            m
        };
        let (mb, ma) = (methods(&rb), methods(&ra));
        if mb != ma || mb.len() > 1 {
            warnings.push(format!(
                "{name}: traced with {} before and {} after: the probes cost differently, so \
                 part of any difference is the probe's",
                mb.join("+"),
                ma.join("+")
            ));
        }
        if resolution.is_some() {
            for (label, runs) in [("before", &rb), ("after", &ra)] {
                let n: u64 = runs
                    .iter()
                    .filter_map(|r| r.kernel.as_ref())
                    .map(|h| h.buckets.iter().sum::<u64>())
                    .max()
                    .unwrap_or(0);
                if n > kernel::MAX_EXPANDED {
                    warnings.push(format!(
                        "{name}: {n} calls in a {label} run: the tests and intervals use a \
                         proportional sample of {} of them (same buckets; as conservative as \
                         that many calls)",
                        kernel::MAX_EXPANDED
                    ));
                }
            }
        }
        let (before, b, kb) = pooled(&rb, mb[0]);
        let (after, a, ka) = pooled(&ra, ma[0]);
        let (grid, bounds, counts) = match (&kb, &ka) {
            (Some(kb), Some(ka)) => {
                let (grid, rows) = kernel::rows(opts, kb, ka)?;
                let bounds: Vec<_> = rows.iter().map(|(r, _)| (r.lo_ns, r.hi_ns)).collect();
                let counts: Vec<_> = rows.iter().map(|(x, y)| (x.count, y.count)).collect();
                (grid, bounds, counts)
            }
            _ => {
                let grid = BucketGrid::plan(opts.bucket_ns, opts.max_ns, &[&b, &a])
                    .map_err(|e| UsageError(e.to_string()))?;
                let (cb, ca) = (grid.count(&b), grid.count(&a));
                let bounds: Vec<_> = cb.iter().map(|r| (r.lo_ns, r.hi_ns)).collect();
                let counts: Vec<_> = cb
                    .iter()
                    .zip(&ca)
                    .map(|(x, y)| (x.count, y.count))
                    .collect();
                (grid, bounds, counts)
            }
        };
        let (spread_b, spread_a) = if multi {
            (row_spread(&bounds, &rb), row_spread(&bounds, &ra))
        } else {
            (vec![None; bounds.len()], vec![None; bounds.len()])
        };
        let rows = bounds
            .iter()
            .zip(&counts)
            .zip(spread_b.into_iter().zip(spread_a))
            .map(
                |((&(lo_ns, hi_ns), &(before, after)), (bs, as_))| RangeRow {
                    lo_ns,
                    hi_ns,
                    before,
                    after,
                    before_runs_pct: bs,
                    after_runs_pct: as_,
                },
            )
            .collect();
        for (label, s) in [("before", &before), ("after", &after)] {
            if s.dropped > 0 {
                warnings.push(format!(
                    "{name}: {} of {} calls dropped {label}: the recorded calls may not represent \
                     all of them",
                    s.dropped, s.calls
                ));
            }
        }
        let sb: Vec<_> = rb.iter().map(Run::summary).collect();
        let sa: Vec<_> = ra.iter().map(Run::summary).collect();
        let percentiles = PERCENTILES
            .iter()
            .enumerate()
            .filter_map(|(i, &(p, label))| {
                let per = |s: &[runs::RunSummary]| {
                    runs::values(s, |r| r.percentiles[i].map(|v| v as f64))
                };
                let (vb, va) = (per(&sb), per(&sa));
                Some(PercentileDelta {
                    label,
                    p,
                    before_ns: crate::stats::percentile(&b, p)?,
                    after_ns: crate::stats::percentile(&a, p)?,
                    before_runs: runs::spread(&vb),
                    after_runs: runs::spread(&va),
                    interval: runs::interval(&vb, &va),
                })
            })
            .collect::<Vec<_>>();
        let mean = runs::interval(
            &runs::values(&sb, |r| r.mean_ns),
            &runs::values(&sa, |r| r.mean_ns),
        );
        let workload = workload_warnings(name, &sb, &sa);
        let workload_differs = !workload.is_empty();
        warnings.extend(workload);
        let per_interval = intervals::compare(&Run::intervals(&rb), &Run::intervals(&ra));
        let values = if resolution.is_some() {
            Vec::new()
        } else {
            values::compare(
                name,
                &rb.iter().map(|r| (r.capture, r.id)).collect::<Vec<_>>(),
                &ra.iter().map(|r| (r.capture, r.id)).collect::<Vec<_>>(),
                &|r| opts.keeps(r.cpu, r.pid),
            )
        };
        functions.push(FunctionComparison {
            name: name.clone(),
            test: runs::median_test(&sb, &sa),
            calls_test: ranktest::mann_whitney(&b, &a),
            log_bins: plot::log_bins(&b, &a),
            runs: RunsPair {
                before: sb,
                after: sa,
            },
            before,
            after,
            grid,
            rows,
            percentiles,
            mean,
            p_holm: None,
            significant: false,
            verdict: String::new(),
            runs_needed: None,
            workload_differs,
            per_interval,
            values,
        });
    }
    // One family: the functions with a test.
    let tested: Vec<usize> = (0..functions.len())
        .filter(|&i| functions[i].test.is_some())
        .collect();
    let adjusted = crate::stats::runs::holm(
        &tested
            .iter()
            .map(|&i| functions[i].test.expect("tested").p_value)
            .collect::<Vec<_>>(),
    );
    for (&i, p) in tested.iter().zip(adjusted) {
        functions[i].p_holm = Some(p);
    }
    for f in &mut functions {
        let (significant, text, needed) = verdict::verdict(f, tested.len());
        f.significant = significant;
        f.runs_needed = needed;
        f.verdict = match resolution {
            Some(res) => format!("{text} ({})", res.describe()),
            None => text,
        };
    }
    let only = |mine: &[String], other: &[String]| -> Vec<String> {
        mine.iter()
            .filter(|n| !other.contains(n))
            .cloned()
            .collect()
    };
    let (runs_before, runs_after) = (inp.before.len(), inp.after.len());
    Ok(Comparison {
        before: side_meta(&inp.before),
        after: side_meta(&inp.after),
        only_before: only(&nb, &na),
        only_after: only(&na, &nb),
        functions,
        warnings,
        method: Method {
            unit: "run",
            runs_before,
            runs_after,
            alpha: ALPHA,
            verdict: if runs_before >= 2 && runs_after >= 2 {
                format!(
                    "Welch's t on the per-run medians ({runs_before} and {runs_after} runs), \
                     two-sided; significant when the Holm-adjusted p-value across the {} \
                     functions tested is below {ALPHA}",
                    tested.len()
                )
            } else {
                "none: a side has one run, so the run-to-run variation is unknown; the \
                 difference between the runs is described, not tested"
                    .to_owned()
            },
            tests: tested.len(),
            intervals: "95 % Welch intervals over the per-run values (percentiles, means, \
                        time per interval); none with fewer than two runs a side",
            pooled: "range rows, percentiles, min/mean/max and value distributions pool the \
                     runs' calls; [min–max] over runs beside them",
            calls_test: "Mann–Whitney U and Cliff's δ over the pooled calls: describes the \
                         calls only (calls of one run share its boot); never the verdict",
            typical_variation: runs::TYPICAL_SOURCE,
        },
    })
}

/// `s` cut to at most `max` characters, with an ellipsis when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    s.chars().take(max).collect::<String>() + "…"
}

/// A rate with three significant digits or so.
fn rate(x: f64) -> String {
    match x.abs() {
        v if v >= 100.0 => format!("{x:.0}"),
        v if v >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

/// Different work on the two sides, beyond what run-to-run variation explains: calls per
/// second, calls per DAMON aggregation interval.
fn workload_warnings(name: &str, b: &[runs::RunSummary], a: &[runs::RunSummary]) -> Vec<String> {
    let mut out = Vec::new();
    type Rate = fn(&runs::RunSummary) -> Option<f64>;
    let checks: [(&str, Rate); 2] = [
        ("calls/s", |r| r.calls_per_s),
        ("calls per aggregation interval", |r| r.calls_per_interval),
    ];
    for (what, get) in checks {
        let (vb, va) = (runs::values(b, get), runs::values(a, get));
        if let Some(ratio) = runs::rates_differ(&vb, &va) {
            let list = |v: &[f64]| v.iter().map(|&x| rate(x)).collect::<Vec<_>>().join(", ");
            out.push(format!(
                "{name}: the sides did different work: {what} before {}, after {} ({ratio:.2}×{}): \
                 part of any latency difference may be the workload's; run the same workload \
                 on both kernels, with several runs a side (`cargo xtask ab`)",
                list(&vb),
                list(&va),
                if vb.len() < 2 || va.len() < 2 {
                    format!(
                        ", beyond the {:.1}× single runs may differ by",
                        runs::RATE_RATIO
                    )
                } else {
                    ", beyond the run-to-run variation".to_owned()
                }
            ));
        }
    }
    out
}

/// What differs between the runs beyond the functions: tool version, machine, kernel command
/// line, DAMON's configuration and the work its schemes did, probe floors, completeness.
fn header_warnings(b: &[(&str, &Capture)], a: &[(&str, &Capture)]) -> Vec<String> {
    let mut w = Vec::new();
    let all = || b.iter().chain(a).map(|r| r.1);
    let distinct = |side: &[(&str, &Capture)], get: &dyn Fn(&Capture) -> String| {
        distinct(side.iter().map(|r| get(r.1)))
    };
    let (vb, va) = (
        distinct(b, &|c| c.meta.tool_version.clone()),
        distinct(a, &|c| c.meta.tool_version.clone()),
    );
    if vb != va || vb.len() > 1 {
        // Readable formats compare; the probes' cost or the accounting may have changed.
        w.push(format!(
            "the captures were written by different damon-trace versions: before {}, after {}: \
             part of any difference may be the tool's",
            vb.join(", "),
            va.join(", ")
        ));
    }
    if all().any(|c| c.meta.cpu_model.is_empty()) {
        w.push(
            "the CPU model of a capture is unknown (written by an older damon-trace): make sure \
             all ran on the same machine"
                .to_owned(),
        );
    } else {
        let (mb, ma) = (
            distinct(b, &|c| c.meta.cpu_model.clone()),
            distinct(a, &|c| c.meta.cpu_model.clone()),
        );
        if mb != ma || mb.len() > 1 {
            w.push(format!(
                "different CPU models: before `{}`, after `{}`: the difference includes the machine",
                mb.join("`, `"),
                ma.join("`, `")
            ));
        }
    }
    for (label, side) in [("before", b), ("after", a)] {
        let k = distinct(side, &|c| c.meta.kernel.release.clone());
        if k.len() > 1 {
            w.push(format!(
                "the {label} runs are of different kernels ({}): a side should be one kernel",
                k.join(", ")
            ));
        }
    }
    if all().all(|c| !c.meta.kernel.cmdline.is_empty()) {
        let (cb, ca) = (
            distinct(b, &|c| c.meta.kernel.cmdline.clone()),
            distinct(a, &|c| c.meta.kernel.cmdline.clone()),
        );
        if cb != ca || cb.len() > 1 {
            w.push(format!(
                "the kernels were booted with different command lines: before `{}`, after `{}`: \
                 preemption, mitigations or isolation may differ",
                cb.join("` | `"),
                ca.join("` | `")
            ));
        }
    }
    w.extend(damon_warnings(b, a));
    w.extend(calibration_warning(b, a));
    for (label, side) in [("before", b), ("after", a)] {
        for (file, c) in side {
            if c.summary.is_none() {
                w.push(format!(
                    "the {label} capture {file} is incomplete (its recorder was killed): drops \
                     are unknown"
                ));
            }
        }
    }
    w
}

/// DAMON's configuration at the start of a run, without what changes by itself (state, pids,
/// regions, scheme statistics).
fn damon_config(c: &Capture) -> Option<serde_json::Value> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for k in ["stats", "pid", "state", "regions", "damon_stat_kdamond_pid"] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = c.meta.damon.clone()?;
    strip(&mut v);
    Some(v)
}

/// Bytes DAMON's schemes applied their action to per second of the run (end − start of
/// `sz_applied`, all schemes), when the capture has both snapshots.
fn scheme_bytes_per_s(c: &Capture) -> Option<f64> {
    let total = |v: &serde_json::Value| -> u64 {
        let mut sum = 0;
        for k in v["kdamonds"].as_array().into_iter().flatten() {
            for ctx in k["contexts"].as_array().into_iter().flatten() {
                for s in ctx["schemes"].as_array().into_iter().flatten() {
                    sum += s["stats"]["sz_applied"].as_u64().unwrap_or(0);
                }
            }
        }
        sum
    };
    let summary = c.summary.as_ref()?;
    let (start, end) = (c.meta.damon.as_ref()?, summary.damon_end.as_ref()?);
    let secs = summary.duration_ns as f64 / 1e9;
    (secs > 0.0).then(|| total(end).saturating_sub(total(start)) as f64 / secs)
}

fn damon_warnings(b: &[(&str, &Capture)], a: &[(&str, &Capture)]) -> Vec<String> {
    let mut w = Vec::new();
    let configs: Vec<(&str, Option<serde_json::Value>)> = b
        .iter()
        .chain(a)
        .map(|&(f, c)| (f, damon_config(c)))
        .collect();
    if let Some((first, reference)) = configs.iter().find(|c| c.1.is_some()) {
        let reference = reference.as_ref().expect("found");
        for (file, cfg) in &configs {
            if let Some(cfg) = cfg
                && cfg != reference
            {
                let mut diffs = Vec::new();
                crate::report::damon::diff("", reference, cfg, &mut diffs);
                // A field only one damon-trace version records is unknown, not different.
                diffs.retain(|d| !d.contains(": null -> ") && !d.ends_with(" -> null"));
                if diffs.is_empty() {
                    continue;
                }
                w.push(format!(
                    "DAMON was configured differently in {file} than in {first}: {}{}",
                    diffs
                        .iter()
                        .take(3)
                        .map(|d| shorten(d, 160))
                        .collect::<Vec<_>>()
                        .join("; "),
                    if diffs.len() > 3 { "; …" } else { "" }
                ));
                break;
            }
        }
    }
    let rate = |side: &[(&str, &Capture)]| -> Vec<f64> {
        side.iter()
            .filter_map(|r| scheme_bytes_per_s(r.1))
            .collect()
    };
    let (rb, ra) = (rate(b), rate(a));
    if let Some(ratio) = runs::rates_differ(&rb, &ra) {
        let mib = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{:.1}", x / 1048576.0))
                .collect::<Vec<_>>()
                .join(", ")
        };
        w.push(format!(
            "DAMON's schemes did different work: MiB applied per second before {}, after {} \
             ({ratio:.2}×): part of any difference may be the workload's",
            mib(&rb),
            mib(&ra)
        ));
    }
    w
}

/// Whether the probe floors let raw differences be read as the functions' own: some runs
/// calibrated and others not, or a side's floors of one attach method further from the other
/// side's than their uncertainties, are said (every calibration measures anew, so floors are
/// never identical).
fn calibration_warning(b: &[(&str, &Capture)], a: &[(&str, &Capture)]) -> Vec<String> {
    let cal = |side: &[(&str, &Capture)]| -> Vec<Option<Calibration>> {
        side.iter()
            .map(|r| Calibration::from_meta(r.1.meta.calibration.as_ref()))
            .collect()
    };
    let (cb, ca) = (cal(b), cal(a));
    let some = |v: &[Option<Calibration>]| v.iter().filter(|c| c.is_some()).count();
    let (nb, na) = (some(&cb), some(&ca));
    if nb + na == 0 {
        return Vec::new();
    }
    if nb < cb.len() || na < ca.len() {
        return vec![format!(
            "only {} of the {} runs have a probe calibration (before {nb} of {}, after {na} of \
             {}): corrected latencies may mix calibrated and uncorrected floors",
            nb + na,
            cb.len() + ca.len(),
            cb.len(),
            ca.len()
        )];
    }
    let mut out = Vec::new();
    let first = cb[0].as_ref().expect("all calibrated");
    for fb in &first.floors {
        let floors = |side: &[Option<Calibration>]| -> Vec<(f64, f64)> {
            side.iter()
                .flatten()
                .filter_map(|c| c.floor(&fb.attach, &fb.mode))
                .filter(|f| f.floor.is_some())
                .map(|f| (f.median_ns(), f.uncertainty_ns))
                .collect()
        };
        let (fb_, fa) = (floors(&cb), floors(&ca));
        if fb_.is_empty() || fa.is_empty() {
            continue;
        }
        let mean = |v: &[(f64, f64)]| v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64;
        let unc = |v: &[(f64, f64)]| v.iter().map(|x| x.1).fold(0.0, f64::max);
        let gap = mean(&fa) - mean(&fb_);
        if gap.abs() > unc(&fb_).max(unc(&fa)) {
            out.push(format!(
                "the {}/{} probe floor differs: before {:.0} ± {:.0} ns, after {:.0} ± {:.0} ns: \
                 {} ns of any raw difference is the probe's; read the corrected rows",
                fb.attach,
                fb.mode,
                mean(&fb_),
                unc(&fb_),
                mean(&fa),
                unc(&fa),
                signed(gap)
            ));
        }
    }
    out
}

pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let (before, after) = args.sides();
    let read = |paths: &[std::path::PathBuf]| -> anyhow::Result<Vec<(String, Capture)>> {
        paths
            .iter()
            .map(|p| Ok((p.display().to_string(), read_file(p)?)))
            .collect()
    };
    let (before, after) = (read(&before)?, read(&after)?);
    fn side(v: &[(String, Capture)]) -> Vec<(&str, &Capture)> {
        v.iter().map(|(n, c)| (n.as_str(), c)).collect()
    }
    let opts = ReportOptions::new(&args.filter, &args.buckets);
    let cmp = build(
        &Inputs {
            before: side(&before),
            after: side(&after),
        },
        &opts,
    )?;
    if let Some(path) = &args.plot {
        plot::write_svg(&cmp, path, args.force)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let text = match args.format {
        CompareFormat::Table => render::table(&cmp),
        CompareFormat::Json => serde_json::to_string_pretty(&cmp)? + "\n",
        CompareFormat::Markdown => render::markdown(&cmp),
    };
    // Not print!: it panics when stdout is a closed pipe.
    std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?;
    if let Some(path) = &args.plot {
        eprintln!("plot: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
