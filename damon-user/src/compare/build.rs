//! Comparing the runs of two sides (pure; deterministic): for each function traced on both,
//! its runs, the pooled sides, the range rows on one grid, percentiles with their spread and
//! intervals over runs, the test and the verdict, with the warnings of what differs.
use damon_common::attach::Attach;

use super::{
    ALPHA, Comparison, FunctionComparison, Inputs, Method, PERCENTILES, PercentileDelta, RangeRow,
    RunsPair, intervals, kernel, plot, runs,
    side::{Run, pooled, row_spread, side_meta, side_runs, traced},
    slow, values, verdict,
    warnings::{header_warnings, workload_warnings},
};
use crate::{
    analysis::{ReportOptions, check_functions, disturbance, select, time},
    capture::{Capture, Clock},
    error::UsageError,
    stats::{buckets::BucketGrid, ranktest},
};

/// Compares the runs of two sides (pure; deterministic): the statistics over the durations
/// `opts.time` asks for ([`time::timed`]), the slow-call shares over the wall times.
pub fn build(inp: &Inputs, opts: &ReportOptions) -> Result<Comparison, UsageError> {
    if inp.before.is_empty() || inp.after.is_empty() {
        return Err(UsageError(
            "compare needs at least one capture a side".to_owned(),
        ));
    }
    fn timed<'a>(
        side: &[(&'a str, &'a Capture)],
        opts: &ReportOptions,
    ) -> Result<Vec<(&'a str, std::borrow::Cow<'a, Capture>)>, UsageError> {
        side.iter()
            .map(|&(file, c)| Ok((file, time::timed(c, opts, Some(file))?)))
            .collect()
    }
    let (tb, ta) = (timed(&inp.before, opts)?, timed(&inp.after, opts)?);
    let timed_inp = Inputs {
        before: tb.iter().map(|(f, c)| (*f, &**c)).collect(),
        after: ta.iter().map(|(f, c)| (*f, &**c)).collect(),
    };
    let mut cmp = compare(&timed_inp, opts)?;
    cmp.slow_threshold = slow::threshold(inp);
    for f in &mut cmp.functions {
        f.slow = slow::share(&f.name, inp, opts, &cmp.slow_threshold);
    }
    Ok(cmp)
}

/// [`build`] over the timed captures.
fn compare(inp: &Inputs, opts: &ReportOptions) -> Result<Comparison, UsageError> {
    let all: Vec<&Capture> = inp.before.iter().chain(&inp.after).map(|r| r.1).collect();
    let clock = one_clock(inp)?;
    check_wanted(&all, opts)?;
    if opts.clean_only {
        check_clean(inp)?;
    }
    let (nb, na) = (names(&inp.before, opts), names(&inp.after, opts));
    let mut sel_b: Vec<_> = inp.before.iter().map(|r| select(r.1, opts)).collect();
    let mut sel_a: Vec<_> = inp.after.iter().map(|r| select(r.1, opts)).collect();
    let mut warnings = header_warnings(&inp.before, &inp.after);
    let resolution = kernel::Resolution::of(&all, opts)?;
    if let Some(res) = resolution {
        warnings.extend(resolution_warnings(res));
    }
    let mut functions = Vec::new();
    for name in nb.iter().filter(|n| na.contains(n)) {
        let runs = Sides {
            before: side_runs(name, &inp.before, &mut sel_b, resolution),
            after: side_runs(name, &inp.after, &mut sel_a, resolution),
        };
        warnings.extend(run_warnings(name, inp, &runs, resolution.is_some()));
        let (f, w) = function(name, inp, &runs, opts, resolution.is_some(), clock.unit())?;
        warnings.extend(w);
        functions.push(f);
    }
    let tested = judge(&mut functions, resolution, opts.clean_only, clock);
    let (runs_before, runs_after) = (inp.before.len(), inp.after.len());
    let only = |mine: &[String], other: &[String]| -> Vec<String> {
        mine.iter()
            .filter(|n| !other.contains(n))
            .cloned()
            .collect()
    };
    Ok(Comparison {
        before: side_meta(&inp.before),
        after: side_meta(&inp.after),
        only_before: only(&nb, &na),
        only_after: only(&na, &nb),
        functions,
        warnings,
        method: method(runs_before, runs_after, tested, opts.clean_only, clock),
        clock,
        unit: clock.unit(),
        time: opts.time,
        // A capture without interrupt time, if any, says so for all.
        time_note: all
            .iter()
            .find(|c| {
                c.meta
                    .disturbance
                    .as_ref()
                    .is_some_and(|d| d.irq_time_missing.is_some())
            })
            .or(all.first())
            .and_then(|c| time::note(&c.meta, opts.time)),
        slow_threshold: slow::SlowThreshold {
            ns: None,
            rule: String::new(),
        },
    })
}

