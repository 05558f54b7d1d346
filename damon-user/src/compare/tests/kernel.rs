use crate::{
    analysis::{ReportOptions, Selected, test_support::opts},
    capture::FunctionCounters,
    compare::{
        Inputs, build,
        kernel::{MAX_EXPANDED, Resolution, proportional, rebucket, side, stats},
    },
    stats::kernel_hist,
};

/// A kernel capture and a stream capture of the same durations compare as equal: same
/// bucketed percentiles, same rows, no significant difference, resolution stated.
#[test]
fn kernel_and_stream_of_the_same_calls_agree() {
    let d: Vec<u64> = (0..400).map(|i| 100 + (i * 37) % 300).collect();
    let k = crate::analysis::test_support::test_capture(&d, true);
    let mut s = crate::analysis::test_support::capture(true);
    s.records = d
        .iter()
        .map(|&v| damon_common::CallRecord {
            duration_ns: v,
            func: 0,
            ..Default::default()
        })
        .collect();
    let counters = s
        .summary
        .as_mut()
        .expect("summary")
        .counters
        .get_mut(&0)
        .expect("0");
    *counters = FunctionCounters {
        calls: 400,
        emitted: 400,
        ..Default::default()
    };
    for (before, after) in [(&k, &s), (&s, &k), (&k, &k)] {
        let cmp = build(&Inputs::pair(("b", before), ("a", after)), &opts()).expect("compare");
        let f = &cmp.functions[0];
        assert!(!f.significant, "{}", f.verdict);
        assert!(
            f.verdict.contains("at bucket resolution: 10 ns"),
            "{}",
            f.verdict
        );
        for p in &f.percentiles {
            assert_eq!(p.before_ns, p.after_ns, "{}", p.label);
        }
        assert!(f.rows.iter().all(|r| r.before == r.after), "{:?}", f.rows);
        assert_eq!(f.rows.iter().map(|r| r.before).sum::<u64>(), 400);
        let (b, a) = (f.before.stats.expect("b"), f.after.stats.expect("a"));
        assert_eq!((b.min_ns, b.max_ns), (100, 399));
        assert!((b.mean_ns - a.mean_ns).abs() < 1e-9);
    }
    // A shift of 50 ns is described (one run a side: never judged), at bucket resolution.
    let slower = crate::analysis::test_support::test_capture(
        &d.iter().map(|v| v + 50).collect::<Vec<_>>(),
        true,
    );
    let cmp = build(&Inputs::pair(("b", &s), ("a", &slower)), &opts()).expect("compare");
    let f = &cmp.functions[0];
    assert!(
        !f.significant && f.verdict.contains("differ by +50 ns at the median"),
        "{}",
        f.verdict
    );
    let p50 = &f.percentiles[0];
    assert_eq!(p50.after_ns - p50.before_ns, 50);
}

#[test]
fn filters_are_refused_with_a_kernel_capture() {
    let k = crate::analysis::test_support::test_capture(&[100], true);
    let s = crate::analysis::test_support::capture(true);
    let err = build(
        &Inputs::pair(("b", &s), ("a", &k)),
        &ReportOptions {
            pid: vec![1],
            ..opts()
        },
    )
    .expect_err("refused");
    assert!(err.0.contains("--mode kernel"), "{}", err.0);
}

#[test]
fn huge_histograms_are_compared_through_a_proportional_sample() {
    let b = proportional(&[0, 7, 3, 0, 1_000_000_000, 1], 1000);
    assert_eq!(b.iter().sum::<u64>(), 1000);
    assert_eq!(b[4], 1000);
    let b = proportional(&[1, 1, 1], 2);
    assert_eq!(b, [1, 1, 0]);
    assert_eq!(proportional(&[5, 5], 100), [5, 5]);
    let mut h = kernel_hist::from_durations(&[100, 200], 10);
    h.buckets[10] = 30_000_000;
    h.buckets[20] = 10_000_000;
    h.count = 40_000_002;
    let mut c = crate::analysis::test_support::test_capture(&[1], true);
    c.summary
        .as_mut()
        .expect("summary")
        .kernel_hist
        .insert(0, h);
    let s = side(
        &c,
        0,
        Selected::default(),
        Resolution {
            width_ns: 10,
            mixed_widths: false,
            clean_only: false,
        },
    );
    assert_eq!(s.selected.durations.len() as u64, MAX_EXPANDED);
    assert_eq!(
        crate::stats::percentile(&s.selected.durations, 50.0),
        Some(109),
        "the median's bucket survives the sampling"
    );
    let mut d = s.selected.durations.clone();
    assert_eq!(stats(&mut d, &s.hist).expect("stats").min_ns, 100);
}

#[test]
fn rebucketing_to_a_wider_grid_keeps_every_call() {
    let h = kernel_hist::from_durations(&[5, 15, 25, 6000, 20_000], 10);
    let r = rebucket(&h, 20);
    assert_eq!(r.buckets.iter().sum::<u64>(), 5);
    assert_eq!((r.buckets[0], r.buckets[1]), (2, 1));
}
