//! The instruction clock (`cargo xtask vm --clock instructions`: QEMU's `-icount shift=0`) on
//! Debian 7.2, in one boot:
//! - a tight loop of 20 000 `getppid` calls (`damon-trace disturb-loop`, which counts its own
//!   calls: ground truth the tool does not produce), traced by the default attach method: every
//!   call recorded, and at least 99 % of them take exactly the same number of instructions;
//! - the guest's damon-trace was told its clock: the capture, the report (JSON, text) and the
//!   per-call CSV name it and its unit (`insn`);
//! - A/A: two sessions a side of the same loop in this boot compare as no difference, with
//!   finite numbers (identical per-run medians, a run-to-run SD of 0, must not make a verdict);
//! - a capture stated to be of the wall clock (`record --clock wall`) is refused beside them,
//!   with the cause and the remedy;
//! - `calibrate` under this clock: every attach method's floor in instructions, checked as
//!   `vm_calibrate` checks wall-clock floors (the held-out empty function within the stated ±).
use std::time::Duration;

mod common;
use common::{boot_ok, floor::check_floor, function, guest, json, read, u};
use damon_lab::{kernel::Kernel, vm::GuestClock};

/// Test runs per calibration function: under this clock a floor is nearly one value per
/// function, so a few thousand calls say as much as `vm_calibrate`'s 20 000.
const CAL_CALLS: u64 = 2000;

const SCRIPT: &str = damon_lab::script::without_header(include_str!("scripts/vm_clock_script.sh"));

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_instruction_clock_gives_exact_path_lengths_named_in_every_view() {
    let script = format!(
        "{}{}",
        common::RECORDER_HELPERS,
        SCRIPT.replace("{CAL_CALLS}", &CAL_CALLS.to_string())
    );
    let run = boot_ok(
        guest(Kernel::DEBIAN_7_2, script, Duration::from_secs(900)).clock(GuestClock::Instructions),
    );
    let dir = run.dir();
    let func = read(dir, "func").trim().to_owned();

    // Every call of the loop recorded, and one path length for nearly all of them.
    let capture = dtcap::read(&dir.join("loop.dtcap"));
    assert_eq!(capture.meta["clock"], "instructions", "{}", capture.meta);
    let tid = json(dir, "loop.json")["tid"].as_u64().expect("tid");
    let made = json(dir, "loop.json")["made"].as_u64().expect("made");
    let mut mine: Vec<u64> = capture
        .records
        .iter()
        .filter(|r| u64::from(r.tid) == tid)
        .map(|r| r.duration_ns)
        .collect();
    assert_eq!(
        (made, mine.len() as u64),
        (20_000, 20_000),
        "one record per call"
    );
    mine.sort_unstable();
    let mode = mine[mine.len() / 2];
    let same = mine.iter().filter(|&&d| d == mode).count();
    assert!(
        same * 100 >= mine.len() * 99,
        "{same} of {} calls took exactly {mode} insn; spread {:?}",
        mine.len(),
        [
            mine[0],
            mine[mine.len() / 100],
            mine[mine.len() * 99 / 100],
            mine[mine.len() - 1]
        ]
    );

    // The report and the export name the clock and the unit.
    let report = json(dir, "loop.report.json");
    assert_eq!(
        (&report["meta"]["clock"], &report["meta"]["unit"]),
        (
            &serde_json::json!("instructions"),
            &serde_json::json!("insn")
        )
    );
    let f = function(&report, &func);
    assert_eq!(u(f, "p50_ns"), u(f, "p99_ns"), "{f}");
    let text = read(dir, "loop.txt");
    assert!(
        text.contains("instruction clock") && text.contains("Range (insn)"),
        "{text}"
    );
    let csv = read(dir, "loop.csv");
    assert!(
        csv.starts_with("function,cpu,pid,tid,entry_ns,duration_insn,"),
        "{}",
        csv.lines().next().unwrap_or_default()
    );

    // A/A: no difference, and nothing undefined in it.
    let aa = json(dir, "aa.json");
    assert_eq!(aa["clock"], "instructions");
    let f = common::entry(&aa["functions"], "name", &func);
    assert_eq!(f["significant"], false, "{f}");
    let verdict = f["verdict"].as_str().expect("verdict");
    assert!(
        verdict.starts_with("no significant difference"),
        "{verdict}"
    );
    let aa_text = read(dir, "aa.txt");
    for bad in ["NaN", "inf"] {
        assert!(!aa_text.contains(bad), "{bad} in:\n{aa_text}");
    }

    // Mixed clocks are refused: a usage error naming both and the remedy.
    let status = read(dir, "mixed.status");
    let err = read(dir, "mixed.err");
    assert_eq!(status.trim(), "2", "{err}");
    assert!(
        err.contains("different clocks")
            && err.contains("(wall)")
            && err.contains("under the same clock"),
        "{err}"
    );
    check_calibration(dir, &run.kernel_release);
    eprintln!(
        "{}: {same} of 20000 getppid calls at {mode} insn; A/A: {verdict}",
        run.kernel_release
    );
}

/// Calibration under the instruction clock: one floor per attach method 7.2 has, in
/// instructions, each as sound as a wall-clock one (`common::floor::check_floor`).
fn check_calibration(dir: &std::path::Path, release: &str) {
    // Calibration: one floor per attach method, in instructions, each as sound as a wall one.
    let cal = json(dir, "cal.json");
    assert_eq!(
        (&cal["clock"], &cal["unit"]),
        (
            &serde_json::json!("instructions"),
            &serde_json::json!("insn")
        ),
        "{}",
        read(dir, "cal.err")
    );
    let attaches: Vec<&str> = cal["floors"]
        .as_array()
        .expect("floors")
        .iter()
        .map(|fl| fl["attach"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        attaches,
        ["fentry", "kprobe", "kprobe-session", "fsession"],
        "{cal}"
    );
    for fl in cal["floors"].as_array().expect("floors") {
        // Under the instruction clock placement does not move a count: no second boot.
        let line = check_floor(fl, CAL_CALLS, "insn").unwrap_or_else(|e| panic!("{e}"));
        eprintln!("{release} {line}");
    }
    let cal_text = read(dir, "cal.txt");
    assert!(
        cal_text.starts_with("clock: instruction clock") && cal_text.contains(" insn (raw median"),
        "{cal_text}"
    );
}