/// The one clock every capture was taken under. Instructions executed and nanoseconds are not
/// the same quantity: captures of both are refused, naming which capture had which.
fn one_clock(inp: &Inputs) -> Result<Clock, UsageError> {
    let runs: Vec<(&str, Clock)> = inp
        .before
        .iter()
        .chain(&inp.after)
        .map(|&(file, c)| (file, c.meta.clock))
        .collect();
    let first = runs[0].1;
    if runs.iter().all(|r| r.1 == first) {
        return Ok(first);
    }
    let list: Vec<String> = runs
        .iter()
        .map(|(file, c)| format!("{file} ({})", c.as_str()))
        .collect();
    Err(UsageError(format!(
        "the captures were taken under different clocks: {}. Under the instruction clock a \
         duration is the instructions executed (insn), not time, so it cannot be set against \
         wall-clock ns; compare captures of one clock (record both sides under the same \
         clock: in guests that all run QEMU's -icount, or all on the wall clock)",
        list.join(", ")
    )))
}

/// The runs of both sides that traced one function.
struct Sides<'a> {
    before: Vec<Run<'a>>,
    after: Vec<Run<'a>>,
}

/// Every `--functions` name must be in some capture.
fn check_wanted(all: &[&Capture], opts: &ReportOptions) -> Result<(), UsageError> {
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
    Ok(())
}

/// `--clean` needs every capture to say which calls were clean: the first that does not is
/// named, with why and what to do.
fn check_clean(inp: &Inputs) -> Result<(), UsageError> {
    for (side, runs) in [("before", &inp.before), ("after", &inp.after)] {
        for &(file, c) in runs.iter() {
            if let Some(why) = disturbance::not_measured(c) {
                return Err(UsageError(format!(
                    "--clean: the {side} capture {file} did not measure which calls were \
                     disturbed ({why}); record it again with --disturbance and this version \
                     of damon-trace (`damon-trace doctor` says whether this kernel has the \
                     counters), or compare without --clean"
                )));
            }
        }
    }
    Ok(())
}

/// The functions a side traced that the options select, in order of first appearance.
fn names(side: &[(&str, &Capture)], opts: &ReportOptions) -> Vec<String> {
    let wanted = |n: &str| opts.functions.is_empty() || opts.functions.iter().any(|f| f == n);
    let mut v: Vec<String> = Vec::new();
    for (n, _, _) in side.iter().flat_map(|r| traced(r.1)) {
        if wanted(n) && !v.iter().any(|x| x == n) {
            v.push(n.to_owned());
        }
    }
    v
}

/// What comparing on the kernel's buckets changes.
fn resolution_warnings(res: kernel::Resolution) -> Vec<String> {
    let mut warnings = vec![format!(
        "a capture was recorded with --mode kernel: all are compared {} (percentiles and \
         tests on bucketed durations; min, mean and max exact); per-interval times and \
         argument values need per-call records and are not compared",
        res.describe()
    )];
    if res.mixed_widths {
        warnings.push(format!(
            "the kernel-mode captures used different --hist-width: the finer histogram is \
             re-bucketed onto {} ns buckets, each of its buckets counted where its lower \
             edge falls (exact where the grids nest)",
            res.width_ns
        ));
    }
    warnings
}

/// The attach methods of a side's runs (consecutive repeats removed).
fn methods(runs: &[Run]) -> Vec<Attach> {
    let mut m: Vec<Attach> = runs.iter().map(|r| r.attach).collect();
    m.dedup();
    m
}

/// Attach methods as a warning names them: `fentry+kprobe`.
fn joined(methods: &[Attach]) -> String {
    let names: Vec<&str> = methods.iter().map(|m| m.as_str()).collect();
    names.join("+")
}

