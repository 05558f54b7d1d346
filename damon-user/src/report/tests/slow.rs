//! `--time on-cpu`, the time breakdown and the slowest calls in the report, over
//! `breakdown_capture` (whose numbers are chosen: every on-CPU time is 100 ns).
use super::render;
use crate::{
    analysis::{
        ReportOptions, TimeBasis, build,
        test_support::{as_kernel, breakdown_capture, capture, opts, warning},
    },
    stats::LatencyStats,
};

fn on_cpu() -> ReportOptions {
    ReportOptions {
        time: TimeBasis::OnCpu,
        slowest: 5,
        ..opts()
    }
}

#[test]
fn on_cpu_time_replaces_wall_time_in_every_statistic_and_sets_unknown_calls_aside() {
    let c = breakdown_capture();
    let wall = build(
        &c,
        &ReportOptions {
            slowest: 5,
            ..opts()
        },
    )
    .expect("report");
    let f = &wall.functions[0];
    assert_eq!((f.matched, f.max_ns, f.set_aside), (10, Some(5000), None));
    let r = build(&c, &on_cpu()).expect("report");
    let f = &r.functions[0];
    // Nine calls with a breakdown, each 100 ns on the CPU; the unknown one is set aside.
    assert_eq!((f.count, f.matched, f.set_aside), (10, 9, Some(1)));
    assert_eq!(
        (f.min_ns, f.p50_ns, f.p99_ns, f.max_ns),
        (Some(100), Some(100), Some(100), Some(100))
    );
    let rows = &f.buckets.as_ref().expect("range table").rows;
    assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 9);
    assert_eq!(
        rows.iter().find(|r| r.count > 0).map(|r| r.lo_ns),
        Some(100)
    );
    warning(&r.warnings, "1 of 10 calls set aside");
    assert_eq!(r.meta.time, TimeBasis::OnCpu);
    assert!(r.notes[0].contains("times are on-CPU"), "{:?}", r.notes);
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["meta"]["time"], "on-cpu");
    assert_eq!(json["functions"][0]["set_aside"], 1);
    // Every text format names the time basis where it names the unit.
    let table = render::table(&r, None);
    for part in [
        "on-CPU time",
        "latencies in ns on-CPU",
        "Range (ns on-CPU)",
        "set aside",
    ] {
        assert!(table.contains(part), "no `{part}` in\n{table}");
    }
    let md = render::markdown(&r);
    assert!(md.contains("Latencies in ns on-CPU"), "{md}");
    assert!(md.contains("Range (ns on-CPU)"), "{md}");
    assert!(render::csv(&r).starts_with(
        "name,attach,mode,calls,count,matched,dropped,in_flight,orphan_exits,min_on_cpu_ns,"
    ));
}

#[test]
fn on_cpu_time_without_a_breakdown_names_the_cause_and_the_remedy() {
    let err = build(&capture(true), &on_cpu()).expect_err("no breakdown");
    assert!(err.0.contains("without --disturbance"), "{}", err.0);
    assert!(err.0.contains("record --disturbance"), "{}", err.0);
    let mut old = breakdown_capture();
    old.meta.disturbance.as_mut().expect("measured").breakdown = false;
    let err = build(&old, &on_cpu()).expect_err("no breakdown");
    assert!(err.0.contains("without the time breakdown"), "{}", err.0);
    let kernel = as_kernel(&breakdown_capture(), 10);
    let err = build(&kernel, &on_cpu()).expect_err("kernel mode");
    assert!(err.0.contains("kernel mode"), "{}", err.0);
    assert!(err.0.contains("stream mode"), "{}", err.0);
}

/// The wall-time report of `c` as a table, and its "where the time went" note.
fn wall_table_and_breakdown_note(c: &crate::capture::Capture) -> (String, String) {
    let wall = render::table(&build(c, &opts()).expect("report"), None);
    let note = wall
        .lines()
        .find(|l| l.starts_with("(where the time went"))
        .expect("the breakdown's note")
        .to_owned();
    (wall, note)
}

