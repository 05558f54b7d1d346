//! Renderers of a [`Report`]: aligned text, Markdown, CSV (pure; JSON is serde's).
use std::fmt::Write as _;

use super::{BucketTable, FunctionReport, Report};
use crate::capture::format::ReadInfo;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn traced(f: &FunctionReport) -> bool {
    !matches!(f.attach, "missing" | "inlined" | "failed")
}

fn percent(count: u64, total: u64) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}%", count as f64 * 100.0 / total as f64)
    }
}

/// `kernel 7.2.13 · 20.3 s · captured by damon-trace 0.1.0 · ended: duration`
pub fn headline(r: &Report) -> String {
    let dur = r.meta.duration_ns.map_or_else(
        || "unknown duration".to_owned(),
        |d| format!("{:.1} s", d as f64 / 1e9),
    );
    format!(
        "kernel {} · {} · captured by damon-trace {}{}",
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
pub fn grid_note(t: &BucketTable) -> Option<String> {
    note_for(&t.grid)
}

/// The note of a grid: widened rows, and where the kernel's log2 buckets take over.
pub fn note_for(grid: &crate::stats::buckets::BucketGrid) -> Option<String> {
    // Rows as wide as the kernel's whole linear range: the log2 buckets are all there is.
    let linear_rows = grid.log2_from_ns.is_none_or(|from| grid.width_ns < from);
    let widened = grid.widened_from.filter(|_| linear_rows).map(|asked| {
        format!(
            "rows are {} ns wide: {asked} ns rows up to the p99 would take more than 40 lines \
             (choose with --bucket-ns and --max-ns)",
            grid.width_ns
        )
    });
    let log2 = grid.log2_from_ns.map(|from| {
        format!(
            "from {from} ns up the rows are the kernel's log2 buckets, each twice as wide as \
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

/// The corrected latencies in the columns of [`numbers`] (accounting columns blank).
fn corrected_numbers(f: &FunctionReport) -> Option<[String; 12]> {
    use crate::report::calibration::format_ns;
    let c = f.corrected?;
    let mut out: [String; 12] = Default::default();
    out[3] = format!("±{}", format_ns(c.uncertainty_ns.round()));
    for (i, v) in [
        c.min_ns, c.mean_ns, c.p50_ns, c.p90_ns, c.p95_ns, c.p99_ns, c.p999_ns, c.max_ns,
    ]
    .into_iter()
    .enumerate()
    {
        out[4 + i] = if i == 1 {
            format!("{v:.1}")
        } else {
            format_ns(v)
        };
    }
    Some(out)
}

/// The aligned text report: summary table, notes, one range table per traced function.
pub fn table(r: &Report, storage: Option<&ReadInfo>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(r));
    let widths = [9, 9, 7, 6, 8, 10, 8, 8, 8, 8, 9, 10];
    let mut head = format!("{:<27} {:<7}", "function", "attach");
    for (name, w) in COLUMNS.iter().zip(widths) {
        let _ = write!(head, " {name:>w$}");
    }
    let _ = writeln!(out, "{head}");
    for f in &r.functions {
        if !traced(f) {
            let _ = writeln!(
                out,
                "{:<27} {:<7} {}",
                f.name,
                f.attach,
                f.attach_detail.as_deref().unwrap_or("")
            );
            continue;
        }
        let mut line = format!("{:<27} {:<7}", f.name, f.attach);
        for (v, w) in numbers(f).iter().zip(widths) {
            let _ = write!(line, " {v:>w$}");
        }
        let _ = writeln!(out, "{line}");
        if let Some(c) = corrected_numbers(f) {
            let mut line = format!("{:<27} {:<7}", "  corrected", "");
            for (v, w) in c.iter().zip(widths) {
                let _ = write!(line, " {v:>w$}");
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    if r.meta.mode == "kernel" {
        let _ = writeln!(
            out,
            "latencies in ns, {}; kernel mode: `records` counts calls added to the in-kernel \
             histograms, count, min, mean and max are exact",
            r.meta.latencies
        );
    } else {
        let _ = writeln!(
            out,
            "latencies in ns (nearest-rank percentiles over every record), {}",
            r.meta.latencies
        );
    }
    for f in &r.functions {
        if let Some(res) = &f.resolution {
            let _ = writeln!(out, "{}", super::kernel::resolution_line(&f.name, res));
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    if let Some(filter) = &r.meta.filter {
        let _ = writeln!(
            out,
            "filter: cpu {:?} pid {:?}: latencies describe the matching records only; calls and \
             drops are the kernel's totals",
            filter.cpu, filter.pid
        );
    }
    for f in &r.functions {
        if let Some(v) = &f.values {
            super::values::render(&mut out, &f.name, v);
        } else if let (Some(name), Some(v)) = (f.value_name, f.value) {
            let _ = writeln!(
                out,
                "{}: {} min {} mean {:.1} max {} (sum {})",
                f.name, name, v.min, v.mean, v.max, v.sum
            );
        }
        if matches!(f.attach, "fentry" | "kprobe") && f.skipped_entries.is_none() {
            let _ = writeln!(
                out,
                "{}: the kernel's count of skipped probe runs is not available (kprobe before \
                 Linux 6.7, fentry before 5.12, or a capture older than that count): calls \
                 are the entries the probe saw",
                f.name
            );
        }
        if f.orphan_exits > 0 {
            let _ = writeln!(
                out,
                "{}: {} exits without their call's entry (calls already running when the entry \
                 probe was attached, or whose entry run the kernel skipped; not timed)",
                f.name, f.orphan_exits
            );
        }
    }
    if let Some(info) = storage {
        let records: u64 = r.functions.iter().map(|f| f.count).sum();
        let _ = writeln!(
            out,
            "capture format v{}, {} bytes{}",
            info.version,
            info.file_bytes,
            if records > 0 && r.meta.mode != "kernel" {
                format!(
                    ", {:.1} bytes per record",
                    info.file_bytes as f64 / records as f64
                )
            } else {
                String::new()
            }
        );
    }
    out.push_str(&super::damon::render_table(r));
    for f in &r.functions {
        if let Some(t) = &f.buckets {
            let _ = writeln!(out, "\n{} ({}, {} records)", f.name, f.attach, f.matched);
            let _ = writeln!(out, "{:<22} {:>9} {:>8}", "Range (ns)", "Count", "Percent");
            for row in &t.rows {
                let _ = writeln!(
                    out,
                    "{:<22} {:>9} {:>8}",
                    row.label(),
                    row.count,
                    percent(row.count, f.matched)
                );
            }
            if let Some(note) = grid_note(t) {
                let _ = writeln!(out, "({note})");
            }
        }
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(out);
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The report as Markdown, ready for a mail or a pull request.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "**damon-trace report** — {}\n", headline(r));
    let _ = writeln!(
        out,
        "| function | attach | calls | records | dropped | in flight | min | mean | p50 | p90 | p95 | p99 | p99.9 | max |"
    );
    let _ = writeln!(out, "|---|---|{}", "--:|".repeat(12));
    for f in &r.functions {
        let cells = if traced(f) {
            numbers(f).join(" | ")
        } else {
            ["-"; 12].join(" | ")
        };
        let _ = writeln!(out, "| `{}` | {} | {cells} |", f.name, f.attach);
        if let Some(c) = corrected_numbers(f) {
            let _ = writeln!(out, "| ↳ corrected | | {} |", c.join(" | "));
        }
    }
    let _ = writeln!(out, "\nLatencies in ns, {}.", r.meta.latencies);
    for f in &r.functions {
        if let Some(res) = &f.resolution {
            let _ = writeln!(out, "\n{}", super::kernel::resolution_line(&f.name, res));
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "\n_{n}_");
    }
    out.push_str(&super::damon::render_markdown(r));
    for f in &r.functions {
        if let Some(t) = &f.buckets {
            let _ = writeln!(out, "\n### `{}` ({} records)\n", f.name, f.matched);
            let _ = writeln!(out, "| Range (ns) | Count | Percent |\n|---|--:|--:|");
            for row in &t.rows {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    row.label(),
                    row.count,
                    percent(row.count, f.matched)
                );
            }
            if let Some(note) = grid_note(t) {
                let _ = writeln!(out, "\n_{note}_");
            }
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "\n> warning: {w}");
    }
    out
}

/// One CSV row per function (kernel symbol names and attach states never need quoting).
pub fn csv(r: &Report) -> String {
    let mut out = String::from(
        "name,attach,mode,calls,count,matched,dropped,in_flight,orphan_exits,min_ns,mean_ns,\
         p50_ns,p90_ns,p95_ns,p99_ns,p999_ns,max_ns,percentile_bound_ns,floor_ns,\
         floor_uncertainty_ns,corrected_min_ns,corrected_mean_ns,corrected_p50_ns,corrected_p90_ns,\
         corrected_p95_ns,corrected_p99_ns,corrected_p999_ns,corrected_max_ns,stale_entries,\
         skipped_entries,skipped_exits\n",
    );
    let o = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    for f in &r.functions {
        let corrected = f.corrected.map_or_else(
            || ",".repeat(9),
            |c| {
                [
                    c.floor_ns,
                    c.uncertainty_ns,
                    c.min_ns,
                    c.mean_ns,
                    c.p50_ns,
                    c.p90_ns,
                    c.p95_ns,
                    c.p99_ns,
                    c.p999_ns,
                    c.max_ns,
                ]
                .map(|v| format!("{v:.3}"))
                .join(",")
            },
        );
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{corrected},{},{},{}",
            f.name,
            f.attach,
            f.mode,
            f.calls,
            f.count,
            f.matched,
            f.dropped,
            f.in_flight,
            f.orphan_exits,
            o(f.min_ns),
            f.mean_ns.map(|m| format!("{m:.3}")).unwrap_or_default(),
            o(f.p50_ns),
            o(f.p90_ns),
            o(f.p95_ns),
            o(f.p99_ns),
            o(f.p999_ns),
            o(f.max_ns),
            o(f.resolution.as_ref().map(|r| r.bound_ns)),
            f.stale_entries,
            o(f.skipped_entries),
            o(f.skipped_exits),
        );
    }
    out
}
