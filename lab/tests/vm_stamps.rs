//! The stamp map in a long session: the kernel keeps each (task, function) entry when its depth
//! returns to 0, and the session deletes the entries of exited tasks once a second. A workload
//! of more short-lived tasks than the map has entries (`MAX_IN_FLIGHT`), each calling the traced
//! function once, must then lose no call to a full map (`stamp_full` 0) and keep the identity
//! `calls == timed + dropped + in_flight`; without the collection the map fills with the dead
//! tasks' entries and the later tasks' calls are counted as `stamp_full`.
use std::time::Duration;

mod common;
use common::{json, u};
use damon_common::MAX_IN_FLIGHT;
use damon_lab::kernel::Kernel;

/// Short-lived tasks the workload starts, one after the other: well above the map's size.
const TASKS: u32 = MAX_IN_FLIGHT + MAX_IN_FLIGHT / 4;

/// `exit_signals` runs once in every exiting task (`do_exit`), in that task, and returns; every
/// subshell `( : )` of busybox's ash is a forked task that exits.
const SCRIPT: &str = damon_lab::script::without_header(include_str!("scripts/vm_stamps_script.sh"));

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_stamp_map_holds_live_tasks_only_in_a_long_session() {
    let run = common::run_script(
        Kernel::DEBIAN_7_2,
        SCRIPT.replace("TASKS", &TASKS.to_string()),
        Duration::from_secs(900),
    );
    let dir = run.dir();
    let err = std::fs::read_to_string(dir.join("s.err")).expect("record stderr");
    assert!(!err.contains("unaccounted"), "{err}");
    let export = json(dir, "s.export.json");
    let id = export["meta"]["functions"]
        .as_array()
        .expect("meta.functions")
        .iter()
        .find(|f| f["name"] == "exit_signals")
        .map(|f| u(f, "id"))
        .expect("exit_signals in meta.functions");
    let c = &export["summary"]["counters"][id.to_string()];
    let k = &export["summary"]["kernel_hist"][id.to_string()];
    let calls = u(c, "calls");
    // Calls whose probes the kernel skipped as a whole (kprobe: another probe running on that
    // CPU) are not in `calls`; the kernel counts them.
    let skipped = c["skipped_entries"].as_u64().unwrap_or(0);
    assert!(
        calls + skipped >= u64::from(TASKS),
        "every task called it once: {calls} calls + {skipped} skipped < {TASKS}: {c}"
    );
    assert_eq!(u(c, "stamp_full"), 0, "no call lost to a full map: {c}");
    // An exit without its entry is a call whose entry program the kernel skipped (counted by
    // the kernel, from 6.7 for kprobes); nothing else may leave one.
    assert!(
        u(c, "orphan_exits") <= skipped,
        "orphan exits without skipped entries: {c}"
    );
    assert_eq!(
        calls,
        u(k, "count")
            + u(c, "stamp_full")
            + u(c, "too_deep")
            + u(c, "stale_entries")
            + u(c, "in_flight"),
        "identity: {c} {k}"
    );
    eprintln!(
        "{calls} calls of exit_signals by {TASKS}+ tasks (map of {MAX_IN_FLIGHT}), {} timed; loop uptime {}",
        u(k, "count"),
        std::fs::read_to_string(dir.join("s.uptime"))
            .unwrap_or_default()
            .trim()
    );
}
