//! The SVG of heatmaps, written by hand (not plotters) so every cell carries its exact count
//! (`data-count`, and a `<title>` a browser shows on hover) and every element says what it is
//! (`class`, `data-*`): the pictures are checked by parsing them.
//!
//! Elements: `<g class="heatmap" data-function data-panel data-calls data-scale-max data-rows
//! data-width-ns>` holding only `<rect class="cell" data-count>`; `<g class="percentiles">`
//! with `<path class="p50">` and `<path class="p99">`; `<g class="marks" data-marks>` with one
//! `<line class="mark" data-marks>` per boundary, or per column when columns hold several;
//! `<g class="legend" data-max>`; `<g class="per-interval" data-kdamond data-intervals
//! data-total-ns>`.
use std::fmt::Write as _;

use super::{Maps, Series};
use crate::{
    capture::Clock,
    stats::heatmap::{Heatmap, log_edges},
};

/// Latency rows at most (an octave split in up to 64 parts, as fine as this allows).
pub const MAX_ROWS: usize = 48;
const FONT: &str = r#"font-family="sans-serif" font-size="12""#;
/// Light to dark (few calls pale, many dark), so an empty cell (background) and a cell of one
/// call differ.
const RAMP: [(u8, u8, u8); 6] = [
    (160, 215, 160),
    (127, 205, 187),
    (65, 182, 196),
    (29, 145, 192),
    (34, 94, 168),
    (12, 44, 132),
];
const P50: &str = "#f58518";
const P99: &str = "#e4157c";
const KDAMOND: [&str; 4] = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b"];

/// A rectangle of the picture (the plot area of a panel, without its labels).
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

/// Count → colour on a log scale from 1 to `max`: one scale for every panel drawn with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub max: u64,
}

impl Scale {
    /// The scale whose top is the largest cell of `maps` cut into `rows`.
    pub fn of<'a>(maps: impl IntoIterator<Item = &'a Heatmap>, rows: &[u64]) -> Scale {
        let cells = maps
            .into_iter()
            .flat_map(|m| m.columns().map(|(_, c)| c.rows(rows).counts))
            .flatten();
        Scale {
            max: cells.max().unwrap_or(0).max(1),
        }
    }

    /// Where `n` (≥ 1) falls from 0 (one call) to 1 (`max`).
    fn position(&self, n: u64) -> f64 {
        if self.max <= 1 {
            return 1.0;
        }
        ((n.max(1) as f64).ln() / (self.max as f64).ln()).clamp(0.0, 1.0)
    }

    pub fn colour(&self, n: u64) -> String {
        let x = self.position(n) * (RAMP.len() - 1) as f64;
        let i = (x.floor() as usize).min(RAMP.len() - 2);
        let f = x - i as f64;
        let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
        let (a, b) = (RAMP[i], RAMP[i + 1]);
        format!(
            "#{:02x}{:02x}{:02x}",
            mix(a.0, b.0),
            mix(a.1, b.1),
            mix(a.2, b.2)
        )
    }
}

/// Log latency rows covering every call of `maps` (exact counts: edges fall on slot edges).
pub fn rows_of<'a>(maps: impl IntoIterator<Item = &'a Heatmap>) -> Vec<u64> {
    let ranges = maps.into_iter().filter_map(|m| m.range(usize::MAX));
    let (lo, hi) = ranges.fold((u64::MAX, 0), |(l, h), (a, b)| (l.min(a), h.max(b)));
    if lo > hi {
        return vec![1, 2];
    }
    log_edges(lo, hi, MAX_ROWS)
}

/// What the panels drawn side by side share: rows, colours, time extent, unit.
pub struct Shared<'a> {
    pub rows: &'a [u64],
    pub scale: Scale,
    pub end_ns: u64,
    pub clock: Clock,
}

