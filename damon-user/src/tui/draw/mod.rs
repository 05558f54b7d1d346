//! Drawing: a pure function of the [`App`] state (no I/O, no locks, no clock).
mod chart;
mod focus;
mod heatmap;
mod help;
mod intervals;
mod panels;
mod slow;

use ratatui::{
    Frame,
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
};

use crate::tui::{
    app::{App, Origin, Panel, Scale},
    format,
};

const STATUS: Style = Style::new().bg(Color::DarkGray).fg(Color::White);
const ALERT: Style = Style::new()
    .fg(Color::White)
    .bg(Color::Red)
    .add_modifier(Modifier::BOLD);
const WARN: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);

/// Percentiles each panel shows besides min and max.
pub const PANEL_PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let area = frame.area();
    let buf = frame.buffer_mut();
    let [status, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    status_line(app, status, buf);
    match (app.slow_view, app.panels().get(app.selected)) {
        (Some(view), _) => slow::render(app, view, body, buf),
        (None, Some(panel)) if app.focused => focus::render(app, panel, body, buf),
        _ => panels::render(app, body, buf),
    }
    footer_line(app, footer, buf);
    if app.help {
        help::render(app, area, buf);
    }
}

/// Kernel, clock, throughput, drops, recording: what is true of the whole session. The
/// recording state is kept whole at the right; the rest gives way on narrow screens.
fn status_line(app: &App, area: Rect, buf: &mut Buffer) {
    buf.set_style(area, STATUS);
    let origin = match &app.origin {
        Origin::Live => " LIVE".to_owned(),
        Origin::Replay { speed, .. } if *speed == 0.0 => " REPLAY max".to_owned(),
        Origin::Replay { speed, .. } => format!(" REPLAY ×{speed}"),
    };
    let origin = Span::styled(
        origin,
        Style::new()
            .bg(Color::Blue)
            .fg(Color::White)
            .add_modifier(Modifier::BOLD),
    );
    let dropped = app.total_dropped();
    // Kernel mode says so, and counts calls bucketed in the kernel instead of records.
    let throughput = match app.kernel_width_ns {
        Some(w) => format!(
            "KERNEL {}  {} calls/s",
            format::duration(app.clock, w),
            format::count(app.records_per_sec)
        ),
        None => format!("{} rec/s", format::count(app.records_per_sec)),
    };
    // The time basis, named when it is not the calls' whole (wall) time.
    let basis = match app.time {
        crate::cli::TimeBasis::Wall => Span::raw(""),
        on_cpu => Span::styled(
            format!(" {}", on_cpu.label()),
            Style::new().add_modifier(Modifier::BOLD),
        ),
    };
    let left_line = |kernel: &str| {
        Line::from(vec![
            origin.clone(),
            basis.clone(),
            Span::raw(format!(
                " {kernel}{}  {throughput}  ",
                format::clock(app.elapsed),
            )),
            Span::styled(
                format!("{} dropped", format::count(dropped)),
                if dropped > 0 { ALERT } else { Style::new() },
            ),
        ])
    };
    let (text, style) = match (&app.recording, &app.origin) {
        (Some(path), _) => (
            format!("● REC {path}"),
            Style::new()
                .fg(Color::LightRed)
                .add_modifier(Modifier::BOLD),
        ),
        (None, Origin::Replay { file, .. }) => (file.clone(), Style::new()),
        (None, Origin::Live) => ("not recording".to_owned(), Style::new()),
    };
    // The recording state gets what the rest leaves, and never less than a readable tail;
    // the drop count is never cut: the kernel release gives way first.
    let min_right = (text.chars().count() as u16).min(24) + 2;
    let mut left = left_line(&format!("{}  ", app.kernel_release));
    if left.width() as u16 + min_right > area.width {
        left = left_line("");
    }
    let left_len = left.width() as u16;
    let room = area
        .width
        .saturating_sub(left_len + 2)
        .max((text.chars().count() as u16).min(24)) as usize;
    let right = format!(" {}", tail(&text, room));
    let right_len = right.chars().count() as u16;
    buf.set_line(area.x, area.y, &left, area.width.saturating_sub(right_len));
    let x = area.x + area.width.saturating_sub(right_len);
    buf.set_stringn(x, area.y, &right, area.width as usize, STATUS.patch(style));
}

