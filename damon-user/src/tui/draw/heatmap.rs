//! The heatmap (`h`): latency over time, one screen column per second, latency rows up, each
//! cell shaded by its count of calls. Readable in 16 colours and without any: the shade is
//! also a glyph (`░▒▓█`). Aggregation intervals that ended in a second are ticked (`╵`) under
//! its column.
use ratatui::{
    buffer::Buffer,
    layout::Rect,
    style::{Color, Style},
};

use super::chart::{DIM, OUTSIDE};
use crate::{
    stats::heatmap::{Column, Heatmap, linear_edges, log_edges},
    tui::{
        app::{App, HEAT_COLUMN_NS, Panel, Scale},
        binning::{self, ZOOM_PERCENTILES},
        format,
    },
};

/// Shades from the fewest calls to the most.
const SHADES: [(char, Color); 4] = [
    ('░', Color::Blue),
    ('▒', Color::Cyan),
    ('▓', Color::Yellow),
    ('█', Color::Red),
];
const TITLE: Style = Style::new().add_modifier(ratatui::style::Modifier::BOLD);
/// Under a column in which an aggregation interval ended.
const MARK: char = '╵';

/// The cells of the newest seconds that fit, cut into latency rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    /// Row edges, lowest first: row `k` holds `[edges[k], edges[k+1])`.
    pub edges: Vec<u64>,
    /// Oldest column first; per column its counts per row (lowest row first) and marks.
    pub columns: Vec<(Vec<u64>, u32)>,
    pub below: u64,
    pub above: u64,
    /// The smallest count of each shade: `thresholds[k]` and up are drawn with `SHADES[k]`.
    pub thresholds: [u64; 4],
    pub log: bool,
    /// Screen cells per column: up to [`MAX_CELL_WIDTH`] while few seconds fill the width.
    pub cell_width: u16,
}

/// The widest a second's column is drawn while the session is young.
const MAX_CELL_WIDTH: u16 = 4;

/// The grid of `panel`'s newest seconds that fit `width` cells, in `rows` rows, with the
/// screen's scale and zoom; `None` before the first call.
pub fn grid(app: &App, panel: &Panel, width: u16, rows: usize) -> Option<Grid> {
    let heat = &panel.heat;
    let kept = heat.columns().count().max(1) as u16;
    let cell_width = (width / kept.min(width.max(1))).clamp(1, MAX_CELL_WIDTH);
    let width = (width / cell_width) as usize;
    let dist = app.distribution(panel);
    let (lo, hi) = if app.zoom {
        let p = dist.percentiles(&ZOOM_PERCENTILES)?;
        (p[0], p[1])
    } else {
        heat.range(width)?
    };
    let scale = app.scale.or_else(|| binning::auto_scale(&dist));
    let log = scale != Some(Scale::Linear);
    let edges = if log {
        log_edges(lo, hi, rows)
    } else {
        let min_width = if app.scale.is_some() {
            app.bucket_ns
        } else {
            1
        };
        linear_edges(lo, hi, rows, min_width)
    };
    let (mut below, mut above, mut max) = (0, 0, 0);
    let columns: Vec<(Vec<u64>, u32)> = newest(heat, width)
        .map(|c| {
            let r = c.rows(&edges);
            below += r.below;
            above += r.above;
            max = r.counts.iter().copied().fold(max, u64::max);
            (r.counts, c.marks)
        })
        .collect();
    Some(Grid {
        edges,
        columns,
        below,
        above,
        thresholds: thresholds(max),
        log,
        cell_width,
    })
}

/// The newest `n` columns, oldest first.
fn newest(heat: &Heatmap, n: usize) -> impl Iterator<Item = &Column> {
    let kept = heat.columns().count();
    heat.columns().skip(kept.saturating_sub(n)).map(|(_, c)| c)
}

/// The shades' lower bounds on a log scale of counts up to `max`: 1, max^¼, max^½, max^¾.
pub fn thresholds(max: u64) -> [u64; 4] {
    let max = max.max(1) as f64;
    let mut t = [1; 4];
    for (k, v) in t.iter_mut().enumerate().skip(1) {
        *v = (max.powf(k as f64 / 4.0).ceil() as u64).max(1);
    }
    // Equal bounds (few calls) keep only the highest shade of them.
    t
}

