//! Exact accounting under contention, against ground truth the tool does not produce: three
//! tasks each make a known number of `getppid` system calls (`damon-trace bench-loop`), pinned
//! to one CPU (they preempt one another, also inside the probes) or spread over the CPUs,
//! traced with fentry, kprobe and (where the kernel has them) kprobe sessions and fsessions, in
//! stream and kernel mode, on each Debian kernel with its
//! default preemption model and with `preempt=full`.
//!
//! For every run: the calls the tool reports equal the calls the workload made, exactly
//! (entries the probe saw plus entry runs the kernel skipped, by its own count); the identity
//! `calls == count + dropped + in_flight` holds; nothing is "too deep"; no duration exceeds the
//! wall time of its task's loop; every orphan exit is an entry the kernel skipped and every
//! stale entry an exit it skipped; kprobe pairs (which run with preemption disabled) lose
//! nothing to skips, nor do kprobe sessions; fsession runs skipped are counted; and
//! `--attach auto` picks the cheapest exact method of the kernel: a kprobe session (kprobe on
//! 6.1) exactly where probes can be preempted.
use std::time::Duration;

mod common;
use common::{json, u};
use damon_lab::kernel::Kernel;

/// Calls per task; three tasks per run (30 000 calls a run, 6 to 11 runs a boot). Halved from
/// 20 000 to keep the test command within CI's time on a slower machine.
const CALLS: u64 = 10_000;
const TASKS: u64 = 3;

/// (name, attach, mode, pin)
type Run = (&'static str, &'static str, &'static str, &'static str);

/// The kprobe session's runs, on kernels that have it (6.10 and later).
const KPROBE_SESSION_RUNS: [Run; 3] = [
    ("ksession-stream-same", "kprobe-session", "stream", "same"),
    ("ksession-kernel-same", "kprobe-session", "kernel", "same"),
    (
        "ksession-stream-spread",
        "kprobe-session",
        "stream",
        "spread",
    ),
];

/// The fsession's runs, on kernels that have it (7.x).
const FSESSION_RUNS: [Run; 2] = [
    ("fsession-stream-same", "fsession", "stream", "same"),
    ("fsession-kernel-same", "fsession", "kernel", "same"),
];

/// Every run on `kernel`: the pairs everywhere, the sessions where the kernel has them.
fn runs(kernel: &Kernel) -> Vec<Run> {
    let mut runs = RUNS.to_vec();
    if kernel.has(|p| p.has_kprobe_session) {
        runs.extend(KPROBE_SESSION_RUNS);
    }
    if kernel.has(|p| p.has_fsession) {
        runs.extend(FSESSION_RUNS);
    }
    runs
}

const RUNS: [Run; 6] = [
    ("fentry-stream-same", "fentry", "stream", "same"),
    ("kprobe-stream-same", "kprobe", "stream", "same"),
    ("fentry-kernel-same", "fentry", "kernel", "same"),
    ("kprobe-kernel-same", "kprobe", "kernel", "same"),
    ("fentry-stream-spread", "fentry", "stream", "spread"),
    ("auto-stream-same", "auto", "stream", "same"),
];

const SCRIPT: &str = damon_lab::script::without_header(include_str!("scripts/vm_exact_script.sh"));

const NO_SESSION: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_exact_no_session.sh"));

fn script(kernel: &Kernel) -> String {
    let runs: Vec<String> = runs(kernel)
        .iter()
        .map(|(n, a, m, p)| format!("one {n} {a} {m} {p}"))
        .collect();
    // Where the kernel has no kprobe session, asking for one fails and says why.
    let no_session = if !kernel.has(|p| p.has_kprobe_session) {
        NO_SESSION
    } else {
        ""
    };
    format!("set -e\n{}{SCRIPT}{no_session}", common::RECORDER_HELPERS)
        .replace("CALLS", &CALLS.to_string())
        .replace("TASKS", &TASKS.to_string())
        .replace("RUNS", &runs.join("\n"))
}

