//! Renderers of a [`Comparison`], one file a format: aligned text like a kernel patch mail
//! ([`table`]) and Markdown ([`markdown`]); JSON is serde's. This file holds what they share.
mod markdown;
mod table;

use std::fmt::Write as _;

pub use markdown::markdown;
pub use table::table;

use super::{Comparison, FunctionComparison, SideMeta, p_text, side::distinct, signed};
use crate::{
    probe::calibrate::text::format_ns,
    render::{
        markup::{Column, Markup},
        opt, percent as pct,
    },
    stats::{LatencyStats, buckets::BucketRow, ranktest, runs::Interval},
};

fn label(lo: u64, hi: Option<u64>) -> String {
    BucketRow {
        lo_ns: lo,
        hi_ns: hi,
        count: 0,
    }
    .label()
}

fn side_line(s: &SideMeta) -> String {
    if let [c] = s.captures.as_slice() {
        return format!(
            "{} — kernel {}{}{}",
            c.file,
            c.kernel_release,
            c.duration_ns
                .map(|d| format!(" · {:.1} s", d as f64 / 1e9))
                .unwrap_or_default(),
            if c.complete { "" } else { " · incomplete" }
        );
    }
    let files: Vec<&str> = s.captures.iter().map(|c| c.file.as_str()).collect();
    let secs: Vec<f64> = s
        .captures
        .iter()
        .filter_map(|c| c.duration_ns)
        .map(|d| d as f64 / 1e9)
        .collect();
    let incomplete = s.captures.iter().filter(|c| !c.complete).count();
    format!(
        "{} runs — kernel {}{}{}: {}",
        s.runs,
        s.kernel_release,
        if secs.is_empty() {
            String::new()
        } else {
            format!(" · {:.1} s in all", secs.iter().sum::<f64>())
        },
        if incomplete > 0 {
            format!(" · {incomplete} incomplete")
        } else {
            String::new()
        },
        files.join(" ")
    )
}

/// A pooled value with the spread of the per-run values beside it, when there are several.
fn with_spread(v: String, spread: Option<[f64; 2]>) -> String {
    match spread {
        Some([lo, hi]) => format!("{v} [{lo:.0}–{hi:.0}]"),
        None => v,
    }
}

fn pct_spread(count: u64, total: u64, spread: Option<[f64; 2]>) -> String {
    match spread {
        Some([lo, hi]) => format!("{} [{lo:.1}–{hi:.1}]", pct(count, total)),
        None => pct(count, total),
    }
}

/// The per-run mean latencies of a side, when there are several runs.
fn mean_spread(runs: &[super::runs::RunSummary]) -> Option<[f64; 2]> {
    super::runs::spread(&super::runs::values(runs, |r| r.mean_ns))
}

/// A row of exact values (min, max): no spread, no interval.
fn exact_row(label: &str, b: u64, a: u64) -> [String; 5] {
    [
        label.to_owned(),
        b.to_string(),
        a.to_string(),
        signed(a as f64 - b as f64),
        String::new(),
    ]
}

/// `[lo, hi]`, both signed.
fn interval_text(i: Interval) -> String {
    format!("[{}, {}]", signed(i.lo), signed(i.hi))
}

/// Rows of the percentile table: label, before, after, delta, interval.
fn stat_rows(f: &FunctionComparison) -> Vec<[String; 5]> {
    let mut rows = Vec::new();
    let (sb, sa) = (f.before.stats, f.after.stats);
    if let (Some(b), Some(a)) = (sb, sa) {
        rows.push(exact_row("min", b.min_ns, a.min_ns));
    }
    let multi = f.runs.before.len() > 1 && f.runs.after.len() > 1;
    for d in &f.percentiles {
        rows.push([
            d.label.into(),
            with_spread(d.before_ns.to_string(), d.before_runs),
            with_spread(d.after_ns.to_string(), d.after_runs),
            signed(d.after_ns as f64 - d.before_ns as f64),
            match d.interval {
                Some(i) => interval_text(i),
                None if multi => "(too few calls in this tail)".to_owned(),
                None => String::new(),
            },
        ]);
    }
    if let (Some(b), Some(a)) = (sb, sa) {
        rows.push([
            "mean".into(),
            with_spread(format!("{:.1}", b.mean_ns), mean_spread(&f.runs.before)),
            with_spread(format!("{:.1}", a.mean_ns), mean_spread(&f.runs.after)),
            signed(a.mean_ns - b.mean_ns),
            f.mean.map_or_else(String::new, interval_text),
        ]);
        rows.push(exact_row("max", b.max_ns, a.max_ns));
    }
    rows
}

