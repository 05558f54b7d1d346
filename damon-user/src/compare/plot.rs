//! `compare --plot FILE.svg`: both distributions overlaid, one chart per function, on the
//! same rows as the range tables (plotters, SVG backend only: pure Rust, no fonts needed).
use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use super::{Comparison, FunctionComparison};

const BEFORE: RGBColor = RGBColor(31, 119, 180);
const AFTER: RGBColor = RGBColor(255, 127, 14);
const CHART_HEIGHT: u32 = 340;

/// The step outline of one side's share of calls per row (the overflow row is left out: it
/// has no upper edge to draw; the caption says how much it holds).
fn steps(f: &FunctionComparison, after: bool) -> Vec<(f64, f64)> {
    let total = if after {
        f.after.matched
    } else {
        f.before.matched
    }
    .max(1) as f64;
    let mut pts = Vec::new();
    for r in &f.rows {
        let Some(hi) = r.hi_ns else { continue };
        let share = if after { r.after } else { r.before } as f64 * 100.0 / total;
        pts.push((r.lo_ns as f64, share));
        pts.push((hi as f64, share));
    }
    pts
}

fn overflow(f: &FunctionComparison) -> String {
    let Some(last) = f.rows.last().filter(|r| r.hi_ns.is_none()) else {
        return String::new();
    };
    let share = |n: u64, t: u64| n as f64 * 100.0 / t.max(1) as f64;
    format!(
        " · ≥{} ns: {:.1}% / {:.1}%",
        last.lo_ns,
        share(last.before, f.before.matched),
        share(last.after, f.after.matched)
    )
}

fn draw_one<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    f: &FunctionComparison,
    cmp: &Comparison,
) -> anyhow::Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing {}: {e:?}", f.name);
    let (b, a) = (steps(f, false), steps(f, true));
    let ymax = b.iter().chain(&a).map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let (x0, x1) = (f.grid.lo_ns as f64, f.grid.hi_ns as f64);
    let mut chart = ChartBuilder::on(area)
        .caption(
            // The verdict up to its numbers: "after is faster by 300 ns at the median".
            format!(
                "{} — {}",
                f.name,
                f.verdict.split([':', '[']).next().unwrap_or("").trim()
            ),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(x0..x1, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("latency (ns){}", overflow(f)))
        .y_desc("% of calls")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .draw()
        .map_err(err)?;
    let legend = |side: &str, kernel: &str, n: u64| format!("{side}: {kernel}, {n} calls");
    for (pts, color, text) in [
        (
            b,
            BEFORE,
            legend("before", &cmp.before.kernel_release, f.before.matched),
        ),
        (
            a,
            AFTER,
            legend("after", &cmp.after.kernel_release, f.after.matched),
        ),
    ] {
        chart
            .draw_series(AreaSeries::new(pts, 0.0, color.mix(0.25)).border_style(color))
            .map_err(err)?
            .label(text)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The SVG document for a comparison.
pub fn render_svg(cmp: &Comparison) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let n = cmp.functions.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut svg, (900, CHART_HEIGHT * n)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
        for (f, area) in cmp.functions.iter().zip(root.split_evenly((n as usize, 1))) {
            draw_one(&area, f, cmp)?;
        }
        root.present().map_err(|e| anyhow!("{e:?}"))?;
    }
    Ok(svg)
}

pub fn write_svg(cmp: &Comparison, path: &Path) -> anyhow::Result<()> {
    let svg = render_svg(cmp)?;
    std::fs::write(path, svg)?;
    Ok(())
}
