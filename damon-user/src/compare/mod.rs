//! `damon-trace compare BEFORE AFTER`: pure math over two captures, "before" the reference.
//!
//! For each function traced in both: a side-by-side range table on one grid, percentile
//! deltas with bootstrap intervals, Welch's interval for the mean, the Mann–Whitney test with
//! Cliff's delta, and a one-line verdict that says "no significant difference" when that is
//! what the data say.
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

#[cfg(test)]
mod tests;
mod verdict;

pub use verdict::{p_text, signed};

use std::process::ExitCode;

use anyhow::Context as _;
use damon_common::FunctionId;
use serde::Serialize;

use crate::{
    capture::{Capture, format::read_file},
    cli::{CompareArgs, CompareFormat},
    record::UsageError,
    report::{ReportOptions, check_functions, counters, select},
    stats::{
        LatencyStats,
        bootstrap::{self, Interval},
        buckets::BucketGrid,
        calibration::{Calibration, Corrected},
        ranktest::{self, MannWhitney},
        rng::Rng,
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
    pub before: CaptureSide,
    pub after: CaptureSide,
    pub functions: Vec<FunctionComparison>,
    /// Traced in one capture only (missing, inlined or failed in the other, or not selected).
    pub only_before: Vec<String>,
    pub only_after: Vec<String>,
    pub warnings: Vec<String>,
    pub method: Method,
}

#[derive(Debug, Serialize)]
pub struct Method {
    pub alpha: f64,
    pub bootstrap_resamples: usize,
    pub bootstrap_seed: u64,
    pub percentiles: &'static str,
    pub test: &'static str,
    pub mean_interval: &'static str,
}

#[derive(Debug, Serialize)]
pub struct CaptureSide {
    pub file: String,
    pub kernel_release: String,
    pub cpu_model: String,
    pub duration_ns: Option<u64>,
    pub complete: bool,
}

#[derive(Debug, Serialize)]
pub struct SideStats {
    pub attach: &'static str,
    pub calls: u64,
    pub count: u64,
    pub dropped: u64,
    pub matched: u64,
    /// Raw latencies (they include the probe's cost).
    pub stats: Option<LatencyStats>,
    /// The raw latencies minus this capture's probe floor for the function's attach method
    /// (absent when the capture has no matching calibration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<Corrected>,
}

#[derive(Debug, Serialize)]
pub struct RangeRow {
    pub lo_ns: u64,
    pub hi_ns: Option<u64>,
    pub before: u64,
    pub after: u64,
}

#[derive(Debug, Serialize)]
pub struct PercentileDelta {
    pub label: &'static str,
    pub p: f64,
    pub before_ns: u64,
    pub after_ns: u64,
    /// `after − before` with its bootstrap interval; `None` with too few calls in that tail.
    pub interval: Option<Interval>,
}

#[derive(Debug, Serialize)]
pub struct FunctionComparison {
    pub name: String,
    pub before: SideStats,
    pub after: SideStats,
    pub grid: BucketGrid,
    pub rows: Vec<RangeRow>,
    pub percentiles: Vec<PercentileDelta>,
    pub mean: Option<Interval>,
    pub mann_whitney: Option<MannWhitney>,
    pub significant: bool,
    pub verdict: String,
    /// Time per DAMON aggregation interval, when a capture recorded the boundaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_interval: Option<intervals::IntervalComparison>,
    /// Before/after distributions of the returned value and recorded arguments (scores, pages
    /// migrated, target nodes, region nr_accesses/age).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<crate::report::values::DistComparison>,
    /// Log-spaced bins over both samples, for `--plot` (latencies span decades).
    #[serde(skip)]
    pub log_bins: Vec<plot::LogBin>,
}

/// Both captures, read, with the names the user gave them.
pub struct Inputs<'a> {
    pub before: (&'a str, &'a Capture),
    pub after: (&'a str, &'a Capture),
}