/// Rows of a short latency table from each side's min, p50, p90, p99 and mean (in that
/// order): label, before, after, delta.
fn brief_rows(b: [f64; 5], a: [f64; 5]) -> Vec<[String; 4]> {
    ["min", "p50", "p90", "p99", "mean"]
        .into_iter()
        .zip(b.into_iter().zip(a))
        .map(|(l, (vb, va))| {
            let show = |v: f64| {
                if l == "mean" {
                    format!("{v:.1}")
                } else {
                    format_ns(v)
                }
            };
            [l.to_owned(), show(vb), show(va), signed(va - vb)]
        })
        .collect()
}

/// Rows of the corrected table (raw minus each side's floor): label, before, after, delta.
fn corrected_rows(f: &FunctionComparison, unit: &str) -> Option<(String, Vec<[String; 4]>)> {
    let (b, a) = (f.before.corrected?, f.after.corrected?);
    let head = format!(
        "corrected (raw − probe floor: before {} ± {} {unit}, after {} ± {} {unit})",
        format_ns(b.floor_ns),
        format_ns(b.uncertainty_ns.round()),
        format_ns(a.floor_ns),
        format_ns(a.uncertainty_ns.round())
    );
    let brief = |c: crate::stats::calibration::Corrected| {
        [c.min_ns, c.p50_ns, c.p90_ns, c.p99_ns, c.mean_ns]
    };
    Some((head, brief_rows(brief(b), brief(a))))
}

/// Rows of the clean calls' table (both sides measured disturbance and have clean calls;
/// not with `--clean`, where the main table is already over them): label, before, after,
/// delta.
fn clean_rows(f: &FunctionComparison, clean_only: bool) -> Option<(String, Vec<[String; 4]>)> {
    if clean_only {
        return None;
    }
    let (b, a) = (f.before.clean_percentiles?, f.after.clean_percentiles?);
    let (db, da) = (f.before.disturbance?, f.after.disturbance?);
    let head = format!(
        "clean calls only ({} before, {} after; --clean judges on them)",
        db.clean, da.clean
    );
    let brief = |l: LatencyStats| {
        [
            l.min_ns as f64,
            l.p50_ns as f64,
            l.p90_ns as f64,
            l.p99_ns as f64,
            l.mean_ns,
        ]
    };
    Some((head, brief_rows(brief(b), brief(a))))
}

/// Each side's disturbed calls, when a side measured them.
fn disturbance_line(f: &FunctionComparison) -> Option<String> {
    let calls = |s: &super::SideStats| s.disturbance.map_or(0, |d| d.calls());
    if calls(&f.before) + calls(&f.after) == 0 {
        return None;
    }
    let side = |s: &super::SideStats| {
        s.disturbance
            .map_or_else(|| "not measured".to_owned(), |d| d.describe())
    };
    Some(format!(
        "before: {}; after: {}",
        side(&f.before),
        side(&f.after)
    ))
}

