//! The report as Markdown, ready for a mail or a pull request.
use std::fmt::Write as _;

use super::{
    clean_numbers, corrected_numbers, disturbance_lines,
    explain::{breakdown_table, slow_section},
    headline, numbers, per_interval_table, range_table, resolution_line, traced, unit,
};
use crate::{analysis::Report, render::markup::Markdown};

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
        if let Some(c) = clean_numbers(f) {
            let _ = writeln!(out, "| ↳ clean | | {} |", c.join(" | "));
        }
    }
    let _ = writeln!(out, "\nLatencies in {}, {}.", unit(r), r.meta.latencies);
    for f in &r.functions {
        if let Some(res) = &f.resolution {
            let _ = writeln!(out, "\n{}", resolution_line(&f.name, res));
        }
    }
    for line in disturbance_lines(r) {
        let _ = writeln!(out, "\n{line}");
    }
    for n in &r.notes {
        let _ = writeln!(out, "\n_{n}_");
    }
    per_interval(&mut out, r);
    if r.functions.iter().any(|f| f.breakdown.is_some()) {
        let _ = writeln!(out, "\n### Where the time went\n");
        breakdown_table(&Markdown, &mut out, r);
    }
    let unit = unit(r);
    for f in &r.functions {
        if let Some(t) = &f.buckets {
            let _ = writeln!(out, "\n### `{}` ({} records)\n", f.name, f.matched);
            range_table(&Markdown, &mut out, f, t, &unit);
        }
    }
    for f in &r.functions {
        let heading = format!("\n### `{}`: slowest calls\n\n", f.name);
        slow_section(&Markdown, &mut out, f, r.meta.unit, &heading);
    }
    for w in &r.warnings {
        let _ = writeln!(out, "\n> warning: {w}");
    }
    out
}

/// The per-interval table (nothing without per-interval numbers).
fn per_interval(out: &mut String, r: &Report) {
    let Some(iv) = r.intervals.as_ref().filter(|iv| iv.attached) else {
        return;
    };
    if r.functions.iter().all(|f| f.per_interval.is_none()) {
        return;
    }
    let kdamonds: Vec<String> = iv
        .kdamonds
        .iter()
        .map(|k| {
            format!(
                "kdamond {}: {} intervals of {:.1} ms on average",
                k.tid,
                k.intervals,
                k.mean_interval_ns / 1e6
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "\n### Time per DAMON aggregation interval\n\n_{}; {}; {} boundaries lost._\n",
        iv.hook,
        kdamonds.join(", "),
        iv.markers_dropped
    );
    let head = ["function", "intervals", "with calls", "calls/interval"];
    per_interval_table(&Markdown, out, r, (head, "", "calls outside"));
}
