//! Renderers of a [`Report`], one file a format: aligned text ([`table`]), Markdown
//! ([`markdown`]) and CSV ([`csv`]); JSON is serde's. This file holds what they share (pure).
mod csv;
mod markdown;
mod table;

pub use csv::csv;
pub use markdown::{heatmap_link, markdown};
#[cfg(test)]
pub(in crate::report) use table::context_lines;
pub use table::table;

use super::{BucketTable, FunctionReport, Report, kernel::BucketResolution};
use crate::{capture::Clock, probe::calibration_text::format_ns, stats::intervals::PerInterval};

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn traced(f: &FunctionReport) -> bool {
    f.attach.is_traced()
}

/// `count` as a percentage of `total` with two decimals; `-` when there is no total.
pub fn percent(count: u64, total: u64) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}%", count as f64 * 100.0 / total as f64)
    }
}

/// A value range `lo..hi`, or the one value when both ends are the same.
pub fn range_label(lo: i64, hi: i64) -> String {
    if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo}..{hi}")
    }
}

/// `kernel 7.2.13 · 20.3 s · captured by damon-trace 0.1.0 · ended: duration`
pub fn headline(r: &Report) -> String {
    let dur = r.meta.duration_ns.map_or_else(
        || "unknown duration".to_owned(),
        |d| format!("{:.1} s", d as f64 / 1e9),
    );
    let clock = match r.meta.clock {
        Clock::Wall => String::new(),
        c => format!(" · {}", c.describe()),
    };
    format!(
        "kernel {} · {}{clock} · captured by damon-trace {}{}",
        r.meta.kernel_release,
        dur,
        r.meta.capture_tool_version,
        r.meta
            .end_reason
            .as_ref()
            .map(|e| format!(" · ended: {e}"))
            .unwrap_or_default()
    )
}

/// Why the rows are as wide as they are, when it is not what was asked.
pub fn grid_note(t: &BucketTable, unit: &str) -> Option<String> {
    note_for(&t.grid, unit)
}

/// The note of a grid: widened rows, and where the kernel's log2 buckets take over.
pub fn note_for(grid: &crate::stats::buckets::BucketGrid, unit: &str) -> Option<String> {
    // Rows as wide as the kernel's whole linear range: the log2 buckets are all there is.
    let linear_rows = grid.log2_from_ns.is_none_or(|from| grid.width_ns < from);
    let widened = grid.widened_from.filter(|_| linear_rows).map(|asked| {
        format!(
            "rows are {} {unit} wide: {asked} {unit} rows up to the p99 would take more than 40 lines \
             (choose with --bucket-ns and --max-ns)",
            grid.width_ns
        )
    });
    let log2 = grid.log2_from_ns.map(|from| {
        format!(
            "from {from} {unit} up the rows are the kernel's log2 buckets, each twice as wide as \
             the one before (kernel mode; --hist-width widens the linear range)"
        )
    });
    match (widened, log2) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

const COLUMNS: [&str; 12] = [
    "calls", "records", "dropped", "in-fl", "min", "mean", "p50", "p90", "p95", "p99", "p99.9",
    "max",
];

fn numbers(f: &FunctionReport) -> [String; 12] {
    [
        f.calls.to_string(),
        f.count.to_string(),
        f.dropped.to_string(),
        f.in_flight.to_string(),
        opt(f.min_ns),
        opt(f.mean_ns.map(|m| format!("{m:.1}"))),
        opt(f.p50_ns),
        opt(f.p90_ns),
        opt(f.p95_ns),
        opt(f.p99_ns),
        opt(f.p999_ns),
        opt(f.max_ns),
    ]
}

/// Latencies (min, mean, p50 … max) in the columns of [`numbers`], the accounting columns
/// blank for the caller to fill.
fn latency_columns(latencies: [f64; 8]) -> [String; 12] {
    let mut out: [String; 12] = Default::default();
    for (i, v) in latencies.into_iter().enumerate() {
        out[4 + i] = if i == 1 {
            format!("{v:.1}")
        } else {
            format_ns(v)
        };
    }
    out
}

/// The corrected latencies in the columns of [`numbers`] (accounting columns blank).
fn corrected_numbers(f: &FunctionReport) -> Option<[String; 12]> {
    let c = f.corrected?;
    let mut out = latency_columns([
        c.min_ns, c.mean_ns, c.p50_ns, c.p90_ns, c.p95_ns, c.p99_ns, c.p999_ns, c.max_ns,
    ]);
    out[3] = format!("±{}", format_ns(c.uncertainty_ns.round()));
    Some(out)
}

/// The clean calls' count (under `records`) and latencies in the columns of [`numbers`].
fn clean_numbers(f: &FunctionReport) -> Option<[String; 12]> {
    let (d, c) = (f.disturbance?, f.clean_percentiles?);
    let mut out = latency_columns([
        c.min_ns as f64,
        c.mean_ns,
        c.p50_ns as f64,
        c.p90_ns as f64,
        c.p95_ns as f64,
        c.p99_ns as f64,
        c.p999_ns as f64,
        c.max_ns as f64,
    ]);
    out[1] = d.clean.to_string();
    Some(out)
}

/// What the records say about disturbance: one line per function when the capture measured
/// it, else one line saying why not (the latencies then mix clean and disturbed calls).
pub fn disturbance_lines(r: &Report) -> Vec<String> {
    let status = &r.meta.disturbance;
    if !status.measured {
        return vec![format!(
            "disturbance: not measured ({}): the latencies include calls that slept, were \
             preempted or interrupted",
            status.why_not.as_deref().unwrap_or("no reason recorded")
        )];
    }
    r.functions
        .iter()
        .filter_map(|f| {
            let d = f.disturbance?;
            Some(format!(
                "{}: {}; the `clean` row has the latencies of the {} clean calls",
                f.name,
                d.describe(),
                d.clean
            ))
        })
        .collect()
}

/// A range table's rows as text cells: range, calls, percent of the function's matched calls.
fn range_cells(f: &FunctionReport, t: &BucketTable) -> Vec<[String; 3]> {
    t.rows
        .iter()
        .map(|row| {
            [
                row.label(),
                row.count.to_string(),
                percent(row.count, f.matched),
            ]
        })
        .collect()
}

/// The table's line under a kernel-mode function: each percentile's range and the bound.
pub fn resolution_line(name: &str, r: &BucketResolution) -> String {
    format!(
        "{name}: percentiles at bucket resolution ({} ns buckets below {} ns, log2 above), each \
         shown as the top of its range: p50 {}, p90 {}, p95 {}, p99 {}, p99.9 {} (error at \
         most {} ns)",
        r.width_ns,
        r.linear_range_ns,
        r.p50.label(),
        r.p90.label(),
        r.p95.label(),
        r.p99.label(),
        r.p999.label(),
        r.bound_ns
    )
}

/// A function's time per DAMON aggregation interval as cells: intervals, intervals with calls,
/// calls per interval, mean, p50, p99 and max ns per interval, calls outside.
fn per_interval_cells(p: &PerInterval) -> [String; 8] {
    [
        p.intervals.to_string(),
        p.intervals_with_calls.to_string(),
        format!("{:.1}", p.mean_calls),
        format!("{:.0}", p.mean_total_ns),
        p.p50_total_ns.to_string(),
        p.p99_total_ns.to_string(),
        p.max_total_ns.to_string(),
        (p.calls_outside + p.calls_not_kdamond).to_string(),
    ]
}
