//! The main view: one panel per function, stacked, each with a column histogram (or, with
//! `h`, its heatmap).
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    text::Text,
    widgets::{Paragraph, Widget as _, Wrap},
};

use super::{WARN, chart, header, percentile_line};
use crate::tui::{
    app::{App, Panel, Scale},
    binning,
};

/// Header, percentiles, one row of bars and the axis.
const MIN_PANEL_ROWS: u16 = 4;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let panels = app.panels();
    if panels.is_empty() || area.height == 0 {
        return;
    }
    // Untraced functions need only their reason; traced ones share the rest. When not every
    // panel fits, show a run of them that includes the selected one.
    let wanted = |p: &Panel| if p.traced() { MIN_PANEL_ROWS } else { 2 };
    let name_width = super::name_width(app, area.width);
    let total: u16 = panels.iter().map(wanted).sum();
    let (first, shown) = if total <= area.height {
        (0, panels.len())
    } else {
        let shown = ((area.height / MIN_PANEL_ROWS).max(1) as usize).min(panels.len());
        let first = app
            .selected
            .saturating_sub(shown - 1)
            .min(panels.len() - shown);
        (first, shown)
    };
    let visible = &panels[first..first + shown];
    let constraints = visible.iter().map(|p| {
        if p.traced() || total > area.height {
            Constraint::Fill(1)
        } else {
            Constraint::Length(2)
        }
    });
    let rows = Layout::vertical(constraints).split(area);
    for (i, rect) in rows.iter().enumerate() {
        let index = first + i;
        panel(
            app,
            &panels[index],
            name_width,
            index == app.selected,
            *rect,
            buf,
        );
    }
}

fn panel(
    app: &App,
    panel: &Panel,
    name_width: usize,
    selected: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.height == 0 {
        return;
    }
    header(panel, name_width, selected, area, buf);
    let rest = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    if rest.height == 0 {
        return;
    }
    if !panel.traced() {
        let detail = panel
            .status
            .detail
            .clone()
            .unwrap_or_else(|| "not traced".to_owned());
        Paragraph::new(Text::styled(detail, WARN))
            .wrap(Wrap { trim: true })
            .render(
                Rect {
                    x: rest.x + 4,
                    width: rest.width.saturating_sub(4),
                    ..rest
                },
                buf,
            );
        return;
    }
    buf.set_line(rest.x, rest.y, &percentile_line(app, panel), rest.width);
    if rest.height < MIN_PANEL_ROWS - 1 {
        return;
    }
    // Time per DAMON aggregation interval, when there is room for it and a row of bars.
    let rest = if panel.shows_intervals() && rest.height >= MIN_PANEL_ROWS {
        super::intervals::row(
            panel,
            app.clock,
            Rect {
                y: rest.y + 1,
                height: 1,
                ..rest
            },
            buf,
        );
        Rect {
            y: rest.y + 1,
            height: rest.height - 1,
            ..rest
        }
    } else {
        rest
    };
    let chart_area = Rect {
        x: rest.x + 2,
        y: rest.y + 1,
        width: rest.width.saturating_sub(2),
        height: rest.height - 1,
    };
    if app.heatmap {
        return super::heatmap::compact(app, panel, chart_area, buf);
    }
    let [bars, axis] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(chart_area);
    let dist = app.distribution(panel);
    let room = |scale| match scale {
        Scale::Linear => bars.width as usize,
        // Octaves are few: give each a few columns so the axis can be labelled.
        Scale::Log2 => (bars.width / 4).max(1) as usize,
    };
    if let Some(binned) = binning::choose(&dist, app.scale, app.zoom, app.bucket_ns, room) {
        chart::columns(&binned.bins, bars, buf);
        chart::axis(&binned, app.clock, axis, buf);
    }
}
