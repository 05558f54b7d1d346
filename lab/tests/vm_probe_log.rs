//! `--debug-probes` on Debian 7.2, one boot: the probes' aya-log diagnostics reach `record`'s
//! stderr, one line per event, for every attach method. The event with a ground truth here is
//! a filtered task's call: with `--tgid 1` every call of the workload (`bench-loop`, a known
//! number of `getppid` calls) is filtered, and at `trace` level each one is a line naming the
//! function, the task and the CPU. At the default `debug` level the same calls log nothing;
//! without the flag nothing is logged at all.
use std::time::Duration;

mod common;
use common::{json, read, u};
use damon_lab::kernel::Kernel;

/// getppid calls of the workload per run.
const CALLS: u64 = 300;

/// (run name, --attach, --debug-probes level or "" for none).
const RUNS: [(&str, &str, &str); 6] = [
    ("ksession-trace", "kprobe-session", "trace"),
    ("fsession-trace", "fsession", "trace"),
    ("kprobe-trace", "kprobe", "trace"),
    ("fentry-trace", "fentry", "trace"),
    ("ksession-debug", "kprobe-session", "debug"),
    ("ksession-off", "kprobe-session", ""),
];

const SCRIPT: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_probe_log_script.sh"));

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_debug_probes_log_each_filtered_call() {
    let runs: Vec<String> = RUNS
        .iter()
        .map(|(n, a, l)| format!("one {n} {a} '{l}'"))
        .collect();
    let script = format!("set -e\n{}{SCRIPT}", common::RECORDER_HELPERS)
        .replace("CALLS", &CALLS.to_string())
        .replace("RUNS", &runs.join("\n"));
    let run = common::run_script(Kernel::DEBIAN_7_2, script, Duration::from_secs(600));
    let dir = run.dir();
    let func = read(dir, "func");
    let func = func.trim();
    for (name, attach, level) in RUNS {
        let err = read(dir, &format!("{name}.err"));
        let report = json(dir, &format!("{name}.json"));
        let f = common::function(&report, func);
        let ctx = format!("{name}: {f}\n{err}");
        assert_eq!(f["attach"], attach, "{ctx}");
        let made = u(&json(dir, &format!("{name}.loop")), "made");
        assert_eq!(made, CALLS, "{ctx}");
        // Every call of the workload was filtered (the loop is not pid 1); pid 1 itself may
        // add a few.
        let filtered = u(f, "filtered");
        assert!(filtered >= made, "filtered {filtered} < made {made}: {ctx}");
        let probe: Vec<&str> = err.lines().filter(|l| l.starts_with("probe: ")).collect();
        let filtered_lines: Vec<&str> = probe
            .iter()
            .copied()
            .filter(|l| l.starts_with(&format!("probe: filtered task {func} tid ")))
            .collect();
        match level {
            "trace" => {
                assert_eq!(
                    filtered_lines.len() as u64,
                    filtered,
                    "one line per filtered call: {ctx}"
                );
                assert!(filtered_lines.iter().all(|l| l.contains(" cpu ")), "{ctx}");
            }
            "debug" => assert!(filtered_lines.is_empty(), "debug level: {ctx}"),
            _ => assert!(probe.is_empty(), "no --debug-probes, no probe lines: {ctx}"),
        }
        // Whatever else the probes said is a rare event the counters show too.
        let orphans = probe
            .iter()
            .filter(|l| l.contains("orphan exit") || l.contains("zero cookie"));
        if !level.is_empty() {
            assert_eq!(orphans.count() as u64, u(f, "orphan_exits"), "{ctx}");
        }
        eprintln!("{name}: {} probe lines, {filtered} filtered", probe.len());
    }
}
