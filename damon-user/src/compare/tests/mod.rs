mod clock;
mod disturbance;
mod intervals;
mod kernel;
mod runs;
mod simulation;
mod slow;
mod values;

use damon_common::attach::Attach;
use std::{collections::BTreeMap, path::Path};

use damon_common::CallRecord;

use super::*;
use crate::{
    analysis::test_support::{opts, warning},
    capture::{AttachState, FunctionCounters, FunctionStatus},
};

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
    counters.insert(3, FunctionCounters::all_recorded(n));
    let status = |name: &str, id, attach| FunctionStatus {
        name: name.into(),
        id,
        attach,
        detail: None,
    };
    let mut c = crate::analysis::test_support::stream_capture(
        vec![
            status("damon_migrate_pages", 2, migrate),
            status("lock_timer_base", 3, attach),
        ],
        records,
        Some((1_000_000_000, counters)),
    );
    c.meta.cpu_model = cpu.into();
    c
}

/// A capture with lock_timer_base (id 3) and damon_migrate_pages (id 2) calls of these
/// durations (for the simulations).
pub(super) fn capture_of(timer: &[u64], migrate: &[u64]) -> Capture {
    let mut c = capture(
        timer,
        AttachState::Traced(Attach::Fentry),
        AttachState::Traced(Attach::Fentry),
        "cpu",
    );
    let base = c.records.len() as u64;
    c.records
        .extend(migrate.iter().enumerate().map(|(i, &d)| CallRecord {
            entry_ns: (base + i as u64) * 1000,
            duration_ns: d,
            func: 2,
            ..Default::default()
        }));
    let n = migrate.len() as u64;
    c.summary
        .as_mut()
        .expect("summary")
        .counters
        .insert(2, FunctionCounters::all_recorded(n));
    c
}

fn timer(c: &Comparison) -> &FunctionComparison {
    c.functions
        .iter()
        .find(|f| f.name == "lock_timer_base")
        .expect("lock_timer_base compared")
}

fn compare(b: &Capture, a: &Capture) -> Comparison {
    build(
        &Inputs::pair(("before.dtcap", b), ("after.dtcap", a)),
        &opts(),
    )
    .expect("comparison")
}

