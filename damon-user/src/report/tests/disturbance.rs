//! Disturbance in the report: exact fractions per reason, percentiles over the clean calls
//! beside the raw ones, and captures that did not measure it say so.
use damon_common::CallRecord;

use super::render;
use crate::{
    analysis::{
        build,
        test_support::{as_kernel, capture, disturbed_capture, opts},
    },
    capture::DisturbanceStatus,
    stats::LatencyStats,
};

#[test]
fn disturbed_fraction_and_clean_percentiles_beside_raw() {
    let c = disturbed_capture();
    let r = build(&c, &opts()).expect("report");
    let f = &r.functions[0];
    let d = f.disturbance.expect("measured");
    assert_eq!(
        (d.clean, d.slept, d.preempted, d.interrupted, d.lost),
        (8, 4, 3, 4, 1)
    );
    assert_eq!(d.clean_fraction(), Some(0.4));
    // Raw percentiles over all 20, clean ones over exactly the clean subset.
    let mut all: Vec<u64> = c.records.iter().map(|r| r.duration_ns).collect();
    let mut clean: Vec<u64> = c
        .records
        .iter()
        .filter(|r| r.is_clean())
        .map(|r| r.duration_ns)
        .collect();
    assert_eq!(
        f.p99_ns,
        LatencyStats::from_durations(&mut all).map(|l| l.p99_ns)
    );
    let want = LatencyStats::from_durations(&mut clean).expect("clean calls");
    assert_eq!(f.clean_percentiles, Some(want));
    assert_eq!((want.p50_ns, want.max_ns), (400, 800));
    assert_eq!(f.matched, 20);
    let json = serde_json::to_value(&r).expect("json");
    let fj = &json["functions"][0];
    assert_eq!(fj["disturbance"]["clean"], 8);
    assert_eq!(fj["disturbance"]["slept"], 4);
    assert_eq!(fj["disturbance"]["preempted"], 3);
    assert_eq!(fj["disturbance"]["interrupted"], 4);
    assert_eq!(fj["disturbance"]["lost"], 1);
    assert_eq!(fj["disturbance"]["clean_fraction"], 0.4);
    assert_eq!(fj["clean_percentiles"]["p50_ns"], 400);
    assert_eq!(json["meta"]["disturbance"]["measured"], true);
    assert_eq!(
        json["meta"]["disturbance"]["hardirq_sources"][0],
        "kstat.irqs_sum"
    );
    let text = render::table(&r, None);
    assert!(
        text.contains(
            "lock_timer_base: disturbed 60.00% of 20 calls (slept 4, preempted 3, interrupted \
             only 4, snapshot lost 1); the `clean` row has the latencies of the 8 clean calls"
        ),
        "{text}"
    );
    let clean_row = text
        .lines()
        .find(|l| l.starts_with("  clean"))
        .expect("clean row");
    assert!(
        clean_row.contains(" 8 ") && clean_row.ends_with(" 800"),
        "{clean_row}"
    );
    assert!(render::markdown(&r).contains("| ↳ clean |"));
}

/// `--cpu` selects the records the fractions and clean percentiles describe, as the raw ones.
#[test]
fn the_cpu_filter_applies_to_disturbance_too() {
    let c = disturbed_capture();
    let r = build(
        &c,
        &crate::analysis::ReportOptions {
            cpu: vec![1],
            ..opts()
        },
    )
    .expect("report");
    let f = &r.functions[0];
    let d = f.disturbance.expect("measured");
    let on_1: Vec<&CallRecord> = c.records.iter().filter(|r| r.cpu == 1).collect();
    assert_eq!(d.calls(), on_1.len() as u64);
    assert_eq!(d.clean, on_1.iter().filter(|r| r.is_clean()).count() as u64);
    assert_eq!(f.clean_percentiles.map(|l| l.max_ns), Some(700));
}

#[test]
fn captures_that_did_not_measure_say_why_in_one_line_and_null() {
    // Written before disturbance existed: its zero counts are not "clean".
    let old = capture(true);
    let r = build(&old, &opts()).expect("report");
    assert_eq!(r.functions[0].disturbance, None);
    assert_eq!(r.functions[0].clean_percentiles, None);
    let json = serde_json::to_value(&r).expect("json");
    assert!(json["functions"][0]["disturbance"].is_null());
    assert!(json["functions"][0]["clean_percentiles"].is_null());
    assert_eq!(json["meta"]["disturbance"]["measured"], false);
    let text = render::table(&r, None);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("disturb")).collect();
    assert_eq!(
        lines,
        [
            "disturbance: not measured (the capture was written before damon-trace measured it): \
          the latencies include calls that slept, were preempted or interrupted"
        ]
    );
    assert!(!text.contains("  clean"));
    // The recorder's own reason is passed on.
    let mut c = capture(true);
    c.meta.disturbance = Some(DisturbanceStatus {
        measured: false,
        why_not: Some("kernel mode keeps no per-call records".into()),
        hardirq_sources: Vec::new(),
        breakdown: false,
        irq_time_missing: None,
        irq_clock: None,
    });
    let r = build(&c, &opts()).expect("report");
    assert!(
        render::table(&r, None)
            .contains("disturbance: not measured (kernel mode keeps no per-call records)")
    );
    assert_eq!(
        serde_json::to_value(&r).expect("json")["meta"]["disturbance"]["why_not"],
        "kernel mode keeps no per-call records"
    );
}

/// Kernel mode: the same fractions as the records give, and the clean calls' percentiles at
/// bucket resolution (each the top of the bucket the clean calls' exact percentile is in).
#[test]
fn kernel_mode_splits_its_histogram_into_clean_and_disturbed_calls() {
    let stream = disturbed_capture();
    let kernel = as_kernel(&stream, 10);
    let (rs, rk) = (
        build(&stream, &opts()).expect("report"),
        build(&kernel, &opts()).expect("report"),
    );
    let (fs, fk) = (&rs.functions[0], &rk.functions[0]);
    assert_eq!(fk.mode, crate::capture::Mode::Kernel);
    assert_eq!(fk.disturbance, fs.disturbance);
    let (cs, ck) = (
        fs.clean_percentiles.expect("clean"),
        fk.clean_percentiles.expect("clean"),
    );
    // Clean calls 100..=800 fall on bucket bottoms at 10 ns: each top is the value + 9, but
    // never above the clean calls' last bucket top.
    assert_eq!((ck.p50_ns, ck.p99_ns), (cs.p50_ns + 9, cs.p99_ns + 9));
    assert_eq!((ck.min_ns, ck.max_ns), (100, 809));
    assert!((ck.mean_ns - cs.mean_ns).abs() < 1e-9, "{ck:?} {cs:?}");
    // Raw percentiles still count every call (the exact max narrows the last bucket).
    assert_eq!(fk.p99_ns, Some(12_000));
    let text = render::table(&rk, None);
    assert!(
        text.contains("lock_timer_base: disturbed 60.00% of 20 calls (slept 4, preempted 3"),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("  clean")), "{text}");
}
