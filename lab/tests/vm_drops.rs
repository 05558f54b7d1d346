//! Two drop paths in a real 7.2 guest, each against numbers the workload fixes, not the tool:
//!
//! - **Ring full, kprobe.** `--func` on the kernel function behind getppid(2), `--attach
//!   kprobe`, a 4 KiB ring, and a reader stopped (SIGSTOP) while `bench-loop` makes
//!   `RING_CALLS` calls: the ring holds at most 51 records, every other call is lost to it. The
//!   kretprobe program must count each one (`ring_full`): `calls` equals the calls made, the
//!   identity `calls == count + dropped + in_flight` holds in the report and in the kernel's
//!   own counters, and `record` ends with the ring-full warning. (The overload test,
//!   `vm_overload.rs`, drives the fentry path under DAMON load; this one the kprobe path.)
//! - **Stamp map full, stream and kernel mode.** The stamp map holds one entry per (task,
//!   traced function); a task whose first call finds it full is counted as `stamp_full` and its
//!   call is not timed. At its real size (16384) no guest workload fills it, so the test shrinks
//!   it with the test knob `DAMON_TRACE_MAX_IN_FLIGHT` (read where the eBPF object is loaded)
//!   to `MAP` entries and makes `READERS + 1` distinct tasks call `fifo_open` at the same time:
//!   `READERS` readers of a FIFO block inside it (each seen waiting in `wait_for_partner`
//!   through `/proc/<pid>/wchan`, so all are inside at once), then the shell opens the FIFO for
//!   writing, which wakes them. So `READERS + 1` calls, of which the first `MAP` tasks'
//!   (readers') are timed and the other `READERS + 1 − MAP` are `stamp_full` (their exits find
//!   no stamp: orphan exits) — less any entry run the kernel skipped and counted, which takes
//!   no stamp (its exit is an orphan too). Checked in both modes: the counts, the identity (the kernel-mode
//!   one with the histogram's count as the timed calls), and `record`'s end warning.
use std::time::Duration;

mod common;
use common::{function, json, u};
use damon_lab::kernel::Kernel;

/// getppid calls made while the ring's reader is stopped.
const RING_CALLS: u64 = 2000;
/// Records a 4096-byte ring holds at most: each takes 80 bytes (8-byte header + 72-byte
/// record).
const RING_RECORDS: u64 = 4096 / (8 + damon_common::CALL_RECORD_SIZE as u64);
/// Stamp map entries (the knob).
const MAP: u64 = 3;
/// FIFO readers blocked in `fifo_open` at once. With the writer, `READERS + 1` calls are open
/// together: at most 10, the kernel's default number of return-probe instances of a kretprobe
/// (`max(10, 2 × possible CPUs)`); more would also skip return probes, another drop path.
const READERS: u64 = 8;

const SCRIPT: &str = damon_lab::script::without_header(include_str!("scripts/vm_drops_script.sh"));

/// The kernel's counters of function `name` in an exported capture (`summary.counters`) and,
/// in kernel mode, its histogram statistics (`summary.kernel_hist`).
fn raw<'a>(
    export: &'a serde_json::Value,
    name: &str,
) -> (&'a serde_json::Value, &'a serde_json::Value) {
    let id = export["meta"]["functions"]
        .as_array()
        .expect("meta.functions")
        .iter()
        .find(|f| f["name"] == name)
        .map(|f| u(f, "id"))
        .unwrap_or_else(|| panic!("{name} not in meta.functions"));
    (
        &export["summary"]["counters"][id.to_string()],
        &export["summary"]["kernel_hist"][id.to_string()],
    )
}