/// The end of `s` in at most `max` characters, with `…` where it was cut.
fn tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let keep = max.saturating_sub(1);
    std::iter::once('…')
        .chain(s.chars().skip(n - keep))
        .collect()
}

/// Display modes on the left, the latest message (or the key hint) on the right.
fn footer_line(app: &App, area: Rect, buf: &mut Buffer) {
    buf.set_style(area, STATUS);
    let mut modes = vec![Span::raw(format!(" {}", window_label(app)))];
    if app.heatmap {
        modes.push(Span::raw(" · heatmap"));
    }
    modes.push(Span::raw(format!(" · {}", scale_label(app))));
    if let Some(w) = app.kernel_width_ns {
        // Percentiles are the tops of the kernel's buckets: this much too high at most
        // (linear buckets; log2 ones above 512 of them).
        modes.push(Span::raw(format!(
            " · pct to {} buckets",
            format::duration(app.clock, w)
        )));
    }
    if app.frozen() {
        modes.push(Span::raw(" · "));
        modes.push(Span::styled("FROZEN", WARN.bg(Color::DarkGray)));
    }
    if app.ended {
        modes.push(Span::raw(" · replay ended"));
    }
    if app.foreign_records > 0 {
        modes.push(Span::styled(
            format!(" · {} records of other functions", app.foreign_records),
            WARN.bg(Color::DarkGray),
        ));
    }
    modes.push(Span::raw(latency_label(app)));
    let modes = Line::from(modes);
    // A message always shows; the key hint only where it does not hide a mode.
    let right = match &app.message {
        Some(m) => format!(" {m} "),
        None if modes.width() + 16 <= area.width as usize => " ? help  q quit ".to_owned(),
        None => String::new(),
    };
    let right_len = right.chars().count() as u16;
    buf.set_line(area.x, area.y, &modes, area.width.saturating_sub(right_len));
    let x = area.x + area.width.saturating_sub(right_len);
    buf.set_stringn(
        x,
        area.y,
        &right,
        area.width as usize,
        STATUS.add_modifier(Modifier::BOLD),
    );
}

/// Which latencies the percentiles show.
fn latency_label(app: &App) -> &'static str {
    if app.corrected {
        " · corrected: − probe floor"
    } else {
        " · raw: incl. probe cost"
    }
}

/// A percentile as shown: raw, or minus the panel's floor when corrected values are on.
pub fn shown(app: &App, panel: &Panel, raw: u64) -> String {
    match panel.floor {
        Some((median, _)) if app.corrected => {
            format::signed_duration(app.clock, raw as f64 - median)
        }
        _ => format::duration(app.clock, raw),
    }
}

pub fn window_label(app: &App) -> String {
    match (app.windowed, app.reset_at) {
        (true, _) => format!("last {} s", app.window_secs),
        (false, Some(at)) => format!("since reset at {}", format::clock(at)),
        (false, None) => "since start".to_owned(),
    }
}

pub fn scale_label(app: &App) -> String {
    let mut s = match app.scale {
        None => "bins auto".to_owned(),
        Some(Scale::Linear) if app.zoom => "linear".to_owned(),
        Some(Scale::Linear) => format!("linear {}", format::duration(app.clock, app.bucket_ns)),
        Some(Scale::Log2) => "log2".to_owned(),
    };
    if app.zoom {
        s.push_str(" · zoom 99%");
    }
    s
}

/// Names are padded to line up the columns of stacked panels when the screen is wide enough.
fn name_width(app: &App, width: u16) -> usize {
    let longest = app.panels().iter().map(|p| p.status.name.len()).max();
    match longest {
        Some(n) if width >= 80 => n,
        _ => 0,
    }
}

