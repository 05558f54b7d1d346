//! A comparison as Markdown, for a pull request or a mail that renders it.
use std::fmt::Write as _;

use super::{
    BRIEF_COLUMNS, clean_rows, closing, corrected_rows, disturbance_line, range_columns,
    range_rows, side_line, slow_heading, slow_table, stat_table, test_lines,
};
use crate::{
    analysis::TimeBasis,
    capture::Clock,
    compare::{Comparison, FunctionComparison},
    render::markup::{Markdown, Markup},
};

/// Markdown for a pull request or a mail that renders it.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "**damon-trace compare**\n");
    let _ = writeln!(out, "- before: {}", side_line(&c.before));
    let _ = writeln!(out, "- after: {}", side_line(&c.after));
    if c.clock != Clock::Wall {
        let _ = writeln!(out, "- clock: {}", c.clock.describe());
    }
    if c.time == TimeBasis::OnCpu {
        let _ = writeln!(out, "- time: on-CPU (`--time on-cpu`)");
    }
    let unit = c.time.label(c.unit);
    for f in &c.functions {
        function(&mut out, f, c.method.clean_only, &unit, c.unit);
    }
    closing(c, &mut out, true);
    out
}

/// One function: verdict, disturbed calls, range table, latency table, corrected and clean
/// rows, tests, time per interval.
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
        "\n### `{}` ({} → {} records)\n\n**{}**\n",
        f.name, b.matched, a.matched, f.verdict
    );
    if let Some(line) = disturbance_line(f) {
        let _ = writeln!(out, "Disturbance: {line}.\n");
    }
    let titles = [&format!("Range ({unit})"), "Before", "%", "After", "%"];
    out.push_str(&Markdown.table_header(&titles, &range_columns(f)));
    range_rows(&Markdown, out, f, unit);
    out.push('\n');
    stat_table(&Markdown, out, f, unit, "after − before");
    for (head, rows) in [corrected_rows(f, unit), clean_rows(f, clean_only)]
        .into_iter()
        .flatten()
    {
        let _ = writeln!(out, "\n{head}:\n");
        let titles = [unit, "before", "after", "after − before"];
        out.push_str(&Markdown.table_header(&titles, &BRIEF_COLUMNS));
        Markdown.rows(out, rows, &BRIEF_COLUMNS);
    }
    let tests = test_lines(f, unit);
    if !tests.is_empty() {
        let _ = writeln!(out);
    }
    for t in tests {
        let _ = writeln!(out, "{t}  ");
    }
    if let Some(h) = slow_heading(f, clock_unit) {
        let _ = writeln!(out, "\n{h}:\n");
        slow_table(&Markdown, out, f);
    }
    if let Some(iv) = &f.per_interval {
        let _ = writeln!(out, "\nTime per DAMON aggregation interval:\n\n```");
        for line in crate::compare::intervals::lines(iv) {
            let _ = writeln!(out, "{}", line.trim_end());
        }
        let _ = writeln!(out, "```");
    }
}
