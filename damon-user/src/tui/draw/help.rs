//! The `?` overlay: every key, from the same table the key handler uses.
use ratatui::{
    buffer::Buffer,
    layout::Rect,
    style::{Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Clear, Paragraph, Widget as _},
};

use crate::tui::{app::App, keys::BINDINGS};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let mut lines: Vec<Line<'_>> = BINDINGS
        .iter()
        .map(|(keys, what, _)| {
            Line::from(vec![
                Span::styled(
                    format!(" {keys:<12}"),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::raw(format!(
        " window N = {} s (--window); latencies are raw (they",
        app.window_secs
    )));
    lines.push(Line::raw(
        " include the probe's own cost) until c subtracts the",
    ));
    lines.push(Line::raw(" calibrated probe floor (footer says which)."));
    let width = 56.min(area.width);
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    Clear.render(popup, buf);
    Paragraph::new(lines)
        .block(Block::bordered().title(" keys — Esc or ? closes "))
        .render(popup, buf);
}
