//! The analysis's tests: what [`build`] makes of a capture (accounting, filters, the real
//! captures' numbers), kernel-mode histograms, values and DAMON's diff. Its rendering is
//! tested in `report/tests`.
mod damon;
mod kernel;
mod values;

use std::path::Path;

use damon_common::attach::Attach;

use crate::{
    analysis::{test_support::*, *},
    capture::format::read_file,
};

#[test]
fn filters_select_records_but_keep_the_accounting() {
    let o = ReportOptions {
        cpu: vec![0],
        ..opts()
    };
    let r = build(&capture(true), &o).expect("report");
    let f = &r.functions[0];
    // cpu = i % 3 == 0 for i in 3, 6, 9.
    assert_eq!(
        (f.count, f.matched, f.min_ns, f.max_ns),
        (10, 3, Some(30), Some(90))
    );
    assert_eq!(f.calls, f.count + f.dropped + f.in_flight);
    let o = ReportOptions {
        pid: vec![101],
        functions: vec!["damon_hot_score".into()],
        ..opts()
    };
    let r = build(&capture(true), &o).expect("report");
    assert_eq!(r.functions.len(), 1);
    assert_eq!(r.functions[0].matched, 5);
    assert!(r.meta.filter.is_some());
    let o = ReportOptions {
        functions: vec!["nope".into()],
        ..opts()
    };
    let e = build(&capture(true), &o).expect_err("unknown name");
    assert!(e.to_string().contains("damon_hot_score"), "{e}");
}

#[test]
fn flags_accounting_gaps_and_incomplete_captures() {
    let mut c = capture(true);
    c.records.pop();
    let r = build(&c, &opts()).expect("report");
    assert!(
        r.warnings.iter().any(|w| w.contains("1 calls unaccounted")),
        "{:?}",
        r.warnings
    );
    let r = build(&capture(false), &opts()).expect("report");
    assert!(!r.meta.complete);
    assert!(r.warnings[0].contains("incomplete"));
}

/// The real 7.2 capture (the one docs/live.md replays): its numbers, and tables that add up.
#[test]
fn real_capture() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrate-hot-7.2.dtcap");
    let c = read_file(&path).expect("fixture");
    let r = build(&c, &opts()).expect("report");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let hot = &r.functions[0];
    assert_eq!(hot.name, "damon_hot_score");
    assert_eq!(
        (hot.count, hot.p50_ns, hot.p99_ns),
        (2961, Some(1051), Some(24356))
    );
    for f in &r.functions {
        let t = f.buckets.as_ref().expect("every function has records");
        assert_eq!(t.rows.iter().map(|r| r.count).sum::<u64>(), f.matched);
        assert!(t.rows.len() <= 42, "{}: {} rows", f.name, t.rows.len());
        let p = [
            f.min_ns, f.p50_ns, f.p90_ns, f.p95_ns, f.p99_ns, f.p999_ns, f.max_ns,
        ];
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
    }
}

/// A real calibrated capture (7.2 guest, `record --duration 5s`, default calibration): its
/// floor reads back with the histogram it was computed from, and every traced function with
/// records is shown corrected by exactly the floor's median.
#[test]
fn real_calibrated_capture() {
    use crate::stats::calibration::{Calibration, CalibrationStatus, FloorDistribution};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/calibrated-7.2.dtcap");
    let c = read_file(&path).expect("calibrated fixture");
    let cal = Calibration::from_meta(c.meta.calibration.as_ref()).expect("typed calibration");
    assert_eq!(cal.status, CalibrationStatus::Ok);
    assert_eq!(cal.calls, 20_000);
    let floor = cal
        .floor(Attach::Fentry, crate::capture::Mode::Stream)
        .expect("fentry/stream floor");
    let dist = floor.floor.as_ref().expect("measured");
    assert_eq!(
        dist.count,
        4 * 20_000,
        "every call of the four pooled functions timed"
    );
    assert_eq!(floor.functions.len(), 4);
    // The stored histogram is the distribution: recomputing from it gives the same summary.
    let again = FloorDistribution::from_buckets(
        dist.buckets.clone(),
        Some((dist.mean_ns * dist.count as f64).round() as u128),
        dist.min_ns,
        dist.max_ns,
    )
    .expect("histogram");
    assert_eq!(
        (again.median_ns, again.p5_ns, again.p95_ns, again.spread_ns),
        (dist.median_ns, dist.p5_ns, dist.p95_ns, dist.spread_ns)
    );
    let held = floor.held_out.as_ref().expect("held-out check");
    assert!(
        held.corrected_median_ns.abs() <= floor.uncertainty_ns,
        "{held:?}"
    );

    let r = build(&c, &opts()).expect("report");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let timer = r
        .functions
        .iter()
        .find(|f| f.name == "lock_timer_base")
        .expect("timer");
    let k = timer.corrected.expect("lock_timer_base corrected");
    assert_eq!(k.floor_ns, dist.median_ns);
    assert_eq!(k.p50_ns, timer.p50_ns.expect("p50") as f64 - dist.median_ns);
    for f in r.functions.iter().filter(|f| f.matched == 0) {
        assert!(f.corrected.is_none(), "{}: nothing to correct", f.name);
    }
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["meta"]["calibration"]["status"], "ok");
    assert!(json["meta"]["calibration"]["floors"][0]["floor"]["buckets"].is_array());
}
