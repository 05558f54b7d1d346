//! The slow-call view (`x`): the selected function's kept slow calls, one line each with its
//! time breakdown, task and arguments, and the selected call's kernel stack below.
use damon_common::{CallRecord, FunctionId};
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Clear, Paragraph, Widget as _, Wrap},
};

use super::{WARN, chart};
use crate::tui::{
    app::App,
    format,
    slow::{SlowList, SlowOrder, SlowView},
};

const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);

pub fn render(app: &App, view: SlowView, area: Rect, buf: &mut Buffer) {
    Clear.render(area, buf);
    let name = app
        .panels()
        .iter()
        .find(|p| p.status.id == view.func)
        .map_or_else(
            || format!("function {}", view.func),
            |p| p.status.name.clone(),
        );
    let order = match view.order {
        SlowOrder::Slowest => "slowest first",
        SlowOrder::Newest => "newest first",
    };
    let block = Block::bordered().title(format!(
        " slow calls of {name}, {order} · ↑↓ select · o order · x close "
    ));
    let inner = block.inner(area);
    block.render(area, buf);
    let list = app.slow_calls().of(view.func).filter(|l| !l.is_empty());
    let [counts, body] =
        Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(inner);
    buf.set_line(
        counts.x,
        counts.y,
        &counts_line(app, view.func, list),
        counts.width,
    );
    let Some(list) = list else {
        Paragraph::new(empty_text(app))
            .wrap(Wrap { trim: false })
            .render(body, buf);
        return;
    };
    let calls = list.ordered(view.order);
    let selected = view.selected.min(calls.len() - 1);
    let rows = (calls.len() as u16 + 1).min(body.height / 2).max(2);
    let [table, stack] =
        Layout::vertical([Constraint::Length(rows), Constraint::Fill(1)]).areas(body);
    buf.set_line(
        table.x,
        table.y,
        &Line::styled(columns(app), chart::DIM),
        table.width,
    );
    let shown = table.height.saturating_sub(1) as usize;
    // Scroll so that the selected call is on screen.
    let first = selected.saturating_sub(shown.saturating_sub(1));
    for (row, (i, c)) in calls.iter().enumerate().skip(first).take(shown).enumerate() {
        let style = if i == selected {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new()
        };
        let marker = if i == selected { "▶" } else { " " };
        let line = Line::styled(format!("{marker}{}", call_line(app, &c.call)), style);
        buf.set_line(table.x, table.y + 1 + row as u16, &line, table.width);
    }
    let chosen = calls[selected];
    let mut lines = vec![Line::styled(
        format!(
            " stack of call {} of {} (innermost first):",
            selected + 1,
            calls.len()
        ),
        BOLD,
    )];
    if chosen.stack.is_empty() {
        lines.push(Line::styled("   (no stack was kept)", chart::DIM));
    }
    lines.extend(chosen.stack.iter().map(|f| Line::raw(format!("   {f}"))));
    Paragraph::new(lines).render(stack, buf);
}

/// The threshold, how many arrived (and how many the screen keeps), and what the recorder
/// kept and lost where known.
fn counts_line(app: &App, func: u32, list: Option<&SlowList>) -> Line<'static> {
    let mut spans = Vec::new();
    if let Some(s) = app.slow_calls().settings {
        spans.push(Span::raw(format!(
            " ≥ {} (--slow) ·",
            format::duration(app.clock, s.threshold_ns)
        )));
    } else if list.is_none() {
        return Line::default();
    }
    let arrived = list.map_or(0, |l| l.arrived);
    spans.push(Span::raw(format!(" {} arrived", format::count(arrived))));
    if let Some(l) = list.filter(|l| l.not_kept() > 0) {
        spans.push(Span::raw(format!(
            ", the {} slowest kept on screen",
            format::count(l.len() as u64)
        )));
    }
    if let Some(c) = app.slow_calls().counters_of(func) {
        let lost = c.total() - c.kept;
        spans.push(Span::raw(format!(
            " · recorded {}, ",
            format::count(c.kept)
        )));
        spans.push(Span::styled(
            format!(
                "lost {} (ring full {}, over limit {})",
                format::count(lost),
                format::count(c.ring_full),
                format::count(c.over_limit)
            ),
            if lost > 0 { WARN } else { Style::new() },
        ));
    }
    if app.slow_calls().foreign > 0 {
        spans.push(Span::styled(
            format!(" · {} of other functions", app.slow_calls().foreign),
            WARN,
        ));
    }
    Line::from(spans)
}

/// Why the list is empty, and how to fill it.
fn empty_text(app: &App) -> Vec<Line<'static>> {
    let lines = match app.slow_calls().settings {
        None => vec![
            " No slow calls are kept in this session.".to_owned(),
            String::new(),
            " Keep them with --slow DURATION: each call at least that slow is kept with its kernel"
                .to_owned(),
            " stack, arguments, CPU, task and (with --disturbance) its time off the CPU and in"
                .to_owned(),
            " interrupts, e.g.".to_owned(),
            "   sudo damon-trace live --slow 1ms --disturbance".to_owned(),
            "   sudo damon-trace record -o run.dtcap --slow 1ms --disturbance".to_owned(),
            "   damon-trace live --replay run.dtcap".to_owned(),
        ],
        Some(s) => vec![format!(
            " No call of this function has taken {} or more (--slow) so far.",
            format::duration(app.clock, s.threshold_ns)
        )],
    };
    lines.into_iter().map(Line::raw).collect()
}

/// The table's column heads, aligned with [`call_line`].
fn columns(app: &App) -> String {
    let w = format::duration_width(app.clock).max(8);
    format!(
        " {:>w$} {:>w$} {:>w$} {:>w$} {:>4} {:>15}  arguments → value",
        "wall", "off-CPU", "irq", "on-CPU", "cpu", "pid/tid"
    )
}

fn call_line(app: &App, c: &CallRecord) -> String {
    let w = format::duration_width(app.clock).max(8);
    let d = |v: u64| format::duration(app.clock, v);
    let (off, irq, on) = match c.breakdown().filter(|_| app.slow_calls().breakdown) {
        Some(b) => (d(b.off_cpu_ns), d(b.irq_ns), d(b.on_cpu_ns)),
        None => ("-".to_owned(), "-".to_owned(), "-".to_owned()),
    };
    format!(
        "{:>w$} {off:>w$} {irq:>w$} {on:>w$} {:>4} {:>15}  {}",
        d(c.duration_ns),
        c.cpu,
        format!("{}/{}", c.pid, c.tid),
        arguments(c)
    )
}

/// `nr_accesses=3 age=7 → 42`: the arguments the function's slot reads, and its return value
/// where it is a number.
fn arguments(c: &CallRecord) -> String {
    let Ok(f) = FunctionId::try_from(c.func) else {
        return "-".to_owned();
    };
    let [a, b] = f.arg_names();
    let mut parts: Vec<String> = [(a, c.arg0), (b, c.arg1)]
        .into_iter()
        .filter(|(n, _)| !n.is_empty())
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    if f.has_value() {
        parts.push(format!("→ {}", c.value));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(" ")
    }
}