/// A report's function entry without its latencies and buckets: what the messages show.
fn accounting(f: &serde_json::Value) -> serde_json::Value {
    let keep = [
        "attach",
        "mode",
        "calls",
        "count",
        "dropped",
        "in_flight",
        "ring_full",
        "stamp_full",
        "too_deep",
        "stale_entries",
        "orphan_exits",
        "skipped_entries",
        "skipped_exits",
    ];
    keep.iter().map(|k| (k.to_string(), f[k].clone())).collect()
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_kprobe_ring_full_and_full_stamp_map_count_every_lost_call() {
    let script = format!("set -e\n{}{SCRIPT}", common::RECORDER_HELPERS)
        .replace("@RING_CALLS@", &RING_CALLS.to_string())
        .replace("@READERS@", &READERS.to_string())
        .replace("@MAP@", &MAP.to_string());
    let run = common::run_script(Kernel::DEBIAN_7_2, script, Duration::from_secs(300));
    let dir = run.dir();

    // Ring full, kprobe: the calls bench-loop made, each a record or a counted drop.
    let func = std::fs::read_to_string(dir.join("func")).expect("func");
    let func = func.trim();
    let made = u(&json(dir, "ring.loop"), "made");
    assert_eq!(made, RING_CALLS, "bench-loop's calls");
    let report = json(dir, "ring.report.json");
    let f = accounting(function(&report, func));
    let export = json(dir, "ring.export.json");
    let (c, _) = raw(&export, func);
    assert_eq!(f["attach"], "kprobe", "{f}");
    assert_eq!(
        u(&f, "calls"),
        u(&f, "count") + u(&f, "dropped") + u(&f, "in_flight"),
        "ring, report identity: {f}"
    );
    assert_eq!(
        u(c, "calls"),
        u(c, "emitted")
            + u(c, "ring_full")
            + u(c, "stamp_full")
            + u(c, "too_deep")
            + u(c, "stale_entries")
            + u(c, "in_flight"),
        "ring, kernel counters' identity: {c}"
    );
    assert_eq!(u(&f, "calls"), made, "ring: calls == the calls made: {f}");
    assert!(
        u(&f, "count") <= RING_RECORDS,
        "ring: more records than a stopped reader's 4 KiB ring holds: {f}"
    );
    assert_eq!(
        u(&f, "ring_full"),
        u(&f, "dropped"),
        "ring: the ring is why: {f}"
    );
    assert!(
        u(&f, "ring_full") >= made - RING_RECORDS,
        "ring: lost to the full ring: {f}"
    );
    let err = std::fs::read_to_string(dir.join("ring.err")).expect("record stderr");
    let warning = format!(
        "damon-trace: warning: {} of {made} calls of {func} were not recorded: the ring buffer \
         (4096 B) was full; use --ring-size 4194304 (or larger) to keep more",
        u(&f, "ring_full")
    );
    assert!(
        err.lines().any(|l| l == warning),
        "expected `{warning}` in:\n{err}"
    );
    assert!(!err.contains("unaccounted"), "ring: {err}");
    eprintln!("ring, kprobe: {f}");

    // Stamp map full.
    let calls = READERS + 1;
    let full = calls - MAP;

    for mode in ["stream", "kernel"] {
        let report = json(dir, &format!("{mode}.report.json"));
        let f = accounting(function(&report, "fifo_open"));
        let export = json(dir, &format!("{mode}.export.json"));
        let (c, k) = raw(&export, "fifo_open");
        assert_eq!(f["attach"], "kprobe", "{mode}: {f}");
        assert_eq!(f["mode"], mode, "{mode}: {f}");
        // The identity, in the report and in the kernel's own counters (timed: the records
        // written, or the calls added to the histogram).
        assert_eq!(
            u(&f, "calls"),
            u(&f, "count") + u(&f, "dropped") + u(&f, "in_flight"),
            "{mode}: report identity: {f}"
        );
        let timed = if mode == "kernel" {
            u(k, "count")
        } else {
            u(c, "emitted")
        };
        assert_eq!(
            u(c, "calls"),
            timed
                + u(c, "ring_full")
                + u(c, "stamp_full")
                + u(c, "too_deep")
                + u(c, "stale_entries")
                + u(c, "in_flight"),
            "{mode}: kernel counters' identity (timed {timed}): {c}"
        );
        // The workload's numbers: every call seen, the first MAP tasks whose entry program ran
        // timed, the rest lost to the full map; every call not timed is an exit without its
        // stamp. An entry run the kernel skipped (counted: kprobe programs are skipped while
        // `bpf_prog_active` is held on that CPU, also by a preempted bpf(2) map syscall such as
        // kernel mode's own reads) takes no stamp and is not `stamp_full`; it happened in one
        // CI run on 7.2 in kernel mode, so it is allowed, as long as the map still overflows.
        assert_eq!(
            u(&f, "calls"),
            calls,
            "{mode}: {READERS} readers + 1 writer: {f}"
        );
        let skipped = f["skipped_entries"].as_u64().unwrap_or(0);
        let ran = calls - skipped;
        assert!(
            ran > MAP,
            "{mode}: the kernel skipped {skipped} entry runs, too many for the map of {MAP} to \
             fill: {f}"
        );
        assert_eq!(timed, MAP, "{mode}: timed calls: {c}");
        assert_eq!(u(&f, "count"), MAP, "{mode}: timed calls: {f}");
        assert_eq!(
            u(&f, "stamp_full"),
            ran - MAP,
            "{mode}: tasks beyond the map's {MAP}: {f}"
        );
        assert_eq!(
            u(&f, "orphan_exits"),
            full,
            "{mode}: exits without a stamp: {f}"
        );
        assert_eq!(u(&f, "dropped"), full, "{mode}: {f}");
        assert_eq!(u(&f, "in_flight"), 0, "{mode}: {f}");
        eprintln!("stamp map of {MAP}, {mode}: {f}");
    }

    // Stream mode: the records are in the capture, and `record` says why the rest are not.
    let export = json(dir, "stream.export.json");
    let listed = export["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["function"] == "fifo_open")
        .count() as u64;
    assert_eq!(listed, MAP, "records of fifo_open in the capture");
    // The timed calls are the first tasks' to enter: readers (the writer came last), one each.
    let readers = std::fs::read_to_string(dir.join("stream.readers")).expect("reader pids");
    let readers: Vec<u64> = readers
        .split_whitespace()
        .map(|p| p.parse().expect("pid"))
        .collect();
    let mut tids: Vec<u64> = export["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["function"] == "fifo_open")
        .map(|r| u(r, "tid"))
        .collect();
    tids.sort_unstable();
    tids.dedup();
    assert_eq!(tids.len() as u64, MAP, "one record per task: {tids:?}");
    assert!(
        tids.iter().all(|t| readers.contains(t)),
        "records of tasks other than the readers {readers:?}: {tids:?}"
    );

    // `record` says why the rest were not timed, in both modes.
    for mode in ["stream", "kernel"] {
        let err = std::fs::read_to_string(dir.join(format!("{mode}.err"))).expect("record stderr");
        let f = accounting(function(
            &json(dir, &format!("{mode}.report.json")),
            "fifo_open",
        ));
        let skipped = f["skipped_entries"].as_u64().unwrap_or(0);
        let mut warning = format!(
            "damon-trace: warning: {full} of {calls} calls of fifo_open were not recorded: the \
             entry-stamp map ({MAP} open calls) was full for {}",
            full - skipped
        );
        if skipped > 0 {
            warning.push_str(&format!(
                ", the kernel skipped the entry probe of {skipped}"
            ));
        }
        assert!(
            err.lines()
                .any(|l| l == warning || (skipped > 0 && l.starts_with(&format!("{warning};")))),
            "{mode}: expected `{warning}` in:\n{err}"
        );
        assert!(!err.contains("unaccounted"), "{mode}: {err}");
    }
}
