//! The report of a kernel-mode capture (`record --mode kernel`): the same columns as a stream
//! capture, computed from the kernel's histograms. Count, mean, min and max are exact;
//! percentiles are known to their bucket and carry the range they lie in.
use serde::Serialize;

use super::{BucketTable, FunctionReport, ReportOptions};
use crate::{
    capture::{FunctionCounters, FunctionStatus, HistSnapshot},
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
    let count = k.emitted;
    let corrected = Calibration::from_meta(capture_calibration)
        .and_then(|c| c.floor(status.attach.as_str(), "kernel").cloned())
        .zip(lat.map(|l| l.stats()))
        .map(|(floor, st)| Corrected::new(&floor, &st));
    let f = FunctionReport {
        name: status.name.clone(),
        attach: status.attach.as_str(),
        attach_detail: status.detail.clone(),
        mode: "kernel",
        calls: k.made(),
        count,
        emitted: k.emitted,
        dropped: k.dropped(),
        in_flight: k.in_flight,
        ring_full: k.ring_full,
        stamp_full: k.stamp_full,
        too_deep: k.too_deep,
        orphan_exits: k.orphan_exits,
        stale_entries: k.stale_entries,
        skipped_entries: k.skipped_entries,
        skipped_exits: k.skipped_exits,
        matched: lat.map_or(0, |l| l.count),
        min_ns: lat.map(|l| l.min_ns),
        mean_ns: lat.map(|l| l.mean_ns),
        p50_ns: lat.map(|l| l.p50.value_ns),
        p90_ns: lat.map(|l| l.p90.value_ns),
        p95_ns: lat.map(|l| l.p95.value_ns),
        p99_ns: lat.map(|l| l.p99.value_ns),
        p999_ns: lat.map(|l| l.p999.value_ns),
        max_ns: lat.map(|l| l.max_ns),
        corrected,
        value_name: None,
        value: None,
        values: None,
        buckets,
        per_interval: None,
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
    };
    Ok((f, k))
}

/// The table's line under a kernel-mode function: each percentile's range and the bound.
pub fn resolution_line(name: &str, r: &BucketResolution) -> String {
    format!(
        "{name}: percentiles at bucket resolution ({} ns buckets below {} ns, log2 above), each \
         shown as the top of its range: p50 {}, p90 {}, p95 {}, p99 {}, p99.9 {} (error at \
         most {} ns)",
        r.width_ns,
        r.linear_range_ns,
        r.p50.label(),
        r.p90.label(),
        r.p95.label(),
        r.p99.label(),
        r.p999.label(),
        r.bound_ns
    )
}

