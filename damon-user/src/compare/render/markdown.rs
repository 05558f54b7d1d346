//! A comparison as Markdown, for a pull request or a mail that renders it.
use std::fmt::Write as _;

use super::{
    ci_head, clean_rows, closing, corrected_rows, disturbance_line, grid_note, range_cells,
    side_line, stat_rows, test_lines,
};
use crate::{
    capture::Clock,
    compare::{Comparison, FunctionComparison},
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
    for f in &c.functions {
        function(&mut out, f, c.method.clean_only, c.unit);
    }
    closing(c, &mut out, true);
    out
}

/// One function: verdict, disturbed calls, range table, latency table, corrected and clean
/// rows, tests, time per interval.
fn function(out: &mut String, f: &FunctionComparison, clean_only: bool, unit: &str) {
    let (b, a) = (&f.before, &f.after);
    let _ = writeln!(
        out,
        "\n### `{}` ({} → {} records)\n\n**{}**\n",
        f.name, b.matched, a.matched, f.verdict
    );
    if let Some(line) = disturbance_line(f) {
        let _ = writeln!(out, "Disturbance: {line}.\n");
    }
    let _ = writeln!(
        out,
        "| Range ({unit}) | Before | % | After | % |\n|---|--:|--:|--:|--:|"
    );
    for cells in range_cells(f) {
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    if let Some(note) = grid_note(f, unit) {
        let _ = writeln!(out, "\n_{note}_");
    }
    let _ = writeln!(
        out,
        "\n| {unit} | before | after | after − before | {} |\n|---|--:|--:|--:|---|",
        ci_head(f)
    );
    for [l, vb, va, d, ci] in stat_rows(f) {
        let _ = writeln!(out, "| {l} | {vb} | {va} | {d} | {ci} |");
    }
    for (head, rows) in [corrected_rows(f, unit), clean_rows(f, clean_only)]
        .into_iter()
        .flatten()
    {
        let _ = writeln!(
            out,
            "\n{head}:\n\n| {unit} | before | after | after − before |\n|---|--:|--:|--:|"
        );
        for [l, vb, va, d] in rows {
            let _ = writeln!(out, "| {l} | {vb} | {va} | {d} |");
        }
    }
    let tests = test_lines(f, unit);
    if !tests.is_empty() {
        let _ = writeln!(out);
    }
    for t in tests {
        let _ = writeln!(out, "{t}  ");
    }
    if let Some(iv) = &f.per_interval {
        let _ = writeln!(out, "\nTime per DAMON aggregation interval:\n\n```");
        for line in crate::compare::intervals::lines(iv) {
            let _ = writeln!(out, "{}", line.trim_end());
        }
        let _ = writeln!(out, "```");
    }
}