/// The first line of a panel: name, attach mode, calls, calls/s and its sparkline, drops.
fn header(panel: &Panel, name_width: usize, selected: bool, area: Rect, buf: &mut Buffer) {
    let name_style = if selected {
        Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    };
    let marker = if selected { "▶ " } else { "  " };
    let mut left = vec![
        Span::styled(marker, name_style),
        Span::styled(panel.status.name.clone(), name_style),
        Span::raw(" ".repeat(name_width.saturating_sub(panel.status.name.len()) + 1)),
    ];
    if !panel.traced() {
        left.push(Span::styled(panel.status.attach.as_str(), WARN));
        buf.set_line(area.x, area.y, &Line::from(left), area.width);
        return;
    }
    left.push(Span::styled(
        format!("{:<6}", panel.status.attach.as_str()),
        Style::new().fg(Color::Green),
    ));
    left.push(Span::raw(format!(
        " {:>7} calls {:>6}/s ",
        format::count(panel.calls()),
        panel
            .calls_per_sec()
            .map_or_else(|| "-".to_owned(), format::count)
    )));
    // Where the records say it: the share of calls nothing took the CPU from.
    if let Some(share) = panel.clean_share() {
        left.push(Span::raw(format!("clean {:>5.1}% ", 100.0 * share)));
    }
    let dropped = panel.dropped();
    let skipped = panel.kernel_skipped();
    let style = if dropped > 0 { ALERT } else { Style::new() };
    let plain = Span::styled(format!(" dropped {}", format::count(dropped)), style);
    // Of the drops, the calls whose probe run the kernel skipped, where the line has room.
    let with_skips = (skipped > 0).then(|| {
        Span::styled(
            format!(
                " dropped {} (skip {})",
                format::count(dropped),
                format::count(skipped)
            ),
            style,
        )
    });
    let left = Line::from(left);
    let lw = left.width() as u16;
    let right = match with_skips {
        Some(s) if lw + s.width() as u16 <= area.width => s,
        _ => plain,
    };
    let rw = right.width() as u16;
    buf.set_line(area.x, area.y, &left, area.width);
    let room = area.width.saturating_sub(lw + rw) as usize;
    let rates: Vec<u64> = panel.rates.iter().copied().collect();
    buf.set_string(
        area.x + lw,
        area.y,
        chart::spark(&rates, room.min(crate::tui::app::RATE_HISTORY)),
        Style::new().fg(Color::Magenta),
    );
    if lw + rw <= area.width {
        buf.set_span(area.x + area.width - rw, area.y, &right, rw);
    }
}

/// "min 661ns  p50 1.05µs  …  max 1.68ms", or why there is nothing to show.
fn percentile_line(app: &App, panel: &Panel) -> Line<'static> {
    let dist = app.distribution(panel);
    let (Some(min), Some(max), Some(p)) =
        (dist.min, dist.max, dist.percentiles(&PANEL_PERCENTILES))
    else {
        let why = if app.windowed {
            format!("no calls in the last {} s", app.window_secs)
        } else {
            "no calls yet".to_owned()
        };
        return Line::styled(format!("  {why}{}", set_aside(panel)), chart::DIM);
    };
    let item = |label: &'static str, v: u64| {
        [
            Span::styled(format!("  {label} "), chart::DIM),
            Span::raw(shown(app, panel, v)),
        ]
    };
    let mut spans = Vec::new();
    spans.extend(item("min", min));
    for (label, v) in ["p50", "p90", "p99", "p99.9"].into_iter().zip(p) {
        spans.extend(item(label, v));
    }
    spans.extend(item("max", max));
    if let (true, Some((_, u))) = (app.corrected, panel.floor) {
        spans.push(Span::styled(
            format!("  ±{}", format::duration(app.clock, u.round() as u64)),
            chart::DIM,
        ));
    }
    let aside = set_aside(panel);
    if !aside.is_empty() {
        spans.push(Span::styled(aside, WARN));
    }
    Line::from(spans)
}

/// `--time on-cpu`: the calls left out because their breakdown is not known, if any.
fn set_aside(panel: &Panel) -> String {
    match panel.set_aside {
        0 => String::new(),
        n => format!("  {} set aside (no breakdown)", format::count(n)),
    }
}

#[cfg(test)]
mod clock_tests;
#[cfg(test)]
mod first_view_tests;
#[cfg(test)]
mod heatmap_snapshot_tests;
#[cfg(test)]
mod interval_snapshot_tests;
#[cfg(test)]
mod kernel_snapshot_tests;
#[cfg(test)]
mod slow_snapshot_tests;
#[cfg(test)]
mod snapshot_tests;
