//! `damon-trace report`: per-function accounting, latency percentiles and range tables of a
//! capture. [`crate::analysis`] builds the report (pure); [`render`] turns it into text,
//! Markdown or CSV.
pub mod render;
#[cfg(test)]
mod tests;

use std::process::ExitCode;

use crate::{
    analysis::{ReportOptions, build},
    capture::format::load_file,
    cli::{ReportArgs, ReportFormat},
};

/// `damon-trace report`: with `--heatmap`, the picture first (streaming: it never holds the
/// records the report then loads), then the report.
pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let opts = ReportOptions {
        slowest: args.slowest,
        ..ReportOptions::new(&args.filter, &args.buckets)
    };
    if let Some(path) = &args.heatmap {
        crate::heatmap_svg::write_report(&args.file, path, args.force, &opts)
            .with_context(|| format!("writing {}", path.display()))?;
        if !crate::capture::stdio::is_stdio(path) {
            eprintln!("heatmap: {}", path.display());
        }
    }
    if args
        .heatmap
        .as_deref()
        .is_some_and(crate::capture::stdio::is_stdio)
    {
        // `--heatmap -`: the SVG (`heatmap_svg::write_report`) is stdout's document.
        return Ok(ExitCode::SUCCESS);
    }
    let loaded = load_file(&args.file)?;
    let mut report = build(&loaded.capture, &opts)?;
    if let Some(chunk) = loaded.info.torn_chunk {
        report.warnings.push(format!(
            "the file ends inside chunk {chunk} (the recorder was killed while writing it): \
             the records of the complete chunks before it are shown"
        ));
    }
    let mut text = match args.format {
        ReportFormat::Table => render::table(&report, Some(&loaded.info)),
        ReportFormat::Json => crate::output::json_document(&report)?,
        ReportFormat::Csv => render::csv(&report),
        ReportFormat::Markdown => render::markdown(&report),
    };
    if let (ReportFormat::Markdown, Some(path)) = (args.format, &args.heatmap) {
        text.push_str(&crate::render::markdown::heatmap_link(path));
    }
    crate::output::write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}