fn shade(count: u64, thresholds: &[u64; 4]) -> Option<(char, Color)> {
    (count > 0).then(|| SHADES[thresholds.iter().rposition(|&t| count >= t).unwrap_or(0)])
}

/// "░1 ▒4 ▓13 █42": each shade with the fewest calls a cell of it holds.
pub fn legend(g: &Grid) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (k, &(c, _)) in SHADES.iter().enumerate() {
        // A shade no count reaches (thresholds equal to the next one's) is left out.
        if k + 1 < SHADES.len() && g.thresholds[k] == g.thresholds[k + 1] {
            continue;
        }
        parts.push(format!("{c}{}", format::count(g.thresholds[k])));
    }
    parts.join(" ")
}

/// The cells, right-aligned (the newest second at the right edge), highest latency on top.
fn cells(g: &Grid, area: Rect, buf: &mut Buffer) {
    let rows = g.edges.len() - 1;
    for (i, (counts, _)) in g.columns.iter().enumerate() {
        let Some(x) = column_x(g, area, i) else {
            continue;
        };
        for (k, &n) in counts.iter().enumerate() {
            let Some(y) = (area.bottom() as usize).checked_sub(k + 1) else {
                break;
            };
            if y < area.y as usize || k >= rows {
                break;
            }
            let Some((c, color)) = shade(n, &g.thresholds) else {
                continue;
            };
            for dx in 0..g.cell_width {
                if let Some(cell) = buf.cell_mut((x + dx, y as u16)) {
                    cell.set_char(c).set_style(Style::new().fg(color));
                }
            }
        }
    }
}

/// The tick row: `╵` under each column in which an aggregation interval ended.
fn marks(g: &Grid, area: Rect, buf: &mut Buffer) {
    for (i, &(_, m)) in g.columns.iter().enumerate() {
        if let (true, Some(x)) = (m > 0, column_x(g, area, i)) {
            buf.set_string(x, area.y, MARK.to_string(), DIM);
        }
    }
}

/// Where column `i` starts: the columns are right-aligned, the newest at the right edge.
fn column_x(g: &Grid, area: Rect, i: usize) -> Option<u16> {
    let from_right = (g.columns.len() - i) as u16 * g.cell_width;
    area.right()
        .checked_sub(from_right)
        .filter(|&x| x >= area.x)
}

/// "120ns–4.10µs log2 rows · 2 above": the latency range and what fell outside it.
fn range_label(app: &App, g: &Grid) -> String {
    let (lo, hi) = (g.edges[0], g.edges[g.edges.len() - 1]);
    let rows = if g.log {
        log_rows(&g.edges)
    } else {
        format!(
            "{} rows",
            format::duration(app.clock, g.edges[1].saturating_sub(g.edges[0]))
        )
    };
    let mut s = format!(
        "{}–{} {rows}",
        format::duration(app.clock, lo),
        format::duration(app.clock, hi)
    );
    for (n, what) in [(g.below, "below"), (g.above, "above")] {
        if n > 0 {
            s.push_str(&format!(" · {} {what}", format::count(n)));
        }
    }
    s
}

/// "log rows, 4/octave", "log rows, 3 octaves each": how fine the rows are.
fn log_rows(edges: &[u64]) -> String {
    let (first, last) = (edges[0].max(1), edges[edges.len() - 1].max(2));
    let octaves = (last as f64 / first as f64).log2().round().max(1.0) as usize;
    let rows = edges.len() - 1;
    if rows >= octaves {
        format!("log rows, {}/octave", rows / octaves)
    } else {
        format!("log rows, {} octaves each", octaves.div_ceil(rows))
    }
}

/// A panel's heatmap: the cells over one row of ticks, time labels and the legend.
pub fn compact(app: &App, panel: &Panel, area: Rect, buf: &mut Buffer) {
    if area.height < 2 || area.width < 10 {
        return;
    }
    let map = Rect {
        height: area.height - 1,
        ..area
    };
    let axis = Rect {
        y: map.bottom(),
        height: 1,
        ..area
    };
    let Some(g) = grid(app, panel, map.width, map.height as usize) else {
        buf.set_string(axis.x, axis.y, "no calls yet", DIM);
        return;
    };
    cells(&g, map, buf);
    marks(&g, axis, buf);
    let left = format!("{} ", range_label(app, &g));
    let right = format!(" {} ", legend(&g));
    let rw = right.chars().count() as u16;
    buf.set_stringn(axis.x, axis.y, &left, axis.width as usize, outside(&g));
    if left.chars().count() as u16 + rw <= axis.width {
        buf.set_string(axis.right() - rw, axis.y, &right, Style::new());
    }
}

