//! The probe floor on real kernels: `damon-trace calibrate` per attach method and trace mode,
//! the held-out empty function's corrected median against the stated bound, and a `record`
//! capture that carries the floor (`meta.calibration`) and shows corrected latencies.
use std::{fs, time::Duration};

mod common;
use common::{
    floor::{HELD_OUT_BOUNDS, check_floor, f},
    function, json, u,
};
use damon_lab::kernel::Kernel;

/// Test runs per floor (each calls every calibration function once).
const CALLS: u64 = 20_000;

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

/// Each floor's (attach method, trace mode), in the order `calibrate --json` gives them.
fn keys(floors: &[serde_json::Value]) -> Vec<(String, String)> {
    floors
        .iter()
        .map(|fl| {
            (
                fl["attach"].as_str().unwrap_or("").to_owned(),
                fl["mode"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The held-out check failed in one boot: it must pass in a second.
///
/// Under TCG each boot (KASLR) sets where every function's code and probe path sit in the
/// emulator, and that sets its cost for the boot. Mostly the cost varies between functions as
/// the ± expects, but not always: in one CI run on 7.2 the held-out function's kprobe/stream
/// median was 1161 ns against pooled medians of 822–918 ns (seven of their standard deviations
/// off), while its fentry/stream median in the same boot sat among the pool's. A floor that is
/// wrong (not the pool's median, another method's, a ± too small) is wrong in every boot; a
/// function in a slow place is one boot's draw, independent of the next. So every floor is
/// checked again in a new boot, and any failure there fails the test: a wrong floor still
/// fails, a correct one fails with about the square of one boot's chance.
fn held_out_again(kernel: &Kernel, modes: &[&str], want: &[(String, String)], first: &[String]) {
    let outcome = common::boot(common::guest(
        kernel.clone(),
        format!(
            "damon-trace calibrate --calls {CALLS} --attach auto --mode {} --json > /out/cal.json \
             2> /out/cal.err",
            modes.join(",")
        ),
        Duration::from_secs(840),
    ));
    let dir = outcome.dir();
    assert_eq!(
        outcome.status,
        0,
        "second boot (after: {}):\n{}\n{}",
        first.join("; "),
        outcome.console,
        fs::read_to_string(dir.join("cal.err")).unwrap_or_default()
    );
    let cal = json(dir, "cal.json");
    let floors = cal["floors"].as_array().expect("floors");
    let got = keys(floors);
    assert_eq!(
        got, want,
        "second boot: one floor per attach method and trace mode"
    );
    for fl in floors {
        match check_floor(fl, CALLS, "ns") {
            Ok(line) => eprintln!("{} second boot: {line}", outcome.kernel_release),
            Err(why) => panic!(
                "the held-out check failed in two boots: first {}; second {why}",
                first.join("; ")
            ),
        }
    }
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
    if kernel.has(|p| p.has_kprobe_session) {
        methods.push("kprobe-session");
    }
    if kernel.has(|p| p.has_fsession) {
        methods.push("fsession");
    }
    for m in modes {
        for a in &methods {
            want.push(((*a).to_owned(), (*m).to_owned()));
        }
    }
    let got = keys(floors);
    assert_eq!(got, want, "one floor per attach method and trace mode");
    let mut outside = Vec::new();
    for fl in floors {
        match check_floor(fl, CALLS, "ns") {
            Ok(line) => eprintln!("{} {line}", outcome.kernel_release),
            Err(why) => {
                eprintln!("{} {why}", outcome.kernel_release);
                outside.push(why);
            }
        }
    }
    if !outside.is_empty() {
        held_out_again(&kernel, modes, &want, &outside);
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
    run(Kernel::DEBIAN_7_2, &["stream", "kernel"]);
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_calibration_floor_held_out_and_capture() {
    run(Kernel::DEBIAN_6_12, &["stream"]);
}