fn side_meta(file: &str, c: &Capture) -> CaptureSide {
    CaptureSide {
        file: file.to_owned(),
        kernel_release: c.meta.kernel.release.clone(),
        cpu_model: c.meta.cpu_model.clone(),
        duration_ns: c.summary.as_ref().map(|s| s.duration_ns),
        complete: c.summary.is_some(),
    }
}

/// Names of the functions a capture traced (attached one way or another).
fn traced(c: &Capture) -> Vec<(&str, u32, &'static str)> {
    c.meta
        .functions
        .iter()
        .filter(|f| matches!(f.attach.as_str(), "fentry" | "kprobe"))
        .map(|f| (f.name.as_str(), f.id, f.attach.as_str()))
        .collect()
}

/// Compares two captures (pure; the bootstrap is seeded).
pub fn build(inp: &Inputs, opts: &ReportOptions) -> Result<Comparison, UsageError> {
    let (bc, ac) = (inp.before.1, inp.after.1);
    for name in &opts.functions {
        if check_functions(bc, std::slice::from_ref(name)).is_err()
            && check_functions(ac, std::slice::from_ref(name)).is_err()
        {
            return Err(UsageError(format!(
                "function `{name}` is in neither capture"
            )));
        }
    }
    let wanted = |n: &str| opts.functions.is_empty() || opts.functions.iter().any(|f| f == n);
    let (tb, ta) = (traced(bc), traced(ac));
    let mut sel_b = select(bc, opts);
    let mut sel_a = select(ac, opts);
    let mut warnings = header_warnings(bc, ac);
    let resolution = kernel::Resolution::of(bc, ac, opts)?;
    if let Some(res) = resolution {
        warnings.push(format!(
            "a capture was recorded with --mode kernel: both are compared {} (percentiles and \
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
    let mut functions = Vec::new();
    for &(name, id_b, attach_b) in tb.iter().filter(|f| wanted(f.0)) {
        let Some(&(_, id_a, attach_a)) = ta.iter().find(|f| f.0 == name) else {
            continue;
        };
        if attach_b != attach_a {
            warnings.push(format!(
                "{name}: traced with {attach_b} before and {attach_a} after: the probes cost \
                 differently, so part of any difference is the probe's"
            ));
        }
        let mut b = sel_b.remove(&id_b).unwrap_or_default();
        let mut a = sel_a.remove(&id_a).unwrap_or_default();
        // With a kernel-mode capture on either side, both go onto the kernel's buckets.
        let mut on_grid = None;
        if let Some(res) = resolution {
            let kb = kernel::side(bc, id_b, std::mem::take(&mut b), res);
            let ka = kernel::side(ac, id_a, std::mem::take(&mut a), res);
            for (label, s) in [("before", &kb), ("after", &ka)] {
                let n = s.hist.buckets.iter().sum::<u64>();
                if n > kernel::MAX_EXPANDED {
                    warnings.push(format!(
                        "{name}: {n} calls {label}: the tests and intervals use a proportional \
                         sample of {} of them (same buckets; as conservative as that many calls)",
                        kernel::MAX_EXPANDED
                    ));
                }
            }
            let (grid, rows) = kernel::rows(opts, &kb, &ka)?;
            let side = |c: &Capture, s: &kernel::Side, attach: &'static str| {
                let stats = kernel::stats(s);
                SideStats {
                    attach,
                    calls: s.counters.calls,
                    count: s.selected.count,
                    dropped: s.counters.dropped(),
                    matched: s.selected.durations.len() as u64,
                    corrected: corrected(c, attach, stats.as_ref()),
                    stats,
                }
            };
            on_grid = Some((side(bc, &kb, attach_b), side(ac, &ka, attach_a), grid, rows));
            b = kb.selected;
            a = ka.selected;
        }
        let side = |c: &Capture, id: u32, attach: &'static str, s: &crate::report::Selected| {
            let k = counters(c, id, s.count);
            let stats = LatencyStats::from_durations(&mut s.durations.clone());
            SideStats {
                attach,
                calls: k.made(),
                count: s.count,
                dropped: k.dropped(),
                matched: s.durations.len() as u64,
                corrected: corrected(c, attach, stats.as_ref()),
                stats,
            }
        };
        let (before, after, grid, rows) = match on_grid {
            Some((before, after, grid, rows)) => {
                let rows = rows
                    .into_iter()
                    .map(|(rb, ra)| RangeRow {
                        lo_ns: rb.lo_ns,
                        hi_ns: rb.hi_ns,
                        before: rb.count,
                        after: ra.count,
                    })
                    .collect();
                (before, after, grid, rows)
            }
            None => {
                let grid =
                    BucketGrid::plan(opts.bucket_ns, opts.max_ns, &[&b.durations, &a.durations])
                        .map_err(|e| UsageError(e.to_string()))?;
                let rows = grid
                    .count(&b.durations)
                    .into_iter()
                    .zip(grid.count(&a.durations))
                    .map(|(rb, ra)| RangeRow {
                        lo_ns: rb.lo_ns,
                        hi_ns: rb.hi_ns,
                        before: rb.count,
                        after: ra.count,
                    })
                    .collect();
                (
                    side(bc, id_b, attach_b, &b),
                    side(ac, id_a, attach_a, &a),
                    grid,
                    rows,
                )
            }
        };
        for (label, s) in [("before", &before), ("after", &after)] {
            if s.dropped > 0 {
                warnings.push(format!(
                    "{name}: {} of {} calls dropped {label}: the recorded calls may not represent \
                     all of them",
                    s.dropped, s.calls
                ));
            }
        }
        // One stream per function, so its intervals do not depend on which other functions
        // were compared before it.
        let mut rng = Rng::new(bootstrap::SEED ^ name_hash(name));
        let percentiles = PERCENTILES
            .iter()
            .filter_map(|&(p, label)| {
                Some(PercentileDelta {
                    label,
                    p,
                    before_ns: crate::stats::percentile(&b.durations, p)?,
                    after_ns: crate::stats::percentile(&a.durations, p)?,
                    interval: bootstrap::percentile_delta(&b.durations, &a.durations, p, &mut rng),
                })
            })
            .collect::<Vec<_>>();
        let mean = bootstrap::mean_delta(&b.durations, &a.durations);
        let mw = ranktest::mann_whitney(&b.durations, &a.durations);
        let (significant, mut verdict) =
            verdict::verdict(&b.durations, &a.durations, &percentiles, mw);
        if let Some(res) = resolution {
            verdict = format!("{verdict} ({})", res.describe());
        }
        functions.push(FunctionComparison {
            name: name.to_owned(),
            before,
            after,
            grid,
            rows,
            percentiles,
            mean,
            mann_whitney: mw,
            significant,
            verdict,
            per_interval: FunctionId::from_symbol(name)
                .filter(|f| f.is_damon() && resolution.is_none())
                .and_then(|_| intervals::compare((bc, id_b), (ac, id_a))),
            values: if resolution.is_some() {
                Vec::new()
            } else {
                crate::report::values::compare(name, (bc, id_b), (ac, id_a), &|r| {
                    opts.keeps(r.cpu, r.pid)
                })
            },
            log_bins: plot::log_bins(&b.durations, &a.durations),
        });
    }
    let only = |mine: &[(&str, u32, &str)], other: &[(&str, u32, &str)]| -> Vec<String> {
        mine.iter()
            .filter(|f| wanted(f.0) && !other.iter().any(|o| o.0 == f.0))
            .map(|f| f.0.to_owned())
            .collect()
    };
    Ok(Comparison {
        before: side_meta(inp.before.0, bc),
        after: side_meta(inp.after.0, ac),
        only_before: only(&tb, &ta),
        only_after: only(&ta, &tb),
        functions,
        warnings,
        method: Method {
            alpha: ALPHA,
            bootstrap_resamples: bootstrap::RESAMPLES,
            bootstrap_seed: bootstrap::SEED,
            percentiles: "nearest rank; 95 % percentile-bootstrap intervals of after − before \
                          (seed: bootstrap_seed xor FNV-1a of the function name)",
            test: "Mann–Whitney U, two-sided (exact for ≤ 50 calls a side without ties, else \
                   normal with tie and continuity corrections); effect size Cliff's delta",
            mean_interval: "Welch's t, 95 %",
        },
    })
}

/// FNV-1a of a function name: a stable per-function seed offset.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn header_warnings(b: &Capture, a: &Capture) -> Vec<String> {
    let mut w = Vec::new();
    let (vb, va) = (&b.meta.tool_version, &a.meta.tool_version);
    if vb != va {
        // Readable formats compare; the probes' cost or the accounting may have changed.
        w.push(format!(
            "the captures were written by different damon-trace versions: before {vb}, after \
             {va}: part of any difference may be the tool's"
        ));
    }
    let (mb, ma) = (&b.meta.cpu_model, &a.meta.cpu_model);
    if mb.is_empty() || ma.is_empty() {
        w.push(
            "the CPU model of a capture is unknown (written by an older damon-trace): make sure \
             both ran on the same machine"
                .to_owned(),
        );
    } else if mb != ma {
        w.push(format!(
            "different CPU models: before `{mb}`, after `{ma}`: the difference includes the machine"
        ));
    }
    w.extend(calibration_warning(b, a));
    for (label, c) in [("before", b), ("after", a)] {
        if c.summary.is_none() {
            w.push(format!(
                "the {label} capture is incomplete (its recorder was killed): drops are unknown"
            ));
        }
    }
    w
}

