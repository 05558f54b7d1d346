//! Leaving no trace, and ending well on signals: checked in a 7.2 guest against what the kernel
//! itself lists (every BPF program, map and link; kprobes; ftrace hooks; DAMON's sysfs) and
//! against the captures and the terminal left behind. `#[ignore]`d like every VM test.
use std::{fs, path::Path, time::Duration};

mod common;
use common::{
    DAMON_HELPERS, FOUR, assert_same_damon, assert_traced, auto_attach, function, json, read, u,
};
use damon_lab::{kernel::Kernel, vm::Screen};

/// Guest shell helpers. `snap NAME` saves the kernel's full BPF object listing (`doctor
/// --leftovers`: loads nothing) with its exit status and the kprobe and ftrace hook lists.
/// The kernel frees the maps of a closed program after an RCU grace period, so a listing right
/// after an exit may still show them: `snap` retries (up to 10 s) until no object of ours is
/// listed, and the host then compares the whole listing.
const HELPERS: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_cleanup_helpers.sh"));

/// The `bpf_objects` of a doctor JSON saved by `snap`.
fn objects(dir: &Path, name: &str) -> serde_json::Value {
    let doctor = json(dir, &format!("{name}.json"));
    let objects = doctor["bpf_objects"].clone();
    assert!(objects.is_object(), "{name}: no bpf_objects in {doctor}");
    assert!(
        objects.get("error").is_none(),
        "{name}: listing failed: {objects}"
    );
    objects
}

/// After `name`, the kernel lists exactly the objects it listed before (no new program, map
/// or link: ids are never reused, so a new object cannot hide), and neither kprobes nor
/// ftrace hooks mention the four functions.
fn assert_as_before(dir: &Path, before: &serde_json::Value, name: &str) {
    let after = objects(dir, name);
    assert_eq!(
        status(dir, &format!("{name}.rc")),
        0,
        "`doctor --leftovers` after {name}: {after}"
    );
    assert_eq!(
        &after, before,
        "after {name}, the kernel's BPF objects differ from before"
    );
    for ext in ["kprobes", "ftrace"] {
        let file = format!("{name}.{ext}");
        let text = fs::read_to_string(dir.join(&file)).expect(&file);
        for f in FOUR {
            assert!(!text.contains(f), "{f} still hooked after {name}:\n{text}");
        }
    }
}

