//! The probe floor on real kernels: `damon-trace calibrate` per attach method and trace mode,
//! the held-out empty function's corrected median against the stated bound, and a `record`
//! capture that carries the floor (`meta.calibration`) and shows corrected latencies.
use std::{fs, time::Duration};

mod common;
use common::{function, json, u};
use xtask::{floor_check, kernel::Kernel};

/// Test runs per floor (each calls every calibration function once).
const CALLS: u64 = 20_000;
/// The empty functions pooled into the floor, and the held-out one.
const POOL: usize = 7;
const HELD_OUT: &str = "bpf_fentry_test3";

fn cmd(modes: &str) -> String {
    format!(
        "set -e
damon-trace calibrate --calls {CALLS} --attach auto --mode {modes} --json > /out/cal.json 2> /out/cal.err
damon-trace calibrate --calls 1000 --attach fentry > /out/cal.txt 2>> /out/cal.err
damon-trace record -o /out/cal.dtcap --functions lock_timer_base --attach fentry --duration 3s 2> /out/record.err
damon-trace record -o /out/nocal.dtcap --functions lock_timer_base --attach fentry --duration 2s --no-calibrate 2> /out/nocal.err
damon-trace report /out/cal.dtcap --format json > /out/report.json
damon-trace report /out/cal.dtcap > /out/report.txt
damon-trace report /out/nocal.dtcap --format json > /out/nocal.json"
    )
}

fn f(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} not a number in {v}"))
}

/// How many stated uncertainties the held-out function's corrected median may be from zero
/// (see `check_floor`).
const HELD_OUT_BOUNDS: f64 = 2.0;

/// A floor without its histogram (thousands of buckets), for failure messages.
fn brief(floor: &serde_json::Value) -> serde_json::Value {
    let mut v = floor.clone();
    if let Some(d) = v["floor"].as_object_mut() {
        d.remove("buckets");
    }
    v
}

/// One floor of `calibrate --json`: measured from every call, above 0, with the pooled
/// functions' medians, and the held-out function's corrected median within twice the stated ±.
/// Returns a line for the log (the numbers in docs/accuracy.md come from it).
fn check_floor(floor: &serde_json::Value) -> String {
    let shown = brief(floor);
    let label = format!("{}/{}", floor["attach"], floor["mode"]).replace('"', "");
    let d = &floor["floor"];
    assert!(d.is_object(), "{label}: not measured: {shown}");
    assert_eq!(u(d, "count"), CALLS * POOL as u64, "{label}: calls lost");
    assert_eq!(u(floor, "untimed"), 0, "{label}: {shown}");
    let median = f(d, "median_ns");
    assert!(
        median > 0.0,
        "{label}: the probe cannot cost nothing: {shown}"
    );
    assert!(
        f(d, "p5_ns") <= median && median <= f(d, "p95_ns"),
        "{label}: {shown}"
    );
    let per = floor["functions"].as_array().expect("per-function medians");
    assert_eq!(per.len(), POOL, "{label}: {shown}");
    let bound = f(floor, "uncertainty_ns");
    // The ± and the floor restated from the data the JSON carries (the whole histogram, the
    // pooled functions' medians): an inflated ± or a wrong central value fails here, on any
    // machine (see `xtask::floor_check`).
    let restated = floor_check::check_stated(floor).unwrap_or_else(|e| panic!("{e:#}"));
    let (spread, between) = (restated.spread_ns, restated.between_ns);
    let h = &floor["held_out"];
    assert_eq!(h["function"], HELD_OUT, "{label}: {shown}");
    assert_eq!(u(h, "count"), CALLS, "{label}: {h}");
    let corrected = f(h, "corrected_median_ns");
    assert!(
        (corrected - (f(h, "median_ns") - median)).abs() < 1e-6,
        "{label}: {h}"
    );
    assert_eq!(f(h, "uncertainty_ns"), bound, "{label}: {h}");
    // The check: a second empty function, not in the pool, costs the probe's floor. The
    // stated ± is a 95 % prediction bound for one new function; this file checks six floors
    // per run (four on 7.2, two on 6.12), so at the stated ± a correct floor would fail about
    // one run in four. Twice the ± covers the Bonferroni bound for six checks (t(1 − 0.05/12, 6)
    // = 3.86 < 2 × t(0.975, 6) = 4.89, seven pooled functions);
    // `floor_uncertainty_covers_a_held_out_function` (host) simulates that coverage.
    assert!(
        corrected.abs() <= HELD_OUT_BOUNDS * bound,
        "{label}: held-out {HELD_OUT} corrected median {corrected:+.1} ns is outside \
         {HELD_OUT_BOUNDS} × the stated ± {bound:.1} ns: {shown}"
    );
    let medians: Vec<String> = per
        .iter()
        .map(|m| format!("{}", f(m, "median_ns")))
        .collect();
    // What the check can then detect (`floor_check::power_shift`): in this run it rejects
    // any floor wrong by more than 2 × ± + |corrected|, and by the ±'s own model one wrong by
    // `shift` × ± with probability ≥ 99.9 %. With seven functions `shift` (4.13) exceeds
    // 2 × HELD_OUT_BOUNDS, so a floor shifted by it is rejected whenever the check above
    // passed: that is a statement of power, not a further check, and is printed, not asserted.
    let shift = floor_check::power_shift(HELD_OUT_BOUNDS, POOL).expect("tabulated");
    format!(
        "{label}: floor {median:.1} ns (p5 {} p95 {}; pooled medians {}), ± {bound:.1} \
         (spread {spread:.1}, between {between:.1}; restated from the data); held-out \
         {HELD_OUT} raw {} corrected {corrected:+.1}; rejects a floor wrong by > {:.0} ns \
         (≥ 99.9 % at {shift:.2} × ± = {:.0} ns); took {:.1} s",
        f(d, "p5_ns"),
        f(d, "p95_ns"),
        medians.join("/"),
        f(h, "median_ns"),
        HELD_OUT_BOUNDS * bound + corrected.abs(),
        shift * bound,
        f(floor, "took_ns") / 1e9
    )
}

