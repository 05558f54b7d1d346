//! Renderers of a [`Report`], one file a format: aligned text ([`table`]), Markdown
//! ([`markdown`]) and CSV ([`csv`]); JSON is serde's. This file holds what they share (pure).
mod csv;
mod explain;
mod markdown;
mod table;

pub use csv::csv;
pub use markdown::markdown;
#[cfg(test)]
pub(in crate::report) use table::context_lines;
pub use table::table;

use crate::analysis::{BucketTable, FunctionReport, Report, TimeBasis, kernel::BucketResolution};
use crate::{
    capture::Clock,
    probe::calibrate::text::format_ns,
    render::{
        markup::{Column, Markup},
        note_for, opt, percent,
    },
    stats::intervals::PerInterval,
};

fn traced(f: &FunctionReport) -> bool {
    f.attach.is_traced()
}

/// `kernel 7.2.13 · 20.3 s · captured by damon-trace 0.1.0 · ended: duration`
pub fn headline(r: &Report) -> String {
    let dur = r.meta.duration_ns.map_or_else(
        || "unknown duration".to_owned(),
        |d| format!("{:.1} s", d as f64 / 1e9),
    );
    let mut clock = match r.meta.clock {
        Clock::Wall => String::new(),
        c => format!(" · {}", c.describe()),
    };
    if r.meta.time == TimeBasis::OnCpu {
        clock.push_str(" · on-CPU time");
    }
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

/// The unit of the report's durations as headings name it: `ns`, or `ns on-CPU` under
/// `--time on-cpu`.
pub fn unit(r: &Report) -> String {
    r.meta.time.label(r.meta.unit)
}

/// Why the rows are as wide as they are, when it is not what was asked.
pub fn grid_note(t: &BucketTable, unit: &str) -> Option<String> {
    note_for(&t.grid, unit)
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

/// The range table's columns: range, calls, percent of the function's matched calls.
const RANGE_COLUMNS: [Column; 3] = [Column::left(22), Column::right(9), Column::right(8)];

/// A function's range table and the note on its grid, in `m`'s syntax.
fn range_table(m: &impl Markup, out: &mut String, f: &FunctionReport, t: &BucketTable, unit: &str) {
    let range = format!("Range ({unit})");
    out.push_str(&m.table_header(&[&range, "Count", "Percent"], &RANGE_COLUMNS));
    m.rows(out, range_cells(f, t), &RANGE_COLUMNS);
    if let Some(note) = grid_note(t, unit) {
        out.push_str(&m.note(&note));
    }
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

/// The per-interval table's columns: function, then those of [`per_interval_cells`].
const PER_INTERVAL_COLUMNS: [Column; 9] = [
    Column::left(27),
    Column::right(9),
    Column::right(7),
    Column::right(9),
    Column::right(12),
    Column::right(11),
    Column::right(11),
    Column::right(11),
    Column::right(8),
];

/// The per-interval table in `m`'s syntax: a row per function with per-interval numbers,
/// under the titles `head` (the first four columns), `{mean…max} {unit}{per}` and `outside`.
fn per_interval_table(
    m: &impl Markup,
    out: &mut String,
    r: &Report,
    (head, per, outside): ([&str; 4], &str, &str),
) {
    let unit = unit(r);
    let mut titles: Vec<String> = head.map(str::to_owned).into();
    titles.extend(["mean", "p50", "p99", "max"].map(|s| format!("{s} {unit}{per}")));
    titles.push(outside.to_owned());
    out.push_str(&m.table_header(&titles, &PER_INTERVAL_COLUMNS));
    for f in &r.functions {
        let Some(p) = &f.per_interval else { continue };
        let mut cells = vec![m.code(&f.name)];
        cells.extend(per_interval_cells(p));
        out.push_str(&m.table_row(&cells, &PER_INTERVAL_COLUMNS));
    }
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
