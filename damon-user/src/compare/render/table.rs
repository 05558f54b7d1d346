//! A comparison as aligned text, for a terminal or a mail.
use std::fmt::Write as _;

use super::{
    ci_head, clean_rows, closing, corrected_rows, disturbance_line, grid_note, range_cells,
    side_line, stat_rows, test_lines,
};
use crate::{
    analysis::values::ValueDist,
    capture::Clock,
    compare::{Comparison, FunctionComparison, values::DistComparison},
    render::range_label,
};

/// Text for a terminal or a mail.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "before: {}", side_line(&c.before));
    let _ = writeln!(out, "after:  {}", side_line(&c.after));
    if c.clock != Clock::Wall {
        let _ = writeln!(out, "clock:  {}", c.clock.describe());
    }
    for f in &c.functions {
        function(&mut out, f, c.method.clean_only, c.unit);
    }
    closing(c, &mut out, false);
    out
}

/// One function: disturbed calls, range table, latency table, corrected and clean rows,
/// tests, verdict, time per interval and values.
fn function(out: &mut String, f: &FunctionComparison, clean_only: bool, unit: &str) {
    let (b, a) = (&f.before, &f.after);
    let _ = writeln!(
        out,
        "\n{} ({} → {}): {} → {} records",
        f.name, b.attach, a.attach, b.matched, a.matched
    );
    if let Some(line) = disturbance_line(f) {
        let _ = writeln!(out, "{line}");
    }
    ranges(out, f, unit);
    latencies(out, f, unit);
    for (head, rows) in [corrected_rows(f, unit), clean_rows(f, clean_only)]
        .into_iter()
        .flatten()
    {
        let _ = writeln!(out, "{head}");
        for [l, vb, va, d] in rows {
            let _ = writeln!(out, "{l:<6} {vb:>12} {va:>12} {d:>12}");
        }
    }
    for t in test_lines(f, unit) {
        let _ = writeln!(out, "{t}");
    }
    let _ = writeln!(out, "verdict: {}", f.verdict);
    if let Some(iv) = &f.per_interval {
        let _ = writeln!(out);
        for line in crate::compare::intervals::lines(iv) {
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    values(out, &f.values);
}

/// The side-by-side range table.
fn ranges(out: &mut String, f: &FunctionComparison, unit: &str) {
    let w = if f.rows.iter().any(|r| r.before_runs_pct.is_some()) {
        22
    } else {
        8
    };
    let _ = writeln!(
        out,
        "{:<22} {:>b$} {:>b$}",
        format!("Range ({unit})"),
        "Before",
        "After",
        b = w + 9
    );
    for [range, before, pb, after, pa] in range_cells(f) {
        let _ = writeln!(out, "{range:<22} {before:>8} {pb:>w$} {after:>8} {pa:>w$}");
    }
    if let Some(note) = grid_note(f, unit) {
        let _ = writeln!(out, "({note})");
    }
}

/// The latency table: min, percentiles, mean and max, their difference and interval.
fn latencies(out: &mut String, f: &FunctionComparison, unit: &str) {
    let rows = stat_rows(f);
    let w = rows
        .iter()
        .map(|r| r[1].chars().count().max(r[2].chars().count()))
        .max()
        .unwrap_or(0)
        .max(12);
    let _ = writeln!(
        out,
        "\n{:<6} {:>w$} {:>w$} {:>12}  {}",
        unit,
        "before",
        "after",
        "after−before",
        ci_head(f)
    );
    for [l, vb, va, d, ci] in rows {
        let line = format!("{l:<6} {vb:>w$} {va:>w$} {d:>12}  {ci}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// Before/after value distributions as text.
fn values(out: &mut String, cmp: &[DistComparison]) {
    for d in cmp {
        let line = |s: &Option<ValueDist>| match s {
            Some(d) => format!(
                "n {} min {} p50 {} p90 {} max {} mean {:.1} sum {}",
                d.count, d.min, d.p50, d.p90, d.max, d.mean, d.sum
            ),
            None => "not recorded".to_owned(),
        };
        let _ = writeln!(out, "\n{}:", d.name);
        let _ = writeln!(out, "  before: {}", line(&d.before));
        let _ = writeln!(out, "  after:  {}", line(&d.after));
        let nb = d.before.as_ref().map_or(0, |x| x.count);
        let na = d.after.as_ref().map_or(0, |x| x.count);
        let pct = |c: u64, n: u64| {
            if n == 0 {
                "-".to_owned()
            } else {
                format!("{:.1}%", 100.0 * c as f64 / n as f64)
            }
        };
        let _ = writeln!(out, "  {:>13} {:>17} {:>17}", "Range", "Before", "After");
        for r in &d.rows {
            let _ = writeln!(
                out,
                "  {:>13} {:>8} {:>8} {:>8} {:>8}",
                range_label(r.lo, r.hi),
                r.before,
                pct(r.before, nb),
                r.after,
                pct(r.after, na)
            );
        }
    }
}
