//! The report of a kernel-mode capture (`record --mode kernel`): the same columns as a stream
//! capture, computed from the kernel's histograms. Count, mean, min and max are exact;
//! percentiles are known to their bucket and carry the range they lie in.
use serde::Serialize;

use super::{BucketTable, FunctionReport, ReportOptions};
use crate::{
    capture::{FunctionCounters, FunctionStatus, HistSnapshot, KernelHist, Mode},
    error::UsageError,
    stats::{
        calibration::{Calibration, Corrected},
        kernel_hist::{self, BucketPercentile},
    },
};

/// How exact a kernel-mode function's percentiles are.
#[derive(Debug, Clone, Serialize)]
pub struct BucketResolution {
    /// Linear bucket width, ns: the resolution below `linear_range_ns`.
    pub width_ns: u64,
    /// Above this, buckets double in width (log2).
    pub linear_range_ns: u64,
    /// The largest error of the percentiles shown: each `pNN_ns` is an upper bound, the true
    /// value is at most this much lower.
    pub bound_ns: u64,
    /// Each percentile's range: the true value is in `lo_ns..=value_ns`.
    pub p50: BucketPercentile,
    pub p90: BucketPercentile,
    pub p95: BucketPercentile,
    pub p99: BucketPercentile,
    pub p999: BucketPercentile,
}

/// What a kernel-mode capture cannot show, said once instead of showing nothing.
pub const NOT_AVAILABLE: &str = "kernel mode keeps no per-call records: per-CPU and per-process \
     filters (--cpu, --pid), time per DAMON aggregation interval, returned values and argument \
     values are not available (record with --mode stream for them)";

/// `--cpu`/`--pid` select records; a kernel-mode capture has none.
pub fn check_options(opts: &ReportOptions) -> Result<(), UsageError> {
    if opts.cpu.is_empty() && opts.pid.is_empty() {
        return Ok(());
    }
    Err(UsageError(
        "--cpu and --pid select per-call records, and this capture was recorded with --mode \
         kernel (histograms summed over CPUs and tasks in the kernel, no records): drop the \
         filter, or record with --mode stream"
            .to_owned(),
    ))
}

/// The warning of a kernel-mode capture whose recorder did not finish.
pub fn incomplete_warning(last: Option<&HistSnapshot>) -> String {
    match last {
        Some(s) => format!(
            "capture is incomplete (the recorder did not finish): the numbers are those of its \
             last histogram snapshot, {:.1} s into the session",
            s.elapsed_ns as f64 / 1e9
        ),
        None => "capture is incomplete (the recorder did not finish) and holds no histogram \
                 snapshot: nothing was measured"
            .to_owned(),
    }
}

/// One function's line and range table from its histogram (absent: nothing was counted).
pub fn function(
    status: &FunctionStatus,
    end: Option<&HistSnapshot>,
    opts: &ReportOptions,
    capture_calibration: Option<&serde_json::Value>,
) -> Result<(FunctionReport, FunctionCounters), UsageError> {
    let (k, hist) = end
        .and_then(|e| e.functions.get(&status.id))
        .map_or((FunctionCounters::default(), None), |(c, h)| (*c, Some(h)));
    let lat = hist.and_then(kernel_hist::latency);
    let buckets = match hist.filter(|_| lat.is_some()) {
        Some(h) => {
            let grid = kernel_hist::plan_grid(opts.bucket_ns, opts.max_ns, &[h])
                .map_err(|e| UsageError(e.to_string()))?;
            Some(BucketTable {
                rows: kernel_hist::count_rows(&grid, h),
                grid,
            })
        }
        None => None,
    };
    let corrected = Calibration::from_meta(capture_calibration)
        .and_then(|c| c.floor(status.attach.attach()?, Mode::Kernel).cloned())
        .zip(lat.map(|l| l.stats()))
        .map(|(floor, st)| Corrected::new(&floor, &st));
    let clean = hist.and_then(KernelHist::clean);
    let f = FunctionReport {
        disturbance: hist.and_then(KernelHist::disturbance),
        clean_percentiles: clean
            .as_ref()
            .and_then(kernel_hist::latency)
            .map(|l| l.stats()),
        corrected,
        buckets,
        resolution: lat.map(|l| BucketResolution {
            width_ns: l.width_ns,
            linear_range_ns: kernel_hist::linear_range_ns(l.width_ns),
            bound_ns: l.bound_ns(),
            p50: l.p50,
            p90: l.p90,
            p95: l.p95,
            p99: l.p99,
            p999: l.p999,
        }),
        ..FunctionReport::new(
            status,
            Mode::Kernel,
            &k,
            k.emitted,
            lat.map_or(0, |l| l.count),
            lat.map(|l| l.stats()),
        )
    };
    Ok((f, k))
}
