//! `compare --plot FILE.svg`: both distributions overlaid, one chart per function, on a log
//! latency axis so that body and tail both show (plotters, SVG backend only: pure Rust, no
//! fonts needed); below them each function's before and after heatmaps (`heatmap_svg`).
use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use super::{Comparison, FunctionComparison, Inputs};
use crate::{
    analysis::ReportOptions,
    capture::Capture,
    heatmap_svg::{collect_captures, draw, layout},
};

const BEFORE: RGBColor = RGBColor(31, 119, 180);
const AFTER: RGBColor = RGBColor(255, 127, 14);
const CHART_HEIGHT: u32 = 340;

/// Bins per decade of latency on the plot's log axis.
const PER_DECADE: f64 = 20.0;

/// Calls of each side with `lo <= d < hi`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogBin {
    pub lo: f64,
    pub hi: f64,
    pub before: u64,
    pub after: u64,
}

/// Log-spaced bins from the smallest to the largest duration of both sorted samples, so the
/// whole of both distributions shows (tails included) whatever decades they span.
pub fn log_bins(before: &[u64], after: &[u64]) -> Vec<LogBin> {
    let lo = before
        .first()
        .into_iter()
        .chain(after.first())
        .min()
        .copied();
    let hi = before.last().into_iter().chain(after.last()).max().copied();
    let (Some(lo), Some(hi)) = (lo, hi) else {
        return Vec::new();
    };
    let (l0, l1) = ((lo.max(1) as f64).log10(), (hi.max(1) as f64 + 1.0).log10());
    let n = ((l1 - l0) * PER_DECADE).ceil().max(1.0) as usize;
    let edge = |i: usize| 10f64.powf(l0 + (l1 - l0) * i as f64 / n as f64);
    let count = |s: &[u64], lo: f64, hi: f64, last: bool| {
        let below = |x: f64| s.partition_point(|&d| (d as f64) < x);
        (if last { s.len() } else { below(hi) } - below(lo)) as u64
    };
    (0..n)
        .map(|i| {
            let (a, b) = (if i == 0 { 0.0 } else { edge(i) }, edge(i + 1));
            let last = i + 1 == n;
            LogBin {
                lo: edge(i),
                hi: b,
                before: count(before, a, b, last),
                after: count(after, a, b, last),
            }
        })
        .collect()
}

/// The step outline of one side's share of calls per bin.
fn steps(f: &FunctionComparison, after: bool) -> Vec<(f64, f64)> {
    let total = if after {
        f.after.matched
    } else {
        f.before.matched
    }
    .max(1) as f64;
    let mut pts = Vec::new();
    for b in &f.log_bins {
        let share = if after { b.after } else { b.before } as f64 * 100.0 / total;
        pts.push((b.lo, share));
        pts.push((b.hi, share));
    }
    pts
}

fn draw_one<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    f: &FunctionComparison,
    cmp: &Comparison,
) -> anyhow::Result<()> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing {}: {e:?}", f.name);
    let (b, a) = (steps(f, false), steps(f, true));
    let ymax = b.iter().chain(&a).map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let (Some(first), Some(last)) = (f.log_bins.first(), f.log_bins.last()) else {
        return Ok(()); // no calls on either side: nothing to draw
    };
    let (x0, x1) = (first.lo, last.hi);
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
        .build_cartesian_2d((x0..x1).log_scale(), 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        // No minor grid: it adds nothing to two overlaid histograms and doubles the file.
        .max_light_lines(0)
        .x_desc("latency (ns, log scale)")
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

/// The SVG document for a comparison: the distributions, then the heatmaps of both sides
/// (`inputs` read with `opts`) on one colour scale per function.
pub fn render_svg(
    cmp: &Comparison,
    inputs: &Inputs,
    opts: &ReportOptions,
) -> anyhow::Result<String> {
    let mut charts = String::new();
    let n = cmp.functions.len().max(1) as u32;
    {
        let root =
            SVGBackend::with_string(&mut charts, (900, CHART_HEIGHT * n)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
        for (f, area) in cmp.functions.iter().zip(root.split_evenly((n as usize, 1))) {
            draw_one(&area, f, cmp)?;
        }
        root.present().map_err(|e| anyhow!("{e:?}"))?;
    }
    let height = f64::from(CHART_HEIGHT * n);
    let maps = |runs: &[(&str, &Capture)]| collect_captures(runs.iter().map(|r| r.1), opts);
    let (Some(before), Some(after)) = (maps(&inputs.before), maps(&inputs.after)) else {
        let mut body = charts;
        let why = "No heatmaps: a side has no per-call records (recorded with --mode kernel).";
        draw::text(&mut body, 10.0, height + 24.0, "start", why);
        return Ok(layout::document(layout::DOC_W, height + 40.0, &body));
    };
    let names: Vec<&str> = cmp.functions.iter().map(|f| f.name.as_str()).collect();
    let side = |name, maps, runs: &[(&str, &Capture)]| layout::Side {
        name,
        maps,
        runs: runs.len(),
    };
    Ok(layout::compare_document(
        &charts,
        height,
        &names,
        &side("before", &before, &inputs.before),
        &side("after", &after, &inputs.after),
    ))
}

/// Writes the chart to `path`, created 0600 like every output; an existing file only with
/// `force`.
pub fn write_svg(
    cmp: &Comparison,
    inputs: &Inputs,
    opts: &ReportOptions,
    path: &Path,
    force: bool,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let svg = render_svg(cmp, inputs, opts)?;
    let mut file = crate::capture::format::create_output(path, force)?;
    file.write_all(svg.as_bytes())?;
    Ok(())
}