impl Shared<'_> {
    fn ln(v: u64) -> f64 {
        if v == 0 { 0.5f64.ln() } else { (v as f64).ln() }
    }

    /// The height of latency `v` in `f` (log scale over the rows).
    fn y(&self, f: Frame, v: u64) -> f64 {
        let lo = Self::ln(self.rows[0]);
        let hi = Self::ln(*self.rows.last().unwrap_or(&1));
        let at = (Self::ln(v) - lo) / (hi - lo).max(f64::MIN_POSITIVE);
        f.y + f.h - at.clamp(0.0, 1.0) * f.h
    }

    /// The abscissa of time `t` (ns since the capture's start) in `f`.
    fn x(&self, f: Frame, t: u64) -> f64 {
        f.x + f.w * (t as f64 / self.end_ns.max(1) as f64).min(1.0)
    }
}

/// One heatmap panel.
pub struct Panel<'a> {
    pub function: &'a str,
    /// `all`, `clean`, `before` or `after`.
    pub panel: &'a str,
    pub title: String,
    pub map: &'a Heatmap,
    /// Aggregation-interval boundaries (ns since the start).
    pub marks: &'a [u64],
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A latency or per-interval time in the clock's unit: `850ns`, `12.5µs`, `3ms`, `40k insn`.
pub fn value(v: f64, clock: Clock) -> String {
    let units = match clock {
        Clock::Wall => ["ns", "µs", "ms", "s"],
        Clock::Instructions => [" insn", "k insn", "M insn", "G insn"],
    };
    let (mut v, mut i) = (v, 0);
    while v >= 1000.0 && i < 3 {
        v /= 1000.0;
        i += 1;
    }
    let text = format!("{v:.*}", if v >= 100.0 || v.fract() == 0.0 { 0 } else { 1 });
    format!("{}{}", text.trim_end_matches(".0"), units[i])
}

/// Seconds since the start, with as many decimals as `step_ns` needs.
pub fn seconds(t: u64, step_ns: u64) -> String {
    let decimals = (9 - (step_ns.max(1) as f64).log10().floor() as i32).clamp(0, 3) as usize;
    format!("{:.*}", decimals, t as f64 / 1e9)
}

/// A 1-2-5 step giving at most `n` ticks up to `end`.
fn step(end: u64, n: u64) -> u64 {
    let nice = (0..=19u32).flat_map(|e| [1u64, 2, 5].map(|m| m.saturating_mul(10u64.pow(e))));
    nice.into_iter().find(|&s| end / s <= n).unwrap_or(u64::MAX)
}

pub fn text(out: &mut String, x: f64, y: f64, anchor: &str, s: &str) {
    let _ = writeln!(
        out,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" {FONT}>{}</text>"#,
        esc(s)
    );
}

/// A heatmap panel in `f`: its cells, percentile lines, boundary marks, axes and title.
pub fn panel(out: &mut String, f: Frame, p: &Panel, s: &Shared) {
    let _ = writeln!(
        out,
        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="white" stroke="#999"/>"##,
        f.x, f.y, f.w, f.h
    );
    let rows: Vec<String> = s.rows.iter().map(u64::to_string).collect();
    let _ = writeln!(
        out,
        r#"<g class="heatmap" data-function="{}" data-panel="{}" data-calls="{}" data-scale-max="{}" data-rows="{}" data-width-ns="{}">"#,
        esc(p.function),
        p.panel,
        p.map.calls(),
        s.scale.max,
        rows.join(" "),
        p.map.width_ns()
    );
    let width = p.map.width_ns();
    for (t, c) in p.map.columns() {
        let (x0, x1) = (s.x(f, t), s.x(f, t + width));
        for (k, &n) in c.rows(s.rows).counts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let (y0, y1) = (s.y(f, s.rows[k + 1]), s.y(f, s.rows[k]));
            let _ = writeln!(
                out,
                r#"<rect class="cell" x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="{}" data-count="{n}"><title>{n} calls, {}–{}, {}–{} s</title></rect>"#,
                (x1 - x0).max(1.5),
                (y1 - y0).max(0.5),
                s.scale.colour(n),
                value(s.rows[k] as f64, s.clock),
                value(s.rows[k + 1] as f64, s.clock),
                seconds(t, width),
                seconds(t + width, width),
            );
        }
    }
    out.push_str("</g>\n");
    percentiles(out, f, p, s);
    marks(out, f, p, s);
    latency_axis(out, f, s);
    time_axis(out, f, s);
    text(out, f.x, f.y - 10.0, "start", &p.title);
}

