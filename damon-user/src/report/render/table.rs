//! The aligned text report: summary table, notes, the DAMON blocks, one range table per traced
//! function, warnings.
use std::fmt::Write as _;

use serde_json::Value;

use super::{
    COLUMNS, clean_numbers, corrected_numbers, disturbance_lines,
    explain::{breakdown_table, slow_section},
    headline, numbers, per_interval_table, range_table, resolution_line, traced, unit,
};
use crate::{
    analysis::{
        FunctionReport, Report,
        damon::{DamonContext, IntervalsReport},
        values::{FunctionValues, ValueDist},
    },
    capture::format::ReadInfo,
    render::{markup::Plain, range_label},
};

/// Widths of the summary table's number columns.
const WIDTHS: [usize; 12] = [9, 9, 7, 6, 8, 10, 8, 8, 8, 8, 9, 10];

/// The aligned text report: summary table, notes, one range table per traced function.
pub fn table(r: &Report, storage: Option<&ReadInfo>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(r));
    summary(&mut out, r);
    notes(&mut out, r);
    for f in &r.functions {
        function_notes(&mut out, f);
    }
    if let Some(info) = storage {
        storage_line(&mut out, r, info);
    }
    damon_blocks(&mut out, r);
    if r.functions.iter().any(|f| f.breakdown.is_some()) {
        let _ = writeln!(out, "\nwhere the time went (wall time split)");
        breakdown_table(&Plain, &mut out, r);
    }
    let unit = unit(r);
    for f in &r.functions {
        if let Some(t) = &f.buckets {
            let _ = writeln!(out, "\n{} ({}, {} records)", f.name, f.attach, f.matched);
            range_table(&Plain, &mut out, f, t, &unit);
        }
    }
    for f in &r.functions {
        let heading = format!("\n{}: slowest calls\n", f.name);
        slow_section(&Plain, &mut out, f, r.meta.unit, &heading);
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(out);
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The summary table: a line per function, the corrected latencies under a calibrated one.
fn summary(out: &mut String, r: &Report) {
    // Wide enough for the longest method named (`kprobe-session`), 7 at least.
    let aw = r
        .functions
        .iter()
        .map(|f| f.attach.as_str().len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut head = format!("{:<27} {:<aw$}", "function", "attach");
    for (name, w) in COLUMNS.iter().zip(WIDTHS) {
        let _ = write!(head, " {name:>w$}");
    }
    let _ = writeln!(out, "{head}");
    for f in &r.functions {
        if !traced(f) {
            let _ = writeln!(
                out,
                "{:<27} {:<aw$} {}",
                f.name,
                f.attach,
                f.attach_detail.as_deref().unwrap_or("")
            );
            continue;
        }
        let _ = writeln!(out, "{}", row(&f.name, f.attach.as_str(), aw, &numbers(f)));
        if let Some(c) = corrected_numbers(f) {
            let _ = writeln!(out, "{}", row("  corrected", "", aw, &c).trim_end());
        }
        if let Some(c) = clean_numbers(f) {
            let _ = writeln!(out, "{}", row("  clean", "", aw, &c).trim_end());
        }
    }
}

/// One line of the summary table.
fn row(name: &str, attach: &str, aw: usize, cells: &[String; 12]) -> String {
    let mut line = format!("{name:<27} {attach:<aw$}");
    for (v, w) in cells.iter().zip(WIDTHS) {
        let _ = write!(line, " {v:>w$}");
    }
    line
}

/// What the latencies are, kernel-mode resolutions, the report's notes and the filter.
fn notes(out: &mut String, r: &Report) {
    if r.meta.mode == crate::capture::Mode::Kernel {
        let _ = writeln!(
            out,
            "latencies in {}, {}; kernel mode: `records` counts calls added to the in-kernel \
             histograms, count, min, mean and max are exact",
            unit(r),
            r.meta.latencies
        );
    } else {
        let _ = writeln!(
            out,
            "latencies in {} (nearest-rank percentiles over every record), {}",
            unit(r),
            r.meta.latencies
        );
    }
    for f in &r.functions {
        if let Some(res) = &f.resolution {
            let _ = writeln!(out, "{}", resolution_line(&f.name, res));
        }
    }
    for line in disturbance_lines(r) {
        let _ = writeln!(out, "{line}");
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
}

/// A function's values, and what its counts cannot say (skipped runs, orphan exits).
fn function_notes(out: &mut String, f: &FunctionReport) {
    if let Some(v) = &f.values {
        values(out, &f.name, v);
    } else if let (Some(name), Some(v)) = (f.value_name, f.value) {
        let _ = writeln!(
            out,
            "{}: {} min {} mean {:.1} max {} (sum {})",
            f.name, name, v.min, v.mean, v.max, v.sum
        );
    }
    if f.attach.is_traced() && f.skipped_entries.is_none() {
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

/// The capture file's format version and size.
fn storage_line(out: &mut String, r: &Report, info: &ReadInfo) {
    let records: u64 = r.functions.iter().map(|f| f.count).sum();
    let _ = writeln!(
        out,
        "capture format v{}, {} bytes{}",
        info.version,
        info.file_bytes,
        if records > 0 && r.meta.mode != crate::capture::Mode::Kernel {
            format!(
                ", {:.1} bytes per record",
                info.file_bytes as f64 / records as f64
            )
        } else {
            String::new()
        }
    );
}

/// One distribution as text: a summary line and the histogram rows.
fn dist(out: &mut String, label: &str, d: &ValueDist) {
    let _ = writeln!(
        out,
        "  {label}: n {} min {} p50 {} p90 {} p99 {} max {} mean {:.1} sum {}",
        d.count, d.min, d.p50, d.p90, d.p99, d.max, d.mean, d.sum
    );
    for row in &d.histogram {
        let range = range_label(row.lo, row.hi);
        let bar = "#".repeat((row.percent / 5.0).round() as usize);
        let _ = writeln!(
            out,
            "    {range:>13} | {:>7} | {:>5.1}% {bar}",
            row.count, row.percent
        );
    }
}

/// The values block of one function as text.
fn values(out: &mut String, name: &str, v: &FunctionValues) {
    let _ = writeln!(out, "{name}: values");
    if let (Some(vn), Some(d)) = (v.value_name, &v.value) {
        dist(out, vn, d);
    }
    for (arg, d) in &v.args {
        dist(out, arg, d);
    }
    if !v.by_target_nid.is_empty() {
        let _ = writeln!(out, "  per target node: node | calls | pages migrated");
        for b in &v.by_target_nid {
            let _ = writeln!(out, "    {:>4} | {:>7} | {}", b.arg, b.calls, b.value_sum);
        }
    }
    if let Some(o) = &v.already_on_destination {
        let _ = writeln!(
            out,
            "  already on destination: {} of {} calls (node and destination known for {})",
            o.on_destination, o.calls, o.known
        );
    }
    if let Some(m) = &v.missing {
        let _ = writeln!(out, "  {m}");
    }
}

/// The DAMON blocks: context at start and its changes, then the per-interval table of the
/// DAMON functions.
fn damon_blocks(out: &mut String, r: &Report) {
    if let Some(ctx) = &r.meta.damon {
        damon_context(out, ctx);
    }
    if let Some(iv) = &r.intervals {
        per_interval(out, r, iv);
    }
}

/// DAMON's configuration at start, and what changed by the end.
fn damon_context(out: &mut String, ctx: &DamonContext) {
    let lines = context_lines(&ctx.start);
    let _ = writeln!(out, "\nDAMON at start:");
    if lines.is_empty() {
        let _ = writeln!(out, "  no kdamond configured");
    }
    for l in lines {
        let _ = writeln!(out, "  {l}");
    }
    match (&ctx.end, ctx.changed_at_end) {
        (None, _) => {
            let _ = writeln!(out, "DAMON at end: not recorded");
        }
        (Some(_), false) => {
            let _ = writeln!(
                out,
                "DAMON at end: configuration unchanged ({} scheme stats advanced)",
                ctx.stats_changes.len()
            );
        }
        (Some(_), true) => {
            let _ = writeln!(
                out,
                "DAMON at end: {} configuration values changed",
                ctx.changes.len()
            );
            for c in ctx.changes.iter().take(12) {
                let _ = writeln!(out, "  {c}");
            }
            if ctx.changes.len() > 12 {
                let _ = writeln!(
                    out,
                    "  … {} more (see --format json)",
                    ctx.changes.len() - 12
                );
            }
        }
    }
}

/// The interval boundaries, the kdamonds' intervals and the DAMON functions' time per interval.
fn per_interval(out: &mut String, r: &Report, iv: &IntervalsReport) {
    if !iv.attached {
        let _ = writeln!(
            out,
            "\nper aggregation interval: no boundaries ({} not attached: {})",
            iv.hook,
            iv.detail.as_deref().unwrap_or("unknown reason")
        );
        return;
    }
    let _ = writeln!(
        out,
        "\nper aggregation interval ({}; {} boundaries, {} lost)",
        iv.hook, iv.markers, iv.markers_dropped
    );
    for k in &iv.kdamonds {
        let _ = writeln!(
            out,
            "  kdamond tid {}: {} intervals, length mean {:.1} ms min {:.1} max {:.1}",
            k.tid,
            k.intervals,
            k.mean_interval_ns / 1e6,
            k.min_interval_ns as f64 / 1e6,
            k.max_interval_ns as f64 / 1e6
        );
    }
    if r.functions.iter().all(|f| f.per_interval.is_none()) {
        return;
    }
    let head = ["function", "intervals", "w/calls", "calls/int"];
    per_interval_table(&Plain, out, r, (head, "/int", "outside"));
    let _ = writeln!(
        out,
        "(time in the function per interval = sum of its call durations; an interval holds \
         the calls its kdamond entered between two boundaries; outside = calls before the \
         first or after the last boundary, or by a thread that is not a kdamond)"
    );
}

fn us(v: &Value) -> String {
    match v.as_u64() {
        Some(u) if u >= 1_000_000 && u % 1000 == 0 => format!("{} s", u as f64 / 1e6),
        Some(u) if u >= 1000 => format!("{} ms", u as f64 / 1e3),
        Some(u) => format!("{u} us"),
        None => "?".to_owned(),
    }
}

/// One line per running or configured kdamond context: ops, intervals, targets, schemes.
pub(in crate::report) fn context_lines(snapshot: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    if snapshot["damon_stat_enabled"] == Value::Bool(true) {
        lines.push(format!(
            "DAMON_STAT enabled (kdamond pid {})",
            snapshot["damon_stat_kdamond_pid"]
        ));
    }
    for k in snapshot["kdamonds"].as_array().into_iter().flatten() {
        for c in k["contexts"].as_array().into_iter().flatten() {
            let mut l = format!(
                "kdamond {} {} pid {}: {} sample {} aggr {} update {} regions {}..{}",
                k["index"],
                k["state"].as_str().unwrap_or("?"),
                k["pid"],
                c["operations"].as_str().unwrap_or("?"),
                us(&c["sample_us"]),
                us(&c["aggr_us"]),
                us(&c["update_us"]),
                c["nr_regions_min"],
                c["nr_regions_max"],
            );
            for t in c["targets"].as_array().into_iter().flatten() {
                let _ = write!(l, "; target pid {}", t["pid"]);
                for r in t["regions"].as_array().into_iter().flatten() {
                    if let (Some(a), Some(b)) = (r[0].as_u64(), r[1].as_u64()) {
                        let _ = write!(l, " [{a:#x}, {b:#x})");
                    }
                }
            }
            for s in c["schemes"].as_array().into_iter().flatten() {
                let _ = write!(l, "; scheme {}", s["action"].as_str().unwrap_or("?"));
                if let Some(n) = s["target_nid"].as_i64().filter(|n| *n >= 0) {
                    let _ = write!(l, " target_nid {n}");
                }
                if let Some(d) = s["dests"].as_array().filter(|d| !d.is_empty()) {
                    let d: Vec<String> = d.iter().map(|x| format!("{}:{}", x[0], x[1])).collect();
                    let _ = write!(l, " dests {}", d.join(","));
                }
                let _ = write!(
                    l,
                    " quota {} ms {} B / {} ms weights sz {} acc {} age {}",
                    s["quota_ms"],
                    s["quota_bytes"],
                    s["quota_reset_interval_ms"],
                    s["weight_sz_permil"],
                    s["weight_nr_accesses_permil"],
                    s["weight_age_permil"]
                );
                if let Some(a) = s["apply_interval_us"].as_u64().filter(|a| *a > 0) {
                    let _ = write!(l, " apply every {}", us(&Value::from(a)));
                }
                let filters = s["filters"].as_array().map_or(0, Vec::len);
                let _ = write!(l, " filters {filters}");
            }
            lines.push(l);
        }
    }
    lines
}
