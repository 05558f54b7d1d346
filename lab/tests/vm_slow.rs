//! Slow calls (`record --slow`) against ground truth the tool does not produce, under the
//! attach methods of 6.12 and 7.2 (one boot per kernel, every method in it), the captures read
//! by the tests' own reader (`dtcap`):
//! - **sleeping calls**: every 1 ms `nanosleep` of `disturb-loop`'s worker is a slow call of
//!   `hrtimer_nanosleep` at 500 µs, kept with a stack that names the syscall path
//!   (`__x64_sys_nanosleep` or `__x64_sys_clock_nanosleep`, and `do_syscall_64`), whose first
//!   frame is the function's caller: neither the function itself nor a BPF program or
//!   trampoline;
//! - **two callers**: `read-mix` calls `vfs_read` from read(2) of 16 MiB of /dev/zero (long)
//!   and from pread64(2) of 16 bytes (short), and says how many of each: every read is a slow
//!   call whose stack names `ksys_read`/`__x64_sys_read`, at most 5 % of the preads are;
//! - **copied whole**: every kept slow call is, field for field, one of the capture's records;
//! - **bounded**: with every call slow and `--slow-max 300`, the kept, ring-full and
//!   over-the-limit counts add up to the slow calls in the records, 300 at most are kept, and
//!   `record --format json` states the same counts;
//! - **live**: `live --slow` on the serial console, `x` on the sleeping calls' panel lists them
//!   with a stack that names the syscall path, and counts kept and lost while tracing.
use std::{collections::BTreeMap, time::Duration};

mod common;
use damon_lab::{
    kernel::Kernel,
    vm::{Interactive, KeyStep},
};

const SCRIPT: &str = damon_lab::script::without_header(include_str!("scripts/vm_slow_script.sh"));

/// The summary's slow counts of function `id`: `[kept, ring_full, over_limit]`.
fn slow_counts(capture: &dtcap::Capture, id: u32) -> [u64; 3] {
    let s = &capture.summary.as_ref().expect("summary")["slow"][id.to_string()];
    ["kept", "ring_full", "over_limit"].map(|k| s[k].as_u64().unwrap_or(0))
}

fn names(stack: &[String]) -> String {
    stack.join(" < ")
}

/// Every kept slow call is one of the capture's records, field for field, and no stack frame
/// is a kernel address.
fn copied_whole(capture: &dtcap::Capture, ctx: &str) {
    let records: std::collections::HashSet<_> = capture
        .records
        .iter()
        .map(|r| (r.func, r.tid, r.entry_ns, r.duration_ns, r.value, r.arg0))
        .collect();
    for s in &capture.slow {
        let r = s.record;
        assert!(
            records.contains(&(r.func, r.tid, r.entry_ns, r.duration_ns, r.value, r.arg0)),
            "{ctx}: slow call {r:?} is not among the records"
        );
    }
    assert!(
        dtcap::kernel_addresses(capture).is_empty(),
        "{ctx}: {:?}",
        dtcap::kernel_addresses(capture)
    );
}

/// The first frame of a stack is the traced function's caller: not the function itself, not
/// the probe machinery.
fn starts_at_the_caller(stack: &[String], func: &str, ctx: &str) {
    let first = stack
        .first()
        .unwrap_or_else(|| panic!("{ctx}: an empty stack"));
    assert!(
        !first.starts_with(&format!("{func}+")) && !first.contains("[bpf]"),
        "{ctx}: the stack starts at {first}: {}",
        names(stack)
    );
}

