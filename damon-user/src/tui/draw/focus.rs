//! The focused view of one function: a large histogram table, a percentiles table and, for
//! `damon_hot_score`, the distribution of the hotness scores it returned.
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::{Line, Span},
};

use super::{chart, header, window_label};

use crate::{
    stats::window::{Distribution, SCORE_VALUES, ScoreCounts},
    tui::{
        app::{App, Panel, RATE_HISTORY, Scale},
        binning, format,
    },
};

const TITLE: Style = Style::new().add_modifier(Modifier::BOLD);
/// Width of the percentiles column.
const SIDE: u16 = 30;
/// From this width on, scores get one column each under the histogram.
const WIDE_SCORES: u16 = 110;

pub fn render(app: &App, panel: &Panel, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        header(panel, 0, true, area, buf);
        return;
    }
    let intervals = u16::from(panel.shows_intervals() && area.height >= 6);
    let [top, rates, per_interval, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(intervals),
        Constraint::Fill(1),
    ])
    .areas(area);
    header(panel, 0, true, top, buf);
    rate_line(panel, rates, buf);
    super::intervals::row(panel, app.clock, per_interval, buf);
    if !panel.traced() {
        let detail = panel.status.detail.as_deref().unwrap_or("not traced");
        buf.set_stringn(
            body.x + 2,
            body.y,
            detail,
            body.width.saturating_sub(2) as usize,
            super::WARN,
        );
        return;
    }
    let dist = app.distribution(panel);
    let scores = dist.scores.filter(|_| body.height >= 12);
    let (main, strip) = match scores {
        Some(_) if body.width >= WIDE_SCORES && body.height >= 24 => {
            let [m, s] = Layout::vertical([Constraint::Fill(1), Constraint::Length(9)]).areas(body);
            (m, Some(s))
        }
        _ => (body, None),
    };
    let [table, side] = if main.width >= SIDE * 2 {
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(SIDE)]).areas(main)
    } else {
        [main, Rect::default()]
    };
    if app.heatmap {
        super::heatmap::detailed(app, panel, table, buf);
    } else {
        histogram_table(app, &dist, table, buf);
    }
    let used = percentiles(app, panel, &dist, side, buf);
    if let Some(scores) = scores {
        match strip {
            Some(strip) => score_columns(scores, strip, buf),
            None => score_decades(
                scores,
                Rect {
                    y: side.y + used,
                    height: side.height.saturating_sub(used),
                    ..side
                },
                buf,
            ),
        }
    }
}

fn rate_line(panel: &Panel, area: Rect, buf: &mut Buffer) {
    let label = format!("  calls/s, last {RATE_HISTORY} s ");
    buf.set_string(area.x, area.y, &label, chart::DIM);
    let x = label.chars().count() as u16;
    let rates: Vec<u64> = panel.rates.iter().copied().collect();
    let room = area.width.saturating_sub(x + 1) as usize;
    buf.set_string(
        area.x + x,
        area.y,
        chart::spark(&rates, room.min(RATE_HISTORY)),
        Style::new().fg(ratatui::style::Color::Magenta),
    );
}

/// One row per bucket: lower edge, bar, calls, cumulative share (the kernel patch tables).
fn histogram_table(app: &App, dist: &Distribution<'_>, area: Rect, buf: &mut Buffer) {
    if area.height < 2 {
        return;
    }
    // Rows for calls outside the buckets are reserved when the mode can have them.
    let room = |scale| {
        let reserve = match (scale, app.zoom) {
            (Scale::Log2, false) => 0,
            (_, true) => 2,
            (Scale::Linear, false) if app.scale.is_none() => 2,
            (Scale::Linear, false) => 1,
        };
        area.height.saturating_sub(1 + reserve).max(1) as usize
    };
    let binned = binning::choose(dist, app.scale, app.zoom, app.bucket_ns, room);
    // The title is short on a serial console: "5.00µs bins" says linear by itself.
    let buckets = binned.as_ref().map_or_else(
        || "no bins".to_owned(),
        |b| b.label(app.clock).replacen("linear ", "", 1),
    );
    let zoom = if app.zoom { "zoom 99% · " } else { "" };
    let title = format!(
        "  latency: {} calls · {zoom}{buckets}",
        format::count(dist.count)
    );
    buf.set_stringn(area.x, area.y, &title, area.width as usize, TITLE);
    let Some(binned) = binned else {
        buf.set_string(area.x + 2, area.y + 1, "no calls", chart::DIM);
        return;
    };
    let bins = &binned.bins;
    let max = bins.max_count().max(1);
    let total = dist.count.max(1);
    let label_width = format::duration_width(app.clock) + 1;
    let bar_width = area
        .width
        .saturating_sub(2 + label_width as u16 + 1 + 9 + 8);
    let mut y = area.y + 1;
    let mut cumulative = bins.below;
    let mut row = |label: String, count: u64, cumulative: u64, style: Style| {
        if y >= area.bottom() {
            return;
        }
        let line = Line::from(vec![
            Span::styled(format!("  {label:>label_width$} "), chart::DIM),
            Span::styled(chart::hbar(count, max, bar_width), style),
            Span::raw(format!("{:>9}", format::count(count))),
            Span::styled(
                format!("{:>7.1}%", cumulative as f64 * 100.0 / total as f64),
                chart::DIM,
            ),
        ]);
        buf.set_line(area.x, y, &line, area.width);
        y += 1;
    };
    if let Some(first) = bins.bins.first()
        && bins.below > 0
    {
        row(
            format!("<{}", format::duration(app.clock, first.lo)),
            bins.below,
            cumulative,
            chart::OUTSIDE,
        );
    }
    for bin in &bins.bins {
        cumulative += bin.count;
        row(
            format::duration(app.clock, bin.lo),
            bin.count,
            cumulative,
            chart::BAR,
        );
    }
    if let Some(last) = bins.bins.last()
        && bins.above > 0
    {
        row(
            format!("≥{}", format::duration(app.clock, last.hi)),
            bins.above,
            cumulative + bins.above,
            chart::OUTSIDE,
        );
    }
}

