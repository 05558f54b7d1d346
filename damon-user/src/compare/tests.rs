use std::{collections::BTreeMap, path::Path};

use damon_common::CallRecord;

use super::*;
use crate::capture::{AttachState, FunctionCounters, FunctionStatus, Meta, Summary};

fn opts() -> ReportOptions {
    ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    }
}

/// A capture of lock_timer_base (id 3) with these durations, plus damon_migrate_pages (id 2)
/// in the given attach state.
fn capture(durations: &[u64], attach: AttachState, migrate: AttachState, cpu: &str) -> Capture {
    let records: Vec<CallRecord> = durations
        .iter()
        .enumerate()
        .map(|(i, &d)| CallRecord {
            entry_ns: i as u64 * 1000,
            duration_ns: d,
            func: 3,
            ..Default::default()
        })
        .collect();
    let n = records.len() as u64;
    let mut counters = BTreeMap::new();
    counters.insert(
        3,
        FunctionCounters {
            calls: n,
            emitted: n,
            ..Default::default()
        },
    );
    let status = |name: &str, id, attach| FunctionStatus {
        name: name.into(),
        id,
        attach,
        detail: None,
    };
    Capture {
        meta: Meta {
            tool_version: "0.1.0".into(),
            kernel: Default::default(),
            hostname: String::new(),
            start_unix_ns: 0,
            start_monotonic_ns: 0,
            command_line: vec![],
            mode: "stream".into(),
            ring_size: 4096,
            functions: vec![
                status("damon_migrate_pages", 2, migrate),
                status("lock_timer_base", 3, attach),
            ],
            damon: None,
            cpu_model: cpu.into(),
            calibration: None,
            intervals: None,
            args: Vec::new(),
        },
        records,
        summary: Some(Summary {
            duration_ns: 1_000_000_000,
            end_reason: "duration".into(),
            counters,
            malformed_items: 0,
            damon_end: None,
            intervals: None,
            kernel_hist: Default::default(),
        }),
        marks: Vec::new(),
        hist_snapshots: Vec::new(),
    }
}

fn timer(c: &Comparison) -> &FunctionComparison {
    c.functions
        .iter()
        .find(|f| f.name == "lock_timer_base")
        .expect("lock_timer_base compared")
}

fn compare(b: &Capture, a: &Capture) -> Comparison {
    build(
        &Inputs {
            before: ("before.dtcap", b),
            after: ("after.dtcap", a),
        },
        &opts(),
    )
    .expect("comparison")
}

/// A spread of durations: 1000 + (i·37 mod 1000), i < n.
fn spread(n: u64, shift: i64) -> Vec<u64> {
    (0..n)
        .map(|i| (1000 + (i * 37) % 1000) as i64 + shift)
        .map(|v| v as u64)
        .collect()
}

#[test]
fn a_real_shift_is_found_with_its_size() {
    let b = capture(
        &spread(500, 0),
        AttachState::Fentry,
        AttachState::Fentry,
        "cpu",
    );
    let a = capture(
        &spread(500, -300),
        AttachState::Fentry,
        AttachState::Missing,
        "cpu",
    );
    let c = compare(&b, &a);
    assert_eq!(c.functions.len(), 1);
    let f = timer(&c);
    assert!(f.significant, "{}", f.verdict);
    assert!(
        f.verdict
            .starts_with("after is faster by 300 ns at the median"),
        "{}",
        f.verdict
    );
    let p50 = f.percentiles[0].interval.expect("p50 interval");
    assert!(
        p50.lo <= -300.0 && -300.0 <= p50.hi && p50.hi < 0.0,
        "{p50:?}"
    );
    let mean = f.mean.expect("mean interval");
    assert!((mean.estimate + 300.0).abs() < 1e-9 && mean.excludes_zero());
    let mw = f.mann_whitney.expect("test");
    assert!(mw.p_value < 1e-6 && mw.cliffs_delta < -0.4, "{mw:?}");
    // The rows add up on both sides and share one grid.
    assert_eq!(f.rows.iter().map(|r| r.before).sum::<u64>(), 500);
    assert_eq!(f.rows.iter().map(|r| r.after).sum::<u64>(), 500);
    assert_eq!(c.only_before, vec!["damon_migrate_pages".to_owned()]);
    assert!(
        c.only_after.is_empty() && c.warnings.is_empty(),
        "{:?}",
        c.warnings
    );
}