/// Boots `kernel` with `append` on its command line, runs every configuration and checks each.
fn exact(kernel: Kernel, append: &[&str]) {
    let outcome = common::boot_ok(
        common::guest(kernel.clone(), script(&kernel), Duration::from_secs(900))
            .kernel_args(append),
    );
    let dir = outcome.dir();
    let preempt = std::fs::read_to_string(dir.join("preempt")).expect("preempt");
    // The active model is the one in parentheses; a kernel without the file is not dynamic.
    let model = preempt
        .split_whitespace()
        .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
        .unwrap_or("unknown")
        .to_owned();
    if append.contains(&"preempt=full") {
        assert_eq!(model, "full", "preempt=full took effect: {preempt}");
    }
    let preemptible = !matches!(model.as_str(), "none" | "voluntary" | "unknown");
    let func = std::fs::read_to_string(dir.join("func")).expect("func");
    let func = func.trim();
    let mut summary = Vec::new();
    for (name, attach, mode, _) in runs(&kernel) {
        let report = json(dir, &format!("{name}.json"));
        let f = common::function(&report, func);
        let lp = json(dir, &format!("{name}.loop"));
        let made = u(&lp, "made");
        assert_eq!(made, CALLS * TASKS, "{name}: {lp}");
        let ctx = format!("{name} on {} ({model}): {f}", outcome.kernel_release);
        let used = f["attach"].as_str().expect("attach");
        match attach {
            "auto" => {
                // The cheapest exact method of the kernel (`probe::loader::auto`): sessions where it
                // has them (kprobe sessions: 6.10 and later; fsessions: 7.x).
                let sessions = kernel.has(|p| p.has_kprobe_session);
                let fsession = kernel.has(|p| p.has_fsession);
                let want = match (preemptible, sessions, fsession) {
                    (true, true, _) => "kprobe-session",
                    (true, false, _) => "kprobe",
                    (false, _, true) => "fsession",
                    (false, _, false) => "fentry",
                };
                assert_eq!(used, want, "--attach auto on a {model} kernel: {ctx}");
            }
            _ => assert_eq!(used, attach, "{ctx}"),
        }
        assert_eq!(f["mode"], mode, "{ctx}");
        // The ground truth: every call the workload made, no more (nothing else calls getppid
        // while the loop runs) and no less.
        assert_eq!(u(f, "calls"), made, "calls == the workload's calls: {ctx}");
        assert_eq!(
            u(f, "calls"),
            u(f, "count") + u(f, "dropped") + u(f, "in_flight"),
            "identity: {ctx}"
        );
        assert_eq!(u(f, "too_deep"), 0, "getppid never nests: {ctx}");
        let longest = lp["task_loop_ns"]
            .as_array()
            .expect("task_loop_ns")
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .max()
            .expect("a task");
        if u(f, "count") > 0 {
            assert!(
                u(f, "max_ns") <= longest,
                "a duration ({} ns) longer than any task's whole loop ({longest} ns): {ctx}",
                u(f, "max_ns")
            );
        }
        let skipped_entries = f["skipped_entries"].as_u64();
        let skipped_exits = f["skipped_exits"].as_u64();
        match used {
            "kprobe" | "kprobe-session" => {
                // Preemption disabled in the probes, and getppid runs in no interrupt: no run
                // of a pair (or of a kprobe session, also run with preemption disabled) is
                // skipped, and the stack-pointer pairing (the session's cookie) finds every
                // exit's entry.
                assert_eq!(u(f, "orphan_exits"), 0, "{ctx}");
                assert_eq!(u(f, "stale_entries"), 0, "{ctx}");
                assert!(matches!(skipped_entries, None | Some(0)), "{ctx}");
                if outcome.kernel_release.starts_with("6.1.") {
                    assert_eq!(
                        skipped_entries, None,
                        "6.1 does not count kprobe skips: {ctx}"
                    );
                }
            }
            _ => {
                let (se, sx) = (
                    skipped_entries.expect("trampoline skips are counted on >= 5.12"),
                    skipped_exits.expect("trampoline skips are counted on >= 5.12"),
                );
                // An exit without its entry is an entry the kernel skipped; an entry found
                // stale is an exit it skipped.
                assert!(u(f, "orphan_exits") <= se, "orphans come from skips: {ctx}");
                assert!(
                    u(f, "stale_entries") <= sx,
                    "stale entries from skips: {ctx}"
                );
                if !preemptible {
                    assert_eq!((se, sx), (0, 0), "no preemption, no skipped run: {ctx}");
                    assert_eq!(
                        u(f, "count") + u(f, "in_flight") + ring_full(f),
                        made,
                        "{ctx}"
                    );
                }
            }
        }
        summary.push(format!(
            "{name:<22} {used:<14} calls {:>6} records {:>6} skipped entries {:>6} stale {:>6} \
             orphans {:>6} ring_full {:>6}",
            u(f, "calls"),
            u(f, "count"),
            skipped_entries.map_or("-".to_owned(), |n| n.to_string()),
            u(f, "stale_entries"),
            u(f, "orphan_exits"),
            ring_full(f),
        ));
    }
    if !kernel.has(|p| p.has_kprobe_session) {
        let rc = std::fs::read_to_string(dir.join("nosession.rc")).expect("nosession.rc");
        let err = std::fs::read_to_string(dir.join("nosession.err")).expect("nosession.err");
        assert_ne!(rc.trim(), "0", "no kprobe session on 6.1: {err}");
        assert!(err.contains("Linux 6.10"), "the reason is named: {err}");
        summary.push(format!("kprobe-session refused: {}", err.trim()));
    }
    eprintln!(
        "{} ({model}{}):\n  {}",
        outcome.kernel_release,
        if append.is_empty() { "" } else { ", appended" },
        summary.join("\n  ")
    );
}

fn ring_full(f: &serde_json::Value) -> u64 {
    u(f, "ring_full")
}

/// One `#[ignore]`d test per (kernel, appended parameters): `name: kernel, append;`.
macro_rules! exact_tests {
    ($($name:ident: $kernel:expr, $append:expr;)*) => {$(
        #[test]
        #[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
        fn $name() {
            exact($kernel, $append);
        }
    )*};
}

exact_tests! {
    vm_7_2_exact_under_contention_default_preemption: Kernel::DEBIAN_7_2, &[];
    vm_7_2_exact_under_contention_preempt_full: Kernel::DEBIAN_7_2, &["preempt=full"];
    vm_7_3_exact_under_contention_default_preemption: Kernel::DEBIAN_7_3, &[];
    vm_7_3_exact_under_contention_preempt_full: Kernel::DEBIAN_7_3, &["preempt=full"];
    vm_6_12_exact_under_contention_default_preemption: Kernel::DEBIAN_6_12, &[];
    vm_6_12_exact_under_contention_preempt_full: Kernel::DEBIAN_6_12, &["preempt=full"];
    vm_6_1_exact_under_contention_default_preemption: Kernel::DEBIAN_6_1, &[];
    vm_6_1_exact_under_contention_preempt_full: Kernel::DEBIAN_6_1, &["preempt=full"];
}