/// The per-run medians and the test on them, then the pooled calls' effect size.
fn test_lines(f: &FunctionComparison, unit: &str) -> Vec<String> {
    let mut out = Vec::new();
    let medians = |runs: &[super::runs::RunSummary]| {
        runs.iter()
            .map(|r| r.p50_ns.map_or("-".to_owned(), |v| v.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if f.runs.before.len() > 1 || f.runs.after.len() > 1 {
        out.push(format!(
            "per-run medians ({unit}): before {}; after {}",
            medians(&f.runs.before),
            medians(&f.runs.after)
        ));
    }
    if let Some(t) = f.test.filter(|t| !t.df.is_finite()) {
        // Both sides the same in every run: no variation, so no interval, degrees of freedom
        // or p-value to state; the difference is the runs' own.
        out.push(format!(
            "Welch's t on per-run medians: {} {unit}, no run-to-run variation on either side \
             (every run of a side gave the same median: no interval or p-value to state)",
            signed(t.estimate)
        ));
    } else if let Some(t) = f.test {
        let df = format!("df {:.1}", t.df);
        out.push(format!(
            "Welch's t on per-run medians: {} {unit} [95% CI {}, {}], {df}, {}{}",
            signed(t.estimate),
            signed(t.lo),
            signed(t.hi),
            p_text(t.p_value),
            f.p_holm
                .filter(|&h| h != t.p_value)
                .map(|h| format!(", Holm-adjusted {}", p_text(h)))
                .unwrap_or_default()
        ));
    }
    if let Some(m) = f.calls_test {
        out.push(format!(
            "calls pooled: Cliff's δ={:+.3} ({}) — describes the calls, not the kernels",
            m.cliffs_delta,
            ranktest::magnitude(m.cliffs_delta)
        ));
    }
    out
}

/// The range table's columns: range, before, its percent, after, its percent (aligned text:
/// the percents wider when they carry a spread over runs).
fn range_columns(f: &FunctionComparison) -> [Column; 5] {
    let w = if f.rows.iter().any(|r| r.before_runs_pct.is_some()) {
        22
    } else {
        8
    };
    [
        Column::left(22),
        Column::right(8),
        Column::right(w),
        Column::right(8),
        Column::right(w),
    ]
}

/// The range table's rows and the note on its grid, in `m`'s syntax (the header is each
/// format's own).
fn range_rows(m: &impl Markup, out: &mut String, f: &FunctionComparison, unit: &str) {
    m.rows(out, range_cells(f), &range_columns(f));
    if let Some(note) = grid_note(f, unit) {
        out.push_str(&m.note(&note));
    }
}

/// The latency table in `m`'s syntax: min, percentiles, mean and max, their difference
/// (headed `delta`) and interval; the values' columns as wide as the widest value, 12 at least.
fn stat_table(m: &impl Markup, out: &mut String, f: &FunctionComparison, unit: &str, delta: &str) {
    let rows = stat_rows(f);
    let w = rows
        .iter()
        .map(|r| r[1].chars().count().max(r[2].chars().count()))
        .max()
        .unwrap_or(0)
        .max(12);
    let columns = [
        Column::left(6),
        Column::right(w),
        Column::right(w),
        Column::right(12),
        Column::left(0).after_gap(2),
    ];
    let titles = [unit, "before", "after", delta, ci_head(f)];
    out.push_str(&m.table_header(&titles, &columns));
    m.rows(out, rows, &columns);
}

/// The slow-call share table's columns: side, run, calls, slow, share, off-CPU, interrupts,
/// on-CPU.
const SLOW_COLUMNS: [Column; 8] = [
    Column::left(6),
    Column::left(24),
    Column::right(9),
    Column::right(7),
    Column::right(7),
    Column::right(8),
    Column::right(10),
    Column::right(7),
];

/// What the slow-call table of `f` shows (`None` without one). `unit`: the clock's (the
/// threshold is wall time, whatever `--time` says).
fn slow_heading(f: &FunctionComparison, unit: &str) -> Option<String> {
    let s = f.slow.as_ref()?;
    Some(format!(
        "slow calls (wall time ≥ {} {unit}), per run; off-CPU, interrupts, on-CPU: how the \
         slow calls' wall time splits",
        s.threshold_ns
    ))
}

/// The function's slow-call share, a row per run of each side (nothing without one).
fn slow_table(m: &impl Markup, out: &mut String, f: &FunctionComparison) {
    let Some(s) = &f.slow else { return };
    let titles = [
        "side",
        "run",
        "calls",
        "slow",
        "share",
        "off-CPU",
        "interrupts",
        "on-CPU",
    ];
    out.push_str(&m.table_header(&titles, &SLOW_COLUMNS));
    let pct = |v: f64| format!("{v:.1}%");
    for (side, runs) in [("before", &s.before), ("after", &s.after)] {
        for r in runs {
            let split = |g: fn(&super::slow::Split) -> f64| r.split.as_ref().map(|s| pct(g(s)));
            let cells = [
                side.to_owned(),
                m.code(&r.file),
                r.calls.to_string(),
                r.slow.to_string(),
                format!("{:.2}%", r.pct),
                opt(split(|s| s.off_cpu_pct)),
                opt(split(|s| s.irq_pct)),
                opt(split(|s| s.on_cpu_pct)),
            ];
            out.push_str(&m.table_row(&cells, &SLOW_COLUMNS));
        }
    }
}

/// The columns of the corrected and clean tables: label, before, after, delta.
const BRIEF_COLUMNS: [Column; 4] = [
    Column::left(6),
    Column::right(12),
    Column::right(12),
    Column::right(12),
];

/// The range table's rows as cells: range, before, its percent, after, its percent (each
/// percent with the spread over runs, when a side has several).
fn range_cells(f: &FunctionComparison) -> Vec<[String; 5]> {
    let (b, a) = (&f.before, &f.after);
    f.rows
        .iter()
        .map(|r| {
            [
                label(r.lo_ns, r.hi_ns),
                r.before.to_string(),
                pct_spread(r.before, b.matched, r.before_runs_pct),
                r.after.to_string(),
                pct_spread(r.after, a.matched, r.after_runs_pct),
            ]
        })
        .collect()
}

fn grid_note(f: &FunctionComparison, unit: &str) -> Option<String> {
    crate::render::note_for(&f.grid, unit)
}

/// The legend under the tables, then what only one side has: the same words in both
/// renderers (Markdown starts a sentence where the text continues one).
fn closing(c: &Comparison, out: &mut String, markdown: bool) {
    let (l, verdicts, end, prefix) = if markdown {
        ("L", ". Verdicts", ".", "\n> ")
    } else {
        ("l", "; verdicts", "", "")
    };
    let _ = writeln!(
        out,
        "\n{l}atencies in {}, raw (they include the probe's own cost){}; [a–b]: smallest and \
         largest per-run value{verdicts}: {}{end}",
        c.time.label(c.unit),
        corrected_note(c),
        c.method.verdict
    );
    let _ = writeln!(out, "{prefix}calls judged: {}", c.method.judged_on);
    if let Some(n) = &c.time_note {
        let _ = writeln!(out, "{prefix}{n}");
    }
    if c.functions.iter().any(|f| f.slow.is_some()) {
        let _ = writeln!(out, "{prefix}slow calls: {}", c.slow_threshold.rule);
    }
    for (file, why) in not_measured(c) {
        let _ = writeln!(
            out,
            "{prefix}disturbance not measured in {file} ({why}): its calls cannot be told \
             clean"
        );
    }
    footer(c, out, prefix);
}

/// Why a capture's records do not say which calls were disturbed.
fn why(s: &super::CaptureSide) -> &str {
    s.disturbance
        .why_not
        .as_deref()
        .unwrap_or("no reason recorded")
}

/// The captures whose records do not say which calls were disturbed: their files (each
/// once) per reason why.
fn not_measured(c: &Comparison) -> Vec<(String, &str)> {
    let missing: Vec<&super::CaptureSide> = c
        .before
        .captures
        .iter()
        .chain(&c.after.captures)
        .filter(|s| !s.disturbance.measured)
        .collect();
    distinct(missing.iter().map(|s| why(s)))
        .into_iter()
        .map(|w| {
            let files = distinct(
                missing
                    .iter()
                    .filter(|s| why(s) == w)
                    .map(|s| s.file.as_str()),
            );
            (files.join(", "), w)
        })
        .collect()
}

fn footer(c: &Comparison, out: &mut String, prefix: &str) {
    if !c.only_before.is_empty() {
        let _ = writeln!(
            out,
            "{prefix}only traced before: {}",
            c.only_before.join(", ")
        );
    }
    if !c.only_after.is_empty() {
        let _ = writeln!(
            out,
            "{prefix}only traced after: {}",
            c.only_after.join(", ")
        );
    }
    for w in &c.warnings {
        let _ = writeln!(out, "{prefix}warning: {w}");
    }
}

/// Says where corrected rows are, or why there are none.
fn corrected_note(c: &Comparison) -> &'static str {
    if c.functions
        .iter()
        .any(|f| f.before.corrected.is_some() && f.after.corrected.is_some())
    {
        "; the corrected rows subtract each capture's probe floor (its median, ± its stated \
         uncertainty)"
    } else {
        "; no corrected rows: both captures need a probe calibration"
    }
}

/// Heading of the interval column: what the intervals are over.
fn ci_head(f: &FunctionComparison) -> &'static str {
    if f.runs.before.len() > 1 && f.runs.after.len() > 1 {
        "95% CI over runs (Welch)"
    } else {
        "95% CI (needs 2+ runs a side)"
    }
}
