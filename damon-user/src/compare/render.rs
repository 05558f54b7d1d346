//! Renderers of a [`Comparison`]: aligned text (like a kernel patch mail) and Markdown.
use std::fmt::Write as _;

use super::{CaptureSide, Comparison, FunctionComparison, p_text, signed};
use crate::stats::{buckets::BucketRow, ranktest};

fn pct(count: u64, total: u64) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}%", count as f64 * 100.0 / total as f64)
    }
}

fn label(lo: u64, hi: Option<u64>) -> String {
    BucketRow {
        lo_ns: lo,
        hi_ns: hi,
        count: 0,
    }
    .label()
}

fn side_line(s: &CaptureSide) -> String {
    format!(
        "{} — kernel {}{}{}",
        s.file,
        s.kernel_release,
        s.duration_ns
            .map(|d| format!(" · {:.1} s", d as f64 / 1e9))
            .unwrap_or_default(),
        if s.complete { "" } else { " · incomplete" }
    )
}

/// Rows of the percentile table: label, before, after, delta, interval.
fn stat_rows(f: &FunctionComparison) -> Vec<[String; 5]> {
    let mut rows = Vec::new();
    let (sb, sa) = (f.before.stats, f.after.stats);
    if let (Some(b), Some(a)) = (sb, sa) {
        rows.push([
            "min".into(),
            b.min_ns.to_string(),
            a.min_ns.to_string(),
            signed(a.min_ns as f64 - b.min_ns as f64),
            String::new(),
        ]);
    }
    for d in &f.percentiles {
        rows.push([
            d.label.into(),
            d.before_ns.to_string(),
            d.after_ns.to_string(),
            signed(d.after_ns as f64 - d.before_ns as f64),
            d.interval.map_or_else(
                || "(too few calls in this tail)".to_owned(),
                |i| format!("[{}, {}]", signed(i.lo), signed(i.hi)),
            ),
        ]);
    }
    if let (Some(b), Some(a)) = (sb, sa) {
        rows.push([
            "mean".into(),
            format!("{:.1}", b.mean_ns),
            format!("{:.1}", a.mean_ns),
            signed(a.mean_ns - b.mean_ns),
            f.mean.map_or_else(String::new, |i| {
                format!("[{}, {}] (Welch)", signed(i.lo), signed(i.hi))
            }),
        ]);
        rows.push([
            "max".into(),
            b.max_ns.to_string(),
            a.max_ns.to_string(),
            signed(a.max_ns as f64 - b.max_ns as f64),
            String::new(),
        ]);
    }
    rows
}

/// Rows of the corrected table (raw minus each side's floor): label, before, after, delta.
fn corrected_rows(f: &FunctionComparison) -> Option<(String, Vec<[String; 4]>)> {
    use crate::stats::calibration::format_ns;
    let (b, a) = (f.before.corrected?, f.after.corrected?);
    let row =
        |l: &str, vb: f64, va: f64| [l.to_owned(), format_ns(vb), format_ns(va), signed(va - vb)];
    let head = format!(
        "corrected (raw − probe floor: before {} ± {} ns, after {} ± {} ns)",
        format_ns(b.floor_ns),
        format_ns(b.uncertainty_ns.round()),
        format_ns(a.floor_ns),
        format_ns(a.uncertainty_ns.round())
    );
    Some((
        head,
        vec![
            row("min", b.min_ns, a.min_ns),
            row("p50", b.p50_ns, a.p50_ns),
            row("p90", b.p90_ns, a.p90_ns),
            row("p99", b.p99_ns, a.p99_ns),
            [
                "mean".into(),
                format!("{:.1}", b.mean_ns),
                format!("{:.1}", a.mean_ns),
                signed(a.mean_ns - b.mean_ns),
            ],
        ],
    ))
}

fn test_line(f: &FunctionComparison) -> Option<String> {
    f.mann_whitney.map(|m| {
        format!(
            "Mann–Whitney U={:.1} {} ({:?}), Cliff's δ={:+.3} ({})",
            m.u_after,
            p_text(m.p_value),
            m.method,
            m.cliffs_delta,
            ranktest::magnitude(m.cliffs_delta)
        )
    })
}