fn status(dir: &Path, name: &str) -> i32 {
    read(dir, name)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One boot: `record` ending normally, failing at runtime after attaching (its capture's
/// filesystem fills up), SIGKILLed (fentry and kprobe), ended by SIGINT, SIGTERM and SIGHUP,
/// and `serve` SIGKILLed each leave the kernel's BPF objects, kprobes and ftrace hooks as they
/// were; `doctor` names a running recorder's objects and its pid; SIGINT, SIGTERM and SIGHUP
/// end `record` with status 0 and a complete capture whose `end_reason` names the signal
/// (`interrupted`, `terminated`, `terminated`); SIGKILL, sent at a moment unrelated to the
/// recorder's flushes, leaves a capture flushed about once a second up to the kill and readable
/// to its last flush before it (on the guest's clock, [`common::assert_sigkill_loss`]).
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_record_and_serve_leave_no_bpf_object_and_end_well_on_signals() {
    let capture_helpers = common::capture_helpers();
    let cmd = format!(
        "{HELPERS}{capture_helpers}{}",
        damon_lab::script::without_header(include_str!("scripts/vm_cleanup_record_and_serve.sh"))
    );
    let outcome = common::run_script(Kernel::DEBIAN_7_2, cmd, Duration::from_secs(720));
    let dir = outcome.dir();

    let before = objects(dir, "before");
    println!("kernel BPF objects before: {before}");

    // (1) A normal run.
    assert_eq!(status(dir, "normal.rc"), 0, "{}", read(dir, "normal.err"));
    assert_as_before(dir, &before, "after-normal");

    // (2) ENOSPC while writing the capture: status 1, one line with the cause, nothing left.
    let err = read(dir, "full.err");
    assert_eq!(status(dir, "full.rc"), 1, "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "one error line expected:\n{err}");
    assert!(
        err.trim_end().ends_with(errors[0])
            && errors[0].starts_with("damon-trace: error: ")
            && errors[0].contains("No space left on device"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    println!("--- record on a full filesystem (status 1) ---\n{err}");
    // It failed after attaching: the attach lines came first.
    assert!(err.contains("lock_timer_base"), "{err}");
    assert_as_before(dir, &before, "after-full");

    // (3) SIGKILLed recorders: doctor saw their objects and holder while they ran; after the
    // kill, nothing is left and the capture reads back up to its last chunk.
    for attach in ["fentry", "kprobe"] {
        let during = json(dir, &format!("during-{attach}.json"));
        let pid = read(dir, &format!("during-{attach}.pid"));
        let left = common::entry(&during["checks"], "name", "leftovers");
        assert_eq!(left["level"], "warn", "{left}");
        // The full doctor: the function can still be traced (status 0); `--leftovers`: an
        // object of ours is loaded (status 1).
        let want = if attach == "fentry" { 0 } else { 1 };
        assert_eq!(status(dir, &format!("during-{attach}.rc")), want, "{left}");
        let found = left["found"].as_str().expect("found");
        println!("doctor while a {attach} recorder runs: {found}");
        assert!(
            found.contains(&format!("pid {} (damon-trace)", pid.trim())),
            "{found}"
        );
        let ours = &during["bpf_objects"];
        let count = |kind: &str| {
            ours[kind]
                .as_array()
                .expect(kind)
                .iter()
                .filter(|o| o["ours"] == true)
                .count()
        };
        // lock_timer_base: an entry and an exit program, each with a link; plus the
        // damon_aggregated tracepoint program (interval boundaries) and its link; seventeen maps
        // (EVENTS, COUNTERS, STAMPS, AGGR_LAST, NODE_PFNS, kernel mode's HIST and HSTATS,
        // one entry each in stream mode, doctor's 5-slot SESSION_PROBE, aya-log's AYA_LOGS,
        // one page without --debug-probes, the disturbance counters' SESSION_SNAPS and
        // DISTURB_SCRATCH, kernel mode's disturbed-call DISTURBED_HIST and DISTURBED_STATS,
        // one entry each unless kernel mode measures disturbance, the time breakdown's
        // TASK_CLOCKS, one entry without --disturbance, its per-CPU IRQ_CLOCK of one entry,
        // and --slow's SLOW_EVENTS and
        // SLOW_COUNTERS, one page and one entry without it: aya creates every map of the
        // object, so the benchmark's stamp floor keeps its stamps in STAMPS rather than a map of
        // its own). The sched_switch program, and on a kernel without IRQ time accounting the
        // interrupt tracepoints' programs, are loaded only with --disturbance.
        assert_eq!(
            (count("programs"), count("maps"), count("links")),
            (3, 17, 3),
            "{attach}: {ours}"
        );
        let types: Vec<&str> = ours["programs"]
            .as_array()
            .expect("programs")
            .iter()
            .filter(|o| o["ours"] == true && o["name"] != "damon_aggregate")
            .filter_map(|o| o["type"].as_str())
            .collect();
        let want = if attach == "fentry" {
            "tracing"
        } else {
            "kprobe"
        };
        assert!(types.iter().all(|t| *t == want), "{attach}: {types:?}");

        assert_eq!(status(dir, &format!("killed-{attach}.rc")), 137);
        assert_eq!(status(dir, &format!("killed-{attach}-report.rc")), 0);
        let killed = common::assert_killed_timer_recorder(
            dir,
            &format!("killed-{attach}"),
            &format!("SIGKILLed {attach} recorder"),
        );
        let timer = function(&killed, "lock_timer_base");
        println!(
            "SIGKILLed {attach} recorder: {} records read back, warnings {}",
            u(timer, "count"),
            killed["warnings"]
        );
        assert!(
            killed["warnings"].as_array().is_some_and(|w| w
                .iter()
                .any(|w| w.as_str().is_some_and(|s| s.contains("incomplete")))),
            "the report must say the capture is incomplete: {killed}"
        );
        assert_as_before(dir, &before, &format!("after-killed-{attach}"));
    }

    // (4) serve, SIGKILLed after answering a scrape.
    assert!(
        read(dir, "serve.txt").contains("damon_trace_calls_total"),
        "serve never answered"
    );
    assert_eq!(status(dir, "serve.rc"), 137);
    assert_as_before(dir, &before, "after-serve");

    // SIGINT, SIGTERM and SIGHUP: status 0, a complete capture that says why it ended, and
    // nothing left in the kernel.
    for (sig, reason) in [
        ("INT", "interrupted"),
        ("TERM", "terminated"),
        ("HUP", "terminated"),
    ] {
        assert_eq!(
            status(dir, &format!("{sig}.rc")),
            0,
            "{}",
            read(dir, &format!("{sig}.err"))
        );
        let report = json(dir, &format!("{sig}.json"));
        assert_eq!(report["meta"]["complete"], true, "{sig}: {report}");
        assert_eq!(report["meta"]["end_reason"], reason, "{sig}: {report}");
        assert!(u(&report["meta"], "duration_ns") < 60_000_000_000);
        assert_traced(
            function(&report, "lock_timer_base"),
            auto_attach(&Kernel::DEBIAN_7_2, "lock_timer_base", "stream"),
        );
        assert_as_before(dir, &before, &format!("after-{sig}"));
    }

    for (file, name, what) in [
        ("ftrace-off.json", "ftrace", "ftrace_enabled is 0"),
        ("kprobes-off.json", "kprobes", "kprobes/enabled is 0"),
    ] {
        let d = json(dir, file);
        let c = common::entry(&d["checks"], "name", name);
        assert_eq!(c["level"], "warn", "{c}");
        common::assert_says(c, "found", what);
    }
}

/// `scenario migrate-hot` over a DAMON state someone left (a stopped kdamond configured with a
/// context, a target region and a scheme, see [`DAMON_HELPERS`], and DAMON_STAT on): SIGKILL
/// (its guardian restores), SIGTERM, SIGINT and SIGHUP (it restores itself, exit 128 + the
/// signal) each leave every file under DAMON's sysfs and DAMON_STAT as before and no workload;
/// a scenario killed together with its guardian leaves a configuration that `doctor` reports.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_scenario_restores_damon_after_sigkill_sigterm_sigint_and_sighup() {
    let cmd = format!(
        "{DAMON_HELPERS}{}",
        damon_lab::script::without_header(include_str!("scripts/vm_cleanup_scenario_restores.sh"))
    );
    let outcome = common::run_script(Kernel::DEBIAN_7_2, cmd, Duration::from_secs(600));
    let dir = outcome.dir();
    let before = read(dir, "before.txt");
    common::assert_left_kdamond(
        &before,
        "kdamonds/0/contexts/0/monitoring_attrs/intervals/sample_us:7000",
    );
    if dir.join("damon_stat.txt").exists() {
        assert!(before.contains("damon_stat=Y"), "{before}");
    }
    for (sig, rc) in [("KILL", 137), ("TERM", 143), ("INT", 130), ("HUP", 129)] {
        let err = read(dir, &format!("{sig}.err"));
        assert_eq!(status(dir, &format!("{sig}.rc")), rc, "{sig}: {err}");
        assert!(
            err.contains("kdamond on for"),
            "{sig}: the scenario had not started DAMON: {err}"
        );
        let after = read(dir, &format!("{sig}.after.txt"));
        assert_same_damon(&format!("SIG{sig}, stderr:\n{err}\n"), &before, &after);
        let procs = read(dir, &format!("{sig}.procs"));
        assert!(procs.is_empty(), "SIG{sig}: left running:\n{procs}");
        println!("--- scenario SIG{sig}: status {rc}, stderr ---\n{err}");
        if sig == "KILL" {
            assert!(err.contains("its guardian restored"), "{err}");
        } else {
            assert!(err.contains("DAMON state restored"), "{sig}: {err}");
        }
    }
    assert!(
        !read(dir, "guardian.pid").trim().is_empty(),
        "no damon-guardian process while the scenario ran"
    );
    let stale = read(dir, "stale.procs");
    assert!(stale.is_empty(), "still running after SIGKILL:\n{stale}");
    let check = |file: &str| {
        let d = json(dir, file);
        common::entry(&d["checks"], "name", "scenario").clone()
    };
    println!("DAMON state saved and restored each time:\n{before}");
    let stale = check("stale-doctor.json");
    println!("doctor after scenario and guardian were SIGKILLed: {stale}");
    assert_eq!(stale["level"], "warn", "{stale}");
    common::assert_says(&stale, "found", "did not finish");
    common::assert_says(&stale, "remedy", "nr_kdamonds");
    assert_eq!(check("clean-doctor.json")["level"], "ok");
}

/// Where `marker` (printed by the guest shell) first appears in the raw console.
fn marker_at(raw: &[u8], marker: &str) -> usize {
    raw.windows(marker.len())
        .position(|w| w == marker.as_bytes())
        .unwrap_or_else(|| panic!("{marker} not on the console"))
}

/// `live --record` on the serial console, quit with `q` and ended by SIGINT, SIGTERM, SIGHUP
/// and SIGKILL. Each ending leaves the kernel's BPF objects (programs, maps, links), kprobes
/// and ftrace hooks as they were before the first run. `q`, SIGINT, SIGTERM and SIGHUP end it
/// with status 0, a complete capture whose `end_reason` says why (`quit`, `interrupted`,
/// `terminated`, `terminated`), and the terminal restored (alternate screen left, cursor
/// shown, `stty` settings as before); SIGKILL, sent at a moment unrelated to the flushes,
/// leaves a capture flushed about once a second up to the kill and readable to its last flush
/// before it ([`common::assert_sigkill_loss`]).
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_live_record_ends_well_on_q_sigint_sigterm_sighup_and_sigkill() {
    let capture_helpers = common::capture_helpers();
    let cmd = format!(
        "{HELPERS}{capture_helpers}{}",
        damon_lab::script::without_header(include_str!("scripts/vm_cleanup_live_record.sh"))
    );
    let outcome = common::run_live(
        cmd,
        Duration::from_secs(600),
        ("lock_timer_base with calls > 0", Duration::from_secs(240)),
        |screen| common::called(screen, "lock_timer_base"),
    );
    let log = outcome.terminal.as_ref().expect("terminal log");
    assert_eq!(outcome.status, 0, "last screen:\n{}", log.screen());
    let dir = outcome.dir();
    let before = objects(dir, "live-before");
    println!("kernel BPF objects before live: {before}");
    let stty_before = read(dir, "stty-before.txt");
    for (sig, reason) in [
        ("q", "quit"),
        ("INT", "interrupted"),
        ("TERM", "terminated"),
        ("HUP", "terminated"),
    ] {
        let err = read(dir, &format!("live-{sig}.err"));
        assert_eq!(status(dir, &format!("live-{sig}.rc")), 0, "{sig}: {err}");
        let (start, end) = (
            marker_at(&log.raw, &format!("@@start-{sig}@@")),
            marker_at(&log.raw, &format!("@@after-{sig}@@")),
        );
        let drawn = &log.raw[start..end];
        assert!(
            marker_at(drawn, "\x1b[?1049h") > 0,
            "{sig}: live never entered the alternate screen"
        );
        let mut screen = Screen::new(log.rows, log.cols);
        screen.feed(&log.raw[..end]);
        assert!(
            !screen.alternate_screen() && !screen.cursor_hidden(),
            "{sig} left the terminal in full-screen mode:\n{}",
            screen.text()
        );
        assert!(
            marker_at(drawn, "lock_timer_base") > 0,
            "{sig}: the live screen never showed the function"
        );
        assert_eq!(
            read(dir, &format!("stty-after-{sig}.txt")),
            stty_before,
            "{sig}: terminal settings (raw mode) not restored"
        );
        let report = json(dir, &format!("live-{sig}.json"));
        assert_eq!(report["meta"]["complete"], true, "{sig}: {report}");
        assert_eq!(report["meta"]["end_reason"], reason, "{sig}: {report}");
        assert_traced(
            function(&report, "lock_timer_base"),
            auto_attach(&Kernel::DEBIAN_7_2, "lock_timer_base", "stream"),
        );
        assert_as_before(dir, &before, &format!("after-{sig}"));
    }
    assert_eq!(status(dir, "live-KILL.rc"), 137);
    common::assert_killed_timer_recorder(dir, "live-KILL", "SIGKILLed live --record");
    assert_as_before(dir, &before, "after-KILL");
}