#[test]
fn missing_interrupt_time_is_stated_with_the_on_cpu_times() {
    let mut c = breakdown_capture();
    c.meta
        .disturbance
        .as_mut()
        .expect("measured")
        .irq_time_missing = Some("CONFIG_IRQ_TIME_ACCOUNTING is off".into());
    let r = build(&c, &on_cpu()).expect("report");
    assert!(
        r.notes[0].contains("CONFIG_IRQ_TIME_ACCOUNTING is off")
            && r.notes[0].contains("include the interrupts"),
        "{:?}",
        r.notes
    );
    let table = render::table(&r, None);
    assert!(table.contains("interrupt time was not measured"), "{table}");
    // On wall time too, the breakdown table says so, and shows no interrupt share.
    let (wall, note) = wall_table_and_breakdown_note(&c);
    assert!(
        note.contains("interrupt time was not measured (CONFIG_IRQ_TIME_ACCOUNTING is off)"),
        "{wall}"
    );
    assert!(wall.contains("n/a"), "{wall}");
}

/// Interrupt time from damon-trace's own clock: shown as measured, and the note says from
/// what.
#[test]
fn interrupt_time_of_our_own_clock_is_shown_and_named() {
    let mut c = breakdown_capture();
    c.meta.disturbance.as_mut().expect("measured").irq_clock =
        Some("measured by damon-trace from the softirq and local_timer tracepoints".into());
    let (wall, note) = wall_table_and_breakdown_note(&c);
    assert!(
        note.contains("interrupt time measured by damon-trace from the softirq"),
        "{wall}"
    );
    assert!(!wall.contains("n/a"), "{wall}");
}

/// The report's CSV has the breakdown's shares (the interrupt share empty where it was not
/// measured) beside the function's other columns.
#[test]
fn the_csv_carries_the_breakdown_shares() {
    let row = |c: &crate::capture::Capture| {
        let csv = render::csv(&build(c, &opts()).expect("report"));
        let mut lines = csv.lines();
        let header: Vec<String> = lines
            .next()
            .expect("header")
            .split(',')
            .map(str::to_owned)
            .collect();
        let values: Vec<String> = lines
            .next()
            .expect("row")
            .split(',')
            .map(str::to_owned)
            .collect();
        assert_eq!(header.len(), values.len(), "{csv}");
        header
            .into_iter()
            .zip(values)
            .collect::<std::collections::HashMap<_, _>>()
    };
    let mut c = breakdown_capture();
    let r = row(&c);
    // 2900 ns of wall time: 1800 off the CPU, 200 in interrupts, 900 on it.
    assert_eq!(r["breakdown_calls"], "9");
    assert_eq!(r["breakdown_unknown"], "1");
    assert_eq!(r["off_cpu_pct"], format!("{:.3}", 1800.0 / 29.0));
    assert_eq!(r["irq_pct"], format!("{:.3}", 200.0 / 29.0));
    assert_eq!(r["on_cpu_pct"], format!("{:.3}", 900.0 / 29.0));
    c.meta
        .disturbance
        .as_mut()
        .expect("measured")
        .irq_time_missing = Some("off".into());
    assert_eq!(row(&c)["irq_pct"], "");
}

#[test]
fn the_breakdown_says_where_the_summed_wall_time_went() {
    let r = build(&breakdown_capture(), &opts()).expect("report");
    let b = r.functions[0].breakdown.as_ref().expect("breakdown");
    // Known calls: 2900 ns of wall time = 1800 off the CPU + 200 interrupts + 900 on it.
    assert_eq!((b.calls, b.unknown), (9, 1));
    assert_eq!(
        (
            b.wall_sum_ns,
            b.off_cpu_sum_ns,
            b.irq_sum_ns,
            b.on_cpu_sum_ns
        ),
        (2900, 1800, 200, 900)
    );
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(b.off_cpu_pct, 1800.0 * 100.0 / 2900.0));
    assert!(close(b.irq_pct, 200.0 * 100.0 / 2900.0));
    assert!(close(b.on_cpu_pct, 900.0 * 100.0 / 2900.0));
    let mut wall = vec![100, 100, 100, 100, 100, 100, 1000, 1000, 300];
    assert_eq!(b.wall, LatencyStats::from_durations(&mut wall));
    assert_eq!(b.on_cpu.map(|l| (l.p50_ns, l.max_ns)), Some((100, 100)));
    for text in [render::table(&r, None), render::markdown(&r)] {
        // calls, unknown, off-CPU, interrupts, on-CPU shares.
        for part in ["62.1%", "6.9%", "31.0%", "p99 on-CPU"] {
            assert!(text.contains(part), "no `{part}` in\n{text}");
        }
    }
    // A capture without the breakdown has no such table.
    let plain = build(&capture(true), &opts()).expect("report");
    assert!(plain.functions[0].breakdown.is_none());
    assert!(!render::table(&plain, None).contains("where the time went"));
}