fn grid_note(f: &FunctionComparison) -> Option<String> {
    crate::report::render::note_for(&f.grid)
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

/// Text for a terminal or a mail.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "before: {}", side_line(&c.before));
    let _ = writeln!(out, "after:  {}", side_line(&c.after));
    for f in &c.functions {
        let (b, a) = (&f.before, &f.after);
        let _ = writeln!(
            out,
            "\n{} ({} → {}): {} → {} records",
            f.name, b.attach, a.attach, b.matched, a.matched
        );
        let _ = writeln!(out, "{:<22} {:>17} {:>17}", "Range (ns)", "Before", "After");
        for r in &f.rows {
            let _ = writeln!(
                out,
                "{:<22} {:>8} {:>8} {:>8} {:>8}",
                label(r.lo_ns, r.hi_ns),
                r.before,
                pct(r.before, b.matched),
                r.after,
                pct(r.after, a.matched)
            );
        }
        if let Some(note) = grid_note(f) {
            let _ = writeln!(out, "({note})");
        }
        let _ = writeln!(
            out,
            "\n{:<6} {:>12} {:>12} {:>12}  95% CI",
            "ns", "before", "after", "after−before"
        );
        for [l, vb, va, d, ci] in stat_rows(f) {
            let line = format!("{l:<6} {vb:>12} {va:>12} {d:>12}  {ci}");
            let _ = writeln!(out, "{}", line.trim_end());
        }
        if let Some((head, rows)) = corrected_rows(f) {
            let _ = writeln!(out, "{head}");
            for [l, vb, va, d] in rows {
                let _ = writeln!(out, "{l:<6} {vb:>12} {va:>12} {d:>12}");
            }
        }
        if let Some(t) = test_line(f) {
            let _ = writeln!(out, "{t}");
        }
        let _ = writeln!(out, "verdict: {}", f.verdict);
        if let Some(iv) = &f.per_interval {
            let _ = writeln!(out);
            for line in super::intervals::lines(iv) {
                let _ = writeln!(out, "{}", line.trim_end());
            }
        }
        crate::report::values::render_comparison(&mut out, &f.values);
    }
    let _ = writeln!(
        out,
        "\nlatencies in ns, raw (they include the probe's own cost){}; intervals: {} bootstrap \
         resamples, seed {:#x}",
        corrected_note(c),
        c.method.bootstrap_resamples,
        c.method.bootstrap_seed
    );
    footer(c, &mut out, "");
    out
}

/// Markdown for a pull request or a mail that renders it.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "**damon-trace compare**\n");
    let _ = writeln!(out, "- before: {}", side_line(&c.before));
    let _ = writeln!(out, "- after: {}", side_line(&c.after));
    for f in &c.functions {
        let (b, a) = (&f.before, &f.after);
        let _ = writeln!(
            out,
            "\n### `{}` ({} → {} records)\n\n**{}**\n",
            f.name, b.matched, a.matched, f.verdict
        );
        let _ = writeln!(
            out,
            "| Range (ns) | Before | % | After | % |\n|---|--:|--:|--:|--:|"
        );
        for r in &f.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                label(r.lo_ns, r.hi_ns),
                r.before,
                pct(r.before, b.matched),
                r.after,
                pct(r.after, a.matched)
            );
        }
        if let Some(note) = grid_note(f) {
            let _ = writeln!(out, "\n_{note}_");
        }
        let _ = writeln!(
            out,
            "\n| ns | before | after | after − before | 95% CI |\n|---|--:|--:|--:|---|"
        );
        for [l, vb, va, d, ci] in stat_rows(f) {
            let _ = writeln!(out, "| {l} | {vb} | {va} | {d} | {ci} |");
        }
        if let Some((head, rows)) = corrected_rows(f) {
            let _ = writeln!(
                out,
                "\n{head}:\n\n| ns | before | after | after − before |\n|---|--:|--:|--:|"
            );
            for [l, vb, va, d] in rows {
                let _ = writeln!(out, "| {l} | {vb} | {va} | {d} |");
            }
        }
        if let Some(t) = test_line(f) {
            let _ = writeln!(out, "\n{t}");
        }
        if let Some(iv) = &f.per_interval {
            let _ = writeln!(out, "\nTime per DAMON aggregation interval:\n\n```");
            for line in super::intervals::lines(iv) {
                let _ = writeln!(out, "{}", line.trim_end());
            }
            let _ = writeln!(out, "```");
        }
    }
    let _ = writeln!(
        out,
        "\nLatencies in ns, raw (they include the probe's own cost){}.",
        corrected_note(c)
    );
    footer(c, &mut out, "\n> ");
    out
}