#[test]
fn identical_captures_show_no_difference() {
    let b = capture(
        &spread(400, 0),
        AttachState::Fentry,
        AttachState::Fentry,
        "cpu",
    );
    let c = compare(&b, &b);
    let f = timer(&c);
    assert!(!f.significant);
    assert!(
        f.verdict.starts_with("no significant difference"),
        "{}",
        f.verdict
    );
    assert!(
        f.percentiles
            .iter()
            .all(|d| d.interval.is_none_or(|i| !i.excludes_zero()))
    );
}

#[test]
fn warns_about_attach_mode_and_cpu_model_and_small_samples() {
    let b = capture(
        &spread(10, 0),
        AttachState::Fentry,
        AttachState::Fentry,
        "Xeon",
    );
    let a = capture(
        &spread(12, 500),
        AttachState::Kprobe,
        AttachState::Fentry,
        "EPYC",
    );
    let c = compare(&b, &a);
    let all = c.warnings.join("\n");
    assert!(all.contains("fentry before and kprobe after"), "{all}");
    assert!(all.contains("different CPU models"), "{all}");
    let f = timer(&c);
    assert!(f.verdict.contains("weak test"), "{}", f.verdict);
    assert_eq!(
        f.mann_whitney.map(|m| m.method),
        Some(ranktest::PMethod::Exact)
    );
    // 10 calls cannot carry a p99 interval.
    assert!(f.percentiles.iter().all(|d| d.interval.is_none()));
}

#[test]
fn unknown_function_is_bad_input() {
    let b = capture(
        &spread(10, 0),
        AttachState::Fentry,
        AttachState::Fentry,
        "cpu",
    );
    let o = ReportOptions {
        functions: vec!["nope".into()],
        ..opts()
    };
    let inputs = Inputs {
        before: ("b", &b),
        after: ("a", &b),
    };
    assert!(build(&inputs, &o).is_err());
}

/// The real 7.2 capture against itself with lock_timer_base made 20 % faster: the verdict
/// finds it and its size, and leaves the untouched functions alone.
#[test]
fn real_capture_against_a_faster_copy() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrate-hot-7.2.dtcap");
    let before = crate::capture::format::read_file(&path).expect("fixture");
    let mut after = before.clone();
    for r in after.records.iter_mut().filter(|r| r.func == 3) {
        r.duration_ns = r.duration_ns * 4 / 5;
    }
    let c = compare(&before, &after);
    assert_eq!(c.functions.len(), 4);
    for f in &c.functions {
        if f.name == "lock_timer_base" {
            assert!(
                f.verdict.starts_with("after is faster by 3524 ns"),
                "{}",
                f.verdict
            );
        } else {
            assert!(
                f.verdict.starts_with("no significant"),
                "{}: {}",
                f.name,
                f.verdict
            );
        }
    }
    let text = render::table(&c);
    for needle in [
        "Range (ns)",
        "Before",
        "After",
        "p99.9",
        "Mann–Whitney",
        "verdict: ",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    let md = render::markdown(&c);
    assert!(
        md.contains("| Range (ns) | Before | % | After | % |"),
        "{md}"
    );
    let svg = plot::render_svg(&c).expect("svg");
    assert!(
        svg.starts_with("<svg") && svg.contains("lock_timer_base"),
        "{}",
        &svg[..200]
    );
    assert!(svg.matches("<polygon").count() + svg.matches("<path").count() >= 8);
}

