//! compare `--time on-cpu` and the slow-call share per side, over `breakdown_capture` (every
//! on-CPU time 100 ns) and `longer_sleeps` (the same calls, two of them asleep longer).
use super::super::*;
use crate::analysis::{
    ReportOptions, TimeBasis,
    test_support::{breakdown_capture, capture, longer_sleeps, opts, warning},
};

fn on_cpu() -> ReportOptions {
    ReportOptions {
        time: TimeBasis::OnCpu,
        ..opts()
    }
}

#[test]
fn on_cpu_time_sees_no_difference_where_only_the_sleeps_grew() {
    let (b, a) = (breakdown_capture(), longer_sleeps(9000));
    let inp = Inputs::pair(("b", &b), ("a", &a));
    let wall = build(&inp, &opts()).expect("compare");
    let p = |c: &Comparison| {
        let f = &c.functions[0];
        (
            f.before.stats.map(|s| s.max_ns),
            f.after.stats.map(|s| s.max_ns),
        )
    };
    assert_eq!(p(&wall), (Some(5000), Some(10_000)));
    let cmp = build(&inp, &on_cpu()).expect("compare");
    assert_eq!(p(&cmp), (Some(100), Some(100)));
    let f = &cmp.functions[0];
    assert_eq!((f.before.matched, f.before.set_aside), (9, Some(1)));
    warning(&cmp.warnings, "1 of the before side's calls set aside");
    assert_eq!(cmp.time, TimeBasis::OnCpu);
    let json = serde_json::to_value(&cmp).expect("json");
    assert_eq!(json["time"], "on-cpu");
    for text in [render::table(&cmp), render::markdown(&cmp)] {
        assert!(text.contains("Range (ns on-CPU)"), "{text}");
        assert!(text.contains("times are on-CPU"), "{text}");
    }
}

#[test]
fn a_run_without_interrupt_time_is_stated_under_on_cpu_time() {
    let (b, mut a) = (breakdown_capture(), breakdown_capture());
    a.meta
        .disturbance
        .as_mut()
        .expect("measured")
        .irq_time_missing = Some("no IRQ time accounting".into());
    let cmp = build(&Inputs::pair(("b", &b), ("a", &a)), &on_cpu()).expect("compare");
    let note = cmp.time_note.as_deref().expect("note");
    assert!(note.contains("no IRQ time accounting"), "{note}");
    assert!(render::table(&cmp).contains("include the interrupts"));
}

#[test]
fn on_cpu_time_refuses_a_side_without_the_breakdown_naming_it() {
    let (b, a) = (breakdown_capture(), capture(true));
    let err = build(&Inputs::pair(("b.dtcap", &b), ("a.dtcap", &a)), &on_cpu())
        .expect_err("no breakdown after");
    assert!(err.0.starts_with("a.dtcap: "), "{}", err.0);
    assert!(err.0.contains("record --disturbance"), "{}", err.0);
}

#[test]
fn the_slow_share_is_per_run_with_the_split_of_the_slow_calls() {
    let (b, a) = (breakdown_capture(), longer_sleeps(9000));
    let mut b2 = breakdown_capture();
    // A second before run with two more slow calls: 100 ns calls made 2000 ns, all on-CPU.
    for r in b2.records.iter_mut().take(2) {
        r.duration_ns = 2000;
    }
    let inp = Inputs {
        before: vec![("b1", &b), ("b2", &b2)],
        after: vec![("a1", &a)],
    };
    let cmp = build(&inp, &opts()).expect("compare");
    assert_eq!(cmp.slow_threshold.ns, Some(1000));
    assert!(cmp.slow_threshold.rule.contains("--slow threshold"));
    let s = cmp.functions[0].slow.as_ref().expect("slow share");
    let shares: Vec<(u64, u64)> = s.before.iter().map(|r| (r.slow, r.calls)).collect();
    // Run b1: 1000, 1000, 5000; run b2: also the two 2000 ns calls. Each run on its own.
    assert_eq!(shares, [(3, 10), (5, 10)]);
    assert_eq!(s.after.len(), 1);
    assert!((s.before[0].pct - 30.0).abs() < 1e-9);
    // b1's slow calls with a breakdown: the two 1000 ns ones, 900 ns of each off the CPU.
    let split = s.before[0].split.expect("split");
    assert_eq!(split.calls, 2);
    assert!((split.off_cpu_pct - 90.0).abs() < 1e-9);
    assert!((split.on_cpu_pct - 10.0).abs() < 1e-9);
    // b2 adds 4000 ns on the CPU: 1800 of 6000 ns off it.
    let split = s.before[1].split.expect("split");
    assert!((split.off_cpu_pct - 30.0).abs() < 1e-9, "{split:?}");
    for text in [render::table(&cmp), render::markdown(&cmp)] {
        for part in [
            "slow calls (wall time ≥ 1000 ns), per run",
            "30.00%",
            "50.00%",
            "90.0%",
        ] {
            assert!(text.contains(part), "no `{part}` in\n{text}");
        }
    }
    let json = serde_json::to_value(&cmp).expect("json");
    assert_eq!(json["functions"][0]["slow"]["before"][1]["slow"], 5);
}

#[test]
fn the_slow_threshold_rule_is_stated_when_the_captures_differ_or_have_none() {
    let (b, mut a) = (breakdown_capture(), breakdown_capture());
    a.meta.slow.as_mut().expect("slow").threshold_ns = 4000;
    let cmp = build(&Inputs::pair(("b", &b), ("a", &a)), &opts()).expect("compare");
    assert_eq!(cmp.slow_threshold.ns, Some(1000));
    assert!(
        cmp.slow_threshold
            .rule
            .contains("differ (b 1000 ns, a 4000 ns)"),
        "{}",
        cmp.slow_threshold.rule
    );
    // After is cut at the before side's threshold too: 3 of its 10 calls.
    let s = cmp.functions[0].slow.as_ref().expect("slow share");
    assert_eq!(s.after[0].slow, 3);
    let (mut b, mut a) = (breakdown_capture(), breakdown_capture());
    b.meta.slow = None;
    a.meta.slow = None;
    let cmp = build(&Inputs::pair(("b", &b), ("a", &a)), &opts()).expect("compare");
    assert_eq!(cmp.slow_threshold.ns, None);
    assert!(cmp.slow_threshold.rule.contains("p99"));
    // The before side's p99 of its ten calls is the 5000 ns one: one slow call a side.
    let s = cmp.functions[0].slow.as_ref().expect("slow share");
    assert_eq!((s.threshold_ns, s.before[0].slow), (5000, 1));
    assert!(render::table(&cmp).contains("slow calls: no capture was recorded with --slow"));
}
