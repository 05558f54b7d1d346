//! `damon-trace compare`: pure math over the captures of two sides, one capture per run,
//! "before" the reference.
//!
//! The run is the unit of replication. For each function traced on both sides: a side-by-side
//! range table on one grid and percentiles of the pooled calls with each run's spread; Welch
//! intervals over per-run values; a verdict from Welch's t on the per-run medians, Holm-adjusted
//! across functions — or, with one run on a side, a description and the runs it would take;
//! and warnings when the sides did different work or ran differently configured.
mod build;
pub mod intervals;
mod kernel;
pub mod plot;
pub mod render;
mod runs;
mod side;
pub mod slow;
#[cfg(test)]
mod tests;
pub mod values;
mod verdict;
mod warnings;

pub use build::build;
pub use verdict::{p_text, signed};

use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;

use crate::{
    analysis::{ReportOptions, disturbance::Disturbance},
    capture::{Capture, format::read_file, stdio::is_stdio},
    cli::{CompareArgs, CompareFormat},
    error::UsageError,
    stats::{
        LatencyStats,
        buckets::BucketGrid,
        calibration::Corrected,
        ranktest::MannWhitney,
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
    /// The clock of every capture (compare refuses mixed clocks), and the unit of every
    /// `*_ns` value under it: `ns`, or `insn` (instructions executed).
    pub clock: crate::capture::Clock,
    pub unit: &'static str,
    /// `--time`: `wall`, or `on-cpu` (every duration is the call's on-CPU time).
    pub time: crate::analysis::TimeBasis,
    /// Under `on-cpu`: what the times are, and whether interrupt time is in them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_note: Option<String>,
    /// The threshold of the slow-call shares (`functions[].slow`) and how it was chosen.
    pub slow_threshold: slow::SlowThreshold,
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
    /// `compare --clean`: percentiles, range rows, tests and verdicts are over clean calls
    /// only (calls and drops stay every call's).
    pub clean_only: bool,
    /// Which calls the statistics are over, in words.
    pub judged_on: String,
}

/// One capture: one run.
#[derive(Debug, Serialize)]
pub struct CaptureSide {
    pub file: String,
    pub kernel_release: String,
    pub cpu_model: String,
    pub duration_ns: Option<u64>,
    pub complete: bool,
    /// Whether its records say which calls were disturbed, and why not.
    pub disturbance: crate::capture::DisturbanceStatus,
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
    /// Of the matched calls of all runs (before `--clean` left the disturbed ones out): how
    /// many were clean and why the others were not; `null` unless every run measured it.
    pub disturbance: Option<Disturbance>,
    /// The latencies over the clean calls only, all runs pooled; `null` unless every run
    /// measured disturbance, or without a clean call.
    pub clean_percentiles: Option<LatencyStats>,
    /// `--time on-cpu`: matched calls of all runs whose breakdown is unknown (in no
    /// statistic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<u64>,
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
    /// Each run's share of slow calls (wall time at least `slow_threshold`) and their split;
    /// absent when no run has per-call records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow: Option<slow::SlowShare>,
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

pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let (before, after) = args.sides();
    let from_stdin = before.iter().chain(&after).filter(|p| is_stdio(p)).count();
    if from_stdin > 1 {
        return Err(UsageError(format!(
            "`-` (stdin) is given {from_stdin} times: only one capture can come from stdin; \
             name the others as files"
        ))
        .into());
    }
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
    let opts = ReportOptions {
        clean_only: args.clean,
        ..ReportOptions::new(&args.filter, &args.buckets)
    };
    let inputs = Inputs {
        before: side(&before),
        after: side(&after),
    };
    let cmp = build(&inputs, &opts)?;
    if let Some(path) = &args.plot {
        // The heatmaps over the same durations as the comparison (`--time`).
        let timed = |side: &[(&str, &Capture)]| -> Vec<(String, Capture)> {
            side.iter()
                .filter_map(|&(f, c)| {
                    let t = crate::analysis::time::timed(c, &opts, Some(f)).ok()?;
                    Some((f.to_owned(), t.into_owned()))
                })
                .collect()
        };
        let (tb, ta) = match opts.time {
            crate::analysis::TimeBasis::Wall => (Vec::new(), Vec::new()),
            crate::analysis::TimeBasis::OnCpu => (timed(&inputs.before), timed(&inputs.after)),
        };
        let shown = match opts.time {
            crate::analysis::TimeBasis::Wall => inputs,
            crate::analysis::TimeBasis::OnCpu => Inputs {
                before: side(&tb),
                after: side(&ta),
            },
        };
        plot::write_svg(&cmp, &shown, &opts, path, args.force)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    match &args.plot {
        // The SVG is stdout's document: the comparison would corrupt it.
        Some(path) if is_stdio(path) => return Ok(ExitCode::SUCCESS),
        Some(path) => eprintln!("plot: {}", path.display()),
        None => {}
    }
    let text = match args.format {
        CompareFormat::Table => render::table(&cmp),
        CompareFormat::Json => crate::output::json_document(&cmp)?,
        CompareFormat::Markdown => render::markdown(&cmp),
    };
    crate::output::write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}