fn outside(g: &Grid) -> Style {
    if g.below + g.above > 0 { OUTSIDE } else { DIM }
}

/// The focused view's heatmap: latency labels at the left, ticks, a time axis and a legend.
pub fn detailed(app: &App, panel: &Panel, area: Rect, buf: &mut Buffer) {
    let gutter = format::duration_width(app.clock) as u16 + 3;
    if area.height < 5 || area.width < gutter + 10 {
        return compact(app, panel, area, buf);
    }
    let title = Rect { height: 1, ..area };
    let map = Rect {
        x: area.x + gutter,
        y: area.y + 1,
        width: area.width - gutter,
        height: area.height - 4,
    };
    let [ticks, times, foot] = [map.bottom(), map.bottom() + 1, map.bottom() + 2].map(|y| Rect {
        y,
        height: 1,
        ..map
    });
    let Some(g) = grid(app, panel, map.width, map.height as usize) else {
        buf.set_string(map.x, map.y, "no calls yet", DIM);
        return;
    };
    let calls: u64 = g.columns.iter().flat_map(|c| c.0.iter()).sum();
    let head = format!(
        "  latency over time: {} calls in the last {} s",
        format::count(calls),
        g.columns.len()
    );
    buf.set_stringn(title.x, title.y, &head, title.width as usize, TITLE);
    cells(&g, map, buf);
    row_labels(app, &g, map, area.x, buf);
    marks(&g, ticks, buf);
    time_labels(&g, times, buf);
    let mut text = format!("  {} calls/cell · {}", legend(&g), range_label(app, &g));
    if g.columns.iter().any(|c| c.1 > 0) {
        text.push_str(&format!(" · {MARK} interval ended"));
    }
    let width = foot.right() - area.x;
    buf.set_stringn(area.x, foot.y, &text, width as usize, outside(&g));
}

/// Each row's lower edge at the left, where it fits with a blank row between labels.
fn row_labels(app: &App, g: &Grid, map: Rect, x: u16, buf: &mut Buffer) {
    let width = (map.x - x).saturating_sub(1) as usize;
    let rows = (g.edges.len() - 1).min(map.height as usize);
    let step = if rows > map.height as usize / 2 { 2 } else { 1 };
    for k in (0..rows).step_by(step) {
        let y = map.bottom() - 1 - k as u16;
        let label = format!("{:>width$}", format::duration(app.clock, g.edges[k]));
        buf.set_stringn(x, y, &label, width, DIM);
    }
}

/// "−60s" every ten seconds back from the newest column, which is "now".
fn time_labels(g: &Grid, area: Rect, buf: &mut Buffer) {
    let now = "now";
    let now_x = area.right().saturating_sub(now.len() as u16);
    buf.set_string(now_x, area.y, now, DIM);
    let secs = HEAT_COLUMN_NS / 1_000_000_000;
    let n = g.columns.len();
    for back in (10..n).step_by(10) {
        let Some(x) = column_x(g, area, n - 1 - back) else {
            break;
        };
        let label = format!("−{}s", back as u64 * secs);
        if x + label.chars().count() as u16 + 1 < now_x {
            buf.set_string(x, area.y, &label, DIM);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shades_follow_a_log_scale_of_counts() {
        let t = thresholds(10_000);
        assert_eq!(t, [1, 10, 100, 1_000]);
        assert_eq!(shade(0, &t), None);
        assert_eq!(shade(1, &t).unwrap().0, '░');
        assert_eq!(shade(99, &t).unwrap().0, '▒');
        assert_eq!(shade(100, &t).unwrap().0, '▓');
        assert_eq!(shade(10_000, &t).unwrap().0, '█');
        // One call per cell at most: every cell is the top shade.
        let t = thresholds(1);
        assert_eq!(shade(1, &t).unwrap().0, '█');
    }
}