/// What differs in how one function's runs were taken: traced in fewer runs, by other attach
/// methods, or too many calls to test them all.
fn run_warnings(name: &str, inp: &Inputs, runs: &Sides, kernel_mode: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    let (rb, ra) = (&runs.before, &runs.after);
    for (label, side, got) in [("before", &inp.before, rb), ("after", &inp.after, ra)] {
        if got.len() < side.len() {
            warnings.push(format!(
                "{name}: traced in {} of the {} {label} runs; compared over those",
                got.len(),
                side.len()
            ));
        }
    }
    let (mb, ma) = (methods(rb), methods(ra));
    if mb != ma || mb.len() > 1 {
        warnings.push(format!(
            "{name}: traced with {} before and {} after: the probes cost differently, so \
             part of any difference is the probe's",
            joined(&mb),
            joined(&ma)
        ));
    }
    if kernel_mode {
        for (label, runs) in [("before", rb), ("after", ra)] {
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
    warnings
}

/// One function compared, and its warnings (drops, different work); the verdict comes later,
/// across functions ([`judge`]).
fn function(
    name: &str,
    inp: &Inputs,
    runs: &Sides,
    opts: &ReportOptions,
    kernel_mode: bool,
    unit: &'static str,
) -> Result<(FunctionComparison, Vec<String>), UsageError> {
    let (rb, ra) = (&runs.before, &runs.after);
    let (mut before, b, kb) = pooled(rb, methods(rb)[0]);
    let (mut after, a, ka) = pooled(ra, methods(ra)[0]);
    for (s, runs) in [(&mut before, rb), (&mut after, ra)] {
        s.set_aside = runs
            .iter()
            .map(|r| time::set_aside(r.capture, r.id, opts))
            .sum();
    }
    let multi = inp.before.len() > 1 || inp.after.len() > 1;
    let (grid, rows) = range_rows(opts, (&b, &a), (kb.as_ref(), ka.as_ref()), runs, multi)?;
    let mut warnings = Vec::new();
    for (label, s) in [("before", &before), ("after", &after)] {
        if let Some(n) = s.set_aside.filter(|&n| n > 0) {
            warnings.push(format!(
                "{name}: {n} of the {label} side's calls set aside: their breakdown is \
                 unknown, so they have no on-CPU time"
            ));
        }
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
    let workload = workload_warnings(name, &sb, &sa);
    let workload_differs = !workload.is_empty();
    warnings.extend(workload);
    let values = if kernel_mode {
        Vec::new()
    } else {
        values::compare(
            name,
            &rb.iter().map(|r| (r.capture, r.id)).collect::<Vec<_>>(),
            &ra.iter().map(|r| (r.capture, r.id)).collect::<Vec<_>>(),
            &|r| opts.keeps_record(r),
        )
    };
    let f = FunctionComparison {
        name: name.to_owned(),
        test: runs::median_test(&sb, &sa),
        calls_test: ranktest::mann_whitney(&b, &a),
        log_bins: plot::log_bins(&b, &a),
        percentiles: percentiles(&b, &a, &sb, &sa),
        mean: runs::interval(
            &runs::values(&sb, |r| r.mean_ns),
            &runs::values(&sa, |r| r.mean_ns),
        ),
        runs: RunsPair {
            before: sb,
            after: sa,
        },
        before,
        after,
        grid,
        rows,
        p_holm: None,
        significant: false,
        verdict: String::new(),
        runs_needed: None,
        workload_differs,
        per_interval: intervals::compare(&Run::intervals(rb), &Run::intervals(ra), unit),
        values,
        slow: None,
    };
    Ok((f, warnings))
}

/// The range table of both sides on one grid: the kernel's buckets when both sides have
/// histograms, else a grid planned over both sides' calls; each row with each side's spread
/// over runs when a side has several.
fn range_rows(
    opts: &ReportOptions,
    (b, a): (&[u64], &[u64]),
    hists: (
        Option<&crate::capture::KernelHist>,
        Option<&crate::capture::KernelHist>,
    ),
    runs: &Sides,
    multi: bool,
) -> Result<(BucketGrid, Vec<RangeRow>), UsageError> {
    let (grid, bounds, counts) = match hists {
        (Some(kb), Some(ka)) => {
            let (grid, rows) = kernel::rows(opts, kb, ka)?;
            let bounds: Vec<_> = rows.iter().map(|(r, _)| (r.lo_ns, r.hi_ns)).collect();
            let counts: Vec<_> = rows.iter().map(|(x, y)| (x.count, y.count)).collect();
            (grid, bounds, counts)
        }
        _ => {
            let grid = BucketGrid::plan(opts.bucket_ns, opts.max_ns, &[b, a])
                .map_err(|e| UsageError(e.to_string()))?;
            let (cb, ca) = (grid.count(b), grid.count(a));
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
        (
            row_spread(&bounds, &runs.before),
            row_spread(&bounds, &runs.after),
        )
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
    Ok((grid, rows))
}

/// Each percentile of the pooled calls (`b`, `a`), with the spread of the per-run values and
/// the interval over runs.
fn percentiles(
    b: &[u64],
    a: &[u64],
    sb: &[runs::RunSummary],
    sa: &[runs::RunSummary],
) -> Vec<PercentileDelta> {
    PERCENTILES
        .iter()
        .enumerate()
        .filter_map(|(i, &(p, label))| {
            let per =
                |s: &[runs::RunSummary]| runs::values(s, |r| r.percentiles[i].map(|v| v as f64));
            let (vb, va) = (per(sb), per(sa));
            Some(PercentileDelta {
                label,
                p,
                before_ns: crate::stats::percentile(b, p)?,
                after_ns: crate::stats::percentile(a, p)?,
                before_runs: runs::spread(&vb),
                after_runs: runs::spread(&va),
                interval: runs::interval(&vb, &va),
            })
        })
        .collect()
}

/// Holm's adjustment across the functions with a test (one family), then each function's
/// verdict (saying what it was judged on: the kernel's buckets, clean calls only); returns
/// the family's size.
fn judge(
    functions: &mut [FunctionComparison],
    resolution: Option<kernel::Resolution>,
    clean_only: bool,
    clock: Clock,
) -> usize {
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
    for f in functions.iter_mut() {
        let (significant, text, needed) = verdict::verdict(f, tested.len(), clock);
        f.significant = significant;
        f.runs_needed = needed;
        f.verdict = match resolution {
            Some(res) => format!("{text} ({})", res.describe()),
            None => text,
        };
        if clean_only {
            f.verdict = format!("{} ({})", f.verdict, judged_on_clean(f));
        }
    }
    tested.len()
}

/// `judged on clean calls only: 80 of 200 calls before, 90 of 210 after`.
fn judged_on_clean(f: &FunctionComparison) -> String {
    let of = |s: &crate::compare::SideStats| {
        let all = s.disturbance.map_or(s.matched, |d| d.calls());
        format!("{} of {all}", s.matched)
    };
    format!(
        "judged on clean calls only: {} calls before, {} after",
        of(&f.before),
        of(&f.after)
    )
}

/// How the comparison was made, for the reader of the JSON and the tables' footers.
fn method(
    runs_before: usize,
    runs_after: usize,
    tested: usize,
    clean_only: bool,
    clock: Clock,
) -> Method {
    let every_run = match clock {
        Clock::Wall => "",
        Clock::Instructions => {
            "; under the instruction clock, a side whose calls all take one path length (its \
             runs' medians equal, its p50 = p99) is exact, and a difference with every run of \
             the other side beyond it is stated as a difference in every run, without a test"
        }
    };
    Method {
        unit: "run",
        runs_before,
        runs_after,
        alpha: ALPHA,
        verdict: if runs_before >= 2 && runs_after >= 2 {
            format!(
                "Welch's t on the per-run medians ({runs_before} and {runs_after} runs), \
                 two-sided; significant when the Holm-adjusted p-value across the {tested} \
                 functions tested is below {ALPHA}{every_run}",
            )
        } else {
            "none: a side has one run, so the run-to-run variation is unknown; the \
             difference between the runs is described, not tested"
                .to_owned()
        },
        tests: tested,
        intervals: "95 % Welch intervals over the per-run values (percentiles, means, \
                    time per interval); none with fewer than two runs a side",
        pooled: "range rows, percentiles, min/mean/max and value distributions pool the \
                 runs' calls; [min–max] over runs beside them",
        calls_test: "Mann–Whitney U and Cliff's δ over the pooled calls: describes the \
                     calls only (calls of one run share its boot); never the verdict",
        typical_variation: runs::TYPICAL_SOURCE,
        clean_only,
        judged_on: if clean_only {
            "clean calls only (--clean): calls whose task slept or was preempted, or whose CPU \
             handled an interrupt, are counted but left out of the range rows, percentiles, \
             tests and value distributions; time per interval still counts every call"
                .to_owned()
        } else {
            "every call (disturbed ones included; --clean judges on clean calls only)".to_owned()
        },
    }
}