fn check_method(dir: &std::path::Path, method: &str, ctx: &str) -> String {
    let ctx = format!("{method} on {ctx}");
    let capture = dtcap::read(&dir.join(format!("{method}.dtcap")));
    copied_whole(&capture, &ctx);
    let threshold = capture.meta["slow"]["threshold_ns"]
        .as_u64()
        .expect("meta.slow");
    assert_eq!(threshold, 500_000, "{ctx}");
    // Sleeping calls: all 30 of the worker's, with the syscall path.
    let sleep = common::json(dir, &format!("{method}-sleep.json"));
    let tid = sleep["tid"].as_u64().expect("tid") as u32;
    let nsleep = capture.id("hrtimer_nanosleep");
    let slept: Vec<&dtcap::Slow> = capture
        .slow
        .iter()
        .filter(|s| s.record.func == nsleep && s.record.tid == tid)
        .collect();
    let made = sleep["made"].as_u64().expect("made") as usize;
    assert_eq!(slept.len(), made, "{ctx}: every nanosleep is a slow call");
    for s in &slept {
        assert!(s.record.duration_ns >= threshold, "{ctx}: {:?}", s.record);
        let joined = names(&s.stack);
        assert!(
            (joined.contains("__x64_sys_nanosleep")
                || joined.contains("__x64_sys_clock_nanosleep"))
                && joined.contains("do_syscall_64"),
            "{ctx}: a nanosleep's stack: {joined}"
        );
        starts_at_the_caller(&s.stack, "hrtimer_nanosleep", &ctx);
    }
    // Two callers of vfs_read.
    let mix = common::json(dir, &format!("{method}-mix.json"));
    let tid = mix["tid"].as_u64().expect("tid") as u32;
    let (reads, preads) = (
        mix["reads"].as_u64().expect("reads") as usize,
        mix["preads"].as_u64().expect("preads") as usize,
    );
    let vfs_read = capture.id("vfs_read");
    let worker: Vec<&dtcap::Slow> = capture
        .slow
        .iter()
        .filter(|s| s.record.func == vfs_read && s.record.tid == tid)
        .collect();
    let by_read = |s: &&&dtcap::Slow| {
        s.stack
            .iter()
            .any(|f| f.starts_with("ksys_read+") || f.starts_with("__x64_sys_read+"))
    };
    let by_pread = |s: &&&dtcap::Slow| s.stack.iter().any(|f| f.contains("pread64"));
    let slow_reads = worker.iter().filter(by_read).count();
    let slow_preads = worker.iter().filter(by_pread).count();
    assert_eq!(
        slow_reads,
        reads,
        "{ctx}: every long read(2) is a slow call with the read path; stacks: {:?}",
        worker
            .iter()
            .take(3)
            .map(|s| names(&s.stack))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        slow_reads + slow_preads,
        worker.len(),
        "{ctx}: every slow call of the worker is one of the two callers"
    );
    assert!(
        slow_preads * 20 <= preads,
        "{ctx}: {slow_preads} of {preads} short preads slow"
    );
    for s in &worker {
        starts_at_the_caller(&s.stack, "vfs_read", &ctx);
    }
    // What `record --format json` said is what the summary holds, and every slow call of
    // any task is kept or counted lost.
    let said = common::json(dir, &format!("{method}.json"));
    let f = common::entry(&said["functions"], "name", "hrtimer_nanosleep");
    let counts = slow_counts(&capture, nsleep);
    assert_eq!(f["slow"]["kept"].as_u64(), Some(counts[0]), "{ctx}: {said}");
    let slow_records = capture
        .of("hrtimer_nanosleep")
        .iter()
        .filter(|r| r.duration_ns >= threshold)
        .count() as u64;
    assert_eq!(
        counts.iter().sum::<u64>(),
        slow_records,
        "{ctx}: kept, ring full, over the limit {counts:?} against the slow records"
    );
    bounded(dir, method, &ctx);
    format!(
        "{ctx}: nanosleep slow calls kept, ring full, over the limit {counts:?}; stack {}; \
         read stack {}",
        names(&slept[0].stack),
        worker
            .iter()
            .find(|s| by_read(s))
            .map_or(String::new(), |s| names(&s.stack))
    )
}

/// Every call slow, at most 300 kept: the counts add up to the slow calls in the records.
fn bounded(dir: &std::path::Path, method: &str, ctx: &str) {
    let name = format!("{method}-bounded");
    let capture = dtcap::read(&dir.join(format!("{name}.dtcap")));
    copied_whole(&capture, ctx);
    let id = capture.id("vfs_read");
    let threshold = capture.meta["slow"]["threshold_ns"]
        .as_u64()
        .expect("meta.slow");
    let slow_records = capture
        .of("vfs_read")
        .iter()
        .filter(|r| r.duration_ns >= threshold)
        .count() as u64;
    let [kept, ring_full, over_limit] = slow_counts(&capture, id);
    let counters = &capture.summary.as_ref().expect("summary")["counters"][id.to_string()];
    let dropped = counters["ring_full"].as_u64().unwrap_or(0);
    assert_eq!(dropped, 0, "{ctx}: records dropped: {counters}");
    assert_eq!(
        kept + ring_full + over_limit,
        slow_records,
        "{ctx}: kept {kept} + ring full {ring_full} + over the limit {over_limit} against \
         {slow_records} slow records"
    );
    assert!(
        kept <= 300 && over_limit > 0,
        "{ctx}: {kept} kept, {over_limit} over"
    );
    let in_capture = capture.slow.iter().filter(|s| s.record.func == id).count() as u64;
    assert_eq!(in_capture, kept, "{ctx}: slow calls in the capture");
    let said = common::json(dir, &format!("{name}.json"));
    let f = common::entry(&said["functions"], "name", "vfs_read");
    assert_eq!(
        ["kept", "ring_full", "over_limit"].map(|k| f["slow"][k].as_u64().unwrap_or(0)),
        [kept, ring_full, over_limit],
        "{ctx}: {said}"
    );
    let err = common::read(dir, &format!("{name}.err"));
    assert!(
        err.contains(&format!("{kept} kept, {} lost", ring_full + over_limit)),
        "{ctx}: the end of the run says what was lost:\n{err}"
    );
}

