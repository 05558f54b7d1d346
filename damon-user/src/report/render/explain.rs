//! The breakdown table and the slowest-calls section, written once through [`Markup`] for
//! the aligned text and Markdown reports.
use std::fmt::Write as _;

use crate::{
    analysis::{FunctionReport, Report, breakdown::BreakdownSummary, slow::SlowReport},
    render::{
        markup::{Column, Markup},
        opt,
    },
};

/// The breakdown table's columns: function, then those of [`breakdown_cells`].
const BREAKDOWN_COLUMNS: [Column; 12] = [
    Column::left(27),
    Column::right(9),
    Column::right(7),
    Column::right(8),
    Column::right(10),
    Column::right(7),
    Column::right(9),
    Column::right(10),
    Column::right(9),
    Column::right(10),
    Column::right(9),
    Column::right(10),
];

/// Where each function's time went: a row per function with a breakdown (nothing without).
pub fn breakdown_table(m: &impl Markup, out: &mut String, r: &Report) {
    if r.functions.iter().all(|f| f.breakdown.is_none()) {
        return;
    }
    let unit = r.meta.unit;
    let mut titles: Vec<String> = [
        "function",
        "calls",
        "unknown",
        "off-CPU",
        "interrupts",
        "on-CPU",
    ]
    .map(str::to_owned)
    .into();
    for p in ["p50", "p90", "p99"] {
        titles.push(format!("{p} wall"));
        titles.push(format!("{p} on-CPU"));
    }
    out.push_str(&m.table_header(&titles, &BREAKDOWN_COLUMNS));
    let irq_missing = r.meta.disturbance.irq_time_missing.as_deref();
    for f in &r.functions {
        let Some(b) = &f.breakdown else { continue };
        let mut cells = vec![m.code(&f.name)];
        cells.extend(breakdown_cells(b, irq_missing.is_none()));
        out.push_str(&m.table_row(&cells, &BREAKDOWN_COLUMNS));
    }
    let irq = match (irq_missing, r.meta.disturbance.irq_clock.as_deref()) {
        (Some(why), _) => {
            format!("; interrupt time was not measured ({why}): n/a, and part of on-CPU")
        }
        (None, Some(from)) => format!("; interrupt time {from}"),
        (None, None) => String::new(),
    };
    out.push_str(&m.note(&format!(
        "where the time went: share of the calls' summed wall time off the CPU (switched out: \
         asleep or preempted), in interrupts, and on the CPU (the rest); percentiles in {unit} \
         of the same calls' wall and on-CPU times; unknown: calls without a breakdown, in none \
         of these numbers{irq}"
    )));
}

/// A breakdown's cells: calls, unknown, the three shares (interrupts `n/a` when not
/// measured), then p50/p90/p99 wall and on-CPU.
fn breakdown_cells(b: &BreakdownSummary, irq_measured: bool) -> [String; 11] {
    let pct = |v: f64| format!("{v:.1}%");
    let (w, o) = (b.wall, b.on_cpu);
    [
        b.calls.to_string(),
        b.unknown.to_string(),
        pct(b.off_cpu_pct),
        if irq_measured {
            pct(b.irq_pct)
        } else {
            "n/a".to_owned()
        },
        pct(b.on_cpu_pct),
        opt(w.map(|l| l.p50_ns)),
        opt(o.map(|l| l.p50_ns)),
        opt(w.map(|l| l.p90_ns)),
        opt(o.map(|l| l.p90_ns)),
        opt(w.map(|l| l.p99_ns)),
        opt(o.map(|l| l.p99_ns)),
    ]
}

/// The slow calls table's columns: rank, then those of [`slow_cells`].
const SLOW_COLUMNS: [Column; 9] = [
    Column::left(3),
    Column::right(10),
    Column::right(10),
    Column::right(10),
    Column::right(10),
    Column::right(4),
    Column::right(8),
    Column::right(8),
    Column::left(30).after_gap(2),
];

/// One function's slowest calls (`--slowest`): what was kept and lost, a row per call shown,
/// then each one's stack; nothing for a function without slow-call settings. `heading` is
/// the format's title line for the function.
pub fn slow_section(
    m: &impl Markup,
    out: &mut String,
    f: &FunctionReport,
    unit: &str,
    heading: &str,
) {
    let Some(s) = &f.slow else { return };
    out.push_str(heading);
    let _ = writeln!(out, "{}", counts_line(s, unit));
    if s.shown == 0 {
        return;
    }
    let _ = writeln!(out);
    let titles = [
        "#".to_owned(),
        format!("wall {unit}"),
        "off-CPU".to_owned(),
        "interrupts".to_owned(),
        "on-CPU".to_owned(),
        "CPU".to_owned(),
        "pid".to_owned(),
        "tid".to_owned(),
        "arguments → return".to_owned(),
    ];
    out.push_str(&m.table_header(&titles, &SLOW_COLUMNS));
    for (i, c) in s.calls.iter().take(s.shown).enumerate() {
        let cells = [
            format!("{}", i + 1),
            c.wall_ns.to_string(),
            opt(c.off_cpu_ns),
            opt(c.irq_ns),
            opt(c.on_cpu_ns),
            c.cpu.to_string(),
            c.pid.to_string(),
            c.tid.to_string(),
            c.values_text(),
        ];
        out.push_str(&m.table_row(&cells, &SLOW_COLUMNS));
    }
    for (i, c) in s.calls.iter().take(s.shown).enumerate() {
        let _ = writeln!(out, "\n#{} stack (innermost first):\n", i + 1);
        if c.stack.is_empty() {
            let _ = writeln!(out, "    (not read)");
        }
        for frame in &c.stack {
            let _ = writeln!(out, "    {frame}");
        }
    }
}

/// `15 slow calls (wall time ≥ 1000 ns): 12 kept, … — the 5 slowest of the 12 kept below`.
fn counts_line(s: &SlowReport, unit: &str) -> String {
    let shown = match (s.shown, s.calls.len()) {
        (_, 0) => String::new(),
        (0, _) => " (--slowest 0: none shown; --format json has them all)".to_owned(),
        (n, kept) if n < kept => format!(
            "; the {n} slowest of the {} kept below (--slowest; --format json has them all)",
            kept
        ),
        (n, _) => format!("; {n} below, slowest first"),
    };
    format!("{}{shown}", s.counts_text(unit))
}
