//! Helpers shared by the VM test files (`xtask/tests/vm*.rs`): booting a guest, reading what
//! it wrote under /out and checking the report's invariants.
#![allow(dead_code)] // each test file uses a subset
use std::{fs, time::Duration};

use xtask::{
    kernel::Kernel,
    vm::{self, VmOptions},
};

/// Runs `cmd` as root in a guest of `kernel` and asserts it exited 0 (showing the console and,
/// when a scenario ran in the background, its `scenario.err`). The guest's /out is
/// `<returned dir>/out`.
pub fn run_guest(kernel: Kernel, cmd: &str, timeout: Duration) -> tempfile::TempDir {
    let out = tempfile::tempdir().expect("temp dir");
    let mut opts = VmOptions::new(kernel, cmd);
    opts.out_dir = out.path().join("out");
    opts.timeout = timeout;
    let outcome = vm::run(&opts).expect("the guest runs");
    assert_eq!(
        outcome.status,
        0,
        "console:\n{}\nscenario:\n{}",
        outcome.console,
        fs::read_to_string(opts.out_dir.join("scenario.err")).unwrap_or_default()
    );
    out
}

/// What `--attach auto` (the default) picks on a Debian kernel: kprobe on the 7.x kernels, which
/// run `preempt=lazy` (fentry/fexit runs are skipped while a task is preempted inside them),
/// fentry/fexit on 6.x, which run `voluntary`.
pub fn auto_attach(kernel: &Kernel) -> &'static str {
    match kernel {
        Kernel::Debian72 | Kernel::Debian73 => "kprobe",
        _ => "fentry",
    }
}

/// The four built-in functions, in `FunctionId` order.
pub const FOUR: [&str; 4] = [
    "damon_hot_score",
    "damos_va_migrate_dests_add",
    "damon_migrate_pages",
    "lock_timer_base",
];

/// Reads a JSON file the guest wrote under /out.
pub fn json(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let text = fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"))
}

pub fn function<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["functions"]
        .as_array()
        .expect("functions array")
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing from report"))
}

pub fn u(f: &serde_json::Value, key: &str) -> u64 {
    f[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} not a number in {f}"))
}

/// A traced function with calls: the accounting invariant, and percentiles in order.
pub fn assert_traced(f: &serde_json::Value, attach: &str) {
    let name = &f["name"];
    assert_eq!(f["attach"], attach, "{name}: {f}");
    assert!(u(f, "calls") > 0, "{name} was never called: {f}");
    assert_eq!(
        u(f, "calls"),
        u(f, "count") + u(f, "dropped") + u(f, "in_flight"),
        "{name}: calls != count + dropped + in_flight: {f}"
    );
    let p: Vec<u64> = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"]
        .iter()
        .map(|k| u(f, k))
        .collect();
    assert!(
        p.windows(2).all(|w| w[0] <= w[1]),
        "{name}: percentiles out of order {p:?}"
    );
    assert!(p[0] > 0, "{name}: a call cannot take 0 ns");
}