fn slow_calls(kernel: Kernel, methods: &[&str]) {
    let script = format!("{}{SCRIPT}", common::RECORDER_HELPERS).replace(
        "METHODS",
        &methods
            .iter()
            .map(|m| format!("one {m}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let outcome = common::boot_ok(common::guest(kernel, script, Duration::from_secs(900)));
    let dir = outcome.dir();
    let mut seen = BTreeMap::new();
    for m in methods {
        seen.insert(*m, check_method(dir, m, &outcome.kernel_release));
    }
    for line in seen.values() {
        eprintln!("{line}");
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_keeps_slow_calls_with_their_stacks_in_every_attach_method() {
    slow_calls(
        Kernel::DEBIAN_7_2,
        &["kprobe-session", "fsession", "fentry", "kprobe"],
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_keeps_slow_calls_with_their_stacks_under_kprobe_session_fentry_and_kprobe() {
    slow_calls(Kernel::DEBIAN_6_12, &["kprobe-session", "fentry", "kprobe"]);
}

/// The nanosleep path in the part of the screen below "stack of call": the syscall's entry
/// and do_syscall_64.
fn live_stack_shown(screen: &str) -> bool {
    let Some((_, stack)) = screen.split_once("stack of call") else {
        return false;
    };
    stack.contains("do_syscall_64") && stack.contains("nanosleep")
}

/// `live --slow` (default attach method) on a 160-column console, wide enough for the counts
/// line whole: `x` on the panel of `hrtimer_nanosleep`, called by a
/// loop of 1 ms nanosleeps and short pauses, opens its slow calls with the selected one's stack, and the line
/// above them counts what was kept and lost so far; `q` then ends the session, whose capture
/// holds the slow calls the screen counted.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_live_opens_the_slow_calls_of_a_panel_with_their_stacks() {
    // About 20 slow calls a second (the 1 ms sleeps and busybox's 0.2 s one): none is lost to
    // a full ring or to the per-function limit however long the screen takes.
    let script = "(while :; do damon-trace disturb-loop --work sleep --calls 5 > /dev/null; sleep 0.2; done) &
loop=$!
damon-trace live --func hrtimer_nanosleep --slow 500us --slow-max 100000 --no-calibrate \\
  --record /out/live.dtcap
rc=$?
kill $loop
damon-trace report /out/live.dtcap --format json > /out/live.json
exit $rc";
    let wait = Duration::from_secs(150);
    let steps = vec![
        KeyStep::when(
            "hrtimer_nanosleep with calls > 0",
            wait,
            |s| common::called(s, "hrtimer_nanosleep"),
            "x",
        ),
        KeyStep::when_fresh(
            "its slow calls with a stack and the counts of kept and lost",
            wait,
            |s| live_stack_shown(s) && s.contains("recorded") && s.contains("lost 0"),
            "q",
        ),
    ];
    let outcome = common::boot(
        common::guest(Kernel::DEBIAN_7_2, script, Duration::from_secs(300))
            .interactive(Interactive::script(40, 160, steps)),
    );
    let log = outcome.terminal.as_ref().expect("terminal log");
    let view = log.steps.get(1).map_or("", |s| s.screen.as_str());
    assert!(
        view.contains("slow calls of hrtimer_nanosleep") && live_stack_shown(view),
        "x did not show the slow calls with a stack; last screen:\n{}",
        log.screen()
    );
    assert!(
        view.contains("recorded") && view.contains("lost 0"),
        "no kept/lost counts while tracing:\n{view}"
    );
    assert_eq!(outcome.status, 0, "last screen:\n{}", log.screen());
    let capture = dtcap::read(&outcome.dir().join("live.dtcap"));
    let id = capture.id("hrtimer_nanosleep");
    let [kept, ring_full, over_limit] = slow_counts(&capture, id);
    assert!(kept > 0, "the capture keeps the slow calls");
    assert_eq!((ring_full, over_limit), (0, 0));
    let slow = capture.slow.iter().filter(|s| s.record.func == id).count() as u64;
    assert_eq!(slow, kept);
    copied_whole(&capture, &outcome.kernel_release);
    eprintln!(
        "{}: live kept {kept} slow calls; the view:\n{view}",
        outcome.kernel_release
    );
}
