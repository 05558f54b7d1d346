//! Disturbance in compare: each side's disturbed fraction and clean percentiles beside the raw
//! ones, and `--clean`, which judges on the clean calls only, across runs.
use damon_common::{CallRecord, disturb};

use super::{run, timer};
use crate::{
    analysis::{ReportOptions, test_support::opts},
    capture::{Capture, DisturbanceStatus},
    compare::{Comparison, Inputs, build, render},
    stats::LatencyStats,
};

/// A run of lock_timer_base: 400 clean calls (the spread shifted by `shift`) and `disturbed`
/// calls of 5000 ns and more, taking turns slept, preempted and interrupted; measured.
fn run_with(shift: i64, disturbed: usize) -> Capture {
    let mut c = run(400, shift);
    let reasons = [
        [1, 0, disturb::UNKNOWN, disturb::UNKNOWN],
        [0, 1, disturb::UNKNOWN, disturb::UNKNOWN],
        [0, 0, 2, 1],
    ];
    for i in 0..disturbed {
        let mut r = CallRecord {
            entry_ns: 1_000_000 + i as u64,
            duration_ns: 5000 + i as u64,
            func: 3,
            ..CallRecord::default()
        };
        r.set_disturbance(reasons[i % 3]);
        c.records.push(r);
    }
    let n = c.records.len() as u64;
    let counters = &mut c.summary.as_mut().expect("summary").counters;
    counters.insert(3, crate::capture::FunctionCounters::all_recorded(n));
    c.meta.disturbance = Some(DisturbanceStatus {
        measured: true,
        why_not: None,
        hardirq_sources: vec!["kstat.irqs_sum".into()],
        breakdown: false,
        irq_time_missing: None,
        irq_clock: None,
    });
    c
}

/// Three runs a side whose clean calls are alike; after, 60 % of the calls were disturbed
/// (and slow), before 10 %.
fn sides() -> (Vec<Capture>, Vec<Capture>) {
    (
        [0, 3, -3].map(|s| run_with(s, 44)).into(),
        [1, -2, 2].map(|s| run_with(s, 600)).into(),
    )
}

fn compare_with(b: &[Capture], a: &[Capture], opts: &ReportOptions) -> Comparison {
    build(
        &Inputs {
            before: b.iter().map(|c| ("before.dtcap", c)).collect(),
            after: a.iter().map(|c| ("after.dtcap", c)).collect(),
        },
        opts,
    )
    .expect("comparison")
}

/// The clean durations of lock_timer_base, all runs pooled.
fn clean_durations(runs: &[Capture]) -> Vec<u64> {
    runs.iter()
        .flat_map(|c| &c.records)
        .filter(|r| r.func == 3 && r.is_clean())
        .map(|r| r.duration_ns)
        .collect()
}

#[test]
fn each_side_shows_its_disturbed_fraction_and_clean_percentiles_beside_raw() {
    let (b, a) = sides();
    let c = compare_with(&b, &a, &opts());
    let f = timer(&c);
    let (db, da) = (
        f.before.disturbance.expect("measured"),
        f.after.disturbance.expect("measured"),
    );
    assert_eq!((db.clean, db.disturbed(), db.slept), (1200, 132, 45));
    assert_eq!(
        (da.clean, da.disturbed(), da.interrupted),
        (1200, 1800, 600)
    );
    assert_eq!(da.clean_fraction(), Some(0.4));
    assert_eq!(f.before.matched, 1332, "raw: every call");
    assert_eq!(
        f.before.clean_percentiles,
        LatencyStats::from_durations(&mut clean_durations(&b))
    );
    assert_eq!(
        f.after.clean_percentiles,
        LatencyStats::from_durations(&mut clean_durations(&a))
    );
    assert!(f.significant, "raw calls differ: {}", f.verdict);
    assert!(!f.verdict.contains("clean"), "{}", f.verdict);
    assert!(!c.method.clean_only);
    let text = render::table(&c);
    assert!(
        text.contains(
            "before: disturbed 9.91% of 1332 calls (slept 45, preempted 45, interrupted only \
             42, snapshot lost 0); after: disturbed 60.00% of 3000 calls"
        ),
        "{text}"
    );
    assert!(
        text.contains("clean calls only (1200 before, 1200 after"),
        "{text}"
    );
    let json = serde_json::to_value(&c).expect("json");
    let fj = &json["functions"][1];
    assert_eq!(fj["name"], "lock_timer_base");
    assert_eq!(fj["after"]["disturbance"]["clean_fraction"], 0.4);
    assert!(fj["after"]["clean_percentiles"]["p50_ns"].is_u64());
}