/// The percentiles table; returns the rows it used.
fn percentiles(
    app: &App,
    panel: &Panel,
    dist: &Distribution<'_>,
    area: Rect,
    buf: &mut Buffer,
) -> u16 {
    if area.width == 0 || area.height == 0 {
        return 0;
    }
    // Raw is the default the footer states; corrected is named where it is shown.
    let what = if app.corrected && panel.floor.is_some() {
        " (corrected)"
    } else {
        ""
    };
    let mut rows = vec![(
        format!("percentiles{what}, {}", window_label(app)),
        String::new(),
    )];
    rows.push(("calls".to_owned(), format::count(dist.count)));
    if let (Some(min), Some(max), Some(mean), Some(p)) = (
        dist.min,
        dist.max,
        dist.mean(),
        dist.percentiles(&[50.0, 90.0, 99.0, 99.9]),
    ) {
        rows.push(("min".to_owned(), super::shown(app, panel, min)));
        rows.push((
            "mean".to_owned(),
            super::shown(app, panel, mean.round() as u64),
        ));
        for (label, v) in ["p50", "p90", "p99", "p99.9"].into_iter().zip(p) {
            rows.push((label.to_owned(), super::shown(app, panel, v)));
        }
        rows.push(("max".to_owned(), super::shown(app, panel, max)));
        if let (true, Some((median, u))) = (app.corrected, panel.floor) {
            rows.push((
                "floor".to_owned(),
                format!(
                    "{}±{}",
                    format::duration(app.clock, median.round() as u64),
                    format::duration(app.clock, u.round() as u64)
                ),
            ));
        }
    }
    let width = area.width.saturating_sub(2) as usize;
    let mut used = 0;
    for (i, (label, value)) in rows.into_iter().enumerate() {
        if used >= area.height {
            break;
        }
        let y = area.y + used;
        if i == 0 {
            buf.set_stringn(area.x + 1, y, &label, width, TITLE);
        } else {
            let text = format!("{label:<8}{value:>w$}", w = width.saturating_sub(8));
            buf.set_stringn(area.x + 1, y, &text, width, Style::new());
        }
        used += 1;
    }
    used
}

/// Scores per decade (0–9, 10–19, …, 90–99), for narrow screens.
fn score_decades(scores: &ScoreCounts, area: Rect, buf: &mut Buffer) {
    if area.height < 2 || area.width < 20 {
        return;
    }
    buf.set_stringn(
        area.x + 1,
        area.y,
        format!("hotness scores ({} calls)", format::count(scores.total())),
        area.width as usize,
        TITLE,
    );
    let decades: Vec<u64> = scores.counts.chunks(10).map(|c| c.iter().sum()).collect();
    let max = decades.iter().copied().max().unwrap_or(0).max(1);
    let bar = area.width.saturating_sub(1 + 6 + 8);
    for (i, &n) in decades.iter().enumerate() {
        let y = area.y + 1 + i as u16;
        if y >= area.bottom() {
            break;
        }
        let line = Line::from(vec![
            Span::styled(format!(" {:>2}–{:<2} ", i * 10, i * 10 + 9), chart::DIM),
            Span::styled(chart::hbar(n, max, bar), chart::BAR),
            Span::raw(format!("{:>8}", format::count(n))),
        ]);
        buf.set_line(area.x, y, &line, area.width);
    }
    let y = area.y + 11;
    if scores.other > 0 && y < area.bottom() {
        let text = format!(" {} outside 0–99", format::count(scores.other));
        buf.set_string(area.x, y, text, chart::OUTSIDE);
    }
}

/// One column per score 0..=99, for wide screens.
fn score_columns(scores: &ScoreCounts, area: Rect, buf: &mut Buffer) {
    let mut title = "  hotness scores returned (0–99)".to_owned();
    if scores.other > 0 {
        title.push_str(&format!(" · {} outside 0–99", format::count(scores.other)));
    }
    buf.set_stringn(area.x, area.y, &title, area.width as usize, TITLE);
    let bins = crate::stats::histogram::Bins {
        bins: scores
            .counts
            .iter()
            .enumerate()
            .map(|(i, &count)| crate::stats::histogram::Bin {
                lo: i as u64,
                hi: i as u64 + 1,
                count,
            })
            .collect(),
        below: 0,
        above: 0,
    };
    let chart_area = Rect {
        x: area.x + 2,
        y: area.y + 1,
        width: (SCORE_VALUES as u16).min(area.width.saturating_sub(2)),
        height: area.height.saturating_sub(2),
    };
    chart::columns(&bins, chart_area, buf);
    let axis_y = chart_area.bottom();
    for score in [0u16, 10, 20, 30, 40, 50, 60, 70, 80, 90, 99] {
        let x = chart_area.x + score;
        if x < area.right() && axis_y < area.bottom() {
            buf.set_string(x, axis_y, score.to_string(), chart::DIM);
        }
    }
}
