use damon_common::{AGGREGATION_MARK, CallRecord};

use crate::{
    capture::Capture,
    compare::intervals::{IntervalComparison, compare, lines, of_run},
    stats::intervals::PerInterval,
};

fn bare_capture() -> Capture {
    crate::analysis::test_support::stream_capture(Vec::new(), Vec::new(), None)
}

fn with(durations_per_interval: &[u64]) -> Capture {
    let mut c = bare_capture();
    for i in 0..=durations_per_interval.len() as u64 {
        c.marks.push(CallRecord {
            entry_ns: i * 1000,
            tid: 9,
            func: AGGREGATION_MARK,
            ..CallRecord::default()
        });
    }
    for (i, d) in durations_per_interval.iter().enumerate() {
        c.records.push(CallRecord {
            entry_ns: i as u64 * 1000 + 10,
            duration_ns: *d,
            tid: 9,
            func: 0,
            ..CallRecord::default()
        });
    }
    c
}

/// The runs' per-interval numbers of function 0, as `build` hands them over.
fn cmp(before: &[&Capture], after: &[&Capture]) -> Option<IntervalComparison> {
    let runs = |side: &[&Capture]| -> Vec<PerInterval> {
        side.iter().filter_map(|c| of_run(c, 0)).collect()
    };
    let (b, a) = (runs(before), runs(after));
    compare(
        &b.iter().collect::<Vec<_>>(),
        &a.iter().collect::<Vec<_>>(),
        "ns",
    )
}

#[test]
fn before_after_per_interval() {
    let b = with(&[100, 120, 110, 130]);
    let a = with(&[10, 12, 11, 13]);
    let c = cmp(&[&b], &[&a]).expect("both have intervals");
    assert_eq!(c.before.as_ref().map(|s| s.mean_total_ns), Some(115.0));
    assert_eq!(c.after.as_ref().map(|s| s.max_total_ns), Some(13));
    // One run a side: the intervals of one run are not independent, no interval.
    assert!(c.mean_total_delta.is_none());
    let text = lines(&c).join("\n");
    assert!(text.contains("ns mean"), "{text}");
    assert!(
        text.contains("per-interval verdict: none with 1 and 1 runs"),
        "{text}"
    );
    // Two runs a side: pooled, and Welch over the runs' means (115, 215 vs 11.5, 21.5).
    let b2 = with(&[200, 220, 210, 230]);
    let a2 = with(&[20, 22, 21, 23]);
    let c = cmp(&[&b, &b2], &[&a, &a2]).expect("intervals");
    let side = c.before.as_ref().expect("before");
    assert_eq!((side.intervals, side.mean_total_ns), (8, 165.0));
    assert_eq!(side.run_mean_total_ns, vec![115.0, 215.0]);
    let d = c.mean_total_delta.expect("delta");
    assert!((d.estimate + 148.5).abs() < 1e-9, "{d:?}");
    assert!(d.lo < -148.5 && d.hi > -148.5, "{d:?}");
    let text = lines(&c).join("\n");
    assert!(text.contains("(Welch, per-run means)"), "{text}");
    // Run means 115, 215 against 11.5, 21.5: SD 70.7 before, the difference not resolved.
    assert!(d.p_value > 0.05, "{d:?}");
    assert!(
        text.contains("per-interval verdict: no significant difference over 2 and 2 runs"),
        "{text}"
    );
    // Three runs a side, close together: resolved, and the direction named.
    let (b3, a3) = (with(&[120, 120]), with(&[12, 12]));
    let (b4, a4) = (with(&[110, 110]), with(&[11, 11]));
    let (b5, a5) = (with(&[115, 115]), with(&[13, 13]));
    let c = cmp(&[&b3, &b4, &b5], &[&a3, &a4, &a5]).expect("intervals");
    let d = c.mean_total_delta.expect("delta");
    assert!(d.p_value < 0.001 && d.hi < 0.0, "{d:?}");
    assert!(
        c.verdict
            .starts_with("per-interval verdict: after spends 103 ns less an interval"),
        "{}",
        c.verdict
    );
    assert!(c.verdict.contains("over 3 and 3 runs"), "{}", c.verdict);
    // An older capture without boundaries on one side: shown as "-".
    let old = bare_capture();
    let c = cmp(&[&old], &[&a]).expect("after has intervals");
    assert!(c.before.is_none() && c.mean_total_delta.is_none());
    assert!(cmp(&[&old], &[&old]).is_none());
}

#[test]
fn real_capture_against_the_old_fixture_and_itself() {
    use std::path::Path;

    use crate::{
        analysis::ReportOptions,
        capture::format::read_file,
        compare::{Inputs, build, render},
    };
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");
    let new = read_file(Path::new(&format!("{dir}intervals-7.2.dtcap"))).expect("new");
    let old = read_file(Path::new(&format!("{dir}migrate-hot-7.2.dtcap"))).expect("old");
    let opts = ReportOptions {
        bucket_ns: 20,
        ..ReportOptions::default()
    };
    let same = build(&Inputs::pair(("a", &new), ("b", &new)), &opts).expect("compare");
    let hot = same.functions[0]
        .per_interval
        .as_ref()
        .expect("per interval");
    assert_eq!(hot.before.as_ref().map(|s| s.intervals), Some(129));
    assert_eq!(
        hot.before.as_ref().map(|s| s.mean_total_ns),
        hot.after.as_ref().map(|s| s.mean_total_ns)
    );
    assert!(
        same.functions[3].per_interval.is_none(),
        "not a DAMON function"
    );
    let table = render::table(&same);
    assert!(
        table.contains("\nper interval         before        after after−before\n"),
        "{table}"
    );
    // A capture from before the interval hook: its side is "-", nothing breaks.
    let mixed = build(&Inputs::pair(("old", &old), ("new", &new)), &opts).expect("compare");
    let hot = mixed.functions[0]
        .per_interval
        .as_ref()
        .expect("after side");
    assert!(hot.before.is_none() && hot.after.is_some());
    assert!(render::markdown(&mixed).contains("Time per DAMON aggregation interval"));
}