#[test]
fn clean_judges_on_clean_calls_only_across_runs_and_says_so() {
    let (b, a) = sides();
    let clean = ReportOptions {
        clean_only: true,
        ..opts()
    };
    let c = compare_with(&b, &a, &clean);
    let f = timer(&c);
    assert_eq!((f.before.matched, f.after.matched), (1200, 1200));
    // The percentiles judged are those of the clean calls.
    let want = LatencyStats::from_durations(&mut clean_durations(&a)).expect("clean");
    assert_eq!(f.after.stats, Some(want));
    let p50 = f
        .percentiles
        .iter()
        .find(|p| p.label == "p50")
        .expect("p50");
    assert_eq!(p50.after_ns, want.p50_ns);
    assert_eq!(
        f.runs.after.iter().map(|r| r.matched).collect::<Vec<_>>(),
        [400, 400, 400]
    );
    assert!(!f.significant, "clean calls are alike: {}", f.verdict);
    assert!(
        f.verdict.ends_with(
            "(judged on clean calls only: 1200 of 1332 calls before, 1200 of 3000 after)"
        ),
        "{}",
        f.verdict
    );
    assert!(c.method.clean_only);
    assert!(c.method.judged_on.starts_with("clean calls only"));
    let json = serde_json::to_value(&c).expect("json");
    assert_eq!(json["method"]["clean_only"], true);
    // Calls and drops stay every call's.
    assert_eq!(f.after.calls, 3000);
    let text = render::table(&c);
    assert!(text.contains("calls judged: clean calls only"), "{text}");
    assert!(
        !text.contains("clean calls only (1200 before"),
        "no second table: {text}"
    );
    // The raw comparison of the same sides still says every call.
    let raw = compare_with(&b, &a, &opts());
    assert_eq!(timer(&raw).after.stats.map(|s| s.max_ns), Some(5599));
}

#[test]
fn clean_on_a_capture_that_did_not_measure_names_it_why_and_the_remedy() {
    let (b, _) = sides();
    let old = run(400, 0);
    let clean = ReportOptions {
        clean_only: true,
        ..opts()
    };
    let err = build(
        &Inputs {
            before: b.iter().map(|c| ("before.dtcap", c)).collect(),
            after: vec![("old.dtcap", &old)],
        },
        &clean,
    )
    .expect_err("not measured");
    let msg = err.to_string();
    assert!(
        msg.contains(
            "--clean: the after capture old.dtcap did not measure which calls were disturbed \
             (the capture was written before damon-trace measured it)"
        ),
        "{msg}"
    );
    assert!(msg.contains("record it again with --disturbance"), "{msg}");
    // Without --clean the same captures compare, the old side "not measured".
    let c = build(
        &Inputs {
            before: b.iter().map(|c| ("before.dtcap", c)).collect(),
            after: vec![("old.dtcap", &old)],
        },
        &opts(),
    )
    .expect("comparison");
    let f = timer(&c);
    assert!(f.after.disturbance.is_none() && f.after.clean_percentiles.is_none());
    let text = render::table(&c);
    assert!(text.contains("; after: not measured"), "{text}");
    assert!(
        text.contains("disturbance not measured in old.dtcap (the capture was written before"),
        "{text}"
    );
}

/// Kernel mode: the same sides recorded as histograms with their disturbed calls. Each side
/// has the records' fractions, `--clean` judges on the clean calls' histograms (no difference,
/// as with the records) where every call differs, and a kernel side compares with a stream
/// side of the same calls.
#[test]
fn kernel_captures_compare_on_their_clean_calls_too() {
    use crate::analysis::test_support::as_kernel;
    let (b, a) = sides();
    let (kb, ka): (Vec<Capture>, Vec<Capture>) = (
        b.iter().map(|c| as_kernel(c, 10)).collect(),
        a.iter().map(|c| as_kernel(c, 10)).collect(),
    );
    let raw = compare_with(&kb, &ka, &opts());
    let f = timer(&raw);
    let da = f.after.disturbance.expect("measured");
    assert_eq!(
        (da.clean, da.disturbed(), da.interrupted),
        (1200, 1800, 600)
    );
    assert!(f.significant, "every call: {}", f.verdict);
    let clean = ReportOptions {
        clean_only: true,
        ..opts()
    };
    for (before, after) in [(&kb, &ka), (&b, &ka), (&kb, &a)] {
        let c = compare_with(before, after, &clean);
        let f = timer(&c);
        assert_eq!((f.before.matched, f.after.matched), (1200, 1200));
        assert!(!f.significant, "clean calls are alike: {}", f.verdict);
        assert!(
            f.verdict.ends_with(
                "(judged on clean calls only: 1200 of 1332 calls before, 1200 of 3000 after)"
            ),
            "{}",
            f.verdict
        );
        assert!(f.after.clean_percentiles.is_some());
    }
}
