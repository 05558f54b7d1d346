//! Shell habits on a real 7.2 kernel, one boot: `record --format json` ends with a summary on
//! stdout that agrees with the capture's report, and `record -o - | report -` streams a
//! capture through a pipe (the writer never seeks) with the report reading it from stdin.
use std::time::Duration;

mod common;
use common::{function, json, read, run_script, u};
use damon_lab::kernel::Kernel;

/// lock_timer_base runs system-wide, so no scenario is needed: 3 s record it, the guest's
/// clock read just before and after (the whole command: calibration, attach, detach).
const CMD: &str = "set -e
cut -d' ' -f1 /proc/uptime > /out/record-uptime.txt
damon-trace record -o /out/a.dtcap --duration 3s --functions lock_timer_base --format json \
  > /out/summary.json 2> /out/record.err
cut -d' ' -f1 /proc/uptime >> /out/record-uptime.txt
damon-trace report /out/a.dtcap --format json > /out/report.json
damon-trace record -o - --duration 3s --functions lock_timer_base --no-calibrate 2> /out/pipe.err \
  | damon-trace report - --format json > /out/piped.json";

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_record_summary_and_capture_through_a_pipe() {
    let run = run_script(Kernel::DEBIAN_7_2, CMD, Duration::from_secs(300));
    let dir = run.dir();
    let summary = json(dir, "summary.json");
    let report = json(dir, "report.json");
    assert_eq!(summary["schema_version"], 1, "{summary}");
    assert_eq!(report["schema_version"], 1, "report: {}", report["meta"]);
    assert_eq!(summary["path"], "/out/a.dtcap", "{summary}");
    assert_eq!(summary["exit_reason"], "duration", "{summary}");
    assert_eq!(summary["mode"], "stream", "{summary}");
    // The session's clock starts after attach, before the 3 s deadline is armed, and stops
    // after detach: at least 3 s (the deadline never fires early), and within the command's
    // own run as the guest's clock saw it, however long calibration, attach and detach took
    // on this host (an upper bound fixed in seconds would measure the host, not the code).
    let ns = u(&summary, "duration_ns");
    let outside: Vec<f64> = read(dir, "record-uptime.txt")
        .split_whitespace()
        .map(|t| t.parse().expect("uptime"))
        .collect();
    assert_eq!(outside.len(), 2, "record-uptime.txt: {outside:?}");
    // /proc/uptime has centiseconds, truncated: each reading may be up to 10 ms early.
    let outside_ns = ((outside[1] - outside[0] + 0.01) * 1e9) as u64;
    assert!(
        (3_000_000_000..=outside_ns).contains(&ns),
        "duration_ns {ns}, not in 3 s ..= {outside_ns} ns (the record command's run): \
         {summary}"
    );
    let s = common::entry(&summary["functions"], "name", "lock_timer_base");
    let r = function(&report, "lock_timer_base");
    assert!(u(s, "calls") > 0, "{s}");
    assert_eq!(s["attach"], r["attach"], "summary {s}\nreport {r}");
    assert_eq!(
        u(s, "calls"),
        u(s, "records") + u(s, "dropped") + u(s, "in_flight"),
        "{s}"
    );
    // What the summary says was written is what the capture holds.
    for (mine, theirs) in [
        ("calls", "calls"),
        ("records", "count"),
        ("dropped", "dropped"),
    ] {
        assert_eq!(u(s, mine), u(r, theirs), "{mine}: summary {s}\nreport {r}");
    }
    // Calibrated at start: the floor is there, as the capture's meta has it.
    assert_eq!(
        summary["calibration"]["status"], "ok",
        "{}",
        summary["calibration"]
    );
    let err = read(dir, "record.err");
    assert!(
        err.contains("wrote ") && err.contains("/out/a.dtcap"),
        "{err}"
    );

    let piped = json(dir, "piped.json");
    let p = function(&piped, "lock_timer_base");
    assert!(u(p, "count") > 0, "{p}");
    assert_eq!(
        u(p, "calls"),
        u(p, "count") + u(p, "dropped") + u(p, "in_flight"),
        "{p}"
    );
    let err = read(dir, "pipe.err");
    assert!(err.contains("to stdout"), "{err}");
}
