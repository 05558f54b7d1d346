//! Building the report of a capture (pure): each function's accounting, latencies, values and
//! range table, the DAMON parts, the warnings and what the capture cannot show.
use damon_common::FunctionId;

use super::{
    BucketTable, FilterEcho, FunctionReport, Report, ReportMeta, ReportOptions, Selected,
    breakdown, check_functions, counters, damon, disturbance, kernel, select, slow, time,
    value_name, values,
};
use crate::{
    capture::{Capture, DisturbanceStatus, FunctionCounters, FunctionStatus, HistSnapshot},
    error::UsageError,
    probe::calibrate::text::describe_floor,
    stats::{
        LatencyStats, ValueStats,
        buckets::BucketGrid,
        calibration::{Calibration, CalibrationStatus, Corrected},
    },
};

/// Builds the report of a capture (pure): its statistics over the durations `opts.time` asks
/// for ([`time::timed`]), the breakdown and slow calls over the records as recorded.
pub fn build(recorded: &Capture, opts: &ReportOptions) -> Result<Report, UsageError> {
    check_functions(recorded, &opts.functions)?;
    let timed = time::timed(recorded, opts, None)?;
    let capture: &Capture = &timed;
    let kernel_mode = capture.is_kernel_mode();
    let hists = if kernel_mode {
        kernel::check_options(opts)?;
        capture.final_hists()
    } else {
        None
    };
    let calibration = Calibration::from_meta(capture.meta.calibration.as_ref());
    let mut warnings = capture_warnings(capture, hists.as_ref(), calibration.as_ref());
    let mut selected = select(capture, opts);
    let mut functions = Vec::new();
    for status in &capture.meta.functions {
        if !opts.functions.is_empty() && !opts.functions.contains(&status.name) {
            continue;
        }
        let (f, k) = if kernel_mode {
            kernel::function(
                status,
                hists.as_ref(),
                opts,
                capture.meta.calibration.as_ref(),
            )?
        } else {
            let sel = selected.remove(&status.id).unwrap_or_default();
            let (mut f, k) = stream_function(capture, status, sel, opts, calibration.as_ref())?;
            explain(recorded, status.id, opts, &mut f);
            (f, k)
        };
        accounting_warnings(&f, &k, capture.meta.ring_size, &mut warnings);
        functions.push(f);
    }
    let intervals = if kernel_mode {
        None
    } else {
        intervals(capture, opts, &mut functions, &mut warnings)
    };
    if let Some(s) = &capture.summary
        && s.malformed_items > 0
    {
        warnings.push(format!(
            "{} ring items of unexpected size were discarded",
            s.malformed_items
        ));
    }
    let mut notes: Vec<String> = time::note(&capture.meta, opts.time).into_iter().collect();
    if kernel_mode {
        notes.push(kernel::NOT_AVAILABLE.to_owned());
    }
    notes.extend(task_filter_note(capture, &functions));
    warnings.extend(set_aside_warnings(&functions));
    Ok(Report {
        meta: meta(capture, opts, calibration.as_ref()),
        functions,
        intervals,
        warnings,
        notes,
    })
}

/// A stream function's time breakdown, the records `--time` set aside, and its slow calls,
/// from the records as recorded.
fn explain(recorded: &Capture, id: u32, opts: &ReportOptions, f: &mut FunctionReport) {
    f.set_aside = time::set_aside(recorded, id, opts);
    let has_breakdown = DisturbanceStatus::breakdown(&recorded.meta);
    if has_breakdown {
        f.breakdown = breakdown::summarize(
            recorded
                .records
                .iter()
                .filter(|r| r.func == id && opts.keeps(r.cpu, r.pid))
                .filter(|r| !opts.clean_only || r.is_clean()),
        );
    }
    f.slow = slow::function(recorded, id, opts, has_breakdown);
}

/// One line per function whose records `--time on-cpu` could not time.
fn set_aside_warnings(functions: &[FunctionReport]) -> Vec<String> {
    functions
        .iter()
        .filter_map(|f| {
            let n = f.set_aside.filter(|&n| n > 0)?;
            Some(format!(
                "{}: {n} of {} calls set aside: their breakdown is unknown (no task clock, or \
                 the entry snapshot was lost), so they have no on-CPU time",
                f.name,
                f.matched + n
            ))
        })
        .collect()
}

/// What the recording's task filter left out: `calls` are the calls of the selected tasks;
/// the others were only counted, per function. `None` for a capture recorded without one.
fn task_filter_note(capture: &Capture, functions: &[FunctionReport]) -> Option<String> {
    let filter = &capture.meta.filter;
    if filter.is_off() {
        return None;
    }
    let total: u64 = functions.iter().map(|f| f.filtered).sum();
    let per_function = functions
        .iter()
        .filter(|f| f.filtered > 0)
        .map(|f| format!("{} {}", f.name, f.filtered))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "recorded with the task filter {}: calls are those of the selected tasks; {total} \
         calls of other tasks were filtered out in the kernel{}",
        filter.describe(),
        if per_function.is_empty() {
            String::new()
        } else {
            format!(" ({per_function})")
        }
    ))
}

/// What the reader must know about the capture as a whole before any function: it is
/// incomplete, or its calibration cannot be read.
fn capture_warnings(
    capture: &Capture,
    hists: Option<&HistSnapshot>,
    calibration: Option<&Calibration>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if capture.summary.is_none() && capture.is_kernel_mode() {
        warnings.push(kernel::incomplete_warning(hists));
    } else if capture.summary.is_none() {
        warnings.push(
            "capture is incomplete (the recorder did not finish): calls and drops are unknown, \
             `calls` below counts records only"
                .to_owned(),
        );
    }
    if capture.meta.calibration.is_some() && calibration.is_none() {
        warnings.push(
            "the capture's calibration is in a shape this damon-trace does not know: latencies \
             are shown raw only"
                .to_owned(),
        );
    }
    warnings
}