/// `calibrate`, a calibrated and an uncalibrated `record`, and their reports.
fn run(kernel: Kernel, modes: &[&str]) {
    let outcome = common::boot(common::guest(
        kernel.clone(),
        cmd(&modes.join(",")),
        Duration::from_secs(840),
    ));
    let dir = outcome.dir();
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap_or_default();
    assert_eq!(
        outcome.status,
        0,
        "console:\n{}\ncal.err:\n{}\nrecord.err:\n{}",
        outcome.console,
        read("cal.err"),
        read("record.err")
    );

    let cal = json(dir, "cal.json");
    assert_eq!(cal["status"], "ok", "{cal}");
    let floors = cal["floors"].as_array().expect("floors");
    let mut want: Vec<(String, String)> = Vec::new();
    // `--attach auto` calibrates every method; the sessions where the kernel has them.
    let mut methods = vec!["fentry", "kprobe"];
    if kernel != Kernel::Debian61 {
        methods.push("kprobe-session");
    }
    if matches!(kernel, Kernel::Debian72 | Kernel::Debian73) {
        methods.push("fsession");
    }
    for m in modes {
        for a in &methods {
            want.push(((*a).to_owned(), (*m).to_owned()));
        }
    }
    let got: Vec<(String, String)> = floors
        .iter()
        .map(|fl| {
            (
                fl["attach"].as_str().unwrap_or("").to_owned(),
                fl["mode"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(got, want, "one floor per attach method and trace mode");
    for fl in floors {
        eprintln!("{} {}", outcome.kernel_release, check_floor(fl));
    }
    // The other attach method's floor (same mode), as information: the held-out function
    // corrected with it, and whether the check would reject that wrong floor on this machine.
    // It is not asserted: how far apart the two methods' floors sit, against 2 × ±, is a
    // property of the machine and its load (on one CI-class machine 420–610 ns apart with
    // 2 × ± of 680–1040 ns, on another 460–900 ns with 190–410), not of the code. What a
    // wrong ± cannot pass is `floor_check::check_stated` above.
    for fl in floors {
        let other = floors
            .iter()
            .find(|g| g["mode"] == fl["mode"] && g["attach"] != fl["attach"])
            .expect("both attach methods in each mode");
        let wrong = f(&fl["held_out"], "median_ns") - f(&other["floor"], "median_ns");
        let bound = f(fl, "uncertainty_ns");
        eprintln!(
            "{} {}/{}: with the {} floor the held-out median is {wrong:+.1} ns, {} {HELD_OUT_BOUNDS} \
             × ± {bound:.1} ({})",
            outcome.kernel_release,
            fl["attach"].as_str().unwrap_or(""),
            fl["mode"].as_str().unwrap_or(""),
            other["attach"].as_str().unwrap_or(""),
            if wrong.abs() > HELD_OUT_BOUNDS * bound {
                "outside"
            } else {
                "inside"
            },
            if wrong.abs() > HELD_OUT_BOUNDS * bound {
                "the check would reject it here"
            } else {
                "too close on this machine for the check to tell"
            }
        );
    }
    let text = read("cal.txt");
    assert!(
        text.lines().any(|l| l.starts_with("fentry/stream ")),
        "{text}"
    );
    assert!(text.contains("held-out bpf_fentry_test3"), "{text}");

    // A record capture carries its floor, and report shows raw and corrected latencies.
    let record_err = read("record.err");
    assert!(
        record_err.contains("probe fentry/stream floor"),
        "{record_err}"
    );
    let report = json(dir, "report.json");
    let meta_cal = &report["meta"]["calibration"];
    assert_eq!(meta_cal["status"], "ok", "{report}");
    let floor = meta_cal["floors"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["attach"] == "fentry"))
        .expect("the session's fentry floor is in meta.calibration");
    assert_eq!(floor["mode"], "stream");
    let median = f(&floor["floor"], "median_ns");
    assert!(median > 0.0, "{floor}");
    assert!(
        !floor["floor"]["buckets"]
            .as_array()
            .expect("the floor's histogram")
            .is_empty()
    );
    let timer = function(&report, "lock_timer_base");
    assert_eq!(timer["attach"], "fentry");
    let corrected = &timer["corrected"];
    assert_eq!(f(corrected, "floor_ns"), median, "{timer}");
    assert_eq!(
        f(corrected, "uncertainty_ns"),
        f(floor, "uncertainty_ns"),
        "{timer}"
    );
    for (raw, corr) in [
        ("p50_ns", "p50_ns"),
        ("min_ns", "min_ns"),
        ("max_ns", "max_ns"),
    ] {
        assert_eq!(
            f(corrected, corr),
            u(timer, raw) as f64 - median,
            "{raw}: {timer}"
        );
    }
    assert!(
        report["meta"]["latencies"]
            .as_str()
            .is_some_and(|l| l.contains("corrected")),
        "{report}"
    );
    let table = read("report.txt");
    assert!(
        table.lines().any(|l| l.starts_with("  corrected")),
        "{table}"
    );
    eprintln!(
        "{} record: {}",
        outcome.kernel_release,
        record_err
            .lines()
            .filter(|l| l.starts_with("probe "))
            .collect::<Vec<_>>()
            .join(" | ")
    );

    // --no-calibrate: the capture says so, and nothing is corrected.
    let nocal = json(dir, "nocal.json");
    assert_eq!(nocal["meta"]["calibration"]["status"], "skipped", "{nocal}");
    assert_eq!(nocal["meta"]["calibration"]["detail"], "--no-calibrate");
    assert!(
        function(&nocal, "lock_timer_base")
            .get("corrected")
            .is_none()
    );
    assert!(!read("nocal.err").contains("calibrating"));
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_calibration_floor_held_out_and_capture() {
    run(Kernel::Debian72, &["stream", "kernel"]);
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_calibration_floor_held_out_and_capture() {
    run(Kernel::Debian612, &["stream"]);
}
