//! Whole documents: `report --heatmap`'s, and the heatmaps `compare --plot` adds below its
//! charts; the panels themselves are [`super::draw`]'s.
use super::{
    FunctionMaps, Maps,
    draw::{Frame, Panel, Scale, Shared, legend, panel, rows_of, series, text, value},
};
use crate::{capture::Clock, stats::heatmap::Heatmap};

/// Plot area geometry of a document: left edge, width, panel heights.
pub const LEFT: f64 = 90.0;
pub const PLOT_W: f64 = 760.0;
pub const PANEL_H: f64 = 200.0;
const SERIES_H: f64 = 90.0;
/// Room for a panel's title above and its time labels below.
pub const ABOVE: f64 = 30.0;
pub const BELOW: f64 = 40.0;
pub const DOC_W: f64 = 1000.0;

/// What every picture says about how to read it.
pub fn key(out: &mut String, x: f64, y: f64, clock: Clock) -> f64 {
    let unit = clock.unit();
    let lines = [
        format!(
            "Cells: the calls that entered in the column's time (s since the capture's start) \
             and took the row's latency ({unit}, log scale)."
        ),
        "Colour: calls per cell, log scale (legend on the right; hover a cell for its count). \
         Lines: p50 (orange) and p99 (pink, dashed) of each column."
            .to_owned(),
        "Ticks above a panel: DAMON aggregation-interval ends (one per boundary, or one lighter \
         tick per column holding several; hover for the count)."
            .to_owned(),
    ];
    for (i, l) in lines.iter().enumerate() {
        text(out, x, y + 14.0 * i as f64, "start", l);
    }
    14.0 * lines.len() as f64 + 8.0
}

/// The `report --heatmap` document: per function its heatmap, its clean calls' (on the same
/// rows and colours) and its time per aggregation interval.
pub fn report_document(maps: &Maps, title: &str) -> String {
    let mut body = String::new();
    let mut y = 24.0;
    text(&mut body, 10.0, y, "start", title);
    y += 22.0;
    y += key(&mut body, 10.0, y, maps.clock);
    let end_ns = maps.end_ns();
    for f in &maps.functions {
        y = function_block(&mut body, y, f, maps, end_ns);
    }
    if maps.functions.is_empty() {
        text(
            &mut body,
            10.0,
            y + 20.0,
            "start",
            "no traced function selected",
        );
        y += 40.0;
    }
    document(DOC_W, y, &body)
}

fn function_block(out: &mut String, mut y: f64, f: &FunctionMaps, maps: &Maps, end: u64) -> f64 {
    let panels: Vec<(&str, &Heatmap)> = std::iter::once(("all", &f.all))
        .chain(f.clean.as_ref().map(|c| ("clean", c)))
        .collect();
    let rows = rows_of(panels.iter().map(|p| p.1));
    let shared = Shared {
        scale: Scale::of(panels.iter().map(|p| p.1), &rows),
        rows: &rows,
        end_ns: end,
        clock: maps.clock,
    };
    let legend_top = y + ABOVE;
    for (name, map) in &panels {
        let what = if *name == "clean" {
            "clean calls (nothing took the CPU)"
        } else {
            "all calls"
        };
        let title = format!(
            "{} — {what}: {} calls, columns of {}",
            f.name,
            map.calls(),
            value(map.width_ns() as f64, Clock::Wall)
        );
        let frame = Frame {
            x: LEFT,
            y: y + ABOVE,
            w: PLOT_W,
            h: PANEL_H,
        };
        let p = Panel {
            function: &f.name,
            panel: name,
            title,
            map,
            marks: &maps.marks,
        };
        panel(out, frame, &p, &shared);
        y += ABOVE + PANEL_H + BELOW;
    }
    let bar = Frame {
        x: LEFT + PLOT_W + 30.0,
        y: legend_top,
        w: 14.0,
        h: PANEL_H,
    };
    legend(out, bar, shared.scale);
    if let Some(s) = &f.series {
        let frame = Frame {
            x: LEFT,
            y: y + ABOVE,
            w: PLOT_W,
            h: SERIES_H,
        };
        series(out, frame, &f.name, s, maps, &shared);
        y += ABOVE + SERIES_H + BELOW;
    }
    y + 10.0
}

/// A standalone SVG document of `w`×`h` around `body`.
pub fn document(w: f64, h: f64, body: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n"
    )
}

/// One side of a comparison: its maps and how many runs they sum.
pub struct Side<'a> {
    pub name: &'a str,
    pub maps: &'a Maps,
    pub runs: usize,
}

/// `compare --plot`: `charts` (an SVG document `charts_h` high) with, below it, each
/// function's before and after heatmaps side by side on one latency grid, one colour scale
/// and one time axis (time since each capture's start; several runs of a side summed on it).
pub fn compare_document<'a>(
    charts: &str,
    charts_h: f64,
    names: &[&str],
    before: &Side<'a>,
    after: &Side<'a>,
) -> String {
    let mut body = String::new();
    body.push_str(charts);
    let mut y = charts_h + 20.0;
    y += key(&mut body, 10.0, y, before.maps.clock);
    let rule = "With several runs a side, the runs are laid over each other on time since each \
                capture's start: a cell counts the calls of all of them.";
    text(&mut body, 10.0, y, "start", rule);
    y += 16.0;
    let end_ns = before.maps.end_ns().max(after.maps.end_ns());
    let of = |side: &Side<'a>, name: &str| side.maps.functions.iter().find(|f| f.name == name);
    for name in names {
        if let (Some(b), Some(a)) = (of(before, name), of(after, name)) {
            y = pair(&mut body, y, [(before, b), (after, a)], end_ns);
        }
    }
    document(DOC_W, y, &body)
}

/// The before and after heatmaps of one function.
fn pair(out: &mut String, y: f64, sides: [(&Side, &FunctionMaps); 2], end_ns: u64) -> f64 {
    let rows = rows_of(sides.iter().map(|s| &s.1.all));
    let shared = Shared {
        scale: Scale::of(sides.iter().map(|s| &s.1.all), &rows),
        rows: &rows,
        end_ns,
        clock: sides[0].0.maps.clock,
    };
    let w = (PLOT_W - LEFT) / 2.0;
    let heading = format!(
        "{} — before and after on one colour scale, columns of {}",
        sides[0].1.name,
        value(sides[0].1.all.width_ns() as f64, Clock::Wall)
    );
    text(out, 10.0, y + 14.0, "start", &heading);
    let y = y + 20.0;
    for (i, (side, f)) in sides.iter().enumerate() {
        let runs = match side.runs {
            1 => String::new(),
            n => format!(" ({n} runs summed)"),
        };
        let title = format!("{}{runs}: {} calls", side.name, f.all.calls());
        let frame = Frame {
            x: LEFT + i as f64 * (w + LEFT),
            y: y + ABOVE,
            w,
            h: PANEL_H,
        };
        let p = Panel {
            function: &f.name,
            panel: side.name,
            title,
            map: &f.all,
            marks: &side.maps.marks,
        };
        panel(out, frame, &p, &shared);
    }
    let bar = Frame {
        x: LEFT + PLOT_W + 30.0,
        y: y + ABOVE,
        w: 14.0,
        h: PANEL_H,
    };
    legend(out, bar, shared.scale);
    y + ABOVE + PANEL_H + BELOW + 10.0
}
