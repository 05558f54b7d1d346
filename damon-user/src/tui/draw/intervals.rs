//! The per-aggregation-interval line of a DAMON function's panel: how much time the function
//! took per interval, and a sparkline of the last intervals.
use ratatui::{buffer::Buffer, layout::Rect, style::Style};

use super::chart;
use crate::{
    capture::Clock,
    stats::interval_tracker::INTERVAL_HISTORY,
    tui::{app::Panel, format},
};

/// `per interval (129): mean 34.7µs · last 30.1µs in 12 calls · max 310µs`
pub fn summary(panel: &Panel, clock: Clock) -> String {
    let t = &panel.intervals;
    let mean = t
        .mean_ns()
        .map_or_else(|| "-".to_owned(), |m| format::duration(clock, m as u64));
    let last = t.last.map_or_else(String::new, |(calls, ns)| {
        format!(" · last {} in {calls} calls", format::duration(clock, ns))
    });
    format!(
        "per interval ({}): mean {mean}{last} · max {}",
        format::count(t.intervals),
        format::duration(clock, t.max_ns)
    )
}

/// One row: the summary, then as much of the sparkline as fits.
pub fn row(panel: &Panel, clock: Clock, area: Rect, buf: &mut Buffer) {
    if area.height == 0 || area.width < 4 {
        return;
    }
    let text = format!("  {} ", summary(panel, clock));
    buf.set_stringn(area.x, area.y, &text, area.width as usize, chart::DIM);
    let used = text.chars().count() as u16;
    let room = area.width.saturating_sub(used + 1) as usize;
    if room >= 8 {
        let history: Vec<u64> = panel.intervals.history.iter().copied().collect();
        buf.set_string(
            area.x + used,
            area.y,
            chart::spark(&history, room.min(INTERVAL_HISTORY)),
            Style::new().fg(ratatui::style::Color::Cyan),
        );
    }
}
