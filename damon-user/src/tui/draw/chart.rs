//! Histogram and sparkline drawing with block characters (pure: buffer in, buffer out).
use ratatui::{
    buffer::Buffer,
    layout::Rect,
    style::{Color, Style},
};

use crate::{
    capture::Clock,
    stats::histogram::Bins,
    tui::{binning::Binned, format},
};

const VERTICAL: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
const HORIZONTAL: [char; 9] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'];

pub const BAR: Style = Style::new().fg(Color::Cyan);
pub const OUTSIDE: Style = Style::new().fg(Color::Yellow);
pub const DIM: Style = Style::new().fg(Color::DarkGray);

/// Height in eighths of a cell for `count` out of `max` over `cells` cells; at least one eighth
/// for any non-zero count, so a single call stays visible.
fn eighths(count: u64, max: u64, cells: u16) -> u64 {
    if count == 0 || max == 0 {
        return 0;
    }
    let full = u64::from(cells) * 8;
    ((u128::from(count) * u128::from(full)).div_ceil(u128::from(max)) as u64).clamp(1, full)
}

/// A one-row sparkline of the newest `width` values, newest at the right.
pub fn spark(values: &[u64], width: usize) -> String {
    let shown = &values[values.len().saturating_sub(width)..];
    let max = shown.iter().copied().max().unwrap_or(0);
    shown
        .iter()
        .map(|&v| VERTICAL[eighths(v, max, 1) as usize])
        .collect()
}

/// Columns each bin gets when `n` bins share `width` cells.
pub fn column_width(n: usize, width: u16) -> u16 {
    (width / n.max(1) as u16).max(1)
}

/// Vertical bars, one group of columns per bin, filling `area` from its bottom.
pub fn columns(bins: &Bins, area: Rect, buf: &mut Buffer) {
    let cw = column_width(bins.bins.len(), area.width);
    let max = bins.max_count();
    for (i, bin) in bins.bins.iter().enumerate() {
        let x0 = area.x + i as u16 * cw;
        if x0 >= area.right() {
            break;
        }
        let mut left = eighths(bin.count, max, area.height);
        for row in (area.top()..area.bottom()).rev() {
            let glyph = VERTICAL[left.min(8) as usize];
            left = left.saturating_sub(8);
            for x in x0..(x0 + cw).min(area.right()) {
                if let Some(cell) = buf.cell_mut((x, row)) {
                    cell.set_char(glyph).set_style(BAR);
                }
            }
        }
    }
}

/// The axis under [`columns`]: lowest edge at the left, then which bins these are, octave
/// labels where they fit, the calls outside the bins in the middle, highest edge at the right.
pub fn axis(binned: &Binned, clock: Clock, area: Rect, buf: &mut Buffer) {
    let bins = &binned.bins.bins;
    let (Some(first), Some(last)) = (bins.first(), bins.last()) else {
        return;
    };
    let cw = column_width(bins.len(), area.width);
    let span = (cw * bins.len() as u16).min(area.width);
    let right = format::duration(clock, last.hi);
    let left = format!(
        "{}  {}",
        format::duration(clock, first.lo),
        binned.label(clock)
    );
    let mut taken = left.chars().count() as u16 + 2;
    buf.set_stringn(area.x, area.y, &left, area.width as usize, DIM);
    if binned.width_ns.is_none() {
        // log2: label every bin whose label fits before the next one.
        for (i, bin) in bins.iter().enumerate().skip(1) {
            let x = i as u16 * cw;
            let label = format::duration(clock, bin.lo);
            if x >= taken && x + label.chars().count() as u16 + 1 < span - right.len() as u16 {
                buf.set_string(area.x + x, area.y, &label, DIM);
                taken = x + label.chars().count() as u16 + 1;
            }
        }
    }
    let right_x = span.saturating_sub(right.chars().count() as u16);
    if right_x > taken {
        buf.set_string(area.x + right_x, area.y, &right, DIM);
    }
    let outside = outside_note(&binned.bins);
    let len = outside.chars().count() as u16;
    if len > 0 && len + 2 < right_x.saturating_sub(taken) {
        let x = taken + (right_x - taken - len) / 2;
        buf.set_string(area.x + x, area.y, &outside, OUTSIDE);
    }
}

/// "12 below · 312 above" for calls outside the shown bins; empty when none are.
pub fn outside_note(bins: &Bins) -> String {
    let mut parts = Vec::new();
    if bins.below > 0 {
        parts.push(format!("◂ {} below", format::count(bins.below)));
    }
    if bins.above > 0 {
        parts.push(format!("{} above ▸", format::count(bins.above)));
    }
    parts.join(" · ")
}

/// A horizontal bar of `count` out of `max` over `width` cells.
pub fn hbar(count: u64, max: u64, width: u16) -> String {
    let mut left = eighths(count, max, width);
    let mut s = String::with_capacity(width as usize * 3);
    for _ in 0..width {
        s.push(HORIZONTAL[left.min(8) as usize]);
        left = left.saturating_sub(8);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_heights_round_up_and_keep_singletons_visible() {
        assert_eq!(eighths(0, 10, 2), 0);
        assert_eq!(eighths(1, 1000, 2), 1);
        assert_eq!(eighths(1000, 1000, 2), 16);
        assert_eq!(eighths(500, 1000, 2), 8);
        assert_eq!(hbar(1, 2, 2), "█ ");
        assert_eq!(hbar(3, 16, 2), "▍ ");
        assert_eq!(hbar(13, 16, 2), "█▋");
    }

    #[test]
    fn sparkline_shows_the_newest_values() {
        assert_eq!(spark(&[0, 8, 4, 8], 3), "█▄█");
        assert_eq!(spark(&[0, 0], 5), "  ");
        assert_eq!(spark(&[], 5), "");
    }
}