/// p50 and p99 of each column with calls, as lines broken where a column has none.
fn percentiles(out: &mut String, f: Frame, p: &Panel, s: &Shared) {
    let mut d = [String::new(), String::new()];
    let mut pen_up = true;
    let width = p.map.width_ns();
    for (t, c) in p.map.columns() {
        let Some(v) = c.percentiles(&[50.0, 99.0]) else {
            pen_up = true;
            continue;
        };
        let x = s.x(f, t + width / 2);
        for (path, v) in d.iter_mut().zip(v) {
            let _ = write!(
                path,
                "{}{x:.1},{:.1} ",
                if pen_up { "M" } else { "L" },
                s.y(f, v)
            );
        }
        pen_up = false;
    }
    let _ = writeln!(
        out,
        r#"<g class="percentiles" data-function="{}" data-panel="{}" fill="none">"#,
        esc(p.function),
        p.panel
    );
    for (class, colour, dash, path) in [("p50", P50, "", &d[0]), ("p99", P99, "4 2", &d[1])] {
        if !path.is_empty() {
            let _ = writeln!(
                out,
                r#"<path class="{class}" d="{}" stroke="{colour}" stroke-width="1.6" stroke-dasharray="{dash}"/>"#,
                path.trim_end()
            );
        }
    }
    out.push_str("</g>\n");
}

/// Aggregation-interval boundaries as ticks above the panel: one per boundary at its time, or,
/// when a column holds several, one lighter tick per such column with their count.
fn marks(out: &mut String, f: Frame, p: &Panel, s: &Shared) {
    let per_column = p.map.columns().any(|(_, c)| c.marks > 1);
    let total: u64 = p.map.columns().map(|(_, c)| u64::from(c.marks)).sum();
    let _ = writeln!(
        out,
        r##"<g class="marks" data-function="{}" data-panel="{}" data-marks="{total}" stroke="#222">"##,
        esc(p.function),
        p.panel
    );
    let tick = |out: &mut String, x: f64, n: u64, opacity: f64, what: String| {
        let _ = writeln!(
            out,
            r#"<line class="mark" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke-opacity="{opacity}" data-marks="{n}"><title>{what}</title></line>"#,
            f.y - 5.0,
            f.y + 3.0
        );
    };
    if per_column {
        let width = p.map.width_ns();
        for (t, c) in p.map.columns().filter(|(_, c)| c.marks > 0) {
            let what = format!(
                "{} aggregation intervals ended in {}–{} s",
                c.marks,
                seconds(t, width),
                seconds(t + width, width)
            );
            tick(out, s.x(f, t + width / 2), u64::from(c.marks), 0.45, what);
        }
    } else {
        for &t in p.marks {
            let what = format!("aggregation interval ended at {} s", seconds(t, 1_000));
            tick(out, s.x(f, t), 1, 0.8, what);
        }
    }
    out.push_str("</g>\n");
}

/// Latency labels (1-2-5 steps, or decades when those are too many) and grid lines.
fn latency_axis(out: &mut String, f: Frame, s: &Shared) {
    let (lo, hi) = (s.rows[0].max(1), *s.rows.last().unwrap_or(&1));
    let ticks = |ms: &[u64]| -> Vec<u64> {
        (0..=19u32)
            .flat_map(|e| ms.iter().map(move |m| m.saturating_mul(10u64.pow(e))))
            .filter(|&v| v >= lo && v <= hi)
            .collect()
    };
    let mut vs = ticks(&[1, 2, 5]);
    if vs.len() > 8 {
        vs = ticks(&[1]);
    }
    // The ends too, unless a tick is near: a narrow range may hold one tick or none.
    for end in [lo, hi] {
        if vs.iter().all(|&v| (s.y(f, v) - s.y(f, end)).abs() > 16.0) {
            vs.push(end);
        }
    }
    for v in vs {
        let y = s.y(f, v);
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#666"/>"##,
            f.x - 4.0,
            f.x
        );
        text(out, f.x - 6.0, y + 4.0, "end", &value(v as f64, s.clock));
    }
}

