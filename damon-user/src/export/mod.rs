//! `damon-trace export FILE --format …`: a capture in formats other tools read.
//!
//! One [`Exporter`] per format, one file each; `-o -` (the default) is stdout.
mod buckets;
mod csv;
mod json;
pub mod openmetrics;
#[cfg(test)]
mod tests;

use std::{
    io::{BufWriter, Write},
    path::Path,
    process::ExitCode,
};

use anyhow::Context as _;

use crate::{
    analysis::{ReportOptions, check_functions},
    capture::{
        Capture,
        format::{create_private, read_file},
    },
    cli::{ExportArgs, ExportFormat},
};

/// Writes a capture in one format.
pub trait Exporter {
    fn export(&self, capture: &Capture, out: &mut dyn Write) -> anyhow::Result<()>;
}

/// The exporter for a format, configured by the options (filters, bucket grid).
pub fn exporter(format: ExportFormat, opts: ReportOptions) -> Box<dyn Exporter> {
    match format {
        ExportFormat::Json => Box::new(json::Json(opts)),
        ExportFormat::Csv => Box::new(csv::Calls(opts)),
        ExportFormat::CsvBuckets => Box::new(buckets::Buckets(opts)),
        ExportFormat::CsvIntervals => Box::new(csv::Intervals(opts)),
        ExportFormat::Openmetrics => Box::new(openmetrics_exporter::OpenMetrics(opts)),
    }
}

/// Whether a record passes `--functions`/`--cpu`/`--pid`.
pub fn keeps(capture: &Capture, opts: &ReportOptions, r: &damon_common::CallRecord) -> bool {
    let name_ok = opts.functions.is_empty()
        || capture
            .meta
            .functions
            .iter()
            .any(|f| f.id == r.func && opts.functions.contains(&f.name));
    name_ok
        && (opts.cpu.is_empty() || opts.cpu.contains(&r.cpu))
        && (opts.pid.is_empty() || opts.pid.contains(&r.pid))
}

mod openmetrics_exporter {
    use super::*;
    use crate::{
        export::openmetrics::{MetricsSnapshot, ProcessMetrics, render},
        stats::calibration::Calibration,
    };

    /// The capture as one OpenMetrics scrape (counters from its summary).
    pub struct OpenMetrics(pub ReportOptions);

    impl Exporter for OpenMetrics {
        fn export(&self, c: &Capture, out: &mut dyn Write) -> anyhow::Result<()> {
            out.write_all(render(&snapshot(c, &self.0)).as_bytes())?;
            Ok(())
        }
    }

    /// What a scrape at the end of the capture would show: the histograms of the selected
    /// functions, their counters.
    pub fn snapshot(c: &Capture, opts: &ReportOptions) -> MetricsSnapshot {
        let statuses: Vec<_> = c
            .meta
            .functions
            .iter()
            .filter(|f| opts.functions.is_empty() || opts.functions.contains(&f.name))
            .cloned()
            .collect();
        let mut snap = MetricsSnapshot::new(&c.meta.kernel.release, c.meta.mode, &statuses)
            .with_disturbance(crate::capture::DisturbanceStatus::measured(&c.meta));
        snap.malformed_items = c.summary.as_ref().map_or(0, |s| s.malformed_items);
        snap.clock = c.meta.clock;
        if let Some(cal) = Calibration::from_meta(c.meta.calibration.as_ref()) {
            snap.process.probe_floors = ProcessMetrics::floors_from(&cal);
        }
        if c.is_kernel_mode() {
            let end = c.final_hists().unwrap_or_default();
            for f in &mut snap.functions {
                if let Some((k, h)) = end.functions.get(&f.id) {
                    f.observe_hist(h);
                    f.counters = *k;
                }
            }
            return snap;
        }
        for r in c.records.iter().filter(|r| keeps(c, opts, r)) {
            snap.observe(r);
        }
        for f in &mut snap.functions {
            let count = c.records.iter().filter(|r| r.func == f.id).count() as u64;
            f.counters = crate::analysis::counters(c, f.id, count);
        }
        for (name, p) in crate::analysis::damon::per_interval_of(c) {
            if snap.functions.iter().any(|f| f.name == name) {
                let h = snap.damon.interval_cost_of(&name);
                for &ns in &p.per_interval_totals {
                    h.observe(ns);
                }
            }
        }
        snap
    }
}

/// The capture with the durations `--time` asks for: on-CPU for the CSV formats that
/// aggregate (`csv-buckets`, `csv-intervals`, whose headers then say `on_cpu_ns`). The
/// per-call formats refuse it, as they carry each call's wall time and its breakdown, from
/// which on-CPU time follows; so does `openmetrics`, whose families are call durations.
pub fn timed(
    capture: Capture,
    format: ExportFormat,
    opts: &ReportOptions,
) -> Result<Capture, crate::error::UsageError> {
    if opts.time == crate::analysis::TimeBasis::Wall {
        return Ok(capture);
    }
    match format {
        ExportFormat::Json | ExportFormat::Csv => Err(crate::error::UsageError(
            "--time on-cpu: --format json and csv write every call's wall time with its \
             off_cpu_ns and irq_ns (on-CPU = wall − both); use --time wall with them, or \
             csv-buckets or csv-intervals for on-CPU aggregates"
                .to_owned(),
        )),
        ExportFormat::Openmetrics => Err(crate::error::UsageError(
            "--time on-cpu: --format openmetrics writes call durations (the families `serve` \
             writes too); use --time wall with it, or csv-buckets or csv-intervals for on-CPU \
             aggregates"
                .to_owned(),
        )),
        ExportFormat::CsvBuckets | ExportFormat::CsvIntervals => {
            Ok(crate::analysis::time::timed(&capture, opts, None)?.into_owned())
        }
    }
}

pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let capture = read_file(&args.file)?;
    check_functions(&capture, &args.filter.functions)?;
    let opts = ReportOptions::new(&args.filter, &args.buckets);
    if capture.is_kernel_mode() {
        crate::analysis::kernel::check_options(&opts)?;
    }
    let capture = timed(capture, args.format, &opts)?;
    let exporter = exporter(args.format, opts);
    if args.output == Path::new("-") {
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        exporter.export(&capture, &mut out)?;
        out.flush()?;
    } else {
        // Mode 0600 like captures: an export holds the same per-call data.
        let file = create_private(&args.output, args.force)?;
        let mut out = BufWriter::new(file);
        exporter
            .export(&capture, &mut out)
            .and_then(|()| out.flush().map_err(Into::into))
            .with_context(|| format!("writing {}", args.output.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
