//! A comparison as aligned text, for a terminal or a mail.
use std::fmt::Write as _;

use super::{
    BRIEF_COLUMNS, clean_rows, closing, corrected_rows, disturbance_line, range_columns,
    range_rows, side_line, slow_heading, slow_table, stat_table, test_lines,
};
use crate::{
    analysis::{TimeBasis, values::ValueDist},
    capture::Clock,
    compare::{Comparison, FunctionComparison, values::DistComparison},
    render::{
        markup::{Column, Markup, Plain},
        range_label,
    },
};

/// Text for a terminal or a mail.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "before: {}", side_line(&c.before));
    let _ = writeln!(out, "after:  {}", side_line(&c.after));
    if c.clock != Clock::Wall {
        let _ = writeln!(out, "clock:  {}", c.clock.describe());
    }
    if c.time == TimeBasis::OnCpu {
        let _ = writeln!(out, "time:   on-CPU (--time on-cpu)");
    }
    let unit = c.time.label(c.unit);
    for f in &c.functions {
        function(&mut out, f, c.method.clean_only, &unit, c.unit);
    }
    closing(c, &mut out, false);
    out
}

/// One function: disturbed calls, range table, latency table, corrected and clean rows,
/// tests, verdict, time per interval and values.
fn function(
    out: &mut String,
    f: &FunctionComparison,
    clean_only: bool,
    unit: &str,
    clock_unit: &str,
) {
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
    out.push('\n');
    stat_table(&Plain, out, f, unit, "after−before");
    for (head, rows) in [corrected_rows(f, unit), clean_rows(f, clean_only)]
        .into_iter()
        .flatten()
    {
        let _ = writeln!(out, "{head}");
        Plain.rows(out, rows, &BRIEF_COLUMNS);
    }
    for t in test_lines(f, unit) {
        let _ = writeln!(out, "{t}");
    }
    let _ = writeln!(out, "verdict: {}", f.verdict);
    if let Some(h) = slow_heading(f, clock_unit) {
        let _ = writeln!(out, "\n{h}:");
        slow_table(&Plain, out, f);
    }
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
    let [range, _, pb, _, _] = range_columns(f);
    let before = Column::right(pb.width + 9);
    let head = Plain.table_header(
        &[&format!("Range ({unit})"), "Before", "After"],
        &[range, before, before],
    );
    out.push_str(&head);
    range_rows(&Plain, out, f, unit);
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