/// Time labels (seconds since the capture's start) below the panel.
fn time_axis(out: &mut String, f: Frame, s: &Shared) {
    let step = step(s.end_ns, 8);
    let mut t = 0;
    while t <= s.end_ns {
        let x = s.x(f, t);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="#666"/>"##,
            f.y + f.h,
            f.y + f.h + 4.0
        );
        text(out, x, f.y + f.h + 16.0, "middle", &seconds(t, step));
        t = t.saturating_add(step);
    }
    // Right of the last label, which is centred on the panel's end.
    text(out, f.x + f.w + 16.0, f.y + f.h + 16.0, "start", "s");
}

/// The colour legend: a bar from 1 call to `max`, labelled at powers of ten and the top.
pub fn legend(out: &mut String, f: Frame, scale: Scale) {
    let _ = writeln!(out, r#"<g class="legend" data-max="{}">"#, scale.max);
    const STEPS: usize = 32;
    let at = |i: usize| (scale.max as f64).powf(i as f64 / STEPS as f64).round() as u64;
    for i in 0..STEPS {
        let y = f.y + f.h - (i + 1) as f64 * f.h / STEPS as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.2}" fill="{}"/>"#,
            f.x,
            f.w,
            f.h / STEPS as f64 + 0.3,
            scale.colour(at(i).max(1))
        );
    }
    // Decades, and the top; a decade too close to the top to be read beside it is left out.
    let top_y = f.y + f.h - scale.position(scale.max) * f.h;
    let mut labels: Vec<u64> = std::iter::successors(Some(1u64), |v| v.checked_mul(10))
        .take_while(|&v| v < scale.max)
        .filter(|&v| f.y + f.h - scale.position(v) * f.h - top_y >= 14.0)
        .collect();
    labels.push(scale.max);
    for n in labels {
        let y = f.y + f.h - scale.position(n) * f.h;
        text(out, f.x + f.w + 4.0, y + 4.0, "start", &n.to_string());
    }
    text(out, f.x, f.y - 12.0, "start", "calls");
    out.push_str("</g>\n");
}

/// The time a function took per aggregation interval: a step line per kdamond over the
/// intervals' spans.
pub fn series(out: &mut String, f: Frame, function: &str, s: &Series, maps: &Maps, sh: &Shared) {
    let top = s
        .totals
        .values()
        .flatten()
        .copied()
        .max()
        .unwrap_or(0)
        .max(1);
    let y = |v: u64| f.y + f.h - f.h * v as f64 / top as f64;
    let _ = writeln!(
        out,
        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#999"/>"##,
        f.x, f.y, f.w, f.h
    );
    for (i, (tid, totals)) in s.totals.iter().enumerate() {
        let b = maps.boundaries.get(tid).map_or(&[][..], Vec::as_slice);
        let mut d = String::new();
        for (k, &v) in totals.iter().enumerate() {
            let (Some(&t0), Some(&t1)) = (b.get(k), b.get(k + 1)) else {
                continue;
            };
            let (x0, x1, yv) = (sh.x(f, t0), sh.x(f, t1), y(v));
            let _ = write!(
                d,
                "{}{x0:.1},{yv:.1} L{x1:.1},{yv:.1} ",
                if k == 0 { "M" } else { "L" }
            );
        }
        let _ = writeln!(
            out,
            r#"<g class="per-interval" data-function="{}" data-kdamond="{tid}" data-intervals="{}" data-total-ns="{}"><path d="{}" fill="none" stroke="{}" stroke-width="1.4"/></g>"#,
            esc(function),
            totals.len(),
            totals.iter().sum::<u64>(),
            d.trim_end(),
            KDAMOND[i % KDAMOND.len()]
        );
    }
    text(
        out,
        f.x - 6.0,
        f.y + 4.0,
        "end",
        &value(top as f64, sh.clock),
    );
    text(out, f.x - 6.0, f.y + f.h + 4.0, "end", "0");
    time_axis(out, f, sh);
    let who: Vec<String> = s
        .totals
        .keys()
        .map(|t| format!("kdamond tid {t}"))
        .collect();
    let title = format!(
        "time in {function} per aggregation interval ({}; summed call durations)",
        who.join(", ")
    );
    text(out, f.x, f.y - 10.0, "start", &title);
}