/// One function of a stream capture from its selected records.
fn stream_function(
    capture: &Capture,
    status: &FunctionStatus,
    mut sel: Selected,
    opts: &ReportOptions,
    calibration: Option<&Calibration>,
) -> Result<(FunctionReport, FunctionCounters), UsageError> {
    let k = counters(capture, status.id, sel.count);
    let lat = LatencyStats::from_durations(&mut sel.durations);
    let func = FunctionId::try_from(status.id).ok();
    let vname = func.and_then(value_name);
    let value = vname.and_then(|_| ValueStats::from_values(sel.values.iter().copied()));
    let values = func.and_then(|func| {
        let records: Vec<_> = capture
            .records
            .iter()
            .filter(|r| r.func == status.id && opts.keeps_record(r))
            .collect();
        values::function_values(capture, func, &records)
    });
    let buckets = if sel.durations.is_empty() {
        None
    } else {
        let grid = BucketGrid::plan(opts.bucket_ns, opts.max_ns, &[&sel.durations])
            .map_err(|e| UsageError(e.to_string()))?;
        Some(BucketTable {
            rows: grid.count(&sel.durations),
            grid,
        })
    };
    let corrected = calibration
        .and_then(|c| c.floor(status.attach.attach()?, capture.meta.mode))
        .zip(lat)
        .map(|(floor, lat)| Corrected::new(floor, &lat));
    let matched = sel.durations.len() as u64;
    let measured = DisturbanceStatus::measured(&capture.meta);
    let f = FunctionReport {
        disturbance: measured.then_some(sel.disturbance),
        clean_percentiles: LatencyStats::from_durations(&mut sel.clean_durations),
        corrected,
        value_name: vname,
        value,
        values,
        buckets,
        ..FunctionReport::new(
            status,
            crate::capture::Mode::Stream,
            &k,
            sel.count,
            matched,
            lat,
        )
    };
    Ok((f, k))
}

/// The DAMON aggregation-interval facts, and each DAMON function's cost per interval.
fn intervals(
    capture: &Capture,
    opts: &ReportOptions,
    functions: &mut [FunctionReport],
    warnings: &mut Vec<String>,
) -> Option<damon::IntervalsReport> {
    let ids: Vec<u32> = capture
        .meta
        .functions
        .iter()
        .filter(|s| opts.functions.is_empty() || opts.functions.contains(&s.name))
        .map(|s| s.id)
        .collect();
    let mut pairs: Vec<(u32, &mut FunctionReport)> =
        ids.into_iter().zip(functions.iter_mut()).collect();
    damon::add_intervals(capture, &mut pairs, warnings)
}

/// The capture's header as the report states it.
fn meta(capture: &Capture, opts: &ReportOptions, calibration: Option<&Calibration>) -> ReportMeta {
    let m = &capture.meta;
    let filtered = !opts.cpu.is_empty() || !opts.pid.is_empty();
    ReportMeta {
        kernel_release: m.kernel.release.clone(),
        kernel_version: m.kernel.version.clone(),
        boot_id: m.kernel.boot_id.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        capture_tool_version: m.tool_version.clone(),
        cpu_model: m.cpu_model.clone(),
        start_unix_ns: m.start_unix_ns,
        duration_ns: capture.summary.as_ref().map(|s| s.duration_ns),
        end_reason: capture.summary.as_ref().map(|s| s.end_reason.clone()),
        mode: m.mode,
        ring_size: m.ring_size,
        complete: capture.summary.is_some(),
        calibration: m.calibration.clone(),
        latencies: latencies_note(calibration, m.clock.unit()),
        filter: filtered.then(|| FilterEcho {
            cpu: opts.cpu.clone(),
            pid: opts.pid.clone(),
        }),
        damon: damon::context(capture),
        disturbance: disturbance::status(capture),
        clock: m.clock,
        unit: m.clock.unit(),
        time: opts.time,
    }
}

/// What the latency columns are, and what corrected ones subtract (for every format).
pub fn latencies_note(calibration: Option<&Calibration>, unit: &str) -> String {
    let raw = "raw: measured by the probes, including their own cost";
    match calibration {
        None => format!("{raw}; the capture has no calibration, so there is no corrected value"),
        Some(c) if c.status != CalibrationStatus::Ok => format!(
            "{raw}; calibration {}{}, so there is no corrected value",
            match c.status {
                CalibrationStatus::Skipped => "was skipped",
                CalibrationStatus::Pending => "did not finish before the recorder ended",
                _ => "failed",
            },
            c.detail
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ),
        Some(c) => format!(
            "{raw}; corrected: raw minus the probe floor's median for the function's attach \
             method and trace mode, ± its uncertainty (per-call and between-function spread of \
             the probe's cost; negative: below the floor); {}",
            c.floors
                .iter()
                .map(|f| describe_floor(f, unit))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

fn accounting_warnings(
    f: &FunctionReport,
    k: &FunctionCounters,
    ring_size: u32,
    warnings: &mut Vec<String>,
) {
    warnings.extend(crate::accounting::identity_warning(
        &f.name,
        f.calls,
        f.count,
        f.dropped,
        f.in_flight,
    ));
    if f.emitted != f.count {
        warnings.push(format!(
            "{}: the kernel wrote {} records into the ring buffer but the capture holds {}",
            f.name, f.emitted, f.count
        ));
    }
    warnings.extend(crate::accounting::drop_warning(
        &f.name,
        f.attach.attach(),
        k,
        ring_size,
    ));
}