/// Whether the probe floors let raw differences be read as the functions' own: one capture
/// calibrated and the other not, or floors of one attach method further apart than their
/// uncertainties, are said (every calibration measures anew, so floors are never identical).
fn calibration_warning(b: &Capture, a: &Capture) -> Vec<String> {
    let (cb, ca) = (
        Calibration::from_meta(b.meta.calibration.as_ref()),
        Calibration::from_meta(a.meta.calibration.as_ref()),
    );
    let (Some(cb), Some(ca)) = (&cb, &ca) else {
        return match (cb.is_some(), ca.is_some()) {
            (true, false) | (false, true) => vec![format!(
                "only the {} capture has a probe calibration: corrected latencies are shown for \
                 neither side",
                if cb.is_some() { "before" } else { "after" }
            )],
            _ => Vec::new(),
        };
    };
    let mut out = Vec::new();
    for fb in &cb.floors {
        let (Some(_), Some(da)) = (fb.floor.as_ref(), ca.floor(&fb.attach, &fb.mode)) else {
            continue;
        };
        let db = fb;
        let gap = da.median_ns() - db.median_ns();
        if gap.abs() > db.uncertainty_ns.max(da.uncertainty_ns) {
            out.push(format!(
                "the {}/{} probe floor differs: before {:.0} ± {:.0} ns, after {:.0} ± {:.0} ns: \
                 {} ns of any raw difference is the probe's; read the corrected rows",
                fb.attach,
                fb.mode,
                db.median_ns(),
                db.uncertainty_ns,
                da.median_ns(),
                da.uncertainty_ns,
                signed(gap)
            ));
        }
    }
    out
}

pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let before = read_file(&args.before)?;
    let after = read_file(&args.after)?;
    let (nb, na) = (
        args.before.display().to_string(),
        args.after.display().to_string(),
    );
    let opts = ReportOptions::new(&args.filter, &args.buckets);
    let cmp = build(
        &Inputs {
            before: (&nb, &before),
            after: (&na, &after),
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