/// A kernel-mode capture of `damon_hot_score` (id 0) with these durations bucketed at 10 ns;
/// finished (summary with histograms) or killed (one snapshot only).
#[cfg(test)]
pub fn test_capture(durations: &[u64], finished: bool) -> crate::capture::Capture {
    use crate::{capture::AttachState, stats::kernel_hist::from_durations};
    let mut c = super::tests::capture(true);
    c.records.clear();
    c.meta.mode = "kernel".into();
    c.meta.functions.retain(|f| f.id == 0);
    c.meta.functions[0].attach = AttachState::Fentry;
    let h = from_durations(durations, 10);
    let counters = FunctionCounters {
        calls: h.count + 2,
        emitted: h.count,
        stamp_full: 1,
        in_flight: 1,
        ..Default::default()
    };
    let mut snap = HistSnapshot {
        elapsed_ns: 3_000_000_000,
        ..Default::default()
    };
    snap.functions.insert(0, (counters, h.clone()));
    c.hist_snapshots.push(snap);
    let s = c.summary.as_mut().expect("summary");
    s.counters.clear();
    if finished {
        s.counters.insert(0, counters);
        s.kernel_hist.insert(0, h);
    } else {
        c.summary = None;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{capture::KernelHist, report::build};

    fn opts() -> ReportOptions {
        ReportOptions {
            bucket_ns: 20,
            ..Default::default()
        }
    }

    #[test]
    fn same_columns_from_buckets_with_exact_count_mean_min_max() {
        let d: Vec<u64> = (0..1000).map(|i| 100 + (i * 37) % 400).collect();
        let c = test_capture(&d, true);
        let r = build(&c, &opts()).expect("report");
        let f = &r.functions[0];
        assert_eq!(
            (f.mode, f.calls, f.count, f.dropped, f.in_flight),
            ("kernel", 1002, 1000, 1, 1)
        );
        assert_eq!(f.calls, f.count + f.dropped + f.in_flight);
        assert_eq!((f.min_ns, f.max_ns), (Some(100), Some(499)));
        let mean = d.iter().sum::<u64>() as f64 / 1000.0;
        assert!((f.mean_ns.expect("mean") - mean).abs() < 1e-9);
        let res = f.resolution.as_ref().expect("resolution");
        assert_eq!((res.width_ns, res.linear_range_ns), (10, 5120));
        assert!(res.bound_ns <= 9, "{res:?}");
        let mut sorted = d.clone();
        sorted.sort_unstable();
        let exact = crate::stats::percentile(&sorted, 50.0).expect("p50");
        assert!(res.p50.lo_ns <= exact && exact <= res.p50.value_ns);
        assert_eq!(f.p50_ns, Some(res.p50.value_ns));
        let rows = &f.buckets.as_ref().expect("rows").rows;
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 1000);
        // The one stamp-map drop is said; the identity holds, so nothing else is.
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(
            r.warnings[0].contains("entry-stamp map"),
            "{:?}",
            r.warnings
        );
        let text = super::super::render::table(&r, None);
        assert!(
            text.contains("percentiles at bucket resolution (10 ns buckets"),
            "{text}"
        );
        assert!(text.contains(NOT_AVAILABLE), "{text}");
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["meta"]["mode"], "kernel");
        assert_eq!(json["functions"][0]["resolution"]["bound_ns"], res.bound_ns);
        let csv = super::super::render::csv(&r);
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        let row: Vec<&str> = lines.next().expect("row").split(',').collect();
        let col = header
            .iter()
            .position(|h| *h == "percentile_bound_ns")
            .expect("bound column");
        assert_eq!(header.len(), row.len(), "{csv}");
        assert_eq!(row[col], res.bound_ns.to_string(), "{csv}");
        let md = super::super::render::markdown(&r);
        assert!(md.contains("bucket resolution"), "{md}");
    }

    #[test]
    fn filters_are_refused_and_a_killed_recorder_reads_to_its_last_snapshot() {
        let c = test_capture(&[100, 200], true);
        let err = build(
            &c,
            &ReportOptions {
                cpu: vec![0],
                ..opts()
            },
        )
        .expect_err("no records to filter");
        assert!(err.0.contains("--mode kernel"), "{}", err.0);
        let c = test_capture(&[100, 200], false);
        let r = build(&c, &opts()).expect("report");
        assert_eq!(r.functions[0].count, 2);
        assert!(
            r.warnings[0].contains("last histogram snapshot, 3.0 s"),
            "{:?}",
            r.warnings
        );
        // Nothing recorded at all.
        let mut c = test_capture(&[], false);
        c.hist_snapshots.clear();
        let r = build(&c, &opts()).expect("report");
        assert_eq!(r.functions[0].p50_ns, None);
        let _ = KernelHist::default();
    }

    /// The real kernel-mode capture (7.2 guest, migrate-hot, 10.5 s): every function's
    /// histogram holds exactly its counted calls, snapshots are cumulative, the accounting
    /// identity holds, and the report gives every column with its bound.
    #[test]
    fn real_kernel_mode_capture() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/kernel-mode-7.2.dtcap"
        );
        let c = crate::capture::format::read_file(std::path::Path::new(path)).expect("fixture");
        assert!(c.is_kernel_mode() && c.records.is_empty());
        let s = c.summary.as_ref().expect("finished");
        assert_eq!(s.kernel_hist.len(), 4);
        for (id, h) in &s.kernel_hist {
            assert_eq!(h.buckets.iter().sum::<u64>(), h.count, "function {id}");
            assert_eq!(h.buckets.len(), damon_common::HIST_BUCKETS as usize);
            assert!(h.count > 0 && h.min_ns <= h.max_ns);
        }
        assert!(c.hist_snapshots.len() >= 9, "{}", c.hist_snapshots.len());
        for w in c.hist_snapshots.windows(2) {
            assert!(w[0].elapsed_ns < w[1].elapsed_ns);
            for (id, (k, h)) in &w[1].functions {
                let (k0, h0) = &w[0].functions[id];
                assert!(k.calls >= k0.calls && h.count >= h0.count);
                assert!(h.buckets.iter().zip(&h0.buckets).all(|(a, b)| a >= b));
            }
        }
        let r = build(&c, &opts()).expect("report");
        assert_eq!(r.functions.len(), 4);
        for f in &r.functions {
            assert_eq!(f.mode, "kernel");
            assert!(f.calls > 0, "{}", f.name);
            assert_eq!(f.calls, f.count + f.dropped + f.in_flight, "{}", f.name);
            let res = f.resolution.as_ref().expect("resolution");
            assert_eq!(f.p50_ns, Some(res.p50.value_ns));
            assert!(f.min_ns <= f.p50_ns && f.p50_ns <= f.p99_ns && f.p99_ns <= f.max_ns);
            let rows = &f.buckets.as_ref().expect("rows").rows;
            assert_eq!(
                rows.iter().map(|r| r.count).sum::<u64>(),
                f.count,
                "{}",
                f.name
            );
        }
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }
}