/// The real A/B pair recorded by `vm_ab_6_12_vs_7_2_compare_renders_tables_intervals_and_verdict`
/// (lock_timer_base and damon_hot_score, migrate-hot scenario, Debian 6.12 then 7.2 guest):
/// version-2 files as the recorder writes them, and the comparison the README shows.
#[test]
fn real_6_12_vs_7_2_pair() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let read = |f: &str| {
        let l = crate::capture::format::load_file(&data.join(f)).expect("real capture");
        assert_eq!(l.info.version, 2);
        assert!(l.capture.summary.is_some());
        l.capture
    };
    let (before, after) = (read("ab-before-6.12.dtcap"), read("ab-after-7.2.dtcap"));
    assert!(before.meta.kernel.release.starts_with("6.12."));
    assert!(after.meta.kernel.release.starts_with("7.2."));
    let c = compare(&before, &after);
    let hot = c
        .functions
        .iter()
        .find(|f| f.name == "damon_hot_score")
        .expect("damon_hot_score");
    assert_eq!((hot.before.matched, hot.after.matched), (4959, 2613));
    assert!(
        hot.verdict
            .starts_with("after is faster by 120 ns at the median"),
        "{}",
        hot.verdict
    );
    // The plot's log bins hold every call of both sides.
    for f in &c.functions {
        let sum = |after: bool| {
            f.log_bins
                .iter()
                .map(|b| if after { b.after } else { b.before })
                .sum::<u64>()
        };
        assert_eq!((sum(false), sum(true)), (f.before.matched, f.after.matched));
    }
    let timer = timer(&c);
    assert!(!timer.significant, "{}", timer.verdict);
    assert!(
        timer.verdict.starts_with("no significant difference"),
        "{}",
        timer.verdict
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

/// Each side is corrected with its own floor: a raw +100 ns shift that is all probe (the
/// after floor is 100 ns higher) comes out as 0 corrected, and the warning says so.
#[test]
fn corrected_rows_subtract_each_sides_floor() {
    use crate::stats::calibration::{Calibration, Floor, FloorDistribution};
    let calibrated = |c: &mut Capture, median: u64| {
        let floor =
            FloorDistribution::from_durations(&(median - 4..=median + 4).collect::<Vec<_>>())
                .expect("floor");
        let cal = Calibration::for_tests(9, vec![Floor::for_tests(Some(floor))]);
        c.meta.calibration = Some(serde_json::to_value(cal).expect("json"));
    };
    let mut b = capture(
        &spread(500, 0),
        AttachState::Fentry,
        AttachState::Fentry,
        "cpu",
    );
    let mut a = capture(
        &spread(500, 100),
        AttachState::Fentry,
        AttachState::Fentry,
        "cpu",
    );
    let cmp = compare(&b, &a);
    assert!(timer(&cmp).before.corrected.is_none());
    assert!(render::table(&cmp).contains("no corrected rows"));
    assert!(cmp.warnings.iter().all(|w| !w.contains("calibration")));

    calibrated(&mut b, 500);
    let cmp = compare(&b, &a);
    assert!(
        cmp.warnings
            .iter()
            .any(|w| w.contains("only the before capture has a probe calibration")),
        "{:?}",
        cmp.warnings
    );
    calibrated(&mut a, 600);
    let cmp = compare(&b, &a);
    let t = timer(&cmp);
    let (cb, ca) = (
        t.before.corrected.expect("b"),
        t.after.corrected.expect("a"),
    );
    assert_eq!((cb.floor_ns, ca.floor_ns), (500.0, 600.0));
    assert_eq!(ca.p50_ns - cb.p50_ns, 0.0);
    assert_eq!(
        t.after.stats.expect("a").p50_ns - t.before.stats.expect("b").p50_ns,
        100
    );
    assert!(
        cmp.warnings
            .iter()
            .any(|w| w.contains("fentry/stream probe floor differs") && w.contains("+100 ns")),
        "{:?}",
        cmp.warnings
    );
    let text = render::table(&cmp);
    assert!(
        text.contains("corrected (raw − probe floor: before 500 ± 4 ns, after 600 ± 4 ns)"),
        "{text}"
    );
    assert!(render::markdown(&cmp).contains("| ns | before | after | after − before |"));
    let json = serde_json::to_value(&cmp).expect("json");
    let timer_json = json["functions"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["name"] == "lock_timer_base"))
        .expect("timer in JSON");
    assert_eq!(timer_json["after"]["corrected"]["floor_ns"], 600.0);
}