fn compare_runs(b: &[Capture], a: &[Capture]) -> Comparison {
    build(
        &Inputs {
            before: b.iter().map(|c| ("before.dtcap", c)).collect(),
            after: a.iter().map(|c| ("after.dtcap", c)).collect(),
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

fn run(n: u64, shift: i64) -> Capture {
    capture(
        &spread(n, shift),
        AttachState::Traced(Attach::Fentry),
        AttachState::Traced(Attach::Fentry),
        "cpu",
    )
}

/// One run a side: the difference is described, never called significant, and the runs it
/// would take are estimated from the function's typical run-to-run variation.
#[test]
fn one_run_a_side_describes_and_claims_nothing() {
    let b = run(500, 0);
    let a = capture(
        &spread(500, -300),
        AttachState::Traced(Attach::Fentry),
        AttachState::Missing,
        "cpu",
    );
    let c = compare(&b, &a);
    assert_eq!(c.functions.len(), 1);
    let f = timer(&c);
    assert!(!f.significant, "{}", f.verdict);
    assert!(
        f.verdict.starts_with(
            "one run a side: run-to-run variation unknown, nothing is claimed about the kernels; \
             these runs differ by -300 ns at the median (-20.0 %)"
        ),
        "{}",
        f.verdict
    );
    assert!(!f.verdict.contains("significant"), "{}", f.verdict);
    let needed = f.runs_needed.as_ref().expect("advice");
    assert_eq!(needed.effect_ns, -300.0);
    assert!(needed.basis.contains("lock_timer_base"), "{}", needed.basis);
    assert!(f.verdict.contains("runs a side"), "{}", f.verdict);
    assert!(f.test.is_none() && f.p_holm.is_none());
    assert!(f.percentiles.iter().all(|d| d.interval.is_none()));
    assert!(f.mean.is_none());
    // The calls are still described: every call in the rows, Cliff's δ of the calls.
    let mw = f.calls_test.expect("calls test");
    assert!(mw.cliffs_delta < -0.4, "{mw:?}");
    assert_eq!(f.rows.iter().map(|r| r.before).sum::<u64>(), 500);
    assert_eq!(f.rows.iter().map(|r| r.after).sum::<u64>(), 500);
    assert_eq!(c.only_before, vec!["damon_migrate_pages".to_owned()]);
    assert!(
        c.only_after.is_empty() && c.warnings.is_empty(),
        "{:?}",
        c.warnings
    );
    let json = serde_json::to_value(&c).expect("json");
    assert_eq!(json["method"]["unit"], "run");
    assert_eq!(json["before"]["runs"], 1);
    assert_eq!(json["method"]["runs_after"], 1);
    assert!(
        json["method"]["verdict"]
            .as_str()
            .expect("method")
            .starts_with("none")
    );
    for text in [render::table(&c), render::markdown(&c)] {
        assert!(!text.contains("significant"), "{text}");
        assert!(text.contains("needs 2+ runs a side"), "{text}");
    }
}

/// Several runs a side with their own offsets (run-to-run variation): a shift larger than
/// that variation is found, with an interval over runs that holds it.
#[test]
fn several_runs_find_a_real_shift_with_an_interval_over_runs() {
    let b: Vec<Capture> = [0, 20, -15, 10].iter().map(|&o| run(400, o)).collect();
    let a: Vec<Capture> = [-300, -280, -310, -295]
        .iter()
        .map(|&o| run(400, o))
        .collect();
    let c = compare_runs(&b, &a);
    let f = timer(&c);
    assert!(f.significant, "{}", f.verdict);
    assert!(
        f.verdict
            .starts_with("after is faster by 300 ns at the median [95% CI "),
        "{}",
        f.verdict
    );
    assert!(f.verdict.contains("over 4 and 4 runs"), "{}", f.verdict);
    let t = f.test.expect("test");
    assert!(t.lo < -300.0 && -300.0 < t.hi && t.hi < 0.0, "{t:?}");
    // The interval carries the run-to-run spread: wider than the offsets' SD alone would
    // give with 1600 independent calls.
    assert!(t.hi - t.lo > 20.0, "{t:?}");
    assert_eq!(f.runs.before.len(), 4);
    let p50 = f.runs.before[0].p50_ns.expect("p50");
    assert_eq!(f.runs.before[1].p50_ns, Some(p50 + 20));
    let d = &f.percentiles[0];
    assert_eq!(
        d.before_runs,
        Some([
            (f.runs.before[2].p50_ns.expect("p50")) as f64,
            (p50 + 20) as f64
        ])
    );
    assert!(d.interval.is_some());
    assert!(f.rows[0].before_runs_pct.is_some());
    let text = render::table(&c);
    let medians = format!(
        "per-run medians (ns): before {p50}, {}, {}, {}",
        p50 + 20,
        p50 - 15,
        p50 + 10
    );
    assert!(text.contains(&medians), "{text}");
    assert!(text.contains("95% CI over runs (Welch)"), "{text}");
    assert!(render::markdown(&c).contains(&format!("[{}–{}]", p50 - 15, p50 + 20)));
}

/// A/A: the same runs on both sides (in another order) and identical single captures.
#[test]
fn identical_runs_show_no_difference() {
    let b: Vec<Capture> = [0, 40, -30].iter().map(|&o| run(400, o)).collect();
    let a: Vec<Capture> = [-30, 0, 40].iter().map(|&o| run(400, o)).collect();
    let c = compare_runs(&b, &a);
    let f = timer(&c);
    assert!(!f.significant);
    assert!(
        f.verdict
            .starts_with("no significant difference over 3 and 3 runs: median +0 ns")
            || f.verdict
                .starts_with("no significant difference over 3 and 3 runs: median 0 ns"),
        "{}",
        f.verdict
    );
    assert_eq!(f.test.map(|t| t.p_value), Some(1.0));
    let one = compare(&b[0], &b[0]);
    assert!(!timer(&one).significant);
}

#[test]
fn warns_about_attach_mode_and_cpu_model_and_small_samples() {
    let b = capture(
        &spread(10, 0),
        AttachState::Traced(Attach::Fentry),
        AttachState::Traced(Attach::Fentry),
        "Xeon",
    );
    let a = capture(
        &spread(12, 500),
        AttachState::Traced(Attach::Kprobe),
        AttachState::Traced(Attach::Fentry),
        "EPYC",
    );
    let c = compare(&b, &a);
    let all = c.warnings.join("\n");
    assert!(all.contains("fentry before and kprobe after"), "{all}");
    assert!(all.contains("different CPU models"), "{all}");
    let f = timer(&c);
    assert!(f.verdict.contains("weak comparison"), "{}", f.verdict);
    assert_eq!(
        f.calls_test.map(|m| m.method),
        Some(crate::stats::ranktest::PMethod::Exact)
    );
}

#[test]
fn unknown_function_is_bad_input() {
    let b = run(10, 0);
    let o = ReportOptions {
        functions: vec!["nope".into()],
        ..opts()
    };
    assert!(build(&Inputs::pair(("b", &b), ("a", &b)), &o).is_err());
    let none = Inputs {
        before: Vec::new(),
        after: vec![("a", &b)],
    };
    assert!(build(&none, &opts()).is_err());
}

/// The 62-vs-245 case: one side made 4× the calls of the other in the same time.
/// Flagged in text, JSON and Markdown; similar rates are not.
#[test]
fn different_work_is_flagged_everywhere() {
    let b = run(62, 0);
    let a = run(245, 0);
    let c = compare(&b, &a);
    let f = timer(&c);
    assert!(f.workload_differs);
    let w = warning(&c.warnings, "different work");
    assert!(w.contains("calls/s before 62.0, after 245"), "{w}");
    assert!(render::table(&c).contains("warning: lock_timer_base: the sides did different work"));
    assert!(
        render::markdown(&c).contains("> warning: lock_timer_base: the sides did different work")
    );
    let json = serde_json::to_value(&c).expect("json");
    assert!(json["warnings"].to_string().contains("different work"));
    let timer_json = json["functions"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["name"] == "lock_timer_base"))
        .expect("timer in JSON");
    assert_eq!(timer_json["workload_differs"], true);
    assert!(!timer(&compare(&run(200, 0), &run(230, 0))).workload_differs);
    // Several runs whose rates overlap: not flagged.
    let b: Vec<Capture> = [100, 300, 180].iter().map(|&n| run(n, 0)).collect();
    let a: Vec<Capture> = [250, 120, 200].iter().map(|&n| run(n, 0)).collect();
    assert!(!timer(&compare_runs(&b, &a)).workload_differs);
}

/// The committed captures of three separate 7.2 boots, used as runs: against themselves in
/// another order nothing is significant; lock_timer_base made 20 % faster in every run is a
/// shift smaller than these runs' run-to-run variation (SD of the medians ~5 µs): not
/// significant with 3 runs, and the runs needed are said.
#[test]
fn real_runs_against_themselves_and_a_faster_copy() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let read = |f: &str| crate::capture::format::read_file(&data.join(f)).expect("fixture");
    let runs: Vec<Capture> = [
        "migrate-hot-7.2.v2.dtcap",
        "intervals-7.2.dtcap",
        "values-7.2.dtcap",
    ]
    .iter()
    .map(|f| read(f))
    .collect();
    let shuffled: Vec<Capture> = [2, 0, 1].iter().map(|&i| runs[i].clone()).collect();
    let c = compare_runs(&runs, &shuffled);
    assert_eq!(c.functions.len(), 4);
    for f in &c.functions {
        assert!(!f.significant, "{}: {}", f.name, f.verdict);
        assert!(
            f.verdict
                .starts_with("no significant difference over 3 and 3 runs"),
            "{}",
            f.verdict
        );
    }
    let faster: Vec<Capture> = runs
        .iter()
        .map(|c| {
            let mut c = c.clone();
            let id = c
                .meta
                .functions
                .iter()
                .find(|f| f.name == "lock_timer_base")
                .expect("timer")
                .id;
            for r in c.records.iter_mut().filter(|r| r.func == id) {
                r.duration_ns = r.duration_ns * 4 / 5;
            }
            c
        })
        .collect();
    let c = compare_runs(&runs, &faster);
    let t = timer(&c);
    assert!(!t.significant, "{}", t.verdict);
    assert!(t.verdict.contains("would take about"), "{}", t.verdict);
    let est = t.test.expect("test").estimate;
    assert!((-4000.0..-3000.0).contains(&est), "{est}");
    let text = render::table(&c);
    for needle in [
        "Range (ns)",
        "p99.9",
        "per-run medians",
        "Welch's t on per-run medians",
        "verdict: ",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    let md = render::markdown(&c);
    assert!(
        md.contains("| Range (ns) | Before | % | After | % |"),
        "{md}"
    );
    let inputs = Inputs {
        before: runs.iter().map(|c| ("before.dtcap", c)).collect(),
        after: faster.iter().map(|c| ("after.dtcap", c)).collect(),
    };
    let svg = plot::render_svg(&c, &inputs, &opts()).expect("svg");
    assert!(svg.starts_with("<svg") && svg.contains("lock_timer_base"));
    assert!(svg.matches("<polygon").count() + svg.matches("<path").count() >= 8);
    // Deterministic: the same inputs give the same JSON.
    let again = compare_runs(&runs, &faster);
    assert_eq!(
        serde_json::to_string(&c).expect("json"),
        serde_json::to_string(&again).expect("json")
    );
}

/// The real A/B pair recorded by `vm_ab_6_12_vs_7_2_compare_renders_tables_intervals_and_verdict`
/// (lock_timer_base and damon_hot_score, migrate-hot scenario, Debian 6.12 then 7.2 guest):
/// version-2 files as the recorder writes them. One run a side: described, not judged; the
/// sides' different DAMON work and call rates are said.
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
            .contains("these runs differ by -120 ns at the median"),
        "{}",
        hot.verdict
    );
    assert!(!hot.significant);
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
    let all = c.warnings.join("\n");
    assert!(all.contains("DAMON's schemes did different work"), "{all}");
    assert!(
        all.contains("damon_hot_score: the sides did different work: calls/s"),
        "{all}"
    );
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
        AttachState::Traced(Attach::Fentry),
        AttachState::Traced(Attach::Fentry),
        "cpu",
    );
    let mut a = capture(
        &spread(500, 100),
        AttachState::Traced(Attach::Fentry),
        AttachState::Traced(Attach::Fentry),
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
            .any(|w| w.contains("only 1 of the 2 runs have a probe calibration")),
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

/// Real A/A: six separate boots of one Debian guest kernel (7.2, then 6.12), same binary and
/// scenario, recorded interleaved by `cargo xtask ab --before K --after K --runs 3`. No
/// function may come out significant, no workload difference may be flagged, and the typical
/// run-to-run variation the single-run advice uses is the larger of the two kernels' relative
/// SD of the six per-run medians.
#[test]
fn real_a_a_runs_show_no_significant_difference() {
    let mut largest: BTreeMap<String, f64> = BTreeMap::new();
    for (kernel, functions) in [("7.2", 4), ("6.12", 2)] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/aa-{kernel}"));
        let read = |f: String| crate::capture::format::read_file(&dir.join(f)).expect("A/A run");
        let b: Vec<Capture> = (1..=3).map(|i| read(format!("before-{i}.dtcap"))).collect();
        let a: Vec<Capture> = (1..=3).map(|i| read(format!("after-{i}.dtcap"))).collect();
        for c in b.iter().chain(&a) {
            assert!(c.meta.kernel.release.starts_with(&format!("{kernel}.")));
        }
        let boots: std::collections::BTreeSet<&str> = b
            .iter()
            .chain(&a)
            .map(|c| c.meta.kernel.boot_id.as_str())
            .collect();
        assert_eq!(boots.len(), 6, "six separate boots");
        let c = compare_runs(&b, &a);
        assert_eq!(c.functions.len(), functions, "{kernel}");
        for f in &c.functions {
            assert!(!f.significant, "{kernel} {}: {}", f.name, f.verdict);
            assert!(!f.workload_differs, "{kernel} {}: {:?}", f.name, c.warnings);
            let medians: Vec<f64> = f
                .runs
                .before
                .iter()
                .chain(&f.runs.after)
                .map(|r| r.p50_ns.expect("median") as f64)
                .collect();
            let m = medians.iter().sum::<f64>() / 6.0;
            let sd = (medians.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 5.0).sqrt();
            let e = largest.entry(f.name.clone()).or_default();
            *e = e.max(sd / m);
        }
        assert!(c.warnings.is_empty(), "{kernel}: {:?}", c.warnings);
    }
    assert_eq!(largest.len(), 4);
    for (name, measured) in largest {
        let (typical, known) = super::runs::typical_relative_sd(&name);
        assert!(known, "{name}");
        assert!(
            (measured - typical).abs() < 0.0005,
            "{name}: the A/A runs vary by {measured:.4} of the median, the advice uses {typical}"
        );
    }
}

/// Against an uncalibrated capture, compare says only one side can be corrected.
#[test]
fn a_calibrated_run_against_an_uncalibrated_one_is_said() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let before =
        crate::capture::format::read_file(&data.join("migrate-hot-7.2.dtcap")).expect("fixture");
    let after =
        crate::capture::format::read_file(&data.join("calibrated-7.2.dtcap")).expect("fixture");
    let cmp = build(
        &Inputs::pair(
            ("migrate-hot-7.2.dtcap", &before),
            ("calibrated-7.2.dtcap", &after),
        ),
        &opts(),
    )
    .expect("compare");
    assert!(
        cmp.warnings.iter().any(|w| w.contains(
            "only 1 of the 2 runs have a probe calibration (before 0 of 1, after 1 of 1)"
        )),
        "{:?}",
        cmp.warnings
    );
}