#[test]
fn the_slowest_calls_come_with_breakdown_arguments_task_and_stack() {
    let r = build(
        &breakdown_capture(),
        &ReportOptions {
            slowest: 2,
            ..opts()
        },
    )
    .expect("report");
    let s = r.functions[0].slow.as_ref().expect("slow calls");
    assert_eq!(s.threshold_ns, 1000);
    assert_eq!((s.counters.kept, s.counters.ring_full), (3, 1));
    // Slowest first: 5000 (breakdown unknown), then the two 1000 ns calls by entry time.
    let walls: Vec<u64> = s.calls.iter().map(|c| c.wall_ns).collect();
    assert_eq!(walls, [5000, 1000, 1000]);
    assert_eq!(s.shown, 2);
    let first = &s.calls[0];
    assert_eq!((first.off_cpu_ns, first.on_cpu_ns), (None, None));
    assert_eq!(
        first.stack,
        ["damon_pa_check_accesses+0x10", "kdamond_fn+0x2a0"]
    );
    let second = &s.calls[1];
    assert_eq!(
        (second.off_cpu_ns, second.irq_ns, second.on_cpu_ns),
        (Some(900), Some(0), Some(100))
    );
    assert_eq!((second.cpu, second.pid, second.tid), (0, 100, 106));
    assert_eq!(
        second.values_text(),
        "nr_accesses=6 age=12 → hotness_score=46"
    );
    assert_eq!(second.stack[0], "schedule+0x10");
    // JSON holds every kept call with its breakdown and stack.
    let json = serde_json::to_value(&r).expect("json");
    let calls = &json["functions"][0]["slow"]["calls"];
    assert_eq!(calls.as_array().map(Vec::len), Some(3));
    assert_eq!(calls[2]["stack"][0], "msleep+0x10");
    assert_eq!(calls[1]["off_cpu_ns"], 900);
    assert_eq!(calls[0]["off_cpu_ns"], serde_json::Value::Null);
    assert_eq!(calls[1]["args"][0]["name"], "nr_accesses");
    // Text and Markdown show the two slowest only, with their stacks and the counts.
    for text in [render::table(&r, None), render::markdown(&r)] {
        for part in [
            "slowest calls",
            "4 slow calls (wall time ≥ 1000 ns): 3 kept, 1 lost (slow-call ring full)",
            "the 2 slowest of the 3 kept",
            "damon_pa_check_accesses+0x10",
            "schedule+0x10",
            "nr_accesses=6 age=12 → hotness_score=46",
        ] {
            assert!(text.contains(part), "no `{part}` in\n{text}");
        }
        assert!(
            !text.contains("msleep"),
            "the third call is not shown:\n{text}"
        );
    }
    // --slowest 0: counts only.
    let none = build(
        &breakdown_capture(),
        &ReportOptions {
            slowest: 0,
            ..opts()
        },
    )
    .expect("report");
    let text = render::table(&none, None);
    assert!(
        text.contains("none shown") && !text.contains("schedule+0x10"),
        "{text}"
    );
}

#[test]
fn slow_calls_follow_the_cpu_and_pid_filter() {
    let r = build(
        &breakdown_capture(),
        &ReportOptions {
            cpu: vec![1],
            slowest: 5,
            ..opts()
        },
    )
    .expect("report");
    let s = r.functions[0].slow.as_ref().expect("slow calls");
    // Calls 7 and 9 ran on CPU 1; call 6 on CPU 0.
    let tids: Vec<u32> = s.calls.iter().map(|c| c.tid).collect();
    assert_eq!(tids, [109, 107]);
}
